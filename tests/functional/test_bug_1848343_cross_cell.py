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

"""Regression tests for bug 1848343: a server deleted during a cross-cell
resize is deleted, in both cells (found by the race explorer).

https://bugs.launchpad.net/nova/+bug/1848343

During a cross-cell resize the server has a copy in each cell, and the
instance mapping names the one the API acts on. The invariant: once the
DELETE has returned, no copy of the server lives in any cell, no guest of
it is left on any host and nothing is allocated to it or its migration.

1. The DELETE races the user's confirmation: both confirm at the source,
   and the second fails once the first has hard-deleted the source cell's
   copy (the DELETE returns 500).
2. The DELETE comes before the conductor reverts: the revert points the
   mapping back at the source cell's copy, and the deleted server lives
   again there.
3. The DELETE comes while the destination finishes: it deletes the source
   cell's copy, then the conductor points the mapping at the target
   cell's, which lives on with its guest.
"""

import threading
import time

from nova.compute import manager as compute_manager
from nova.compute import resource_tracker
from nova.conductor import manager as conductor_manager
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.tests.functional import integrated_helpers

from tests.functional import base

TIMEOUT = 30


class _CrossCellResizeTestBase(base.NovaFixesTestMixin,
                               integrated_helpers.ProviderUsageBaseTestCase):
    """host1 in cell1, host2 in cell2, the admin allowed to resize across
    cells (as nova's test_cross_cell_migrate), and a server on host1
    resized to host2.
    """

    compute_driver = 'fake.MediumFakeDriver'
    NUMBER_OF_CELLS = 2

    def setUp(self):
        super(_CrossCellResizeTestBase, self).setUp()
        from nova.policies import base as base_policies
        from nova.policies import servers as servers_policies
        self.policy.set_rules({servers_policies.CROSS_CELL_RESIZE:
                               base_policies.RULE_ADMIN_API},
                              overwrite=False)
        self._start_compute('host1', cell_name='cell1')
        self.small = self._create_flavor(vcpu=1, memory_mb=512, disk=1,
                                         ephemeral=0)
        self.bigger = self._create_flavor(vcpu=2, memory_mb=1024, disk=1,
                                          ephemeral=0)
        self.server = self._create_server(flavor_id=self.small,
                                          networks='none')
        self.assertEqual('host1', self.server['OS-EXT-SRV-ATTR:host'])
        self._start_compute('host2', cell_name='cell2')

    def _resize(self, wait=True):
        self.api.post_server_action(self.server['id'], {
            'resize': {'flavorRef': self.bigger}})
        if wait:
            self.server = self._wait_for_state_change(self.server,
                                                      'VERIFY_RESIZE')
            self.assertEqual('host2', self.server['OS-EXT-SRV-ATTR:host'])

    def _fail_once(self, name):
        original = getattr(resource_tracker.ResourceTracker, name)
        failed = []

        def fail_once(rt, *args, **kwargs):
            if not failed:
                failed.append(name)
                raise test.TestingException('the test fails %s' % name)
            return original(rt, *args, **kwargs)

        self.stub_out('nova.compute.resource_tracker.ResourceTracker.%s'
                      % name, fail_once)
        return failed

    def _fail(self, action, failing):
        """Resize the server, then fail ``action`` (confirmResize or
        revertResize) once at the resource tracker's ``failing``: the
        server goes to ERROR with both copies left.

        :returns: the result of _copies then
        """
        self._resize()
        failed = self._fail_once(failing)
        self.api.post_server_action(self.server['id'], {action: None})
        self._wait_for_state_change(self.server, 'ERROR')
        self.assertEqual([failing], failed)
        copies, guests = self._copies()
        self.assertEqual(2, len(copies), 'the failed %s left one copy: '
                         'nothing to recreate' % action)
        return copies, guests

    def _copies(self):
        """{cell name: the server's live copy there}; {host: guest} of
        the server on the fake hypervisors.
        """
        copies = {}
        for name, cell in self.cell_mappings.items():
            with nova_context_target(cell) as cctxt:
                try:
                    copies[name] = objects.Instance.get_by_uuid(
                        cctxt, self.server['id'])
                except exception.InstanceNotFound:
                    pass
        guests = {host: compute.manager.driver.instances[self.server['id']]
                  for host, compute in self.computes.items()
                  if self.server['id'] in compute.manager.driver.instances}
        return copies, guests

    def assert_deleted_everywhere(self, down=(), timeout=20):
        """No live copy of the server in any cell and no guest of it on
        any host, within ``timeout`` (a delete is cast to the compute);
        then nothing allocated to it, its migration or anything else.

        :param down: hosts that were down during the delete: a guest left
            there is the running-deleted periodic's to reap, as on any
            nova
        """
        deadline = time.monotonic() + timeout
        while True:
            copies, guests = self._copies()
            for host in down:
                guests.pop(host, None)
            if not (copies or guests) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual({}, {name: (i.vm_state, i.task_state, i.hidden)
                              for name, i in copies.items()},
                         base.LEAK + 'the deleted server lives on in a '
                         'cell, counted in its project\'s quota usage')
        self.assertEqual({}, guests, base.LEAK + 'a guest of the deleted '
                         'server is left')
        self.assert_server_left_nothing(self.server)


def nova_context_target(cell):
    from nova import context as nova_context
    return nova_context.target_cell(nova_context.get_admin_context(), cell)


class CrossCellDeleteWhileConfirmingTest(_CrossCellResizeTestBase):
    """Regression test for bug 1848343: sequence 1 (the race explorer's
    cross-cell-resize-confirm at ComputeManager._confirm_snapshot_based_
    resize_at_source, _confirm_snapshot_based_resize_delete_port_bindings
    and _delete_allocation_after_move).

    1. The server is resized to host2 in cell2: VERIFY_RESIZE.
    2. The user confirms: the API marks the migration 'confirming' and
       casts confirm_snapshot_based_resize to the conductor, whose task
       calls the source, which takes the server's lock and cleans up.
    3. The user deletes the server: the API's confirm-on-delete finds the
       'confirming' migration and calls the conductor, whose second task
       calls the source too, and that call waits for the lock.
    4. The user's confirmation returns from the source and its task
       hard-deletes the source cell's copy with its instance actions.
    5. The second call runs and fails on the action it was recorded under
       (InstanceActionNotFound): the second task rolls back, the server
       goes to ERROR and the DELETE returns 500.
    """

    def test_delete_while_cross_cell_confirm_runs(self):
        self._resize()
        release = threading.Event()
        self.addCleanup(release.set)
        holding = threading.Event()
        calls = []
        second = threading.Event()
        self.addCleanup(second.set)
        manager = compute_manager.ComputeManager
        at_source = manager.confirm_snapshot_based_resize_at_source
        cleanup = manager._confirm_snapshot_based_resize_at_source

        def count_calls(*args, **kwargs):
            calls.append(True)
            if len(calls) == 2:
                second.set()
            return at_source(*args, **kwargs)

        def hold_first(*args, **kwargs):
            if not holding.is_set():
                holding.set()
                release.wait(TIMEOUT)
            return cleanup(*args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.'
                      'confirm_snapshot_based_resize_at_source', count_calls)
        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_confirm_snapshot_based_resize_at_source', hold_first)
        self.api.post_server_action(self.server['id'],
                                    {'confirmResize': None})
        self.wait_for(holding, "the user's confirmation at the source",
                      TIMEOUT)

        failures = []
        deleted = threading.Event()

        def delete():
            try:
                self.api.delete_server(self.server['id'])
            except Exception as exc:
                failures.append(exc)
            finally:
                deleted.set()

        threading.Thread(target=delete).start()
        # The delete's confirmation waits for the lock the user's holds.
        self.wait_for(second, "the delete's confirmation at the source",
                      TIMEOUT)
        release.set()
        self.wait_for(deleted, 'the DELETE to return', TIMEOUT)
        self.assertEqual([], failures, base.LEAK + 'the DELETE failed: the '
                         'server is left, with its quota usage')
        self.assert_deleted_everywhere()


class CrossCellRevertAfterDeleteTest(_CrossCellResizeTestBase):
    """Regression test for bug 1848343: sequence 2 (the race explorer's
    cross-cell-resize-revert at rpc conductor.revert_snapshot_based_resize,
    with the server's compute up or down).

    1. The server is resized to host2 in cell2: VERIFY_RESIZE.
    2. The user reverts: the API marks the migration 'reverting' and casts
       revert_snapshot_based_resize to the conductor.
    3. Before the conductor runs it, the user deletes the server: the
       mapping names cell2, and the copy there is deleted on host2 (or by
       the API, host2 being down).
    4. The conductor's revert points the mapping at cell1 and shows the
       copy there again: the deleted server is back in cell1, counted in
       the project's quota usage.
    """

    def _revert_after_delete(self, down=()):
        self._resize()

        def delete():
            for host in down:
                self.admin_api.put_service(
                    self.computes[host].service_ref.uuid,
                    {'forced_down': 'true'})
            self.delete_server_and_wait(self.server)

        reverted = self.watch(conductor_manager.ComputeTaskManager,
                              'revert_snapshot_based_resize', before=delete)
        self.api.post_server_action(self.server['id'],
                                    {'revertResize': None})
        self.wait_for(reverted, "the conductor's revert", TIMEOUT)
        self.assert_deleted_everywhere(down=down)

    def test_delete_before_cross_cell_revert(self):
        self._revert_after_delete()

    def test_local_delete_before_cross_cell_revert(self):
        """host2 is seen down: the API deletes the cell2 copy itself."""
        self._revert_after_delete(down=('host2',))


class CrossCellDeleteDuringFinishTest(_CrossCellResizeTestBase):
    """Regression test for bug 1848343: sequence 3 (the race explorer's
    cross-cell-resize-* at ComputeManager._finish_snapshot_based_resize_
    at_dest_spawn and _update_instance_after_spawn).

    1. The admin resizes the server to host2 in cell2; the conductor has
       copied it to cell2, and host2 finishes the resize (it spawns the
       guest).
    2. The user deletes the server: the mapping still names cell1, so the
       copy there is deleted, on host1.
    3. host2 returns, and the conductor points the mapping at cell2: the
       copy there lives on in VERIFY_RESIZE, with its guest on host2.
    """

    def test_delete_during_cross_cell_finish_at_destination(self):
        finished = self.watch(
            compute_manager.ComputeManager,
            '_finish_snapshot_based_resize_at_dest_spawn',
            before=lambda: self.delete_server_and_wait(self.server))
        migrated = self.watch(conductor_manager.ComputeTaskManager,
                              'migrate_server')
        self._resize(wait=False)
        self.wait_for(finished, 'the finish at the destination', TIMEOUT)
        self.wait_for(migrated, 'the conductor', TIMEOUT)
        self.assert_deleted_everywhere()


class CrossCellFailedThenDeleteTest(_CrossCellResizeTestBase):
    """The confirm or the revert of a cross-cell resize fails; then the
    server is deleted: no copy of it is left in either cell.

    Only a successful confirm or revert deletes the copy the resize left
    in the other cell (the conductor hard-deletes it). When the source's
    part of the confirm fails (here its resource tracker, as when
    placement is unreachable), or the destination's part of the revert,
    the conductor's rollback puts the server in ERROR and leaves the other
    copy, hidden; the DELETE deleted only the copy the instance mapping
    names, and the hidden one stayed for good in its cell, with nothing
    to reach it (found by the race explorer's outage, timeout and restart
    variants, which stop the confirm or the revert in other ways).
    """

    def _delete_after(self, action, failing):
        self._fail(action, failing)
        self.delete_server_and_wait(self.server)
        self.assert_deleted_everywhere()

    def test_delete_after_the_confirm_failed(self):
        self._delete_after('confirmResize', 'drop_move_claim_at_source')

    def test_delete_after_the_revert_failed(self):
        self._delete_after('revertResize', 'drop_move_claim_at_dest')


class CrossCellFailedUndeletableServerTest(_CrossCellResizeTestBase):
    """No regression for the delete of a failed cross-cell resize's hidden
    copy: nova's API does not delete a server whose termination is
    disabled, nor may the fixes delete its hidden copy. The two copies are
    one server, holding the same instance consumer's allocations.
    """

    recreates = False

    def test_delete_of_a_server_whose_termination_is_disabled(self):
        copies, guests = self._fail('confirmResize',
                                    'drop_move_claim_at_source')
        mapped = [i for i in copies.values() if not i.hidden]
        self.assertEqual(1, len(mapped))
        mapped[0].disable_terminate = True
        mapped[0].save()
        allocations = self._all_allocations()
        self.api.delete_server(self.server['id'])
        # nova's API answers 204 and does nothing; the copy's delete
        # would have been saved before the answer, then cast.
        time.sleep(1)
        after, guests_after = self._copies()
        self.assertEqual(
            {name: (i.vm_state, i.task_state, i.hidden)
             for name, i in copies.items()},
            {name: (i.vm_state, i.task_state, i.hidden)
             for name, i in after.items()},
            'the delete of a server whose termination is disabled acted '
            'on a copy of it')
        self.assertEqual(sorted(guests), sorted(guests_after))
        self.assertEqual(allocations, self._all_allocations())


class CrossCellConfirmLeavesSourceAllocationsTest(_CrossCellResizeTestBase):
    """The source of a cross-cell resize cannot delete the migration's
    allocations when the resize is confirmed; later the server is
    deleted: nothing is left in placement.

    The source records its migration 'error' when placement does not
    delete what the migration consumer holds on the source node (the
    report client only logs a placement it cannot reach), so that the
    delete of the server removes it. For a cross-cell resize that record
    is in the source cell, whose copy the conductor then hard-deletes, and
    the conductor saved the target cell's migration, the one the delete
    reads, 'confirmed': a status the fixes' delete skips, so that its cost
    does not grow with the server's history. The allocations were left
    for good (found by the race explorer's outage variant, held at the
    source's _delete_allocation_after_move).
    """

    def test_delete_after_the_confirm(self):
        self._resize()
        original = report.SchedulerReportClient.delete_allocation_for_instance
        unreachable = []

        def migration_not_deleted(client, context, uuid, *args, **kwargs):
            if kwargs.get('consumer_type') == 'migration' and not unreachable:
                # As the report client answers when placement is down.
                unreachable.append(uuid)
                return None
            return original(client, context, uuid, *args, **kwargs)

        self.stub_out('nova.scheduler.client.report.SchedulerReportClient.'
                      'delete_allocation_for_instance', migration_not_deleted)
        self.api.post_server_action(self.server['id'],
                                    {'confirmResize': None})
        self.server = self._wait_for_state_change(self.server, 'ACTIVE')
        self.assertEqual(1, len(unreachable), 'the source did not delete '
                         'the migration\'s allocations')
        self.assertNotEqual({}, self._get_allocations_by_server_uuid(
            unreachable[0]), 'nothing was left: nothing to recreate')

        self.delete_server_and_wait(self.server)
        self.assert_deleted_everywhere()


class CrossCellResizeLiveServerTest(_CrossCellResizeTestBase):
    """No regression for bug 1848343's fixes: a cross-cell resize with no
    delete, reverted then confirmed, leaves the server in one cell, with
    one guest, holding exactly its flavor on its host.
    """

    recreates = False

    def _assert_only(self, cell, host, flavor):
        copies, guests = self._copies()
        self.assertEqual([cell], list(copies))
        self.assertEqual([host], list(guests))
        server = self.api.get_server(self.server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(flavor['vcpus'], server['flavor']['vcpus'])
        self.assertFlavorMatchesAllocation(
            server['flavor'], self.server['id'],
            self._get_provider_uuid_by_host(host))
        self.assertEqual([self.server['id']], list(self._all_allocations()))

    def test_revert_then_confirm(self):
        small = self.api.get_flavor(self.small)
        bigger = self.api.get_flavor(self.bigger)
        self._resize()
        self.api.post_server_action(self.server['id'],
                                    {'revertResize': None})
        self._wait_for_state_change(self.server, 'ACTIVE')
        self._wait_for_migration_status(self.server, ['reverted'])
        self._assert_only('cell1', 'host1', small)

        self._resize()
        self.api.post_server_action(self.server['id'],
                                    {'confirmResize': None})
        self._wait_for_migration_status(self.server, ['confirmed'])
        self._wait_for_state_change(self.server, 'ACTIVE')
        self._assert_only('cell2', 'host2', bigger)
