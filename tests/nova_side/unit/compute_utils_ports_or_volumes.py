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

from oslo_serialization import jsonutils

from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import objects
from nova import test


class MayHavePortsOrVolumesWithHostTestCase(test.NoDBTestCase):
    """Tests for compute_utils.may_have_ports_or_volumes (bug 1848343)."""

    STATES = (vm_states.ACTIVE, vm_states.BUILDING, vm_states.STOPPED,
              vm_states.RESIZED, vm_states.SHELVED,
              vm_states.SHELVED_OFFLOADED, vm_states.ERROR,
              vm_states.DELETED)

    def _answer(self, **fields):
        return compute_utils.may_have_ports_or_volumes(
            objects.Instance(**fields))

    def test_instance_with_a_host(self):
        """An instance that has a host was scheduled, whatever its state."""
        for vm_state in self.STATES:
            self.assertTrue(self._answer(host='host1', vm_state=vm_state),
                            vm_state)

    def test_instance_with_no_host(self):
        """With no host, the vm_state decides, as it did."""
        for vm_state in self.STATES:
            self.assertEqual(
                vm_state in (vm_states.SHELVED_OFFLOADED, vm_states.ERROR),
                self._answer(host=None, vm_state=vm_state), vm_state)

    def test_instance_with_an_empty_host(self):
        self.assertFalse(self._answer(host='', vm_state=vm_states.BUILDING))
        self.assertTrue(self._answer(host='', vm_state=vm_states.ERROR))

    def test_host_not_loaded(self):
        """An instance whose host is not loaded is answered as one with
        none; the host is not lazy-loaded (an orphaned instance would
        raise).
        """
        self.assertFalse(self._answer(vm_state=vm_states.BUILDING))
        self.assertTrue(self._answer(vm_state=vm_states.SHELVED_OFFLOADED))


class MayHavePortsOrVolumesConnectorTestCase(test.NoDBTestCase):
    """compute_utils.get_stashed_volume_connector checks the host before it
    asks may_have_ports_or_volumes: its answers do not change (bug
    1848343).
    """

    def _connector(self, host, vm_state):
        bdm = objects.BlockDeviceMapping(connection_info=jsonutils.dumps(
            {'connector': {'host': 'other_host'}}))
        instance = objects.Instance(host=host, vm_state=vm_state)
        return compute_utils.get_stashed_volume_connector(bdm, instance)

    def test_other_host(self):
        self.assertIsNone(self._connector('host1', vm_states.ACTIVE))
        self.assertIsNone(self._connector('host1', vm_states.ERROR))

    def test_no_host(self):
        self.assertEqual({'host': 'other_host'},
                         self._connector(None, vm_states.ERROR))
        self.assertIsNone(self._connector(None, vm_states.BUILDING))
