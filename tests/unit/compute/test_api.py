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

import inspect
from unittest import mock

import fixtures
from keystoneauth1 import exceptions as ks_exc
from nova.api.openstack import api_version_request
from nova.api.openstack.compute import servers
from nova import exception
from nova import objects
import testtools
import webob

from nova_fixes import activation
from nova_fixes.compute import api
from nova_fixes import exception as fixes_exception
from nova_fixes import fixture

UUID = 'e2f1a3c4-0000-4000-8000-000000000001'


@mock.patch('nova.objects.BuildRequest.get_by_instance_uuid')
class AttemptDeleteOfBuildRequestTestCase(testtools.TestCase):

    def setUp(self):
        super(AttemptDeleteOfBuildRequestTestCase, self).setUp()
        objects.register_all()
        # The drop-in names nova.exception.PlacementUnavailableForDelete,
        # which activation adds.
        self.useFixture(fixture.NovaFixes(bugs=[1859496]))
        patcher = mock.patch.object(api, 'LOG')
        self.log = patcher.start()
        self.addCleanup(patcher.stop)
        self.api = mock.Mock()
        self.delete = self.api.placementclient.delete_allocation_for_instance
        self.context = mock.sentinel.context
        self.instance = mock.Mock(uuid=UUID)

    def _attempt(self):
        return api._attempt_delete_of_buildrequest(self.api, self.context,
                                                   self.instance)

    def test_in_a_cell_already(self, get_br):
        """No build request: the delete proceeds normally; placement is
        not called here.
        """
        get_br.side_effect = exception.BuildRequestNotFound(uuid=UUID)
        self.assertFalse(self._attempt())
        get_br.assert_called_once_with(self.context, UUID)
        self.delete.assert_not_called()
        self.api._local_cleanup_bdm_volumes.assert_not_called()

    def test_allocations_deleted_before_the_build_request(self, get_br):
        for deleted in (True, False):
            order = []
            self.delete.reset_mock()
            self.delete.side_effect = (
                lambda *a, r=deleted, **k: order.append('placement') or r)
            get_br.return_value.destroy.side_effect = (
                lambda: order.append('build request'))
            self.assertTrue(self._attempt())
            self.assertEqual(['placement', 'build request'], order)
            self.delete.assert_called_once_with(self.context, UUID,
                                                force=True)
            self.api._local_cleanup_bdm_volumes.assert_called_with(
                get_br.return_value.block_device_mappings, self.instance,
                self.context)
        # One lookup of the build request per delete, as nova's own.
        self.assertEqual(2, get_br.call_count)

    def test_conductor_destroyed_it_meanwhile(self, get_br):
        get_br.return_value.destroy.side_effect = (
            exception.BuildRequestNotFound(uuid=UUID))
        self.assertFalse(self._attempt())
        self.delete.assert_called_once_with(self.context, UUID, force=True)
        self.api._local_cleanup_bdm_volumes.assert_not_called()

    def _assert_refused(self, get_br, reason):
        exc = self.assertRaises(
            fixes_exception.PlacementUnavailableForDelete, self._attempt)
        get_br.return_value.destroy.assert_not_called()
        self.api._local_cleanup_bdm_volumes.assert_not_called()
        self.log.warning.assert_called_once()
        self.assertEqual(503, exc.code)
        self.assertTrue(exc.safe)
        message = exc.format_message()
        self.assertIn(UUID, message)
        self.assertIn('Placement could not be reached', message)
        self.assertIn('The delete can be retried', message)
        self.assertIn(reason, message)
        return message

    def test_unreachable_refuses_before_destroying(self, get_br):
        # safe_connect returns None when placement cannot be reached.
        self.delete.return_value = None
        self._assert_refused(get_br, '(placement could not be reached)')

    def test_placement_error_refuses(self, get_br):
        self.delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=UUID, error='503 Service Unavailable')
        self._assert_refused(get_br, '503 Service Unavailable')

    def test_connection_errors_safe_connect_lets_through_refuse(
            self, get_br):
        self.delete.side_effect = ks_exc.ConnectTimeout()
        self._assert_refused(get_br, 'ConnectTimeout')

    def test_other_errors_are_not_turned_into_a_503(self, get_br):
        self.delete.side_effect = ValueError('bug')
        self.assertRaises(ValueError, self._attempt)
        get_br.return_value.destroy.assert_not_called()


class _Request(object):
    def __init__(self, version='2.1'):
        self.api_version_request = api_version_request.APIVersionRequest(
            version)


class ServersControllerDeleteTestCase(testtools.TestCase):

    def setUp(self):
        super(ServersControllerDeleteTestCase, self).setUp()
        # What activation adds to nova.exception, without activating: the
        # controller's original must stay in place for these tests.
        self.useFixture(fixtures.MockPatchObject(
            exception, 'PlacementUnavailableForDelete',
            fixes_exception.PlacementUnavailableForDelete, create=True))

    def _delete_raising(self, exc):
        inner = mock.Mock(side_effect=exc)
        with mock.patch.object(api, '_within_expected_errors',
                               return_value=inner):
            try:
                api.servers_controller_delete(mock.sentinel.controller,
                                              _Request(), UUID)
            finally:
                inner.assert_called_once_with(mock.sentinel.controller,
                                              mock.ANY, UUID)

    def test_runs_what_nova_expected_errors_wraps(self):
        nova_delete = activation.original(api.SERVERS_DELETE)
        self.assertIs(nova_delete, vars(servers.ServersController)['delete'])
        inner = api._within_expected_errors()
        self.assertIsNot(nova_delete, inner)
        # nova's method itself, or its response schema validation around it
        self.assertIs(inspect.unwrap(nova_delete), inspect.unwrap(inner))
        self.assertEqual(
            inspect.signature(inspect.unwrap(nova_delete)),
            inspect.signature(inspect.unwrap(api.servers_controller_delete)))

    def test_success(self):
        inner = mock.Mock(return_value=None)
        with mock.patch.object(api, '_within_expected_errors',
                               return_value=inner):
            self.assertIsNone(api.servers_controller_delete(
                mock.sentinel.controller, _Request(), UUID))
        codes = getattr(api.servers_controller_delete, 'wsgi_codes', None)
        if codes is not None:
            self.assertEqual(204, codes(_Request()))
        else:
            self.assertEqual(204, api.servers_controller_delete.wsgi_code)

    def test_placement_unavailable_is_a_503(self):
        exc = fixes_exception.PlacementUnavailableForDelete(
            instance_uuid=UUID, reason='placement could not be reached')
        raised = self.assertRaises(webob.exc.HTTPServiceUnavailable,
                                   self._delete_raising, exc)
        self.assertEqual(exc.format_message(), raised.explanation)

    def test_nova_responses_are_kept(self):
        self.assertRaises(webob.exc.HTTPNotFound, self._delete_raising,
                          webob.exc.HTTPNotFound())
        self.assertRaises(webob.exc.HTTPConflict, self._delete_raising,
                          webob.exc.HTTPConflict())

    @mock.patch('nova.version.support_string', return_value='')
    def test_unexpected_errors_are_still_a_500(self, support_string):
        raised = self.assertRaises(
            webob.exc.HTTPInternalServerError, self._delete_raising,
            exception.NovaException('boom'))
        self.assertIn('Unexpected API Error', raised.explanation)
