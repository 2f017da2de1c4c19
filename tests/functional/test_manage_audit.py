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
from oslo_utils.fixture import uuidsentinel as uuids

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
