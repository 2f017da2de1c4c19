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

from nova_fixes.nova.conductor.tasks import migrate


@mock.patch('nova.scheduler.client.report.report_client_singleton')
@mock.patch.object(migrate, '_move_allocations_back_to_instance')
@mock.patch('nova.compute.utils.delete_allocations_if_deleted', create=True)
class RevertAllocationForMigrationTestCase(testtools.TestCase):

    def setUp(self):
        super(RevertAllocationForMigrationTestCase, self).setUp()
        self.context = mock.sentinel.context
        self.source_cn = mock.sentinel.source_cn
        self.instance = mock.Mock(uuid='instance-uuid')
        self.migration = mock.Mock(uuid='migration-uuid')
        self.held = {'rp1': {'resources': {'VCPU': 1}}}

    def _revert(self):
        migrate.revert_allocation_for_migration(
            self.context, self.source_cn, self.instance, self.migration)

    def test_reverts_as_nova_does_then_checks_once(self, check, original,
                                                   client):
        order = mock.Mock()
        order.attach_mock(original, 'revert')
        order.attach_mock(check, 'check')
        check.return_value = False
        client.return_value.get_allocations_for_consumer.return_value = (
            self.held)
        self._revert()
        self.assertEqual([
            mock.call.revert(self.context, self.source_cn, self.instance,
                             self.migration),
            mock.call.check(self.context, client.return_value,
                            'instance-uuid', 'migration-uuid')],
            order.mock_calls)

    def test_nothing_held_nothing_moved_still_checked(self, check,
                                                      original, client):
        # The delete of the server removed the migration's allocations:
        # nova's move would fail on the missing source consumer.
        held = client.return_value.get_allocations_for_consumer
        held.return_value = {}
        self._revert()
        held.assert_called_once_with(self.context, 'migration-uuid')
        original.assert_not_called()
        check.assert_called_once_with(self.context, client.return_value,
                                      'instance-uuid', 'migration-uuid')

    def test_checked_when_the_revert_fails(self, check, original, client):
        client.return_value.get_allocations_for_consumer.return_value = (
            self.held)
        original.side_effect = exception.AllocationMoveFailed(
            source_consumer='m', target_consumer='i', error='x')
        self.assertRaises(exception.AllocationMoveFailed, self._revert)
        check.assert_called_once_with(self.context, client.return_value,
                                      'instance-uuid', 'migration-uuid')


@mock.patch('nova.compute.utils.delete_allocations_if_deleted', create=True)
class ScheduleTestCase(testtools.TestCase):
    """MigrationTask._schedule: the claim is checked once it is written."""

    def setUp(self):
        super(ScheduleTestCase, self).setUp()
        self.task = mock.Mock(instance=mock.Mock(uuid='instance-uuid'),
                              _migration=mock.Mock(uuid='migration-uuid'))
        self.task._schedule_destination.return_value = mock.sentinel.found

    def test_claim_kept_when_the_server_exists(self, check):
        check.return_value = False
        self.assertIs(mock.sentinel.found, migrate._schedule(self.task))
        check.assert_called_once_with(self.task.context,
                                      self.task.reportclient,
                                      'instance-uuid', 'migration-uuid')

    def test_deleted_server_stops_the_move(self, check):
        check.return_value = True
        self.assertRaises(exception.InstanceNotFound, migrate._schedule,
                          self.task)

    def test_no_migration_checks_the_instance_consumer(self, check):
        # A task whose _preallocate_migration did not run (nova's unit
        # tests mock it) has no migration consumer to check.
        self.task._migration = None
        check.return_value = False
        migrate._schedule(self.task)
        check.assert_called_once_with(self.task.context,
                                      self.task.reportclient,
                                      'instance-uuid', None)
