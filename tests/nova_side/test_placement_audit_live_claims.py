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


class TestPlacementAuditLiveClaims(
        integrated_helpers.ProviderUsageBaseTestCase):
    """nova-manage placement audit --delete must delete only what nothing
    may still use: the claims of builds and moves in flight, a live
    server's allocations on a host its guest is not on, and the
    migration of a move that is over holding the node its server runs on
    are left alone.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self._start_compute('host2')
        self.output = StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', self.output))

    def _hold(self, method):
        reached = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)
        original = getattr(compute_manager.ComputeManager, method)

        def held(*args, **kwargs):
            reached.set()
            release.wait(30)
            return original(*args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.' + method, held)
        return reached, release

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

    def _all_allocations(self):
        allocations = {}
        for host in ('host1', 'host2'):
            rp = self._get_provider_uuid_by_host(host)
            for consumer, alloc in self._get_allocations_by_provider_uuid(
                    rp).items():
                allocations.setdefault(consumer, {})[rp] = (
                    alloc['resources'])
        return allocations

    def _audit_and_check(self):
        before = self._all_allocations()
        ret = manage.PlacementCommands().audit(verbose=True, delete=True)
        output = self.output.getvalue()
        # recreate: begin
        # FIXME: The audit calls the consumer an orphan, as it is neither
        # an instance recorded on the node nor a migration in progress
        # there, and deletes what nova still uses.
        self.assertEqual(4, ret, output)
        self.assertNotEqual(before, self._all_allocations())
        # recreate: else
        self.assertEqual(0, ret, output)
        self.assertEqual(before, self._all_allocations())
        self.assertIn('left alone', output)
        # recreate: end

    def test_build_in_flight(self):
        reached, release = self._hold('build_and_run_instance')
        server = self._create_server(networks='none',
                                     expected_state='BUILD')
        self.assertTrue(reached.wait(30))
        self._audit_and_check()
        release.set()
        self._wait_for_state_change(server, 'ACTIVE')

    def test_cold_migration_in_flight(self):
        server = self._create_server(networks='none')
        reached, release = self._hold('prep_resize')
        self.api.post_server_action(server['id'], {'migrate': None})
        self.assertTrue(reached.wait(30))
        self._audit_and_check()
        release.set()
        self._wait_for_state_change(server, 'VERIFY_RESIZE')

    def test_misplaced_server(self):
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        other = 'host2' if host == 'host1' else 'host1'
        self._put_allocations(
            server['id'], {self._get_provider_uuid_by_host(other): {
                'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}}, server)
        self._audit_and_check()

    def test_ended_move_holding_the_servers_node(self):
        server = self._create_server(networks='none')
        host = server['OS-EXT-SRV-ATTR:host']
        other = 'host2' if host == 'host1' else 'host1'
        ctxt = context.get_admin_context()
        migration = objects.Migration(
            ctxt, uuid=uuids.migration, instance_uuid=server['id'],
            source_compute=host, source_node=host, dest_compute=other,
            dest_node=other, migration_type='migration', status='error',
            old_instance_type_id=1, new_instance_type_id=1)
        if 'dest_compute_id' in migration.fields:
            migration.dest_compute_id = (
                objects.ComputeNode.get_by_host_and_nodename(
                    ctxt, other, other).id)
        migration.create()
        rp = self._get_provider_uuid_by_host(host)
        held = self._get_allocations_by_server_uuid(server['id'])[rp]
        self._put_allocations(uuids.migration, {rp: held['resources']},
                              server)
        self._put_allocations(server['id'], {}, server)
        self._audit_and_check()
