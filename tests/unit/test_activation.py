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

import copy
import inspect
import linecache
import sys
from unittest import mock

import fixtures
import testtools

import nova_fixes
from nova_fixes import activation
from nova_fixes import fingerprint
from nova_fixes import fixes
from nova_fixes import fixture
from nova_fixes import registry


#: The fixes activate() activates by default on the installed nova's
#: series: those with code there in one of nova's services (not only in
#: nova-manage, see registry.DEFAULT_SERVICES).
ALL = [fix.bug for fix in fixes.FIXES
       if any(set(target.services) & set(registry.DEFAULT_SERVICES)
              for target in registry.targets_of(
                  fix, activation.series_of(activation.nova_version())))]


def _targets(fix):
    """The targets activate() patches by default: not nova-manage's,
    whose module this process must not import (see
    registry.DEFAULT_SERVICES).
    """
    return [target for target in registry.targets_of(
        fix, activation.series_of(activation.nova_version()))
        if set(target.services) & set(registry.DEFAULT_SERVICES)]


def _snapshot():
    """The raw __dict__ entry behind every target (or a marker), and the
    periodic tasks of their owners.
    """
    state = {}
    for fix in fixes.FIXES:
        for target in _targets(fix):
            owner, name = activation._resolve(target.path)
            state[target.path] = vars(owner).get(name, 'MISSING')
            if target.periodic:
                state['periodic tasks of %s' % owner.__name__] = (
                    list(owner._periodic_tasks),
                    dict(owner._periodic_spacing))
    return state


class ActivationTestCase(testtools.TestCase):

    def setUp(self):
        super(ActivationTestCase, self).setUp()
        self.addCleanup(nova_fixes.deactivate)
        self.before = _snapshot()

    def test_activate_replaces_every_target(self):
        self.assertEqual(ALL, nova_fixes.activate())
        after = _snapshot()
        for fix in fixes.FIXES:
            for target in _targets(fix):
                if target.periodic:
                    owner, name = activation._resolve(target.path)
                    self.assertIn(name, dict(owner._periodic_tasks))
                    continue
                self.assertIs(activation._replacement(target),
                              after[target.path], target.path)
        self.assertEqual(ALL, nova_fixes.active_fixes())

    def test_activate_is_idempotent(self):
        nova_fixes.activate()
        first = _snapshot()
        self.assertEqual([], nova_fixes.activate())
        self.assertEqual(first, _snapshot())

    def test_deactivate_restores_the_originals_exactly(self):
        nova_fixes.activate()
        self.assertEqual(ALL, nova_fixes.deactivate())
        after = _snapshot()
        self.assertEqual(set(self.before), set(after))
        for path, original in self.before.items():
            if path.startswith('periodic tasks'):
                self.assertEqual(original, after[path])
            else:
                self.assertIs(original, after[path], path)
        self.assertEqual([], nova_fixes.active_fixes())
        self.assertEqual([], nova_fixes.deactivate())

    def test_unknown_original_refuses_and_patches_nothing(self):
        recorded = copy.deepcopy(fingerprint.recorded())
        series = activation.series_of(activation.nova_version())
        # The last target of the fix is the one that does not match, so
        # that every target before it has been checked and would have been
        # patched by a non-atomic activation.
        last = [target for fix in fixes.FIXES for target in _targets(fix)
                if not target.new][-1]
        # Every original recorded for the series (a distribution's own
        # tree too, on Debian 13's nova).
        for key, _what in fingerprint.originals(series, recorded):
            recorded[key][last.path] = 'f' * 20
        with mock.patch.object(fingerprint, 'recorded',
                               return_value=recorded):
            exc = self.assertRaises(nova_fixes.TargetMismatch,
                                    nova_fixes.activate)
        self.assertEqual(last.path, exc.target)
        self.assertEqual(series, exc.series)
        self.assertIn(last.path, str(exc))
        self.assertIn(series, str(exc))
        self.assertIn('Nothing was patched', str(exc))
        self.assertEqual(self.before, _snapshot())
        self.assertEqual([], nova_fixes.active_fixes())

    def _with_distribution_tree(self):
        """recorded() with a distribution's own tree of the installed
        series (as debian-13 is of 2025.1) that differs from the release
        in its last replaced target; (recorded, series, that target).
        """
        recorded = copy.deepcopy(fingerprint.recorded())
        series = activation.series_of(activation.nova_version())
        for key, _what in fingerprint.originals(series, recorded)[1:]:
            del recorded[key]
        # The release's record is the installed nova's own (on Debian 13,
        # whose originals are recorded as debian-13, it is not).
        targets = [target for fix in fixes.FIXES
                   for target in _targets(fix)]
        recorded[series] = {target.path: fingerprint.of_installed(target)
                            for target in targets}
        last = [target for target in targets if not target.new][-1]
        recorded['distro-x'] = dict(recorded[series])
        recorded['distro-x'][last.path] = 'd' * 20
        self.useFixture(fixtures.MockPatchObject(
            registry, 'DISTRIBUTION_SETS',
            {'distro-x': (series, "a distribution's tree")}))
        return recorded, series, last

    def test_distribution_original_is_accepted(self):
        """nova as a distribution ships it: each target matches the
        release's original or the distribution tree's.
        """
        recorded, series, last = self._with_distribution_tree()
        # The installed nova is the distribution's in this target only.
        recorded[series][last.path], recorded['distro-x'][last.path] = (
            'f' * 20, recorded[series][last.path])
        with mock.patch.object(fingerprint, 'recorded',
                               return_value=recorded):
            self.assertEqual(ALL, nova_fixes.activate())
        self.assertEqual(ALL, nova_fixes.deactivate())
        self.assertEqual(self.before, _snapshot())

    def test_neither_original_refuses_naming_both(self):
        recorded, series, last = self._with_distribution_tree()
        recorded[series][last.path] = 'f' * 20
        with mock.patch.object(fingerprint, 'recorded',
                               return_value=recorded):
            exc = self.assertRaises(nova_fixes.TargetMismatch,
                                    nova_fixes.activate)
        self.assertEqual(last.path, exc.target)
        self.assertIn('expected %s (nova %s) or %s (distro-x: a '
                      "distribution's tree)" % (
                          'f' * 20, registry.RELEASES[series][0], 'd' * 20),
                      str(exc))
        self.assertIn('Nothing was patched', str(exc))
        self.assertEqual(self.before, _snapshot())

    def test_changed_source_refuses_and_patches_nothing(self):
        """nova's file says something else than what was recorded (a
        distro backport): the live function's own lines are what counts.
        """
        # A target whose function is the last of the targets in its file
        # (a line inserted there moves no other target's lines) and has a
        # line to change before the next target's.
        placed = {}
        for fix in fixes.FIXES:
            for target in _targets(fix):
                if target.new:
                    continue
                owner, name = activation._resolve(target.path)
                code = inspect.unwrap(getattr(owner, name)).__code__
                placed[target] = (code.co_filename, code.co_firstlineno)
        lasts = [target for target, (path, first) in placed.items()
                 if first == max(f for p, f in placed.values()
                                 if p == path)]
        for last in reversed(lasts):
            owner, name = activation._resolve(last.path)
            source = inspect.getsourcelines(
                inspect.unwrap(getattr(owner, name)))[0]
            if any(line.strip().startswith(('return', 'try'))
                   for line in source[1:]):
                break
        path = inspect.unwrap(getattr(owner, name)).__code__.co_filename
        with open(path, encoding='utf-8') as f:
            lines = f.readlines()
        first = inspect.unwrap(getattr(owner, name)).__code__.co_firstlineno
        body = first + 1
        while not lines[body - 1].strip().startswith(('return', 'try')):
            body += 1
        indent = lines[body - 1][:len(lines[body - 1]) -
                                 len(lines[body - 1].lstrip())]
        lines.insert(body - 1, indent + 'context = context\n')
        self.addCleanup(linecache.cache.pop, path, None)
        linecache.cache[path] = (0, None, lines, path)
        exc = self.assertRaises(nova_fixes.TargetMismatch,
                                nova_fixes.activate)
        self.assertEqual(last.path, exc.target)
        self.assertIn('fingerprint', str(exc))
        self.assertEqual(self.before, _snapshot())
        self.assertEqual([], nova_fixes.active_fixes())

    def test_no_recorded_original_for_series_refuses(self):
        with mock.patch.object(fingerprint, 'recorded', return_value={}):
            exc = self.assertRaises(nova_fixes.TargetMismatch,
                                    nova_fixes.activate)
        self.assertIn('no original is recorded', str(exc))
        self.assertEqual(self.before, _snapshot())

    def test_unsupported_nova_refuses(self):
        with mock.patch.object(activation, 'nova_version',
                               return_value='25.2.0'):
            exc = self.assertRaises(nova_fixes.UnsupportedNova,
                                    nova_fixes.activate)
        self.assertIn('nova 25.2.0 is not supported', str(exc))
        self.assertIn('2026.2', str(exc))
        self.assertEqual(self.before, _snapshot())

    def test_new_target_already_in_nova_refuses(self):
        from nova import exception
        exception.AllocationMoveTargetNotFound = Exception
        self.addCleanup(delattr, exception, 'AllocationMoveTargetNotFound')
        exc = self.assertRaises(nova_fixes.TargetMismatch,
                                nova_fixes.activate)
        self.assertIn('nova already defines it', str(exc))
        self.assertEqual([], nova_fixes.active_fixes())

    def test_target_replaced_at_run_time_refuses(self):
        from nova.conductor.tasks import migrate

        def other(*args):
            pass

        with mock.patch.object(migrate, 'revert_allocation_for_migration',
                               other):
            exc = self.assertRaises(nova_fixes.TargetMismatch,
                                    nova_fixes.activate)
        self.assertIn('something else has replaced it', str(exc))
        self.assertEqual(self.before, _snapshot())

    def test_unknown_fix(self):
        exc = self.assertRaises(nova_fixes.UnknownFix,
                                nova_fixes.activate, [1])
        self.assertIn('no fix for bug 1', str(exc))

    def test_originals_are_bound_by_their_patch_names_while_active(self):
        from nova.conductor.tasks import migrate
        from nova.scheduler.client import report

        from nova_fixes.nova.conductor.tasks import migrate as dropin_migrate
        client = report.SchedulerReportClient
        before = vars(client)['move_allocations']
        revert = migrate.revert_allocation_for_migration
        nova_fixes.activate()
        # A method's original on nova's class, as self._name finds it.
        self.assertIs(before,
                      vars(client)['_move_allocations_to_any_consumer'])
        # A module-level function's original in nova's module and in the
        # drop-in's, whose code calls it by its bare name.
        self.assertIs(revert, migrate._move_allocations_back_to_instance)
        self.assertIs(revert,
                      dropin_migrate._move_allocations_back_to_instance)
        nova_fixes.deactivate()
        self.assertNotIn('_move_allocations_to_any_consumer', vars(client))
        self.assertFalse(hasattr(migrate,
                                 '_move_allocations_back_to_instance'))
        self.assertIsNone(dropin_migrate._move_allocations_back_to_instance)

    def test_original_name_taken_in_nova_refuses(self):
        from nova.scheduler.client import report
        report.SchedulerReportClient._move_allocations_to_any_consumer = 1
        self.addCleanup(delattr, report.SchedulerReportClient,
                        '_move_allocations_to_any_consumer')
        exc = self.assertRaises(nova_fixes.TargetMismatch,
                                nova_fixes.activate)
        self.assertIn('nova already has _move_allocations_to_any_consumer',
                      str(exc))
        self.assertEqual(self.before, _snapshot())


class SeriesTestCase(testtools.TestCase):

    def test_series_of(self):
        self.assertEqual('2026.2', activation.series_of('34.0.0'))
        self.assertEqual('2024.1', activation.series_of('29.4.0'))
        self.assertEqual('2023.1', activation.series_of('27.5.1'))
        self.assertEqual('2023.2', activation.series_of('28.3.1'))
        # Zed, as Debian 12 ships it.
        self.assertEqual('2022.2', activation.series_of('26.2.2'))
        for bad in ('25.0.0', '24.2.0', '35.0.0', 'master', ''):
            self.assertRaises(nova_fixes.UnsupportedNova,
                              activation.series_of, bad)

    def test_check_series(self):
        self.assertEqual('2025.1', registry.check_series('2025.1'))
        exc = self.assertRaises(nova_fixes.UnknownSeries,
                                registry.check_series, '2025.3')
        self.assertIn("unknown nova series '2025.3'", str(exc))


class FixtureTestCase(testtools.TestCase):

    def test_fixture_activates_for_one_test(self):
        before = _snapshot()
        fix = fixture.NovaFixes()
        with fix:
            self.assertEqual(ALL, nova_fixes.active_fixes())
            self.assertNotEqual(before, _snapshot())
        self.assertEqual([], nova_fixes.active_fixes())
        self.assertEqual(before, _snapshot())

    def test_fixture_leaves_an_outer_activation_alone(self):
        nova_fixes.activate()
        self.addCleanup(nova_fixes.deactivate)
        with fixture.NovaFixes():
            pass
        self.assertEqual(ALL, nova_fixes.active_fixes())

    def test_fixture_undoes_only_what_it_did(self):
        """Fix A activated in the process, the fixture activates B: after
        its cleanup A is still active, B is not.
        """
        before = _snapshot()
        self.assertEqual([1848343], nova_fixes.activate([1848343]))
        self.addCleanup(nova_fixes.deactivate)
        outer = _snapshot()
        with fixture.NovaFixes() as fix:
            self.assertEqual([bug for bug in ALL if bug != 1848343],
                             fix.activated)
            self.assertCountEqual(ALL, nova_fixes.active_fixes())
        self.assertEqual([1848343], nova_fixes.active_fixes())
        self.assertEqual(outer, _snapshot())
        nova_fixes.deactivate()
        self.assertEqual(before, _snapshot())

    def test_fixture_undoes_only_its_targets_of_a_shared_fix(self):
        """The process activated fix A for the compute service only; the
        fixture activates the rest of A (its API and conductor targets):
        after its cleanup A's compute targets are still active, the rest
        are not.
        """
        before = _snapshot()
        outer = nova_fixes.activate([1848343], services=['compute'])
        self.addCleanup(nova_fixes.deactivate)
        self.assertEqual([1848343], outer)
        compute = {t.path for bug, t in outer.targets}
        everything = {t.path for t in _targets(fixes.get_fix(1848343))}
        self.assertTrue(compute)
        self.assertTrue(everything - compute,
                        'fix 1848343 has targets outside nova-compute')
        inner_state = _snapshot()
        with fixture.NovaFixes([1848343]) as fix:
            self.assertEqual([1848343], fix.activated)
            self.assertEqual(everything - compute,
                             {t.path for bug, t in fix.activated.targets})
            now = _snapshot()
            changed = {path for path in everything
                       if now[path] is not inner_state[path]}
            self.assertEqual(everything - compute, changed)
        self.assertEqual([1848343], nova_fixes.active_fixes())
        self.assertEqual(inner_state, _snapshot())
        for path in compute:
            self.assertIsNot(before[path], _snapshot()[path], path)
        nova_fixes.deactivate(outer)
        self.assertEqual([], nova_fixes.active_fixes())
        self.assertEqual(before, _snapshot())


class DeactivateTestCase(testtools.TestCase):

    def setUp(self):
        super(DeactivateTestCase, self).setUp()
        self.addCleanup(nova_fixes.deactivate)
        self.before = _snapshot()

    def test_deactivate_some_keeps_the_others(self):
        nova_fixes.activate()
        self.assertEqual([1859496], nova_fixes.deactivate([1859496]))
        self.assertEqual([bug for bug in ALL if bug != 1859496],
                         nova_fixes.active_fixes())
        from nova.api.openstack.compute import servers
        self.assertIs(self.before[
            'nova.api.openstack.compute.servers:ServersController.delete'],
            vars(servers.ServersController)['delete'])
        self.assertEqual([], nova_fixes.deactivate([1859496]))
        self.assertEqual([bug for bug in ALL if bug != 1859496],
                         nova_fixes.deactivate())
        self.assertEqual(self.before, _snapshot())

    def test_deactivate_an_unknown_fix(self):
        self.assertRaises(nova_fixes.UnknownFix, nova_fixes.deactivate, [1])


class CheckSourceTestCase(testtools.TestCase):
    """nova-fixes check's guard for nova-manage's targets, read from the
    installed source without importing nova.cmd.manage.
    """

    def _manage_targets(self):
        series = activation.series_of(activation.nova_version())
        return series, [target for fix in fixes.FIXES
                        for target in registry.targets_of(fix, series)
                        if 'manage' in target.services]

    def test_recorded_passes_without_importing(self):
        series, targets = self._manage_targets()
        self.assertTrue(targets)
        imported = 'nova.cmd.manage' in sys.modules
        for target in targets:
            activation.check_source(target, series, fingerprint.recorded())
        self.assertEqual(imported, 'nova.cmd.manage' in sys.modules)

    def test_changed_fingerprint_is_refused(self):
        series, targets = self._manage_targets()
        recorded = copy.deepcopy(fingerprint.recorded())
        replaced = [t for t in targets if not t.new][0]
        for key, _what in fingerprint.originals(series, recorded):
            recorded[key][replaced.path] = 'f' * 20
        exc = self.assertRaises(nova_fixes.TargetMismatch,
                                activation.check_source, replaced, series,
                                recorded)
        self.assertIn(replaced.path, str(exc))
