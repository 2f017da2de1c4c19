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
import time

from keystoneauth1 import exceptions as ks_exc

from nova.compute import utils as compute_utils
from nova.conductor import manager as conductor_manager
from nova.scheduler.client import report
from nova.tests.functional import integrated_helpers


class TestClaimsOfServersThatNeverReachedACompute(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Regression tests for bug 1859496.

    The scheduler's claim must not outlive a server that never reached a
    compute host: neither when the conductor gives up the build after the
    claim (here: its quota recheck fails), nor when the server is deleted
    while placement cannot be reached.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self.flavor_id = self._create_flavor(vcpu=1, memory_mb=64, disk=1)

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
            self.assertEqual(
                {}, self._get_allocations_by_server_uuid(server['id']))
        for server in servers:
            self._delete_server(server)

    def _wait_for_servers(self, count):
        for _ in range(100):
            servers = self.api.get_servers(detail=False)
            if len(servers) == count:
                return servers
            time.sleep(0.1)
        self.fail('expected %d servers, found %s' % (count, servers))

    def test_delete_while_placement_is_unreachable_is_refused(self):
        scheduled = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)
        original = conductor_manager.ComputeTaskManager._schedule_instances

        def schedule(*args, **kwargs):
            # The scheduler has claimed; the conductor is held before it
            # creates the instance in its cell.
            result = original(*args, **kwargs)
            scheduled.set()
            release.wait(60)
            return result

        self.stub_out('nova.conductor.manager.ComputeTaskManager.'
                      '_schedule_instances', schedule)
        server = self._create_server(networks='none',
                                     flavor_id=self.flavor_id,
                                     expected_state='BUILD')
        self.assertTrue(scheduled.wait(60))
        claim = self._get_allocations_by_server_uuid(server['id'])
        self.assertNotEqual({}, claim)

        down = threading.Event()
        original_delete = report.SchedulerReportClient.delete

        def delete(client, url, *args, **kwargs):
            if down.is_set():
                raise ks_exc.ConnectFailure('placement is down')
            return original_delete(client, url, *args, **kwargs)

        self.stub_out('nova.scheduler.client.report.SchedulerReportClient.'
                      'delete', delete)
        down.set()
        response = self.api.api_delete('/servers/%s' % server['id'],
                                       check_response_status=[503])
        down.clear()
        self.assertIn('The delete can be retried',
                      response.body['serviceUnavailable']['message'])
        # Nothing was destroyed: the server and its claim are still there.
        self.assertEqual('BUILD',
                         self.api.get_server(server['id'])['status'])
        self.assertEqual(claim,
                         self._get_allocations_by_server_uuid(server['id']))

        self.api.delete_server(server['id'])
        release.set()
        self._wait_until_deleted(server)
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))
