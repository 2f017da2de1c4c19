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

from nova.cmd import manage
from nova.scheduler.client import report
from nova.tests.functional import integrated_helpers


class TestLocalDeleteWhilePlacementIsDown(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1848343.

    The API deletes a server itself (local delete) when the compute service
    of its host is down. If placement cannot be reached then, the delete of
    the allocations is only logged and the record destroyed: nothing names
    the allocations any more. The delete must rather be refused before
    anything is destroyed, so that the user can retry it once placement
    answers.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self.flavor_id = self._create_flavor(vcpu=1, memory_mb=64, disk=1)

    def test_retry_while_the_compute_is_down(self):
        server = self._create_server(networks='none',
                                     flavor_id=self.flavor_id)
        rp_uuid = self._get_provider_uuid_by_host('host1')
        claim = self._get_allocations_by_server_uuid(server['id'])
        self.assertEqual([rp_uuid], list(claim))
        # The compute goes down and the operator forces its service down:
        # the API deletes the servers of the host itself.
        compute = self.computes['host1']
        compute.stop()
        self.admin_api.put_service(compute.service_ref.uuid,
                                   {'forced_down': True})

        failed = []
        down = threading.Event()
        original_delete = report.SchedulerReportClient.delete

        def delete(client, url, *args, **kwargs):
            if down.is_set():
                failed.append(url)
                raise ks_exc.ConnectFailure('placement is down')
            return original_delete(client, url, *args, **kwargs)

        self.stub_out('nova.scheduler.client.report.SchedulerReportClient.'
                      'delete', delete)
        down.set()
        response = self.api.api_delete('/servers/%s' % server['id'],
                                       check_response_status=[204, 503])
        down.clear()
        self.assertEqual(['/allocations/%s' % server['id']], failed)
        # recreate: begin
        # FIXME: This is bug 1848343. The API logs that placement could not
        # be reached, destroys the record and answers 204: the allocations
        # stay, with nothing naming them.
        self.assertEqual(204, response.status)
        self._wait_until_deleted(server)
        self.assertEqual(claim,
                         self._get_allocations_by_server_uuid(server['id']))
        # recreate: else
        self.assertEqual(503, response.status)
        self.assertIn('The delete can be retried',
                      response.body['serviceUnavailable']['message'])
        # Nothing was destroyed: the server and its allocations are there.
        server = self.api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertEqual(claim,
                         self._get_allocations_by_server_uuid(server['id']))
        # Placement answers again: deleting the server, again locally,
        # removes everything.
        self._delete_server(server)
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))
        # recreate: end

        # The deleted rows are archived and the compute comes back: its
        # resource tracker does not heal allocations of a server that no
        # row names.
        manage.DbCommands().archive_deleted_rows(
            max_rows=1000, until_complete=True, all_cells=True)
        self.computes['host1'] = self.restart_compute_service(compute)
        self.admin_api.put_service(compute.service_ref.uuid,
                                   {'forced_down': False})
        self._run_periodics()
        # recreate: begin
        # FIXME: This is bug 1848343. The allocations are still there.
        self.assertEqual(claim,
                         self._get_allocations_by_server_uuid(server['id']))
        # recreate: else
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))
        usage = self._get_provider_usages(rp_uuid)
        self.assertEqual({}, {rc: n for rc, n in usage.items() if n})
        # recreate: end
