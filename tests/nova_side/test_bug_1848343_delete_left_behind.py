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

import datetime

from oslo_utils import timeutils

import nova.conf
from nova import context
from nova import objects
from nova.tests.functional import integrated_helpers

CONF = nova.conf.CONF


class TestDeleteLeftBehind(integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1848343.

    The user deletes a server whose compute is up. The API saves task_state
    'deleting' and its process stops right then (restarted, killed, its
    worker recycled), before it casts the delete to the compute. Every
    later DELETE of a server in 'deleting' whose compute is up is ignored
    ("already in deleting state"), so the server must not stay for good
    with its guest and its allocations: a delete left behind for longer
    than [DEFAULT]rpc_response_timeout is sent again.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self.compute = self._start_compute('host1')
        self.flavor_id = self._create_flavor(vcpu=1, memory_mb=64, disk=1)

    def test_delete_again(self):
        server = self._create_server(networks='none',
                                     flavor_id=self.flavor_id)
        rp_uuid = self._get_provider_uuid_by_host('host1')
        # What the stopped DELETE left: task_state 'deleting', saved longer
        # ago than an RPC call waits for its reply, and no delete cast.
        ctxt = context.get_admin_context()
        with context.target_cell(ctxt, self.cell_mappings['cell1']) as cctxt:
            instance = objects.Instance.get_by_uuid(cctxt, server['id'])
            instance.task_state = 'deleting'
            instance.updated_at = timeutils.utcnow() - datetime.timedelta(
                seconds=CONF.rpc_response_timeout + 60)
            instance.save()
            instance.refresh()
        self.assertEqual('deleting', instance.task_state)
        self.assertTrue(timeutils.is_older_than(instance.updated_at,
                                                CONF.rpc_response_timeout))

        # The user deletes it again: the DELETE answers 204 either way.
        self.api.delete_server(server['id'])
        # recreate: begin
        # FIXME: This is bug 1848343. The API ignored the DELETE of a server
        # in 'deleting' whose compute is up: it returned without recording
        # a delete action or casting the delete, and the server stays for
        # good, with its guest and its allocations.
        actions = self.api.get_instance_actions(server['id'])
        self.assertEqual(['create'], [a['action'] for a in actions])
        server = self.api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual('deleting', server['OS-EXT-STS:task_state'])
        self.assertEqual(
            [rp_uuid],
            list(self._get_allocations_by_server_uuid(server['id'])))
        self.assertIn(server['id'], self.compute.driver.list_instance_uuids())
        # recreate: else
        self._wait_until_deleted(server)
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))
        usage = self._get_provider_usages(rp_uuid)
        self.assertEqual({}, {rc: n for rc, n in usage.items() if n})
        self.assertNotIn(server['id'],
                         self.compute.driver.list_instance_uuids())
        # recreate: end
