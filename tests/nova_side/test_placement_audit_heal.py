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

from io import StringIO
import threading

import fixtures
from oslo_utils.fixture import uuidsentinel as uuids

from nova.cmd import manage
from nova.compute import manager as compute_manager
from nova import context
from nova import objects
from nova.tests.functional import integrated_helpers


class TestPlacementAuditHeal(integrated_helpers.ProviderUsageBaseTestCase):
    """nova-manage placement audit --heal moves misplaced allocations to
    where their server runs: afterwards the server holds exactly its
    flavor on its host, and no migration of a move that is over holds
    anything. Claims in flight are left alone.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self._start_compute('host2')
        self.output = StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', self.output))

    def _put_allocations(self, consumer, allocations, server):
        body = self.placement.get('/allocations/%s' % consumer,
                                  version='1.28').body
        resp = self.placement.put('/allocations/%s' % consumer, {
            'allocations': {rp: {'resources': res}
                            for rp, res in allocations.items()},
            'consumer_generation': body.get('consumer_generation'),
            'project_id': server['tenant_id'],
            'user_id': server['user_id']}, version='1.28')
        self.assertEqual(204, resp.status)

    def _server(self):
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        other = 'host2' if host == 'host1' else 'host1'
        return server, host, other

    def _misplace(self, server, other):
        self._put_allocations(
            server['id'], {self._get_provider_uuid_by_host(other): {
                'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}}, server)

    def _ended_migration(self, server, source, dest):
        ctxt = context.get_admin_context()
        migration = objects.Migration(
            ctxt, uuid=uuids.migration, instance_uuid=server['id'],
            source_compute=source, source_node=source, dest_compute=dest,
            dest_node=dest, migration_type='migration', status='error',
            old_instance_type_id=1, new_instance_type_id=1)
        if 'dest_compute_id' in migration.fields:
            migration.dest_compute_id = (
                objects.ComputeNode.get_by_host_and_nodename(
                    ctxt, dest, dest).id)
        migration.create()
        rp = self._get_provider_uuid_by_host(source)
        self._put_allocations(uuids.migration, {rp: {
            'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}}, server)

    def _heal_and_check(self, server, host, other):
        ret = manage.PlacementCommands().audit(verbose=True, heal=True)
        output = self.output.getvalue()
        self.assertEqual(4, ret, output)
        self.assertFlavorMatchesAllocation(
            server['flavor'], server['id'],
            self._get_provider_uuid_by_host(host))
        self.assertEqual([self._get_provider_uuid_by_host(host)],
                         list(self._get_allocations_by_server_uuid(
                             server['id'])))
        self.assertEqual({}, self._get_allocations_by_provider_uuid(
            self._get_provider_uuid_by_host(other)))
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            uuids.migration))
        # Nothing is left to heal.
        self.assertEqual(0, manage.PlacementCommands().audit(heal=True))

    def test_heal_misplaced_server(self):
        server, host, other = self._server()
        self._misplace(server, other)
        self._heal_and_check(server, host, other)

    def test_heal_ended_move_holding_the_servers_node(self):
        server, host, other = self._server()
        self._ended_migration(server, host, other)
        self._put_allocations(server['id'], {}, server)
        self._heal_and_check(server, host, other)

    def test_heal_move_rolled_back_on_its_source(self):
        # What a cold migration whose source stopped leaves: the server
        # holds the destination, its migration the source.
        server, host, other = self._server()
        self._misplace(server, other)
        self._ended_migration(server, host, other)
        self._heal_and_check(server, host, other)

    def test_heal_leaves_claims_in_flight(self):
        server = self._create_server(networks='none')
        reached = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)
        original = compute_manager.ComputeManager.prep_resize

        def held(*args, **kwargs):
            reached.set()
            release.wait(30)
            return original(*args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.prep_resize',
                      held)
        self.api.post_server_action(server['id'], {'migrate': None})
        self.assertTrue(reached.wait(30))
        before = {rp: self._get_allocations_by_provider_uuid(rp)
                  for rp in (self._get_provider_uuid_by_host('host1'),
                             self._get_provider_uuid_by_host('host2'))}
        ret = manage.PlacementCommands().audit(verbose=True, delete=True,
                                               heal=True)
        self.assertEqual(0, ret, self.output.getvalue())
        self.assertEqual(before, {
            rp: self._get_allocations_by_provider_uuid(rp)
            for rp in before})
        release.set()
        self._wait_for_state_change(server, 'VERIFY_RESIZE')
