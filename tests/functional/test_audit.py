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

"""nova-fixes audit (issue 41) against nova-manage placement audit.

nova-manage's audit calls a consumer an orphan unless it is an instance
recorded on the node or a migration in progress there: a build the
scheduler claimed for and the compute has not taken yet is an orphan to
it, and ``--delete`` removes the live claim (test_manage_audit recreates
that, and fixes nova-manage's audit). nova_fixes.audit decides
from the build requests, task states and migrations, leaves what is in
flight alone, and heals only with the consumer generations it read.
"""

import io
import json
import threading
from unittest import mock

from nova.compute import manager as compute_manager
from nova import context as nova_context
from nova.tests.functional import integrated_helpers
from oslo_utils.fixture import uuidsentinel as uuids

from nova_fixes import audit
from nova_fixes.cmd import main
from tests import common
from tests.functional import base
from tests.functional import test_survivors

TIMEOUT = 30


class _AuditTestBase(base.NovaFixesTestMixin,
                     integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'
    # The audit is a tool, not a drop-in: it must work on every nova.
    recreates = False

    def setUp(self):
        super(_AuditTestBase, self).setUp()
        self._start_compute('host1')
        self._start_compute('host2')
        self.ctxt = nova_context.get_admin_context()

    def run_audit(self, heal=False):
        return audit.audit(self.ctxt, heal=heal)

    def verdicts(self, report):
        return {v.consumer: v.verdict for v in report.verdicts}

    def hold(self, method):
        """Block ComputeManager.<method> until the test releases it:
        returns (reached, release).
        """
        reached = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)
        original = getattr(compute_manager.ComputeManager, method)

        def held(*args, **kwargs):
            reached.set()
            release.wait(TIMEOUT)
            return original(*args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.' + method, held)
        return reached, release

    def put_allocations(self, consumer, allocations, project, user):
        body = self.placement.get('/allocations/%s' % consumer,
                                  version='1.28').body
        resp = self.placement.put('/allocations/%s' % consumer, {
            'allocations': {rp: {'resources': res}
                            for rp, res in allocations.items()},
            'consumer_generation': body.get('consumer_generation'),
            'project_id': project, 'user_id': user}, version='1.28')
        self.assertEqual(204, resp.status)

    def _server(self):
        server = self._create_server(networks='none')
        return server, server['OS-EXT-SRV-ATTR:host']

    def _sharing_provider(self):
        """A provider of shared storage (MISC_SHARES_VIA_AGGREGATE) with
        DISK_GB, in no compute node's tree.
        """
        rp = uuids.shared_storage
        self.assertEqual(200, self.placement.post(
            '/resource_providers', {'name': 'shared-storage', 'uuid': rp},
            version='1.20').status)
        self.assertEqual(200, self.placement.put(
            '/resource_providers/%s/inventories' % rp,
            {'resource_provider_generation': 0,
             'inventories': {'DISK_GB': {'total': 100}}}).status)
        self.assertEqual(200, self.placement.put(
            '/resource_providers/%s/traits' % rp,
            {'resource_provider_generation': 1,
             'traits': ['MISC_SHARES_VIA_AGGREGATE']}, version='1.6').status)
        return rp


class InFlightTest(_AuditTestBase):
    """Builds and moves in flight: the audit leaves their claims."""

    def _held_build(self):
        reached, release = self.hold('build_and_run_instance')
        server = self._create_server(networks='none',
                                     expected_state='BUILD')
        self.wait_for(reached, 'build_and_run_instance')
        held = self._get_allocations_by_server_uuid(server['id'])
        self.assertEqual(1, len(held), 'the scheduler claimed a host')
        return server, release, held

    def test_audit_heal_leaves_a_live_builds_claim(self):
        server, release, held = self._held_build()
        report = self.run_audit(heal=True)
        self.assertEqual(audit.IN_FLIGHT,
                         self.verdicts(report)[server['id']])
        self.assertEqual(held, self._get_allocations_by_server_uuid(
            server['id']))
        release.set()
        server = self._wait_for_state_change(server, 'ACTIVE')
        rp = self._get_provider_uuid_by_host(server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(
            {rp: self._flavor_resources(server['flavor'])},
            {rp_: a['resources'] for rp_, a in
             self._get_allocations_by_server_uuid(server['id']).items()})
        self.assertEqual(0, len(self.run_audit().wrong()))

    def test_audit_heal_leaves_a_cold_migration_in_flight(self):
        server, source = self._server()
        reached, release = self.hold('finish_resize')
        self.api.post_server_action(server['id'], {'migrate': None})
        self.wait_for(reached, 'finish_resize')
        before = self._all_allocations()
        migration = [c for c in before if c != server['id']]
        self.assertEqual(1, len(migration))
        report = self.run_audit(heal=True)
        got = self.verdicts(report)
        self.assertEqual(audit.IN_FLIGHT, got[server['id']])
        self.assertEqual(audit.IN_FLIGHT, got[migration[0]])
        self.assertEqual(before, self._all_allocations())
        release.set()
        server = self._wait_for_state_change(server, 'VERIFY_RESIZE')
        got = self.verdicts(self.run_audit())
        self.assertEqual({server['id']: audit.RIGHT,
                          migration[0]: audit.RIGHT}, got)
        server = self._confirm_resize(server)
        target = server['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, target)
        self.assert_survivor(server, target)


class HealTest(_AuditTestBase):
    """What is wrong is found, counted and healed."""

    def test_leaked_unknown_consumer(self):
        server, host = self._server()
        rp = self._get_provider_uuid_by_host(host)
        self.put_allocations(uuids.stranger, {rp: {'VCPU': 1}},
                             server['tenant_id'], server['user_id'])
        report = self.run_audit()
        self.assertEqual(audit.LEAKED, self.verdicts(report)[uuids.stranger])
        self.assertEqual({'VCPU': 1}, report.totals(report.names)[
            'total'][audit.LEAKED])
        self.assertIn(uuids.stranger, self._all_allocations())
        report = self.run_audit(heal=True)
        self.assertEqual('healed', [v.healed for v in report.verdicts
                                    if v.consumer == uuids.stranger][0])
        self.assertNotIn(uuids.stranger, self._all_allocations())
        self.assert_survivor(server, host)

    def test_leaked_deleted_server(self):
        server, host = self._server()
        rp = self._get_provider_uuid_by_host(host)
        held = {rp: self._flavor_resources(server['flavor'])}
        self.delete_server_and_wait(server)
        # What a leak of a delete leaves: the deleted server's claim.
        self.put_allocations(server['id'], held, server['tenant_id'],
                             server['user_id'])
        report = self.run_audit(heal=True)
        self.assertEqual(audit.LEAKED, self.verdicts(report)[server['id']])
        self.assertEqual({}, self._all_allocations())

    def test_misplaced_server_moved_where_its_guest_runs(self):
        server, host = self._server()
        other = 'host2' if host == 'host1' else 'host1'
        self.put_allocations(
            server['id'], {self._get_provider_uuid_by_host(other):
                           self._flavor_resources(server['flavor'])},
            server['tenant_id'], server['user_id'])
        report = self.run_audit()
        self.assertEqual(audit.MISPLACED,
                         self.verdicts(report)[server['id']])
        self.assertEqual(1, report.counts()[audit.MISPLACED])
        self.run_audit(heal=True)
        self.assertEqual([], self.run_audit().wrong())
        self.assert_survivor(server, host)

    def _on_shared_storage(self, server, host):
        """The server's flavor with its disk on a new provider of shared
        storage and the rest on ``host``: {provider: resources}.
        """
        flavor = dict(self._flavor_resources(server['flavor']))
        return {self._sharing_provider(): {'DISK_GB': flavor.pop('DISK_GB')},
                self._get_provider_uuid_by_host(host): flavor}

    def test_disk_on_a_sharing_provider_is_right(self):
        """A server whose disk is on shared storage holds its node and the
        sharing provider: right, and heal writes nothing.
        """
        server, host = self._server()
        held = self._on_shared_storage(server, host)
        self.put_allocations(server['id'], held, server['tenant_id'],
                             server['user_id'])
        report = self.run_audit(heal=True)
        self.assertEqual(audit.RIGHT, self.verdicts(report)[server['id']])
        self.assertEqual({server['id']: held}, self._all_allocations())

    def test_misplaced_server_keeps_its_node_and_shared_storage(self):
        """A server holding its node, the sharing provider and another
        node: only the other node is removed.
        """
        server, host = self._server()
        other = 'host2' if host == 'host1' else 'host1'
        right = self._on_shared_storage(server, host)
        flavor = right[self._get_provider_uuid_by_host(host)]
        self.put_allocations(
            server['id'],
            dict(right, **{self._get_provider_uuid_by_host(other): flavor}),
            server['tenant_id'], server['user_id'])
        report = self.run_audit(heal=True)
        self.assertEqual(audit.MISPLACED,
                         self.verdicts(report)[server['id']])
        self.assertEqual({server['id']: right}, self._all_allocations())
        self.assertEqual([], self.run_audit().wrong())

    def test_misplaced_with_shared_storage_and_nothing_on_its_node(self):
        """Holding another node and the sharing provider, nothing on its
        own node: its flavor on its node would claim the disk twice, and
        without the sharing provider's part it would lose it. Left alone,
        and still reported wrong.
        """
        server, host = self._server()
        other = 'host2' if host == 'host1' else 'host1'
        held = self._on_shared_storage(server, other)
        self.put_allocations(server['id'], held, server['tenant_id'],
                             server['user_id'])
        report = self.run_audit(heal=True)
        verdict = [v for v in report.verdicts if v.consumer == server['id']]
        self.assertEqual(audit.MISPLACED, verdict[0].verdict)
        self.assertIn('left alone: it holds sharing providers',
                      verdict[0].healed)
        self.assertEqual({server['id']: held}, self._all_allocations())
        self.assertEqual([server['id']],
                         [v.consumer for v in self.run_audit().wrong()])

    def test_missing_allocations_healed(self):
        server, host = self._server()
        self.put_allocations(server['id'], {}, server['tenant_id'],
                             server['user_id'])
        report = self.run_audit()
        self.assertEqual(audit.MISSING, self.verdicts(report)[server['id']])
        self.assertEqual(self._flavor_resources(server['flavor']),
                         report.totals(report.names)['total'][audit.MISSING])
        self.run_audit(heal=True)
        self.assert_survivor(server, host)

    def test_generation_conflict_rereads_and_never_overwrites(self):
        """A claim is written between the audit's read of a consumer and
        its write: placement answers 409, the audit reads again, finds
        the server right and writes nothing.
        """
        server, host = self._server()
        rp = self._get_provider_uuid_by_host(host)
        flavor = self._flavor_resources(server['flavor'])
        self.put_allocations(server['id'], {}, server['tenant_id'],
                             server['user_id'])
        original = audit.Placement.consumer
        writes = []

        def read_then_someone_writes(placement, uuid):
            body = original(placement, uuid)
            if uuid == server['id'] and not writes:
                # 1. the audit read the consumer (no allocations);
                # 2. someone else (heal_allocations) claims its flavor.
                writes.append(uuid)
                self.put_allocations(uuid, {rp: flavor},
                                     server['tenant_id'], server['user_id'])
            return body

        self.stub_out('nova_fixes.audit.Placement.consumer',
                      read_then_someone_writes)
        puts = []
        original_put = audit.Placement.put

        def put(placement, uuid, body):
            result = original_put(placement, uuid, body)
            puts.append(result)
            return result

        self.stub_out('nova_fixes.audit.Placement.put', put)
        report = self.run_audit(heal=True)
        verdict = [v for v in report.verdicts if v.consumer == server['id']]
        # 3. its write with the generation it read is refused (409);
        # 4. it reads again: the server is right, it is left alone.
        self.assertEqual([False], puts)
        self.assertIn('left alone: now right', verdict[0].healed)
        self.assertEqual(
            {server['id']: {rp: flavor}},
            {c: a for c, a in self._all_allocations().items()})
        self.assert_survivor(server, host)


class SurvivorHealTest(test_survivors._SurvivorTestBase):
    """The survivors issue's live migration whose source dies inside the
    driver call and restarts. On vanilla nova the instance consumer keeps
    the destination and the migration consumer (status 'error') the
    source: both misplaced. The audit moves the server's flavor back to
    the source, where its guest runs, and empties the migration; then
    the survivor property holds. With the fixes nothing is wrong.
    """

    recreates = False

    def test_live_migration_source_dies_then_audit_heals(self):
        server, source, target = self._create_server()
        died = self.die_in('live_migration', '_do_live_migration')
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
        self.wait_for(died, 'live_migration', test_survivors.TIMEOUT)
        self.restart_after_death(source)
        ctxt = nova_context.get_admin_context()
        if common.mode() == 'vanilla':
            # init_host has just recorded the migration 'error': within
            # the grace the audit leaves its allocations to nova.
            report = audit.audit(ctxt)
            got = {v.kind: v.verdict for v in report.verdicts
                   if v.server == server['id']}
            self.assertEqual(audit.IN_FLIGHT, got['migration'],
                             report.verdicts)
        # Once the grace has passed (the operator's audit later on).
        report = audit.audit(ctxt, grace=0)
        counts = report.counts()
        if common.mode() == 'vanilla':
            self.assertEqual(2, counts[audit.MISPLACED], report.verdicts)
        else:
            self.assertEqual(0, len(report.wrong()))
        report = audit.audit(ctxt, heal=True, grace=0)
        self.assertEqual([], report.wrong())
        self.assertEqual([], audit.audit(ctxt, grace=0).wrong())
        self.assert_survivor(server, source)


class CommandTest(_AuditTestBase):
    """nova-fixes audit as an operator runs it (nova's configuration is
    the test's, already loaded).
    """

    def cli(self, *args):
        out = io.StringIO()
        self.stub_out('nova_fixes.cmd.main._load_nova_config',
                      lambda args: None)
        with mock.patch('sys.stdout', out), \
                mock.patch('sys.stderr', out):
            code = main.main(['audit'] + list(args))
        return code, out.getvalue()

    def test_exit_codes_and_heal(self):
        server, host = self._server()
        rp = self._get_provider_uuid_by_host(host)
        self.put_allocations(uuids.stranger, {rp: {'VCPU': 1}},
                             server['tenant_id'], server['user_id'])
        code, out = self.cli('--cell', 'nowhere', '--heal')
        self.assertEqual(2, code)
        self.assertIn('no cell named nowhere', out)
        code, out = self.cli('--json')
        self.assertEqual(3, code)
        self.assertEqual(1, json.loads(out)['counts'][audit.LEAKED])
        self.assertIn(uuids.stranger, self._all_allocations())
        code, out = self.cli('--heal')
        self.assertEqual(0, code, out)
        self.assertIn('leaked %s' % uuids.stranger, out)
        self.assertNotIn(uuids.stranger, self._all_allocations())
        code, out = self.cli()
        self.assertEqual(0, code, out)
        self.assertNotIn(uuids.stranger, out)
