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

from nova.compute import task_states
from nova.compute import vm_states
from nova import exception
import testtools

from nova_fixes.nova.compute import utils


class IsInstanceDeletedTestCase(testtools.TestCase):

    def setUp(self):
        super(IsInstanceDeletedTestCase, self).setUp()
        self.context = mock.Mock()
        patcher = mock.patch('nova.objects.Instance.get_by_uuid')
        self.get = patcher.start()
        self.addCleanup(patcher.stop)

    def _deleted(self):
        return utils.is_instance_deleted(self.context, 'uuid')

    def test_not_found(self):
        self.get.side_effect = exception.InstanceNotFound(instance_id='uuid')
        self.assertTrue(self._deleted())
        self.context.elevated.assert_called_once_with(read_deleted='no')

    def test_deleting(self):
        self.get.return_value = mock.Mock(vm_state=vm_states.ACTIVE,
                                          task_state=task_states.DELETING)
        self.assertTrue(self._deleted())

    def test_deleted_state(self):
        self.get.return_value = mock.Mock(vm_state=vm_states.DELETED,
                                          task_state=None)
        self.assertTrue(self._deleted())

    def test_live(self):
        for vm_state, task_state in ((vm_states.ACTIVE, None),
                                     (vm_states.ACTIVE,
                                      task_states.MIGRATING),
                                     (vm_states.SOFT_DELETED, None),
                                     (vm_states.ACTIVE,
                                      task_states.SOFT_DELETING)):
            self.get.return_value = mock.Mock(vm_state=vm_state,
                                              task_state=task_state)
            self.assertFalse(self._deleted(), (vm_state, task_state))

    def test_lookup_error_means_not_known_deleted(self):
        self.get.side_effect = exception.DBNotAllowed(binary='x')
        self.assertFalse(self._deleted())
