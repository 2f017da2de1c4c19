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

import oslo_messaging as messaging

from nova.scheduler.client import query
from nova.tests.functional import integrated_helpers


class TestBuriedInCell0AfterTheClaim(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1859496.

    When the scheduler's reply to the conductor is lost after it claimed
    for a server, the conductor buries the server in cell0, in ERROR: the
    claim must go with it, since the server never reached a compute host.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self.flavor_id = self._create_flavor(vcpu=1, memory_mb=64, disk=1)

    def test_lost_scheduler_reply_buries_the_server_without_its_claim(self):
        original = query.SchedulerQueryClient.select_destinations
        claimed = []

        def select_destinations(client, *args, **kwargs):
            claimed.append(original(client, *args, **kwargs))
            raise messaging.MessagingTimeout('the reply was lost')

        self.stub_out('nova.scheduler.client.query.SchedulerQueryClient.'
                      'select_destinations', select_destinations)
        server = self._create_server(networks='none',
                                     flavor_id=self.flavor_id,
                                     expected_state='ERROR')
        self.assertEqual(1, len(claimed))
        self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])
        allocations = self._get_allocations_by_server_uuid(server['id'])
        # recreate: begin
        # FIXME: This is bug 1859496. The server is buried in cell0 with
        # the scheduler's claim on host1, where it never ran.
        self.assertEqual([self._get_provider_uuid_by_host('host1')],
                         list(allocations))
        # recreate: else
        self.assertEqual({}, allocations)
        # recreate: end
        self._delete_server(server)
