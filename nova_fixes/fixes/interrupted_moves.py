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

"""Interrupted moves: a server whose move was interrupted (a compute
service stopped in the middle of it and started again) lives on holding
the destination's claim, and its migration the source, or stuck in a
task state nothing clears. The cold migration case is Launchpad bug
1836369, which nova's test_init_host asserts under FIXMEs; the other
sequences are its neighbours.
"""

from nova_fixes import errors
from nova_fixes.export import edits
from nova_fixes import registry

INIT_HOST_TEST = 'nova/tests/functional/compute/test_init_host.py'

#: nova's assertions of bug 1836369 in test_init_host's
#: test_migrate_disk_and_power_off_crash_finish_revert_migration (the same
#: text from 26.2.2 to master): each FIXME block, and what the fix makes
#: it assert.
INIT_HOST_FLIPS = (
    ("""\
        # FIXME(mriedem): This is bug 1836369 because we would normally expect
        # Migration.get_by_instance_and_status to raise
        # MigrationNotFoundByStatus since the status should be "error".
        objects.Migration.get_by_instance_and_status(
            context, server['id'], 'migrating')
""", """\
        migrations = objects.MigrationList.get_by_filters(
            context, {'instance_uuid': server['id']})
        self.assertEqual(['error'], [m.status for m in migrations])
"""),
    ("""\
        # FIXME(mriedem): Leaving these fields set on the instance is
        # bug 1836369.
        self.assertIsNotNone(instance.migration_context)
        self.assertIsNotNone(instance.new_flavor)
        self.assertEqual('active', instance.system_metadata['old_vm_state'])
""", """\
        self.assertIsNone(instance.migration_context)
        self.assertIsNone(instance.new_flavor)
        self.assertNotIn('old_vm_state', instance.system_metadata)
"""),
    ("""\
        # FIXME(mriedem): This is bug 1836369 because we orphaned the
        # allocations created by the scheduler for the server on the dest host.
        self.assertIn(server['id'], dest_allocations)
""", """\
        self.assertNotIn(server['id'], dest_allocations)
"""),
    ("""\
        # FIXME(mriedem): This is bug 1836369 because the server is running on
        # the source host but is not tracking allocations against the source
        # host.
        self.assertNotIn(server['id'], source_allocations)
""", """\
        self.assertIn(server['id'], source_allocations)
"""),
)


def flip_1836369_fixmes(files):
    """nova's test_init_host asserts bug 1836369 under four FIXMEs: flip
    them (the migration 'error', the resize's fields dropped from the
    instance, its allocations on the source and not the destination).
    Refuses a test that does not read as expected.
    """
    def edit(text):
        for old, new in INIT_HOST_FLIPS:
            if text.count(old) != 1:
                raise errors.ExportError(
                    '%s: the assertion of bug 1836369 to flip is not there '
                    'as expected: %s' % (INIT_HOST_TEST,
                                         old.splitlines()[-1].strip()))
            text = text.replace(old, new)
        return text

    return edits.edit_python(files, INIT_HOST_TEST, edit)


RECREATE_MESSAGE = """\
A source compute service that stops in the middle of a move (inside
resize_instance's migrate_disk_and_power_off, or inside the driver's
live migration) and starts again rolls the move back in init_host: the
guest runs on the source again and the task state is cleared. Nothing
gives back what the move took in placement: the instance consumer keeps
the destination's claim and the migration consumer the source's
allocations, for as long as the server lives. A cold migration's
migration even stays 'migrating', so the resource tracker of the
destination keeps counting it, and the quota counted from placement
counts the server's flavor twice.

This adds functional regression tests that stop the source in each of
those driver calls, start it again and check what the server holds. They
assert what is left under a FIXME; the change that fixes it flips the
assertions."""

FIX_MESSAGE = """\
When init_host finds a server in RESIZE_MIGRATING or MIGRATING on its
source, it rolls the move back and clears the task state, but the
allocations stay as the move made them: the instance consumer holds the
destination's claim, the migration consumer what the server had on this
host.

_init_instance now gives them back (_return_interrupted_move) just
before nova's init rolls the move back, where nova's init will reach
its roll-back: while the task state is the move's, no other request can
start a move whose claim or migration context the give-back would undo,
which it could once nova's init has saved the task state None. Only on
positive evidence: the guest must be on this host (the driver has it).
The migration's allocations are moved back to the instance with the
instance consumer's generation (_revert_allocation, which removes them
instead if the server was deleted meanwhile), replacing the
destination's claim, and the migration is recorded 'error' (a running
live migration is left to nova's init, which aborts it and records it
'error'); a cold migration or resize also drops the instance's
migration context and stashed flavors, in the database through a copy,
the task state still required, so that nova's roll-back reads what it
did. Where the guest is not on this host (a live migration that ended
on the destination before its source stopped) nothing is changed and a
warning says what is left. It costs two database queries and one move
of allocations per server whose move was interrupted, and nothing for
the others.

The regression tests now assert that the server holds exactly its flavor
on its host, that no migration of it is left in progress, and that its
delete leaves nothing."""

RECREATE_FINISH_MESSAGE = """\
resize_instance on the source moves the instance to the destination
(its host and node) and casts finish_resize there. A destination compute
service that stops inside the driver's finish_migration and starts again
finds the server in RESIZE_FINISH: init_host has no branch for that task
state and leaves it there, where no request acts on it, with its
migration 'post-migrating' and holding the source node for as long as
the server lives.

This adds a functional regression test that stops the destination in
finish_migration and starts it again. It asserts what is left under a
FIXME; the change that fixes it flips the assertions."""

FINISH_MESSAGE = """\
A resize whose finish the destination was running when its compute
service stopped (inside the driver's finish_migration) was left by
init_host in RESIZE_FINISH, its migration holding the source node.

_init_instance now ends it as a failed finish_resize does
(_error_out_interrupted_finish): the migration is recorded 'error', the
allocations it holds on the source node are removed
(_delete_allocation_after_move), the instance keeps the destination's,
where a hard reboot may recover it, and it is put in ERROR with no task
state, which its user and the operator can act on. A warning says so.

The regression test now asserts that state."""

RECREATE_REVERT_MESSAGE = """\
finish_revert_resize on the source saves the instance back on the source
(its host, node and old flavor), moves the allocations back to it and
calls the driver's finish_revert_migration. A source compute service
that stops inside that call and starts again finds the server in
RESIZE_REVERTING: init_host has no branch for that task state and leaves
it there, where no request acts on it.

This adds a functional regression test that stops the source in
finish_revert_migration and starts it again. It asserts what is left
under a FIXME; the change that fixes it flips the assertions."""

REVERT_MESSAGE = """\
A revert whose finish the source was running when its compute service
stopped (inside the driver's finish_revert_migration) was left by
init_host in RESIZE_REVERTING.

_init_instance now finishes it (_finish_interrupted_revert), as init
finishes a resize interrupted on its source: the driver's
finish_revert_migration again, then what finish_revert_resize does
after it (the migration context and the stashed flavors dropped, the
vm_state the server had before the resize), and the migration recorded
'reverted'. If the migration still holds allocations (a stop before they
were moved back) they are moved back first. A failure puts the server
in ERROR with its migration 'error', as a failed finish_revert_resize
does.

The regression test now asserts that the server is ACTIVE on its
source and its migration 'reverted'."""

RECREATE_SLUG = 'Recreate-a-move-interrupted-on-its-source'
FIX_SLUG = 'Give-back-the-allocations-of-a-move-interrupted-on-its-source'
NOVA_TEST = 'nova/tests/functional/compute/test_interrupted_moves.py'
TARGETS = (
    'nova.compute.manager:ComputeManager._init_instance',
    'nova.compute.manager:ComputeManager._return_interrupted_move',
)
NOTES = ('interrupted-moves-give-back-allocations-2f7c9b14e0d6a583.yaml',)
RECREATE_FINISH_SLUG = ('Recreate-a-resize-finish-interrupted-on-its-'
                        'destination')
FINISH_SLUG = 'End-in-ERROR-a-resize-finish-interrupted-on-its-destination'
FINISH_TEST = 'nova/tests/functional/compute/test_interrupted_finish.py'
FINISH_NOTES = ('interrupted-moves-resize-finish-7b3e5d20c9a41f86.yaml',)
RECREATE_REVERT_SLUG = 'Recreate-a-revert-interrupted-on-its-source'
REVERT_SLUG = 'Finish-a-revert-interrupted-on-its-source'
REVERT_TEST = 'nova/tests/functional/compute/test_interrupted_revert.py'
REVERT_NOTES = ('interrupted-moves-revert-finish-4d81a6c3e2b95f07.yaml',)

FIX = registry.Fix(
    bug='interrupted_moves',
    title='A server whose move was interrupted on its source holds the '
          'destination, and its migration the source',
    open_upstream=True,
    upstream='open; init_host rolls back RESIZE_MIGRATING and MIGRATING '
             'without touching placement',
    targets=(
        registry.Target('nova.compute.manager:ComputeManager._init_instance',
                        'nova_fixes.nova.compute.manager:_init_instance',
                        original_as='_init_instance_as_nova_does',
                        services=('compute',)),
        registry.Target('nova.compute.manager:'
                        'ComputeManager._return_interrupted_move',
                        'nova_fixes.nova.compute.manager:'
                        '_return_interrupted_move', new=True,
                        services=('compute',)),
        registry.Target('nova.compute.manager:'
                        'ComputeManager._error_out_interrupted_finish',
                        'nova_fixes.nova.compute.manager:'
                        '_error_out_interrupted_finish', new=True,
                        services=('compute',)),
        registry.Target('nova.compute.manager:'
                        'ComputeManager._finish_interrupted_revert',
                        'nova_fixes.nova.compute.manager:'
                        '_finish_interrupted_revert', new=True,
                        services=('compute',)),
    ),
    tests=('test_survivors',),
    nova_flips=('nova.tests.functional.compute.test_init_host.'
                'ComputeManagerInitHostTestCase.'
                'test_migrate_disk_and_power_off_crash_finish_revert_'
                'migration',),
    nova_tests=(
        registry.NovaTest(
            NOVA_TEST, 'test_interrupted_moves.py',
            pairs=(
                ('test_source_stops_in_migrate_disk_and_power_off',
                 'test_survivors.ColdMigrationSourceDiesTest.'
                 'test_source_dies_in_migrate_disk_and_power_off'),
                ('test_source_stops_in_live_migration',
                 'test_survivors.LiveMigrationSourceDiesTest.'
                 'test_source_dies_in_live_migration'),
            )),
        registry.NovaTest(
            FINISH_TEST, 'test_interrupted_finish.py',
            pairs=(
                ('test_destination_stops_in_finish_migration',
                 'test_survivors.FinishDestinationDiesTest.'
                 'test_destination_dies_in_finish_migration'),
            )),
        registry.NovaTest(
            REVERT_TEST, 'test_interrupted_revert.py',
            pairs=(
                ('test_source_stops_in_finish_revert_migration',
                 'test_survivors.RevertSourceDiesTest.'
                 'test_source_dies_in_finish_revert_migration'),
            )),
    ),
    notes=NOTES + FINISH_NOTES + REVERT_NOTES,
    unit_tests=(
        registry.NovaUnitTests('nova/tests/unit/compute/test_compute_mgr.py',
                               'compute_mgr_interrupted_moves.py'),
        registry.NovaUnitTests('nova/tests/unit/compute/test_compute_mgr.py',
                               'compute_mgr_interrupted_finish.py'),
        registry.NovaUnitTests('nova/tests/unit/compute/test_compute_mgr.py',
                               'compute_mgr_interrupted_revert.py'),
    ),
    patch=registry.Patch(
        slug=FIX_SLUG,
        subject='Give back the allocations of a move interrupted on its '
                'source',
        body=FIX_MESSAGE,
        trailers=('Closes-Bug: #1836369',),
        test_edits=(flip_1836369_fixmes,),
        changes=(
            registry.Change(
                slug=RECREATE_SLUG,
                subject='Recreate a move interrupted on its source',
                body=RECREATE_MESSAGE,
                trailers=('Related-Bug: #1836369',),
                recreates=(NOVA_TEST,),
                needs=()),
            registry.Change(
                slug=FIX_SLUG,
                subject='Give back the allocations of a move interrupted '
                        'on its source',
                body=FIX_MESSAGE,
                trailers=('Closes-Bug: #1836369',),
                targets=TARGETS,
                test_edits=('flip_1836369_fixmes',),
                nova_tests=(NOVA_TEST,),
                notes=NOTES,
                unit_tests=('compute_mgr_interrupted_moves.py',),
                needs=(RECREATE_SLUG,)),
            registry.Change(
                slug=RECREATE_FINISH_SLUG,
                subject='Recreate a resize finish interrupted on its '
                        'destination',
                body=RECREATE_FINISH_MESSAGE,
                trailers=('Related-Bug: #1836369',),
                recreates=(FINISH_TEST,),
                needs=(RECREATE_SLUG,)),
            registry.Change(
                slug=FINISH_SLUG,
                subject='End in ERROR a resize finish interrupted on its '
                        'destination',
                body=FINISH_MESSAGE,
                trailers=('Related-Bug: #1836369',),
                targets=('nova.compute.manager:'
                         'ComputeManager._error_out_interrupted_finish',),
                grows=(('nova.compute.manager:ComputeManager._init_instance',
                        ('_error_out_interrupted_finish',)),),
                nova_tests=(FINISH_TEST,),
                notes=FINISH_NOTES,
                unit_tests=('compute_mgr_interrupted_finish.py',),
                needs=(FIX_SLUG, RECREATE_FINISH_SLUG)),
            registry.Change(
                slug=RECREATE_REVERT_SLUG,
                subject='Recreate a revert interrupted on its source',
                body=RECREATE_REVERT_MESSAGE,
                trailers=('Related-Bug: #1836369',),
                recreates=(REVERT_TEST,),
                needs=(RECREATE_SLUG,)),
            registry.Change(
                slug=REVERT_SLUG,
                subject='Finish a revert interrupted on its source',
                body=REVERT_MESSAGE,
                trailers=('Related-Bug: #1836369',),
                targets=('nova.compute.manager:'
                         'ComputeManager._finish_interrupted_revert',),
                grows=(('nova.compute.manager:ComputeManager._init_instance',
                        ('_finish_interrupted_revert',)),),
                nova_tests=(REVERT_TEST,),
                notes=REVERT_NOTES,
                unit_tests=('compute_mgr_interrupted_revert.py',),
                needs=(FIX_SLUG, RECREATE_REVERT_SLUG)),
        ),
    ),
)
