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

"""Regression tests for bug 1848343: a server deleted in the middle of a
move leaves no allocation behind, whatever step of the move is late.

https://bugs.launchpad.net/nova/+bug/1848343

test_bug_1848343 covers the rollbacks that move a migration's allocations
back to a deleted server. Here the delete itself, or a step that writes
allocations after it, leaves them:

1. A revert: the delete lands before the source's finish_revert_resize
   moves the migration's allocations back, and finish_revert_resize fails
   on the deleted instance before it does.
2. A live migration completes after the delete:
   post_live_migration_at_destination fails on the deleted instance
   before the source's allocations held by the migration are removed.
3. The scheduler's claim for a cold migration lands after the delete and
   creates the deleted server's instance consumer again.
4. An evacuation: the API deletes the server locally (its compute is
   down) before the scheduler's claim on the destination lands.
5. The scheduler's claim for a live migration, or for a resize to
   another cell, lands after the delete: neither has a compute-side
   claim that would see the deleted server (found by the race
   explorer).

In each, a delete removes only the instance consumer's allocations, and
nothing removes a migration consumer's: the resource tracker heals
instance consumers only, and the migration row goes with its instance.
"""

import threading

from nova.compute import manager as compute_manager
from nova.conductor import manager as conductor_manager
from nova import objects
from nova.tests.functional.api import client as api_client
from nova.tests.functional import integrated_helpers

from nova_fixes import registry

from tests.functional import base

TIMEOUT = 30


class _DeletedMoveTestBase(base.NovaFixesTestMixin,
                           integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(_DeletedMoveTestBase, self).setUp()
        self._start_compute('host1')
        self._start_compute('host2')

    def _create_server(self):
        server = super(_DeletedMoveTestBase, self)._create_server(
            networks='none')
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        return server, source, target

    def _delete_before(self, owner, name, server):
        """Delete ``server`` through the API when ``owner.name`` is called,
        before it runs; returns an event set once it has returned (or
        raised).
        """
        return self.watch(owner, name,
                          before=lambda: self.delete_server_and_wait(server))

    def _note_cast(self, method):
        """A list that gets an entry when the conductor sends ``method``
        to a compute (nova's ComputeAPI.<method>, sent as it was).
        """
        from nova.compute import rpcapi as compute_rpcapi
        sent = []
        original = getattr(compute_rpcapi.ComputeAPI, method)

        def send(*args, **kwargs):
            sent.append(method)
            return original(*args, **kwargs)

        self.stub_out('nova.compute.rpcapi.ComputeAPI.' + method, send)
        return sent

    def _delete_before_move_claim(self, server):
        """Delete ``server`` when the scheduler is about to claim for it,
        then let the claim land.

        :returns: an event set once the claim is written
        """
        claimed = threading.Event()
        self.addCleanup(claimed.set)
        claim_resources = compute_manager.scheduler_utils.claim_resources

        def claim(ctx, client, spec_obj, instance_uuid, *args, **kwargs):
            if instance_uuid == server['id']:
                self.delete_server_and_wait(server)
            try:
                return claim_resources(ctx, client, spec_obj, instance_uuid,
                                       *args, **kwargs)
            finally:
                claimed.set()

        self.stub_out('nova.scheduler.utils.claim_resources', claim)
        return claimed


class RevertThenDeleteTest(_DeletedMoveTestBase):
    """Regression test for bug 1848343: sequence 1, revert then delete.

    1. A cold migration finishes: VERIFY_RESIZE; the migration consumer
       holds the source node, the instance consumer the destination.
    2. The user reverts. The destination's revert_resize casts
       finish_revert_resize to the source.
    3. The user deletes the server before the source's
       finish_revert_resize runs. The migration is 'reverting', so the
       API's confirm-on-delete leaves it alone; the compute deleting the
       server removes the instance consumer only.
    4. finish_revert_resize fails on the deleted instance before it moves
       anything back: the migration consumer keeps the source node.
    """

    def test_delete_before_finish_revert_resize(self):
        server, source, target = self._create_server()
        self._migrate_server(server)
        reverted = self._delete_before(
            compute_manager.ComputeManager, 'finish_revert_resize', server)

        self.api.post_server_action(server['id'], {'revertResize': None})
        self.wait_for(reverted, 'finish_revert_resize', TIMEOUT)
        self.assert_server_left_nothing(server)


class DeleteDuringDestinationRevertTest(_DeletedMoveTestBase):
    """Regression test for bug 1848343: sequence 1, second variant: the
    server is deleted while the destination's revert_resize runs.

    1. A cold migration finishes: VERIFY_RESIZE; the migration consumer
       holds the source node, the instance consumer the destination.
    2. The user reverts. The destination's revert_resize starts and is
       held there.
    3. The user deletes the server, and the DELETE returns. The migration
       is 'reverting', so the API's confirm-on-delete leaves it alone; the
       destination deletes the server (revert_resize does not hold the
       instance lock) and removes the instance consumer only.
    4. revert_resize goes on and casts finish_revert_resize to the source,
       which fails on the deleted instance (or moves the migration's
       allocations to the deleted server): nothing removes what the
       migration consumer holds on the source node.
    """

    def _hold_revert_resize(self):
        """Hold the destination's revert_resize when it starts.

        :returns: (holding, release, done): holding is set once
            revert_resize has started and waits; set release to let it go
            on; done is set once it has returned (or raised).
        """
        holding = threading.Event()
        release = threading.Event()
        done = self.watch(compute_manager.ComputeManager, 'revert_resize',
                          before=lambda: (holding.set(),
                                          release.wait(TIMEOUT)))
        # Cleanups run last first: revert_resize is let go before the
        # services stop.
        self.addCleanup(release.set)
        return holding, release, done

    def test_delete_during_revert_resize_at_destination(self):
        server, source, target = self._create_server()
        self._migrate_server(server)
        holding, release, reverted = self._hold_revert_resize()
        finished = self.watch(compute_manager.ComputeManager,
                              'finish_revert_resize')

        self.api.post_server_action(server['id'], {'revertResize': None})
        self.wait_for(holding, 'revert_resize on %s' % target, TIMEOUT)
        self.delete_server_and_wait(server)
        release.set()
        self.wait_for(reverted, 'revert_resize on %s' % target, TIMEOUT)
        self.wait_for(finished, 'finish_revert_resize on %s' % source,
                      TIMEOUT)
        self.assert_server_left_nothing(server)


class ProcessDied(Exception):
    """Injected where a test makes a process die: nothing it would have
    done next runs.
    """


class LocalDeleteDiesTest(_DeletedMoveTestBase):
    """Regression test for bug 1848343: the API deleting a server locally
    dies right after the instance's record is destroyed.

    The fixes remove a migration's allocations in the delete paths: no
    step of the move that fails on the deleted instance can be counted on
    to do it. nova's local delete (the server's compute is down) destroys
    the record and only then would anything remove the migrations'
    allocations: an API that dies in between leaves the migration
    consumer holding the source node, and nothing left names it (the
    record is destroyed, its migrations with it; no request comes back
    to the delete; the resource tracker never heals migration
    consumers). Until the fixes deleted every allocation first, this was
    out of reach, and ``nova-manage placement audit --delete`` the
    operator's remedy. Now the local delete removes the allocations of
    the instance and of its migrations before it destroys anything, so a
    death after the destroy leaves nothing; the audit finds nothing
    either.
    """

    def _die_after_destroy(self, server):
        """The process destroying ``server``'s instance record dies right
        after the destroy is committed.

        :returns: an event set once it died
        """
        died = threading.Event()
        self.addCleanup(died.set)
        original = objects.Instance.destroy

        def destroy(instance, *args, **kwargs):
            result = original(instance, *args, **kwargs)
            if instance.uuid == server['id']:
                died.set()
                raise ProcessDied()
            return result

        self.stub_out('nova.objects.instance.Instance.destroy', destroy)
        return died

    def _revert_resize_goes_down(self):
        """The destination compute goes down in revert_resize: it does
        nothing of it.

        :returns: an event set once it went down
        """
        down = threading.Event()

        def revert_resize(*args, **kwargs):
            down.set()
            raise ProcessDied()

        self.stub_out('nova.compute.manager.ComputeManager.revert_resize',
                      revert_resize)
        return down

    def _migration_uuids(self, server):
        uuids = []
        for cctxt in self._cell_contexts():
            uuids.extend(mig.uuid for mig in objects.MigrationList.
                         get_by_filters(cctxt,
                                        {'instance_uuid': server['id']}))
        return uuids

    def test_api_dies_after_destroying_the_record(self):
        """1. A cold migration finishes: VERIFY_RESIZE.
        2. The user reverts; the destination compute goes down in its
           revert_resize: it does nothing more.
        3. The user deletes the server; its compute is down, so the API
           deletes it locally: it destroys the record and dies.
        4. No allocation of the server or of its migration is left, nor
           once the destination compute is back, after archive and the
           periodics (on vanilla nova the migration consumer keeps the
           source node).
        5. placement audit finds nothing to delete.
        """
        server, source, target = self._create_server()
        self._migrate_server(server)
        [migration] = self._migration_uuids(server)
        down = self._revert_resize_goes_down()

        self.api.post_server_action(server['id'], {'revertResize': None})
        self.wait_for(down, 'revert_resize on %s' % target, TIMEOUT)
        compute = self.computes[target]
        compute.stop()
        self.api.put_service(compute.service_ref.uuid,
                             {'forced_down': 'true'})
        died = self._die_after_destroy(server)
        self.assertRaises(api_client.OpenStackApiException,
                          self.api.delete_server, server['id'])
        self.wait_for(died, 'the local delete', TIMEOUT)
        self.assertRaises(api_client.OpenStackApiNotFoundException,
                          self.api.get_server, server['id'])

        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']), base.LEAK + 'allocations left for the server')
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            migration), base.LEAK + 'allocations left for its migration')
        self.computes[target] = self.restart_compute_service(compute)
        self.api.put_service(compute.service_ref.uuid,
                             {'forced_down': 'false'})
        self.archive_and_run_periodics()
        self.assertEqual({}, self._all_allocations(), base.LEAK +
                         'allocations left after archive and the periodics')
        result, output = self.placement_audit(delete=False)
        self.assertEqual(0, result, output)


class LiveMigrationCompletesAfterDeleteTest(_DeletedMoveTestBase):
    """Regression test for bug 1848343: sequence 2, a live migration
    completes after the server was deleted.

    1. A live migration runs: the migration consumer holds the source
       node, the instance consumer the destination.
    2. The guest has moved; before the destination's
       post_live_migration_at_destination runs, the user deletes the
       server. The source compute deletes it and removes the instance
       consumer only.
    3. post_live_migration_at_destination fails on the deleted instance,
       and the source's _post_live_migration never reaches the removal of
       the migration's allocations on the source node.

    Before nova 31.0.0 (and 30.2.1 on stable/2024.2), the source caught
    the failure of post_live_migration_at_destination and went on to
    remove the migration's allocations: "Fix bug 2000069" made it raise,
    and so opened this window. The last releases of 2023.1 (27.5.1),
    2023.2 (28.3.1) and 2024.1 (29.4.0), and Debian 12's 26.2.2, do not
    leak here: the change reached no branch older than 2024.1, and
    unmaintained/2024.1 has it in no release.
    """

    window_opened_by = registry.OpenedUpstream(
        'a87b80fb39a65140c7e6c3ed87edf10b1df70be8', 'Fix bug 2000069',
        ('30.2.1', '31.0.0'))

    def test_delete_before_post_live_migration_at_destination(self):
        server, source, target = self._create_server()
        completed = self._delete_before(
            compute_manager.ComputeManager,
            'post_live_migration_at_destination', server)
        post_live = self.watch(compute_manager.ComputeManager,
                               '_post_live_migration')

        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': target, 'block_migration': 'auto'}})
        self.wait_for(completed, 'post_live_migration_at_destination',
                      TIMEOUT)
        self.wait_for(post_live, '_post_live_migration', TIMEOUT)
        self.assert_server_left_nothing(server)


class ClaimAfterDeleteMoveTest(_DeletedMoveTestBase):
    """Regression test for bug 1848343: sequence 3, the scheduler's claim
    for a cold migration lands after the delete.

    1. The conductor moves the source allocations to the migration
       consumer and asks the scheduler for a destination.
    2. The user deletes the server before the scheduler claims: the
       compute removes the instance consumer (it holds nothing now).
    3. The scheduler claims the destination for the instance consumer,
       creating it again for a deleted server.
    4. The move fails on the deleted instance; its revert moves the
       migration's allocations into the re-created instance consumer, or
       leaves them with the migration. Nobody deletes either.
    """

    def test_delete_before_cold_migration_claim(self):
        server, source, target = self._create_server()
        claimed = self._delete_before_move_claim(server)
        migrated = self.watch(conductor_manager.ComputeTaskManager,
                              'migrate_server')
        cast = self._note_cast('prep_resize')
        prepared = self.watch(compute_manager.ComputeManager, 'prep_resize')

        self.api.post_server_action(server['id'], {'migrate': None})
        self.wait_for(claimed, 'the scheduler to claim', TIMEOUT)
        self.wait_for(migrated, 'the conductor', TIMEOUT)
        # nova casts prep_resize to the destination, which fails on the
        # deleted instance; with the fix the conductor stops the move
        # once it finds the server deleted, and casts nothing.
        if cast:
            self.wait_for(prepared, 'prep_resize on %s to fail' % target,
                          TIMEOUT)
        self.assert_server_left_nothing(server)


class LiveMigrationClaimAfterDeleteTest(_DeletedMoveTestBase):
    """Regression test for bug 1848343: the scheduler's claim for a live
    migration lands after the delete (found by the race explorer:
    live-migrate at rpc scheduler.select_destinations).

    1. The conductor moves the source allocations to the migration
       consumer and asks the scheduler for a destination.
    2. The user deletes the server before the scheduler claims: the
       source compute removes the allocations of the instance and of its
       migration.
    3. The scheduler claims the destination for the instance consumer,
       creating it again for a deleted server.
    4. The conductor casts live_migration to the source; nothing on the
       way removes the claim (the compute does not claim for a live
       migration, so no compute-side check sees it).

    The cast of step 4 is not delivered: the source would go on to live
    migrate the deleted guest, with RPC calls to the destination that
    outlive the test (long_rpc_timeout) and remove nothing (the race
    explorer's live-migrate row at rpc scheduler.select_destinations
    runs it to its end and finds the same leak). With the fix the
    conductor never sends it.
    """

    def test_delete_before_live_migration_claim(self):
        server, source, target = self._create_server()
        claimed = self._delete_before_move_claim(server)
        migrated = self.watch(conductor_manager.ComputeTaskManager,
                              'live_migrate_instance')
        sent = []
        self.stub_out('nova.compute.rpcapi.ComputeAPI.live_migration',
                      lambda *args, **kwargs: sent.append(kwargs))

        self.api.post_server_action(server['id'], {'os-migrateLive': {
            'host': None, 'block_migration': 'auto'}})
        self.wait_for(claimed, 'the scheduler to claim', TIMEOUT)
        self.wait_for(migrated, 'the conductor', TIMEOUT)
        self.assert_server_left_nothing(server)


class CrossCellResizeClaimAfterDeleteTest(base.NovaFixesTestMixin,
                                          integrated_helpers.
                                          ProviderUsageBaseTestCase):
    """Regression test for bug 1848343: the scheduler's claim for a
    cross-cell resize lands after the delete (found by the race explorer:
    cross-cell-resize-* at ComputeTaskManager._cold_migrate).

    1. host1 is in cell1, host2 in cell2, and the admin may resize across
       cells. The admin resizes the server; the conductor asks the
       scheduler for a destination.
    2. The user deletes the server before the scheduler claims.
    3. The scheduler claims host2 for the instance consumer, creating it
       again for a deleted server.
    4. The cross-cell task fails in the conductor on the deleted instance;
       the rollback moves nothing back (the migration holds nothing), and
       no compute ever sees the move to remove the claim.
    """

    compute_driver = 'fake.MediumFakeDriver'
    NUMBER_OF_CELLS = 2

    def setUp(self):
        super(CrossCellResizeClaimAfterDeleteTest, self).setUp()
        from nova.policies import base as base_policies
        from nova.policies import servers as servers_policies
        self.policy.set_rules({servers_policies.CROSS_CELL_RESIZE:
                               base_policies.RULE_ADMIN_API},
                              overwrite=False)
        self._start_compute('host1', cell_name='cell1')
        self.small = self._create_flavor(vcpu=1, memory_mb=512, disk=1)
        self.bigger = self._create_flavor(vcpu=2, memory_mb=1024, disk=1)

    def test_delete_before_cross_cell_resize_claim(self):
        server = self._create_server(flavor_id=self.small, networks='none')
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        self._start_compute('host2', cell_name='cell2')
        claimed = _DeletedMoveTestBase._delete_before_move_claim(self, server)
        migrated = self.watch(conductor_manager.ComputeTaskManager,
                              'migrate_server')

        self.api.post_server_action(server['id'], {
            'resize': {'flavorRef': self.bigger}})
        self.wait_for(claimed, 'the scheduler to claim', TIMEOUT)
        self.wait_for(migrated, 'the conductor', TIMEOUT)
        self.assert_server_left_nothing(server)


class EvacuateAfterLocalDeleteTest(_DeletedMoveTestBase):
    """Regression test for bug 1848343: sequence 4, an evacuation claims
    after the API deleted the server locally.

    1. The server's compute is down; the admin evacuates it. The conductor
       asks the scheduler for a destination.
    2. The user deletes the server. Its compute is down, so the API
       deletes it locally and removes the instance consumer.
    3. The scheduler claims the destination for the instance consumer,
       creating it again for a deleted server.
    4. rebuild_instance on the destination fails on the deleted instance
       and removes no allocation.
    """

    def test_delete_before_evacuation_claim(self):
        server, source, target = self._create_server()
        compute = self.computes[source]
        compute.stop()
        self.admin_api.put_service(compute.service_ref.uuid,
                                   {'forced_down': 'true'})
        claimed = self._delete_before_move_claim(server)
        rebuilt = self.watch(compute_manager.ComputeManager,
                             'rebuild_instance')

        self.admin_api.post_server_action(server['id'], {'evacuate': {}})
        self.wait_for(claimed, 'the scheduler to claim', TIMEOUT)
        self.wait_for(rebuilt, 'rebuild_instance on %s' % target, TIMEOUT)
        self.assert_server_left_nothing(server)


# -- neighbouring sequences ------------------------------------------------


class ConfirmRacingDeleteTest(_DeletedMoveTestBase):
    """No regression for bug 1848343's fixes: a confirm racing a delete.

    1. A cold migration finishes: VERIFY_RESIZE.
    2. The user confirms: the migration is 'confirming' and the source is
       cast confirm_resize, which is held back.
    3. The user deletes the server: the API's confirm-on-delete finds the
       'confirming' migration and confirms it on the source with an RPC
       call (not a cast), which removes the migration's allocations
       before the destination deletes the server.
    4. The user's confirm_resize runs: the migration is gone with its
       instance, and it returns.

    nova's confirm-on-delete waits for the confirm, so nothing leaks on
    any nova: the test guards that the delete path's removal of the
    migration's allocations does not get in the way.
    """

    recreates = False

    def test_delete_before_confirm_resize_runs(self):
        server, source, target = self._create_server()
        self._migrate_server(server)
        deleted = threading.Event()
        self.addCleanup(deleted.set)
        held = []
        holding = threading.Event()
        returned = threading.Event()
        self.addCleanup(returned.set)
        original = compute_manager.ComputeManager.confirm_resize

        def confirm_resize(*args, **kwargs):
            if held:
                return original(*args, **kwargs)
            held.append(args)
            holding.set()
            deleted.wait(TIMEOUT)
            try:
                return original(*args, **kwargs)
            finally:
                returned.set()

        self.stub_out('nova.compute.manager.ComputeManager.confirm_resize',
                      confirm_resize)
        self.api.post_server_action(server['id'], {'confirmResize': None})
        self.wait_for(holding, "the user's confirm_resize", TIMEOUT)
        self.delete_server_and_wait(server)
        deleted.set()
        self.wait_for(returned, "the user's confirm_resize", TIMEOUT)
        self.assert_server_left_nothing(server)


class DeleteWhileConfirmingTest(_DeletedMoveTestBase):
    """Regression test for bug 1848343: a delete while the user's confirm
    runs on the source (found by the race explorer: cold-migrate-confirm,
    resize-confirm and resize-same-host at ComputeManager._confirm_resize).

    1. A cold migration finishes: VERIFY_RESIZE.
    2. The user confirms: the API marks the migration 'confirming' and
       casts confirm_resize to the source, which takes the server's lock
       and starts cleaning up the source.
    3. The user deletes the server: the API's confirm-on-delete finds the
       migration 'confirming' and calls confirm_resize on the source with
       the migration as it read it, and that call waits for the lock.
    4. The user's confirm completes: the migration is 'confirmed' and the
       server's migration context is dropped.
    5. The delete's confirm gets the lock and trusts the status it was
       given: it confirms again and fails on the missing migration
       context (AttributeError). The server goes to ERROR, the DELETE
       returns 500 and the server, its quota usage and its allocations
       stay.

    ConfirmRacingDeleteTest is the other order: the delete's confirm gets
    the lock first.
    """

    def test_delete_while_confirm_resize_runs(self):
        server, source, target = self._create_server()
        self._migrate_server(server)
        release = threading.Event()
        self.addCleanup(release.set)
        holding = threading.Event()
        confirms = []
        second = threading.Event()
        self.addCleanup(second.set)
        confirm_resize = compute_manager.ComputeManager.confirm_resize
        _confirm_resize = compute_manager.ComputeManager._confirm_resize

        def count_confirms(*args, **kwargs):
            confirms.append(True)
            if len(confirms) == 2:
                second.set()
            return confirm_resize(*args, **kwargs)

        def hold_first(*args, **kwargs):
            if not holding.is_set():
                holding.set()
                release.wait(TIMEOUT)
            return _confirm_resize(*args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.confirm_resize',
                      count_confirms)
        self.stub_out('nova.compute.manager.ComputeManager._confirm_resize',
                      hold_first)
        self.api.post_server_action(server['id'], {'confirmResize': None})
        self.wait_for(holding, "the user's confirm on %s" % source, TIMEOUT)

        failures = []
        deleted = threading.Event()

        def delete():
            try:
                self.api.delete_server(server['id'])
            except Exception as exc:
                failures.append(exc)
            finally:
                deleted.set()

        threading.Thread(target=delete).start()
        # The delete's confirm waits for the lock the user's holds.
        self.wait_for(second, "the delete's confirm_resize", TIMEOUT)
        release.set()
        self.wait_for(deleted, 'the DELETE to return', TIMEOUT)
        # A DELETE that fails leaves the server, and with it its quota
        # usage and its allocations, as the user asked for them to go.
        self.assertEqual([], failures, base.LEAK + 'the DELETE failed: the '
                         'server is left, with its allocations')
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)


class UnshelveAfterDeleteTest(_DeletedMoveTestBase):
    """Regression test for bug 1848343: a delete during an unshelve.

    1. A server is shelved and offloaded: it has no host and no
       allocations.
    2. The user unshelves it; the conductor asks the scheduler for a host.
    3. The user deletes the server: it has no host, so the API deletes it
       locally.
    4. The scheduler claims a host for the instance consumer, creating it
       again for a deleted server, and the unshelve fails on the deleted
       instance.
    """

    def test_delete_before_unshelve_claim(self):
        server, source, target = self._create_server()
        self._shelve_server(server)
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']))
        claimed = self._delete_before_move_claim(server)
        scheduled = self.watch(conductor_manager.ComputeTaskManager,
                               'unshelve_instance')
        unshelved = self.watch(compute_manager.ComputeManager,
                               'unshelve_instance')

        self.api.post_server_action(server['id'], {'unshelve': None})
        self.wait_for(claimed, 'the scheduler to claim', TIMEOUT)
        self.wait_for(scheduled, 'the conductor', TIMEOUT)
        self.wait_for(unshelved, 'unshelve_instance on the compute', TIMEOUT)
        self.assert_server_left_nothing(server)


class LiveServerMovesTest(_DeletedMoveTestBase):
    """No regression for bug 1848343's fixes: a move that completes with
    no delete leaves the server exactly its allocations, on its new host,
    and nothing for its migration.

    The delete paths now remove the allocations of a server's migrations
    and the late writers (a revert, a rebuild, an unshelve) check whether
    the server is deleted after writing: none of that may touch a live
    server. A revert is LiveServerRevertTest.test_finish_revert_resize's.
    """

    recreates = False

    def _assert_allocated_on(self, server, host):
        """The server is on ``host`` and holds exactly its flavor there;
        nothing else is allocated, on any host; so again once the deleted
        rows are archived and the resource trackers have run.
        """
        for settled in (False, True):
            if settled:
                self.archive_and_run_periodics()
            server = self.api.get_server(server['id'])
            self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
            self.assertFlavorMatchesAllocation(
                server['flavor'], server['id'],
                self._get_provider_uuid_by_host(host))
            for other in set(self.computes) - {host}:
                self.assertEqual({}, self._get_allocations_by_provider_uuid(
                    self._get_provider_uuid_by_host(other)))
            self.assertEqual([server['id']], list(self._all_allocations()))
            self.assert_no_leaked_allocations()

    def test_live_migration_completes(self):
        server, source, target = self._create_server()
        self.live_migrate_to(server, target)
        self._assert_allocated_on(server, target)

    def test_evacuation(self):
        """The evacuated server holds the source node too until the source
        compute comes back and cleans up what was evacuated from it.
        """
        server, source, target = self._create_server()
        compute = self.computes[source]
        compute.stop()
        self.admin_api.put_service(compute.service_ref.uuid,
                                   {'forced_down': 'true'})
        self.admin_api.post_server_action(server['id'], {'evacuate': {}})
        self._wait_for_migration_status(server, ['done'])
        server = self._wait_for_server_parameter(server, {
            'OS-EXT-SRV-ATTR:host': target, 'OS-EXT-STS:task_state': None})

        self.computes[source] = self.restart_compute_service(compute)
        self.admin_api.put_service(compute.service_ref.uuid,
                                   {'forced_down': 'false'})
        self._assert_allocated_on(server, target)

    def test_unshelve(self):
        server, source, target = self._create_server()
        self._shelve_server(server)
        self.assertEqual({}, self._all_allocations())
        server = self._unshelve_server(server)
        self._assert_allocated_on(server, server['OS-EXT-SRV-ATTR:host'])
