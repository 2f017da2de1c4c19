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

"""nova-manage placement audit --delete and the claims that are live.

The property: the audit deletes only what nothing may still use (a
deleted or archived server's allocations, a migration's whose move is
over and whose server runs elsewhere). A build or a move in flight, a
live server's allocations on a host its guest is not on, and the
migration of a move that is over holding the node its server runs on are
left alone: deleting them makes the scheduler overcommit the node, or
leaves a live server holding less than its guest uses.

On vanilla nova (checked on 34.0.0) the audit calls a consumer an orphan
unless it is an instance recorded on the node or a migration in progress
there, and deletes all four.
"""

from nova import context as nova_context
from nova import objects
from nova.scheduler.client import report
from oslo_utils.fixture import uuidsentinel as uuids

from tests import common
from tests.functional import base
from tests.functional import test_audit

TIMEOUT = 30


class _ManageAuditTestBase(test_audit._AuditTestBase):
    """test_audit's two computes and helpers (hold, put_allocations); these
    tests recreate a bug of nova-manage's audit.
    """
    recreates = True

    @staticmethod
    def owner(server):
        """The project and user put_allocations writes for ``server``."""
        return server['tenant_id'], server['user_id']

    def ended_migration(self, server, source, dest, status):
        """A migration record of a move of ``server`` that is over."""
        ctxt = nova_context.get_admin_context()
        migration = objects.Migration(
            ctxt, uuid=uuids.migration, instance_uuid=server['id'],
            source_compute=source, source_node=source, dest_compute=dest,
            dest_node=dest, migration_type='migration', status=status,
            old_instance_type_id=1, new_instance_type_id=1)
        if 'dest_compute_id' in migration.fields:
            # nova >= 28 refuses a dest_node without it.
            migration.dest_compute_id = (
                objects.ComputeNode.get_by_host_and_nodename(
                    ctxt, dest, dest).id)
        migration.create()
        return migration

    def audit_deletes_nothing(self):
        before = self._all_allocations()
        result, out = self.placement_audit(delete=True)
        self.assertEqual(before, self._all_allocations(),
                         base.LEAK + 'nova-manage placement audit --delete '
                         'took a claim nova still uses:\n%s' % out)
        self.assertEqual(0, result, out)
        self.assertIn('left alone', out)
        return out


class LiveClaimsTest(_ManageAuditTestBase):
    """The claims of builds and moves in flight, and of live servers."""

    def test_build_in_flight(self):
        """The scheduler claimed a host; the compute has not taken the
        instance yet (it has no host).
        """
        reached, release = self.hold('build_and_run_instance')
        server = self._create_server(networks='none',
                                     expected_state='BUILD')
        self.wait_for(reached, 'build_and_run_instance', TIMEOUT)
        self.audit_deletes_nothing()
        release.set()
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assert_survivor(server, server['OS-EXT-SRV-ATTR:host'])

    def test_cold_migration_in_flight(self):
        """The destination prepares the resize: the instance consumer
        holds its claim while the instance is recorded on the source.
        """
        server = self._create_server(networks='none')
        source = server['OS-EXT-SRV-ATTR:host']
        reached, release = self.hold('prep_resize')
        self.api.post_server_action(server['id'], {'migrate': None})
        self.wait_for(reached, 'prep_resize', TIMEOUT)
        self.audit_deletes_nothing()
        release.set()
        server = self._wait_for_state_change(server, 'VERIFY_RESIZE')
        server = self._confirm_resize(server)
        target = server['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, target)
        self.assert_survivor(server, target)

    def test_misplaced_server(self):
        """A live server's allocations on a host its guest is not on (what
        a move interrupted by a compute that stopped leaves): misplaced,
        not orphaned. Deleting them leaves the server holding nothing.
        """
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        other = 'host2' if host == 'host1' else 'host1'
        self.put_allocations(
            server['id'], {self._get_provider_uuid_by_host(other):
                           self._flavor_resources(server['flavor'])},
            *self.owner(server))
        out = self.audit_deletes_nothing()
        self.assertIn('misplaced, not orphaned', out)

    def test_ended_move_holding_the_servers_node(self):
        """The migration of a move that is over ('error') holds the node
        the server runs on, and the server nothing (a move whose rollback
        could not give its allocations back): what the migration holds
        is what the server uses.
        """
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        other = 'host2' if host == 'host1' else 'host1'
        self.ended_migration(server, host, other, 'error')
        held = {self._get_provider_uuid_by_host(host):
                self._flavor_resources(server['flavor'])}
        self.put_allocations(uuids.migration, held,
            *self.owner(server))
        self.put_allocations(server['id'], {},
            *self.owner(server))
        out = self.audit_deletes_nothing()
        self.assertIn('misplaced, not orphaned', out)


class OrphansTest(_ManageAuditTestBase):
    """What nothing may use is still found and deleted."""

    recreates = False

    def test_deleted_server(self):
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        held = {self._get_provider_uuid_by_host(host):
                self._flavor_resources(server['flavor'])}
        self.delete_server_and_wait(server)
        # What a leak of a delete leaves: the deleted server's claim.
        self.put_allocations(server['id'], held,
            *self.owner(server))
        result, out = self.placement_audit(delete=True)
        self.assertEqual(4, result, out)
        self.assertEqual({}, self._all_allocations())

    def test_unknown_consumer_and_ended_move_elsewhere(self):
        """An unknown consumer (an archived server's), and the migration
        of a move that is over holding a node its server does not run on.
        """
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        other = 'host2' if host == 'host1' else 'host1'
        self.ended_migration(server, other, host, 'confirmed')
        other_rp = self._get_provider_uuid_by_host(other)
        self.put_allocations(uuids.migration, {other_rp: {'VCPU': 1}},
            *self.owner(server))
        self.put_allocations(uuids.stranger, {other_rp: {'VCPU': 1}},
            *self.owner(server))
        result, out = self.placement_audit(delete=True)
        self.assertEqual(4, result, out)
        self.assertIn('Processed 2 allocations.', out)
        self.assert_survivor(server, host)


class HealTest(_ManageAuditTestBase):
    """nova-manage placement audit --heal (the drop-ins' option): misplaced
    allocations are moved to where the server runs, with the consumer
    generations read; claims in flight and what was written meanwhile
    are left alone. The property: after the heal every live server holds
    exactly its flavor where its guest runs, and no migration of a move
    that is over holds anything.
    """

    recreates = None

    def setUp(self):
        super(HealTest, self).setUp()
        if common.mode() == 'vanilla':
            self.skipTest('tests the audit\'s --heal option itself')

    def _misplace(self):
        """A server holding the other host only: (server, host, other)."""
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        other = 'host2' if host == 'host1' else 'host1'
        self.put_allocations(
            server['id'], {self._get_provider_uuid_by_host(other):
                           self._flavor_resources(server['flavor'])},
            *self.owner(server))
        return server, host, other

    def test_heal_misplaced_server(self):
        server, host, other = self._misplace()
        result, out = self.placement_audit(delete=False, heal=True)
        self.assertEqual(4, result, out)
        self.assertIn('moved to its node', out)
        self.assert_survivor(server, host)
        # Nothing left to heal: a second run changes nothing.
        result, out = self.placement_audit(delete=False, heal=True)
        self.assertEqual(0, result, out)

    def test_heal_ended_move_holding_the_servers_node(self):
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        other = 'host2' if host == 'host1' else 'host1'
        self.ended_migration(server, host, other, 'error')
        self.put_allocations(uuids.migration, {
            self._get_provider_uuid_by_host(host):
            self._flavor_resources(server['flavor'])}, *self.owner(server))
        self.put_allocations(server['id'], {}, *self.owner(server))
        result, out = self.placement_audit(delete=False, heal=True)
        self.assertEqual(4, result, out)
        self.assertIn('moved to its server', out)
        self.assert_survivor(server, host)

    def test_heal_same_host_resize_claim(self):
        """What a resize on the same host whose prep_resize failed while
        placement was unreachable leaves: the server holds the new
        flavor's claim on its node, the migration ('error') the flavor
        its guest uses. The migration's replace the server's.
        """
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        rp = self._get_provider_uuid_by_host(host)
        self.ended_migration(server, host, host, 'error')
        self.put_allocations(uuids.migration, {
            rp: self._flavor_resources(server['flavor'])},
            *self.owner(server))
        self.put_allocations(server['id'], {
            rp: {'VCPU': 2, 'MEMORY_MB': 1024, 'DISK_GB': 1}},
            *self.owner(server))
        result, out = self.placement_audit(delete=False, heal=True)
        self.assertEqual(4, result, out)
        self.assertIn('moved to its server', out)
        self.assert_survivor(server, host)

    def test_heal_move_rolled_back_on_its_source(self):
        """What a cold migration whose source stopped leaves on vanilla
        nova: the server holds the destination, the migration ('error')
        the source, where the guest runs. Either node may be audited
        first; the heal ends the same.
        """
        server, host, other = self._misplace()
        self.ended_migration(server, host, other, 'error')
        self.put_allocations(uuids.migration, {
            self._get_provider_uuid_by_host(host):
            self._flavor_resources(server['flavor'])}, *self.owner(server))
        result, out = self.placement_audit(delete=False, heal=True)
        self.assertEqual(4, result, out)
        self.assert_survivor(server, host)

    def test_heal_leaves_claims_in_flight(self):
        """A cold migration held before its destination's prep_resize:
        the audit with --heal and --delete changes nothing, and the move
        ends holding its destination.
        """
        server = self._create_server(networks='none')
        source = server['OS-EXT-SRV-ATTR:host']
        reached, release = self.hold('prep_resize')
        self.api.post_server_action(server['id'], {'migrate': None})
        self.wait_for(reached, 'prep_resize', TIMEOUT)
        before = self._all_allocations()
        result, out = self.placement_audit(delete=True, heal=True)
        self.assertEqual(before, self._all_allocations(), out)
        self.assertEqual(0, result, out)
        release.set()
        server = self._wait_for_state_change(server, 'VERIFY_RESIZE')
        server = self._confirm_resize(server)
        target = server['OS-EXT-SRV-ATTR:host']
        self.assertNotEqual(source, target)
        self.assert_survivor(server, target)

    def test_heal_never_overwrites_what_was_written_meanwhile(self):
        """Between the heal's read of the server's allocations and its
        write, something else writes them (here: what the server should
        hold). Placement refuses the heal's write for the consumer
        generation; the heal reads again, finds nothing misplaced, and
        leaves the other writer's allocations as they are.
        """
        server, host, other = self._misplace()
        meanwhile = {self._get_provider_uuid_by_host(host):
                     self._flavor_resources(server['flavor'])}
        original = report.SchedulerReportClient.get_allocs_for_consumer
        reads = []

        def racing(client, ctxt, consumer):
            body = original(client, ctxt, consumer)
            reads.append(consumer)
            if consumer == server['id'] and len(reads) == 1:
                self.put_allocations(server['id'], meanwhile,
                                     *self.owner(server))
            return body

        self.stub_out('nova.scheduler.client.report.SchedulerReportClient.'
                      'get_allocs_for_consumer', racing)
        result, out = self.placement_audit(delete=False, heal=True)
        self.assertEqual([server['id'], server['id']], reads, out)
        self.assertIn('holds nothing on this node any more', out)
        self.assertEqual({server['id']: meanwhile}, self._all_allocations())
        self.assert_survivor(server, host)
