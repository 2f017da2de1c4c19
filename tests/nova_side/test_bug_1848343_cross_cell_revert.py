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

import threading

from nova.conductor import manager as conductor_manager
from nova.policies import base as base_policies
from nova.policies import servers as servers_policies
from nova.tests.functional import integrated_helpers


class TestDeleteBeforeCrossCellRevert(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1848343.

    A server is resized from host1 in cell1 to host2 in cell2 and the user
    reverts the resize. Before the conductor runs the revert, the user
    deletes the server: its instance mapping names cell2, so the copy
    there is deleted. The conductor's revert then points the mapping back
    at cell1 and shows the copy there again: the deleted server is back,
    counted in its project's quota usage. Its delete must remove it in
    both cells, and leave nothing in placement.
    """
    compute_driver = 'fake.MediumFakeDriver'
    NUMBER_OF_CELLS = 2

    def setUp(self):
        super().setUp()
        # Nobody may resize across cells by default: allow the admin to.
        self.policy.set_rules(
            {servers_policies.CROSS_CELL_RESIZE: base_policies.RULE_ADMIN_API},
            overwrite=False)
        self._start_compute('host1', cell_name='cell1')
        self.small = self._create_flavor(vcpu=1, memory_mb=512, disk=1)
        self.bigger = self._create_flavor(vcpu=2, memory_mb=1024, disk=1)

    def test_delete_before_cross_cell_revert(self):
        server = self._create_server(networks='none', flavor_id=self.small)
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        # Only now is there a host in cell2, for the resize to go to.
        self._start_compute('host2', cell_name='cell2')
        server = self._resize_server(server, self.bigger)
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        migration = self._wait_for_migration_status(server, ['finished'])

        reverted = threading.Event()
        manager = conductor_manager.ComputeTaskManager
        original = manager.revert_snapshot_based_resize

        def revert_snapshot_based_resize(*args, **kwargs):
            try:
                # The user deletes the server before the conductor reverts.
                self._delete_server(server)
                return original(*args, **kwargs)
            finally:
                reverted.set()

        self.stub_out('nova.conductor.manager.ComputeTaskManager.'
                      'revert_snapshot_based_resize',
                      revert_snapshot_based_resize)
        self.api.post_server_action(server['id'], {'revertResize': None})
        self.assertTrue(reverted.wait(60))
        # recreate: begin
        # FIXME: This is bug 1848343. The revert pointed the instance
        # mapping back at cell1, and the deleted server is back there, on
        # host1 (in ERROR: the revert failed to hide the deleted cell2 copy),
        # counted in the project's usage.
        server = self.api.get_server(server['id'])
        self.assertEqual(('ERROR', 'host1'),
                         (server['status'], server['OS-EXT-SRV-ATTR:host']))
        self.assertEqual([server['id']],
                         [s['id'] for s in self.api.get_servers()])
        # ... and its migration stays 'reverting'.
        self.assertEqual(['reverting'], [
            m['status'] for m in self.admin_api.get_migrations()
            if m['uuid'] == migration['uuid']])
        # recreate: else
        host1_rp = self._get_provider_uuid_by_host('host1')
        self._wait_until_deleted(server)
        self.assertEqual([], self.api.get_servers())
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))
        self.assertEqual(
            {}, self._get_allocations_by_server_uuid(migration['uuid']))
        usage = self._get_provider_usages(host1_rp)
        self.assertEqual({}, {rc: n for rc, n in usage.items() if n})
        # recreate: end
