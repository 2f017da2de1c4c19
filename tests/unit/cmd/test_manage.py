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

"""The placement audit's heal (nova_fixes.nova.cmd.manage), its own
functions called with a mock PlacementCommands.
"""

from unittest import mock

import fixtures
from nova import exception
import testtools

from nova_fixes.nova.cmd import manage

FLAVOR = {'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}


def held(allocations, generation=1):
    return {'allocations': {rp: {'resources': res, 'generation': 3}
                            for rp, res in allocations.items()},
            'consumer_generation': generation,
            'project_id': 'p', 'user_id': 'u'}


class AuditTestCase(testtools.TestCase):
    """The audit runs nova's, then the heal's pass when asked."""

    def _audit(self, before, healed=0, faults=0, **kwargs):
        cli = mock.Mock()
        cli._audit_as_nova_does.return_value = before
        cli._heal_misplaced_allocations.return_value = (healed, faults)
        with mock.patch('builtins.print'):
            return cli, manage.audit(cli, **kwargs)

    def test_without_heal_nothing_more(self):
        cli, result = self._audit(3, delete=True)
        self.assertEqual(3, result)
        cli._audit_as_nova_does.assert_called_once_with(
            verbose=False, provider_uuid=None, delete=True)
        cli._heal_misplaced_allocations.assert_not_called()

    def test_return_codes(self):
        for before, healed, faults, expected in (
                (0, 0, 0, 0), (3, 0, 0, 3), (0, 2, 0, 4), (3, 1, 0, 4),
                (4, 0, 0, 4), (0, 1, 1, 1)):
            self.assertEqual(expected, self._audit(
                before, healed, faults, heal=True)[1])

    def test_no_heal_after_invalid_input_or_failure(self):
        for before in (1, 127):
            cli, result = self._audit(before, heal=True)
            self.assertEqual(before, result)
            cli._heal_misplaced_allocations.assert_not_called()


class HealMisplacedTestCase(testtools.TestCase):
    """_heal_misplaced: the verdict made again after the generations are
    read; a refused write read again, three times at most.
    """

    def setUp(self):
        super(HealMisplacedTestCase, self).setUp()
        self.cli = mock.Mock()
        self.placement = mock.Mock()
        self.placement.get_providers_in_tree.return_value = [{'uuid': 'cn'}]
        self.instance = mock.Mock(uuid='inst')
        self.misplaced = ('instance', 'misplaced',
                          (self.instance, None, 'cell'))

    def _heal(self, verdicts, allocations):
        self.cli._orphaned_consumer.side_effect = verdicts
        self.placement.get_allocs_for_consumer.return_value = allocations
        return manage._heal_misplaced(self.cli, 'ctxt', self.placement,
                                      'cn', 'inst')

    def test_verdict_made_again_after_the_read(self):
        done = self._heal([self.misplaced, ('instance', 'task state x',
                                            None)], held({'cn': FLAVOR}))
        self.assertEqual((False, 'task state x'), done)
        self.cli._heal_misplaced_server.assert_not_called()
        # The generations were read between the two verdicts.
        self.placement.get_allocs_for_consumer.assert_called_once_with(
            'ctxt', 'inst')

    def test_healed(self):
        self.cli._heal_misplaced_server.return_value = (True, 'moved')
        self.assertEqual((True, 'moved'), self._heal(
            [self.misplaced] * 2, held({'cn': FLAVOR})))
        self.cli._heal_misplaced_server.assert_called_once_with(
            'ctxt', self.placement, self.instance, 'cell',
            held({'cn': FLAVOR}), {'cn'})

    def test_conflicts_read_again_then_left(self):
        self.cli._heal_misplaced_server.side_effect = (
            exception.AllocationUpdateFailed(consumer_uuid='inst',
                                             error='conflict'))
        done = self._heal([self.misplaced] * 6, held({'cn': FLAVOR}))
        self.assertFalse(done[0])
        self.assertEqual(manage.HEAL_ATTEMPTS,
                         self.cli._heal_misplaced_server.call_count)

    def test_nothing_on_this_node_any_more(self):
        done = self._heal([self.misplaced] * 2, held({'other': FLAVOR}))
        self.assertFalse(done[0])
        self.cli._heal_misplaced_server.assert_not_called()


class HealMisplacedServerTestCase(testtools.TestCase):
    """_heal_misplaced_server: a server holding nothing on its node gets
    its flavor there, unless something would be lost.
    """

    def _heal(self, allocations, tree=('cn', 'bw'), flavor=FLAVOR):
        placement = mock.Mock()
        placement.get_providers_in_tree.return_value = [{'uuid': 'cn2'}]
        placement.put_allocations.return_value = True
        instance = mock.Mock(uuid='inst', host='host2', node='node2')
        self.useFixture(fixtures.MockPatch(
            'nova.objects.ComputeNode.get_by_host_and_nodename',
            return_value=mock.Mock(uuid='cn2')))
        self.useFixture(fixtures.MockPatch(
            'nova.scheduler.utils.resources_from_flavor',
            return_value=dict(flavor)))
        self.useFixture(fixtures.MockPatch(
            'nova.context.target_cell'))
        done = manage._heal_misplaced_server(
            None, 'ctxt', placement, instance, 'cell', held(allocations),
            set(tree))
        return done, placement

    def test_flavor_put_on_its_node(self):
        done, placement = self._heal({'cn': FLAVOR})
        self.assertTrue(done[0])
        self.assertEqual(
            {'cn2': {'resources': FLAVOR}},
            placement.put_allocations.call_args[0][2]['allocations'])

    def test_nested_resources_held_here_are_left(self):
        done, placement = self._heal({
            'cn': FLAVOR, 'bw': {'NET_BW_IGR_KILOBIT_PER_SEC': 10}})
        self.assertFalse(done[0])
        self.assertIn('NET_BW_IGR_KILOBIT_PER_SEC', done[1])
        placement.put_allocations.assert_not_called()

    def test_nested_resources_kept_when_it_holds_its_node(self):
        placement_tree = {'cn2': FLAVOR, 'bw': {'VGPU': 1}}
        done, placement = self._heal(dict(placement_tree, cn=FLAVOR),
                                     tree=('cn',))
        self.assertTrue(done[0])
        self.assertEqual(
            {rp: {'resources': res} for rp, res in placement_tree.items()},
            placement.put_allocations.call_args[0][2]['allocations'])


class HealEndedMoveTestCase(testtools.TestCase):

    def _heal(self, server, status=204, tree=None):
        placement = mock.Mock()
        placement.post.return_value = mock.Mock(
            status_code=status, text='consumer generation conflict')
        placement.put_allocations.return_value = True
        instance = mock.Mock(uuid='inst', project_id='p', user_id='u')
        migration = mock.Mock(uuid='mig')
        ctxt = mock.Mock(global_id='req')
        commands = mock.Mock()
        commands._replaces_a_claim.side_effect = (
            lambda *args: manage._replaces_a_claim(commands, *args))
        with mock.patch('nova.scheduler.utils.resources_from_flavor',
                        return_value=dict(FLAVOR, DISK_GB=1)):
            done = manage._heal_ended_move(
                commands, ctxt, placement, instance, migration,
                held({'cn': FLAVOR, 'other': {'VCPU': 1}}, 4), server,
                tree or {'cn'})
        return done, placement

    def test_given_to_a_server_holding_nothing_here(self):
        done, placement = self._heal(held({'far': {'VCPU': 1}}, 7))
        self.assertTrue(done[0])
        body = placement.post.call_args[0][1]
        self.assertEqual({'other': {'resources': {'VCPU': 1}}},
                         body['mig']['allocations'])
        self.assertEqual(4, body['mig']['consumer_generation'])
        self.assertEqual({'far': {'resources': {'VCPU': 1}},
                          'cn': {'resources': FLAVOR}},
                         body['inst']['allocations'])
        self.assertEqual(7, body['inst']['consumer_generation'])

    def test_removed_when_the_server_holds_the_node(self):
        done, placement = self._heal(held({'cn': FLAVOR}, 7))
        self.assertTrue(done[0])
        placement.post.assert_not_called()
        placement.put_allocations.assert_called_once_with(
            mock.ANY, 'mig', {
                'allocations': {'other': {'resources': {'VCPU': 1}}},
                'consumer_generation': 4, 'project_id': 'p',
                'user_id': 'u'})

    def test_same_host_resize_claim_replaced(self):
        # The server holds the new flavor's claim on the node, the
        # migration the flavor its guest uses.
        done, placement = self._heal(held({'cn': {'VCPU': 2},
                                           'far': {'VCPU': 1}}, 7))
        self.assertTrue(done[0])
        placement.put_allocations.assert_not_called()
        body = placement.post.call_args[0][1]
        self.assertEqual({'far': {'resources': {'VCPU': 1}},
                          'cn': {'resources': FLAVOR}},
                         body['inst']['allocations'])

    def test_server_holding_nested_resources_not_replaced(self):
        done, placement = self._heal(held({'cn': {'VCPU': 2},
                                           'child': {'VGPU': 1}}, 7),
                                     tree={'cn', 'child'})
        self.assertTrue(done[0])
        placement.post.assert_not_called()

    def test_conflict_raises_to_be_read_again(self):
        self.assertRaises(exception.AllocationUpdateFailed, self._heal,
                          held({}, None), 409)
