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

from nova.compute import manager as compute_manager
from nova.tests.functional import integrated_helpers


class TestConfirmSourceRestartsThenDelete(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1848343.

    A cold migration is confirmed and the source compute stops right
    before it removes the allocations the migration consumer holds on the
    source node. The source compute service starts again, and the user
    deletes the server. The resource tracker only considers moves in
    progress and the delete removes the server's allocations only, so
    the restarted source must remove the allocations of the finished
    migrations it was the source of.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self._start_compute('host2')
        self.flavor_id = self._create_flavor(vcpu=1, memory_mb=64, disk=1)

    def test_delete_after_the_source_restarts(self):
        server = self._create_server(networks='none',
                                     flavor_id=self.flavor_id)
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        source_rp = self._get_provider_uuid_by_host(source)
        target_rp = self._get_provider_uuid_by_host(target)
        original = compute_manager.ComputeManager.__dict__[
            '_delete_allocation_after_move']
        # The source stops right before it removes the migration's
        # allocations: nothing of that release runs.
        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_delete_allocation_after_move',
                      lambda *args, **kwargs: None)
        self._migrate_server(server)
        server = self._confirm_resize(server)
        self.assertEqual(target, server['OS-EXT-SRV-ATTR:host'])
        migration = self.get_migration_uuid_for_instance(server['id'])
        self.assertEqual(
            [source_rp],
            list(self._get_allocations_by_server_uuid(migration)))
        self.assertEqual(
            [target_rp],
            list(self._get_allocations_by_server_uuid(server['id'])))

        # The source compute service that starts again runs nova's code.
        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_delete_allocation_after_move', original)
        self.computes[source] = self.restart_compute_service(
            self.computes[source])
        self._delete_server(server)
        # recreate: begin
        # FIXME: This is bug 1848343. Nothing removes the finished
        # migration's allocations on the source node: neither the restarted
        # source nor the delete of the server.
        self.assertEqual(
            [source_rp],
            list(self._get_allocations_by_server_uuid(migration)))
        # recreate: else
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(migration))
        for rp in (source_rp, target_rp):
            usage = self._get_provider_usages(rp)
            self.assertEqual({}, {rc: n for rc, n in usage.items() if n})
        # recreate: end
