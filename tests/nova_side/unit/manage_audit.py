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

from oslo_utils.fixture import uuidsentinel

from nova.cmd import manage
from nova import context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test


class TestPlacementAuditLiveClaims(test.NoDBTestCase):
    """Tests for PlacementCommands._orphaned_consumer: what the placement
    audit leaves alone among the consumers a node does not account for.
    """

    def setUp(self):
        super(TestPlacementAuditLiveClaims, self).setUp()
        self.cli = manage.PlacementCommands()
        self.cli.cn_uuid_mapping = {
            uuidsentinel.cn: (uuidsentinel.cell1, 'host1', 'node1')}
        self.ctxt = context.RequestContext()
        self.cell = objects.CellMapping(uuid=uuidsentinel.cell1,
                                        name='cell1')
        self.instance = objects.Instance(
            uuid=uuidsentinel.instance, host='host2', node='node2',
            vm_state='active', task_state=None)
        self.get_br = self._patch(
            'nova.objects.BuildRequest.get_by_instance_uuid',
            side_effect=exception.BuildRequestNotFound(uuid='x'))
        self.get_im = self._patch(
            'nova.objects.InstanceMapping.get_by_instance_uuid',
            return_value=objects.InstanceMapping(
                instance_uuid=uuidsentinel.instance,
                cell_mapping=self.cell))
        self.in_cell = self._patch(
            'nova.context.scatter_gather_single_cell',
            side_effect=lambda ctxt, cell, fn, uuid, **kw: {
                cell.uuid: self.instance})
        self.in_cells = self._patch(
            'nova.context.scatter_gather_skip_cell0',
            return_value={uuidsentinel.cell1: exception.MigrationNotFound(
                migration_id=uuidsentinel.consumer)})

    def _patch(self, target, **kwargs):
        patcher = mock.patch(target, **kwargs)
        self.addCleanup(patcher.stop)
        return patcher.start()

    def _verdict(self, consumer=uuidsentinel.instance):
        """(consumer type, reason); the evidence of a misplaced consumer
        is kept in self.misplaced.
        """
        kind, reason, self.misplaced = self.cli._orphaned_consumer(
            self.ctxt, consumer, uuidsentinel.cn)
        if reason is None:
            self.assertIsNone(self.misplaced)
        return kind, reason

    def _migration(self, status):
        self.get_im.side_effect = [
            exception.InstanceMappingNotFound(uuid=uuidsentinel.migration),
            objects.InstanceMapping(instance_uuid=uuidsentinel.instance,
                                    cell_mapping=self.cell)]
        self.in_cells.return_value = {uuidsentinel.cell1: objects.Migration(
            uuid=uuidsentinel.migration, status=status,
            instance_uuid=uuidsentinel.instance)}

    def test_build_request(self):
        self.get_br.side_effect = None
        kind, reason = self._verdict()
        self.assertEqual('instance', kind)
        self.assertIn('build request', reason)
        self.get_im.assert_not_called()

    def test_build_deleted_before_scheduling(self):
        self.get_im.return_value.cell_mapping = None
        self.assertEqual(('instance', None), self._verdict())

    def test_deleted_instance(self):
        self.in_cell.side_effect = lambda ctxt, cell, fn, uuid, **kw: {
            cell.uuid: exception.InstanceNotFound(instance_id=uuid)}
        self.assertEqual(('instance', None), self._verdict())

    def test_instance_with_task_state(self):
        self.instance.task_state = 'resize_prep'
        self.assertIn('resize_prep', self._verdict()[1])
        self.assertIsNone(self.misplaced)

    def test_instance_building_without_host(self):
        self.instance.host = self.instance.node = None
        self.instance.vm_state = 'building'
        self.assertIn('building', self._verdict()[1])

    def test_instance_without_host_not_building(self):
        self.instance.host = self.instance.node = None
        self.instance.vm_state = 'error'
        self.assertEqual(('instance', None), self._verdict())

    def test_live_server_elsewhere_is_misplaced(self):
        kind, reason = self._verdict()
        self.assertIn('misplaced, not orphaned', reason)
        self.assertIn('host2', reason)
        self.assertEqual((self.instance, None, self.cell), self.misplaced)

    def test_cell_cannot_be_read(self):
        self.in_cell.side_effect = lambda ctxt, cell, fn, uuid, **kw: {
            cell.uuid: context.did_not_respond_sentinel}
        kind, reason = self._verdict()
        self.assertEqual('cell cell1 cannot be read', reason)

    def test_unknown_consumer(self):
        self.get_im.side_effect = exception.InstanceMappingNotFound(
            uuid=uuidsentinel.consumer)
        self.assertEqual(('instance', None),
                         self._verdict(uuidsentinel.consumer))

    def test_unknown_consumer_with_a_cell_that_cannot_be_read(self):
        self.get_im.side_effect = exception.InstanceMappingNotFound(
            uuid=uuidsentinel.consumer)
        self.in_cells.return_value[uuidsentinel.cell2] = (
            context.did_not_respond_sentinel)
        kind, reason = self._verdict(uuidsentinel.consumer)
        self.assertIn(uuidsentinel.cell2, reason)

    def test_migration_in_progress(self):
        self._migration('pre-migrating')
        kind, reason = self._verdict(uuidsentinel.migration)
        self.assertEqual('migration', kind)
        self.assertIn('pre-migrating', reason)

    def test_ended_move_whose_server_runs_on_the_node(self):
        self._migration('error')
        self.instance.host, self.instance.node = 'host1', 'node1'
        kind, reason = self._verdict(uuidsentinel.migration)
        self.assertEqual('migration', kind)
        self.assertIn('misplaced, not orphaned', reason)
        instance, migration, cell = self.misplaced
        self.assertIs(self.instance, instance)
        self.assertEqual(uuidsentinel.migration, migration.uuid)
        self.assertEqual(self.cell, cell)

    def test_ended_move_whose_server_runs_elsewhere(self):
        self._migration('confirmed')
        self.assertEqual(('migration', None),
                         self._verdict(uuidsentinel.migration))

    def test_ended_move_of_a_deleted_server(self):
        self._migration('error')
        self.in_cell.side_effect = lambda ctxt, cell, fn, uuid, **kw: {
            cell.uuid: exception.InstanceNotFound(instance_id=uuid)}
        self.assertEqual(('migration', None),
                         self._verdict(uuidsentinel.migration))

    @mock.patch.object(manage.PlacementCommands,
                       '_delete_allocations_from_consumer')
    @mock.patch('nova.scheduler.client.report.SchedulerReportClient.'
                'get_allocations_for_resource_provider')
    @mock.patch.object(manage.PlacementCommands,
                       '_get_instances_and_current_migrations',
                       return_value=([], []))
    def test_left_alone_is_neither_counted_nor_deleted(
            self, get_insts_and_migs, get_allocs_for_rp, delete_allocs):
        provider = {'uuid': uuidsentinel.cn,
                    'root_provider_uuid': uuidsentinel.cn}
        resources = {'resources': {'VCPU': 1, 'MEMORY_MB': 512}}
        get_allocs_for_rp.return_value = report.ProviderAllocInfo({
            uuidsentinel.instance: resources,
            uuidsentinel.orphan: resources})
        self.in_cell.side_effect = lambda ctxt, cell, fn, uuid, **kw: {
            cell.uuid: (self.instance if uuid == uuidsentinel.instance
                        else exception.InstanceNotFound(instance_id=uuid))}
        output = []
        ret = self.cli._check_orphaned_allocations_for_provider(
            self.ctxt, report.SchedulerReportClient(), output.append,
            provider, True)
        self.assertEqual((1, 0), ret)
        delete_allocs.assert_called_once_with(
            self.ctxt, mock.ANY, provider, uuidsentinel.orphan, 'instance')
        self.assertIn('left alone', output[0])
