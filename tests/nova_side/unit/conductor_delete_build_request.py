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

from keystoneauth1 import exceptions as ks_exc
from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import utils as compute_utils
from nova.conductor import manager as conductor_manager
from nova import context
from nova import exception as exc
from nova import objects
from nova.scheduler.client import report
from nova import test


class DeleteBuildRequestClaimTestCase(test.TestCase):
    """ComputeTaskManager._delete_build_request and the scheduler's claim

    Bug 1859496: the API deletes a server in BUILD by deleting its
    allocations, then its build request. A claim the scheduler made in
    between was kept when the conductor found the build request gone: it
    destroyed the instance it had created and moved on. It now deletes the
    allocations of that instance too; a failure to do so is logged, not
    raised. A build request the conductor deletes itself leaves the claim
    alone, as before.
    """

    def setUp(self):
        super().setUp()
        self.ctxt = context.RequestContext(
            'fake-user', 'fake-project').elevated()
        self.conductor = conductor_manager.ComputeTaskManager()
        self.cell = self.cell_mappings['cell1']
        patcher = mock.patch.object(report, 'report_client_singleton')
        self.report_client = patcher.start().return_value
        self.addCleanup(patcher.stop)
        self.delete = self.report_client.delete_allocation_for_instance
        self.delete.return_value = True
        self.events = []
        patcher = mock.patch.object(
            objects.Instance, 'destroy',
            side_effect=lambda: self.events.append('instance'))
        self.instance_destroy = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(objects.BlockDeviceMapping, 'destroy')
        self.bdm_destroy = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(objects.TagList, 'destroy')
        self.tags_destroy = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(
            compute_utils, 'notify_about_instance_delete')
        self.notify = patcher.start()
        self.addCleanup(patcher.stop)
        self.instance = objects.Instance(
            self.ctxt, uuid=uuids.instance, project_id=self.ctxt.project_id)
        self.bdms = objects.BlockDeviceMappingList(objects=[
            objects.BlockDeviceMapping(self.ctxt,
                                       instance_uuid=uuids.instance)])
        self.tags = objects.TagList(objects=[objects.Tag(tag='tag1')])
        self.build_request = mock.Mock()

    def _delete_build_request(self):
        return self.conductor._delete_build_request(
            self.ctxt, self.build_request, self.instance, self.cell,
            self.bdms, self.tags)

    def _build_request_gone(self):
        self.build_request.destroy.side_effect = exc.BuildRequestNotFound(
            uuid=uuids.instance)

    def test_build_request_deleted_claim_kept(self):
        self.assertTrue(self._delete_build_request())

        self.build_request.destroy.assert_called_once_with()
        self.delete.assert_not_called()
        self.instance_destroy.assert_not_called()
        self.bdm_destroy.assert_not_called()
        self.tags_destroy.assert_not_called()

    def test_build_request_gone_claim_deleted(self):
        self._build_request_gone()
        self.delete.side_effect = (
            lambda *a, **kw: self.events.append('allocations'))

        self.assertFalse(self._delete_build_request())

        self.delete.assert_called_once_with(
            self.ctxt, uuids.instance, force=True)
        self.assertEqual(['instance', 'allocations'], self.events)
        # nova's own undoing of the build is unchanged.
        self.instance_destroy.assert_called_once_with()
        self.bdm_destroy.assert_called_once_with()
        self.tags_destroy.assert_called_once_with(
            test.MatchType(context.RequestContext), uuids.instance)
        self.notify.assert_called_once()
        self.assertNotIn('Unable to delete the allocations',
                         self.stdlog.logger.output)

    def test_instance_already_gone_claim_deleted(self):
        self._build_request_gone()
        self.instance_destroy.side_effect = exc.InstanceNotFound(
            instance_id=uuids.instance)

        self.assertFalse(self._delete_build_request())

        self.delete.assert_called_once_with(
            self.ctxt, uuids.instance, force=True)
        self.bdm_destroy.assert_called_once_with()

    def test_failed_claim_delete_logged(self):
        self._build_request_gone()
        self.delete.side_effect = exc.AllocationDeleteFailed(
            consumer_uuid=uuids.instance, error='conflict')

        self.assertFalse(self._delete_build_request())

        self.delete.assert_called_once_with(
            self.ctxt, uuids.instance, force=True)
        self.instance_destroy.assert_called_once_with()
        output = self.stdlog.logger.output
        self.assertIn('Unable to delete the allocations of the instance, '
                      'deleted while it was being built', output)
        self.assertIn('Error: conflict', output)

    def test_unexpected_claim_delete_error_logged(self):
        self._build_request_gone()
        self.delete.side_effect = ks_exc.EndpointNotFound()

        self.assertFalse(self._delete_build_request())

        self.delete.assert_called_once_with(
            self.ctxt, uuids.instance, force=True)
        self.assertIn('Unable to delete the allocations of the instance',
                      self.stdlog.logger.output)

    def test_unexpected_build_request_error_raised(self):
        self.build_request.destroy.side_effect = exc.CellTimeout()

        self.assertRaises(exc.CellTimeout, self._delete_build_request)

        self.delete.assert_not_called()
        self.instance_destroy.assert_not_called()
