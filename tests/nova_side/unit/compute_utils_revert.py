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

from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test


class IsInstanceDeletedTestCase(test.NoDBTestCase):
    """Tests for compute_utils.is_instance_deleted (bug 1848343)."""

    def setUp(self):
        super(IsInstanceDeletedTestCase, self).setUp()
        self.context = context.RequestContext('fake-user', 'fake-project')
        patcher = mock.patch.object(objects.Instance, 'get_by_uuid',
                                    autospec=True)
        self.mock_get = patcher.start()
        self.addCleanup(patcher.stop)

    def _instance(self, vm_state=vm_states.ACTIVE, task_state=None):
        return objects.Instance(uuid=uuids.instance, vm_state=vm_state,
                                task_state=task_state)

    def test_not_found(self):
        self.mock_get.side_effect = exception.InstanceNotFound(
            instance_id=uuids.instance)
        self.assertTrue(
            compute_utils.is_instance_deleted(self.context, uuids.instance))

    def test_vm_state_deleted(self):
        self.mock_get.return_value = self._instance(vm_state=vm_states.DELETED)
        self.assertTrue(
            compute_utils.is_instance_deleted(self.context, uuids.instance))

    def test_task_state_deleting(self):
        self.mock_get.return_value = self._instance(
            task_state=task_states.DELETING)
        self.assertTrue(
            compute_utils.is_instance_deleted(self.context, uuids.instance))

    def test_live_instance(self):
        self.mock_get.return_value = self._instance(
            task_state=task_states.RESIZE_REVERTING)
        self.assertFalse(
            compute_utils.is_instance_deleted(self.context, uuids.instance))

    def test_soft_deleted_instance_is_not_deleted(self):
        self.mock_get.return_value = self._instance(
            vm_state=vm_states.SOFT_DELETED)
        self.assertFalse(
            compute_utils.is_instance_deleted(self.context, uuids.instance))

    @mock.patch.object(compute_utils.LOG, 'exception')
    def test_lookup_fails(self, mock_log):
        self.mock_get.side_effect = test.TestingException()
        self.assertFalse(
            compute_utils.is_instance_deleted(self.context, uuids.instance))
        mock_log.assert_called_once_with(mock.ANY, uuids.instance)

    def test_reads_undeleted_records_only(self):
        """A destroyed record, read with read_deleted='yes', is deleted."""
        self.mock_get.return_value = self._instance()
        self.context.read_deleted = 'yes'
        compute_utils.is_instance_deleted(self.context, uuids.instance)
        self.mock_get.assert_called_once_with(
            mock.ANY, uuids.instance, expected_attrs=[])
        lookup_context = self.mock_get.call_args[0][0]
        self.assertEqual('no', lookup_context.read_deleted)
        self.assertTrue(lookup_context.is_admin)
        # The caller's context is left alone.
        self.assertEqual('yes', self.context.read_deleted)


class IsInstanceDeletedDBTestCase(test.TestCase):
    """compute_utils.is_instance_deleted against the cell database."""

    def setUp(self):
        super(IsInstanceDeletedDBTestCase, self).setUp()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.instance = objects.Instance(
            context=self.context, uuid=uuids.instance,
            project_id=self.context.project_id,
            user_id=self.context.user_id, vm_state=vm_states.ACTIVE)
        self.instance.create()

    def test_live_instance(self):
        self.assertFalse(
            compute_utils.is_instance_deleted(self.context, uuids.instance))

    def test_task_state_deleting(self):
        self.instance.task_state = task_states.DELETING
        self.instance.save()
        self.assertTrue(
            compute_utils.is_instance_deleted(self.context, uuids.instance))

    def test_destroyed_instance(self):
        self.instance.destroy()
        self.context.read_deleted = 'yes'
        self.assertTrue(
            compute_utils.is_instance_deleted(self.context, uuids.instance))


class DeleteAllocationsIfDeletedTestCase(test.NoDBTestCase):
    """Tests for compute_utils.delete_allocations_if_deleted."""

    def setUp(self):
        super(DeleteAllocationsIfDeletedTestCase, self).setUp()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.mock_delete = self.reportclient.delete_allocation_for_instance

    @mock.patch.object(compute_utils, 'is_instance_deleted',
                       autospec=True, return_value=False)
    def test_instance_not_deleted(self, mock_deleted):
        self.assertFalse(compute_utils.delete_allocations_if_deleted(
            self.context, self.reportclient, uuids.instance,
            uuids.migration))
        mock_deleted.assert_called_once_with(self.context, uuids.instance)
        self.mock_delete.assert_not_called()

    @mock.patch.object(compute_utils, 'is_instance_deleted',
                       autospec=True, return_value=True)
    def test_instance_deleted(self, mock_deleted):
        self.assertTrue(compute_utils.delete_allocations_if_deleted(
            self.context, self.reportclient, uuids.instance))
        mock_deleted.assert_called_once_with(self.context, uuids.instance)
        self.mock_delete.assert_called_once_with(
            self.context, uuids.instance, consumer_type='instance',
            force=True)

    @mock.patch.object(compute_utils, 'is_instance_deleted',
                       autospec=True, return_value=True)
    def test_instance_deleted_with_migration(self, mock_deleted):
        self.assertTrue(compute_utils.delete_allocations_if_deleted(
            self.context, self.reportclient, uuids.instance,
            uuids.migration))
        self.assertEqual(
            [mock.call(self.context, uuids.instance,
                       consumer_type='instance', force=True),
             mock.call(self.context, uuids.migration,
                       consumer_type='migration', force=True)],
            self.mock_delete.call_args_list)

    @mock.patch.object(compute_utils.LOG, 'exception')
    @mock.patch.object(compute_utils, 'is_instance_deleted',
                       autospec=True, return_value=True)
    def test_delete_fails_is_logged(self, mock_deleted, mock_log):
        """A failure to delete one consumer does not stop the other."""
        self.mock_delete.side_effect = [
            exception.AllocationDeleteFailed(consumer_uuid=uuids.instance,
                                             error='conflict'),
            True]
        self.assertTrue(compute_utils.delete_allocations_if_deleted(
            self.context, self.reportclient, uuids.instance,
            uuids.migration))
        self.assertEqual(2, self.mock_delete.call_count)
        self.mock_delete.assert_called_with(
            self.context, uuids.migration, consumer_type='migration',
            force=True)
        mock_log.assert_called_once_with(
            mock.ANY, 'instance', uuids.instance)

    @mock.patch.object(objects.Instance, 'get_by_uuid', autospec=True)
    def test_instance_not_found(self, mock_get):
        """A record that is gone counts as a deleted instance."""
        mock_get.side_effect = exception.InstanceNotFound(
            instance_id=uuids.instance)
        self.assertTrue(compute_utils.delete_allocations_if_deleted(
            self.context, self.reportclient, uuids.instance))
        self.mock_delete.assert_called_once_with(
            self.context, uuids.instance, consumer_type='instance',
            force=True)
