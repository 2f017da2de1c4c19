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

from nova import exception
import testtools

from nova_fixes import fixture
from nova_fixes.nova.compute import manager


class RevertAllocationTestCase(testtools.TestCase):

    def setUp(self):
        super(RevertAllocationTestCase, self).setUp()
        self.useFixture(fixture.NovaFixes())
        self.compute = mock.Mock()
        self.context = mock.sentinel.context
        self.instance = mock.Mock(uuid='instance-uuid')
        self.migration = mock.Mock(uuid='migration-uuid', source_node='n1')
        self.reportclient = self.compute.reportclient
        self.reportclient.get_allocations_for_consumer.return_value = {
            'rp1': {'resources': {'VCPU': 1}}}

    def _revert(self):
        return manager._revert_allocation(
            self.compute, self.context, self.instance, self.migration)

    def test_requires_the_instance_consumer(self):
        self.assertEqual({'rp1': {'resources': {'VCPU': 1}}},
                         self._revert())
        self.reportclient.move_allocations.assert_called_once_with(
            self.context, 'migration-uuid', 'instance-uuid',
            target_consumer_generation_required=True)

    def test_nothing_held_by_the_migration(self):
        self.reportclient.get_allocations_for_consumer.return_value = {}
        self.assertFalse(self._revert())
        self.reportclient.move_allocations.assert_not_called()

    @mock.patch('nova.compute.utils.is_instance_deleted', create=True,
                return_value=True)
    @mock.patch.object(manager, 'LOG')
    def test_deleted_server(self, log, deleted):
        self.reportclient.move_allocations.side_effect = (
            exception.AllocationMoveTargetNotFound(
                source_consumer='migration-uuid',
                target_consumer='instance-uuid'))
        self.assertFalse(self._revert())
        deleted.assert_called_once_with(self.context, 'instance-uuid')
        log.info.assert_called()
        log.error.assert_not_called()

    @mock.patch('nova.compute.utils.is_instance_deleted', create=True,
                return_value=False)
    @mock.patch.object(manager, 'LOG')
    def test_consumer_gone_for_a_live_server_is_reported(self, log, deleted):
        self.reportclient.move_allocations.side_effect = (
            exception.AllocationMoveTargetNotFound(
                source_consumer='migration-uuid',
                target_consumer='instance-uuid'))
        self.assertFalse(self._revert())
        self.assertIn('heal_allocations', log.error.call_args[0][0])

    def test_move_failure_propagates(self):
        self.reportclient.move_allocations.side_effect = (
            exception.AllocationMoveFailed(source_consumer='m',
                                           target_consumer='i', error='x'))
        self.assertRaises(exception.AllocationMoveFailed, self._revert)
