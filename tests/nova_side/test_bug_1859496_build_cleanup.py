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

import time

from nova.compute import utils as compute_utils
from nova.tests.functional import integrated_helpers


class TestBuildGivenUpAfterTheClaim(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1859496.

    When the conductor gives up a build after the scheduler claimed for
    it (here: its quota recheck fails), the claim must go with the build:
    the server never reached a compute host.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self.flavor_id = self._create_flavor(vcpu=1, memory_mb=64, disk=1)

    def _wait_for_servers(self, count):
        for _ in range(100):
            servers = self.api.get_servers(detail=False)
            if len(servers) == count:
                return servers
            time.sleep(0.1)
        self.fail('expected %d servers, found %s' % (count, servers))

    def test_quota_recheck_failure_drops_the_claim(self):
        self.flags(instances=2, group='quota')
        original = compute_utils.check_num_instances_quota
        rechecked = []

        def check(context, flavor, min_count, max_count, **kwargs):
            if (min_count, max_count) == (0, 0):
                # The conductor's recheck, after the scheduler claimed. A
                # concurrent request of the project, or an admin, lowered
                # the quota after the API checked it.
                self.flags(instances=1, group='quota')
                rechecked.append(True)
            return original(context, flavor, min_count, max_count, **kwargs)

        self.stub_out('nova.compute.utils.check_num_instances_quota', check)
        self.api.post_server({'server': {
            'name': 'server', 'flavorRef': self.flavor_id,
            'imageRef': '155d900f-4e14-4e4c-a73d-069cbf4541e6',
            'networks': 'none', 'min_count': 2, 'max_count': 2}})
        servers = [self._wait_for_state_change(server, 'ERROR')
                   for server in self._wait_for_servers(2)]
        self.assertTrue(rechecked)
        for server in servers:
            self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])
            allocations = self._get_allocations_by_server_uuid(server['id'])
            # recreate: begin
            # FIXME: This is bug 1859496. The conductor gave the build up
            # but kept the scheduler's claim: the server holds resources
            # on host1, where it never ran.
            self.assertEqual([self._get_provider_uuid_by_host('host1')],
                             list(allocations))
            # recreate: else
            self.assertEqual({}, allocations)
            # recreate: end
        for server in servers:
            self._delete_server(server)
