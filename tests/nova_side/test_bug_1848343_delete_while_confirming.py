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
from nova.tests.functional import integrated_helpers


class TestDeleteWhileConfirming(integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1848343.

    The user confirms a cold migration, and deletes the server while the
    source compute runs that confirm under the server's lock. The API's
    confirm-on-delete finds the migration 'confirming' and calls
    confirm_resize on the source with the migration as it read it; the
    call waits for the lock, then confirms again what the user's confirm
    already confirmed. The DELETE must still delete the server and leave
    nothing in placement.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self._start_compute('host2')

    def test_delete_while_confirm_resize_runs(self):
        server = self._create_server(networks='none')
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        self._migrate_server(server)
        migration = self._wait_for_migration_status(server, ['finished'])
        holding = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)
        confirm_resize = compute_manager.ComputeManager.confirm_resize
        _confirm_resize = compute_manager.ComputeManager._confirm_resize

        def delete_confirms(*args, **kwargs):
            if holding.is_set():
                # The delete's confirm: it waits for the lock the user's
                # confirm holds; let that one go on.
                release.set()
            return confirm_resize(*args, **kwargs)

        def hold_first(*args, **kwargs):
            if not holding.is_set():
                holding.set()
                self.assertTrue(release.wait(60))
            return _confirm_resize(*args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.confirm_resize',
                      delete_confirms)
        self.stub_out('nova.compute.manager.ComputeManager._confirm_resize',
                      hold_first)
        self.api.post_server_action(server['id'], {'confirmResize': None})
        self.assertTrue(holding.wait(60))
        # recreate: begin
        # FIXME: This is bug 1848343. The delete's confirm trusts the
        # 'confirming' status it was given, confirms again and fails on
        # the migration context the user's confirm dropped: the server
        # goes to ERROR, the DELETE fails, and the server keeps its
        # allocations on the destination.
        self.api.api_delete('/servers/%s' % server['id'],
                            check_response_status=[500])
        self._wait_for_state_change(server, 'ERROR')
        self.assertEqual(
            [self._get_provider_uuid_by_host(target)],
            list(self._get_allocations_by_server_uuid(server['id'])))
        # recreate: else
        self._delete_server(server)
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))
        for host in (source, target):
            usage = self._get_provider_usages(
                self._get_provider_uuid_by_host(host))
            self.assertEqual({}, {rc: n for rc, n in usage.items() if n})
        # recreate: end
        self.assertEqual(
            {}, self._get_allocations_by_server_uuid(migration['uuid']))
