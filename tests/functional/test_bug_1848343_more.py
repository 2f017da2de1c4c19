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

"""Regression tests for bug 1848343: two more compute revert paths.

https://bugs.launchpad.net/nova/+bug/1848343

- the cross-cell resize revert at the source compute
  (finish_revert_snapshot_based_resize_at_source);
- live_migration_abort of a live migration still queued on the source.

Both move the migration's allocations back to the instance consumer with
ComputeManager._revert_allocation, as the paths of test_bug_1848343 do.
"""

import threading
import time
import unittest

from nova.compute import manager as compute_manager
from nova.conductor import manager as conductor_manager
from nova.tests.functional.api import client as api_client
from nova.tests.functional import test_cross_cell_migrate
from nova.virt import fake
import testtools

from tests.functional import base
from tests.functional import test_bug_1848343


def load_tests(loader, tests, pattern):
    """Only the tests written here.

    The cross-cell classes subclass nova's TestMultiCellMigrate for its two
    cell setup and helpers; its own tests are nova's to run, not ours.
    """
    suite = unittest.TestSuite()
    for test in testtools.iterate_tests(tests):
        method = getattr(type(test), test._testMethodName)
        if method.__module__ == __name__:
            suite.addTest(test)
    return suite


# -- the cross-cell resize revert at the source ----------------------------


class _CrossCellRevertTestBase(base.NovaFixesTestMixin,
                               test_cross_cell_migrate.TestMultiCellMigrate):
    """nova's cross-cell setup: host1 in cell1, host2 in cell2, and the
    policy that lets the admin resize across cells. New servers land on
    host1, and a resize moves them to host2.
    """

    source = 'host1'

    def _resize_to_other_cell(self):
        """VERIFY_RESIZE in cell2, validated by nova's own helper.

        :returns: the server, the source and target provider UUIDs and the
            server's flavor before the resize
        """
        server = self._create_server(self.api.get_flavors()[0],
                                     no_networking=True)
        server, source_rp, target_rp, old_flavor, _ = (
            self._resize_and_validate(server=server))
        return server, source_rp, target_rp, old_flavor

    def _watch_source_revert(self, before=None):
        """An event set once the source compute's _revert_allocation has
        returned (or raised); ``before`` runs when it starts.
        """
        return self.watch(compute_manager.ComputeManager,
                          '_revert_allocation', before=before)

    def _watch_conductor_revert(self):
        """An event set once the conductor's RevertResizeTask has ended."""
        return self.watch(conductor_manager.ComputeTaskManager,
                          'revert_snapshot_based_resize')


class DeletedServerCrossCellRevertTest(_CrossCellRevertTestBase):
    """Regression test for bug 1848343: the cross-cell revert at the source.

    finish_revert_snapshot_based_resize_at_source holds the instance lock
    for the whole revert, and terminate_instance takes that lock too: a
    delete that goes through the source compute waits for the revert (see
    DeleteWaitsForCrossCellRevertTest). The server is deleted under the
    revert when the API deletes it itself, which it does, along with the
    server's allocations, when the server's compute service is reported
    down.
    """

    def _local_delete(self, server):
        """Delete ``server`` through the API while its compute service is
        forced down, then bring the service back.
        """
        service = self.computes[self.source].service_ref
        self.api.put_service(service.uuid, {'forced_down': True})
        try:
            self.delete_server_and_wait(server)
        finally:
            self.api.put_service(service.uuid, {'forced_down': False})

    def test_finish_revert_snapshot_based_resize_at_source(self):
        """finish_revert_snapshot_based_resize_at_source on the source.

        1. A cross-cell resize finishes: VERIFY_RESIZE in the target cell.
        2. The user reverts: the target compute cleans up, the conductor
           maps the server back to the source cell and calls the source.
        3. The source has put the instance back on itself, and the server
           is deleted by the API (its compute is reported down) before the
           source moves the migration's allocations back.
        """
        server, source_rp, target_rp, old_flavor = (
            self._resize_to_other_cell())
        reverted = self._watch_source_revert(
            before=lambda: self._local_delete(server))
        finished = self._watch_conductor_revert()

        self.api.post_server_action(server['id'], {'revertResize': None})
        self.wait_for(reverted, 'finish_revert_snapshot_based_resize')
        self.wait_for(finished, 'the conductor RevertResizeTask')
        self.assert_server_left_nothing(server)


class DeleteWaitsForCrossCellRevertTest(_CrossCellRevertTestBase):
    """No regression for bug 1848343's fix: a server deleted through its
    source compute during the cross-cell revert is deleted once the revert
    has given its allocations back, and nothing is left.
    """

    recreates = False

    def test_finish_revert_snapshot_based_resize_at_source(self):
        """1. A cross-cell resize finishes: VERIFY_RESIZE.
        2. The user reverts, and deletes the server when the source starts
           moving the migration's allocations back: terminate_instance
           waits for the instance lock the revert holds.
        3. The revert gives the allocations back to the instance, then
           fails on the server's deleting task state; terminate_instance
           then deletes the server and its allocations.
        """
        server, source_rp, target_rp, old_flavor = (
            self._resize_to_other_cell())
        reverted = self._watch_source_revert(
            before=lambda: self.api.delete_server(server['id']))
        finished = self._watch_conductor_revert()
        deleted = self.watch(compute_manager.ComputeManager,
                         'terminate_instance')

        self.api.post_server_action(server['id'], {'revertResize': None})
        self.wait_for(reverted, 'finish_revert_snapshot_based_resize')
        self.wait_for(finished, 'the conductor RevertResizeTask')
        self.wait_for(deleted, 'terminate_instance')
        self.assertRaises(api_client.OpenStackApiNotFoundException,
                          self.api.get_server, server['id'])
        self.assert_server_left_nothing(server)


class LiveServerCrossCellRevertTest(_CrossCellRevertTestBase):
    """No regression for bug 1848343's fix: a cross-cell resize revert
    gives the server its allocations back on the source, exactly as before.
    """

    recreates = False

    def test_finish_revert_snapshot_based_resize_at_source(self):
        server, source_rp, target_rp, old_flavor = (
            self._resize_to_other_cell())
        self._revert_resize(server)
        source_allocations = self._get_allocations_by_provider_uuid(
            source_rp)
        self.assertEqual([server['id']], list(source_allocations))
        self.assertFlavorMatchesAllocation(
            old_flavor, source_allocations[server['id']]['resources'])
        self.assertEqual(
            {}, self._get_allocations_by_provider_uuid(target_rp))
        self.assert_no_leaked_allocations()


# -- live_migration_abort of a queued live migration ------------------------


class _QueuedLiveMigrationTestBase(test_bug_1848343._MoveTestBase):
    """host1 runs one live migration at a time; a first server's live
    migration to host3 holds that slot, blocked in the driver, so that a
    second server's live migration to host2 waits in host1's queue.
    """

    def setUp(self):
        super(_QueuedLiveMigrationTestBase, self).setUp()
        self._start_compute('host3')
        # The live migration executor is sized by its first live migration.
        self.flags(max_concurrent_live_migrations=1)
        self.busy_started = threading.Event()
        self.release = threading.Event()

        def block():
            self.busy_started.set()
            self.release.wait()

        self.busy_done = self.watch(fake.FakeDriver, 'live_migration',
                                before=block)
        # Whatever the test's outcome, the blocked live migration ends while
        # the services still run.
        self.addCleanup(self._let_busy_live_migration_end)

    def _let_busy_live_migration_end(self):
        self.release.set()
        if self.busy_started.is_set():
            self.wait_for(self.busy_done, 'the busy live migration')

    def _create_server_on(self, host):
        return super(test_bug_1848343._MoveTestBase, self)._create_server(
            networks='none', host=host)

    def _queue_live_migration(self):
        """:returns: the busy server, the queued server and the queued
        server's migration
        """
        busy = self._create_server_on('host1')
        queued = self._create_server_on('host1')
        self.live_migrate_to(busy, 'host3',
                              migration_expected_state='running',
                              server_expected_state='MIGRATING')
        self.api.post_server_action(queued['id'], {
            'os-migrateLive': {'host': 'host2', 'block_migration': 'auto'}})
        migration = self._wait_for_migration_status(queued, ['queued'])
        # The migration is queued before its job is: wait for the job, or
        # the abort finds no job to cancel.
        waiting = self.computes['host1'].manager._waiting_live_migrations
        deadline = time.monotonic() + 20
        while waiting.get(queued['id'], (None, None))[1] is None:
            self.assertLess(time.monotonic(), deadline,
                            'Timed out waiting for the queued live migration')
            time.sleep(0.1)
        return busy, queued, migration

    def _abort(self, server, migration):
        # Aborting a queued live migration requires microversion 2.65.
        self.api.api_delete('/servers/%s/migrations/%s'
                            % (server['id'], migration['id']))

    def _finish_busy_live_migration(self, busy):
        """Let the busy server's live migration complete, and check it did
        not suffer from the other server's abort.
        """
        # _post_live_migration removes the migration's allocations after it
        # marks it completed: wait for the driver, which calls it.
        self._let_busy_live_migration_end()
        self._wait_for_migration_status(busy, ['completed'])
        busy = self._wait_for_state_change(busy, 'ACTIVE')
        self.assertEqual('host3', busy['OS-EXT-SRV-ATTR:host'])
        host3_rp = self._get_provider_uuid_by_host('host3')
        self.assertEqual([host3_rp], list(
            self._get_allocations_by_server_uuid(busy['id'])))
        self.assertFlavorMatchesAllocation(busy['flavor'], busy['id'],
                                           host3_rp)


class DeletedServerLiveMigrationAbortTest(_QueuedLiveMigrationTestBase):
    """Regression test for bug 1848343: aborting a queued live migration."""

    def test_live_migration_abort_queued(self):
        """live_migration_abort of a queued live migration on the source.

        1. A first server's live migration holds the source's only live
           migration slot.
        2. A second server's live migration is queued behind it: the
           conductor has claimed the destination for the instance and moved
           its source allocations to the migration.
        3. The user aborts the queued live migration: the source cancels
           the job, and the server is deleted before the source moves the
           migration's allocations back.
        4. The first server's live migration then completes, untouched.
        """
        busy, queued, migration = self._queue_live_migration()
        reverted = self._watch_compute_revert(delete=queued)

        self._abort(queued, migration)
        self.wait_for(reverted, 'live_migration_abort')
        # Checked while the first live migration still runs: its end runs
        # the source's resource tracker, which heals the leak if the
        # deleted row is not archived yet.
        self.assert_server_left_nothing(queued)
        self._finish_busy_live_migration(busy)
        self.assert_no_leaked_allocations()


class LiveServerLiveMigrationAbortTest(_QueuedLiveMigrationTestBase):
    """No regression for bug 1848343's fix: aborting a queued live
    migration gives the server its allocations back on the source, exactly
    as before.
    """

    recreates = False

    def _assert_back_on_source(self, server):
        source_rp = self._get_provider_uuid_by_host('host1')
        self.assertEqual([source_rp], list(
            self._get_allocations_by_server_uuid(server['id'])))
        self.assertFlavorMatchesAllocation(server['flavor'], server['id'],
                                           source_rp)
        self.assertEqual({}, self._get_allocations_by_provider_uuid(
            self._get_provider_uuid_by_host('host2')))
        self.assert_no_leaked_allocations()

    def test_live_migration_abort_queued(self):
        busy, queued, migration = self._queue_live_migration()
        self._abort(queued, migration)
        self._wait_for_migration_status(queued, ['cancelled'])
        queued = self._wait_for_state_change(queued, 'ACTIVE')
        self.assertEqual('host1', queued['OS-EXT-SRV-ATTR:host'])
        self._assert_back_on_source(queued)

        self._finish_busy_live_migration(busy)
        self._assert_back_on_source(queued)
