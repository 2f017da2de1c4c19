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

from nova.compute import api as compute_api
from nova.compute import vm_states
from nova import context
from nova import exception
from nova import objects
from nova import test
from nova.tests.unit import fake_instance


class DeleteOfBuildRequestPlacementTestCase(test.NoDBTestCase):
    """Tests for API._attempt_delete_of_buildrequest and
    API._local_delete_cleanup (bug 1859496).

    The allocations of a server in BUILD are deleted before its build
    request; when placement cannot be reached or fails, the delete is
    refused with PlacementUnavailableForDelete before anything is
    destroyed. _local_delete_cleanup then does not delete them again.
    """

    def setUp(self):
        super(DeleteOfBuildRequestPlacementTestCase, self).setUp()
        self.compute_api = compute_api.API()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.reportclient = mock.create_autospec(
            compute_api.report.SchedulerReportClient, instance=True)
        self.reportclient.delete_allocation_for_instance.return_value = True
        patcher = mock.patch.object(
            compute_api.API, 'placementclient',
            new_callable=mock.PropertyMock, return_value=self.reportclient)
        patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(compute_api.API,
                                    '_local_cleanup_bdm_volumes')
        self.mock_cleanup_bdms = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(compute_api.API,
                                    '_update_queued_for_deletion')
        self.mock_queued = patcher.start()
        self.addCleanup(patcher.stop)
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, host=None, node=None,
            vm_state=vm_states.BUILDING, task_state=None)
        self.build_req = mock.Mock(spec=objects.BuildRequest)
        self.build_req.block_device_mappings = mock.sentinel.bdms

    def _attempt(self):
        return self.compute_api._attempt_delete_of_buildrequest(
            self.context, self.instance)

    def _assert_deleted_once(self):
        self.reportclient.delete_allocation_for_instance.\
            assert_called_once_with(self.context, uuids.instance,
                                    consumer_type='instance', force=True)

    def _assert_refused(self, reason):
        ex = self.assertRaises(exception.PlacementUnavailableForDelete,
                               self._attempt)
        self.assertEqual(503, ex.code)
        message = ex.format_message()
        self.assertIn(uuids.instance, message)
        self.assertIn(reason, message)
        self.assertIn('The delete can be retried', message)
        self._assert_deleted_once()
        self.build_req.destroy.assert_not_called()
        self.mock_cleanup_bdms.assert_not_called()

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_allocations_deleted_before_build_request(self, mock_get):
        mock_get.return_value = self.build_req
        calls = mock.Mock()
        calls.attach_mock(self.reportclient.delete_allocation_for_instance,
                          'delete_allocations')
        calls.attach_mock(self.build_req.destroy, 'destroy')
        calls.attach_mock(self.mock_cleanup_bdms, 'cleanup_bdms')

        self.assertTrue(self._attempt())

        mock_get.assert_called_once_with(self.context, uuids.instance)
        self.assertEqual([
            mock.call.delete_allocations(self.context, uuids.instance,
                                         consumer_type='instance',
                                         force=True),
            mock.call.destroy(),
            mock.call.cleanup_bdms(mock.sentinel.bdms, self.instance,
                                   self.context)], calls.mock_calls)

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_no_allocations_to_delete(self, mock_get):
        # Placement answers 404: nothing to delete, the delete goes on.
        mock_get.return_value = self.build_req
        self.reportclient.delete_allocation_for_instance.return_value = False

        self.assertTrue(self._attempt())

        self._assert_deleted_once()
        self.build_req.destroy.assert_called_once_with()
        self.mock_cleanup_bdms.assert_called_once_with(
            mock.sentinel.bdms, self.instance, self.context)

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_placement_unreachable_refuses(self, mock_get):
        # The report client's safe_connect answers None.
        mock_get.return_value = self.build_req
        self.reportclient.delete_allocation_for_instance.return_value = None

        self._assert_refused('placement could not be reached')

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_placement_client_exception_refuses(self, mock_get):
        mock_get.return_value = self.build_req
        self.reportclient.delete_allocation_for_instance.side_effect = (
            compute_api.ks_exc.ClientException())

        self._assert_refused(
            'placement could not be reached: ClientException')

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_placement_failure_refuses(self, mock_get):
        mock_get.return_value = self.build_req
        self.reportclient.delete_allocation_for_instance.side_effect = (
            exception.AllocationDeleteFailed(consumer_uuid=uuids.instance,
                                             error='boom'))

        self._assert_refused('placement failed')

    @mock.patch('nova.scheduler.client.report.SchedulerReportClient.delete')
    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_placement_down_with_the_real_report_client(self, mock_get,
                                                        mock_delete):
        # The report client logs a connect failure and returns None.
        mock_get.return_value = self.build_req
        mock_delete.side_effect = compute_api.ks_exc.ConnectFailure()

        with mock.patch.object(
                compute_api.API, 'placementclient',
                new_callable=mock.PropertyMock,
                return_value=compute_api.report.SchedulerReportClient()):
            self.assertRaises(exception.PlacementUnavailableForDelete,
                              self._attempt)

        mock_delete.assert_called_once_with(
            '/allocations/%s' % uuids.instance,
            global_request_id=self.context.global_id)
        self.build_req.destroy.assert_not_called()

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_build_request_destroyed_meanwhile(self, mock_get):
        # The conductor destroyed the build request after the allocations
        # were deleted: the delete goes on with the instance in its cell,
        # and _local_delete_cleanup deletes the allocations again.
        mock_get.return_value = self.build_req
        self.build_req.destroy.side_effect = exception.BuildRequestNotFound(
            uuid=uuids.instance)

        self.assertFalse(self._attempt())

        self._assert_deleted_once()
        self.mock_cleanup_bdms.assert_not_called()
        self.compute_api._local_delete_cleanup(self.context, uuids.instance)
        self.assertEqual(
            2, self.reportclient.delete_allocation_for_instance.call_count)

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_cleanup_after_build_request_does_not_delete_again(self,
                                                               mock_get):
        mock_get.return_value = self.build_req
        self.assertTrue(self._attempt())

        self.compute_api._local_delete_cleanup(self.context, uuids.instance)

        self._assert_deleted_once()
        self.mock_queued.assert_called_once_with(self.context,
                                                 uuids.instance, True)

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_cleanup_after_build_request_mapping_gone(self, mock_get):
        mock_get.return_value = self.build_req
        self.mock_queued.side_effect = exception.InstanceMappingNotFound(
            uuid=uuids.instance)
        self.assertTrue(self._attempt())

        self.compute_api._local_delete_cleanup(self.context, uuids.instance)

        self._assert_deleted_once()
        self.mock_queued.assert_called_once_with(self.context,
                                                 uuids.instance, True)

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_cleanup_of_another_instance_or_request_deletes(self, mock_get):
        # Only the instance whose allocations this request deleted is
        # skipped.
        mock_get.return_value = self.build_req
        self.assertTrue(self._attempt())
        other_context = context.RequestContext('fake-user', 'fake-project')

        self.compute_api._local_delete_cleanup(self.context, uuids.other)
        self.compute_api._local_delete_cleanup(other_context, uuids.instance)

        self.reportclient.delete_allocation_for_instance.assert_has_calls([
            mock.call(self.context, uuids.instance,
                      consumer_type='instance', force=True),
            mock.call(self.context, uuids.other, force=True),
            mock.call(other_context, uuids.instance, force=True)])
        self.assertEqual(
            3, self.reportclient.delete_allocation_for_instance.call_count)

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_no_build_request_building(self, mock_get):
        # The instance is in its cell, BUILDING with no host: its
        # allocations are deleted first, and only once.
        mock_get.side_effect = exception.BuildRequestNotFound(
            uuid=uuids.instance)

        self.assertFalse(self._attempt())

        self._assert_deleted_once()
        self.mock_cleanup_bdms.assert_not_called()
        self.compute_api._local_delete_cleanup(self.context, uuids.instance)
        self._assert_deleted_once()
        self.mock_queued.assert_called_once_with(self.context,
                                                 uuids.instance, True)

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_no_build_request_building_placement_unreachable(self,
                                                             mock_get):
        mock_get.side_effect = exception.BuildRequestNotFound(
            uuid=uuids.instance)
        self.reportclient.delete_allocation_for_instance.return_value = None

        self._assert_refused('placement could not be reached')
        self.mock_queued.assert_not_called()

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_no_build_request_not_building(self, mock_get):
        # An instance in ERROR (buried in cell0) holds no allocations: it
        # is deleted as nova did, _local_delete_cleanup deleting them.
        mock_get.side_effect = exception.BuildRequestNotFound(
            uuid=uuids.instance)
        self.instance.vm_state = vm_states.ERROR

        self.assertFalse(self._attempt())

        self.reportclient.delete_allocation_for_instance.assert_not_called()
        self.compute_api._local_delete_cleanup(self.context, uuids.instance)
        self.reportclient.delete_allocation_for_instance.\
            assert_called_once_with(self.context, uuids.instance, force=True)

    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_no_build_request_vm_state_unset(self, mock_get):
        mock_get.side_effect = exception.BuildRequestNotFound(
            uuid=uuids.instance)
        self.instance = objects.Instance(uuid=uuids.instance)

        self.assertFalse(self._attempt())

        self.reportclient.delete_allocation_for_instance.assert_not_called()

    def test_cleanup_without_build_request(self):
        # The ordinary local delete cleanup: the allocations are deleted,
        # a failure only logged, and the mapping queued for deletion.
        self.reportclient.delete_allocation_for_instance.side_effect = (
            exception.AllocationDeleteFailed(consumer_uuid=uuids.instance,
                                             error='boom'))

        self.compute_api._local_delete_cleanup(self.context, uuids.instance)

        self.reportclient.delete_allocation_for_instance.\
            assert_called_once_with(self.context, uuids.instance, force=True)
        self.mock_queued.assert_called_once_with(self.context,
                                                 uuids.instance, True)

    @mock.patch.object(compute_api.API, '_lookup_instance',
                       return_value=(None, None))
    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_delete_in_build(self, mock_get, mock_lookup):
        # One placement request per delete of a server in BUILD.
        mock_get.return_value = self.build_req

        self.compute_api.delete(self.context, self.instance)

        self._assert_deleted_once()
        self.build_req.destroy.assert_called_once_with()
        self.mock_queued.assert_called_once_with(self.context,
                                                 uuids.instance, True)

    @mock.patch.object(objects.Instance, 'destroy')
    @mock.patch.object(compute_api.API, '_lookup_instance',
                       return_value=(None, None))
    @mock.patch.object(objects.BuildRequest, 'get_by_instance_uuid')
    def test_delete_in_build_placement_unreachable(self, mock_get,
                                                   mock_lookup,
                                                   mock_destroy):
        mock_get.return_value = self.build_req
        self.reportclient.delete_allocation_for_instance.return_value = None

        self.assertRaises(exception.PlacementUnavailableForDelete,
                          self.compute_api.delete, self.context,
                          self.instance)

        self._assert_deleted_once()
        self.build_req.destroy.assert_not_called()
        mock_lookup.assert_not_called()
        mock_destroy.assert_not_called()
        self.mock_queued.assert_not_called()
