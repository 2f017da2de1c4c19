# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The exporter: drop-ins into nova source edits, and patch files."""

import os
import subprocess
import textwrap

import fixtures
import testtools

from nova_fixes.cmd import main as cli
from nova_fixes import errors
from nova_fixes.export import patch
from nova_fixes.export import source
from nova_fixes.fixes import bug_1848343
from nova_fixes import registry

NOVA_MODULE = textwrap.dedent('''\
    """A nova module."""

    import collections

    from oslo_log import log as logging

    from nova import exception
    from nova import objects

    LOG = logging.getLogger(__name__)


    def helper_of_nova():
        return 1


    def revert(context, migration):
        """Revert as nova does."""
        return migration


    class Client(object):

        def move(self, context, source_uuid, target_uuid):
            """Move allocations."""
            return source_uuid

        def keep(self):
            return None
    ''')

DROPIN_MODULE = textwrap.dedent('''\
    """Drop-ins for nova/fake.py."""

    import time

    from oslo_log import log as logging

    from nova import exception
    from nova.fake import helper_of_nova

    LOG = logging.getLogger(__name__)
    THRESHOLD = 3
    _revert_as_nova_does = None


    def move(self, context, source_uuid, target_uuid, required=False):
        """Replaces Client.move (bug 1).

        Move allocations, maybe requiring the target.
        """
        if required:
            return _check(self, time.time())
        return self._move_anywhere(
            context, source_uuid, target_uuid)


    def _check(client, now):
        return now > THRESHOLD and helper_of_nova()


    def revert(context, migration):
        """Replaces revert (bug 1).

        Revert unless deleted.
        """
        return _revert_as_nova_does(context, migration)


    def keep(self):
        """Replaces Client.keep (bug 1).

        Keep nothing.
        """
        raise exception.NotFound()


    def brand_new(context):
        """Added to nova.fake (bug 1).

        Something new.
        """
        return LOG
    ''')


class _Fixture(fixtures.Fixture):
    """nova_fixes.fake: a drop-in module the exporter reads."""

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.root, 'fake.py')
        with open(self.path, 'w') as f:
            f.write(DROPIN_MODULE)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_fixes.export.source.PACKAGE_DIR', self.root))


def _fix(*targets):
    return registry.Fix(bug=1, title='t', open_upstream=True, upstream='',
                        targets=targets, patch=PLAN)


class ExportSourceTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dropins = self.useFixture(_Fixture())
        self.files = {'nova/fake.py': NOVA_MODULE}

    def _export(self, *targets):
        return source.export_fix_code(_fix(*targets), self.files, '2026.2')[
            'nova/fake.py']

    def test_delegating_drop_in_keeps_the_original_under_a_new_name(self):
        text = self._export(registry.Target(
            'nova.fake:Client.move', 'nova_fixes.fake:move',
            original_as='_move_anywhere'))
        self.assertIn('    def _move_anywhere(self, context, source_uuid, '
                      'target_uuid):\n        """Move allocations."""',
                      text)
        self.assertIn('    def move(self, context, source_uuid, target_uuid, '
                      'required=False):', text)
        self.assertIn('return self._move_anywhere(\n', text)
        # The provenance sentence is dropped from the docstring.
        self.assertIn('"""Move allocations, maybe requiring the target.',
                      text)
        self.assertNotIn('Replaces', text)
        # The helper it uses is module level, before the class; a name of
        # this very module needs no import; the constant it uses comes
        # along.
        self.assertLess(text.index('def _check(client, now)'),
                        text.index('class Client'))
        self.assertIn('return now > THRESHOLD and helper_of_nova()', text)
        self.assertIn('THRESHOLD = 3', text)
        self.assertNotIn('_revert_as_nova_does', text)
        # time is added among the standard library imports.
        self.assertIn('import collections\nimport time\n', text)
        compile(text, 'fake.py', 'exec')

    def test_helper_an_earlier_patch_added_is_used_as_it_is(self):
        # A first fix's patch added _check; a second fix using it adds
        # nothing again.
        move = registry.Target('nova.fake:Client.move',
                               'nova_fixes.fake:move',
                               original_as='_move_anywhere')
        self.files['nova/fake.py'] = self._export(move)
        self.assertEqual(1, self.files['nova/fake.py'].count(
            'def _check(client, now)'))
        with open(self.dropins.path, 'a') as f:
            f.write('\n\ndef checked(client):\n'
                    '    """Added to nova.fake (bug 2).\n\n'
                    '    Check.\n    """\n'
                    '    return _check(client, 0)\n')
        text = self._export(registry.Target(
            'nova.fake:checked', 'nova_fixes.fake:checked', new=True))
        self.assertEqual(1, text.count('def _check(client, now)'))
        self.assertIn('return _check(client, 0)', text)
        compile(text, 'fake.py', 'exec')

    def test_a_constant_after_a_helper_def_has_two_blank_lines(self):
        # As pycodestyle wants (E305): nova's flake8 found the constant
        # of a helper right after another helper's body.
        with open(self.dropins.path, 'a') as f:
            f.write('\n\ndef checked(client):\n'
                    '    """Added to nova.fake (bug 1).\n\n'
                    '    Check.\n    """\n'
                    '    return _check(client, LIMIT)\n'
                    '\n\nLIMIT = 2\n')
        text = self._export(
            registry.Target('nova.fake:Client.move', 'nova_fixes.fake:move',
                            original_as='_move_anywhere'),
            registry.Target('nova.fake:checked', 'nova_fixes.fake:checked',
                            new=True))
        self.assertIn('helper_of_nova()\n\n\nLIMIT = 2\n', text)
        compile(text, 'fake.py', 'exec')

    def test_helper_two_targets_use_is_added_once(self):
        with open(self.dropins.path, 'a') as f:
            f.write('\n\ndef checked(client):\n'
                    '    """Added to nova.fake (bug 1).\n\n'
                    '    Check.\n    """\n'
                    '    return _check(client, 0)\n')
        text = self._export(
            registry.Target('nova.fake:Client.move', 'nova_fixes.fake:move',
                            original_as='_move_anywhere'),
            registry.Target('nova.fake:checked', 'nova_fixes.fake:checked',
                            new=True))
        self.assertEqual(1, text.count('def _check(client, now)'))
        compile(text, 'fake.py', 'exec')

    def test_helper_nova_defines_otherwise_is_refused(self):
        self.files['nova/fake.py'] = NOVA_MODULE.replace(
            'def helper_of_nova():',
            'def _check(client, now):\n    return 2\n\n\n'
            'def helper_of_nova():')
        e = self.assertRaises(errors.ExportError, self._export,
                              registry.Target('nova.fake:Client.move',
                                              'nova_fixes.fake:move',
                                              original_as='_move_anywhere'))
        self.assertIn('already defines _check', str(e))

    def test_module_level_delegating_drop_in(self):
        text = self._export(registry.Target(
            'nova.fake:revert', 'nova_fixes.fake:revert',
            original_as='_revert_as_nova_does'))
        self.assertIn(
            'def revert(context, migration):\n    """Revert unless deleted.'
            '\n    """\n    return _revert_as_nova_does(context, migration)'
            '\n\n\ndef _revert_as_nova_does(context, migration):\n'
            '    """Revert as nova does."""', text)
        # The placeholder the drop-in module binds the original to is not
        # exported.
        self.assertNotIn('_revert_as_nova_does = None', text)
        compile(text, 'fake.py', 'exec')

    def test_drop_in_naming_the_nova_module_itself_is_refused(self):
        with open(self.dropins.path, 'a') as f:
            f.write('\n\nfrom nova import fake  # noqa\n\n\n'
                    'def other_new(context):\n    return fake.x\n')
        e = self.assertRaises(errors.ExportError, self._export,
                              registry.Target('nova.fake:other_new',
                                              'nova_fixes.fake:other_new',
                                              new=True))
        self.assertIn("uses fake (nova.fake); in nova.fake it must use "
                      "nova's own names", str(e))

    def test_replacing_drop_in_replaces_the_function(self):
        text = self._export(registry.Target(
            'nova.fake:Client.keep', 'nova_fixes.fake:keep'))
        self.assertIn('    def keep(self):\n        """Keep nothing.', text)
        self.assertNotIn('return None', text)
        self.assertEqual(1, text.count('def keep('))

    def test_new_function_is_appended(self):
        text = self._export(registry.Target(
            'nova.fake:brand_new', 'nova_fixes.fake:brand_new', new=True))
        self.assertTrue(text.endswith(
            'def brand_new(context):\n    """Something new.\n    """\n'
            '    return LOG\n'))

    def test_new_function_after_its_kin(self):
        text = self._export(registry.Target(
            'nova.fake:brand_new', 'nova_fixes.fake:brand_new', new=True,
            after='helper_of_nova'))
        self.assertIn('def helper_of_nova():\n    return 1\n\n\n'
                      'def brand_new(context):', text)
        self.assertIn('    return LOG\n\n\ndef revert(', text)
        compile(text, 'fake.py', 'exec')
        e = self.assertRaises(errors.ExportError, self._export,
                              registry.Target('nova.fake:brand_new',
                                              'nova_fixes.fake:brand_new',
                                              new=True, after='Nothing'))
        self.assertIn('defines no Nothing to put brand_new after', str(e))

    def test_one_change_of_a_fix_and_what_its_code_uses(self):
        move = registry.Target('nova.fake:Client.move',
                               'nova_fixes.fake:move',
                               original_as='_move_anywhere')
        new = registry.Target('nova.fake:brand_new',
                              'nova_fixes.fake:brand_new', new=True)
        uses = set()
        text = source.export_fix_code(_fix(move, new), self.files, '2026.2',
                                      only={new.path}, uses=uses)[
                                          'nova/fake.py']
        self.assertIn('def brand_new(context)', text)
        self.assertNotIn('_move_anywhere', text)
        self.assertIn('nova.fake:LOG', uses)
        uses = set()
        source.export_fix_code(_fix(move, new), self.files, '2026.2',
                               only={move.path}, uses=uses)
        # self.<name> in a method of Client.
        self.assertIn('nova.fake:Client._move_anywhere', uses)

    def test_new_function_using_another_new_target(self):
        # A target the fix adds is not a helper to add a second time.
        with open(self.dropins.path, 'a') as f:
            f.write('\n\ndef also_new(context):\n'
                    '    return brand_new(context)\n')
        text = self._export(
            registry.Target('nova.fake:brand_new',
                            'nova_fixes.fake:brand_new', new=True),
            registry.Target('nova.fake:also_new',
                            'nova_fixes.fake:also_new', new=True))
        self.assertEqual(1, text.count('def brand_new('))
        self.assertIn('def also_new(context):\n    return brand_new(', text)
        compile(text, 'fake.py', 'exec')

    def test_new_target_that_nova_has_is_refused(self):
        e = self.assertRaises(errors.ExportError, self._export,
                              registry.Target('nova.fake:Client.keep',
                                              'nova_fixes.fake:keep',
                                              new=True))
        self.assertIn('already defines Client.keep', str(e))

    def test_missing_target_is_refused(self):
        self.files['nova/fake.py'] = NOVA_MODULE.replace('def keep',
                                                         'def kept')
        e = self.assertRaises(errors.ExportError, self._export,
                              registry.Target('nova.fake:Client.keep',
                                              'nova_fixes.fake:keep'))
        self.assertIn('defines no Client.keep', str(e))

    def test_lines_too_long_for_nova_are_refused(self):
        # 76 columns in the drop-in module, 80 as a method in nova.
        with open(self.dropins.path, 'a') as f:
            f.write('\n\ndef long_one(self):\n    return "%s"\n' % ('y' * 63))
        e = self.assertRaises(errors.ExportError, self._export,
                              registry.Target('nova.fake:Client.long_one',
                                              'nova_fixes.fake:long_one',
                                              new=True))
        self.assertIn('line 32 of nova/fake.py would be 80 columns long',
                      str(e))


STAGED_MODULE = textwrap.dedent('''\
    """Drop-ins for nova/fake.py."""

    from nova import exception


    def delete(self, context, instance):
        """Replaces Client.delete (bug 1).

        Delete, putting the state back when it fails.

        A delete left behind is sent again (_left_behind).

        Another copy is deleted too (_copies).
        """
        state = instance.state
        if _left_behind(instance):
            # Sent again.
            instance.state = None
        copies = _copies(instance)
        try:
            try:
                result = self._delete_once(context, instance)
            except exception.Conflict:
                result = _again(self, context, instance)
        except Exception:
            _put_back(instance, state)
            raise
        for copy in copies:
            copy.destroy()
        return result


    def _left_behind(instance):
        return instance.old


    def _copies(instance):
        return []


    def _again(client, context, instance):
        return client._delete_once(context, instance)


    def _put_back(instance, state):
        instance.state = state
    ''')

DELETE = registry.Target('nova.fake:Client.delete', 'nova_fixes.fake:delete',
                         original_as='_delete_once')


class StagedCodeTestCase(testtools.TestCase):
    """One function whose concerns are separate changes of its fix."""

    def setUp(self):
        super().setUp()
        self.dropins = self.useFixture(_Fixture())
        with open(self.dropins.path, 'w') as f:
            f.write(STAGED_MODULE)
        self.dropin = source.DropIn('nova_fixes.fake')
        self.node = self.dropin.node('delete')

    def test_without_leave_out_the_whole_function(self):
        text = self.dropin.code(self.node)
        self.assertIn('(_left_behind)', text)
        self.assertIn('except exception.Conflict:', text)

    def test_the_first_stage(self):
        text = self.dropin.code(self.node, ('_left_behind', '_copies',
                                            '_again'))
        self.assertEqual(textwrap.dedent('''\
            def delete(self, context, instance):
                """Delete, putting the state back when it fails.
                """
                state = instance.state
                try:
                    result = self._delete_once(context, instance)
                except Exception:
                    _put_back(instance, state)
                    raise
                return result
            '''), text)
        compile(text, 'fake.py', 'exec')

    def test_a_later_stage(self):
        text = self.dropin.code(self.node, ('_copies',))
        # The statement, its comment and its docstring paragraph stay.
        self.assertIn('A delete left behind is sent again', text)
        self.assertIn('    if _left_behind(instance):\n        # Sent again.'
                      '\n', text)
        # The inner try keeps its handler, and its indentation.
        self.assertIn('    try:\n        try:\n            result = self.'
                      '_delete_once(context, instance)\n        except '
                      'exception.Conflict:\n', text)
        # The variable only a left out statement assigns goes with the
        # statements using it.
        self.assertNotIn('copies', text)
        self.assertNotIn('copy', text)
        self.assertNotIn('\n\n\n', text)
        compile(text, 'fake.py', 'exec')

    def test_a_name_the_function_does_not_use_is_refused(self):
        e = self.assertRaises(errors.ExportError, self.dropin.code,
                              self.node, ('_copies', '_nothing'))
        self.assertIn('nova_fixes.fake.delete mentions no _nothing, which a '
                      'change of its fix brings in', str(e))

    def test_a_summary_naming_a_later_name_is_refused(self):
        with open(self.dropins.path, 'w') as f:
            f.write(STAGED_MODULE.replace(
                'Delete, putting the state back', 'Delete (_copies)'))
        dropin = source.DropIn('nova_fixes.fake')
        e = self.assertRaises(errors.ExportError, dropin.code,
                              dropin.node('delete'), ('_copies',))
        self.assertIn('the summary or the last line of its docstring names '
                      '_copies', str(e))

    def test_each_change_writes_its_stage(self):
        fix = _fix(DELETE)
        files = {'nova/fake.py': NOVA_MODULE.replace(
            '    def keep(self):',
            '    def delete(self, context, instance):\n'
            '        """Delete as nova does."""\n'
            '        return instance\n\n'
            '    def keep(self):')}
        uses = set()
        first = source.export_fix_code(
            fix, files, '2026.2', only={DELETE.path}, uses=uses,
            leave_out={DELETE.path: {'_left_behind', '_copies', '_again'}})[
                'nova/fake.py']
        self.assertIn('def _put_back(instance, state)', first)
        self.assertNotIn('def _left_behind', first)
        self.assertNotIn('nova.fake:_left_behind', uses)
        self.assertIn('nova.fake:_put_back', uses)
        self.assertEqual(1, first.count('def _delete_once('))
        # The next change writes the function again, with its statements
        # and the helper they use, and renames nova's original no further.
        second = source.export_fix_code(
            fix, {'nova/fake.py': first}, '2026.2', only={DELETE.path},
            leave_out={DELETE.path: {'_copies', '_again'}},
            grown={DELETE.path})['nova/fake.py']
        self.assertEqual(1, second.count('def _delete_once('))
        self.assertEqual(1, second.count('    def delete('))
        self.assertEqual(1, second.count('def _put_back('))
        self.assertIn('def _left_behind(instance)', second)
        self.assertIn('        if _left_behind(instance):', second)
        self.assertNotIn('_again', second)
        last = source.export_fix_code(
            fix, {'nova/fake.py': second}, '2026.2', only={DELETE.path},
            grown={DELETE.path})['nova/fake.py']
        # The last stage is the drop-in as it is, as a whole export has it.
        self.assertEqual(source.export_fix_code(fix, files, '2026.2')[
            'nova/fake.py'].count('_again'), last.count('_again'))
        self.assertIn('            except exception.Conflict:\n', last)
        compile(last, 'fake.py', 'exec')

    def test_growing_what_nova_does_not_have_is_refused(self):
        e = self.assertRaises(
            errors.ExportError, source.export_fix_code, _fix(DELETE),
            self.files_without_delete(), '2026.2', only={DELETE.path},
            grown={DELETE.path})
        self.assertIn('defines no Client.delete for a later change of its '
                      'fix to grow', str(e))

    def files_without_delete(self):
        return {'nova/fake.py': NOVA_MODULE}


class PeriodicExportTestCase(testtools.TestCase):

    def test_the_real_orphan_task_becomes_a_decorated_method(self):
        dropin = source.DropIn('nova_fixes.nova.compute.manager')
        node, decorator = dropin.periodic('orphan_instances_periodic_task')
        self.assertEqual('_cleanup_orphan_instances', node.name)
        self.assertEqual(
            '@periodic_task.periodic_task(\n'
            '    spacing=CONF.orphan_instances.poll_interval or -1,\n'
            '    run_immediately=False)\n', decorator)


#: nova's test_bug_1679750 (the same from 26.2.2 to 34.0.0), the tests'
#: bodies abridged.
NOVA_TEST_1679750 = '''\
class TestLocalDeleteAllocations(test.TestCase,
                                 integrated_helpers.InstanceHelperMixin):

    def test_local_delete_removes_allocations_after_compute_restart(self):
        """Tests that allocations are removed after a local delete.

        This tests the scenario where a server is local deleted (because the
        compute host is down) and we want to make sure that its allocations
        have been cleaned up once the nova-compute service restarts.

        In this scenario we conditionally use the PlacementFixture to simulate
        the case that nova-api isn't configured to talk to placement, thus we
        need to manage the placement database independently.
        """
        with func_fixtures.PlacementFixture(
                conf_fixture=placement_config, db=False,
                register_opts=False) as placement:
            compute = self.start_service('compute')
            placement_api = placement.api
            resp = placement_api.get('/resource_providers')
            rp_uuid = resp.body['resource_providers'][0]['uuid']
            usages_before = self._get_usages(placement_api, rp_uuid)

            # Force-down compute to trigger local delete.
            compute.stop()

        # Delete the server (will be a local delete because compute is down).
        self._delete_server(server)

        with func_fixtures.PlacementFixture(
                conf_fixture=placement_config, db=False,
                register_opts=False) as placement:
            placement_api = placement.api
            # Assert usages are still non-zero.
            usages_during = self._get_usages(placement_api, rp_uuid)
            for usage in usages_during.values():
                self.assertNotEqual(0, usage)

            # Start the compute service again. Before it comes up, it will
            # call the update_available_resource code in the ResourceTracker
            # which is what "heals" the allocations for the deleted instance.
            compute.start()

            # Get the allocations again to check against the original.
            usages_after = self._get_usages(placement_api, rp_uuid)

        # They should match.
        self.assertEqual(usages_before, usages_after)

    def test_local_delete_removes_allocations_from_api(self):
        """Tests that the compute API deletes allocations when the compute
        service on which the instance was running is down.
        """
        # Delete the server (will be a local delete because compute is down).
        self._delete_server(server)

        # Get the allocations again to make sure they were deleted.
        usages_after = self._get_usages(placement_api, rp_uuid)
'''


class NovaTestEditsTestCase(testtools.TestCase):

    FIXME_TEST = textwrap.dedent('''\
        class T(object):
            def _assert_no_allocations(self, server):
                for rp in self._get_all_providers():
                    allocations = self._get(rp)
                    # FIXME(someone): This is bug 1848343 where the
                    # allocations are reverted.
                    if rp['name'] == server['host']:
                        self.assertFlavorMatchesAllocation(
                            server['flavor'], server['id'], rp['uuid'])
                    else:
                        self.assertEqual({}, allocations,
                                         'Leaked allocations')
        ''')

    def test_flip_the_fixme(self):
        path = 'nova/tests/functional/regressions/test_bug_1848343.py'
        text = bug_1848343.flip_1848343_fixme({path: self.FIXME_TEST})[path]
        self.assertNotIn('FIXME', text)
        self.assertNotIn('assertFlavorMatchesAllocation', text)
        self.assertIn('            allocations = self._get(rp)\n'
                      '            self.assertEqual({}, allocations,\n'
                      "                             'Leaked allocations')\n",
                      text)

    def test_flip_refuses_a_test_without_the_fixme(self):
        path = 'nova/tests/functional/regressions/test_bug_1848343.py'
        e = self.assertRaises(
            errors.ExportError, bug_1848343.flip_1848343_fixme,
            {path: self.FIXME_TEST.replace('FIXME', 'NOTE')})
        self.assertIn('has no FIXME', str(e))

    CONFLICT_TEST = textwrap.dedent('''\
        class ConsumerGenerationConflictTest(object):
            def test_confirm_migrate_delete_alloc_on_source_fails(self):
                self._delete_server(server)
                allocations = self._get_allocations_by_server_uuid(
                    migrations[0]['uuid'])
                self.assertEqual(1, len(allocations))

            def test_revert_migrate_delete_dest_allocation_fails_due_to_\
conflict(self):
                allocations = self._get_allocations_by_server_uuid(m)
                self.assertEqual(1, len(allocations))

            def test_revert_resize_same_host_delete_dest_fails_due_to_conflict(
                    self):
                allocations = self._get_allocations_by_server_uuid(m)
                self.assertEqual(1, len(allocations))

            def test_live_migrate_drop_allocation_on_source_fails(self):
                self._delete_server(server)
                self.assertFlavorMatchesAllocation(self.flavor, migration_uuid,
                                                   source_rp_uuid)
        ''')

    def test_conflict_tests_expect_nothing_left_after_the_delete(self):
        path = 'nova/tests/functional/test_servers.py'
        text = bug_1848343.consumer_conflict_leaks(
            {path: self.CONFLICT_TEST})[path]
        self.assertEqual(3, text.count(
            '        # Deleting the server removes the allocations its '
            'migration held.\n'
            '        self.assertEqual(0, len(allocations))\n'))
        self.assertIn(
            '        self._delete_server(server)\n'
            '        # Deleting the server removes the allocations its '
            'migration held.\n'
            '        self.assertEqual(\n'
            '            {}, self._get_allocations_by_server_uuid('
            'migration_uuid))\n', text)
        self.assertNotIn('assertFlavorMatchesAllocation', text)

    def test_conflict_test_that_no_longer_asserts_the_leak_is_refused(self):
        path = 'nova/tests/functional/test_servers.py'
        e = self.assertRaises(
            errors.ExportError, bug_1848343.consumer_conflict_leaks,
            {path: self.CONFLICT_TEST.replace('assertEqual(1,',
                                              'assertEqual(2,', 1)})
        self.assertIn('test_confirm_migrate_delete_alloc_on_source_fails '
                      'does not end by asserting the leak', str(e))

    def test_required_keyword_added_to_the_revert_assertions(self):
        text = textwrap.dedent('''\
            def test(self):
                client.move_allocations.assert_called_once_with(
                    ctx, self.migration.uuid, self.instance.uuid)
                client.move_allocations.assert_called_once_with(
                    ctx, a, b, target_consumer_generation_required=True)
            ''')
        new = bug_1848343._add_required_keyword(text)
        self.assertIn('ctx, self.migration.uuid, self.instance.uuid,\n'
                      '        target_consumer_generation_required=True)',
                      new)
        self.assertEqual(2, new.count('target_consumer_generation_required'))

    TEST_1679750 = NOVA_TEST_1679750
    PATH_1679750 = 'nova/tests/functional/regressions/test_bug_1679750.py'
    OTHER_1679750 = '    def test_local_delete_removes_allocations_from_api'

    def test_local_delete_without_placement_is_refused_then_retried(self):
        text = bug_1848343.local_delete_after_compute_restart_is_retried(
            {self.PATH_1679750: self.TEST_1679750})[self.PATH_1679750]
        restart, other = text.split(self.OTHER_1679750)
        # The DELETE while nova-api cannot reach placement is refused and
        # leaves the server as it was.
        self.assertIn(
            '        # Delete the server (would be a local delete because '
            'compute is\n'
            '        # down). nova-api cannot delete the allocations, so it '
            'refuses the\n'
            '        # delete before it destroys anything.\n'
            "        response = self.api.api_delete('/servers/%s' % "
            "server['id'],\n"
            '                                       '
            'check_response_status=[503])\n'
            "        self.assertIn('The delete can be retried',\n"
            "                      response.body['serviceUnavailable']"
            "['message'])\n"
            "        server = self.api.get_server(server['id'])\n"
            "        self.assertEqual('ACTIVE', server['status'])\n"
            "        self.assertIsNone(server['OS-EXT-STS:task_state'])\n"
            '\n'
            '        with func_fixtures.PlacementFixture(\n', restart)
        # Once placement answers, after the usages are found still there
        # and before the compute restarts, the delete is retried and
        # removes them; the restart and the last assertion stay.
        self.assertIn(
            '                self.assertNotEqual(0, usage)\n'
            '\n'
            '            # Placement answers again: deleting the server, '
            'again locally,\n'
            '            # removes its allocations.\n'
            '            self._delete_server(server)\n'
            '            self.assertEqual(usages_before,\n'
            '                             self._get_usages(placement_api, '
            'rp_uuid))\n'
            '\n'
            '            # Start the compute service again.', restart)
        self.assertIn('none left.\n            compute.start()\n', restart)
        self.assertTrue(restart.endswith(
            '        # They should match.\n'
            '        self.assertEqual(usages_before, usages_after)\n\n'))
        self.assertEqual(1, restart.count('self._delete_server(server)'))
        self.assertIn('Tests that a local delete leaves no allocations '
                      'behind when\n        nova-api cannot reach placement.',
                      restart)
        self.assertNotIn('is what "heals"', restart)
        # The other test of the module, with a placement, is left alone.
        self.assertEqual(self.TEST_1679750.split(self.OTHER_1679750)[1],
                         other)

    def test_local_delete_test_that_reads_otherwise_is_refused(self):
        # The restart test no longer deletes the server between the two
        # placements (the other test of the module still does): nothing
        # is edited.
        text = self.TEST_1679750.replace(
            '        # Delete the server (will be a local delete because '
            'compute is down).\n'
            '        self._delete_server(server)\n\n'
            '        with func_fixtures', '        with func_fixtures', 1)
        e = self.assertRaises(
            errors.ExportError,
            bug_1848343.local_delete_after_compute_restart_is_retried,
            {self.PATH_1679750: text})
        self.assertIn('test_local_delete_removes_allocations_after_compute_'
                      'restart does not read as expected', str(e))
        self.assertIn('missing: # Delete the server (will be a local delete',
                      str(e))

    def test_local_delete_test_missing_is_refused(self):
        e = self.assertRaises(
            errors.ExportError,
            bug_1848343.local_delete_after_compute_restart_is_retried,
            {self.PATH_1679750:
             'class TestLocalDeleteAllocations(object):\n    pass\n'})
        self.assertIn('has no TestLocalDeleteAllocations.test_local_delete_'
                      'removes_allocations_after_compute_restart', str(e))


def _pci_removed_test(name, periodic=True):
    """A test of nova's PCI placement reporting, as 2025.1 on reads it."""
    head = ('    def %s(self):\n'
            '        self._delete_server(server)\n'
            '\n'
            '        # The allocation is removed from placement\n'
            '        compute1_expected_placement_view["usages"] = {\n'
            '            "0000:81:00.0": {\n'
            '                self.PF_RC: 0,\n'
            '            }\n'
            '        }\n'
            '        compute1_expected_placement_view["allocations"].pop('
            'server["id"])\n'
            '        self.assert_placement_pci_view(\n'
            '            "compute1", **compute1_expected_placement_view)\n'
            '\n' % name)
    pops = ''.join('        compute1_expected_placement_view["%s"].pop('
                   '"0000:81:00.0")\n' % key
                   for key in ('inventories', 'traits', 'usages'))
    if periodic:
        middle = ('        # The PCI device is removed from the PCI tracker '
                  'when the device is\n'
                  '        # freed, but not from Placement yet.\n'
                  '        self.assertPCIDeviceCounts("compute1", total=0, '
                  'free=0)\n'
                  '\n'
                  '        # We need a periodics run to trigger the deletion '
                  'of the device in\n'
                  '        # Placement\n'
                  '        self._run_periodics()\n'
                  '\n')
    else:
        middle = ('        self.restart_compute_service(hostname="compute1")'
                  '\n'
                  '        # And the device is now removed from Placement\n')
    return head + middle + pops + (
        '        self.assert_placement_pci_view(\n'
        '            "compute1", **compute1_expected_placement_view)\n\n')


class PCIRemovedTestEditTestCase(testtools.TestCase):
    """0010's edit of nova's tests of a PCI device removed while used."""

    PATH = bug_1848343.PCI_REMOVED_PATH

    def _text(self):
        return 'class %s(object):\n\n%s' % (
            bug_1848343.PCI_REMOVED_CLASS, ''.join(
                _pci_removed_test(name, periodic=i > 0)
                for i, name in enumerate(bug_1848343.PCI_REMOVED_TESTS)))

    def test_provider_gone_with_the_delete(self):
        text = bug_1848343.pci_removed_while_allocated_goes_at_once(
            {self.PATH: self._text()})[self.PATH]
        for name in bug_1848343.PCI_REMOVED_TESTS:
            self.assertIn('def %s' % name, text)
        # Every test now expects the provider gone right after the
        # delete, and once only.
        gone = ('        compute1_expected_placement_view["allocations"].pop('
                'server["id"])\n'
                '        compute1_expected_placement_view["inventories"].pop('
                '"0000:81:00.0")\n')
        self.assertEqual(4, text.count(gone))
        self.assertEqual(4, text.count('["inventories"].pop('))
        self.assertNotIn('["usages"] = {', text)
        self.assertEqual(3, text.count('# and the periodics keep it so\n'
                                       '        self._run_periodics()\n'))
        self.assertEqual(1, text.count('# and the restart keeps it so\n'))
        self.assertNotIn('not from Placement yet', text)
        compile(text, self.PATH, 'exec')

    def test_series_without_the_tests_are_left_alone(self):
        self.assertEqual(
            {}, bug_1848343.pci_removed_while_allocated_goes_at_once({}))
        self.assertEqual(
            {}, bug_1848343.pci_removed_while_allocated_goes_at_once(
                {self.PATH: 'class Other(object):\n    pass\n'}))

    def test_unexpected_test_is_refused(self):
        # One test expects the device still used after the delete.
        name = bug_1848343.PCI_REMOVED_TESTS[2]
        before, test, after = self._text().partition(
            _pci_removed_test(name))
        text = before + test.replace('self.PF_RC: 0', 'self.PF_RC: 1') + after
        e = self.assertRaises(
            errors.ExportError,
            bug_1848343.pci_removed_while_allocated_goes_at_once,
            {self.PATH: text})
        self.assertIn('%s.%s does not read as expected'
                      % (bug_1848343.PCI_REMOVED_CLASS, name), str(e))


PLAN = registry.Patch(slug='Fix-it', subject='Fix it', body='Because.',
                      trailers=('Closes-Bug: #1',))


def _nova_tree(root, text='a\nb\nc\nd\ne\nf\ng\n'):
    for path, content in (('nova/__init__.py', ''),
                          ('nova/compute/api.py', text),
                          ('nova/compute/manager.py', ''),
                          ('setup.cfg', '[metadata]\nname = nova\n'),
                          ('PKG-INFO', 'Name: nova\nVersion: 34.0.0\n')):
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'w') as f:
            f.write(content)


class PatchFileTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.tree = os.path.join(self.root, 'nova')
        _nova_tree(self.tree)
        before = {'nova/compute/api.py': 'a\nb\nc\nd\ne\nf\ng\n',
                  'nova/new.py': None}
        changes = {'nova/compute/api.py': 'a\nb\nc\nD\ne\nf\ng\n',
                   'nova/new.py': 'x = 1\n'}
        self.patch = patch.Patch(1, 1, PLAN, changes, before,
                                 '2026-11-30')
        self.patches = os.path.join(self.root, 'patches', '2026.2')
        os.makedirs(self.patches)
        with open(os.path.join(self.patches, self.patch.name), 'w') as f:
            f.write(self.patch.text())
        with open(os.path.join(self.patches, 'series'), 'w') as f:
            f.write(self.patch.name + '\n')

    def test_git_format_patch_with_dep3_fields(self):
        text = self.patch.text()
        self.assertTrue(text.startswith('From '))
        for header in ('From: ', 'Date: Mon, 30 Nov 2026 00:00:00 +0000',
                       'Subject: [PATCH 1/1] Fix it', 'Closes-Bug: #1',
                       'Origin: vendor', 'Bug: https://bugs.launchpad.net/'
                       'nova/+bug/1', 'Forwarded: no',
                       'Last-Update: 2026-11-30',
                       'diff --git a/nova/new.py b/nova/new.py',
                       'new file mode 100644', '--- /dev/null'):
            self.assertIn(header, text)
        # The author is the project itself, not a mailing list.
        self.assertIn('\nFrom: nova-fixes <nova-fixes@invalid>\n', text)
        # The same input gives the same bytes: check can compare.
        self.assertEqual(text, self.patch.text())

    def test_verify_applies_all_or_nothing(self):
        names = patch.verify('2026.2', self.tree, root=self.root)
        self.assertEqual([self.patch.name], names)
        with open(os.path.join(self.tree, 'nova/compute/api.py')) as f:
            self.assertEqual('a\nb\nc\nd\ne\nf\ng\n', f.read())
        patch.verify('2026.2', self.tree, root=self.root, write_tree=True)
        with open(os.path.join(self.tree, 'nova/compute/api.py')) as f:
            self.assertEqual('a\nb\nc\nD\ne\nf\ng\n', f.read())
        with open(os.path.join(self.tree, 'nova/new.py')) as f:
            self.assertEqual('x = 1\n', f.read())

    def test_a_hunk_that_does_not_apply_is_named(self):
        with open(os.path.join(self.tree, 'nova/compute/api.py'), 'w') as f:
            f.write('a\nb\nc\nX\ne\nf\ng\n')
        e = self.assertRaises(errors.PatchDoesNotApply, patch.verify,
                              '2026.2', self.tree, root=self.root,
                              write_tree=True)
        self.assertIn('0001-Fix-it.patch does not apply: hunk #1 of '
                      'nova/compute/api.py (@@ -1,7 +1,7 @@)', str(e))
        # Nothing was written, not even the new file of the patch.
        self.assertFalse(os.path.exists(os.path.join(self.tree,
                                                     'nova/new.py')))

    def test_hunks_apply_at_an_offset(self):
        with open(os.path.join(self.tree, 'nova/compute/api.py'), 'w') as f:
            f.write('0\n1\na\nb\nc\nd\ne\nf\ng\n')
        patch.verify('2026.2', self.tree, root=self.root, write_tree=True)
        with open(os.path.join(self.tree, 'nova/compute/api.py')) as f:
            self.assertEqual('0\n1\na\nb\nc\nD\ne\nf\ng\n', f.read())

    def test_not_a_nova_tree(self):
        empty = self.useFixture(fixtures.TempDir()).path
        e = self.assertRaises(errors.NotANovaTree, patch.verify, '2026.2',
                              empty, root=self.root)
        self.assertIn('is not a nova source tree: nova/__init__.py is '
                      'missing', str(e))

    def test_a_tree_of_another_series(self):
        e = self.assertRaises(errors.NotANovaTree, patch.verify, '2024.1',
                              self.tree, root=self.root)
        self.assertIn('it is nova 34.0.0 (series 2026.2), not a 2024.1 '
                      'tree', str(e))

    def test_unknown_series(self):
        self.assertRaises(errors.UnknownSeries, patch.verify, 'zed',
                          self.tree, root=self.root)

    def test_cli_errors_are_one_clear_line(self):
        stderr = self.useFixture(fixtures.StringStream('stderr')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        rc = cli.main(['verify', '--series', 'mastr', '--tree', self.tree])
        self.assertEqual(2, rc)
        stderr.seek(0)
        self.assertIn("unknown nova series 'mastr'", stderr.read())


class CheckStaleSetTestCase(testtools.TestCase):
    """check names what is stale, for a series and for a distribution's
    set (whose name its file loop once overwrote: KeyError 'series').
    """

    def _check(self, series, name):
        root = self.useFixture(fixtures.TempDir()).path
        target = patch.patches_dir(series, root, name)
        os.makedirs(target)
        for file_name, text in (('0001-a.patch', 'old\n'),
                                ('series', '0001-a.patch\n')):
            with open(os.path.join(target, file_name), 'w') as f:
                f.write(text)
        rendered = {'0001-a.patch': 'new\n', 'series': '0001-a.patch\n'}
        self.useFixture(fixtures.MockPatchObject(
            patch, 'render', return_value=rendered))
        return self.assertRaises(errors.StalePatches, patch.check, series,
                                 '/tree', root=root, name=name)

    def test_stale_distribution_set(self):
        error = self._check('2025.1', 'debian-13')
        self.assertIn('patches/debian-13 is stale against the drop-ins: '
                      '0001-a.patch differs.', str(error))
        self.assertIn('--series 2025.1 --set debian-13 --tree <Debian 13',
                      str(error))

    def test_stale_series(self):
        error = self._check('2026.2', None)
        self.assertIn('patches/2026.2 is stale against the drop-ins: '
                      '0001-a.patch differs.', str(error))
        self.assertIn('--series 2026.2 --tree <nova 2026.2 tree>',
                      str(error))


class _Target(object):

    def __init__(self, path, new=False):
        self.path = path
        self.new = new


def _edit_a(files):
    return {}


def _edit_b(files):
    return {}


class _Fix(object):
    """The parts of registry.Fix that parts_of() and _requires() read."""

    def __init__(self, name, plan, targets=(), notes=(), nova_tests=(),
                 unit_tests=()):
        self.name = name
        self.patch = plan
        self.targets = targets
        self.notes = notes
        self.nova_tests = nova_tests
        self.unit_tests = unit_tests
        self.docs = ()


SPLIT_PLAN = registry.Patch(
    slug='Feature', subject='Feature', body='All of it.', forwarded='no',
    conf_modules=('nova_fixes.nova.conf.feature',),
    test_edits=(_edit_a, _edit_b),
    changes=(
        registry.Change(slug='Options', subject='Add options',
                        body='Options.',
                        conf_modules=('nova_fixes.nova.conf.feature',)),
        registry.Change(slug='Task', subject='Add the task', body='Task.',
                        targets=('nova.compute.manager:M.task',
                                 'nova.compute.utils:helper'),
                        test_edits=('_edit_a', '_edit_b')),
        registry.Change(slug='Note', subject='Add a note', body='Note.',
                        notes=('n.yaml',)),
    ))

SPLIT_TARGETS = (_Target('nova.compute.manager:M.task', new=True),
                 _Target('nova.compute.utils:helper'),
                 # The same target's form for another series.
                 _Target('nova.compute.utils:helper'))


class PartsTestCase(testtools.TestCase):

    def fix(self, plan=SPLIT_PLAN, targets=SPLIT_TARGETS, notes=('n.yaml',)):
        return _Fix('feature', plan, targets, notes)

    def test_one_patch_without_changes(self):
        self.assertEqual([(PLAN, None)], patch.parts_of(_Fix('bug_1', PLAN)))

    def test_each_part_in_its_change(self):
        parts = patch.parts_of(self.fix())
        self.assertEqual(['Options', 'Task', 'Note'],
                         [plan.slug for plan, _change in parts])
        self.assertEqual('Add the task', parts[1][0].subject)
        self.assertEqual('no', parts[1][0].forwarded)
        self.assertIs(SPLIT_PLAN.changes[1], parts[1][1])

    def test_a_part_no_change_carries_is_refused(self):
        e = self.assertRaises(errors.ExportError, patch.parts_of,
                              self.fix(notes=('n.yaml', 'm.yaml')))
        self.assertIn('feature: no change of it carries the note m.yaml',
                      str(e))
        e = self.assertRaises(
            errors.ExportError, patch.parts_of,
            self.fix(targets=SPLIT_TARGETS + (_Target('nova.x:y'),)))
        self.assertIn('no change of it carries the target nova.x:y',
                      str(e))

    def test_unit_tests_no_change_carries_are_refused(self):
        fix = _Fix('feature', SPLIT_PLAN, SPLIT_TARGETS, ('n.yaml',),
                   unit_tests=(registry.NovaUnitTests(
                       'nova/tests/unit/test_x.py', 'x.py'),))
        e = self.assertRaises(errors.ExportError, patch.parts_of, fix)
        self.assertIn('no change of it carries the unit tests x.py', str(e))

    def test_a_part_in_two_changes_is_refused(self):
        plan = registry.Patch(slug='F', subject='F', body='F', changes=(
            registry.Change(slug='A', subject='A', body='A',
                            notes=('n.yaml',)),
            registry.Change(slug='B', subject='B', body='B',
                            notes=('n.yaml',))))
        e = self.assertRaises(errors.ExportError, patch.parts_of,
                              self.fix(plan=plan, targets=()))
        self.assertIn('the note n.yaml is in two of its changes, A and B',
                      str(e))

    def test_a_part_of_another_fix_is_refused(self):
        plan = registry.Patch(slug='F', subject='F', body='F', changes=(
            registry.Change(slug='A', subject='A', body='A',
                            notes=('n.yaml', 'other.yaml')),))
        e = self.assertRaises(errors.ExportError, patch.parts_of,
                              self.fix(plan=plan, targets=()))
        self.assertIn("its change A carries the note other.yaml, which is "
                      "not the fix's", str(e))

    def _grown(self, *changes):
        plan = registry.Patch(slug='F', subject='F', body='F',
                              changes=changes)
        return self.fix(plan=plan, targets=(_Target('nova.x:f'),),
                        notes=())

    def test_a_change_grows_a_function_an_earlier_one_carries(self):
        fix = self._grown(
            registry.Change(slug='A', subject='A', body='A',
                            targets=('nova.x:f',)),
            registry.Change(slug='B', subject='B', body='B',
                            grows=(('nova.x:f', ('_b',)),)),
            registry.Change(slug='C', subject='C', body='C',
                            grows=(('nova.x:f', ('_c', '_d')),)))
        self.assertEqual(['A', 'B', 'C'],
                         [p.slug for p, _c in patch.parts_of(fix)])
        changes = fix.patch.changes
        self.assertEqual(({'nova.x:f': {'_b', '_c', '_d'}}, set()),
                         patch._stage(fix, changes[0]))
        self.assertEqual(({'nova.x:f': {'_c', '_d'}}, {'nova.x:f'}),
                         patch._stage(fix, changes[1]))
        self.assertEqual(({}, {'nova.x:f'}), patch._stage(fix, changes[2]))
        self.assertEqual(({}, set()), patch._stage(fix, None))

    def test_growing_what_no_earlier_change_carries_is_refused(self):
        e = self.assertRaises(errors.ExportError, patch.parts_of, self._grown(
            registry.Change(slug='B', subject='B', body='B',
                            grows=(('nova.x:f', ('_b',)),)),
            registry.Change(slug='A', subject='A', body='A',
                            targets=('nova.x:f',))))
        self.assertIn('its change B grows nova.x:f, which no change before '
                      'it carries', str(e))

    def test_a_name_two_changes_bring_in_is_refused(self):
        e = self.assertRaises(errors.ExportError, patch.parts_of, self._grown(
            registry.Change(slug='A', subject='A', body='A',
                            targets=('nova.x:f',)),
            registry.Change(slug='B', subject='B', body='B',
                            grows=(('nova.x:f', ('_b',)),)),
            registry.Change(slug='C', subject='C', body='C',
                            grows=(('nova.x:f', ('_b',)),))))
        self.assertIn('the changes B and C both bring _b into nova.x:f',
                      str(e))

    def test_change_ids_are_stable_and_distinct(self):
        one = patch.change_id(_Fix('feature', SPLIT_PLAN), 'Task')
        self.assertEqual(one, patch.change_id(_Fix('feature', PLAN),
                                              'Task'))
        self.assertRegex(one, r'^I[0-9a-f]{40}$')
        self.assertNotEqual(one, patch.change_id(_Fix('feature', PLAN),
                                                 'Options'))
        self.assertNotEqual(one, patch.change_id(_Fix('other', PLAN),
                                                 'Task'))


NOVA_UNIT_MODULE = """\
from unittest import mock

from nova import test


class NovaTestCase(test.NoDBTestCase):
    def test_nova(self):
        pass
"""


class AppendUnitTestsTestCase(testtools.TestCase):

    def test_classes_appended_without_the_imports(self):
        source = ('# A header.\n\nfrom nova import test\n\n\n'
                  'class AddedTestCase(test.NoDBTestCase):\n'
                  '    def test_added(self):\n        pass\n')
        self.assertEqual(
            NOVA_UNIT_MODULE + '\n\nclass AddedTestCase(test.NoDBTestCase):'
            '\n    def test_added(self):\n        pass\n',
            patch.append_unit_tests(NOVA_UNIT_MODULE, source, 'm.py', 'u.py'))

    def test_only_the_classes_named(self):
        source = ('from nova import test\n\n\n'
                  'class BaseTestCase(test.NoDBTestCase):\n    pass\n\n\n'
                  '# The second.\n'
                  'class SecondTestCase(BaseTestCase):\n    pass\n\n\n'
                  'class ThirdTestCase(BaseTestCase):\n    pass\n')
        self.assertEqual(
            NOVA_UNIT_MODULE + '\n\nclass BaseTestCase(test.NoDBTestCase):'
            '\n    pass\n\n\nclass ThirdTestCase(BaseTestCase):\n'
            '    pass\n',
            patch.append_unit_tests(NOVA_UNIT_MODULE, source, 'm.py', 'u.py',
                                    ('ThirdTestCase', 'BaseTestCase')))
        self.assertEqual(
            NOVA_UNIT_MODULE + '\n\n# The second.\n'
            'class SecondTestCase(BaseTestCase):\n    pass\n',
            patch.append_unit_tests(NOVA_UNIT_MODULE, source, 'm.py', 'u.py',
                                    ('SecondTestCase',)))
        e = self.assertRaises(errors.ExportError, patch.append_unit_tests,
                              NOVA_UNIT_MODULE, source, 'm.py', 'u.py',
                              ('FourthTestCase',))
        self.assertIn('u.py has no class FourthTestCase', str(e))
        self.assertEqual(
            'u.py:SecondTestCase+ThirdTestCase',
            registry.NovaUnitTests('m.py', 'u.py', classes=(
                'SecondTestCase', 'ThirdTestCase')).name)
        self.assertEqual('u.py', registry.NovaUnitTests('m.py', 'u.py').name)

    def test_an_import_the_module_lacks_is_refused(self):
        for line in ('import mock', 'from nova import objects',
                     'from unittest import mock as m'):
            source = '%s\n\n\nclass T(object):\n    pass\n' % line
            e = self.assertRaises(errors.ExportError,
                                  patch.append_unit_tests, NOVA_UNIT_MODULE,
                                  source, 'm.py', 'u.py')
            self.assertIn('u.py imports "%s", which m.py does not' % line,
                          str(e))

    def test_imports_only_is_refused(self):
        e = self.assertRaises(errors.ExportError, patch.append_unit_tests,
                              NOVA_UNIT_MODULE, 'from nova import test\n',
                              'm.py', 'u.py')
        self.assertIn('u.py has no test to add to m.py', str(e))


NOVA_ADMIN_INDEX = """\
Admin guide
===========

.. toctree::
   :maxdepth: 2

   services
   notifications

Troubleshooting
---------------

.. toctree::

   evacuate
"""


class AddToToctreeTestCase(testtools.TestCase):

    def doc(self, after):
        return registry.NovaDoc('doc/source/admin/orphans.rst', 'o.rst',
                                'doc/source/admin/index.rst', after)

    def test_listed_after_its_entry(self):
        self.assertEqual(
            NOVA_ADMIN_INDEX.replace('   notifications\n',
                                     '   notifications\n   orphans\n'),
            patch.add_to_toctree(NOVA_ADMIN_INDEX,
                                 self.doc('notifications')))

    def test_an_entry_no_toctree_has_is_refused(self):
        for after in ('Troubleshooting', 'vendordata'):
            e = self.assertRaises(errors.ExportError, patch.add_to_toctree,
                                  NOVA_ADMIN_INDEX, self.doc(after))
            self.assertIn('doc/source/admin/index.rst has no toctree entry '
                          '%s' % after, str(e))


RECREATE_TEXT = """\
def test_it(self):
    left = self.allocations()
    # recreate: begin
    # FIXME: This is bug 1. The claim is left.
    self.assertEqual(1, len(left))
    # recreate: else
    self.assertEqual({}, left)
    # recreate: end
    self.delete()
"""


class RecreateFormTestCase(testtools.TestCase):

    def test_recreate_form_asserts_the_bug(self):
        self.assertEqual(
            'def test_it(self):\n    left = self.allocations()\n'
            '    # FIXME: This is bug 1. The claim is left.\n'
            '    self.assertEqual(1, len(left))\n    self.delete()\n',
            patch.recreate_form(RECREATE_TEXT, True, 't.py'))

    def test_fixed_form_asserts_the_fix(self):
        self.assertEqual(
            'def test_it(self):\n    left = self.allocations()\n'
            '    self.assertEqual({}, left)\n    self.delete()\n',
            patch.recreate_form(RECREATE_TEXT, False, 't.py'))

    def test_a_test_without_blocks(self):
        text = 'def test_it(self):\n    pass\n'
        self.assertEqual(text, patch.recreate_form(text, False, 't.py'))
        e = self.assertRaises(errors.ExportError, patch.recreate_form,
                              text, True, 't.py')
        self.assertIn('t.py has no "# recreate:" block', str(e))

    def test_blocks_out_of_place_are_refused(self):
        for text, problem in (
                (RECREATE_TEXT.replace('    # recreate: else\n', ''),
                 '"# recreate: end" out of place'),
                (RECREATE_TEXT.replace('    # recreate: end\n', ''),
                 'a "# recreate: else" block is not closed'),
                (RECREATE_TEXT.replace('# recreate: begin', '# recreate: '
                                       'else'),
                 'line 3: "# recreate: else" out of place')):
            e = self.assertRaises(errors.ExportError, patch.recreate_form,
                                  text, False, 't.py')
            self.assertIn(problem, str(e))

    def test_a_recreate_form_needs_a_fixme(self):
        e = self.assertRaises(errors.ExportError, patch.recreate_form,
                              RECREATE_TEXT.replace('FIXME', 'NOTE'), True,
                              't.py')
        self.assertIn('t.py: its recreate form has no FIXME', str(e))

    def _fix(self, *changes):
        test = registry.NovaTest('nova/tests/functional/regressions/'
                                 'test_bug_1.py', 'test_bug_1.py', ())
        return _Fix('bug_1', registry.Patch(slug='F', subject='F', body='F',
                                            changes=changes),
                    nova_tests=(test,))

    def test_a_recreate_change_is_flipped_by_a_later_one(self):
        path = 'nova/tests/functional/regressions/test_bug_1.py'
        recreate = registry.Change(slug='Recreate', subject='R', body='R',
                                   recreates=(path,))
        fix = registry.Change(slug='Fix', subject='F', body='F',
                              nova_tests=(path,))
        self.assertEqual(['Recreate', 'Fix'], [
            plan.slug for plan, _c in patch.parts_of(self._fix(recreate,
                                                               fix))])
        e = self.assertRaises(errors.ExportError, patch.parts_of,
                              self._fix(fix, recreate))
        self.assertIn('its change Recreate recreates the bug with %s, which '
                      'no later change of it flips' % path, str(e))
        mixed = registry.Change(slug='Recreate', subject='R', body='R',
                                recreates=(path,), notes=('n.yaml',))
        e = self.assertRaises(errors.ExportError, patch.parts_of,
                              _Fix('bug_1', registry.Patch(
                                  slug='F', subject='F', body='F',
                                  changes=(mixed, fix)),
                                  notes=('n.yaml',),
                                  nova_tests=self._fix().nova_tests))
        self.assertIn('its recreate change Recreate carries more than the '
                      'tests', str(e))
        growing = registry.Change(slug='Recreate', subject='R', body='R',
                                  recreates=(path,),
                                  grows=(('nova.x:f', ('_b',)),))
        carrier = registry.Change(slug='A', subject='A', body='A',
                                  targets=('nova.x:f',))
        e = self.assertRaises(errors.ExportError, patch.parts_of,
                              _Fix('bug_1', registry.Patch(
                                  slug='F', subject='F', body='F',
                                  changes=(carrier, growing, fix)),
                                  targets=(_Target('nova.x:f'),),
                                  nova_tests=self._fix().nova_tests))
        self.assertIn('its recreate change Recreate carries more than the '
                      'tests', str(e))


def _part(fix, slug, before, after, change=None, uses=(), adds=(),
          path='nova/compute/api.py'):
    plan = registry.Patch(slug=slug, subject=slug, body=slug)
    return patch._Part(fix, plan, change, {path: after}, {path: before},
                       set(uses), set(adds))


class RequiresOfPartsTestCase(testtools.TestCase):
    """_requires(): what each patch needs, found on a nova tree."""

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(fixtures.TempDir()).path
        _nova_tree(self.tree)
        self.a = _Fix('a', PLAN)
        self.b = _Fix('b', PLAN, targets=(_Target('nova.compute.api:new',
                                                  new=True),))

    def test_context_and_own_fix(self):
        parts = [
            _part(self.a, 'A', 'a\nb\nc\nd\ne\nf\ng\n',
                  'a\nb\nc\nD\ne\nf\ng\n'),
            # Its context is A's line.
            _part(self.b, 'B1', 'a\nb\nc\nD\ne\nf\ng\n',
                  'a\nb\nc\nD\nE\nf\ng\n'),
            # Another file: its fix's first change, and what that needs.
            _part(self.b, 'B2', '', 'x\n', path='nova/compute/manager.py'),
            # Declares it needs nothing, but its context is B2's line.
            _part(self.a, 'A2', 'x\n', 'x\ny\n',
                  path='nova/compute/manager.py',
                  change=registry.Change(slug='A2', subject='A2', body='',
                                         needs=())),
            # Declares it needs nothing, and adds a file of its own.
            _part(self.a, 'A3', None, 'z\n', path='nova/compute/other.py',
                  change=registry.Change(slug='A3', subject='A3', body='',
                                         needs=())),
        ]
        self.assertEqual([[], [0], [0, 1], [0, 1, 2], []],
                         patch._requires(parts, self.tree))

    def test_a_new_name_used_needs_its_change(self):
        parts = [
            _part(self.b, 'Adds', '', 'x\n', path='nova/compute/manager.py',
                  adds=('nova.compute.api:new',)),
            _part(self.a, 'Uses', 'a\nb\nc\nd\ne\nf\ng\n',
                  'a\nb\nc\nd\ne\nf\nG\n',
                  uses=('nova.compute.api:new', 'nova.compute.api:old')),
        ]
        self.assertEqual([[], [0]], patch._requires(parts, self.tree))

    def test_a_name_added_later_is_refused(self):
        parts = [
            _part(self.a, 'Uses', 'a\nb\nc\nd\ne\nf\ng\n',
                  'a\nb\nc\nd\ne\nf\nG\n',
                  uses=('nova.compute.api:new',)),
            _part(self.b, 'Adds', '', 'x\n', path='nova/compute/manager.py',
                  adds=('nova.compute.api:new',)),
        ]
        e = self.assertRaises(errors.ExportError, patch._requires, parts,
                              self.tree)
        self.assertIn('Uses uses nova.compute.api:new, which no change '
                      'before it adds', str(e))

    def test_a_declared_need_after_it_is_refused(self):
        parts = [_part(self.a, 'A', 'a\nb\nc\nd\ne\nf\ng\n',
                       'a\nb\nc\nD\ne\nf\ng\n',
                       change=registry.Change(slug='A', subject='A', body='',
                                              needs=('B',))),
                 _part(self.b, 'B', '', 'x\n',
                       path='nova/compute/manager.py')]
        e = self.assertRaises(errors.ExportError, patch._requires, parts,
                              self.tree)
        self.assertIn('A needs B, which is not a change before it', str(e))


class RequiresTestCase(testtools.TestCase):
    """Requires: lines, and each patch applied with only those."""

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.tree = os.path.join(self.root, 'nova')
        _nova_tree(self.tree)
        base = 'a\nb\nc\nd\ne\nf\ng\n'
        first = patch.Patch(1, 2, PLAN, {'nova/compute/api.py':
                                         'a\nb\nc\nD\ne\nf\ng\n'},
                            {'nova/compute/api.py': base}, '2026-11-30',
                            change_id='I' + '1' * 40)
        plan2 = registry.Patch(slug='Then-this', subject='Then this',
                               body='After.')
        self.second = patch.Patch(
            2, 2, plan2, {'nova/compute/api.py': 'a\nb\nc\nD\nE\nf\ng\n'},
            {'nova/compute/api.py': 'a\nb\nc\nD\ne\nf\ng\n'}, '2026-11-30',
            change_id='I' + '2' * 40, requires=[first.name])
        self.patches = os.path.join(self.root, 'patches', '2026.2')
        os.makedirs(self.patches)
        self.write([first, self.second])

    def write(self, patches, requires=None):
        for p in patches:
            with open(os.path.join(self.patches, p.name), 'w') as f:
                f.write(p.text())
        with open(os.path.join(self.patches, 'series'), 'w') as f:
            f.write(''.join(p.name + '\n' for p in patches))

    def test_fields(self):
        text = self.second.text()
        self.assertEqual(['0001-Fix-it.patch'], patch.requires_of(text))
        head = text.split('\n---\n')[0]
        # Gerrit reads the Change-Id from the last paragraph's last line.
        self.assertTrue(head.endswith('\nChange-Id: I' + '2' * 40))
        self.assertIn('\nRequires: 0001-Fix-it.patch\nOrigin: ', head)

    def test_each_applies_with_what_it_requires(self):
        self.assertEqual(
            {'0001-Fix-it.patch': [],
             '0002-Then-this.patch': ['0001-Fix-it.patch']},
            patch.verify_alone('2026.2', self.tree, root=self.root))

    def test_a_missing_requirement_is_found(self):
        self.second.requires = ()
        self.write([patch.Patch(1, 2, PLAN, {'nova/compute/api.py':
                                             'a\nb\nc\nD\ne\nf\ng\n'},
                                {'nova/compute/api.py':
                                 'a\nb\nc\nd\ne\nf\ng\n'}, '2026-11-30'),
                    self.second])
        e = self.assertRaises(errors.PatchDoesNotApply, patch.verify_alone,
                              '2026.2', self.tree, root=self.root)
        self.assertIn('0002-Then-this.patch does not apply', str(e))

    def test_a_requirement_after_the_patch_is_refused(self):
        first = patch.Patch(1, 2, PLAN, {'nova/new.py': 'x = 1\n'},
                            {'nova/new.py': None}, '2026-11-30',
                            requires=['0002-Then-this.patch'])
        self.second.requires = ()
        self.write([first, self.second])
        e = self.assertRaises(errors.StalePatches, patch.verify_alone,
                              '2026.2', self.tree, root=self.root)
        self.assertIn('0001-Fix-it.patch requires 0002-Then-this.patch, '
                      'which is not a patch before it', str(e))


class RealSplitTestCase(testtools.TestCase):

    def test_the_orphan_task_comes_as_three_changes(self):
        from nova_fixes.fixes import orphans
        changes = orphans.FIX.patch.changes
        self.assertEqual(
            ['Add the [orphan_instances] configuration options',
             'Add a periodic task for orphan instances',
             'Document the orphan instances task'],
            [c.subject for c in changes])
        # Its documentation: the release note and nova's admin guide page.
        self.assertEqual((orphans.FIX.notes, ('doc/source/admin/'
                                              'orphan-instances.rst',)),
                         (changes[2].notes, changes[2].docs))
        for change in changes:
            self.assertLessEqual(len(change.subject), 72)


class UpstreamSeriesTestCase(testtools.TestCase):
    """patches/master: made against a git checkout of nova's master."""

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.tree = os.path.join(self.root, 'nova')
        _nova_tree(self.tree)
        os.unlink(os.path.join(self.tree, 'PKG-INFO'))
        env = dict(os.environ, GIT_AUTHOR_DATE='2026-08-21T12:00:00Z',
                   GIT_COMMITTER_DATE='2026-08-21T12:00:00Z')
        for args in (['init', '-q'], ['add', '-A'],
                     ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit',
                      '-q', '-m', 'Merge "Something"']):
            subprocess.run(['git', '-C', self.tree] + args, check=True,
                           env=env, capture_output=True)
        self.commit = subprocess.run(
            ['git', '-C', self.tree, 'rev-parse', 'HEAD'], check=True,
            capture_output=True, text=True).stdout.strip()

    def test_records_of(self):
        self.assertEqual(registry.DEFAULT_SERIES,
                         registry.records_of(registry.UPSTREAM))
        self.assertEqual('2024.1', registry.records_of('2024.1'))
        e = self.assertRaises(errors.UnknownSeries, registry.records_of,
                              'mastr')
        self.assertIn('master', str(e))
        # Only the released series have fingerprints and sdists.
        self.assertRaises(errors.UnknownSeries, registry.check_series,
                          registry.UPSTREAM)

    def test_base_names_the_commit(self):
        self.assertEqual('%s 2026-08-21 Merge "Something"\n' % self.commit,
                         patch.upstream_base(self.tree))

    def test_a_checkout_with_changes_is_refused(self):
        with open(os.path.join(self.tree, 'nova/compute/api.py'), 'a') as f:
            f.write('x\n')
        e = self.assertRaises(errors.NotANovaTree, patch.upstream_base,
                              self.tree)
        self.assertIn('the checkout has changes', str(e))

    def test_a_tree_that_is_not_a_checkout_is_refused(self):
        plain = os.path.join(self.root, 'plain')
        _nova_tree(plain)
        e = self.assertRaises(errors.NotANovaTree, patch.upstream_base,
                              plain)
        self.assertIn("a git checkout of nova's master branch", str(e))

    def test_specs_are_kept_and_not_checked(self):
        target = patch.patches_dir(registry.UPSTREAM, self.root)
        os.makedirs(os.path.join(target, 'specs'))
        spec = os.path.join(target, 'specs', 'a.rst')
        with open(spec, 'w') as f:
            f.write('A spec\n')
        rendered = {'0001-Fix-it.patch': 'text\n', 'series':
                    '0001-Fix-it.patch\n', 'BASE': 'abc\n'}
        self.useFixture(fixtures.MockPatch(
            'nova_fixes.export.patch.render', return_value=rendered))
        patch.write(registry.UPSTREAM, self.tree, root=self.root)
        self.assertEqual(['0001-Fix-it.patch', 'BASE', 'series', 'specs'],
                         sorted(os.listdir(target)))
        with open(spec) as f:
            self.assertEqual('A spec\n', f.read())
        patch.check(registry.UPSTREAM, self.tree, root=self.root)

    def test_cli_master_needs_a_tree(self):
        stderr = self.useFixture(fixtures.StringStream('stderr')).stream
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        rc = cli.main(['export', '--series', 'master', '--root', self.root])
        self.assertEqual(2, rc)
        stderr.seek(0)
        self.assertIn('--series master needs --tree', stderr.read())
        rc = cli.main(['fingerprints', 'record', '--series', 'master',
                       '--tree', self.tree])
        self.assertEqual(2, rc)


class FlipBug1836369TestCase(testtools.TestCase):
    """interrupted_moves.flip_1836369_fixmes: nova's test_init_host."""

    def _text(self):
        from nova_fixes.fixes import interrupted_moves
        body = ''.join(old for old, _new in interrupted_moves.INIT_HOST_FLIPS)
        head = 'class T(object):\n    def test(self):\n'
        return interrupted_moves, head + body

    def test_flips_the_four_fixmes(self):
        module, text = self._text()
        out = module.flip_1836369_fixmes(
            {module.INIT_HOST_TEST: text})[module.INIT_HOST_TEST]
        self.assertNotIn('FIXME', out)
        self.assertIn("self.assertEqual(['error'], [m.status for m in "
                      "migrations])", out)
        self.assertIn("self.assertIn(server['id'], source_allocations)", out)
        self.assertIn("self.assertNotIn(server['id'], dest_allocations)",
                      out)

    def test_a_test_that_reads_otherwise_is_refused(self):
        module, text = self._text()
        text = text.replace('self.assertIn(server', 'self.assertTrue(server')
        self.assertRaises(errors.ExportError, module.flip_1836369_fixmes,
                          {module.INIT_HOST_TEST: text})
