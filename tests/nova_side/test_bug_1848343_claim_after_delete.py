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
from nova.scheduler import utils as scheduler_utils
from nova.tests.functional import integrated_helpers


class TestLiveMigrationClaimAfterDelete(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1848343.

    The scheduler's claim for a live migration can land after the server
    was deleted, and create the deleted server's consumer again on the
    destination. No compute-side step of a live migration claims, so none
    notices the deleted server: the claim must not outlive the move.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self._start_compute('host2')
        self.flavor_id = self._create_flavor(vcpu=1, memory_mb=64, disk=1)

    def test_claim_lands_after_the_delete(self):
        server = self._create_server(networks='none',
                                     flavor_id=self.flavor_id)
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        claim_resources = scheduler_utils.claim_resources
        claimed = []

        def claim(ctx, client, spec_obj, instance_uuid, *args, **kwargs):
            if instance_uuid == server['id'] and not claimed:
                # The user deletes the server while the scheduler picks
                # the destination for its live migration.
                self._delete_server(server)
            claimed.append(claim_resources(ctx, client, spec_obj,
                                           instance_uuid, *args, **kwargs))
            return claimed[-1]

        self.stub_out('nova.scheduler.utils.claim_resources', claim)
        # The source would go on to live migrate the deleted guest.
        self.stub_out('nova.compute.rpcapi.ComputeAPI.live_migration',
                      lambda *args, **kwargs: None)
        done = threading.Event()
        original = conductor_manager.ComputeTaskManager.live_migrate_instance

        def live_migrate_instance(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            finally:
                done.set()

        self.stub_out('nova.conductor.manager.ComputeTaskManager.'
                      'live_migrate_instance', live_migrate_instance)
        self.api.post_server_action(server['id'], {'os-migrateLive': {
            'host': None, 'block_migration': 'auto'}})
        self.assertTrue(done.wait(60))
        self.assertEqual([True], claimed)
        target_rp = self._get_provider_uuid_by_host(target)
        # recreate: begin
        # FIXME: This is bug 1848343. The claim created the deleted
        # server's consumer again on the destination, and nothing removes
        # it.
        self.assertEqual(
            [target_rp],
            list(self._get_allocations_by_server_uuid(server['id'])))
        # recreate: else
        usage = self._get_provider_usages(target_rp)
        self.assertEqual({}, {rc: n for rc, n in usage.items() if n})
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))
        # recreate: end
