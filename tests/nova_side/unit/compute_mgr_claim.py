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
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.tests.unit import fake_instance


class ClaimAfterDeleteComputeTestBase(test.NoDBTestCase):
    """Common setup: a compute manager and its placement report client."""

    def setUp(self):
        super(ClaimAfterDeleteComputeTestBase, self).setUp()
        self.compute = manager.ComputeManager()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.compute.reportclient = self.reportclient
        self.mock_delete = self.reportclient.delete_allocation_for_instance
        patcher = mock.patch.object(compute_utils, 'is_instance_deleted',
                                    autospec=True, return_value=True)
        self.mock_deleted = patcher.start()
        self.addCleanup(patcher.stop)

    def assert_claim_removed(self):
        self.mock_deleted.assert_called_once_with(
            self.context, uuids.instance)
        # Only the instance consumer: the claim was written for it.
        self.mock_delete.assert_called_once_with(
            self.context, uuids.instance, consumer_type='instance',
            force=True)


class ClaimAfterDeleteRebuildWithClaimTestCase(
        ClaimAfterDeleteComputeTestBase):
    """Tests for ComputeManager._do_rebuild_instance_with_claim

    Bug 1848343: an evacuation's claim on the destination can land after
    the API deleted the server; rebuild_instance then fails on the deleted
    instance. What was written for the deleted instance is now removed and
    the failure goes on as before.
    """

    def setUp(self):
        super(ClaimAfterDeleteRebuildWithClaimTestCase, self).setUp()
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, vm_state=vm_states.ACTIVE,
            task_state=task_states.REBUILDING)
        self.migration = objects.Migration(uuid=uuids.migration)
        # The resource tracker's claim; it does not swallow errors.
        self.claim = mock.MagicMock()
        self.claim.__exit__.return_value = False
        self.rebuild_claim = mock.Mock(return_value=self.claim)
        patcher = mock.patch.object(manager.ComputeManager,
                                    '_do_rebuild_instance')
        self.mock_rebuild = patcher.start()
        self.addCleanup(patcher.stop)

    def _rebuild(self):
        kwargs = dict(
            context=self.context, instance=self.instance,
            orig_image_ref=uuids.image, image_meta=objects.ImageMeta(),
            injected_files=[], new_pass=None, orig_sys_metadata={},
            bdms=objects.BlockDeviceMappingList(), evacuate=True,
            on_shared_storage=False, preserve_ephemeral=False,
            migration=self.migration, request_spec=None,
            allocations=mock.sentinel.allocations,
            rebuild_claim=self.rebuild_claim, scheduled_node='node1',
            limits=mock.sentinel.limits, accel_uuids=[],
            reimage_boot_volume=False, target_state=None)
        # nova before 2023.1 has no target_state.
        code = manager.ComputeManager._do_rebuild_instance_with_claim.__code__
        if 'target_state' not in code.co_varnames[:code.co_argcount]:
            del kwargs['target_state']
        return self.compute._do_rebuild_instance_with_claim(**kwargs)

    def test_rebuild_succeeds(self):
        self._rebuild()

        self.rebuild_claim.assert_called_once_with(
            self.context, self.instance, 'node1', mock.sentinel.allocations,
            limits=mock.sentinel.limits, image_meta=mock.ANY,
            migration=self.migration)
        self.mock_rebuild.assert_called_once()
        self.claim.__exit__.assert_called_once_with(None, None, None)
        self.mock_deleted.assert_not_called()
        self.mock_delete.assert_not_called()

    def test_instance_deleted_during_rebuild(self):
        error = exception.InstanceNotFound(instance_id=uuids.instance)
        self.mock_rebuild.side_effect = error

        ex = self.assertRaises(exception.InstanceNotFound, self._rebuild)

        self.assertIs(error, ex)
        self.assert_claim_removed()

    def test_claim_finds_instance_deleting(self):
        error = exception.UnexpectedDeletingTaskStateError(
            instance_uuid=uuids.instance, expected=task_states.REBUILDING,
            actual=task_states.DELETING)
        self.rebuild_claim.side_effect = error

        ex = self.assertRaises(exception.UnexpectedDeletingTaskStateError,
                               self._rebuild)

        self.assertIs(error, ex)
        self.mock_rebuild.assert_not_called()
        self.assert_claim_removed()

    def test_instance_not_found_but_not_deleted(self):
        """The lookup says the instance lives: the claim stays."""
        self.mock_deleted.return_value = False
        self.mock_rebuild.side_effect = exception.InstanceNotFound(
            instance_id=uuids.instance)

        self.assertRaises(exception.InstanceNotFound, self._rebuild)

        self.mock_deleted.assert_called_once_with(
            self.context, uuids.instance)
        self.mock_delete.assert_not_called()

    def test_other_failure_does_not_look_up(self):
        self.mock_rebuild.side_effect = exception.BuildAbortException(
            instance_uuid=uuids.instance, reason='failed')

        self.assertRaises(exception.BuildAbortException, self._rebuild)

        self.mock_deleted.assert_not_called()
        self.mock_delete.assert_not_called()


class ClaimAfterDeleteUnshelveInstanceTestCase(
        ClaimAfterDeleteComputeTestBase):
    """Tests for ComputeManager._unshelve_instance

    Bug 1848343: the scheduler's claim for an unshelve can land after the
    API deleted the shelved offloaded server; the unshelve then fails on the
    deleted instance. What was written for the deleted instance is now
    removed and the failure goes on as before.
    """

    def setUp(self):
        super(ClaimAfterDeleteUnshelveInstanceTestCase, self).setUp()
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance,
            vm_state=vm_states.SHELVED_OFFLOADED,
            task_state=task_states.UNSHELVING, host=None, node=None)
        self.instance.system_metadata = {}
        self.instance.pci_requests = objects.InstancePCIRequests(
            requests=[])
        for attr, target, name in (
                ('mock_get_bdms', objects.BlockDeviceMappingList,
                 'get_by_instance_uuid'),
                ('mock_save', objects.Instance, 'save'),
                ('mock_notify_action', compute_utils,
                 'notify_about_instance_action'),
                ('mock_notify_usage', manager.ComputeManager,
                 '_notify_about_instance_usage'),
                ('mock_prep_bdm', manager.ComputeManager,
                 '_prep_block_device'),
                ('mock_after_spawn', manager.ComputeManager,
                 '_update_instance_after_spawn'),
                ('mock_sched_info', manager.ComputeManager,
                 '_update_scheduler_instance_info')):
            patcher = mock.patch.object(target, name)
            setattr(self, attr, patcher.start())
            self.addCleanup(patcher.stop)
        self.mock_get_bdms.return_value = objects.BlockDeviceMappingList()
        for name in ('rt', 'network_api', 'driver'):
            patcher = mock.patch.object(self.compute, name)
            setattr(self, 'mock_' + name, patcher.start())
            self.addCleanup(patcher.stop)
        self.mock_rt.instance_claim.return_value.__exit__.return_value = (
            False)

    def _unshelve(self):
        self.compute._unshelve_instance(
            self.context, self.instance, None, {}, 'node1', None, [])

    def test_unshelve_succeeds(self):
        self._unshelve()

        self.mock_driver.spawn.assert_called_once()
        self.assertEqual(2, self.mock_save.call_count)
        self.mock_deleted.assert_not_called()
        self.mock_delete.assert_not_called()

    def test_instance_deleted_before_spawn(self):
        error = exception.InstanceNotFound(instance_id=uuids.instance)
        self.mock_save.side_effect = error

        ex = self.assertRaises(exception.InstanceNotFound, self._unshelve)

        self.assertIs(error, ex)
        self.mock_driver.spawn.assert_not_called()
        self.assert_claim_removed()

    def test_instance_deleting_before_spawn(self):
        self.mock_save.side_effect = (
            exception.UnexpectedDeletingTaskStateError(
                instance_uuid=uuids.instance,
                expected=task_states.UNSHELVING,
                actual=task_states.DELETING))

        self.assertRaises(exception.UnexpectedDeletingTaskStateError,
                          self._unshelve)

        self.mock_prep_bdm.assert_not_called()
        self.assert_claim_removed()

    def test_instance_deleted_during_spawn(self):
        """The last save after the spawn finds the instance deleted."""
        self.mock_save.side_effect = [
            None, exception.InstanceNotFound(instance_id=uuids.instance)]

        self.assertRaises(exception.InstanceNotFound, self._unshelve)

        self.mock_driver.spawn.assert_called_once()
        self.assert_claim_removed()

    def test_instance_not_found_but_not_deleted(self):
        """The lookup says the instance lives: the claim stays."""
        self.mock_deleted.return_value = False
        self.mock_save.side_effect = exception.InstanceNotFound(
            instance_id=uuids.instance)

        self.assertRaises(exception.InstanceNotFound, self._unshelve)

        self.mock_deleted.assert_called_once_with(
            self.context, uuids.instance)
        self.mock_delete.assert_not_called()

    def test_other_failure_does_not_look_up(self):
        self.mock_save.side_effect = test.TestingException()

        self.assertRaises(test.TestingException, self._unshelve)

        self.mock_deleted.assert_not_called()
        self.mock_delete.assert_not_called()
