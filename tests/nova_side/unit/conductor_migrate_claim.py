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

from nova.conductor.tasks import migrate
from nova import context
from nova import exception
from nova import objects
from nova.scheduler.client import query
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils
from nova import test
from nova.tests.unit import fake_flavor
from nova.tests.unit import fake_instance


class ClaimAfterDeleteMigrationTaskScheduleTestCase(test.NoDBTestCase):
    """Tests for MigrationTask._schedule with a server deleted meanwhile.

    Bug 1848343: the scheduler's claim for a cold migration or resize that
    lands after the server was deleted creates the deleted server's
    instance consumer again. Once the claim is written the conductor now
    looks the instance up; if it is deleted, what the claim wrote and what
    the migration holds are removed and the move stops.
    """

    def setUp(self):
        super(ClaimAfterDeleteMigrationTaskScheduleTestCase, self).setUp()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance)
        self.flavor = fake_flavor.fake_flavor_obj(self.context)
        self.request_spec = objects.RequestSpec(image=objects.ImageMeta())
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.mock_delete = self.reportclient.delete_allocation_for_instance
        self.compute_rpcapi = mock.Mock()
        self.network_api = mock.Mock()
        self.task = migrate.MigrationTask(
            self.context, self.instance, self.flavor, self.request_spec,
            True, self.compute_rpcapi, query.SchedulerQueryClient(),
            self.reportclient, host_list=None, network_api=self.network_api)
        # What _preallocate_migration leaves behind.
        self.migration = objects.Migration(uuid=uuids.migration)
        self.task._migration = self.migration
        self.selection1 = objects.Selection(
            service_host='host1', nodename='node1', cell_uuid=uuids.cell1,
            compute_node_uuid=uuids.node1)
        self.selection2 = objects.Selection(
            service_host='host2', nodename='node2', cell_uuid=uuids.cell1,
            compute_node_uuid=uuids.node2)
        # The order of the scheduler's claim and of the instance lookup.
        self.calls = []

        def select_destinations(*args, **kwargs):
            self.calls.append('claim')
            return [[self.selection1, self.selection2]]

        patcher = mock.patch.object(
            query.SchedulerQueryClient, 'select_destinations',
            side_effect=select_destinations)
        self.mock_select = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(scheduler_utils, 'fill_provider_mapping')
        self.mock_fill = patcher.start()
        self.addCleanup(patcher.stop)

    def _mock_is_instance_deleted(self, deleted):
        def is_instance_deleted(*args, **kwargs):
            self.calls.append('lookup')
            return deleted

        patcher = mock.patch('nova.compute.utils.is_instance_deleted',
                             side_effect=is_instance_deleted)
        mock_deleted = patcher.start()
        self.addCleanup(patcher.stop)
        return mock_deleted

    def test_live_instance_keeps_the_claim(self):
        mock_deleted = self._mock_is_instance_deleted(False)

        selection = self.task._schedule()

        self.assertIs(self.selection1, selection)
        self.assertEqual([self.selection2], self.task.host_list)
        self.mock_select.assert_called_once_with(
            self.context, self.request_spec, [uuids.instance],
            return_objects=True, return_alternates=True)
        self.mock_fill.assert_called_once_with(
            self.request_spec, self.selection1)
        mock_deleted.assert_called_once_with(self.context, uuids.instance)
        self.assertEqual(['claim', 'lookup'], self.calls)
        self.mock_delete.assert_not_called()

    def test_deleted_instance_removes_the_claim(self):
        mock_deleted = self._mock_is_instance_deleted(True)

        ex = self.assertRaises(exception.InstanceNotFound,
                               self.task._schedule)

        self.assertEqual(uuids.instance, ex.kwargs['instance_id'])
        mock_deleted.assert_called_once_with(self.context, uuids.instance)
        # The lookup comes after the claim was written, never before.
        self.assertEqual(['claim', 'lookup'], self.calls)
        self.assertEqual(
            [mock.call(self.context, uuids.instance,
                       consumer_type='instance', force=True),
             mock.call(self.context, uuids.migration,
                       consumer_type='migration', force=True)],
            self.mock_delete.call_args_list)

    def test_deleted_instance_without_migration(self):
        """No migration record yet: only the instance consumer goes."""
        self._mock_is_instance_deleted(True)
        self.task._migration = None

        self.assertRaises(exception.InstanceNotFound, self.task._schedule)

        self.mock_delete.assert_called_once_with(
            self.context, uuids.instance, consumer_type='instance',
            force=True)

    def test_no_valid_host_does_not_look_up(self):
        """Nothing was claimed: the scheduler's error goes on unchanged."""
        mock_deleted = self._mock_is_instance_deleted(True)
        self.mock_select.side_effect = exception.NoValidHost(reason='')

        self.assertRaises(exception.NoValidHost, self.task._schedule)

        mock_deleted.assert_not_called()
        self.mock_delete.assert_not_called()

    @mock.patch('nova.compute.utils.heal_reqspec_is_bfv')
    @mock.patch.object(scheduler_utils, 'populate_retry')
    @mock.patch.object(scheduler_utils, 'setup_instance_group')
    @mock.patch.object(objects.Migration, 'save')
    def test_execute_stops_the_move(self, mock_save, mock_setup,
                                    mock_retry, mock_heal):
        """A deleted server's move stops before the destination is called.

        The rollback marks the migration as failed.
        """
        self._mock_is_instance_deleted(True)
        self.task._migration = None
        self.task.request_spec = mock.MagicMock()
        self.network_api.get_requested_resource_for_instance.return_value = (
            [], objects.RequestLevelParams())

        def preallocate():
            self.task._migration = self.migration
            return self.migration

        with test.nested(
            mock.patch.object(self.task, '_set_requested_destination_cell'),
            mock.patch.object(self.task, '_preallocate_migration',
                              side_effect=preallocate),
            mock.patch.object(self.task, '_is_selected_host_in_source_cell',
                              return_value=False),
            mock.patch('nova.conductor.tasks.cross_cell_migrate.'
                       'CrossCellMigrationTask.execute'),
        ) as (mock_cell, mock_prealloc, mock_same_cell, mock_cross_cell):
            self.assertRaises(exception.InstanceNotFound, self.task.execute)

        mock_prealloc.assert_called_once_with()
        mock_same_cell.assert_not_called()
        mock_cross_cell.assert_not_called()
        self.compute_rpcapi.prep_resize.assert_not_called()
        self.assertEqual('error', self.migration.status)
        mock_save.assert_called_once_with()
        self.assertEqual(2, self.mock_delete.call_count)
