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

from nova.compute import manager as compute_manager
from nova.policies import base as base_policies
from nova.policies import servers as servers_policies
from nova.tests.functional import integrated_helpers


class TestDeleteWhileCrossCellConfirming(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1848343.

    A server is resized from host1 in cell1 to host2 in cell2 and the user
    confirms the resize. While the source compute runs that confirm under
    the server's lock, the user deletes the server: the API's
    confirm-on-delete calls the conductor, whose second task calls the
    source too, and that call waits for the lock. The user's confirm then
    returns and its task hard-deletes the copy of the server in cell1 with
    its instance actions. The DELETE must still delete the server and leave
    nothing in placement.
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

    def test_delete_while_cross_cell_confirm_runs(self):
        server = self._create_server(networks='none', flavor_id=self.small)
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        # Only now is there a host in cell2, for the resize to go to.
        self._start_compute('host2', cell_name='cell2')
        server = self._resize_server(server, self.bigger)
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        migration = self._wait_for_migration_status(server, ['finished'])
        holding = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)
        manager = compute_manager.ComputeManager
        at_source = manager.confirm_snapshot_based_resize_at_source
        _at_source = manager._confirm_snapshot_based_resize_at_source

        def delete_confirms(*args, **kwargs):
            if holding.is_set():
                # The delete's confirm: it waits for the lock the user's
                # confirm holds; let that one go on.
                release.set()
            return at_source(*args, **kwargs)

        def hold_first(*args, **kwargs):
            if not holding.is_set():
                holding.set()
                self.assertTrue(release.wait(60))
            return _at_source(*args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.'
                      'confirm_snapshot_based_resize_at_source',
                      delete_confirms)
        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_confirm_snapshot_based_resize_at_source', hold_first)
        self.api.post_server_action(server['id'], {'confirmResize': None})
        self.assertTrue(holding.wait(60))
        # recreate: begin
        # FIXME: This is bug 1848343. The delete's confirm fails on the
        # instance action the user's confirm hard-deleted with the copy in
        # cell1 (InstanceActionNotFound): its task rolls back, the server
        # goes to ERROR, the DELETE fails, and the server keeps its
        # allocations on host2.
        self.api.api_delete('/servers/%s' % server['id'],
                            check_response_status=[500])
        self._wait_for_state_change(server, 'ERROR')
        self.assertEqual(
            [self._get_provider_uuid_by_host('host2')],
            list(self._get_allocations_by_server_uuid(server['id'])))
        # recreate: else
        self._delete_server(server)
        self.assertEqual([], self.api.get_servers())
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))
        for host in ('host1', 'host2'):
            usage = self._get_provider_usages(
                self._get_provider_uuid_by_host(host))
            self.assertEqual({}, {rc: n for rc, n in usage.items() if n})
        # recreate: end
        self.assertEqual(
            {}, self._get_allocations_by_server_uuid(migration['uuid']))
