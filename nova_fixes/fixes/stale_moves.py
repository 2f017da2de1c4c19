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

"""Stale moves: a move that failed while placement was unreachable (its
rollback could not give the allocations back) leaves a live server
holding the destination's claim or nothing, and a migration of a move
that is over holding the source, for as long as the server lives. The
resource tracker's periodic only warns about them. No Launchpad bug
names it; it is a neighbour of bug 1836369 (moves interrupted by a
compute that stopped), found by the race explorer's survive mode.
"""

import ast

from nova_fixes import errors
from nova_fixes.export import edits
from nova_fixes import registry

RT = 'nova.compute.resource_tracker:ResourceTracker.'
DROPIN = 'nova_fixes.nova.compute.resource_tracker:'

RECREATE_SLUG = 'Recreate-a-move-rolled-back-while-placement-is-down'
FIX_SLUG = 'Correct-the-allocations-of-a-move-that-is-over-periodically'
NOVA_TEST = 'nova/tests/functional/compute/test_stale_move_allocations.py'
NOTES = ('stale-move-allocations-8d41c6e0b2f7a935.yaml',)
RT_UNIT = 'nova/tests/unit/compute/test_resource_tracker.py'

TARGETS = (
    registry.Target(RT + '_remove_deleted_instances_allocations',
                    DROPIN + '_remove_deleted_instances_allocations',
                    services=('compute',)),
    registry.Target(RT + '_ended_migration', DROPIN + '_ended_migration',
                    new=True, services=('compute',)),
    registry.Target(RT + '_abandoned_move', DROPIN + '_abandoned_move',
                    new=True, services=('compute',)),
    registry.Target(RT + '_settled_instance', DROPIN + '_settled_instance',
                    new=True, services=('compute',)),
    registry.Target(RT + '_correct_ended_move',
                    DROPIN + '_correct_ended_move', new=True,
                    services=('compute',)),
    registry.Target(RT + '_correct_unhosted_instance',
                    DROPIN + '_correct_unhosted_instance', new=True,
                    services=('compute',)),
    registry.Target(RT + '_finish_failed_on_destination',
                    DROPIN + '_finish_failed_on_destination', new=True,
                    services=('compute',)),
    registry.Target(RT + '_correct_moved_instance',
                    DROPIN + '_correct_moved_instance', new=True,
                    services=('compute',)),
)

#: nova's unit test of a consumer that is not an instance of this cell
#: (a build racing with its record, or an archived server): the periodic
#: now asks whether it is the migration of a move that is over.
BUILDING_TEST = 'test_remove_deleted_instances_allocations_building_instance'


def building_instance_is_no_migration(files):
    """nova's test of an allocation whose consumer is not found as an
    instance runs with no database: the periodic now looks the consumer
    up as a migration too, so the test says it is none either. What it
    asserts is unchanged: nothing is deleted.
    """
    def edit(text):
        func = edits.function(ast.parse(text), BUILDING_TEST)
        if func is None or not func.decorator_list:
            raise errors.ExportError('%s has no %s to update'
                                     % (RT_UNIT, BUILDING_TEST))
        lines = text.splitlines(True)
        at = func.decorator_list[0].lineno
        indent = ' ' * func.col_offset
        lines.insert(at - 1, (
            "%s@mock.patch('nova.objects.Migration.get_by_uuid',\n"
            "%s            new=mock.Mock(side_effect=exc.MigrationNotFound(\n"
            "%s                migration_id=uuids.deleted)))\n"
            % ((indent,) * 3)))
        return ''.join(lines)

    return edits.edit_python(files, RT_UNIT, edit)


RECREATE_MESSAGE = """\
A cold or live migration whose rollback runs while placement is
unreachable cannot give its allocations back: the conductor (the
scheduler found no host) or the compute (prep_resize could not claim)
logs the failure and records the migration 'error'. The server lives on
its source, but placement keeps the source's allocations under the
migration consumer of a move that is over, and the instance consumer
holds nothing, or the destination's claim, for as long as the server
lives. The same outage during a build that fails, a shelve offload or an
unshelve leaves a server with no host to run on (ERROR, or
SHELVED_OFFLOADED) holding the scheduler's claim; a resize on the same
host whose prep_resize fails leaves the instance holding the new
flavor's claim and the migration the old flavor its guest uses; a cold
migration or resize whose finish_resize fails on the destination leaves
the server there in ERROR and the migration holding the source, which
that failure's handler could not remove. Once placement is back, the
resource tracker's periodic skips the migration ('error' migrations are
loaded with the moves in progress) and only warns about the instance
consumer on the destination; the quota counted from placement counts the
flavor twice.

A move can also stop with nothing to end it: the destination's
prep_resize fails before its body runs (the write of its instance action
event fails: the cell database was briefly gone) and reverts_task_state
clears the task state, or the prep_resize cast is lost and the source's
init_host clears the task state RESIZE_PREP at its restart. The server
lives on its source, ACTIVE with no task state, but its migration stays
'pre-migrating' for ever, holding the source's allocations, and the
instance consumer keeps the destination's claim. The resource tracker
takes it for a move in progress.

This adds functional regression tests that take placement down as the
conductor asks the scheduler for a host, as the destination prepares or
finishes the resize, as the compute builds, offloads or unshelves the
server, bring it back, run the periodics and check what the server
holds; and tests that fail the prep_resize event's write or lose its
cast, then run the periodics an hour later. They assert what is left
under a FIXME; the change that fixes it flips them."""

FIX_MESSAGE = """\
ResourceTracker._remove_deleted_instances_allocations skipped every
migration it loaded, 'error' ones included, and only warned about an
instance consumer holding a node its instance has left, so what a move
that ended without giving its allocations back (a rollback while
placement was unreachable, see the previous change) left stayed for as
long as the server lived.

The periodic now corrects them when it has positive evidence, and warns
as before otherwise:

- a migration consumer of a move that is over ('error', or a migration
  in another ended status found when the consumer is not an instance)
  holding this node: when the server is deleted its allocations are
  removed; when the server is settled (read again: no task state, not
  VERIFY_RESIZE, no migration of it in progress here) and its guest runs
  on this node (its host and node are this one's and the driver has the
  guest), they are moved to the instance consumer, replacing what it
  holds; when its guest is elsewhere, this node is removed from them.
  When the instance consumer holds this node too (a resize on this
  same host), the flavor the instance uses decides: if the migration
  holds exactly that and the instance something else (the new
  flavor's claim of a resize that failed before its finish), the
  migration's allocations are moved to the instance; otherwise (the
  resize finished) this node is removed from the migration's;
- an instance consumer holding this node while its settled instance
  lives on another host and the driver has no guest of it here: this
  node is removed from its allocations;
- an instance consumer holding this node while its server has no host
  to run on (a build that failed: ERROR without a host; a shelved
  offloaded server, whose failed offload may have left its host set),
  when the server, read again after the consumer's allocations and
  generation, is settled and the driver has no guest of it here: this
  node is removed from its allocations. Its release could not reach
  placement (the build's rollback, a shelve offload or an unshelve that
  failed while placement was unreachable), and the periodic took such
  a server for one being scheduled, or did not know what to do;
- a migration consumer of a cold migration or resize whose finish
  failed on its destination, where its settled instance now is, still
  holding this node, its source: this node is removed from its
  allocations, as finish_resize's failure does when it can reach
  placement. The evidence is nova's own record (the migration 'error',
  the instance's host and node the destination's, the move's instance
  action with a failed compute_finish_resize event), not the driver:
  the source keeps its powered-off guest until the move is confirmed.
  A revert that failed on the destination is not one and is left;
- a migration consumer of a move nothing will end: its migration still
  in progress, its instance with no task state and not resized, both
  records unchanged for ABANDONED_AFTER seconds (five minutes). Every
  move sets a task state before its migration exists and keeps one
  until it ends, but for VERIFY_RESIZE; such a move stopped when one
  of its RPC handlers failed before its body ran (reverts_task_state
  cleared the task state) or when init_host cleared RESIZE_PREP at a
  restart. The migration is recorded 'error' and its allocations are
  then corrected as above. The grace covers a move's last steps (a live
  migration's destination clears the task state just before its source
  records the migration completed); the instance is read only for a
  migration unchanged for that long.

The writes name the consumer generations read, so that an operation
that starts meanwhile makes placement refuse them and the next run looks
again. Nothing changes when nothing is wrong: the extra database reads
and driver calls are made only for a consumer nothing on this node
accounts for, and no placement request is added.

nova's test of an allocation whose consumer is not found as an instance
(test_remove_deleted_instances_allocations_building_instance) runs with
no database: it now also says the consumer is no migration, since the
periodic asks; it still asserts that nothing is deleted."""

FIX = registry.Fix(
    bug='stale_moves',
    title='A move rolled back while placement is unreachable leaves its '
          'allocations with the server alive',
    open_upstream=True,
    upstream='open; the resource tracker only warns (related to bug '
             '1836369)',
    targets=TARGETS,
    tests=('test_stale_moves',),
    nova_tests=(
        registry.NovaTest(
            NOVA_TEST, 'test_stale_move_allocations.py',
            pairs=(
                ('test_live_migration_scheduling_fails',
                 'test_stale_moves.RollbackWithoutPlacementTest.'
                 'test_live_migration_scheduling_fails'),
                ('test_cold_migration_prep_resize_fails',
                 'test_stale_moves.RollbackWithoutPlacementTest.'
                 'test_cold_migration_prep_resize_fails'),
                ('test_build_fails',
                 'test_stale_moves.UnhostedWithoutPlacementTest.'
                 'test_build_fails'),
                ('test_shelve_offload_fails',
                 'test_stale_moves.UnhostedWithoutPlacementTest.'
                 'test_shelve_offload_fails'),
                ('test_unshelve_fails',
                 'test_stale_moves.UnhostedWithoutPlacementTest.'
                 'test_unshelve_fails'),
                ('test_cold_migration_finish_fails',
                 'test_stale_moves.FinishFailsWithoutPlacementTest.'
                 'test_cold_migration_finish_fails'),
                ('test_resize_finish_fails',
                 'test_stale_moves.FinishFailsWithoutPlacementTest.'
                 'test_resize_finish_fails'),
                ('test_resize_prep_resize_fails',
                 'test_stale_moves.SameHostResizeWithoutPlacementTest.'
                 'test_resize_prep_resize_fails'),
                ('test_cold_migration_prep_resize_event_fails',
                 'test_stale_moves.AbandonedMoveTest.'
                 'test_cold_migration_prep_resize_event_fails'),
                ('test_resize_prep_resize_event_fails',
                 'test_stale_moves.AbandonedMoveTest.'
                 'test_resize_prep_resize_event_fails'),
                ('test_source_restarts_after_the_cast_was_lost',
                 'test_stale_moves.AbandonedMoveTest.'
                 'test_source_restarts_after_the_cast_was_lost'),
            )),
    ),
    notes=NOTES,
    unit_tests=(
        registry.NovaUnitTests(RT_UNIT, 'rt_stale_moves.py'),
    ),
    patch=registry.Patch(
        slug=FIX_SLUG,
        subject='Correct the allocations of a move that is over '
                'periodically',
        body=FIX_MESSAGE,
        trailers=('Related-Bug: #1836369',),
        test_edits=(building_instance_is_no_migration,),
        changes=(
            registry.Change(
                slug=RECREATE_SLUG,
                subject='Recreate a move rolled back while placement is '
                        'down',
                body=RECREATE_MESSAGE,
                trailers=('Related-Bug: #1836369',),
                recreates=(NOVA_TEST,),
                needs=()),
            registry.Change(
                slug=FIX_SLUG,
                subject='Correct the allocations of a move that is over '
                        'periodically',
                body=FIX_MESSAGE,
                trailers=('Related-Bug: #1836369',),
                targets=tuple(target.path for target in TARGETS),
                nova_tests=(NOVA_TEST,),
                notes=NOTES,
                test_edits=('building_instance_is_no_migration',),
                unit_tests=('rt_stale_moves.py',),
                needs=(RECREATE_SLUG,)),
        ),
    ),
)
