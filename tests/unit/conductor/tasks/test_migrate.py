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
@mock.patch('nova.compute.utils.is_instance_deleted', create=True)
class RevertAllocationForMigrationTestCase(testtools.TestCase):

    def setUp(self):
        super(RevertAllocationForMigrationTestCase, self).setUp()
        self.context = mock.sentinel.context
        self.source_cn = mock.sentinel.source_cn
        self.instance = mock.Mock(uuid='instance-uuid')
        self.migration = mock.Mock(uuid='migration-uuid')

    def _revert(self):
        migrate.revert_allocation_for_migration(
            self.context, self.source_cn, self.instance, self.migration)

    def test_live_server_reverts_as_nova_does(self, deleted, original,
                                              client):
        deleted.return_value = False
        self._revert()
        original.assert_called_once_with(
            self.context, self.source_cn, self.instance, self.migration)
        self.assertEqual(2, deleted.call_count)
        client.return_value.delete_allocation_for_instance.assert_not_called()

    def test_deleted_before_the_revert(self, deleted, original, client):
        deleted.return_value = True
        self._revert()
        original.assert_not_called()
        delete = client.return_value.delete_allocation_for_instance
        delete.assert_called_once_with(
            self.context, 'migration-uuid', consumer_type='migration',
            force=True)

    def test_deleted_during_the_revert(self, deleted, original, client):
        deleted.side_effect = [False, True]
        self._revert()
        original.assert_called_once()
        delete = client.return_value.delete_allocation_for_instance
        delete.assert_called_once_with(
            self.context, 'instance-uuid', consumer_type='instance',
            force=True)

    def test_delete_failure_is_logged_not_raised(self, deleted, original,
                                                 client):
        deleted.return_value = True
        client.return_value.delete_allocation_for_instance.side_effect = (
            exception.AllocationDeleteFailed(consumer_uuid='m', error='x'))
        with mock.patch.object(migrate, 'LOG') as log:
            self._revert()
        log.error.assert_called_once()
