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

"""Regression tests for bug 1848343.

Reverting migration-based allocations leaks allocations if the server is
deleted: https://bugs.launchpad.net/nova/+bug/1848343

During a move the migration consumer holds the server's allocations on the
source node and the instance consumer holds the claim on the destination.
Every rollback moves the migration's allocations back to the instance
consumer. If the server was deleted meanwhile, its instance consumer was
removed with it, and the move creates it again: nobody deletes those
allocations any more. Once the deleted row is archived the resource
tracker cannot tell whose they are, so nova does not heal them either.
"""

import threading

from nova.compute import instance_actions
from nova.compute import manager as compute_manager
from nova import exception
from nova.scheduler.client import query as query_client
from nova.scheduler.client import report as report_client
from nova.tests.functional import integrated_helpers

from tests.functional import base


class _MoveTestBase(base.NovaFixesTestMixin,
                    integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(_MoveTestBase, self).setUp()
        self._start_compute('host1')
        self._start_compute('host2')

    def _create_server(self):
        server = super(_MoveTestBase, self)._create_server(networks='none')
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        return server, source, target

    def _disable_target_host(self, target_host):
        # The scheduler then fails with NoValidHost after the conductor has
        # moved the source allocations to the migration consumer.
        service = self.computes[target_host].service_ref
        self.api.put_service(service.uuid, {'status': 'disabled'})

    def _delete_server_during(self, owner, name, server):
        """Delete ``server`` through the API when ``owner.name`` is called,
        then let the call go on.
        """
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            self.delete_server_and_wait(server)
            return original(*args, **kwargs)

        self.stub_out('%s.%s.%s' % (owner.__module__, owner.__qualname__,
                                    name), wrapper)

    def _watch_compute_revert(self, delete=None):
        """An event set once a compute's _revert_allocation has returned
        (or raised): the point after which the revert is complete.

        With ``delete``, that server is deleted through the API when the
        revert starts, before it reads anything from placement.
        """
        return self.watch(
            compute_manager.ComputeManager, '_revert_allocation',
            before=None if delete is None else (
                lambda: self.delete_server_and_wait(delete)))


class DeletedServerAllocationRevertTest(_MoveTestBase):
    """Regression test for bug 1848343: nova's three scenarios.

    nova's own test_bug_1848343 asserts the leak under a FIXME; here the
    assertion is the fixed one: nothing is left, not right after the race
    and not after archive_deleted_rows and the resource tracker periodic.
    """

    def test_migration_task_rollback(self):
        """MigrationTask rollback in the conductor.

        1. The conductor moves the source allocations to the migration.
        2. The server is deleted while the scheduler runs.
        3. The scheduler fails (NoValidHost): the task rolls back and moves
           the migration's allocations back to the deleted server.
        """
        server, source, target = self._create_server()
        self._disable_target_host(target)
        self._delete_server_during(
            query_client.SchedulerQueryClient, 'select_destinations', server)

        self.api.post_server_action(server['id'], {'migrate': None},
                                    check_response_status=[202])
        # The NoValidHost handler's instance update masks the error with
        # InstanceNotFound, as in nova's own test.
        self._assert_resize_migrate_action_fail(
            server, instance_actions.MIGRATE, 'InstanceNotFound')
        self.assert_server_left_nothing(server)

    def test_live_migration_task_rollback(self):
        """LiveMigrationTask rollback in the conductor (same steps)."""
        server, source, target = self._create_server()
        self._disable_target_host(target)
        self._delete_server_during(
            query_client.SchedulerQueryClient, 'select_destinations', server)

        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
        self._wait_for_action_fail_completion(
            server, instance_actions.LIVE_MIGRATION,
            'conductor_live_migrate_instance')
        self.assert_server_left_nothing(server)

    def test_migrate_on_compute_fail(self):
        """prep_resize failure on the destination compute.

        1. The server is deleted while the destination runs _prep_resize,
           which then fails on the missing instance.
        2. prep_resize reverts: the migration's allocations go back to the
           instance consumer, which the delete had removed.
        """
        server, source, target = self._create_server()
        self._delete_server_during(
            compute_manager.ComputeManager, '_prep_resize', server)

        self.api.post_server_action(server['id'], {'migrate': None})
        self._wait_for_action_fail_completion(
            server, instance_actions.MIGRATE, 'compute_prep_resize')
        self.assert_server_left_nothing(server)


class DeletedServerRevertPathsTest(_MoveTestBase):
    """Regression test for bug 1848343: every other revert path.

    Each test deletes the server at the moment that path is about to move
    the migration's allocations back, and checks nothing is left.
    """

    def _delete_during_conductor_revert(self, server):
        """Delete the server inside the conductor's revert, after any check
        the revert makes and before its move: the window a check-then-act
        fix must close.
        """
        original = report_client.SchedulerReportClient.move_allocations
        migration = {}

        def move(client, context, source_uuid, target_uuid, *a, **kw):
            if target_uuid == server['id'] and not migration:
                migration['uuid'] = source_uuid
                self.delete_server_and_wait(server)
            return original(client, context, source_uuid, target_uuid,
                            *a, **kw)

        self.stub_out('nova.scheduler.client.report.SchedulerReportClient.'
                      'move_allocations', move)
        return migration

    def test_migration_task_rollback_delete_during_revert(self):
        """The server is deleted between the conductor's check and its
        move back (MigrationTask).
        """
        server, source, target = self._create_server()
        self._disable_target_host(target)
        moved = self._delete_during_conductor_revert(server)

        self.api.post_server_action(server['id'], {'migrate': None},
                                    check_response_status=[202])
        self._wait_for_action_fail_completion(
            server, instance_actions.MIGRATE, 'conductor_migrate_server')
        self.assertIn('uuid', moved, 'the revert did not run')
        self.assert_server_left_nothing(server)

    def test_live_migration_task_rollback_delete_during_revert(self):
        """The server is deleted between the conductor's check and its
        move back (LiveMigrationTask).
        """
        server, source, target = self._create_server()
        self._disable_target_host(target)
        moved = self._delete_during_conductor_revert(server)

        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
        self._wait_for_action_fail_completion(
            server, instance_actions.LIVE_MIGRATION,
            'conductor_live_migrate_instance')
        self.assertIn('uuid', moved, 'the revert did not run')
        self.assert_server_left_nothing(server)

    def test_resize_instance_fail_on_source(self):
        """resize_instance failure on the source compute.

        1. prep_resize on the destination claims and casts resize_instance.
        2. The server is deleted while the source powers off the guest,
           which then fails.
        3. resize_instance reverts the allocations to the deleted server.
        """
        server, source, target = self._create_server()

        def migrate_disk_and_power_off(*args, **kwargs):
            self.delete_server_and_wait(server)
            raise exception.InstanceNotFound(instance_id=server['id'])

        self.stub_out('nova.virt.fake.FakeDriver.migrate_disk_and_power_off',
                      migrate_disk_and_power_off)
        self.api.post_server_action(server['id'], {'migrate': None})
        self._wait_for_action_fail_completion(
            server, instance_actions.MIGRATE, 'compute_resize_instance')
        self.assert_server_left_nothing(server)

    def test_finish_revert_resize(self):
        """finish_revert_resize on the source compute.

        1. A cold migration finishes: VERIFY_RESIZE.
        2. The user reverts; the destination casts finish_revert_resize.
        3. The source has put the instance back on itself, and the server
           is deleted before it moves the migration's allocations back.
        """
        server, source, target = self._create_server()
        self._migrate_server(server)
        reverted = self._watch_compute_revert(delete=server)

        self.api.post_server_action(server['id'], {'revertResize': None})
        self.wait_for(reverted, 'finish_revert_resize')
        self.assert_server_left_nothing(server)

    def test_rollback_live_migration(self):
        """_rollback_live_migration on the source compute.

        1. The conductor schedules and claims the destination.
        2. The server is deleted while the destination prepares, and the
           preparation fails.
        3. The source rolls the live migration back and moves the
           migration's allocations to the deleted server.
        """
        server, source, target = self._create_server()

        def pre_live_migration(*args, **kwargs):
            self.delete_server_and_wait(server)
            raise exception.MigrationPreCheckError(reason='server deleted')

        self.stub_out('nova.virt.fake.FakeDriver.pre_live_migration',
                      pre_live_migration)
        reverted = self._watch_compute_revert()
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': target, 'block_migration': 'auto'}})
        self.wait_for(reverted, '_rollback_live_migration')
        self.assert_server_left_nothing(server)

    def test_resize_instance_fail_delete_between_read_and_write(self):
        """The server is deleted inside the compute's move back, between
        reading the instance consumer and writing the allocations.

        1. resize_instance fails on the source and reverts.
        2. The revert reads the migration and instance consumers.
        3. The server is deleted: its instance consumer goes away.
        4. The revert writes with the generation it read. Placement
           refuses (the consumer is gone); nova gives up and the migration
           keeps the allocations for good.
        """
        server, source, target = self._create_server()
        self.stub_out('nova.virt.fake.FakeDriver.migrate_disk_and_power_off',
                      LiveServerRevertTest._raise_migration_error)
        armed = threading.Event()
        reverted = self._watch_compute_revert()
        original_revert = compute_manager.ComputeManager._revert_allocation
        client_class = report_client.SchedulerReportClient
        original_read = client_class.get_allocs_for_consumer

        def revert(*args, **kwargs):
            armed.set()
            return original_revert(*args, **kwargs)

        def read(client, context, consumer):
            allocs = original_read(client, context, consumer)
            if consumer == server['id'] and armed.is_set():
                armed.clear()
                self.delete_server_and_wait(server)
            return allocs

        self.stub_out('nova.scheduler.client.report.SchedulerReportClient.'
                      'get_allocs_for_consumer', read)
        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_revert_allocation', revert)
        self.api.post_server_action(server['id'], {'migrate': None})
        self.wait_for(reverted, 'resize_instance to revert')
        self.assert_server_left_nothing(server)


class LiveServerRevertTest(_MoveTestBase):
    """No regression for bug 1848343's fix: a live server whose move fails
    gets its allocations back on the source, exactly as before.
    """

    recreates = False

    def _assert_back_on_source(self, server, source, target):
        self.assertFlavorMatchesAllocation(
            server['flavor'], server['id'],
            self._get_provider_uuid_by_host(source))
        self.assertEqual(
            {}, self._get_allocations_by_provider_uuid(
                self._get_provider_uuid_by_host(target)))
        self.assert_no_leaked_allocations()

    def test_migration_task_rollback(self):
        server, source, target = self._create_server()
        self._disable_target_host(target)
        self.api.post_server_action(server['id'], {'migrate': None},
                                    check_response_status=[202])
        self._assert_resize_migrate_action_fail(
            server, instance_actions.MIGRATE, 'NoValidHost')
        self._assert_back_on_source(server, source, target)

    def test_live_migration_task_rollback(self):
        server, source, target = self._create_server()
        self._disable_target_host(target)
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
        self._wait_for_action_fail_completion(
            server, instance_actions.LIVE_MIGRATION,
            'conductor_live_migrate_instance')
        self._assert_back_on_source(server, source, target)

    def test_prep_resize_fail(self):
        server, source, target = self._create_server()
        self.stub_out('nova.virt.fake.FakeDriver.'
                      'migrate_disk_and_power_off',
                      self._raise_migration_error)
        self.api.post_server_action(server['id'], {'migrate': None})
        self._wait_for_action_fail_completion(
            server, instance_actions.MIGRATE, 'compute_resize_instance')
        self._assert_back_on_source(server, source, target)

    def test_finish_revert_resize(self):
        server, source, target = self._create_server()
        self._migrate_server(server)
        self._revert_resize(server)
        self._assert_back_on_source(server, source, target)

    def test_rollback_live_migration(self):
        server, source, target = self._create_server()
        self.stub_out('nova.virt.fake.FakeDriver.pre_live_migration',
                      self._raise_migration_error)
        reverted = self._watch_compute_revert()
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': target, 'block_migration': 'auto'}})
        self.wait_for(reverted, '_rollback_live_migration')
        self._wait_for_migration_status(server, ['error'])
        self._wait_for_state_change(server, 'ACTIVE')
        self._assert_back_on_source(server, source, target)

    @staticmethod
    def _raise_migration_error(*args, **kwargs):
        raise exception.MigrationError(reason='injected failure')
