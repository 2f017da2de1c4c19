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

from nova.compute import power_state
from nova.compute import vm_states
from nova.conductor.tasks import live_migrate
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler.client import query
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils
from nova import test
from nova.tests.unit import fake_instance


class ClaimAfterDeleteLiveMigrationFindDestinationTestCase(
        test.NoDBTestCase):
    """Tests for LiveMigrationTask._find_destination with a deleted server.

    Bug 1848343: the scheduler's claim for a live migration that lands after
    the server was deleted creates the deleted server's instance consumer
    again, and the source compute goes on to migrate a deleted guest. Once
    the claim is written the conductor now looks the instance up; if it is
    deleted, what the claim wrote and what the migration holds are removed
    and the live migration stops.
    """

    def setUp(self):
        super(ClaimAfterDeleteLiveMigrationFindDestinationTestCase,
              self).setUp()
        self.context = nova_context.get_admin_context()
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, host='source',
            node='source-node', power_state=power_state.RUNNING,
            vm_state=vm_states.ACTIVE)
        self.instance.numa_topology = None
        self.migration = objects.Migration(uuid=uuids.migration)
        self.request_spec = objects.RequestSpec()
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.mock_delete = self.reportclient.delete_allocation_for_instance
        self.compute_rpcapi = mock.Mock()
        self.task = live_migrate.LiveMigrationTask(
            self.context, self.instance, None, False, False, self.migration,
            self.compute_rpcapi, mock.Mock(), query.SchedulerQueryClient(),
            self.reportclient, self.request_spec)
        self.limits1 = objects.SchedulerLimits()
        self.selection1 = objects.Selection(
            service_host='host1', nodename='node1', cell_uuid=uuids.cell,
            limits=self.limits1, compute_node_uuid=uuids.node1)
        self.selection2 = objects.Selection(
            service_host='host2', nodename='node2', cell_uuid=uuids.cell,
            limits=objects.SchedulerLimits(), compute_node_uuid=uuids.node2)
        # The order of the scheduler's claims and of the instance lookup.
        self.calls = []
        self.selections = [self.selection1, self.selection2]

        def select_destinations(*args, **kwargs):
            self.calls.append('claim')
            return [[self.selections.pop(0)]]

        for name, kwargs in (
                ('_get_request_spec_for_select_destinations',
                 {'return_value': self.request_spec}),
                ('_check_compatible_with_source_hypervisor', {}),
                ('_call_livem_checks_on_host', {})):
            patcher = mock.patch.object(live_migrate.LiveMigrationTask,
                                        name, **kwargs)
            setattr(self, 'mock' + name, patcher.start())
            self.addCleanup(patcher.stop)
        patcher = mock.patch.object(
            query.SchedulerQueryClient, 'select_destinations',
            side_effect=select_destinations)
        self.mock_select = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(scheduler_utils, 'fill_provider_mapping')
        patcher.start()
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

        self.assertEqual(('host1', 'node1', self.limits1),
                         self.task._find_destination())

        self.mock_select.assert_called_once_with(
            self.context, self.request_spec, [uuids.instance],
            return_objects=True, return_alternates=False)
        mock_deleted.assert_called_once_with(self.context, uuids.instance)
        self.assertEqual(['claim', 'lookup'], self.calls)
        self.mock_delete.assert_not_called()

    def test_deleted_instance_removes_the_claim(self):
        mock_deleted = self._mock_is_instance_deleted(True)

        ex = self.assertRaises(exception.InstanceNotFound,
                               self.task._find_destination)

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

    def test_deleted_instance_after_a_retry(self):
        """The instance is looked up once, after the last claim."""
        mock_deleted = self._mock_is_instance_deleted(True)
        self.mock_call_livem_checks_on_host.side_effect = [
            exception.MigrationPreCheckError(reason='no'), None]

        self.assertRaises(exception.InstanceNotFound,
                          self.task._find_destination)

        self.assertEqual(['claim', 'claim', 'lookup'], self.calls)
        mock_deleted.assert_called_once_with(self.context, uuids.instance)
        self.reportclient.remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.context, uuids.instance,
                                    uuids.node1)
        self.assertEqual(2, self.mock_delete.call_count)

    def test_no_valid_host_does_not_look_up(self):
        """Nothing was claimed: the scheduler's error goes on unchanged."""
        mock_deleted = self._mock_is_instance_deleted(True)
        self.mock_select.side_effect = exception.NoValidHost(reason='')

        self.assertRaises(exception.NoValidHost, self.task._find_destination)

        mock_deleted.assert_not_called()
        self.mock_delete.assert_not_called()

    @mock.patch('nova.conductor.tasks.migrate.'
                'revert_allocation_for_migration')
    @mock.patch('nova.conductor.tasks.migrate.'
                'replace_allocation_with_migration')
    @mock.patch.object(objects.Migration, 'save')
    def test_execute_stops_the_live_migration(self, mock_save,
                                              mock_replace, mock_revert):
        """The source compute is not asked to migrate a deleted guest."""
        self._mock_is_instance_deleted(True)
        mock_replace.return_value = (mock.sentinel.source_cn,
                                     mock.sentinel.held)

        with mock.patch.object(self.task, '_check_host_is_up'):
            self.assertRaises(exception.InstanceNotFound, self.task.execute)

        self.compute_rpcapi.live_migration.assert_not_called()
        mock_save.assert_not_called()
        self.assertFalse(self.migration.obj_attr_is_set('dest_compute'))
        mock_revert.assert_called_once_with(
            self.context, mock.sentinel.source_cn, self.instance,
            self.migration)
