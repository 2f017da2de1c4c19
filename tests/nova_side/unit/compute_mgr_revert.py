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

from nova.compute import manager
from nova.compute import task_states
from nova.compute import vm_states
from nova import context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.tests.unit import fake_instance


class ComputeManagerRevertAllocationDeletedTestCase(test.NoDBTestCase):
    """ComputeManager._revert_allocation and a deleted server (bug 1848343)

    The allocations the migration holds on the source node go back to the
    instance consumer, which must still exist (its generation is required).
    When the server was deleted during the move, nothing is given back to
    it: what the move wrote for it and its migration is removed.
    """

    def setUp(self):
        super(ComputeManagerRevertAllocationDeletedTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.compute.reportclient = self.reportclient
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, vm_state=vm_states.RESIZED,
            task_state=task_states.RESIZE_REVERTING)
        self.migration = objects.Migration(
            uuid=uuids.migration, source_compute='src',
            source_node='src-node', dest_compute='dest',
            dest_node='dest-node')
        self.allocs = {
            uuids.source_node: {'resources': {'VCPU': 1, 'MEMORY_MB': 512}},
            uuids.child_rp: {'resources': {'CUSTOM_FOO': 1}},
        }
        self.reportclient.get_allocations_for_consumer.return_value = (
            self.allocs)

        # The order of the calls that matter: the move, the instance
        # lookup and the removals of allocations.
        self.calls = []
        self.reportclient.move_allocations.side_effect = self._move
        self.move_result = True
        self.reportclient.delete_allocation_for_instance.side_effect = (
            self._delete)
        patcher = mock.patch.object(objects.Instance, 'get_by_uuid',
                                    autospec=True, side_effect=self._get)
        self.mock_get = patcher.start()
        self.addCleanup(patcher.stop)
        # What the instance lookup finds: a live instance by default.
        self.db_instance = objects.Instance(
            uuid=uuids.instance, vm_state=vm_states.RESIZED,
            task_state=task_states.RESIZE_REVERTING)

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
        return self.compute._revert_allocation(
            self.context, self.instance, self.migration)

    def _assert_move_called(self):
        self.reportclient.get_allocations_for_consumer.assert_called_once_with(
            self.context, uuids.migration)
        self.reportclient.move_allocations.assert_called_once_with(
            self.context, uuids.migration, uuids.instance,
            target_consumer_generation_required=True)

    def test_live_instance_allocations_reverted(self):
        """The ordinary revert: the allocations move back and are kept."""
        self.assertEqual(self.allocs, self._revert())
        self.reportclient.move_allocations.assert_called_once()
        self.reportclient.delete_allocation_for_instance.assert_not_called()

    def test_move_requires_target_generation(self):
        """The move requires the instance consumer, then the instance is
        looked up, after the move and never before.
        """
        self.assertEqual(self.allocs, self._revert())
        self._assert_move_called()
        self.mock_get.assert_called_once_with(
            mock.ANY, uuids.instance, expected_attrs=[])
        self.assertEqual(['move', 'lookup'], self.calls)

    def _assert_instance_and_migration_removed(self):
        self.assertFalse(self._revert())
        self._assert_move_called()
        self.assertEqual(
            ['move', 'lookup', ('delete', uuids.instance),
             ('delete', uuids.migration)], self.calls)
        self.assertEqual(
            [mock.call(self.context, uuids.instance,
                       consumer_type='instance', force=True),
             mock.call(self.context, uuids.migration,
                       consumer_type='migration', force=True)],
            self.reportclient.delete_allocation_for_instance.call_args_list)

    def test_instance_destroyed_during_move(self):
        """The server was deleted while the move wrote for it: what was
        written for it and its migration is removed, nothing is returned.
        """
        self.db_instance = exception.InstanceNotFound(
            instance_id=uuids.instance)
        self._assert_instance_and_migration_removed()

    def test_instance_being_deleted(self):
        self.db_instance.task_state = task_states.DELETING
        self._assert_instance_and_migration_removed()

    def test_instance_vm_state_deleted(self):
        self.db_instance.vm_state = vm_states.DELETED
        self._assert_instance_and_migration_removed()

    def test_soft_deleted_instance_keeps_allocations(self):
        self.db_instance.vm_state = vm_states.SOFT_DELETED
        self.assertEqual(self.allocs, self._revert())
        self.reportclient.delete_allocation_for_instance.assert_not_called()

    @mock.patch.object(manager, 'LOG')
    def test_target_gone_instance_deleted(self, mock_log):
        """The instance consumer is gone with the server: move_allocations
        removed the migration's allocations instead of moving them, and the
        revert returns False instead of raising.
        """
        self.move_result = exception.AllocationMoveTargetNotFound(
            source_consumer=uuids.migration, target_consumer=uuids.instance)
        self.db_instance = exception.InstanceNotFound(
            instance_id=uuids.instance)

        self.assertFalse(self._revert())

        self._assert_move_called()
        self.assertEqual(['move', 'lookup'], self.calls)
        self.reportclient.delete_allocation_for_instance.assert_not_called()
        mock_log.error.assert_not_called()
        self.assertIn('Instance was deleted during migration',
                      mock_log.info.call_args.args[0])
        self.assertEqual(uuids.migration, mock_log.info.call_args.args[1])

    @mock.patch.object(manager, 'LOG')
    def test_target_gone_instance_not_deleted(self, mock_log):
        """The instance consumer is gone although the server lives: the
        migration's allocations were removed and heal_allocations is
        suggested.
        """
        self.move_result = exception.AllocationMoveTargetNotFound(
            source_consumer=uuids.migration, target_consumer=uuids.instance)

        self.assertFalse(self._revert())

        self._assert_move_called()
        self.assertEqual(['move', 'lookup'], self.calls)
        self.reportclient.delete_allocation_for_instance.assert_not_called()
        mock_log.error.assert_called_once_with(
            mock.ANY, uuids.migration, instance=self.instance)
        self.assertIn('heal_allocations', mock_log.error.call_args.args[0])

    def test_move_conflict_is_raised(self):
        """Any other failure of the move is raised as before, with no
        lookup and nothing removed.
        """
        self.move_result = exception.AllocationMoveFailed(
            source_consumer=uuids.migration, target_consumer=uuids.instance,
            error='consumer generation conflict')

        self.assertRaises(exception.AllocationMoveFailed, self._revert)

        self.assertEqual(['move'], self.calls)
        self.reportclient.delete_allocation_for_instance.assert_not_called()

    @mock.patch.object(manager, 'LOG')
    def test_no_migration_allocations_live_instance(self, mock_log):
        """Nothing to revert: no move, nothing removed, False as before."""
        self.reportclient.get_allocations_for_consumer.return_value = {}

        self.assertFalse(self._revert())

        self.reportclient.move_allocations.assert_not_called()
        self.reportclient.delete_allocation_for_instance.assert_not_called()
        mock_log.error.assert_called_once()

    def test_no_migration_allocations_instance_deleted(self):
        """The delete removed the migration's allocations; a claim that
        landed after it may have created the instance consumer again: it
        is removed.
        """
        self.reportclient.get_allocations_for_consumer.return_value = {}
        self.db_instance = exception.InstanceNotFound(
            instance_id=uuids.instance)

        self.assertFalse(self._revert())

        self.reportclient.move_allocations.assert_not_called()
        self.assertEqual(['lookup', ('delete', uuids.instance)], self.calls)
        self.assertEqual(
            [mock.call(self.context, uuids.instance,
                       consumer_type='instance', force=True)],
            self.reportclient.delete_allocation_for_instance.call_args_list)
