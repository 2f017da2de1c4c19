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

"""Regression test for bug 1859496.

Deleting a server stuck in BUILD leaks its allocations:
https://bugs.launchpad.net/nova/+bug/1859496

The conductor builds a multi-create request in two steps: the scheduler
claims every instance's resources in placement and replies to the
conductor's select_destinations call, then the conductor creates the
instances in their cell. If the message bus fails in between, the servers
stay in BUILD with nothing but their build requests. Deleting such a server
is the API's _delete_while_booting path: it deletes the build request, and
before the fix nothing deleted the allocations the scheduler had made.
Since the instances never reached a cell, no resource tracker knows them
and the update_available_resource periodic cannot heal the leak either.

Fixed upstream by nova commit f35930eef8 (nova 21.0.0), which added
nova.compute.api.API._local_delete_cleanup: the API deletes the
allocations and queues the instance mapping for deletion.
"""

import threading

from nova.conductor import manager as conductor_manager
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.tests.functional import integrated_helpers
import oslo_messaging
from oslo_messaging._drivers import impl_fake

from tests.functional import base

#: The upstream fix, as NOVA_FIXES_WITHOUT names it.
NUM_SERVERS = 50
# 1 VCPU, 64 MB of RAM and 1 GB of disk: three resource classes, so each
# server has three allocation rows (the reporter saw 150 for 50 servers).
# A MediumFakeDriver host offers 40 VCPU (10 at the initial allocation
# ratio of 4.0), 7680 MB (8192 less 512 reserved) and 1028 GB: two hosts
# take the 50 servers, and both have to.
FLAVOR = dict(vcpu=1, memory_mb=64, disk=1, ephemeral=0)
# How long a test waits for a nova thread before it gives up.
TIMEOUT = 60


class DeleteServersStuckInBuildTest(
        base.NovaFixesTestMixin, integrated_helpers.ProviderUsageBaseTestCase):
    """Regression test for bug 1859496: the reporter's reproduction.

    50 servers in one request; the message bus fails after the scheduler
    has claimed them in placement; the user deletes the 50 servers, stuck
    in BUILD.
    """

    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(DeleteServersStuckInBuildTest, self).setUp()
        # Quota for exactly the 50 servers (nova's defaults allow 10).
        self.flags(instances=NUM_SERVERS, cores=NUM_SERVERS * FLAVOR['vcpu'],
                   ram=NUM_SERVERS * FLAVOR['memory_mb'], group='quota')
        self._start_compute('host1')
        self._start_compute('host2')
        self.flavor_id = self._create_flavor(**FLAVOR)
        self.ctxt = nova_context.get_admin_context()

    # -- the outage ----------------------------------------------------

    def _lose_scheduler_reply(self):
        """Lose the scheduler's reply to select_destinations on the bus.

        The outage is in oslo.messaging's fake driver, which carries every
        RPC message of the test: FakeDriver.send of the conductor's
        select_destinations call delivers the call, the scheduler claims
        the resources in placement and replies, and the reply is lost as it
        reaches the conductor. The conductor, blocked in the call, gets the
        MessagingTimeout that oslo.messaging raises for a reply that never
        came when the test ends the outage, after the deletes. (Dropping
        the reply on the scheduler's side would leave the conductor waiting
        for long_rpc_timeout, 30 minutes: the fake driver has no call
        monitor.)

        :returns: (claimed, bus_back): claimed is set once the scheduler has
            replied, so the allocations exist; set bus_back to end the
            outage.
        """
        claimed = threading.Event()
        bus_back = threading.Event()
        self.addCleanup(bus_back.set)
        original = impl_fake.FakeDriver.send

        def send(driver, target, ctxt, message, *args, **kwargs):
            reply = original(driver, target, ctxt, message, *args, **kwargs)
            if message.get('method') != 'select_destinations':
                return reply
            claimed.set()
            bus_back.wait()
            raise oslo_messaging.MessagingTimeout(
                'No reply on topic %s' % target.topic)

        self.stub_out('oslo_messaging._drivers.impl_fake.FakeDriver.send',
                      send)
        return claimed, bus_back

    def _watch_conductor_build(self):
        """An event set once the conductor's schedule_and_build_instances
        has returned (or raised). Observation only: a cast's end leaves no
        trace on the bus.
        """
        done = threading.Event()
        # Registered before the outage's end (cleanups run last first): if
        # the test fails during the outage, the conductor finishes before
        # the services stop.
        self.addCleanup(done.wait, TIMEOUT)
        original = (
            conductor_manager.ComputeTaskManager.schedule_and_build_instances)

        def wrapper(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            finally:
                done.set()

        self.stub_out('nova.conductor.manager.ComputeTaskManager.'
                      'schedule_and_build_instances', wrapper)
        return done

    # -- what is left --------------------------------------------------

    def _assert_stuck_in_build(self, servers):
        """The reporter's state: every server in BUILD with only a build
        request, and the scheduler's allocations in placement.
        """
        self.assertEqual(NUM_SERVERS, len(servers))
        self.assertEqual({'BUILD'}, {s['status'] for s in servers})
        uuids = {s['id'] for s in servers}
        allocations = self._all_allocations()
        self.assertEqual(uuids, set(allocations),
                         'the scheduler did not claim for every server')
        rows = sum(len(resources) for allocs in allocations.values()
                   for resources in allocs.values())
        self.assertEqual(3 * NUM_SERVERS, rows)
        build_requests = objects.BuildRequestList.get_all(self.ctxt)
        self.assertEqual(uuids, {br.instance_uuid for br in build_requests})
        for cctxt in self._cell_contexts():
            self.assertEqual(
                0, len(objects.InstanceList.get_all(cctxt)),
                'an instance reached a cell: the outage came too late')

    def _assert_placement_clean(self, when):
        for rp in self._get_all_providers():
            self.assertEqual(
                {}, self._get_allocations_by_provider_uuid(rp['uuid']),
                base.LEAK + 'allocations on provider %s %s'
                % (rp['name'], when))
            usages = self._get_provider_usages(rp['uuid'])
            self.assertEqual(
                {}, {rc: used for rc, used in usages.items() if used},
                base.LEAK + 'usage on provider %s %s' % (rp['name'], when))
        self.assert_no_leaked_allocations()

    def _assert_nothing_left(self, servers, when):
        self._assert_placement_clean(when)
        uuids = [s['id'] for s in servers]
        not_queued = [
            uuid for uuid in uuids
            if not objects.InstanceMapping.get_by_instance_uuid(
                self.ctxt, uuid).queued_for_delete]
        self.assertEqual([], not_queued, base.LEAK + 'instance mappings '
                         'not queued_for_delete %s' % when)
        left = []
        for uuid in uuids:
            try:
                objects.BuildRequest.get_by_instance_uuid(self.ctxt, uuid)
                left.append(uuid)
            except exception.BuildRequestNotFound:
                pass
        self.assertEqual([], left, base.LEAK + 'build requests %s' % when)
        quota = self.api.api_get('/os-quota-sets/%s/detail'
                                 % servers[0]['tenant_id']).body['quota_set']
        in_use = {res: quota[res]['in_use']
                  for res in ('instances', 'cores', 'ram')}
        self.assertEqual({'instances': 0, 'cores': 0, 'ram': 0}, in_use,
                         base.LEAK + 'quota usage %s' % when)

    # -- the scenario --------------------------------------------------

    def test_delete_servers_stuck_in_build(self):
        """The message bus fails after the scheduler claimed for 50 servers.

        1. One request creates 50 servers; the conductor calls the
           scheduler's select_destinations.
        2. The scheduler claims the 50 servers' resources in placement (150
           allocation rows) and replies; the reply is lost on the bus.
        3. The conductor waits for the reply: the servers are in BUILD, with
           build requests only, nothing in a cell.
        4. The user deletes the 50 servers: the API deletes their build
           requests. Nothing may be left, already: a conductor restarted
           meanwhile never comes back to these servers.
        5. The outage ends: the conductor's call times out, it buries the
           servers in cell0 and finds their build requests gone. Nothing may
           be left still, nor once the deleted rows are archived and the
           resource trackers have run their periodic task.
        """
        built = self._watch_conductor_build()
        claimed, bus_back = self._lose_scheduler_reply()
        request = self._build_server(flavor_id=self.flavor_id,
                                     networks='none')
        request.update(min_count=NUM_SERVERS, max_count=NUM_SERVERS,
                       return_reservation_id=True)
        reservation = self.api.post_server({'server': request})
        self.assertTrue(claimed.wait(TIMEOUT),
                        'Timed out waiting for select_destinations')
        servers = self.api.get_servers(search_opts={
            'reservation_id': reservation['reservation_id']})
        self._assert_stuck_in_build(servers)

        for server in servers:
            self.delete_server_and_wait(server)
        self._assert_nothing_left(servers, 'after the delete, during the '
                                  'outage')

        bus_back.set()
        self.assertTrue(built.wait(TIMEOUT),
                        'Timed out waiting for the conductor to give up')
        self._assert_nothing_left(servers, 'once the conductor gave up')

        self.archive_and_run_periodics()
        self._assert_placement_clean(
            'after archive_deleted_rows and the resource tracker periodic')


class DeleteServersStuckInBuildPlacementQuotaTest(
        DeleteServersStuckInBuildTest):
    """Regression test for bug 1859496, usage counted from placement.

    With [quota]count_usage_from_placement the leaked allocations are the
    quota usage: without the fix, the 50 deleted servers keep the whole
    quota and the user can boot nothing more.
    """

    def setUp(self):
        super(DeleteServersStuckInBuildPlacementQuotaTest, self).setUp()
        self.flags(count_usage_from_placement=True, group='quota')
