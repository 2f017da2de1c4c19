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

from unittest import mock

from oslo_utils.fixture import uuidsentinel as uuids

from nova.conductor.tasks import migrate
from nova import context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test


class RevertAllocationForMigrationDeletedTestCase(test.NoDBTestCase):
    """migrate.revert_allocation_for_migration, deleted server (bug 1848343)

    The conductor's rollback moves the migration's allocations back to the
    instance consumer as nova always did, unless the migration holds
    nothing any more; then, whatever happened to the move, it looks the
    instance up and, if the server is deleted or being deleted, removes the
    allocations of the instance and of the migration.
    """

    def setUp(self):
        super(RevertAllocationForMigrationDeletedTestCase, self).setUp()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        patcher = mock.patch.object(report, 'report_client_singleton',
                                    return_value=self.reportclient)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.source_cn = objects.ComputeNode(uuid=uuids.source_node)
        self.instance = objects.Instance(
            uuid=uuids.instance, host='src', node='src-node',
            vm_state='active', task_state='resize_migrating')
        self.migration = objects.Migration(uuid=uuids.migration)
        self.reportclient.get_allocations_for_consumer.return_value = {
            uuids.source_node: {'resources': {'VCPU': 1, 'MEMORY_MB': 512}}}

        # The order of the calls that matter: the move, the instance
        # lookup and the removals of allocations.
        self.calls = []
        self.move_result = True
        self.reportclient.move_allocations.side_effect = self._move
        self.reportclient.delete_allocation_for_instance.side_effect = (
            self._delete)
        patcher = mock.patch.object(objects.Instance, 'get_by_uuid',
                                    autospec=True, side_effect=self._get)
        self.mock_get = patcher.start()
        self.addCleanup(patcher.stop)
        # What the instance lookup finds: a live instance by default.
        self.db_instance = objects.Instance(
            uuid=uuids.instance, vm_state='active',
            task_state='resize_migrating')

    def _move(self, *args, **kwargs):
        self.calls.append('move')
        if isinstance(self.move_result, Exception):
            raise self.move_result
        return self.move_result

    def _delete(self, context, consumer_uuid, **kwargs):
        self.calls.append(('delete', consumer_uuid))
        return True

    def _get(self, context, instance_uuid, **kwargs):
        self.calls.append('lookup')
        if isinstance(self.db_instance, Exception):
            raise self.db_instance
        return self.db_instance

    def _revert(self):
        migrate.revert_allocation_for_migration(
            self.context, self.source_cn, self.instance, self.migration)

    def _assert_removed(self, expected_calls):
        self.assertEqual(expected_calls, self.calls)
        self.assertEqual(
            [mock.call(self.context, uuids.instance,
                       consumer_type='instance', force=True),
             mock.call(self.context, uuids.migration,
                       consumer_type='migration', force=True)],
            self.reportclient.delete_allocation_for_instance.call_args_list)

    @mock.patch.object(migrate.LOG, 'error')
    def test_live_instance_reverted(self, mock_error):
        """The ordinary rollback: nova's move, which cannot require the
        instance consumer (the conductor moved its allocations away), and
        nothing removed.
        """
        self._revert()

        self.reportclient.move_allocations.assert_called_once_with(
            self.context, uuids.migration, uuids.instance)
        self.reportclient.delete_allocation_for_instance.assert_not_called()
        mock_error.assert_not_called()

    def test_lookup_after_move(self):
        self._revert()

        self.reportclient.get_allocations_for_consumer.assert_called_with(
            self.context, uuids.migration)
        self.mock_get.assert_called_once_with(
            mock.ANY, uuids.instance, expected_attrs=[])
        self.assertEqual(['move', 'lookup'], self.calls)

    @mock.patch.object(migrate.LOG, 'error')
    def test_move_fails_live_instance(self, mock_error):
        """A move that fails is logged as before; nothing is removed."""
        self.move_result = False

        self._revert()

        self.reportclient.move_allocations.assert_called_once_with(
            self.context, uuids.migration, uuids.instance)
        self.reportclient.delete_allocation_for_instance.assert_not_called()
        mock_error.assert_called_once()

    def test_instance_destroyed_during_move(self):
        """The move created the instance consumer of a deleted server
        again: it is removed, with what the migration holds.
        """
        self.db_instance = exception.InstanceNotFound(
            instance_id=uuids.instance)

        self._revert()

        self.reportclient.move_allocations.assert_called_once_with(
            self.context, uuids.migration, uuids.instance)
        self._assert_removed(['move', 'lookup', ('delete', uuids.instance),
                              ('delete', uuids.migration)])

    def test_instance_being_deleted(self):
        self.db_instance.task_state = 'deleting'

        self._revert()

        self._assert_removed(['move', 'lookup', ('delete', uuids.instance),
                              ('delete', uuids.migration)])

    def test_soft_deleted_instance_keeps_allocations(self):
        self.db_instance.vm_state = 'soft-delete'

        self._revert()

        self.assertEqual(['move', 'lookup'], self.calls)
        self.reportclient.delete_allocation_for_instance.assert_not_called()

    @mock.patch.object(migrate.LOG, 'info')
    def test_migration_holds_nothing_live_instance(self, mock_info):
        """The migration holds nothing: no move (nova's would fail on the
        missing source consumer), nothing removed.
        """
        self.reportclient.get_allocations_for_consumer.return_value = {}

        self._revert()

        self.reportclient.get_allocations_for_consumer.assert_called_once_with(
            self.context, uuids.migration)
        self.reportclient.move_allocations.assert_not_called()
        self.reportclient.delete_allocation_for_instance.assert_not_called()
        self.assertEqual(['lookup'], self.calls)
        mock_info.assert_called_once_with(
            mock.ANY, uuids.migration, instance=self.instance)

    def test_migration_holds_nothing_instance_deleted(self):
        """The delete of the server removed the migration's allocations: no
        move, and whatever a later claim wrote is removed.
        """
        self.reportclient.get_allocations_for_consumer.return_value = {}
        self.db_instance = exception.InstanceNotFound(
            instance_id=uuids.instance)

        self._revert()

        self.reportclient.move_allocations.assert_not_called()
        self._assert_removed(['lookup', ('delete', uuids.instance),
                              ('delete', uuids.migration)])

    def test_move_raises_instance_deleted(self):
        """The move raised: the lookup is still made and a deleted
        server's allocations are removed, then the error is raised.
        """
        self.move_result = exception.AllocationMoveFailed(
            source_consumer=uuids.migration, target_consumer=uuids.instance,
            error='consumer generation conflict')
        self.db_instance = exception.InstanceNotFound(
            instance_id=uuids.instance)

        self.assertRaises(exception.AllocationMoveFailed, self._revert)

        self._assert_removed(['move', 'lookup', ('delete', uuids.instance),
                              ('delete', uuids.migration)])

    def test_move_raises_live_instance(self):
        self.move_result = exception.AllocationMoveFailed(
            source_consumer=uuids.migration, target_consumer=uuids.instance,
            error='consumer generation conflict')

        self.assertRaises(exception.AllocationMoveFailed, self._revert)

        self.assertEqual(['move', 'lookup'], self.calls)
        self.reportclient.delete_allocation_for_instance.assert_not_called()
