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

"""Regression tests for a DELETE whose instance mapping write fails.

Related to bug 1783613 (quota usage not decremented by a delete).

https://bugs.launchpad.net/nova/+bug/1783613

What must hold: a DELETE never answers 500 on a database fault; the
server is deleted, or left in a state that accepts another DELETE, and
nothing stays wrong: once the server is deleted its instance mapping is
queued_for_delete, the quota counts it no more in either counting mode,
and placement holds nothing of it.

nova's API._delete casts terminate_instance to the server's compute and
only then marks the instance mapping queued_for_delete
(API._do_delete, _update_queued_for_deletion), in the API database:

1. A server is ACTIVE on a compute that is up.
2. The user deletes it; the API casts the delete to the compute, then the
   API database fails the mapping's write (DBConnectionError).
3. The DELETE answers 500, yet the compute deletes the server. Its
   mapping stays queued_for_delete=False: with
   [quota]count_usage_from_placement = True the quota counts the deleted
   server for ever (the instances are counted from the mappings), and no
   later request writes that mapping again.
"""

from oslo_db import exception as db_exc

from nova import context as nova_context
from nova import exception
from nova import objects
from nova.tests.functional.api import client as api_client
from nova.tests.functional import integrated_helpers

from tests.functional import base

TIMEOUT = 10


class _MappingWriteFailsTestBase(base.NovaFixesTestMixin,
                                 integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(_MappingWriteFailsTestBase, self).setUp()
        self.ctxt = nova_context.get_admin_context()
        self._start_compute('host1')

    def _fail_mapping_write(self, times=1):
        """The API database fails the next ``times`` writes that queue an
        instance mapping for deletion.

        :returns: the list the failed writes are appended to
        """
        original = objects.InstanceMapping._save_in_db
        failed = []

        def save_in_db(context, instance_uuid, updates):
            if updates.get('queued_for_delete') and len(failed) < times:
                failed.append(instance_uuid)
                raise db_exc.DBConnectionError('the API database is gone')
            return original(context, instance_uuid, updates)

        self.stub_out('nova.objects.InstanceMapping._save_in_db',
                      staticmethod(save_in_db))
        return failed

    def _server_or_none(self, server):
        try:
            return self.api.get_server(server['id'])
        except api_client.OpenStackApiNotFoundException:
            return None

    def _wait_until_gone(self, server):
        self._wait_until_deleted(server)

    def assert_not_500(self, response):
        self.assertNotEqual(500, response.status, base.STUCK +
                            'the DELETE failed with a 500: %s'
                            % (response.body,))

    def assert_deleted_and_uncounted(self, server):
        """The server is gone, its mapping queued_for_delete, the quota
        counts it in neither mode, placement holds nothing of it.
        """
        self.assertIsNone(self._server_or_none(server))
        try:
            mapping = objects.InstanceMapping.get_by_instance_uuid(
                self.ctxt, server['id'])
        except exception.InstanceMappingNotFound:
            mapping = None
        self.assertTrue(
            mapping is None or mapping.queued_for_delete,
            base.LEAK + 'the instance mapping of the deleted server is not '
            'queued_for_delete')
        for from_placement in (False, True):
            self.flags(count_usage_from_placement=from_placement,
                       group='quota')
            quota = self.api.api_get(
                '/os-quota-sets/%s/detail' % server['tenant_id']
            ).body['quota_set']
            self.assertEqual(
                {'instances': 0, 'cores': 0, 'ram': 0},
                {res: quota[res]['in_use']
                 for res in ('instances', 'cores', 'ram')},
                base.LEAK + 'quota usage of the deleted server '
                '(count_usage_from_placement=%s)' % from_placement)
        self.flags(count_usage_from_placement=False, group='quota')
        self.assert_server_left_nothing(server)


class DeleteMappingWriteFailsTest(_MappingWriteFailsTestBase):
    """Recreate: the mapping's write fails once during a DELETE of an
    ACTIVE server whose compute is up (steps 1 to 3 above).

    The DELETE must not answer 500; if it is refused (503) the server is
    still there and another DELETE, once the database answers, deletes
    it; either way nothing of it stays counted.
    """

    def test_delete(self):
        server = self._create_server(networks='none')
        failed = self._fail_mapping_write()
        response = self.api.api_delete('/servers/%s' % server['id'],
                                       check_response_status=[204, 500,
                                                              503])
        self.assertEqual([server['id']], failed,
                         'the DELETE did not meet the fault')
        self.assert_not_500(response)
        if response.status == 503:
            self.assertIsNotNone(self._server_or_none(server),
                                 'the refused DELETE deleted the server')
            self.api.api_delete('/servers/%s' % server['id'],
                                check_response_status=[204])
        self._wait_until_gone(server)
        self.assert_deleted_and_uncounted(server)


class LocalDeleteMappingWriteFailsTest(_MappingWriteFailsTestBase):
    """The mapping's write fails once during a local DELETE.

    1. A server is ACTIVE; its compute stops and is forced down.
    2. The user deletes it: the API deletes it locally (it saves the
       record DELETED, writes the mapping, destroys the record); the API
       database fails the mapping's write.
    3. nova answered 500 with the record saved DELETED and not destroyed,
       its mapping not queued_for_delete. The DELETE must not answer
       500, and a refused DELETE must be retryable: the server is gone
       and counted no more once another DELETE completes.
    """

    def test_delete(self):
        server = self._create_server(networks='none')
        compute = self.computes['host1']
        compute.stop()
        self.api.put_service(compute.service_ref.uuid,
                             {'forced_down': 'true'})
        failed = self._fail_mapping_write()
        response = self.api.api_delete('/servers/%s' % server['id'],
                                       check_response_status=[204, 500,
                                                              503])
        self.assertEqual([server['id']], failed,
                         'the DELETE did not meet the fault')
        self.assert_not_500(response)
        if response.status == 503:
            current = self._server_or_none(server)
            self.assertIsNotNone(current,
                                 'the refused DELETE deleted the server')
            self.assertIsNone(current['OS-EXT-STS:task_state'],
                              base.STUCK + 'the refused DELETE left its '
                              'task state')
            self.api.api_delete('/servers/%s' % server['id'],
                                check_response_status=[204])
        self._wait_until_gone(server)
        self.assert_deleted_and_uncounted(server)
