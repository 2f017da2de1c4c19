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

FLAVOR = {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}


class TestPlacementAuditHeal(test.NoDBTestCase):
    """Tests for nova-manage placement audit --heal: misplaced allocations
    moved to where their server runs, with the consumer generations read.
    """

    def setUp(self):
        super(TestPlacementAuditHeal, self).setUp()
        self.cli = manage.PlacementCommands()
        self.ctxt = context.RequestContext()
        self.cell = objects.CellMapping(uuid=uuidsentinel.cell1,
                                        name='cell1')
        self.instance = objects.Instance(
            uuid=uuidsentinel.instance, host='host2', node='node2',
            project_id='p', user_id='u', vm_state='active',
            task_state=None, image_ref=uuidsentinel.image)
        self.placement = mock.Mock(spec=report.SchedulerReportClient)
        # An image-backed server: its root disk counts in DISK_GB.
        self._patch = mock.patch(
            'nova.compute.utils.is_volume_backed_instance',
            return_value=False)
        self._patch.start()
        self.addCleanup(self._patch.stop)
        self.placement.get_providers_in_tree.side_effect = (
            lambda ctxt, uuid: [{'uuid': uuid}])

    def _held(self, allocations, generation=1):
        return {'allocations': {rp: {'resources': res, 'generation': 7}
                                for rp, res in allocations.items()},
                'consumer_generation': generation,
                'project_id': 'p', 'user_id': 'u'}

    @mock.patch.object(manage.PlacementCommands, '_audit_as_nova_does',
                       return_value=3)
    @mock.patch.object(manage.PlacementCommands,
                       '_heal_misplaced_allocations')
    def test_audit_heals_only_when_asked(self, heal_pass, nova_audit):
        self.assertEqual(3, self.cli.audit(verbose=True, delete=True))
        nova_audit.assert_called_once_with(verbose=True, provider_uuid=None,
                                           delete=True)
        heal_pass.assert_not_called()

    @mock.patch.object(manage.PlacementCommands, '_audit_as_nova_does')
    @mock.patch.object(manage.PlacementCommands,
                       '_heal_misplaced_allocations')
    def test_audit_return_codes_with_heal(self, heal_pass, nova_audit):
        for before, healed, faults, result in ((0, 0, 0, 0), (3, 0, 0, 3),
                                               (3, 2, 0, 4), (0, 1, 0, 4),
                                               (4, 0, 1, 1)):
            nova_audit.return_value = before
            heal_pass.return_value = (healed, faults)
            self.assertEqual(result, self.cli.audit(heal=True))
        # Invalid input or a failure of the audit: no heal.
        heal_pass.reset_mock()
        for before in (1, 127):
            nova_audit.return_value = before
            self.assertEqual(before, self.cli.audit(heal=True))
        heal_pass.assert_not_called()

    @mock.patch('nova.scheduler.client.report.report_client_singleton')
    @mock.patch.object(manage.PlacementCommands, '_get_resource_providers')
    @mock.patch.object(manage.PlacementCommands,
                       '_get_instances_and_current_migrations')
    @mock.patch.object(manage.PlacementCommands, '_orphaned_consumer')
    @mock.patch.object(manage.PlacementCommands, '_heal_misplaced')
    def test_heal_pass(self, heal_one, verdict, accounted, providers,
                       client):
        providers.return_value = [
            {'uuid': uuidsentinel.cn, 'root_provider_uuid': uuidsentinel.cn},
            {'uuid': uuidsentinel.shared,
             'root_provider_uuid': uuidsentinel.shared}]
        # The sharing provider is no compute node: not looked at.
        accounted.side_effect = lambda ctxt, cn: (
            ([uuidsentinel.here], []) if cn == uuidsentinel.cn else False)
        res = {'resources': FLAVOR}
        client.return_value.get_allocations_for_resource_provider.\
            return_value = report.ProviderAllocInfo({
                uuidsentinel.here: res, uuidsentinel.misplaced: res,
                uuidsentinel.orphan: res})
        verdict.side_effect = lambda ctxt, consumer, cn: (
            ('instance', 'misplaced', (self.instance, None, self.cell))
            if consumer == uuidsentinel.misplaced else
            ('instance', None, None))
        heal_one.return_value = (True, 'moved')
        output = []
        self.assertEqual((1, 0), self.cli._heal_misplaced_allocations(
            output.append))
        heal_one.assert_called_once_with(
            mock.ANY, client.return_value, uuidsentinel.cn,
            uuidsentinel.misplaced)
        client.return_value.get_allocations_for_resource_provider.\
            assert_called_once_with(mock.ANY, uuidsentinel.cn)
        self.assertIn('Healed allocations', output[0])

    def _heal(self, verdicts, held, server=None):
        """_heal_misplaced of uuidsentinel.consumer on the node
        uuidsentinel.cn, its verdicts given in turn.
        """
        bodies = {uuidsentinel.consumer: held,
                  uuidsentinel.instance: server or held}
        self.placement.get_allocs_for_consumer.side_effect = (
            lambda ctxt, uuid: bodies[uuid])
        with mock.patch.object(self.cli, '_orphaned_consumer',
                               side_effect=verdicts):
            return self.cli._heal_misplaced(
                self.ctxt, self.placement, uuidsentinel.cn,
                uuidsentinel.consumer)

    def test_decided_again_after_the_generations_are_read(self):
        misplaced = ('instance', 'misplaced',
                     (self.instance, None, self.cell))
        # A task state set meanwhile: left alone, nothing written.
        done = self._heal([misplaced, ('instance', 'task state resize_prep',
                                       None)],
                          self._held({uuidsentinel.cn: FLAVOR}))
        self.assertEqual((False, 'task state resize_prep'), done)
        self.placement.put_allocations.assert_not_called()
        self.placement.post.assert_not_called()

    @mock.patch.object(manage.PlacementCommands, '_heal_misplaced_server',
                       side_effect=exception.AllocationUpdateFailed(
                           consumer_uuid='x', error='conflict'))
    def test_a_refused_write_is_read_again_then_left(self, heal_server):
        misplaced = ('instance', 'misplaced',
                     (self.instance, None, self.cell))
        done = self._heal([misplaced] * 6,
                          self._held({uuidsentinel.cn: FLAVOR}))
        self.assertFalse(done[0])
        self.assertIn('run the audit again', done[1])
        self.assertEqual(3, heal_server.call_count)

    def test_nothing_left_on_the_node(self):
        misplaced = ('instance', 'misplaced',
                     (self.instance, None, self.cell))
        done = self._heal([misplaced] * 2,
                          self._held({uuidsentinel.other: FLAVOR}))
        self.assertFalse(done[0])
        self.assertIn('nothing on this node', done[1])

    @mock.patch('nova.objects.ComputeNode.get_by_host_and_nodename')
    def test_misplaced_server_moved_to_its_node(self, get_node):
        get_node.return_value = objects.ComputeNode(uuid=uuidsentinel.cn2)
        self.instance.flavor = objects.Flavor(
            vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0,
            extra_specs={})
        misplaced = ('instance', 'misplaced',
                     (self.instance, None, self.cell))
        self.placement.put_allocations.return_value = True
        held = self._held({uuidsentinel.cn: FLAVOR,
                           uuidsentinel.sharing: {'DISK_GB': 1}}, 5)
        done = self._heal([misplaced] * 2, held)
        self.assertTrue(done[0])
        self.placement.put_allocations.assert_called_once_with(
            self.ctxt, uuidsentinel.instance, {
                'allocations': {
                    uuidsentinel.sharing: {'resources': {'DISK_GB': 1}},
                    uuidsentinel.cn2: {'resources': FLAVOR}},
                'consumer_generation': 5, 'project_id': 'p',
                'user_id': 'u'})

    @mock.patch('nova.objects.ComputeNode.get_by_host_and_nodename')
    def test_misplaced_server_holding_its_node_too(self, get_node):
        get_node.return_value = objects.ComputeNode(uuid=uuidsentinel.cn2)
        misplaced = ('instance', 'misplaced',
                     (self.instance, None, self.cell))
        self.placement.put_allocations.return_value = True
        held = self._held({uuidsentinel.cn: FLAVOR,
                           uuidsentinel.cn2: FLAVOR}, 5)
        self.assertTrue(self._heal([misplaced] * 2, held)[0])
        self.assertEqual(
            {uuidsentinel.cn2: {'resources': FLAVOR}},
            self.placement.put_allocations.call_args[0][2]['allocations'])

    @mock.patch('nova.objects.ComputeNode.get_by_host_and_nodename')
    def test_a_flavor_of_nested_resources_is_left(self, get_node):
        get_node.return_value = objects.ComputeNode(uuid=uuidsentinel.cn2)
        self.instance.flavor = objects.Flavor(
            vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0,
            extra_specs={'resources:VGPU': '1'})
        misplaced = ('instance', 'misplaced',
                     (self.instance, None, self.cell))
        done = self._heal([misplaced] * 2,
                          self._held({uuidsentinel.cn: FLAVOR}))
        self.assertFalse(done[0])
        self.assertIn('heal_allocations', done[1])
        self.placement.put_allocations.assert_not_called()

    @mock.patch('nova.objects.ComputeNode.get_by_host_and_nodename')
    def test_nested_resources_held_here_are_left(self, get_node):
        # A port's bandwidth on a child provider of this node: the flavor
        # put on the server's node would not put it back.
        get_node.return_value = objects.ComputeNode(uuid=uuidsentinel.cn2)
        self.instance.flavor = objects.Flavor(
            vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0,
            extra_specs={})
        self.placement.get_providers_in_tree.side_effect = (
            lambda ctxt, uuid: [{'uuid': uuid}] + (
                [{'uuid': uuidsentinel.bw}] if uuid == uuidsentinel.cn
                else []))
        misplaced = ('instance', 'misplaced',
                     (self.instance, None, self.cell))
        done = self._heal([misplaced] * 2, self._held({
            uuidsentinel.cn: FLAVOR,
            uuidsentinel.bw: {'NET_BW_EGR_KILOBIT_PER_SEC': 1000}}))
        self.assertFalse(done[0])
        self.assertIn('NET_BW_EGR_KILOBIT_PER_SEC', done[1])
        self.placement.put_allocations.assert_not_called()

    @mock.patch('nova.objects.ComputeNode.get_by_host_and_nodename',
                side_effect=exception.ComputeHostNotFound(host='host2'))
    def test_an_unknown_node_is_left(self, get_node):
        misplaced = ('instance', 'misplaced',
                     (self.instance, None, self.cell))
        done = self._heal([misplaced] * 2,
                          self._held({uuidsentinel.cn: FLAVOR}))
        self.assertFalse(done[0])
        self.placement.put_allocations.assert_not_called()

    def _ended_move(self, server):
        migration = objects.Migration(uuid=uuidsentinel.consumer,
                                      status='error')
        misplaced = ('migration', 'misplaced',
                     (self.instance, migration, self.cell))
        held = self._held({uuidsentinel.cn: FLAVOR,
                           uuidsentinel.other: {'VCPU': 1}}, 3)
        return self._heal([misplaced] * 6, held, server)

    def test_ended_move_given_to_its_server(self):
        self.placement.post.return_value = mock.Mock(status_code=204)
        done = self._ended_move(self._held({}, None))
        self.assertTrue(done[0])
        self.placement.post.assert_called_once_with(
            '/allocations', {
                uuidsentinel.consumer: {
                    'allocations': {
                        uuidsentinel.other: {'resources': {'VCPU': 1}}},
                    'consumer_generation': 3, 'project_id': 'p',
                    'user_id': 'u'},
                uuidsentinel.instance: {
                    'allocations': {
                        uuidsentinel.cn: {'resources': FLAVOR}},
                    'consumer_generation': None, 'project_id': 'p',
                    'user_id': 'u'}},
            version='1.28', global_request_id=self.ctxt.global_id)

    def test_ended_move_whose_server_holds_the_node(self):
        self.placement.put_allocations.return_value = True
        done = self._ended_move(self._held({uuidsentinel.cn: FLAVOR}, 9))
        self.assertTrue(done[0])
        self.placement.post.assert_not_called()
        self.placement.put_allocations.assert_called_once_with(
            self.ctxt, uuidsentinel.consumer, {
                'allocations': {
                    uuidsentinel.other: {'resources': {'VCPU': 1}}},
                'consumer_generation': 3, 'project_id': 'p',
                'user_id': 'u'})

    def test_ended_move_replaces_a_same_host_resize_claim(self):
        # The server holds the new flavor's claim on its node, the
        # migration the old flavor its guest uses: the migration's
        # replace it.
        self.instance.flavor = objects.Flavor(
            vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=0, swap=0,
            extra_specs={})
        self.placement.post.return_value = mock.Mock(status_code=204)
        done = self._ended_move(self._held(
            {uuidsentinel.cn: {'VCPU': 2, 'MEMORY_MB': 1024, 'DISK_GB': 1},
             uuidsentinel.far: {'VCPU': 1}}, 9))
        self.assertTrue(done[0])
        self.placement.put_allocations.assert_not_called()
        body = self.placement.post.call_args[0][1]
        self.assertEqual(
            {uuidsentinel.cn: {'resources': FLAVOR},
             uuidsentinel.far: {'resources': {'VCPU': 1}}},
            body[uuidsentinel.instance]['allocations'])
        self.assertEqual(9, body[uuidsentinel.instance]['consumer_generation'])

    def test_ended_move_of_another_flavor_only_removed(self):
        # The migration holds what the server's flavor does not ask: it
        # only loses its part.
        self.instance.flavor = objects.Flavor(
            vcpus=4, memory_mb=2048, root_gb=1, ephemeral_gb=0, swap=0,
            extra_specs={})
        self.placement.put_allocations.return_value = True
        done = self._ended_move(self._held(
            {uuidsentinel.cn: {'VCPU': 2, 'MEMORY_MB': 1024, 'DISK_GB': 1}},
            9))
        self.assertTrue(done[0])
        self.placement.post.assert_not_called()
        self.placement.put_allocations.assert_called_once()

    def test_ended_move_conflict_read_again(self):
        self.placement.post.return_value = mock.Mock(
            status_code=409, text='consumer generation conflict')
        done = self._ended_move(self._held({}, None))
        self.assertFalse(done[0])
        self.assertEqual(3, self.placement.post.call_count)

    def test_ended_move_placement_failure(self):
        self.placement.post.return_value = mock.Mock(
            status_code=500, text='boom')
        self.assertEqual((None, 'boom'),
                         self._ended_move(self._held({}, None)))
