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

"""Bug 1848343: reverting a migration's allocations leaks them if the
server is deleted.

https://bugs.launchpad.net/nova/+bug/1848343
"""

import ast
import re
import textwrap

from nova_fixes import errors
from nova_fixes.export import edits
from nova_fixes import registry

REVERT_MESSAGE = """\
When a cold migration, resize or live migration fails or is reverted,
the allocations the migration consumer holds on the source node are
moved back to the instance consumer. If the server was deleted during
the move, its instance consumer is gone from placement, and
move_allocations created it again: the source node's resources stay
allocated to a server that no longer exists, forever, since nothing
deletes the allocations of a deleted server's consumer again.

move_allocations gains target_consumer_generation_required: when the
caller requires it, the target consumer must exist and its generation
is passed to placement with the move, so a target deleted concurrently
makes placement refuse the write. A missing target gets nothing; the
source consumer's allocations are removed and
AllocationMoveTargetNotFound is raised.

The compute's _revert_allocation requires it: during a move the
instance consumer holds the destination allocations, so it exists
unless the server was deleted. A scheduler claim that lands after the
delete can create the instance consumer again, so once the allocations
are written, _revert_allocation looks the instance up
(compute_utils.delete_allocations_if_deleted, after the write and never
before): a deleted instance, or one being deleted, loses what was
written for it and its migration. Every delete path records DELETING or
DELETED before it removes the allocations, so a delete either comes
after the write and removes it, or is seen by the lookup.

The conductor's rollback of a cold migration or a live migration
(revert_allocation_for_migration) cannot use the generation: the
conductor moved the instance's allocations to the migration consumer,
so the instance consumer does not exist in placement, live server or
not. It reverts as before, unless the migration holds nothing any more,
then does the same lookup.

nova's regression test for the bug asserted the leak under a FIXME; it
now asserts that no allocation is left. The other ways a server deleted
during its move leaks allocations are the later changes'."""

RECREATE_CLAIM_MESSAGE = """\
The scheduler's claim for a move is written for the instance consumer.
When the server is deleted while the scheduler picks the destination,
the claim lands after the delete removed the server's allocations and
creates its consumer again on the destination. A cold migration or a
resize then fails on the compute, whose revert removes what it finds
for a deleted server; a live migration has no compute-side claim, so
nothing notices, and the destination's resources stay allocated to a
server that no longer exists.

This adds a functional regression test that deletes the server just
before the scheduler claims for its live migration. The claim is left
on the destination: the test asserts that under a FIXME, and the change
that fixes it flips the assertion."""

CLAIM_MESSAGE = """\
A step that writes allocations for a server during a move may do so
after the server was deleted, and create again a consumer nobody will
delete: the scheduler's claim for a cold migration, resize or live
migration (neither a live migration nor a cross-cell resize has a
compute-side claim that would notice), or the claim of an evacuation or
an unshelve that lands after the API deleted the server (rebuild_instance
or unshelve_instance then fails on the deleted server and removes
nothing).

Each of these now looks the instance up after it has written, never
before (compute_utils.delete_allocations_if_deleted, as the revert
paths do): the conductor once the scheduler has claimed a destination
(MigrationTask._schedule, LiveMigrationTask._find_destination), which
then stops the move, and the compute when a rebuild or an unshelve
fails on a deleted instance. Every delete path records DELETING or
DELETED before it removes the allocations, so a delete either comes
after the write and removes it, or is seen by the lookup. This costs one
instance lookup per cold migration, resize and live migration.

The regression test now asserts that the claim is gone."""

DELETE_MESSAGE = """\
A server deleted in the middle of a move can leave the allocations its
migration holds on the source node: a revert not finished yet
(finish_revert_resize fails on the deleted instance before it moves
anything back) or a live migration completing
(post_live_migration_at_destination fails before the source's
allocations are removed) left the migration consumer there, and the
resource tracker never heals it. nova's ConsumerGenerationConflictTest
asserts that leak in four tests.

The compute's delete (_complete_deletion) now also removes the
allocations of the migrations of the server that may still hold some.
A migration that ended having released its allocations (confirmed,
completed, done) is not read, so a delete costs the same whatever the
server's history; when the source cannot delete them after a confirmed
resize or a completed live migration (placement unreachable, which the
report client only logs, or a failure),
_delete_allocation_after_move records the migration 'error', and the
delete of the server removes them.

_complete_deletion's callers destroy the record after it, "therefore
allocation is successfully deleted in placement", but the report client
only logs a placement it cannot reach: the record was destroyed with
the allocations left. The allocations of the server and of its
migrations are now deleted first, and AllocationDeleteFailed is raised
with the record kept: the user gets an ERROR server it can delete
again. nova's own delete then finds nothing left (one more request).

The four tests of ConsumerGenerationConflictTest now assert that no
allocation is left. The API's own delete of a server, when its compute
is down, is a later change's.

Because the allocations go before the resource tracker's update of the
deletion, a PCI device removed from [pci]device_spec while the server
used it has its resource provider deleted by that update, where nova
kept it until the next periodic task: nothing holds the device any more
and the tracker has already dropped it, so waiting for the periodic
only kept a provider of a device that is gone. The four tests of
PlacementPCIInventoryReportingTests that remove a device in use (2025.1
on) now expect its provider gone after the delete, and still gone after
the periodics or the compute's restart."""

RECREATE_LOCAL_DELETE_MESSAGE = """\
When a server's compute service is down, or the server is shelved
offloaded, the API deletes the server itself (_local_delete). It
removes the allocations through the report client, which only logs a
placement it cannot reach, then destroys the record: when placement is
unreachable, the DELETE answers 204 and the allocations stay, with no
record left to name them.

This adds a functional regression test of that delete. It asserts the
leaked allocations under a FIXME; the change that fixes it flips the
assertion."""

LOCAL_DELETE_MESSAGE = """\
A delete must complete or fail in a way the user can retry, also when
placement cannot be reached.

* The API's local delete now deletes the allocations of the server and
  of its migrations first, and refuses the delete with
  PlacementUnavailableForDelete (503, the delete can be retried) when
  that fails, before anything is destroyed. API._delete puts back the
  task state the DELETE saved (change "Put the task state back when a
  delete fails"), so the user can delete the server again, also once its
  compute is back. An API that dies after the record is destroyed
  leaves nothing either.
* The API's confirm-on-delete of a server in VERIFY_RESIZE fails on the
  source compute when placement is down, and the DELETE answered 500.
  When placement does not answer the API either, that failure is now
  PlacementUnavailableForDelete too; a confirm that gets no answer is
  ConfirmNotAnsweredForDelete.

The regression test now asserts that the DELETE is refused, the server
left as it was, and that deleting it again once placement is back
leaves nothing.

nova's test_bug_1679750 deletes a server locally while nova-api cannot
reach placement (none is configured for it) and expected a 204, the
allocations left for the compute's resource tracker to heal once the
compute restarts. That layout is not supported: nova-api has required
the [placement] section since bug 1679750 was fixed (that fix's upgrade
note), and uses placement for more than this delete (host aggregates,
the provider of a deleted compute service, a boot to a given hypervisor
hostname, usage counted from placement). And that healing comes only if
the compute comes back before the deleted server's row is archived,
never for a migration's allocations. The test now expects the 503 with
the server left as it was, deletes the server again once placement
answers, which removes its allocations, and checks that the restarted
compute leaves the usages as they were before the server."""

RECREATE_RETRY_MESSAGE = """\
The API saves the DELETING task state before it casts the delete to the
server's compute. When the DELETE stops in between (the nova-api
process restarted or killed, the message lost), the server is left in
DELETING, and nova ignores every later DELETE of a server in a delete's
task state whose compute is up ("already in deleting state"): the
server, its guest and its allocations stay until an administrator's
reset-state.

This adds a functional regression test of it. It asserts the server
left behind under a FIXME; the change that fixes it flips it."""

RESTORE_MESSAGE = """\
A delete must complete or fail in a way the user can retry.

API._delete saves the delete's task state (DELETING, or SOFT_DELETING)
before it confirms a resize, deletes the server locally or casts the
delete to its compute. When one of those steps failed (the confirm of a
resize, a local delete), the server was left in that task state, and
every later DELETE of it through its compute was ignored as one under
way ("already in deleting state"): no request could remove it any more.

API._delete now delegates to nova's delete, renamed
_delete_as_requested, and when that fails once it has saved the
delete's task state, puts the task state back as it was before the
request (expecting the delete's own, so that a task state someone else
set since is left alone). The user gets the delete's error and can
retry. Later changes of the series refuse deletes with retryable
errors on this."""

RETRY_MESSAGE = """\
A delete that stopped between the API's save of the DELETING (or
SOFT_DELETING) task state and its cast to the compute cannot put
anything back: the API process is gone. Every later DELETE of the
server was ignored as one under way while its compute is up.

A DELETE of a server in a delete's task state that nothing updated for
longer than [DEFAULT]rpc_response_timeout now sends the delete again
(_delete_left_behind); a delete still running on the compute takes the
second one after it under the instance's lock and finds the server
gone. A DELETE that nova ignores as one under way is now ignored before
the API saves the server (_delete_under_way): that save refreshed
updated_at, so that a client retrying sooner than rpc_response_timeout
would put the second delete off for good.

The regression test now asserts that the server is deleted and that
nothing is left."""

HOST_CHANGED_MESSAGE = """\
The local delete of a server on no host destroys its record on the
condition that it still has no host. An unshelve or a reschedule that
put the server on a host in between made Instance.destroy refuse
("host changed"): the DELETE answered 500 and left the server DELETED
on its new host, with whatever its compute went on to build there.

API._delete now reads the server again and deletes it as a server on
that host (_delete_on_its_new_host): through its compute when it is up,
which waits for the build under the instance's lock, or locally again.

A server whose compute nilled out its host between the API's read and
its save of DELETING (a build being rescheduled) is deleted as one that
was scheduled, its allocations first: may_have_ports_or_volumes now
answers True for an instance that has a host."""

RECREATE_HIDDEN_MESSAGE = """\
During a cross-cell resize the server has a copy in each cell, and a
DELETE deletes the copy the instance mapping names. When the user
reverts the resize and deletes the server before the conductor runs
the revert, the revert then points the mapping back at the source cell
and shows the copy there again: the deleted server is back, counted in
the project's quota usage.

This adds a functional regression test of it. It asserts the server
shown again under a FIXME; the change that fixes it flips it."""

HIDDEN_MESSAGE = """\
Only a successful cross-cell confirm or revert deletes the copy the
resize leaves in the other cell. When one failed, the server went to
ERROR with the other copy hidden, and a DELETE removed only the copy
the instance mapping names. A server deleted in VERIFY_RESIZE has such
a copy too, which a revert the user asked for before would show again
(the regression test).

API._delete now also deletes the hidden copy of a server in ERROR or
RESIZED once its own delete is done (_hidden_copies, and
delete_instance_of_deleted_server in the cross-cell conductor tasks,
which a later change of the series uses too). A lookup that fails costs
the delete nothing: the copy is left, as before.

The regression test now asserts that the server is deleted, in every
cell, and that nothing is left."""


RECREATE_CONFIRM_MESSAGE = """\
The API confirms the resize of a server it deletes in VERIFY_RESIZE.
When the user's own confirmation is still running on the source, the
delete's confirmation waits for the server's lock, then confirms again
on the migration status the API had read, fails on the migration
context the first one dropped, puts the server in ERROR and fails the
DELETE: the server, its quota usage and its allocations are left.

This adds a functional regression test that deletes the server while
the user's confirmation holds the lock on the source. It asserts the
failed DELETE under a FIXME; the change that fixes it flips the
assertion."""

CONFIRM_MESSAGE = """\
A delete while the user's confirmation of a resize runs on the source
must not fail: the delete's own confirmation ran once it had waited for
the server's lock, on the migration status the API had read before,
and failed on the dropped migration context.

The source's _confirm_resize now reads the migration again once it
holds the lock, and returns when it is already confirmed. That is one
more database read per confirmation.

The regression test now asserts that the DELETE succeeds and nothing
is left."""

RECREATE_CROSS_CELL_MESSAGE = """\
The API confirms the resize of a server it deletes in VERIFY_RESIZE,
also a cross-cell resize the user is confirming already. The first
confirmation to return from the source makes its task hard-delete the
source cell's copy of the server with its instance actions; the other,
which waited for the server's lock on the source, then fails on the
action it was recorded under (InstanceActionNotFound), its task rolls
back, the server goes to ERROR and the DELETE answers 500: the server,
its quota usage and its allocations stay.

This adds a functional regression test that deletes the server while
the user's cross-cell confirmation holds the lock on the source. It
asserts the failed DELETE under a FIXME; the change that fixes it flips
the assertion."""

CROSS_CELL_MESSAGE = """\
During a cross-cell resize the server has a copy in each cell, and a
DELETE deletes the copy the instance mapping names. When the user
reverts the resize and deletes the server before the conductor runs
the revert, the delete removes the target cell's copy, then the revert
points the mapping back at the source cell and shows the copy there
again: the deleted server is back, counted in the project's quota
usage.

This adds a functional regression test of that sequence, asserting the
server is back under a FIXME; the change that fixes it flips the
assertion."""

CROSS_CELL_MESSAGE = """\
A server deleted during a cross-cell resize must be deleted in both
cells.

* The tasks that swap the instance mapping (FinishResizeAtDestTask and
  RevertResizeTask _update_instance_mapping) now look, once the swap is
  saved, whether the copy they pointed away from is deleted or being
  deleted, and then delete the other copy as the API would (DELETING, a
  delete action, terminate_instance on its host); a revert stops there
  (InstanceDeletedDuringRevert). Before, a delete while the destination
  finished left the target cell's copy and its guest; a delete before
  the conductor reverts, whose hidden copy API._delete now deletes, is
  also stopped by the revert itself.
* The API confirms a cross-cell resize of a server it deletes in
  VERIFY_RESIZE also when the user's confirmation is running; the first
  to return from the source hard-deletes the source cell's copy, and
  the other then failed (InstanceActionNotFound), was rolled back and
  failed the DELETE. ConfirmResizeTask, when it fails and the source
  cell's copy is gone, finishes the confirmation in the target cell
  instead.
* For a cross-cell resize the source's 'error' for allocations it could
  not release is in the source cell, which the conductor hard-deletes:
  ConfirmResizeTask carries it to the target cell's migration, the one
  the delete reads.

The regression test now asserts that the DELETE succeeds and nothing
is left."""

RECREATE_RESTART_MESSAGE = """\
A move's source records the migration confirmed (or completed) and then
deletes the allocations the migration consumer holds on its node. A
source compute service that stops between the two leaves them: the
resource tracker only considers moves in progress, and a delete of the
server skips finished migrations, so nothing removes them, during the
server's life or after.

This adds a functional regression test that stops the source right
before that release, restarts it and deletes the server. It asserts
the leaked allocations under a FIXME; the change that fixes it flips
the assertion."""

RESTART_MESSAGE = """\
A compute service that stopped in the middle of a step must finish it
when it starts again, or later, without an operator:

* A source that stops between recording a migration confirmed or
  completed and removing its allocations removes them when it starts:
  init_host reads what its nodes hold (one placement request per node)
  and the finished migrations from this host among those consumers (one
  query), and records 'error' a migration whose allocations placement
  does not delete then. A node placement does not return then is read
  again by a periodic task, _remove_allocations_of_finished_moves_left,
  every instance_delete_interval until it is read.
* The compute's reclaim of a soft-deleted server records DELETED and
  then fails when placement is down: the server stayed listed as
  DELETED with its allocations, since only init_host completed such a
  partial deletion. A new periodic task, _complete_partial_deletions,
  does what init_host does every instance_delete_interval, for the
  instances of its host still DELETED once read again under their lock;
  and _complete_partial_deletion now destroys the record only after the
  allocations are removed, so a completion that fails is retried at the
  next run.

The regression test now asserts that nothing is left."""

COMMIT_MESSAGE = """\
Reverting a move no longer gives a deleted server its migration's
allocations back (change "Do not revert allocations to a deleted
server"), and a move's claim that lands after the delete no longer
outlives it (change "Remove what a move's claim wrote for a deleted
server"). A server deleted in the middle
of a move can leave allocations in more ways, and the fix owns the
invariant rather than each call site: once a server is deleted, no
allocation is left for its instance consumer or for any of its
migrations.

* Every delete path (the compute's _complete_deletion, the API's
  _local_delete) now also removes the allocations of the migrations of
  the server that may still hold some: a revert not finished yet
  (finish_revert_resize fails on the deleted instance before it moves
  anything back) or a live migration completing
  (post_live_migration_at_destination fails before the source's
  allocations are removed) left the migration consumer on the source
  node, which the resource tracker never heals. A migration that ended
  having released its allocations (confirmed, completed, done) is not
  read, so that a delete costs the same whatever the server's history;
  when the source cannot delete them after a confirmed resize or a
  completed live migration (placement unreachable, which the report
  client only logs, or a failure), _delete_allocation_after_move
  records the migration 'error', and the delete of the server removes
  them. A source that stops between recording the migration and
  removing its allocations removes them when it starts again: init_host
  reads what its nodes hold (one placement request per node) and the
  finished migrations from this host among those consumers (one query),
  and records 'error' a migration whose allocations placement does not
  delete then; a node placement does not return then is read again by
  a periodic task, _remove_allocations_of_finished_moves_left, every
  instance_delete_interval until it is read. For a cross-cell resize
  the source's 'error' is in the source cell, which the conductor
  hard-deletes: ConfirmResizeTask carries it to the target cell's
  migration, the one the delete reads.

* A delete while the user's confirmation of a resize runs on the source
  is not failed by it: the API confirms the resize of a server it
  deletes in VERIFY_RESIZE, and that second confirmation, once it had
  waited for the server's lock, confirmed again on the migration status
  the API had read, failed on the dropped migration context, put the
  server in ERROR and failed the DELETE, the server and its allocations
  left. The source's _confirm_resize reads the migration again and
  returns when it is already confirmed.

* During a cross-cell resize the server has a copy in each cell, and a
  DELETE deletes the copy the instance mapping names. The tasks that
  swap the mapping (FinishResizeAtDestTask and RevertResizeTask
  _update_instance_mapping) now look, once the swap is saved, whether
  the copy they pointed away from is deleted or being deleted, and then
  delete the other copy as the API would (DELETING, a delete action,
  terminate_instance on its host); a revert stops there
  (InstanceDeletedDuringRevert). Before, a delete while the destination
  finished left the target cell's copy and its guest, and a delete
  before the conductor reverted brought the source cell's copy back.

* The API confirms a cross-cell resize of a server it deletes in
  VERIFY_RESIZE also when the user's confirmation is running; the first
  to return from the source hard-deletes the source cell's copy, and the
  other then failed (InstanceActionNotFound), was rolled back and failed
  the DELETE. ConfirmResizeTask, when it fails and the source cell's
  copy is gone (only a confirmation that cleaned up the source removes
  it), finishes the confirmation in the target cell instead.

* Only a successful cross-cell confirm or revert deletes the copy the
  resize leaves in the other cell; when one failed (a host failed, did
  not answer, or a service stopped), the server went to ERROR with the
  other copy hidden, and a DELETE removed only the copy the mapping
  names. API._delete now also deletes, once its own delete is done, a
  hidden copy that a cross-cell migration of a server in ERROR or
  RESIZED left in the other host's cell.

A delete must complete or fail in a way the user can retry, also when
placement cannot be reached:

* The API's local delete (the server's compute is down, or it is
  shelved offloaded) removed the allocations through the report client,
  which only logs a placement it cannot reach, then destroyed the
  record: the DELETE answered 204 and the allocations stayed with
  nothing naming them. It now deletes the allocations of the server and
  of its migrations first, and refuses the delete with
  PlacementUnavailableForDelete (503, "the delete can be retried") when
  that fails, before anything is destroyed. An API that dies after the
  record is destroyed leaves nothing either. A server whose compute
  nilled out its host between the API's read and its save of DELETING
  (a build being rescheduled) goes through the same local delete:
  compute_utils.may_have_ports_or_volumes answers True for an instance
  that has a host.

* The API's confirm-on-delete of a server in VERIFY_RESIZE fails on the
  source compute when placement is down, and the DELETE answered 500.
  When placement does not answer the API either, that failure is now
  PlacementUnavailableForDelete too.

* A delete that failed after it saved the DELETING (or SOFT_DELETING)
  task state left the server in it, and every later DELETE was ignored
  ("already in deleting state"): only an admin's reset-state could
  remove the server. API._delete now puts the task state back as it was
  when the delete fails, so the user can retry. A delete that stopped
  between that save and its cast to the compute (the API's process
  restarted, the message lost) cannot put anything back: a DELETE of a
  server in a delete's task state that nothing updated for longer than
  rpc_response_timeout now sends the delete again.

* The local delete of a server on no host destroys its record on the
  condition that it still has no host. An unshelve or a reschedule that
  put the server on a host in between made Instance.destroy refuse
  ("host changed"): the DELETE answered 500 and left the server DELETED
  on its new host. API._delete now reads it again and deletes it as a
  server on that host.

* The compute's reclaim of a soft-deleted server records DELETED and
  then fails in the resource tracker when placement is down: the server
  stayed listed as DELETED with its allocations, since the reclaim only
  looks for SOFT_DELETED servers and only init_host completed such a
  partial deletion. A new periodic task, _complete_partial_deletions,
  does what init_host does every instance_delete_interval, for the
  instances of its host still DELETED once read again under their lock;
  and _complete_partial_deletion now destroys the record only after the
  allocations are removed, so a completion that fails leaves the record
  for the next run.

* The compute's delete (_complete_deletion, which its callers run
  before they destroy the record, "therefore allocation is successfully
  deleted in placement") removed the allocations through the report
  client, which only logs a placement it cannot reach: the record was
  destroyed with the allocations left. A compute restarting during an
  outage completes its deletes left DELETED in init_host before its
  resource tracker calls placement at all, so the delete of the
  allocations is the first call to fail. The allocations of the server
  and of its migrations are now deleted first, and a failure is raised
  (AllocationDeleteFailed) with the record kept: the user's delete gets
  an ERROR server it can delete again, and a delete left DELETED is
  completed by the periodic task once placement answers. nova's own
  delete then finds nothing left (one more request).

Four tests of ConsumerGenerationConflictTest asserted that the
migration's allocations outlive the deleted server; they now assert
that no allocation is left."""


def flip_1848343_fixme(files):
    """nova's test_bug_1848343 asserts the leak under a FIXME: flip it.

    In _assert_no_allocations, the branch that expects the deleted
    server's flavor to be allocated on its source host is the bug; with
    the fix, no provider has allocations, which is what the else branch
    asserts. The FIXME comment above the branch goes with it.
    """
    path = 'nova/tests/functional/regressions/test_bug_1848343.py'

    def edit(text):
        tree = ast.parse(text)
        func = edits.function(tree, '_assert_no_allocations')
        branch = None
        for node in ast.walk(func) if func else ():
            if (isinstance(node, ast.If) and node.orelse and
                    edits.calls(ast.Module(body=node.body, type_ignores=[]),
                           'assertFlavorMatchesAllocation')):
                branch = node
        if branch is None:
            raise errors.ExportError(
                '%s: no FIXME branch asserting the leak of bug 1848343 in '
                '_assert_no_allocations' % path)
        lines = text.splitlines(True)
        start = branch.lineno - 1
        while lines[start - 1].strip().startswith('#'):
            start -= 1
        if 'FIXME' not in ''.join(lines[start:branch.lineno - 1]):
            raise errors.ExportError('%s: the branch asserting the leak of '
                                     'bug 1848343 has no FIXME' % path)
        first, last = branch.orelse[0].lineno, branch.orelse[-1].end_lineno
        kept = textwrap.dedent(''.join(lines[first - 1:last]))
        indent = ' ' * branch.col_offset
        kept = textwrap.indent(kept, indent)
        return ''.join(lines[:start]) + kept + ''.join(
            lines[branch.end_lineno:])

    return edits.edit_python(files, path, edit)


#: nova's tests in test_servers.ConsumerGenerationConflictTest that end,
#: after deleting the server, by asserting that the migration consumer's
#: allocations are left ("NOTE(gibi): Nova leaks the allocation held by
#: the migration_uuid even after the instance is deleted").
CONFLICT_TESTS = (
    'test_confirm_migrate_delete_alloc_on_source_fails',
    'test_revert_migrate_delete_dest_allocation_fails_due_to_conflict',
    'test_revert_resize_same_host_delete_dest_fails_due_to_conflict',
    'test_live_migrate_drop_allocation_on_source_fails',
)


def consumer_conflict_leaks(files):
    """nova's ConsumerGenerationConflictTest asserts the leak after the
    delete in four tests: the delete now removes the allocations of the
    server's migrations, so each last assertion (one allocation left for
    the migration's consumer) becomes "none left". What comes before it,
    the error logged while the server lived, is unchanged.
    """
    path = 'nova/tests/functional/test_servers.py'

    def edit(text):
        lines = text.splitlines(True)
        tree = ast.parse(text)
        cls = next((node for node in ast.walk(tree)
                    if isinstance(node, ast.ClassDef) and
                    node.name == 'ConsumerGenerationConflictTest'), None)
        if cls is None:
            raise errors.ExportError('%s has no ConsumerGenerationConflict'
                                     'Test' % path)
        replace = []
        for name in CONFLICT_TESTS:
            func = next((node for node in cls.body
                         if isinstance(node, ast.FunctionDef) and
                         node.name == name), None)
            last = func.body[-1] if func else None
            call = getattr(last, 'value', None)
            attr = getattr(getattr(call, 'func', None), 'attr', None)
            if attr == 'assertEqual' and ast.literal_eval(
                    call.args[0]) == 1:
                # assertEqual(1, len(allocations)) of the migration's.
                new = ['0'] + [ast.get_source_segment(text, a)
                               for a in call.args[1:]]
                body = 'self.assertEqual(%s)\n' % ', '.join(new)
            elif attr == 'assertFlavorMatchesAllocation':
                # (flavor, migration consumer, source provider)
                consumer = ast.get_source_segment(text, call.args[1])
                body = ('self.assertEqual(\n    {}, self._get_allocations_'
                        'by_server_uuid(%s))\n' % consumer)
            else:
                raise errors.ExportError(
                    '%s: ConsumerGenerationConflictTest.%s does not end by '
                    'asserting the leak of bug 1848343' % (path, name))
            indent = ' ' * last.col_offset
            body = ('# Deleting the server removes the allocations its '
                    'migration held.\n' + body)
            replace.append((last.lineno, last.end_lineno,
                            textwrap.indent(body, indent)))
        for first, end, body in sorted(replace, reverse=True):
            lines[first - 1:end] = [body]
        return ''.join(lines)

    return edits.edit_python(files, path, edit)


def revert_allocation_assertions(files):
    """nova's unit tests of _revert_allocation: the new keyword.

    The compute now requires the instance consumer to exist when it moves
    a migration's allocations back: the assertions on that call to
    move_allocations (three positional arguments, no keyword) expect
    target_consumer_generation_required=True.
    """
    changed = {}
    for path in ('nova/tests/unit/compute/test_compute_mgr.py',
                 'nova/tests/unit/compute/test_compute.py'):
        changed.update(edits.edit_python(files, path, _add_required_keyword))
    return changed


def _add_required_keyword(text):
    lines = text.splitlines(True)
    found = []
    for node in ast.walk(ast.parse(text)):
        if (isinstance(node, ast.Call) and
                isinstance(node.func, ast.Attribute) and
                node.func.attr == 'assert_called_once_with' and
                isinstance(node.func.value, ast.Attribute) and
                node.func.value.attr == 'move_allocations' and
                len(node.args) == 3 and not node.keywords):
            found.append(node)
    if not found:
        raise errors.ExportError('no assertion on the move_allocations call '
                                 'of _revert_allocation to update')
    for node in sorted(found, key=lambda n: -n.end_lineno):
        last = node.args[-1]
        line = lines[last.end_lineno - 1]
        indent = ' ' * node.args[0].col_offset
        lines[last.end_lineno - 1] = (
            line[:last.end_col_offset] + ',\n' + indent +
            'target_consumer_generation_required=True' +
            line[last.end_col_offset:])
    return ''.join(lines)


def confirm_rollback_failure(files):
    """nova's unit test of ConfirmResizeTask's rollback: another failure.

    ConfirmResizeTaskTestCase.test_rollback fails the task by not finding
    the source cell's instance. A confirmation that finds the source
    cell's copy gone now finishes in the target cell (another one cleaned
    up the source) instead of rolling back, so the test fails it with a
    missing host mapping, a failure that is rolled back as before.
    """
    path = 'nova/tests/unit/conductor/tasks/test_cross_cell_migrate.py'

    def edit(text):
        tree = ast.parse(text)
        cls = next((node for node in ast.walk(tree)
                    if isinstance(node, ast.ClassDef) and
                    node.name == 'ConfirmResizeTaskTestCase'), None)
        func = edits.function(cls, 'test_rollback') if cls else None
        if func is None or not func.decorator_list:
            raise errors.ExportError('%s has no ConfirmResizeTaskTestCase.'
                                     'test_rollback to update' % path)
        lines = text.splitlines(True)
        first = func.decorator_list[0].lineno
        segment = ''.join(lines[first - 1:func.end_lineno])
        segment, found = re.subn(
            r'exception\.InstanceNotFound\((\s*)instance_id=uuids\.'
            r'instance\)', r"exception.HostMappingNotFound(\1name="
            r"'source-host')", segment)
        segment, raised = re.subn(
            r'assertRaises\(exception\.InstanceNotFound,',
            'assertRaises(exception.HostMappingNotFound,', segment)
        if (found, raised) != (1, 1):
            raise errors.ExportError(
                '%s: ConfirmResizeTaskTestCase.test_rollback does not fail '
                'the task with the source instance not found' % path)
        indent = ' ' * func.col_offset
        comment = (indent + '# Any failure but the source cell\'s copy gone '
                   '(then another\n' + indent + '# confirmation cleaned up '
                   'the source) is rolled back.\n')
        return ''.join(lines[:first - 1]) + comment + segment + ''.join(
            lines[func.end_lineno:])

    return edits.edit_python(files, path, edit)


#: nova unit tests of the API's local delete that have no placement and no
#: database to talk to: the local delete now deletes the allocations of
#: the server and of its migrations before anything else, and refuses the
#: delete when placement cannot be reached, so they get a report client
#: that succeeds and a server without migrations.
LOCAL_DELETE_TESTS = (
    'test_delete_volume_backed_instance_in_shelved_offloaded',
    'test_delete_soft_with_down_host',
    'test_delete_volume_backed_instance_in_error',
    'test_delete_with_down_host',
    'test_local_delete_for_arqs',
    'test_local_delete_with_deleted_volume',
)


def soft_delete_rollback_puts_task_state_back(files):
    """Expect the task state put back when a soft delete fails: nova's
    test_delete_soft_rollback asserted one save (the delete's).
    """
    path = 'nova/tests/unit/compute/test_api.py'

    def edit(text):
        lines = text.splitlines(True)
        rollback = edits.function(ast.parse(text),
                                  'test_delete_soft_rollback')
        last = rollback.body[-1] if rollback else None
        if last is None or ast.get_source_segment(
                text, last) != 'mock_save.assert_called_once_with()':
            raise errors.ExportError(
                '%s: test_delete_soft_rollback does not end by asserting '
                'one save' % path)
        indent = ' ' * last.col_offset
        lines[last.lineno - 1] = (
            "%s# The failed delete puts the task state back.\n"
            "%smock_save.assert_has_calls([\n"
            "%s    mock.call(),\n"
            "%s    mock.call(expected_task_state=['soft-deleting'])])\n"
            % (indent, indent, indent, indent))
        return ''.join(lines)

    return edits.edit_python(files, path, edit)


def local_delete_tests_mock_placement(files):
    """Give nova's unit tests of the local delete a placement: it now
    deletes the allocations of the server and its migrations first, and
    refuses the delete when placement does not answer.
    """
    path = 'nova/tests/unit/compute/test_api.py'

    def edit(text):
        lines = text.splitlines(True)
        tree = ast.parse(text)
        funcs = []
        for name in LOCAL_DELETE_TESTS:
            func = edits.function(tree, name)
            if func is None:
                raise errors.ExportError('%s: no test %s' % (path, name))
            funcs.append(func)
        for func in sorted(funcs, key=lambda f: -f.lineno):
            indent = ' ' * func.col_offset
            at = (func.decorator_list[0].lineno if func.decorator_list
                  else func.lineno)
            lines.insert(at - 1, (
                "%s@mock.patch('nova.compute.utils.migrations_of_instance',\n"
                "%s            new=mock.Mock(return_value=[]))\n"
                "%s@mock.patch('nova.scheduler.client.report."
                "SchedulerReportClient.'\n"
                "%s            'delete_allocation_for_instance',\n"
                "%s            new=mock.Mock(return_value=True))\n"
                % ((indent,) * 5)))
        return ''.join(lines)

    return edits.edit_python(files, path, edit)


#: nova's regression test of bug 1679750 that deletes a server locally
#: while nova-api cannot reach placement: (path, class, test).
RESTART_1679750 = ('nova/tests/functional/regressions/test_bug_1679750.py',
                   'TestLocalDeleteAllocations',
                   'test_local_delete_removes_allocations_after_compute_'
                   'restart')

#: (what nova's test reads, what it reads now), each found exactly once in
#: the test's function: its docstring, the DELETE while nova-api cannot
#: reach placement, then the compute's restart once placement answers.
_RESTART_1679750_EDITS = (
    ('''\
        """Tests that allocations are removed after a local delete.

        This tests the scenario where a server is local deleted (because the
        compute host is down) and we want to make sure that its allocations
        have been cleaned up once the nova-compute service restarts.

        In this scenario we conditionally use the PlacementFixture to simulate
        the case that nova-api isn't configured to talk to placement, thus we
        need to manage the placement database independently.
        """
''', '''\
        """Tests that a local delete leaves no allocations behind when
        nova-api cannot reach placement.

        This tests the scenario where a server is to be local deleted
        (because the compute host is down) while nova-api cannot talk to
        placement. The API used to destroy the server anyway and leave its
        allocations for the nova-compute service to heal when it restarts,
        which it never does if the compute does not come back or once the
        deleted instance is archived. The delete is now refused (503) with
        the server left as it was; deleting it again once placement answers
        removes its allocations, and the restarted nova-compute service
        finds nothing to heal.

        In this scenario we conditionally use the PlacementFixture to simulate
        the case that nova-api isn't configured to talk to placement, thus we
        need to manage the placement database independently.
        """
'''),
    ('''\
        # Delete the server (will be a local delete because compute is down).
        self._delete_server(server)
''', '''\
        # Delete the server (would be a local delete because compute is
        # down). nova-api cannot delete the allocations, so it refuses the
        # delete before it destroys anything.
        response = self.api.api_delete('/servers/%s' % server['id'],
                                       check_response_status=[503])
        self.assertIn('The delete can be retried',
                      response.body['serviceUnavailable']['message'])
        server = self.api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
'''),
    ('''\
            # Start the compute service again. Before it comes up, it will
            # call the update_available_resource code in the ResourceTracker
            # which is what "heals" the allocations for the deleted instance.
            compute.start()
''', '''\
            # Placement answers again: deleting the server, again locally,
            # removes its allocations.
            self._delete_server(server)
            self.assertEqual(usages_before,
                             self._get_usages(placement_api, rp_uuid))

            # Start the compute service again. Before it comes up, it will
            # call the update_available_resource code in the ResourceTracker,
            # which "heals" the allocations of deleted instances: there are
            # none left.
            compute.start()
'''),
)


def local_delete_after_compute_restart_is_retried(files):
    """nova's regression test of bug 1679750 deletes a server locally
    while nova-api cannot reach placement, and expected the delete to
    succeed and the restarted compute to heal the allocations it left. The
    local delete now refuses it (503) with the server left as it was: the
    test asserts that, then deletes the server again once placement
    answers, which removes the allocations, and checks that the restarted
    compute still leaves the usages as they were before the server.
    """
    path, cls_name, name = RESTART_1679750

    def edit(text):
        tree = ast.parse(text)
        cls = next((node for node in ast.walk(tree)
                    if isinstance(node, ast.ClassDef) and
                    node.name == cls_name), None)
        func = edits.function(cls, name) if cls else None
        if func is None:
            raise errors.ExportError('%s has no %s.%s' % (path, cls_name,
                                                           name))
        lines = text.splitlines(True)
        segment = ''.join(lines[func.lineno - 1:func.end_lineno])
        for old, new in _RESTART_1679750_EDITS:
            if segment.count(old) != 1:
                raise errors.ExportError(
                    '%s: %s.%s does not read as expected (a local delete '
                    'while nova-api cannot reach placement, healed by the '
                    'compute\'s restart); missing: %s'
                    % (path, cls_name, name, old.strip().splitlines()[0]))
            segment = segment.replace(old, new)
        return ''.join(lines[:func.lineno - 1]) + segment + ''.join(
            lines[func.end_lineno:])

    return edits.edit_python(files, path, edit)


#: nova unit tests that run the source's _confirm_resize with no database:
#: it now reads the migration again under the server's lock (a confirm
#: that another completed meanwhile returns), so they get the migration
#: as it is when a confirm proceeds. The first two are in every series,
#: the others where nova has shares.
CONFIRM_RESIZE_TESTS = (
    'test_confirm_resize_calls_virt_driver_with_old_pci',
    'test_confirm_resize_driver_confirm_migration_fails',
    'test__confirm_resize_same_host_skips_share_cleanup',
    'test__confirm_resize_share_cleanup_failure',
    'test__confirm_resize_with_shares',
)


def confirm_resize_tests_read_migration(files):
    """Give nova's unit tests of the source's confirm the migration it
    reads again.
    """
    path = 'nova/tests/unit/compute/test_compute_mgr.py'

    def edit(text):
        lines = text.splitlines(True)
        tree = ast.parse(text)
        funcs = [edits.function(tree, name) for name in CONFIRM_RESIZE_TESTS]
        if None in funcs[:2]:
            raise errors.ExportError('%s: no test %s' % (
                path, CONFIRM_RESIZE_TESTS[funcs.index(None)]))
        for func in sorted((f for f in funcs if f is not None),
                           key=lambda f: -f.lineno):
            indent = ' ' * func.col_offset
            at = (func.decorator_list[0].lineno if func.decorator_list
                  else func.lineno)
            lines.insert(at - 1, (
                "%s@mock.patch('nova.objects.Migration.get_by_id',\n"
                "%s            new=mock.Mock(return_value=mock.Mock(\n"
                "%s                status='confirming')))\n"
                % ((indent,) * 3)))
        return ''.join(lines)

    return edits.edit_python(files, path, edit)


def compute_delete_tests_placement_answers(files):
    """Give nova's unit tests of the compute's delete a placement that
    answers.

    The compute's delete now fails, the record kept, when it cannot
    delete the allocations (the report client returns None when it has
    no placement, as in these tests): test_compute.py's tests get a
    report client whose delete answers, test_init_instance_complete_
    partial_deletion too, and test__complete_deletion (2025.1 on)
    expects the delete made first as well as nova's own. Those two have
    no database: the server gets no migration.
    """
    mgr = 'nova/tests/unit/compute/test_compute_mgr.py'
    compute = 'nova/tests/unit/compute/test_compute.py'
    answers = ("@mock.patch('nova.scheduler.client.report."
               "SchedulerReportClient.'\n"
               "%s            'delete_allocation_for_instance',\n"
               "%s            new=mock.Mock(return_value=True))\n")
    # These tests have no database: the server has no migration.
    no_migrations = ("@mock.patch('nova.objects.MigrationList."
                     "get_by_filters',\n"
                     "%s            new=mock.Mock(return_value=[]))\n")

    def edit_mgr(text):
        lines = text.splitlines(True)
        tree = ast.parse(text)
        partial = edits.function(
            tree, 'test_init_instance_complete_partial_deletion')
        if partial is None:
            raise errors.ExportError('%s: no test_init_instance_complete_'
                                     'partial_deletion' % mgr)
        complete = edits.function(tree, 'test__complete_deletion')
        # Edited from the end, so that the line numbers stay right.
        indent = ' ' * partial.col_offset
        at = (partial.decorator_list[0].lineno if partial.decorator_list
              else partial.lineno)
        changes = [(at - 1, at - 1, indent + answers % (indent, indent) +
                    indent + no_migrations % indent)]
        if complete is not None:
            first = (complete.decorator_list[0].lineno
                     if complete.decorator_list else complete.lineno)
            changes.append((first - 1, first - 1,
                            indent + no_migrations % indent))
            segment = ''.join(lines[complete.lineno - 1:complete.end_lineno])
            new, found = re.subn(
                r'mock_delete_alloc\.assert_called_once_with\(\n'
                r'(\s*)self\.context, instance\.uuid, force=(True|False)\)',
                r"mock_delete_alloc.assert_has_calls([\n"
                r"\1mock.call(self.context, instance.uuid,\n"
                r"\1          consumer_type='instance', force=\2),\n"
                r"\1mock.call(self.context, instance.uuid, force=\2)])",
                segment)
            if found != 2:
                raise errors.ExportError(
                    '%s: test__complete_deletion does not assert the '
                    'delete of the allocations as expected' % mgr)
            changes.append((complete.lineno - 1, complete.end_lineno, new))
        for start, end, new in sorted(changes, reverse=True):
            lines[start:end] = [new]
        return ''.join(lines)

    def edit_compute(text):
        tree = ast.parse(text)
        cls = next((node for node in tree.body
                    if isinstance(node, ast.ClassDef) and
                    node.name == 'BaseTestCase'), None)
        setup = edits.function(cls, 'setUp') if cls else None
        first = setup.body[0] if setup and setup.body else None
        lines = text.splitlines(True)
        if (first is None or
                'super(' not in ast.get_source_segment(text, first) or
                'import fixtures as std_fixtures\n' not in text):
            raise errors.ExportError('%s: BaseTestCase.setUp does not start '
                                     'with super().setUp()' % compute)
        indent = ' ' * first.col_offset
        lines.insert(first.end_lineno, (
            "%s# The compute's delete fails when placement does not answer.\n"
            "%sself.useFixture(std_fixtures.MockPatch(\n"
            "%s    'nova.scheduler.client.report.SchedulerReportClient.'\n"
            "%s    'delete_allocation_for_instance', return_value=True))\n"
            % ((indent,) * 4)))
        return ''.join(lines)

    changed = edits.edit_python(files, mgr, edit_mgr)
    changed.update(edits.edit_python(files, compute, edit_compute))
    return changed


#: nova's functional tests of a PCI device removed from [pci]device_spec
#: while a server uses it (2025.1 on; the series before have none).
PCI_REMOVED_PATH = 'nova/tests/functional/libvirt/test_pci_in_placement.py'
PCI_REMOVED_CLASS = 'PlacementPCIInventoryReportingTests'
PCI_REMOVED_TESTS = (
    'test_device_reconfiguration_with_allocations_config_change_warn',
    'test_pf_devspec_removed_while_allocated',
    'test_last_vf_devspec_removed_while_allocated',
    'test_non_last_vf_devspec_removed_while_allocated',
)

#: After the delete, the device's provider was expected with no usage...
_PCI_FREED = re.compile(
    r'( *)(# The allocation (?:is|successfully) removed[^\n]*\n)'
    r' *compute1_expected_placement_view\["usages"\] = \{\n'
    r' *"0000:81:00\.0": \{\n *[^\n]+: 0,\n *\}\n *\}\n'
    r'( *compute1_expected_placement_view\["allocations"\]'
    r'\.pop\(server\["id"\]\)\n)')
#: ... and the PCI tracker's count commented as not reaching placement...
_PCI_NOT_YET = re.compile(
    r' *# The PCI device is removed from the PCI tracker when the device is'
    r'\n(?: *#[^\n]*\n)*?( *self\.assertPCIDeviceCounts\("compute1", '
    r'total=0, free=0\)\n)')
#: ... then removed by a periodic task or a restart.
_PCI_LATER = re.compile(
    r'(?: *# We need a periodics run to trigger the deletion of the device'
    r' in\n *# Placement\n)?'
    r'( *self\._run_periodics\(\)\n\n)?'
    r'((?: *# And the device is now removed from Placement\n)?)'
    r'( *)compute1_expected_placement_view\["inventories"\]\.pop\('
    r'"0000:81:00\.0"\)\n'
    r' *compute1_expected_placement_view\["traits"\]\.pop\('
    r'"0000:81:00\.0"\)\n'
    r' *compute1_expected_placement_view\["usages"\]\.pop\('
    r'"0000:81:00\.0"\)\n')


def _pci_removed_test(segment):
    """One test's new text, or None if it does not read as expected."""
    def freed(match):
        indent = match.group(1)
        return (
            indent + '# The allocation is removed from placement before '
            'the resource\n' + indent + "# tracker's update of the "
            'deletion: that update finds the device\n' + indent +
            '# free and gone from the device spec, and deletes its '
            'provider.\n' + match.group(3) +
            ''.join('%scompute1_expected_placement_view["%s"].pop('
                    '"0000:81:00.0")\n' % (indent, key)
                    for key in ('inventories', 'traits', 'usages')))

    def later(match):
        indent = match.group(3)
        if match.group(1):
            return indent + '# and the periodics keep it so\n' + \
                match.group(1).rstrip('\n') + '\n'
        return indent + '# and the restart keeps it so\n'

    # The later removal first: the new text has the same lines.
    segment, found = _PCI_LATER.subn(later, segment)
    if found != 1:
        return None
    segment, found = _PCI_FREED.subn(freed, segment)
    if found != 1:
        return None
    segment, _ = _PCI_NOT_YET.subn(r'\1', segment)
    return segment


def pci_removed_while_allocated_goes_at_once(files):
    """nova's tests of a PCI device removed from the device spec while a
    server uses it expected the device's resource provider to outlive the
    server's delete until the next periodic task or restart, because the
    resource tracker was updated before the allocation was dropped. The
    compute's delete now drops the allocations first: the provider goes
    with the delete, and the periodic task or the restart keeps it gone.
    """
    path = PCI_REMOVED_PATH
    if path not in files or PCI_REMOVED_TESTS[1] not in files[path]:
        return {}

    def edit(text):
        tree = ast.parse(text)
        cls = next((node for node in ast.walk(tree)
                    if isinstance(node, ast.ClassDef) and
                    node.name == PCI_REMOVED_CLASS), None)
        funcs = [edits.function(cls, name) if cls else None
                 for name in PCI_REMOVED_TESTS]
        lines = text.splitlines(True)
        for name, func in sorted(zip(PCI_REMOVED_TESTS, funcs),
                                 key=lambda pair: -(pair[1].lineno
                                                    if pair[1] else 0)):
            if func is None:
                raise errors.ExportError('%s has no %s.%s' % (
                    path, PCI_REMOVED_CLASS, name))
            segment = _pci_removed_test(
                ''.join(lines[func.lineno - 1:func.end_lineno]))
            if segment is None:
                raise errors.ExportError(
                    "%s: %s.%s does not read as expected (the device's "
                    'provider kept after the delete until a periodic '
                    'task or a restart)' % (path, PCI_REMOVED_CLASS, name))
            lines[func.lineno - 1:func.end_lineno] = [segment]
        return ''.join(lines)

    return edits.edit_python(files, path, edit)


def _class_setup(tree, path, name):
    cls = next((node for node in ast.walk(tree)
                if isinstance(node, ast.ClassDef) and node.name == name),
               None)
    setup = edits.function(cls, 'setUp') if cls else None
    if setup is None:
        raise errors.ExportError('%s: no %s.setUp' % (path, name))
    return setup


def usage_tests_placement_answers(files):
    """Give nova's unit tests of usage notifications a placement that
    answers.

    UsageInfoTestCase's tests end by terminating their server on a compute
    with no placement; the compute's delete now fails, the record kept,
    when the allocations cannot be deleted.
    """
    path = 'nova/tests/unit/compute/test_utils.py'

    def edit(text):
        setup = _class_setup(ast.parse(text), path, 'UsageInfoTestCase')
        call = next((stmt for stmt in setup.body
                     if 'super(' in ast.get_source_segment(text, stmt)),
                    None)
        if call is None:
            raise errors.ExportError('%s: UsageInfoTestCase.setUp does not '
                                     'call super().setUp()' % path)
        indent = ' ' * call.col_offset
        lines = text.splitlines(True)
        lines.insert(call.end_lineno, (
            "%s# The compute's delete fails when placement does not answer.\n"
            "%sself.stub_out('nova.scheduler.client.report."
            "SchedulerReportClient.'\n"
            "%s              'delete_allocation_for_instance',\n"
            "%s              lambda *args, **kwargs: True)\n"
            % ((indent,) * 4)))
        return ''.join(lines)

    return edits.edit_python(files, path, edit)


def claim_tests_have_migration(files):
    """Give nova's unit tests of the conductor's claims the migration the
    claim is made for.

    Once the destination is claimed, the conductor looks the server up
    and, if it was deleted, removes what the claim and the migration hold.
    LiveMigrationTaskTestCase's migration has no uuid and no database to
    look the server up in: it gets a uuid and a server that exists.
    test_cold_migrate_exception_host_in_error_state_and_raise has no
    server in its database, which would look deleted: the check is
    mocked there.
    """
    live = 'nova/tests/unit/conductor/tasks/test_live_migrate.py'
    cold = 'nova/tests/unit/conductor/test_conductor.py'

    def edit_live(text):
        setup = _class_setup(ast.parse(text), live,
                             'LiveMigrationTaskTestCase')
        stmt = next((stmt for stmt in setup.body
                     if ast.get_source_segment(text, stmt) ==
                     'self.migration = objects.Migration()'), None)
        if stmt is None:
            raise errors.ExportError(
                '%s: LiveMigrationTaskTestCase.setUp makes no '
                'objects.Migration()' % live)
        indent = ' ' * stmt.col_offset
        lines = text.splitlines(True)
        lines[stmt.lineno - 1] = (
            "%sself.migration = objects.Migration(uuid=uuids.migration)\n"
            "%s# Once the destination is claimed the server is looked up.\n"
            "%sself.stub_out('nova.compute.utils.is_instance_deleted',\n"
            "%s              lambda *args, **kwargs: False)\n"
            % ((indent,) * 4))
        return ''.join(lines)

    def edit_cold(text):
        name = 'test_cold_migrate_exception_host_in_error_state_and_raise'
        func = edits.function(ast.parse(text), name)
        if func is None or not func.decorator_list:
            raise errors.ExportError('%s: no %s' % (cold, name))
        indent = ' ' * func.col_offset
        lines = text.splitlines(True)
        lines.insert(func.decorator_list[0].lineno - 1, (
            "%s# The server is not in the database: it would look deleted.\n"
            "%s@mock.patch('nova.compute.utils.delete_allocations_if_"
            "deleted',\n"
            "%s            new=mock.Mock(return_value=False))\n"
            % ((indent,) * 3)))
        return ''.join(lines)

    changed = edits.edit_python(files, live, edit_live)
    changed.update(edits.edit_python(files, cold, edit_cold))
    return changed


def confirm_task_tests_read_migrations(files):
    """Let nova's unit tests of ConfirmResizeTask read the migration the
    confirm now reads again.

    _cleanup_source_host reads the source cell's migration once more after
    the source answered (did it record 'error'?), and
    _finish_confirm_in_target_cell reads the target cell's first: the
    test of the former expects the second read, the test of the latter,
    which has no database, gets a migration still 'confirming'.
    """
    path = 'nova/tests/unit/conductor/tasks/test_cross_cell_migrate.py'
    once = ('        mock_get_mig.assert_called_once_with(\n'
            '            instance._context, self.task.migration.uuid)\n')
    twice = ('        # Read again once the source answered (bug 1848343).\n'
             '        self.assertEqual([mock.call(\n'
             '            instance._context, self.task.migration.uuid)] * 2,\n'
             '            mock_get_mig.call_args_list)\n')

    def edit(text):
        tree = ast.parse(text)
        cleanup = edits.function(tree, 'test_cleanup_source_host')
        finish = edits.function(tree, 'test_finish_confirm_in_target_cell')
        if cleanup is None or finish is None:
            raise errors.ExportError('%s: no test_cleanup_source_host or '
                                     'test_finish_confirm_in_target_cell'
                                     % path)
        lines = text.splitlines(True)
        body = ''.join(lines[cleanup.lineno - 1:cleanup.end_lineno])
        if body.count(once) != 1:
            raise errors.ExportError('%s: test_cleanup_source_host does not '
                                     'assert one read of the migration'
                                     % path)
        first = finish.body[0]
        indent = ' ' * first.col_offset
        stub = (
            "%s# The target cell's migration is read first (bug 1848343).\n"
            "%sself.stub_out('nova.objects.Migration.get_by_uuid',\n"
            "%s              lambda *args, **kwargs: objects.Migration(\n"
            "%s                  status='confirming'))\n" % ((indent,) * 4))
        # The later one first, so that the other's line numbers hold.
        for lineno in sorted((first.lineno, cleanup.lineno), reverse=True):
            if lineno == first.lineno:
                lines.insert(first.lineno - 1, stub)
            else:
                lines[cleanup.lineno - 1:cleanup.end_lineno] = [
                    body.replace(once, twice)]
        return ''.join(lines)

    return edits.edit_python(files, path, edit)


TARGETS = (
    registry.Target('nova.exception:AllocationMoveTargetNotFound',
                    'nova_fixes.nova.exception:'
                    'AllocationMoveTargetNotFound', new=True,
                    after='AllocationMoveFailed'),
    registry.Target('nova.compute.utils:is_instance_deleted',
                    'nova_fixes.nova.compute.utils:is_instance_deleted',
                    new=True),
    registry.Target('nova.scheduler.client.report:'
                    'SchedulerReportClient._move_allocations_to_'
                    'existing_consumer',
                    'nova_fixes.nova.scheduler.client.report:'
                    '_move_allocations_to_existing_consumer', new=True),
    registry.Target('nova.scheduler.client.report:'
                    'SchedulerReportClient.move_allocations',
                    'nova_fixes.nova.scheduler.client.report:'
                    'move_allocations',
                    original_as='_move_allocations_to_any_consumer'),
    registry.Target('nova.conductor.tasks.migrate:'
                    'revert_allocation_for_migration',
                    'nova_fixes.nova.conductor.tasks.migrate:'
                    'revert_allocation_for_migration',
                    original_as='_move_allocations_back_to_instance',
                    services=('conductor',)),
    registry.Target('nova.conductor.tasks.migrate:'
                    'MigrationTask._schedule',
                    'nova_fixes.nova.conductor.tasks.migrate:_schedule',
                    original_as='_schedule_destination',
                    services=('conductor',)),
    registry.Target('nova.conductor.tasks.live_migrate:'
                    'LiveMigrationTask._find_destination',
                    'nova_fixes.nova.conductor.tasks.live_migrate:'
                    '_find_destination',
                    original_as='_find_and_claim_destination',
                    services=('conductor',)),
    registry.Target('nova.compute.manager:'
                    'ComputeManager._revert_allocation',
                    'nova_fixes.nova.compute.manager:_revert_allocation',
                    services=('compute',)),
    registry.Target('nova.compute.manager:'
                    'ComputeManager._confirm_resize',
                    'nova_fixes.nova.compute.manager:_confirm_resize',
                    original_as='_confirm_resize_on_source',
                    services=('compute',)),
    registry.Target('nova.exception:InstanceDeletedDuringRevert',
                    'nova_fixes.nova.exception:'
                    'InstanceDeletedDuringRevert', new=True),
    registry.Target('nova.exception:ConfirmNotAnsweredForDelete',
                    'nova_fixes.nova.exception:'
                    'ConfirmNotAnsweredForDelete', new=True),
    registry.Target('nova.conductor.tasks.cross_cell_migrate:'
                    'delete_instance_of_deleted_server',
                    'nova_fixes.nova.conductor.tasks.cross_cell_migrate:'
                    'delete_instance_of_deleted_server', new=True),
    registry.Target('nova.conductor.tasks.cross_cell_migrate:'
                    'FinishResizeAtDestTask._update_instance_mapping',
                    'nova_fixes.nova.conductor.tasks.cross_cell_migrate:'
                    'FinishResizeAtDestTask._update_instance_mapping',
                    original_as='_swap_instance_mapping_to_target',
                    services=('conductor',)),
    registry.Target('nova.conductor.tasks.cross_cell_migrate:'
                    'RevertResizeTask._update_instance_mapping',
                    'nova_fixes.nova.conductor.tasks.cross_cell_migrate:'
                    'RevertResizeTask._update_instance_mapping',
                    original_as='_swap_instance_mapping_to_source',
                    services=('conductor',)),
    registry.Target('nova.conductor.tasks.cross_cell_migrate:'
                    'RevertResizeTask._execute',
                    'nova_fixes.nova.conductor.tasks.cross_cell_migrate:'
                    'RevertResizeTask._execute',
                    original_as='_revert_in_both_cells',
                    services=('conductor',)),
    registry.Target('nova.conductor.tasks.cross_cell_migrate:'
                    'ConfirmResizeTask._execute',
                    'nova_fixes.nova.conductor.tasks.cross_cell_migrate:'
                    'ConfirmResizeTask._execute',
                    original_as='_confirm_in_both_cells',
                    services=('conductor',)),
    registry.Target('nova.conductor.tasks.cross_cell_migrate:'
                    'ConfirmResizeTask._cleanup_source_host',
                    'nova_fixes.nova.conductor.tasks.cross_cell_migrate:'
                    'ConfirmResizeTask._cleanup_source_host',
                    original_as='_confirm_at_source',
                    services=('conductor',)),
    registry.Target('nova.conductor.tasks.cross_cell_migrate:'
                    'ConfirmResizeTask._finish_confirm_in_target_cell',
                    'nova_fixes.nova.conductor.tasks.cross_cell_migrate:'
                    'ConfirmResizeTask._finish_confirm_in_target_cell',
                    original_as='_finish_confirm_as_confirmed',
                    services=('conductor',)),
    registry.Target('nova.compute.utils:'
                    'delete_allocations_of_migrations',
                    'nova_fixes.nova.compute.utils:'
                    'delete_allocations_of_migrations', new=True),
    registry.Target('nova.compute.utils:delete_allocations_or_raise',
                    'nova_fixes.nova.compute.utils:'
                    'delete_allocations_or_raise', new=True),
    registry.Target('nova.compute.utils:delete_allocations_if_deleted',
                    'nova_fixes.nova.compute.utils:'
                    'delete_allocations_if_deleted', new=True),
    registry.Target('nova.compute.manager:'
                    'ComputeManager._complete_deletion',
                    'nova_fixes.nova.compute.manager:_complete_deletion',
                    original_as='_complete_deletion_of_instance',
                    services=('compute',)),
    registry.Target('nova.compute.manager:'
                    'ComputeManager._do_rebuild_instance_with_claim',
                    'nova_fixes.nova.compute.manager:'
                    '_do_rebuild_instance_with_claim',
                    original_as='_rebuild_instance_with_claim',
                    series=('2023.1', '2023.2', '2024.1', '2024.2',
                            '2025.1', '2025.2', '2026.1', '2026.2'),
                    services=('compute',)),
    # nova 26 (2022.2) has no target_state argument: a drop-in per form.
    registry.Target('nova.compute.manager:'
                    'ComputeManager._do_rebuild_instance_with_claim',
                    'nova_fixes.nova.compute.manager:'
                    'ComputeManagerZed._do_rebuild_instance_with_claim',
                    original_as='_rebuild_instance_with_claim',
                    series=('2022.2',), services=('compute',)),
    registry.Target('nova.compute.manager:'
                    'ComputeManager._remove_allocations_of_finished_'
                    'moves',
                    'nova_fixes.nova.compute.manager:'
                    '_remove_allocations_of_finished_moves', new=True,
                    services=('compute',)),
    registry.Target('nova.compute.manager:ComputeManager.init_host',
                    'nova_fixes.nova.compute.manager:init_host',
                    original_as='_init_host_as_nova_does',
                    series=('2023.1', '2023.2', '2024.1', '2024.2',
                            '2025.1', '2025.2', '2026.1', '2026.2'),
                    services=('compute',)),
    # nova 26 (2022.2)'s init_host has no service_ref.
    registry.Target('nova.compute.manager:ComputeManager.init_host',
                    'nova_fixes.nova.compute.manager:'
                    'ComputeManagerZed.init_host',
                    original_as='_init_host_as_nova_does',
                    series=('2022.2',), services=('compute',)),
    registry.Target('nova.compute.manager:'
                    'ComputeManager._unshelve_instance',
                    'nova_fixes.nova.compute.manager:_unshelve_instance',
                    original_as='_unshelve_instance_on_host',
                    services=('compute',)),
    registry.Target('nova.compute.manager:'
                    'ComputeManager._complete_partial_deletion',
                    'nova_fixes.nova.compute.manager:'
                    '_complete_partial_deletion',
                    services=('compute',)),
    registry.Target('nova.compute.manager:'
                    'ComputeManager._complete_partial_deletions',
                    'nova_fixes.nova.compute.manager:'
                    'complete_partial_deletions_periodic_task',
                    new=True, periodic=True, services=('compute',)),
    registry.Target('nova.compute.manager:'
                    'ComputeManager.'
                    '_remove_allocations_of_finished_moves_left',
                    'nova_fixes.nova.compute.manager:'
                    'remove_allocations_of_finished_moves_periodic_task',
                    new=True, periodic=True, services=('compute',)),
    registry.Target('nova.compute.manager:'
                    'ComputeManager._delete_allocation_after_move',
                    'nova_fixes.nova.compute.manager:'
                    '_delete_allocation_after_move',
                    services=('compute',)),
    registry.Target('nova.compute.utils:migrations_of_instance',
                    'nova_fixes.nova.compute.utils:'
                    'migrations_of_instance', new=True),
    registry.Target('nova.compute.api:API._delete',
                    'nova_fixes.nova.compute.api:_delete',
                    original_as='_delete_as_requested',
                    services=('api',)),
    registry.Target('nova.compute.api:API._confirm_resize_on_deleting',
                    'nova_fixes.nova.compute.api:'
                    '_confirm_resize_on_deleting',
                    original_as='_confirm_resize_before_delete',
                    services=('api',)),
    registry.Target('nova.compute.utils:may_have_ports_or_volumes',
                    'nova_fixes.nova.compute.utils:'
                    'may_have_ports_or_volumes',
                    services=('api',)),
    # Last: nova's module has it after the others (the activation
    # tests change the last target's lines).
    registry.Target('nova.compute.api:API._local_delete',
                    'nova_fixes.nova.compute.api:_local_delete',
                    original_as='_local_delete_instance',
                    services=('api',)),
)

NOTES = ('bug-1848343-revert-allocations-deleted-server-'
         '5c1e0d7a2b9f4e61.yaml',
         'bug-1848343-delete-during-move-ba69de04f8550a14.yaml',
         'bug-1848343-writes-after-delete-81133b470adc2a06.yaml',
         'bug-1848343-delete-placement-outage-9e2289d1b0983fd1.yaml',
         'bug-1848343-complete-partial-deletions-5b0f3c9e71d2a846.yaml',
         'bug-1848343-conductor-claim-after-delete-3f0b7c21d4e95a68.yaml',
         'bug-1848343-delete-while-confirming-6d2a9e18c4b07f35.yaml',
         'bug-1848343-cross-cell-delete-0c5b7e93a1d24f68.yaml',
         'bug-1848343-source-restart-finished-moves-4c7e2a91b05d3f18.yaml',
         'bug-1848343-delete-during-reschedule-7d3b1e0a94c2f561.yaml',
         'bug-1848343-cross-cell-failed-confirm-revert-'
         '2f6c9d41a8e05b73.yaml',
         'bug-1848343-delete-host-changed-4e1b8c07d9a3f562.yaml',
         'bug-1848343-delete-left-behind-9a2f6e13c7b40d85.yaml',
         'bug-1848343-delete-failed-task-state-fe1666286f561230.yaml',
         'bug-1848343-delete-before-cross-cell-revert-1287463a8492bf8f.yaml')

#: The change carrying the revert paths (see nova_fixes.fixes.FIRST).
REVERT_SLUG = 'Do-not-revert-allocations-to-a-deleted-server'
REVERT_TARGETS = (
    'nova.exception:AllocationMoveTargetNotFound',
    'nova.scheduler.client.report:'
    'SchedulerReportClient._move_allocations_to_existing_consumer',
    'nova.scheduler.client.report:SchedulerReportClient.move_allocations',
    'nova.compute.utils:is_instance_deleted',
    'nova.compute.utils:delete_allocations_if_deleted',
    'nova.compute.manager:ComputeManager._revert_allocation',
    'nova.conductor.tasks.migrate:revert_allocation_for_migration',
)
#: The late claims: a step that writes allocations for a server during a
#: move, once the server may be deleted.
CLAIM_TARGETS = (
    'nova.conductor.tasks.migrate:MigrationTask._schedule',
    'nova.conductor.tasks.live_migrate:LiveMigrationTask._find_destination',
    'nova.compute.manager:ComputeManager._do_rebuild_instance_with_claim',
    'nova.compute.manager:ComputeManager._unshelve_instance',
)
CLAIM_NOTES = (
    'bug-1848343-conductor-claim-after-delete-3f0b7c21d4e95a68.yaml',
    'bug-1848343-writes-after-delete-81133b470adc2a06.yaml',
)
CLAIM_TEST = ('nova/tests/functional/regressions/'
              'test_bug_1848343_claim_after_delete.py')
RECREATE_CLAIM_SLUG = ('Recreate-bug-1848343-a-live-migration-claim-after-'
                       'the-delete')

REVERT_NOTE = ('bug-1848343-revert-allocations-deleted-server-'
               '5c1e0d7a2b9f4e61.yaml')

_REGRESSIONS = 'nova/tests/functional/regressions/'

#: The compute's delete: no allocation left for a deleted server's
#: migrations, and none with its record destroyed.
DELETE_SLUG = "Remove-a-deleted-server-s-migration-allocations"
DELETE_TARGETS = (
    'nova.compute.utils:migrations_of_instance',
    'nova.compute.utils:delete_allocations_or_raise',
    'nova.compute.utils:delete_allocations_of_migrations',
    'nova.compute.manager:ComputeManager._complete_deletion',
    'nova.compute.manager:ComputeManager._delete_allocation_after_move',
)
DELETE_NOTES = ('bug-1848343-delete-during-move-ba69de04f8550a14.yaml',)
#: A delete that failed can be retried: API._delete, whose concerns
#: are four changes (see registry.Change.grows), carried by the first.
API_DELETE = 'nova.compute.api:API._delete'
RESTORE_SLUG = 'Put-the-task-state-back-when-a-delete-fails'
RESTORE_TARGETS = (API_DELETE,)
RESTORE_NOTES = (
    'bug-1848343-delete-failed-task-state-fe1666286f561230.yaml',)
API_DELETE_UNIT = 'compute_api_delete_left_behind.py'
API_UNIT = 'nova/tests/unit/compute/test_api.py'
#: The classes of API_DELETE_UNIT, appended with the change they test.
RESTORE_UNIT = registry.NovaUnitTests(API_UNIT, API_DELETE_UNIT, classes=(
    'DeleteLeftBehindTestBase', 'DeleteLeftBehindRestoreTaskStateTestCase'))
RETRY_UNIT = registry.NovaUnitTests(API_UNIT, API_DELETE_UNIT, classes=(
    'DeleteLeftBehindResendTestCase', 'DeleteUnderWayTestCase'))
HOST_CHANGED_UNIT = registry.NovaUnitTests(API_UNIT, API_DELETE_UNIT, classes=(
    'DeleteLeftBehindHostChangedTestCase',))
HIDDEN_UNIT = registry.NovaUnitTests(API_UNIT, API_DELETE_UNIT, classes=(
    'DeleteLeftBehindHiddenCopyTestCase',))
#: A delete a stopped request left behind is sent again.
RECREATE_RETRY_SLUG = ('Recreate-bug-1848343-a-delete-left-behind-by-a-'
                       'stopped-request')
RETRY_SLUG = 'Delete-again-a-server-a-stopped-DELETE-left-behind'
RETRY_TEST = _REGRESSIONS + 'test_bug_1848343_delete_left_behind.py'
RETRY_NOTES = ('bug-1848343-delete-left-behind-9a2f6e13c7b40d85.yaml',)
#: A server put on a host while the API deleted it as one on no host.
HOST_CHANGED_SLUG = 'Delete-a-server-on-the-host-it-got-during-its-delete'
HOST_CHANGED_TARGETS = ('nova.compute.utils:may_have_ports_or_volumes',)
HOST_CHANGED_NOTES = (
    'bug-1848343-delete-host-changed-4e1b8c07d9a3f562.yaml',
    'bug-1848343-delete-during-reschedule-7d3b1e0a94c2f561.yaml',
)
#: The copy a cross-cell resize left hidden in the other cell.
RECREATE_HIDDEN_SLUG = ('Recreate-bug-1848343-a-cross-cell-revert-after-'
                        'the-delete')
HIDDEN_SLUG = 'Delete-the-copy-a-failed-cross-cell-resize-hides'
HIDDEN_COPY_TEST = _REGRESSIONS + 'test_bug_1848343_cross_cell_revert.py'
HIDDEN_TARGETS = ('nova.conductor.tasks.cross_cell_migrate:'
                  'delete_instance_of_deleted_server',)
HIDDEN_NOTES = (
    'bug-1848343-delete-before-cross-cell-revert-1287463a8492bf8f.yaml',)
#: The API's own delete while placement is unreachable.
RECREATE_LOCAL_DELETE_SLUG = ('Recreate-bug-1848343-a-local-delete-with-'
                              'placement-down')
LOCAL_DELETE_TEST = (_REGRESSIONS +
                     'test_bug_1848343_local_delete_placement_down.py')
LOCAL_DELETE_TARGETS = (
    'nova.exception:ConfirmNotAnsweredForDelete',
    'nova.compute.api:API._confirm_resize_on_deleting',
    'nova.compute.api:API._local_delete',
)
LOCAL_DELETE_NOTES = (
    'bug-1848343-delete-placement-outage-9e2289d1b0983fd1.yaml',)
#: A delete while the user's confirmation runs on the source.
RECREATE_CONFIRM_SLUG = 'Recreate-bug-1848343-a-delete-while-a-confirm-runs'
CONFIRM_TEST = _REGRESSIONS + 'test_bug_1848343_delete_while_confirming.py'
CONFIRM_TARGETS = ('nova.compute.manager:ComputeManager._confirm_resize',)
CONFIRM_NOTES = (
    'bug-1848343-delete-while-confirming-6d2a9e18c4b07f35.yaml',)
#: A server deleted during a cross-cell resize: both cells' copies.
RECREATE_CROSS_CELL_SLUG = ('Recreate-bug-1848343-a-delete-while-a-cross-'
                            'cell-confirm-runs')
CROSS_CELL_TEST = _REGRESSIONS + 'test_bug_1848343_cross_cell_confirm.py'
CROSS_CELL_TARGETS = (
    'nova.exception:InstanceDeletedDuringRevert',
    'nova.conductor.tasks.cross_cell_migrate:'
    'FinishResizeAtDestTask._update_instance_mapping',
    'nova.conductor.tasks.cross_cell_migrate:'
    'RevertResizeTask._update_instance_mapping',
    'nova.conductor.tasks.cross_cell_migrate:RevertResizeTask._execute',
    'nova.conductor.tasks.cross_cell_migrate:ConfirmResizeTask._execute',
    'nova.conductor.tasks.cross_cell_migrate:'
    'ConfirmResizeTask._cleanup_source_host',
    'nova.conductor.tasks.cross_cell_migrate:'
    'ConfirmResizeTask._finish_confirm_in_target_cell',
)
CROSS_CELL_NOTES = (
    'bug-1848343-cross-cell-delete-0c5b7e93a1d24f68.yaml',
    'bug-1848343-cross-cell-failed-confirm-revert-2f6c9d41a8e05b73.yaml',
)
#: What a compute that stopped mid-step finishes when it starts again.
RECREATE_RESTART_SLUG = ('Recreate-bug-1848343-a-source-stopped-before-'
                         'its-release')
RESTART_TEST = _REGRESSIONS + 'test_bug_1848343_source_restart.py'
RESTART_TARGETS = (
    'nova.compute.manager:ComputeManager._remove_allocations_of_finished_'
    'moves',
    'nova.compute.manager:ComputeManager.init_host',
    'nova.compute.manager:ComputeManager._complete_partial_deletion',
    'nova.compute.manager:ComputeManager._complete_partial_deletions',
    'nova.compute.manager:'
    'ComputeManager._remove_allocations_of_finished_moves_left',
)
RESTART_NOTES = (
    'bug-1848343-source-restart-finished-moves-4c7e2a91b05d3f18.yaml',
    'bug-1848343-complete-partial-deletions-5b0f3c9e71d2a846.yaml',
)

#: nova's unit test modules the changes add tests to (registry.
#: NovaUnitTests), beside nova's own tests of the same code.
COMPUTE_MANAGER_UNIT = 'nova/tests/unit/compute/test_compute_mgr.py'
MIGRATE_UNIT = 'nova/tests/unit/conductor/tasks/test_migrate.py'
CROSS_CELL_UNIT = 'nova/tests/unit/conductor/tasks/test_cross_cell_migrate.py'

FIX = registry.Fix(
    bug=1848343,
    title='Reverting migration-based allocations leaks allocations if '
          'the server is deleted',
    open_upstream=True,
    upstream='open; nova test_bug_1848343 asserts the leak under a FIXME',
    targets=TARGETS,
    tests=('test_bug_1848343', 'test_bug_1848343_more',
           'test_bug_1848343_deleted_moves', 'test_bug_1848343_cross_cell',
           'test_delete_faults'),
    # In DeletedServerAllocationRevertTest._assert_no_allocations, the
    # source host must still have the deleted server's allocations.
    nova_flips=tuple(
        'nova.tests.functional.regressions.test_bug_1848343.'
        'DeletedServerAllocationRevertTest.' + name for name in (
            'test_migration_task_rollback',
            'test_live_migration_task_rollback',
            'test_migrate_on_compute_fail',
        )) + tuple(
        # Each ends, after deleting the server, by asserting that the
        # migration's allocations on the source are leaked ("NOTE(gibi):
        # Nova leaks the allocation held by the migration_uuid even after
        # the instance is deleted"): the delete paths now remove them.
        'nova.tests.functional.test_servers.'
        'ConsumerGenerationConflictTest.%s' % name for name in (
            'test_confirm_migrate_delete_alloc_on_source_fails',
            'test_revert_migrate_delete_dest_allocation_fails_due_to_'
            'conflict',
            'test_revert_resize_same_host_delete_dest_fails_due_to_conflict',
            'test_live_migrate_drop_allocation_on_source_fails',
        )),
    nova_tests=(
        registry.NovaTest(
            CLAIM_TEST, 'test_bug_1848343_claim_after_delete.py',
            pairs=(('test_claim_lands_after_the_delete',
                    'test_bug_1848343_deleted_moves.'
                    'LiveMigrationClaimAfterDeleteTest.'
                    'test_delete_before_live_migration_claim'),)),
        registry.NovaTest(
            LOCAL_DELETE_TEST,
            'test_bug_1848343_local_delete_placement_down.py',
            pairs=(('test_retry_while_the_compute_is_down',
                    'test_delete_faults.'
                    'LocalDeleteDuringPlacementOutageTest.'
                    'test_retry_while_the_compute_is_down'),)),
        registry.NovaTest(
            RETRY_TEST, 'test_bug_1848343_delete_left_behind.py',
            pairs=(('test_delete_again',
                    'test_delete_faults.DeleteLeftByAStoppedRequestTest.'
                    'test_retry_the_delete'),)),
        registry.NovaTest(
            CONFIRM_TEST, 'test_bug_1848343_delete_while_confirming.py',
            pairs=(('test_delete_while_confirm_resize_runs',
                    'test_bug_1848343_deleted_moves.'
                    'DeleteWhileConfirmingTest.'
                    'test_delete_while_confirm_resize_runs'),)),
        registry.NovaTest(
            CROSS_CELL_TEST, 'test_bug_1848343_cross_cell_confirm.py',
            pairs=(('test_delete_while_cross_cell_confirm_runs',
                    'test_bug_1848343_cross_cell.'
                    'CrossCellDeleteWhileConfirmingTest.'
                    'test_delete_while_cross_cell_confirm_runs'),)),
        registry.NovaTest(
            HIDDEN_COPY_TEST, 'test_bug_1848343_cross_cell_revert.py',
            pairs=(('test_delete_before_cross_cell_revert',
                    'test_bug_1848343_cross_cell.'
                    'CrossCellRevertAfterDeleteTest.'
                    'test_delete_before_cross_cell_revert'),)),
        registry.NovaTest(
            RESTART_TEST, 'test_bug_1848343_source_restart.py',
            pairs=(('test_delete_after_the_source_restarts',
                    'test_delete_faults.'
                    'ConfirmSourceRestartsThenDeleteTest.'
                    'test_delete_after_the_restart'),)),
    ),
    unit_tests=(
        registry.NovaUnitTests(
            'nova/tests/unit/scheduler/client/test_report.py',
            'report_move_allocations.py'),
        registry.NovaUnitTests('nova/tests/unit/compute/test_utils.py',
                               'compute_utils_revert.py'),
        registry.NovaUnitTests(COMPUTE_MANAGER_UNIT, 'compute_mgr_revert.py'),
        registry.NovaUnitTests(MIGRATE_UNIT, 'conductor_migrate_revert.py'),
        registry.NovaUnitTests(MIGRATE_UNIT, 'conductor_migrate_claim.py'),
        registry.NovaUnitTests(
            'nova/tests/unit/conductor/tasks/test_live_migrate.py',
            'conductor_live_migrate_claim.py'),
        registry.NovaUnitTests(COMPUTE_MANAGER_UNIT, 'compute_mgr_claim.py'),
        registry.NovaUnitTests('nova/tests/unit/compute/test_utils.py',
                               'compute_utils_delete.py'),
        registry.NovaUnitTests(COMPUTE_MANAGER_UNIT, 'compute_mgr_delete.py'),
        registry.NovaUnitTests(CROSS_CELL_UNIT,
                               'cross_cell_delete_hidden_copy.py'),
        registry.NovaUnitTests('nova/tests/unit/compute/test_utils.py',
                               'compute_utils_ports_or_volumes.py'),
        RESTORE_UNIT, RETRY_UNIT, HOST_CHANGED_UNIT, HIDDEN_UNIT,
        registry.NovaUnitTests(API_UNIT, 'compute_api_local_delete.py'),
        registry.NovaUnitTests(COMPUTE_MANAGER_UNIT,
                               'compute_mgr_confirm.py'),
        registry.NovaUnitTests(CROSS_CELL_UNIT,
                               'cross_cell_deleted_server.py'),
        registry.NovaUnitTests(COMPUTE_MANAGER_UNIT,
                               'compute_mgr_finish_left.py'),
    ),
    notes=NOTES,
    patch=registry.Patch(
        slug='Do-not-leak-allocations-reverting-a-deleted-server-s-move',
        subject="Do not leak allocations reverting a deleted server's move",
        body=COMMIT_MESSAGE,
        trailers=('Closes-Bug: #1848343',),
        test_edits=(flip_1848343_fixme, consumer_conflict_leaks,
                    revert_allocation_assertions, confirm_rollback_failure,
                    soft_delete_rollback_puts_task_state_back,
                    local_delete_tests_mock_placement,
                    local_delete_after_compute_restart_is_retried,
                    confirm_resize_tests_read_migration,
                    compute_delete_tests_placement_answers,
                    usage_tests_placement_answers,
                    confirm_task_tests_read_migrations,
                    claim_tests_have_migration,
                    pci_removed_while_allocated_goes_at_once),
        # The revert paths first, alone (see nova_fixes.fixes.FIRST); then
        # the rest of the invariant, which needs them and 1859496's
        # PlacementUnavailableForDelete.
        changes=(
            registry.Change(
                slug=REVERT_SLUG,
                subject='Do not revert allocations to a deleted server',
                body=REVERT_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                targets=REVERT_TARGETS,
                test_edits=('flip_1848343_fixme',
                            'revert_allocation_assertions'),
                notes=(REVERT_NOTE,),
                unit_tests=('report_move_allocations.py',
                            'compute_utils_revert.py',
                            'compute_mgr_revert.py',
                            'conductor_migrate_revert.py'),
                needs=()),
            registry.Change(
                slug=RECREATE_CLAIM_SLUG,
                subject="Recreate bug 1848343: a live migration's claim "
                        'after the delete',
                body=RECREATE_CLAIM_MESSAGE,
                trailers=('Related-Bug: #1848343',),
                recreates=(CLAIM_TEST,),
                needs=()),
            registry.Change(
                slug='Remove-what-a-move-s-claim-wrote-for-a-deleted-server',
                subject="Remove what a move's claim wrote for a deleted "
                        'server',
                body=CLAIM_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                targets=CLAIM_TARGETS,
                test_edits=('claim_tests_have_migration',),
                nova_tests=(CLAIM_TEST,),
                notes=CLAIM_NOTES,
                unit_tests=('conductor_migrate_claim.py',
                            'conductor_live_migrate_claim.py',
                            'compute_mgr_claim.py'),
                needs=(REVERT_SLUG, RECREATE_CLAIM_SLUG)),
            registry.Change(
                slug=DELETE_SLUG,
                subject="Remove a deleted server's migration allocations",
                body=DELETE_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                targets=DELETE_TARGETS,
                test_edits=('consumer_conflict_leaks',
                            'compute_delete_tests_placement_answers',
                            'usage_tests_placement_answers',
                            'pci_removed_while_allocated_goes_at_once'),
                notes=DELETE_NOTES,
                unit_tests=('compute_utils_delete.py',
                            'compute_mgr_delete.py'),
                needs=(REVERT_SLUG,)),
            registry.Change(
                slug=RESTORE_SLUG,
                subject='Put the task state back when a delete fails',
                body=RESTORE_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                targets=RESTORE_TARGETS,
                test_edits=('soft_delete_rollback_puts_task_state_back',),
                notes=RESTORE_NOTES,
                unit_tests=(RESTORE_UNIT.name,),
                needs=()),
            registry.Change(
                slug=RECREATE_RETRY_SLUG,
                subject='Recreate bug 1848343: a delete left behind by a '
                        'stopped request',
                body=RECREATE_RETRY_MESSAGE,
                trailers=('Related-Bug: #1848343',),
                recreates=(RETRY_TEST,),
                needs=()),
            registry.Change(
                slug=RETRY_SLUG,
                subject='Delete again a server a stopped DELETE left behind',
                body=RETRY_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                grows=((API_DELETE, ('_delete_left_behind',
                                     '_delete_under_way')),),
                nova_tests=(RETRY_TEST,),
                notes=RETRY_NOTES,
                unit_tests=(RETRY_UNIT.name,),
                needs=(RESTORE_SLUG, RECREATE_RETRY_SLUG)),
            registry.Change(
                slug=HOST_CHANGED_SLUG,
                subject='Delete a server on the host it got during its '
                        'delete',
                body=HOST_CHANGED_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                targets=HOST_CHANGED_TARGETS,
                grows=((API_DELETE, ('_delete_on_its_new_host',)),),
                notes=HOST_CHANGED_NOTES,
                unit_tests=('compute_utils_ports_or_volumes.py',
                            HOST_CHANGED_UNIT.name),
                needs=(RESTORE_SLUG,)),
            registry.Change(
                slug=RECREATE_HIDDEN_SLUG,
                subject='Recreate bug 1848343: a cross-cell revert after '
                        'the delete',
                body=RECREATE_HIDDEN_MESSAGE,
                trailers=('Related-Bug: #1848343',),
                recreates=(HIDDEN_COPY_TEST,),
                needs=()),
            registry.Change(
                slug=HIDDEN_SLUG,
                subject='Delete the copy a failed cross-cell resize hides',
                body=HIDDEN_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                targets=HIDDEN_TARGETS,
                grows=((API_DELETE, ('_hidden_copies',
                                     'delete_instance_of_deleted_server')),),
                nova_tests=(HIDDEN_COPY_TEST,),
                notes=HIDDEN_NOTES,
                unit_tests=('cross_cell_delete_hidden_copy.py',
                            HIDDEN_UNIT.name),
                needs=(RESTORE_SLUG, RECREATE_HIDDEN_SLUG)),
            registry.Change(
                slug=RECREATE_LOCAL_DELETE_SLUG,
                subject='Recreate bug 1848343: a local delete with '
                        'placement down',
                body=RECREATE_LOCAL_DELETE_MESSAGE,
                trailers=('Related-Bug: #1848343',),
                recreates=(LOCAL_DELETE_TEST,),
                needs=()),
            registry.Change(
                slug='Refuse-a-local-delete-while-placement-is-'
                     'unreachable',
                subject='Refuse a local delete while placement is '
                        'unreachable',
                body=LOCAL_DELETE_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                targets=LOCAL_DELETE_TARGETS,
                test_edits=('local_delete_tests_mock_placement',
                            'local_delete_after_compute_restart_is_retried'),
                nova_tests=(LOCAL_DELETE_TEST,),
                notes=LOCAL_DELETE_NOTES,
                unit_tests=('compute_api_local_delete.py',),
                needs=(RECREATE_LOCAL_DELETE_SLUG, DELETE_SLUG, RESTORE_SLUG)),
            registry.Change(
                slug=RECREATE_CONFIRM_SLUG,
                subject='Recreate bug 1848343: a delete while a confirm '
                        'runs',
                body=RECREATE_CONFIRM_MESSAGE,
                trailers=('Related-Bug: #1848343',),
                recreates=(CONFIRM_TEST,),
                needs=()),
            registry.Change(
                slug='Skip-a-confirm-another-has-completed-on-the-source',
                subject='Skip a confirm another has completed on the source',
                body=CONFIRM_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                targets=CONFIRM_TARGETS,
                test_edits=('confirm_resize_tests_read_migration',),
                nova_tests=(CONFIRM_TEST,),
                notes=CONFIRM_NOTES,
                unit_tests=('compute_mgr_confirm.py',),
                needs=(RECREATE_CONFIRM_SLUG,)),
            registry.Change(
                slug=RECREATE_CROSS_CELL_SLUG,
                subject='Recreate bug 1848343: a delete while a cross-cell '
                        'confirm runs',
                body=RECREATE_CROSS_CELL_MESSAGE,
                trailers=('Related-Bug: #1848343',),
                recreates=(CROSS_CELL_TEST,),
                needs=()),
            registry.Change(
                slug='Delete-both-copies-of-a-server-deleted-in-a-cross-'
                     'cell-resize',
                subject='Delete both copies of a server deleted in a '
                        'cross-cell resize',
                body=CROSS_CELL_MESSAGE,
                trailers=('Partial-Bug: #1848343',),
                targets=CROSS_CELL_TARGETS,
                test_edits=('confirm_rollback_failure',
                            'confirm_task_tests_read_migrations'),
                nova_tests=(CROSS_CELL_TEST,),
                notes=CROSS_CELL_NOTES,
                unit_tests=('cross_cell_deleted_server.py',),
                needs=(RECREATE_CROSS_CELL_SLUG,)),
            registry.Change(
                slug=RECREATE_RESTART_SLUG,
                subject='Recreate bug 1848343: a source stopped before its '
                        'release',
                body=RECREATE_RESTART_MESSAGE,
                trailers=('Related-Bug: #1848343',),
                recreates=(RESTART_TEST,),
                needs=()),
            registry.Change(
                slug='Finish-the-releases-and-deletes-a-stopped-compute-'
                     'left',
                subject='Finish the releases and deletes a stopped compute '
                        'left',
                body=RESTART_MESSAGE,
                trailers=('Closes-Bug: #1848343',),
                targets=RESTART_TARGETS,
                nova_tests=(RESTART_TEST,),
                notes=RESTART_NOTES,
                unit_tests=('compute_mgr_finish_left.py',),
                needs=(RECREATE_RESTART_SLUG,)),
        ),
    ),
)
