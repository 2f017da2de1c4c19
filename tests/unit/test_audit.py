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

"""nova_fixes.audit's verdicts on fakes, its outputs and exit codes."""

import io
import json
import types
from unittest import mock

import fixtures
import testtools

from nova_fixes import audit
from nova_fixes.cmd import main

RP1, RP2 = 'rp-host1', 'rp-host2'
ROOTS = {RP1: RP1, RP2: RP2, 'rp-vgpu': RP1}
FLAVOR = {'VCPU': 1, 'MEMORY_MB': 512}


def instance(uuid='inst', host='host1', node='node1', vm_state='active',
             task_state=None, deleted=False):
    return types.SimpleNamespace(
        uuid=uuid, host=host, node=node, vm_state=vm_state,
        task_state=task_state, deleted=deleted)


def migration(uuid='mig', instance_uuid='inst', status='finished',
              source=('host1', 'node1')):
    return types.SimpleNamespace(
        uuid=uuid, instance_uuid=instance_uuid, status=status,
        source_compute=source[0], source_node=source[1])


def facts(instances=(), migrations=(), build_requests=(), mappings=None,
          unreadable=None):
    f = audit.Facts()
    f.nodes = {('host1', 'node1'): RP1, ('host2', 'node2'): RP2}
    f.instances = {i.uuid: i for i in instances}
    f.migrations = {m.uuid: m for m in migrations}
    for m in migrations:
        if m.status not in audit.FINAL_MIGRATION_STATUSES:
            f.moving.setdefault(m.instance_uuid, []).append(m)
    f.build_requests = set(build_requests)
    f.mappings = dict(mappings or {})
    f.unreadable = dict(unreadable or {})
    return f


class VerdictTestCase(testtools.TestCase):

    def decide(self, uuid, held, f):
        return audit.decide(uuid, held, f, ROOTS).verdict

    def test_right_where_the_guest_runs(self):
        f = facts([instance()])
        self.assertEqual(audit.RIGHT, self.decide('inst', {RP1: FLAVOR}, f))
        # a child provider of the node is the node's tree
        self.assertEqual(audit.RIGHT, self.decide(
            'inst', {RP1: FLAVOR, 'rp-vgpu': {'VGPU': 1}}, f))

    def test_misplaced_elsewhere(self):
        f = facts([instance()])
        v = audit.decide('inst', {RP2: FLAVOR}, f, ROOTS)
        self.assertEqual(audit.MISPLACED, v.verdict)
        self.assertEqual(RP1, v.target)
        self.assertEqual(audit.MISPLACED, self.decide(
            'inst', {RP1: FLAVOR, RP2: FLAVOR}, f))

    def test_build_request_is_in_flight_whatever_it_holds(self):
        f = facts(build_requests=['inst'], mappings={'inst': None})
        self.assertEqual(audit.IN_FLIGHT,
                         self.decide('inst', {RP2: FLAVOR}, f))

    def test_no_host_yet_and_task_state_are_in_flight(self):
        f = facts([instance(host=None, node=None, vm_state='building')])
        self.assertEqual(audit.IN_FLIGHT,
                         self.decide('inst', {RP1: FLAVOR}, f))
        f = facts([instance(task_state='spawning')])
        self.assertEqual(audit.IN_FLIGHT,
                         self.decide('inst', {RP2: FLAVOR}, f))

    def test_move_in_progress_is_in_flight(self):
        f = facts([instance()], [migration(status='migrating')])
        self.assertEqual(audit.IN_FLIGHT,
                         self.decide('inst', {RP2: FLAVOR}, f))
        self.assertEqual(audit.IN_FLIGHT,
                         self.decide('mig', {RP1: FLAVOR}, f))

    def test_verify_resize_as_nova_defines_it(self):
        f = facts([instance(host='host2', node='node2', vm_state='resized')],
                  [migration(status='finished')])
        self.assertEqual(audit.RIGHT, self.decide('inst', {RP2: FLAVOR}, f))
        self.assertEqual(audit.RIGHT, self.decide('mig', {RP1: FLAVOR}, f))
        self.assertEqual(audit.MISPLACED,
                         self.decide('inst', {RP1: FLAVOR}, f))

    def test_migration_of_a_move_that_is_over(self):
        f = facts([instance()], [migration(status='error')])
        # holds the node its server runs on: misplaced
        self.assertEqual(audit.MISPLACED,
                         self.decide('mig', {RP1: FLAVOR}, f))
        # holds another one: nothing its server needs
        self.assertEqual(audit.LEAKED, self.decide('mig', {RP2: FLAVOR}, f))

    def test_leaked(self):
        f = facts([instance(deleted=True)], [migration(status='error')])
        self.assertEqual(audit.LEAKED, self.decide('inst', {RP1: FLAVOR}, f))
        self.assertEqual(audit.LEAKED, self.decide('mig', {RP1: FLAVOR}, f))
        self.assertEqual(audit.LEAKED,
                         self.decide('stranger', {RP1: FLAVOR}, facts()))
        f = facts(mappings={'inst': None})
        self.assertEqual(audit.LEAKED, self.decide('inst', {RP1: FLAVOR}, f))

    def test_missing(self):
        f = facts([instance()])
        v = audit.decide('inst', {}, f, ROOTS)
        self.assertEqual((audit.MISSING, RP1), (v.verdict, v.target))

    def test_unreadable_cell_decides_nothing(self):
        f = facts(mappings={'inst': 'cell1'}, unreadable={'cell1': 'down'})
        self.assertEqual(audit.UNKNOWN,
                         self.decide('inst', {RP1: FLAVOR}, f))
        f = facts(unreadable={'cell1': 'down'})
        self.assertEqual(audit.UNKNOWN,
                         self.decide('stranger', {RP1: FLAVOR}, f))


class PlacedTestCase(testtools.TestCase):
    """What heal writes for a misplaced live server (audit._placed)."""

    ROOTS = dict(ROOTS, **{'rp-bw2': RP2, 'shared': audit.SHARED})

    def setUp(self):
        super(PlacedTestCase, self).setUp()
        self.facts = facts([instance()])
        self.useFixture(fixtures.MockPatch(
            'nova_fixes.audit._flavor_resources',
            side_effect=lambda inst: dict(self.flavor)))
        self.flavor = dict(FLAVOR, DISK_GB=1)

    def placed(self, held):
        now = audit.decide('inst', held, self.facts, self.ROOTS)
        self.assertEqual(audit.MISPLACED, now.verdict)
        return audit._placed(now, self.facts, self.ROOTS)

    def test_sharing_provider_is_in_no_tree(self):
        self.assertEqual(audit.RIGHT, audit.decide(
            'inst', {RP1: FLAVOR, 'shared': {'DISK_GB': 1}}, self.facts,
            self.ROOTS).verdict)

    def test_other_trees_removed_own_and_shared_kept(self):
        allocations, why = self.placed({
            RP1: FLAVOR, 'rp-vgpu': {'VGPU': 1}, 'shared': {'DISK_GB': 1},
            RP2: FLAVOR, 'rp-bw2': {'NET_BW_EGR_KILOBIT_PER_SEC': 10}})
        self.assertIsNone(why)
        self.assertEqual({RP1: {'resources': FLAVOR},
                          'rp-vgpu': {'resources': {'VGPU': 1}},
                          'shared': {'resources': {'DISK_GB': 1}}},
                         allocations)

    def test_flavor_put_on_its_node(self):
        self.assertEqual(({RP1: {'resources': self.flavor}}, None),
                         self.placed({RP2: self.flavor}))

    def test_nested_resources_held_elsewhere_are_not_dropped(self):
        allocations, why = self.placed({
            RP2: self.flavor, 'rp-bw2': {'NET_BW_EGR_KILOBIT_PER_SEC': 10}})
        self.assertIsNone(allocations)
        self.assertIn('NET_BW_EGR_KILOBIT_PER_SEC', why)

    def test_flavor_of_nested_resources_is_left(self):
        self.flavor['VGPU'] = 1
        allocations, why = self.placed({RP2: self.flavor})
        self.assertIsNone(allocations)
        self.assertIn('heal_allocations', why)

    def test_shared_and_nothing_on_its_node_is_left(self):
        allocations, why = self.placed({RP2: FLAVOR,
                                        'shared': {'DISK_GB': 1}})
        self.assertIsNone(allocations)
        self.assertIn('sharing providers', why)


class HealEndedMoveTestCase(testtools.TestCase):
    """What heal writes for the migration of a move that is over holding
    its server's node (audit._heal_ended_move).
    """

    def setUp(self):
        super(HealEndedMoveTestCase, self).setUp()
        inst = instance()
        inst.project_id, inst.user_id = 'project', 'user'
        self.facts = facts([inst], [migration(status='error')])
        self.useFixture(fixtures.MockPatch(
            'nova_fixes.audit._flavor_resources',
            side_effect=lambda inst: dict(FLAVOR, DISK_GB=0)))
        self.placement = mock.Mock()
        self.placement.put.return_value = True
        self.placement.post.return_value = True
        self.body = {'consumer_generation': 3, 'project_id': 'project',
                     'user_id': 'user'}

    def heal(self, migration_holds, server_holds):
        self.placement.consumer.return_value = {
            'allocations': {rp: {'resources': res}
                            for rp, res in server_holds.items()},
            'consumer_generation': 7}
        now = audit.Verdict('mig', audit.MISPLACED, 'over',
                            held=migration_holds, kind='migration',
                            server='inst', target={})
        return audit._heal_ended_move(now, self.body, self.facts,
                                      self.placement, ROOTS)

    def test_given_to_a_server_holding_nothing_there(self):
        self.assertTrue(self.heal({RP1: FLAVOR}, {RP2: FLAVOR}))
        self.placement.put.assert_not_called()
        self.placement.post.assert_called_once_with({
            'mig': {'allocations': {}, 'consumer_generation': 3,
                    'project_id': 'project', 'user_id': 'user'},
            'inst': {'allocations': {RP1: {'resources': FLAVOR},
                                     RP2: {'resources': FLAVOR}},
                     'consumer_generation': 7, 'project_id': 'project',
                     'user_id': 'user'}})

    def test_removed_when_the_server_holds_its_flavor_there(self):
        self.assertTrue(self.heal({RP1: {'VCPU': 2, 'MEMORY_MB': 1024}},
                                  {RP1: FLAVOR}))
        self.placement.post.assert_not_called()
        self.placement.put.assert_called_once_with('mig', {
            'allocations': {}, 'consumer_generation': 3,
            'project_id': 'project', 'user_id': 'user'})

    def test_same_host_resize_not_finished_replaces_the_claim(self):
        # The server holds the new flavor's claim, the migration the old
        # flavor its guest still uses: the migration's replaces it.
        bigger = {'VCPU': 2, 'MEMORY_MB': 1024}
        self.assertTrue(self.heal({RP1: FLAVOR},
                                  {RP1: bigger, RP2: {'VCPU': 1}}))
        self.placement.put.assert_not_called()
        written = self.placement.post.call_args[0][0]
        self.assertEqual({RP1: {'resources': FLAVOR},
                          RP2: {'resources': {'VCPU': 1}}},
                         written['inst']['allocations'])
        self.assertEqual(7, written['inst']['consumer_generation'])
        self.assertEqual({}, written['mig']['allocations'])

    def test_nested_resources_of_the_server_are_not_replaced(self):
        # What the server holds on a nested provider of its node the
        # migration would not put back: the migration only loses it.
        self.assertTrue(self.heal({RP1: FLAVOR},
                                  {RP1: {'VCPU': 2, 'MEMORY_MB': 1024},
                                   'rp-vgpu': {'VGPU': 1}}))
        self.placement.post.assert_not_called()
        self.placement.put.assert_called_once_with('mig', {
            'allocations': {}, 'consumer_generation': 3,
            'project_id': 'project', 'user_id': 'user'})


class ShelvedOffloadedTestCase(testtools.TestCase):
    """A shelved offloaded server holds nothing, whatever its host (the
    offload clears the host after it has recorded the vm state).
    """

    def test_holding_nothing_with_its_host_still_set_is_right(self):
        inst = instance(vm_state='shelved_offloaded')
        self.assertEqual(audit.RIGHT, audit.decide(
            'inst', {}, facts(instances=[inst]), ROOTS).verdict)

    def test_holding_something_is_misplaced_nowhere(self):
        for host in ('host1', None):
            inst = instance(vm_state='shelved_offloaded', host=host,
                            node=host and 'node1')
            v = audit.decide('inst', {RP1: FLAVOR}, facts(instances=[inst]),
                             ROOTS)
            self.assertEqual((audit.MISPLACED, {}), (v.verdict, v.target))


class DeletedNotDestroyedTestCase(testtools.TestCase):
    """An instance whose vm state is deleted but whose record is not: a
    delete going on, or one that stopped half way. Never missing.
    """

    def _facts(self, ago):
        import datetime
        now = datetime.datetime(2026, 12, 7, 0, 0, 0)
        inst = instance(vm_state='deleted')
        inst.updated_at = now - datetime.timedelta(seconds=ago)
        f = facts(instances=[inst])
        f.now = now
        return f

    def test_holding_nothing_is_right_not_missing(self):
        v = audit.decide('inst', {}, self._facts(10), ROOTS)
        self.assertEqual(audit.RIGHT, v.verdict)

    def test_holding_something_is_in_flight_then_leaked(self):
        self.assertEqual(audit.IN_FLIGHT, audit.decide(
            'inst', {RP1: FLAVOR}, self._facts(10), ROOTS).verdict)
        v = audit.decide('inst', {RP1: FLAVOR},
                         self._facts(audit.GRACE + 1), ROOTS)
        self.assertEqual((audit.LEAKED, {}), (v.verdict, v.target))


class GraceTestCase(testtools.TestCase):
    """A move that has just ended is left to nova for GRACE seconds."""

    def _verdict(self, ago, grace=audit.GRACE, status='confirmed'):
        import datetime
        now = datetime.datetime(2026, 12, 7, 0, 0, 0)
        mig = migration(status=status, source=('host1', 'node1'))
        mig.updated_at = now - datetime.timedelta(seconds=ago)
        f = facts(instances=[instance(host='host2', node='node2')],
                  migrations=[mig])
        f.now, f.grace = now, grace
        return audit.decide('mig', {RP1: FLAVOR}, f, ROOTS)

    def test_just_ended_is_in_flight(self):
        v = self._verdict(10)
        self.assertEqual(audit.IN_FLIGHT, v.verdict)
        self.assertIn('ended 10 s ago (confirmed)', v.evidence)

    def test_after_the_grace_it_is_leaked(self):
        self.assertEqual(audit.LEAKED, self._verdict(audit.GRACE + 1).verdict)
        self.assertEqual(audit.LEAKED, self._verdict(10, grace=0).verdict)

    def test_no_timestamp_no_grace(self):
        mig = migration(status='error')
        f = facts(instances=[instance(host='host2', node='node2')],
                  migrations=[mig])
        self.assertEqual(audit.LEAKED, audit.decide(
            'mig', {RP1: FLAVOR}, f, ROOTS).verdict)


class AbandonedMoveTestCase(testtools.TestCase):
    """A migration nova still records in progress, of a server with no
    task state that is not resized, unchanged for the grace: the move is
    over (a compute died in it and rolled it back at its restart).
    """

    def _facts(self, ago, task_state=None, vm_state='active',
               status='migrating', grace=audit.GRACE):
        import datetime
        now = datetime.datetime(2026, 12, 7, 0, 0, 0)
        mig = migration(status=status, source=('host1', 'node1'))
        mig.updated_at = now - datetime.timedelta(seconds=ago)
        f = facts(instances=[instance(task_state=task_state,
                                      vm_state=vm_state)],
                  migrations=[mig])
        f.now, f.grace = now, grace
        return f

    def test_abandoned_migration_holding_the_guests_node_is_misplaced(self):
        f = self._facts(audit.GRACE + 1)
        v = audit.decide('mig', {RP1: FLAVOR}, f, ROOTS)
        self.assertEqual((audit.MISPLACED, {}), (v.verdict, v.target))
        self.assertIn('abandoned: still migrating', v.evidence)
        # and its server, holding the destination, is misplaced too
        v = audit.decide('inst', {RP2: FLAVOR}, f, ROOTS)
        self.assertEqual((audit.MISPLACED, RP1), (v.verdict, v.target))
        # holding nothing the server needs: leaked
        self.assertEqual(audit.LEAKED, audit.decide(
            'mig', {RP2: FLAVOR}, f, ROOTS).verdict)

    def test_within_the_grace_it_is_in_flight(self):
        f = self._facts(10)
        self.assertEqual(audit.IN_FLIGHT, audit.decide(
            'mig', {RP1: FLAVOR}, f, ROOTS).verdict)
        self.assertEqual(audit.IN_FLIGHT, audit.decide(
            'inst', {RP2: FLAVOR}, f, ROOTS).verdict)

    def test_a_task_state_or_a_resize_keeps_it_in_flight(self):
        for kw in ({'task_state': 'resize_migrating'},
                   {'vm_state': 'resized', 'status': 'confirming'},
                   {'vm_state': 'resized', 'status': 'finished'}):
            f = self._facts(audit.GRACE * 10, **kw)
            self.assertNotIn(audit.decide('mig', {RP2: FLAVOR}, f,
                                          ROOTS).verdict, audit.WRONG, kw)
            self.assertTrue(not audit.abandoned(f.migrations['mig'],
                                                f.instances['inst'], f), kw)

    def test_no_timestamp_no_evidence(self):
        f = facts([instance()], [migration(status='migrating')])
        self.assertFalse(audit.abandoned(f.migrations['mig'],
                                         f.instances['inst'], f))


class _Resp(object):
    def __init__(self, status, body=None):
        self.status_code = status
        self._body = body
        self.text = json.dumps(body)

    def json(self):
        return self._body


class PlacementTestCase(testtools.TestCase):

    def test_5xx_names_the_request(self):
        client = mock.Mock(get=mock.Mock(return_value=_Resp(503, 'busy')))
        e = self.assertRaises(audit.AuditError,
                              audit.Placement(client).providers)
        self.assertIn('placement answered 503 to GET /resource_providers',
                      str(e))

    def test_provider_vanished(self):
        client = mock.Mock(get=mock.Mock(return_value=_Resp(404, {})))
        e = self.assertRaises(
            audit.AuditError, audit.Placement(client).provider_allocations,
            {'uuid': RP1, 'name': 'node1'})
        self.assertIn('resource provider rp-host1 (node1) vanished', str(e))
        self.assertIn('nothing was changed', str(e))

    def test_conflict_is_false_and_requests_counted(self):
        client = mock.Mock(put=mock.Mock(return_value=_Resp(409, {})))
        p = audit.Placement(client)
        self.assertFalse(p.put('c', {}))
        self.assertEqual(1, p.requests)


class OutputTestCase(testtools.TestCase):

    def setUp(self):
        super(OutputTestCase, self).setUp()
        rep = audit.Report()
        rep.names = {RP1: 'node1'}
        rep.verdicts = [
            audit.Verdict('a', audit.RIGHT, 'ok', {RP1: FLAVOR}),
            audit.Verdict('b', audit.LEAKED, 'deleted', {RP1: FLAVOR},
                          kind='instance', server='b')]
        rep.requests = 3
        self.report = rep
        self.stdout = io.StringIO()
        self.useFixture(fixtures.MockPatch('sys.stdout', self.stdout))
        self.useFixture(fixtures.MockPatch('sys.stderr', io.StringIO()))
        self.useFixture(fixtures.MockPatch(
            'nova_fixes.cmd.main._load_nova_config'))
        self.useFixture(fixtures.MockPatch(
            'nova.context.get_admin_context'))

    def test_text(self):
        text = main.audit_text(self.report)
        self.assertNotIn('right a', text)
        self.assertIn('leaked b (instance of b): deleted', text)
        self.assertIn('node1: leaked MEMORY_MB=512, VCPU=1', text)
        self.assertIn('total: leaked MEMORY_MB=512, VCPU=1', text)
        self.assertIn('1 right, 0 in flight, 0 misplaced, 1 leaked', text)

    def test_json(self):
        doc = json.loads(main.audit_json(self.report))
        self.assertEqual(1, doc['counts']['leaked'])
        self.assertEqual({'VCPU': 1, 'MEMORY_MB': 512},
                         doc['totals']['total']['leaked'])
        self.assertEqual(['a', 'b'],
                         [v['consumer'] for v in doc['verdicts']])

    def test_exit_codes(self):
        with mock.patch('nova_fixes.audit.audit',
                        return_value=self.report):
            self.assertEqual(3, main.main(['audit', '--json']))
        self.report.verdicts[1].healed = 'healed'
        with mock.patch('nova_fixes.audit.audit',
                        return_value=self.report) as run:
            self.assertEqual(0, main.main(['audit', '--heal']))
        self.assertTrue(run.call_args[1]['heal'])
        with mock.patch('nova_fixes.audit.audit',
                        side_effect=audit.AuditError('no cell named x')):
            self.assertEqual(2, main.main(['audit', '--cell', 'x']))

    def test_unknown_cell_is_named(self):
        cells = [types.SimpleNamespace(uuid='u1', name='cell1')]
        with mock.patch('nova_fixes.audit.objects') as objects:
            objects.CellMappingList.get_all.return_value = cells
            e = self.assertRaises(audit.AuditError, audit._cells, None, 'x')
        self.assertEqual('no cell named x (cells: cell1)', str(e))


class PeriodicTestCase(OutputTestCase):
    """nova-fixes audit --every: the periodic form."""

    def _every(self, *argv, results=None):
        sleeps = []
        results = list(results or [self.report])

        def run(ctxt, heal, cell, grace):
            result = results.pop(0) if len(results) > 1 else results[0]
            if isinstance(result, Exception):
                raise result
            return result

        with mock.patch('nova_fixes.audit.audit', side_effect=run), \
                mock.patch('time.sleep', side_effect=sleeps.append):
            code = main.main(['audit'] + list(argv))
        return code, sleeps

    def test_runs_and_waits(self):
        code, sleeps = self._every('--every', '60', '--runs', '3')
        self.assertEqual(3, code)
        self.assertEqual(2, len(sleeps))
        self.assertTrue(all(50 < s <= 60 for s in sleeps), sleeps)
        self.assertEqual(3, self.stdout.getvalue().count('audit run '))

    def test_later_error_goes_on_first_stops(self):
        error = audit.AuditError('placement answered 503')
        code, sleeps = self._every('--every', '5', '--runs', '3',
                                   results=[self.report, error, error])
        self.assertEqual(2, code)
        self.assertIn('audit run 2: placement answered 503',
                      self.stdout.getvalue())
        self.assertEqual(2, len(sleeps))
        code, sleeps = self._every('--every', '5', '--runs', '3',
                                   results=[error])
        self.assertEqual(2, code)
        self.assertEqual([], sleeps)

    def test_bad_values_refused(self):
        for argv in (['--grace', '-1'], ['--grace', 'soon'],
                     ['--every', '0'], ['--every', 'often'],
                     ['--every', 'nan'], ['--every', '5', '--runs', '0'],
                     ['--runs', '2']):
            with mock.patch('nova_fixes.audit.audit') as run:
                e = self.assertRaises(SystemExit, main.main,
                                      ['audit'] + argv)
            self.assertEqual(2, e.code, argv)
            run.assert_not_called()
