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

"""The servers controller's delete drop-in of the running nova's series."""

from unittest import mock

import fixtures
from nova.api.openstack import api_version_request
from nova import exception
import testtools
import webob

from nova_fixes import activation
from nova_fixes import fixes
from nova_fixes.nova import exception as fixes_exception
from nova_fixes import registry

UUID = 'e2f1a3c4-0000-4000-8000-000000000001'
PATH = 'nova.api.openstack.compute.servers:ServersController.delete'


class _Request(object):
    def __init__(self, version='2.1'):
        self.api_version_request = api_version_request.APIVersionRequest(
            version)
        self.environ = {'nova.context': mock.sentinel.context}

    def is_legacy_v2(self):
        return False


def _dropin():
    """The drop-in that the running nova's series takes."""
    series = activation.series_of(activation.nova_version())
    targets = [t for t in registry.targets_of(fixes.get_fix(1859496),
                                              series) if t.path == PATH]
    return activation._replacement(targets[0])


class ServersControllerDeleteTestCase(testtools.TestCase):

    def setUp(self):
        super(ServersControllerDeleteTestCase, self).setUp()
        # What activation adds to nova.exception, without activating.
        self.useFixture(fixtures.MockPatchObject(
            exception, 'PlacementUnavailableForDelete',
            fixes_exception.PlacementUnavailableForDelete, create=True))
        self.controller = mock.Mock()

    def _delete(self, error=None):
        self.controller._delete.side_effect = error
        try:
            return _dropin()(self.controller, _Request(), UUID)
        finally:
            self.controller._delete.assert_called_once_with(
                mock.sentinel.context, mock.ANY, UUID)

    def test_one_drop_in_per_series(self):
        for series in registry.SUPPORTED_SERIES:
            self.assertEqual(1, len([
                t for t in registry.targets_of(fixes.get_fix(1859496),
                                               series) if t.path == PATH]),
                series)

    def test_success_is_a_204(self):
        self.assertIsNone(self._delete())
        dropin = _dropin()
        codes = getattr(dropin, 'wsgi_codes', None)
        if codes is not None:
            self.assertEqual(204, codes(_Request()))
        else:
            self.assertEqual(204, dropin.wsgi_code)

    def test_placement_unavailable_is_a_503(self):
        exc = fixes_exception.PlacementUnavailableForDelete(
            instance_uuid=UUID, reason='placement could not be reached')
        raised = self.assertRaises(webob.exc.HTTPServiceUnavailable,
                                   self._delete, exc)
        self.assertEqual(exc.format_message(), raised.explanation)

    def test_nova_responses_are_kept(self):
        self.assertRaises(webob.exc.HTTPNotFound, self._delete,
                          exception.InstanceNotFound(instance_id=UUID))

    def test_locked_is_still_a_409(self):
        self.assertRaises(webob.exc.HTTPConflict, self._delete,
                          exception.InstanceIsLocked(instance_uuid=UUID))

    @mock.patch('nova.version.support_string', return_value='')
    def test_unexpected_errors_are_still_a_500(self, support_string):
        raised = self.assertRaises(
            webob.exc.HTTPInternalServerError, self._delete,
            exception.NovaException('boom'))
        self.assertIn('Unexpected API Error', raised.explanation)
