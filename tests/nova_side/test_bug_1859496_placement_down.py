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

from keystoneauth1 import exceptions as ks_exc

from nova.conductor import manager as conductor_manager
from nova.scheduler.client import report
from nova.tests.functional import integrated_helpers


class TestDeleteInBuildWhilePlacementIsDown(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1859496.

    A server deleted while it is being built, after the scheduler claimed
    for it, must not leave the claim when placement cannot be reached
    during the delete: either the delete removes the claim or it fails in
    a way the user can retry.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self.flavor_id = self._create_flavor(vcpu=1, memory_mb=64, disk=1)

    def test_delete_while_placement_is_unreachable(self):
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
        # recreate: begin
        # FIXME: This is bug 1859496. The API destroys the build request,
        # logs that it could not delete the allocations and answers 204:
        # once the conductor has given up the build, nothing names the
        # claim any more.
        self.api.api_delete('/servers/%s' % server['id'],
                            check_response_status=[204])
        down.clear()
        release.set()
        self._wait_until_deleted(server)
        self.assertEqual(claim,
                         self._get_allocations_by_server_uuid(server['id']))
        # recreate: else
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
        # recreate: end
