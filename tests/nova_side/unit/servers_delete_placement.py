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

from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids
import webob

from nova.api.openstack import compute
from nova.compute import api as compute_api
from nova.compute import vm_states
from nova import exception
from nova import objects
from nova import test
from nova.tests.unit.api.openstack import fakes


class ServersControllerDeletePlacementTest(ControllerTest):  # noqa: F821
    """Tests for ServersController.delete (bug 1859496): a delete refused
    with PlacementUnavailableForDelete, as the compute API refuses one
    while placement is unreachable, is a 503 the user can retry, not a 500.
    """

    def _delete_request(self):
        req = fakes.HTTPRequestV21.blank('%s/%s' % (self.path, uuids.server))
        req.method = 'DELETE'
        self.mock_get.side_effect = fakes.fake_compute_get(
            uuid=uuids.server, vm_state=vm_states.BUILDING,
            project_id=req.environ['nova.context'].project_id,
            user_id=req.environ['nova.context'].user_id)
        return req

    def _refuse(self, mock_delete):
        self.refused = exception.PlacementUnavailableForDelete(
            instance_uuid=uuids.server,
            reason='placement could not be reached')
        mock_delete.side_effect = self.refused

    def _assert_delete_raises(self, http_error, mock_delete):
        req = self._delete_request()
        ex = self.assertRaises(http_error, self.controller.delete, req,
                               uuids.server)
        mock_delete.assert_called_once_with(
            req.environ['nova.context'], test.MatchType(objects.Instance))
        return ex

    @mock.patch.object(compute_api.API, 'delete')
    def test_delete_refused_is_503(self, mock_delete):
        self._refuse(mock_delete)

        ex = self._assert_delete_raises(webob.exc.HTTPServiceUnavailable,
                                        mock_delete)

        self.assertEqual(503, ex.code)
        self.assertEqual(self.refused.format_message(), ex.explanation)
        self.assertIn('The delete can be retried', ex.explanation)

    @mock.patch.object(compute_api.API, 'delete')
    @mock.patch.object(compute_api.API, 'soft_delete')
    def test_soft_delete_refused_is_503(self, mock_soft_delete,
                                        mock_delete):
        self.flags(reclaim_instance_interval=3600)
        self._refuse(mock_soft_delete)

        ex = self._assert_delete_raises(webob.exc.HTTPServiceUnavailable,
                                        mock_soft_delete)

        self.assertEqual(self.refused.format_message(), ex.explanation)
        mock_delete.assert_not_called()

    @mock.patch.object(compute_api.API, 'delete')
    def test_delete_refused_response(self, mock_delete):
        # Through the API router: a 503 whose message tells to retry.
        self._refuse(mock_delete)
        req = self._delete_request()

        res = req.get_response(compute.APIRouterV21())

        self.assertEqual(503, res.status_int)
        body = jsonutils.loads(res.body)
        self.assertEqual(self.refused.format_message(),
                         body['serviceUnavailable']['message'])

    @mock.patch.object(compute_api.API, 'delete')
    def test_delete(self, mock_delete):
        req = self._delete_request()

        self.assertIsNone(self.controller.delete(req, uuids.server))

        mock_delete.assert_called_once_with(
            req.environ['nova.context'], test.MatchType(objects.Instance))
        res = self._delete_request().get_response(compute.APIRouterV21())
        self.assertEqual(204, res.status_int)

    @mock.patch.object(compute_api.API, 'delete')
    def test_delete_not_found_is_404(self, mock_delete):
        mock_delete.side_effect = exception.InstanceNotFound(
            instance_id=uuids.server)

        self._assert_delete_raises(webob.exc.HTTPNotFound, mock_delete)

    @mock.patch.object(compute_api.API, 'delete')
    def test_delete_allocation_delete_failed_is_409(self, mock_delete):
        mock_delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=uuids.server, error='conflict')

        self._assert_delete_raises(webob.exc.HTTPConflict, mock_delete)

    @mock.patch.object(compute_api.API, 'delete')
    def test_delete_other_error_is_500(self, mock_delete):
        mock_delete.side_effect = exception.NovaException()

        self._assert_delete_raises(webob.exc.HTTPInternalServerError,
                                   mock_delete)
