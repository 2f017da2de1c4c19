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

"""Regression tests for the windows bug 1859496's fix left open.

https://bugs.launchpad.net/nova/+bug/1859496 (deleting a server stuck in
BUILD leaks its allocations) was fixed by nova commit f35930eef8 (nova
21.0.0): when the API deletes a server that has not reached a cell, it
deletes the server's allocations (API._local_delete_cleanup). What a
scheduler claimed for a server can still be left behind:

1. The conductor gives up a build after the scheduler's claim, in
   ComputeTaskManager._cleanup_build_artifacts (the quota recheck failed,
   or the resource provider mapping of an instance could not be filled):
   the servers go to ERROR in their cell, on no host, and keep the claim
   until the user deletes them. Fixed by the drop-in of
   _cleanup_build_artifacts.
2. The API deletes a server in BUILD while placement cannot be reached:
   the delete of the allocations is only logged, after the build request
   is gone, and nothing names the allocations any more. Fixed by the
   drop-in of API._delete_while_booting, which refuses the delete (503)
   before destroying anything.
3. The API deletes the server before the scheduler's claim lands, and the
   conductor dies before its build request check: out of reach, see
   ClaimAfterDeleteTest; ``nova-manage placement audit --delete`` removes
   it.
4. The conductor buries the server in cell0 after the scheduler claimed
   (its reply was lost): ComputeTaskManager._bury_in_cell0 keeps the
   claim until the user deletes the server. Fixed by the drop-in of
   _bury_in_cell0.
"""

import threading

import requests

from nova.compute import manager as compute_manager
from nova.compute import rpcapi as compute_rpcapi
from nova.compute import utils as compute_utils
from nova.conductor import manager as conductor_manager
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.tests.functional import integrated_helpers
import oslo_messaging
from oslo_messaging._drivers import impl_fake

from tests.functional import base

# 1 VCPU, 64 MB of RAM and 1 GB of disk.
FLAVOR = dict(vcpu=1, memory_mb=64, disk=1, ephemeral=0)
FLAVOR_RESOURCES = {'VCPU': 1, 'MEMORY_MB': 64, 'DISK_GB': 1}
# How long a test waits for a nova thread before it gives up.
TIMEOUT = 60


class _WindowsTestBase(
        base.NovaFixesTestMixin, integrated_helpers.ProviderUsageBaseTestCase):

    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(_WindowsTestBase, self).setUp()
        self._start_compute('host1')
        self.flavor_id = self._create_flavor(**FLAVOR)
        self.ctxt = nova_context.get_admin_context()

    # -- driving nova --------------------------------------------------

    def _boot(self, count):
        """Create ``count`` servers in one request; returns them."""
        request = self._build_server(flavor_id=self.flavor_id,
                                     networks='none')
        request.update(min_count=count, max_count=count,
                       return_reservation_id=True)
        reservation = self.api.post_server({'server': request})
        servers = self.api.get_servers(search_opts={
            'reservation_id': reservation['reservation_id']})
        self.assertEqual(count, len(servers))
        return servers

    # -- what nova knows -----------------------------------------------

    def _build_request_exists(self, server):
        try:
            objects.BuildRequest.get_by_instance_uuid(self.ctxt, server['id'])
        except exception.BuildRequestNotFound:
            return False
        return True

    def _instance_in_a_cell(self, server):
        for cctxt in self._cell_contexts():
            try:
                objects.Instance.get_by_uuid(cctxt, server['id'])
            except exception.InstanceNotFound:
                continue
            return True
        return False

    def _quota_in_use(self, server):
        quota = self.api.api_get('/os-quota-sets/%s/detail'
                                 % server['tenant_id']).body['quota_set']
        return {res: quota[res]['in_use']
                for res in ('instances', 'cores', 'ram')}

    def _usage(self):
        """{provider name: {resource class: used}}, non-zero uses only."""
        usage = {}
        for rp in self._get_all_providers():
            used = {rc: n for rc, n in
                    self._get_provider_usages(rp['uuid']).items() if n}
            if used:
                usage[rp['name']] = used
        return usage

    def _assert_placement_clean(self, when):
        self.assertEqual({}, self._all_allocations(),
                         base.LEAK + 'allocations in placement %s' % when)
        self.assertEqual({}, self._usage(),
                         base.LEAK + 'usage in placement %s' % when)

    def _delete_and_assert_left_nothing(self, servers):
        for server in servers:
            self.delete_server_and_wait(server)
        for server in servers:
            self.assert_server_left_nothing(server)
        self.assertEqual({'instances': 0, 'cores': 0, 'ram': 0},
                         self._quota_in_use(servers[0]),
                         base.LEAK + 'quota usage once the servers are '
                         'deleted')
        self._assert_placement_clean('once the servers are deleted')


# -- window 1: the conductor's _cleanup_build_artifacts ---------------------


class BuildCleanupQuotaRecheckTest(_WindowsTestBase):
    """Window 1: the conductor's quota recheck fails after the claim.

    The API checks the quota and accepts a request for two servers; before
    the conductor rechecks it (after the scheduler claimed, with the
    instances created in the cell), the project's quota is lowered to one
    instance, as a concurrent request of the project or an admin would.
    _cleanup_build_artifacts puts both servers in ERROR.
    """

    def setUp(self):
        super(BuildCleanupQuotaRecheckTest, self).setUp()
        self.flags(instances=2, group='quota')

    def _assert_quota_of_failed_servers(self, servers):
        """The quota usage of the servers the conductor gave up: counted
        from the cell databases, servers in ERROR consume their cores and
        RAM whatever they hold in placement.
        """
        self.assertEqual({'instances': 2, 'cores': 2, 'ram': 128},
                         self._quota_in_use(servers[0]))

    def _watch_quota_recheck(self, before):
        """An event set once the conductor has rechecked the quota, having
        called ``before`` first.

        nova 27 and later recheck in ComputeTaskManager._recheck_quota;
        nova 26 (2022.2) rechecks inline in schedule_and_build_instances.
        Both call compute_utils.check_num_instances_quota with no new
        instances (0, 0), which the API's own check never does.
        """
        if hasattr(conductor_manager.ComputeTaskManager, '_recheck_quota'):
            return self.watch(conductor_manager.ComputeTaskManager,
                              '_recheck_quota', before=before)
        done = threading.Event()
        self.addCleanup(done.set)
        original = compute_utils.check_num_instances_quota

        def check(context, flavor, min_count, max_count, **kwargs):
            if (min_count, max_count) != (0, 0):
                return original(context, flavor, min_count, max_count,
                                **kwargs)
            try:
                before()
                return original(context, flavor, min_count, max_count,
                                **kwargs)
            finally:
                done.set()

        self.stub_out('nova.compute.utils.check_num_instances_quota', check)
        return done

    def test_quota_recheck_fails(self):
        """1. One request for two servers passes the API's quota check.
        2. The scheduler claims both; the conductor creates both instances
           in the cell, and the quota is lowered to one instance before its
           recheck.
        3. The recheck fails: both servers are in ERROR, on no host, having
           never reached a compute. They may not hold anything in
           placement, even after the resource tracker periodic has run.
        4. Deleting them leaves nothing.
        """
        def lower_quota():
            self.flags(instances=1, group='quota')

        rechecked = self._watch_quota_recheck(lower_quota)
        cleaned = self.watch(conductor_manager.ComputeTaskManager,
                             '_cleanup_build_artifacts')
        servers = self._boot(2)
        self.wait_for(cleaned, 'the conductor to clean up the build')
        self.assertTrue(rechecked.is_set())

        failed = []
        for server in servers:
            server = self._wait_for_state_change(server, 'ERROR')
            self.assertIn('Quota exceeded', server['fault']['message'])
            server = self.admin_api.get_server(server['id'])
            self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])
            failed.append(server)

        self._run_periodics()
        self._assert_quota_of_failed_servers(failed)
        held = {server['id']: self._get_allocations_by_server_uuid(
            server['id']) for server in failed}
        self.assertEqual(
            {}, {uuid: allocs for uuid, allocs in held.items() if allocs},
            base.LEAK + 'allocations of servers in ERROR that never reached '
            'a compute host, after the resource tracker periodic')
        self.assertEqual({}, self._usage(),
                         base.LEAK + 'usage of servers that never ran')

        self._delete_and_assert_left_nothing(failed)


class BuildCleanupQuotaRecheckPlacementQuotaTest(BuildCleanupQuotaRecheckTest):
    """Window 1, quota usage counted from placement.

    With [quota]count_usage_from_placement the claim the conductor keeps is
    the quota usage for cores and RAM: the servers in ERROR that never ran
    are charged to the user, unlike every other server in ERROR that never
    ran (nova documents that those do not consume cores and RAM then).
    """

    def setUp(self):
        super(BuildCleanupQuotaRecheckPlacementQuotaTest, self).setUp()
        self.flags(count_usage_from_placement=True, group='quota')

    def _assert_quota_of_failed_servers(self, servers):
        self.assertEqual({'instances': 2, 'cores': 0, 'ram': 0},
                         self._quota_in_use(servers[0]),
                         base.LEAK + 'quota usage (counted from placement) '
                         'of two servers in ERROR that never ran')


class BuildCleanupProviderMappingTest(_WindowsTestBase):
    """Window 1: the resource provider mapping of an instance fails.

    One request for two servers; the conductor hands the first to its
    compute, then filling the resource provider mapping of the second
    fails (simulated: the scheduler's selection lacks a mapping).
    _cleanup_build_artifacts puts both in ERROR: the second never reaches
    a compute and may keep nothing; the first is being built by its
    compute, which goes on, and must keep its allocations.
    """

    def test_provider_mapping_fails(self):
        """1. One request for two servers; the scheduler claims both.
        2. The conductor casts the first one's build to host1, whose compute
           waits for the conductor's cleanup to be over.
        3. Filling the resource provider mapping of the second one fails;
           the conductor cleans up.
        4. The first server is built on host1 and keeps its allocations.
        5. The second, in ERROR on no host, may hold nothing in placement,
           even after the resource tracker periodic.
        6. Deleting both leaves nothing.
        """
        cleaned = self.watch(conductor_manager.ComputeTaskManager,
                             '_cleanup_build_artifacts')
        cast = []
        arrived = threading.Event()
        build = compute_manager.ComputeManager.build_and_run_instance

        def build_after_cleanup(manager, context, *args, **kwargs):
            cast.append(kwargs['instance'].uuid)
            arrived.set()
            cleaned.wait(TIMEOUT)
            return build(manager, context, *args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.'
                      'build_and_run_instance', build_after_cleanup)
        fill = conductor_manager.scheduler_utils.fill_provider_mapping
        fills = []

        def fill_mapping(request_spec, host_selection):
            fills.append(request_spec.instance_uuid)
            if len(fills) == 2:
                raise exception.NovaException(
                    'No resource provider mapping for a request group')
            return fill(request_spec, host_selection)

        self.stub_out('nova.scheduler.utils.fill_provider_mapping',
                      fill_mapping)

        servers = {s['id']: s for s in self._boot(2)}
        self.wait_for(cleaned, 'the conductor to clean up the build')
        # The cast to host1 is asynchronous: it may reach the compute after
        # the conductor's cleanup is over.
        self.wait_for(arrived, 'the first build to reach host1')
        self.assertEqual(2, len(fills))
        self.assertEqual(fills[:1], cast)
        built, failed = servers[fills[0]], servers[fills[1]]

        built = self._wait_for_state_change(built, 'ACTIVE')
        self.assertEqual(
            {self._get_provider_uuid_by_host('host1'): FLAVOR_RESOURCES},
            {rp: alloc['resources'] for rp, alloc in
             self._get_allocations_by_server_uuid(built['id']).items()},
            'the server built on host1 lost its allocations')

        failed = self._wait_for_state_change(failed, 'ERROR')
        self.assertIn('No resource provider mapping',
                      failed['fault']['message'])
        failed = self.admin_api.get_server(failed['id'])
        self.assertIsNone(failed['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            failed['id']), base.LEAK + 'allocations of a server in ERROR '
            'that never reached a compute host, after the resource tracker '
            'periodic')

        self._delete_and_assert_left_nothing([built, failed])


# -- window 2: placement unreachable during the delete ----------------------


class DeleteWhilePlacementUnreachableTest(_WindowsTestBase):
    """Window 2: a server in BUILD is deleted while placement is down.

    The reporter's outage: the scheduler has claimed and replied, the reply
    is lost on the message bus, and the server stays in BUILD with its
    build request while the conductor waits (it gets a MessagingTimeout and
    buries the server in cell0 once the outage ends, which deletes no
    allocations). Placement becomes unreachable (every call of nova's
    report clients fails to connect) and the user deletes the server. On
    vanilla nova the delete succeeds: the build request is destroyed, the
    delete of the allocations is logged and forgotten, and nothing names
    them any more. The delete must instead fail, retryable, with nothing
    destroyed.
    """

    #: What a report client call gets while placement is down (see
    #: base.placement_down; None: it fails to connect).
    placement_failure = None

    def _lose_scheduler_reply(self):
        """Lose the scheduler's reply to select_destinations on the bus.

        The conductor's call is delivered, the scheduler claims and
        replies, and the reply is lost as it reaches the conductor, which
        gets MessagingTimeout once bus_back is set.

        :returns: (claimed, bus_back, built): claimed is set once the
            scheduler has replied; set bus_back to end the outage; built is
            set once the conductor's schedule_and_build_instances is over.
        """
        claimed = threading.Event()
        bus_back = threading.Event()
        built = self.watch(conductor_manager.ComputeTaskManager,
                           'schedule_and_build_instances')
        # Cleanups run last first: the outage ends, then the conductor is
        # waited for, before the services stop.
        self.addCleanup(built.wait, TIMEOUT)
        self.addCleanup(bus_back.set)
        send = impl_fake.FakeDriver.send

        def send_and_lose_reply(driver, target, ctxt, message, *args,
                                **kwargs):
            reply = send(driver, target, ctxt, message, *args, **kwargs)
            if message.get('method') != 'select_destinations':
                return reply
            claimed.set()
            bus_back.wait(TIMEOUT)
            raise oslo_messaging.MessagingTimeout(
                'No reply on topic %s' % target.topic)

        self.stub_out('oslo_messaging._drivers.impl_fake.FakeDriver.send',
                      send_and_lose_reply)
        return claimed, bus_back, built

    def _stuck_in_build(self):
        """A server in BUILD, with its build request and the scheduler's
        claim, while the conductor waits for the lost reply.
        """
        claimed, bus_back, built = self._lose_scheduler_reply()
        server = self._boot(1)[0]
        self.wait_for(claimed, 'the scheduler to claim')
        self.assertEqual('BUILD', self.api.get_server(server['id'])['status'])
        self.assertTrue(self._build_request_exists(server))
        self.assertFalse(self._instance_in_a_cell(server))
        claim = self._get_allocations_by_server_uuid(server['id'])
        self.assertEqual(
            {self._get_provider_uuid_by_host('host1'): FLAVOR_RESOURCES},
            {rp: alloc['resources'] for rp, alloc in claim.items()})
        return server, claim, bus_back, built

    def _delete_while_placement_is_down(self, server):
        """The user's delete while placement is down; returns the API's
        response and the calls to placement that failed meanwhile.
        """
        failed, down = self.placement_down(self.placement_failure)
        response = self.api.api_delete('/servers/%s' % server['id'],
                                       check_response_status=[204, 503])
        down.clear()
        return response, failed

    def _assert_refused(self, server, response, failed):
        # The delete met the outage (nova without f35930eef8 would not have
        # called placement at all: its leak is asserted before this).
        self.assertIn(('delete', '/allocations/%s' % server['id']), failed)
        self.assertEqual(503, response.status, response)
        message = response.body['serviceUnavailable']['message']
        self.assertIn('Placement could not be reached', message)
        self.assertIn('The delete can be retried', message)

    def _assert_deleted_cleanly(self, server, when):
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']), base.LEAK + 'allocations %s' % when)
        self.assertFalse(self._build_request_exists(server),
                         base.LEAK + 'build request %s' % when)
        self.assertTrue(objects.InstanceMapping.get_by_instance_uuid(
            self.ctxt, server['id']).queued_for_delete,
            base.LEAK + 'instance mapping not queued for delete %s' % when)
        self.assertEqual({'instances': 0, 'cores': 0, 'ram': 0},
                         self._quota_in_use(server),
                         base.LEAK + 'quota usage %s' % when)
        self._assert_placement_clean(when)

    def test_retry_while_the_conductor_waits(self):
        """1. A server is stuck in BUILD: claimed, the conductor waiting.
        2. Placement becomes unreachable; the user deletes the server.
        3. Placement is back: every allocation must belong to a live
           server. The delete was refused (503, retryable) and the server
           is still there, in BUILD, with its build request and claim.
        4. The user deletes it again: nothing is left (allocations, build
           request, instance mapping queued for delete, quota usage), nor
           once the conductor gave up, nor after archive and periodics.
        """
        server, claim, bus_back, built = self._stuck_in_build()
        response, failed = self._delete_while_placement_is_down(server)

        self.assert_no_leaked_allocations()
        self._assert_refused(server, response, failed)
        self.assertEqual('BUILD', self.api.get_server(server['id'])['status'])
        self.assertTrue(self._build_request_exists(server))
        self.assertEqual(claim,
                         self._get_allocations_by_server_uuid(server['id']))

        self.delete_server_and_wait(server)
        self._assert_deleted_cleanly(server, 'after the retried delete')

        bus_back.set()
        self.wait_for(built, 'the conductor to give up')
        self.assertFalse(self._instance_in_a_cell(server),
                         base.LEAK + 'the conductor built the deleted server')
        self._assert_deleted_cleanly(server, 'once the conductor gave up')
        self.archive_and_run_periodics()
        self._assert_placement_clean('after archive_deleted_rows and the '
                                     'resource tracker periodic')

    def test_retry_after_the_conductor_gave_up(self):
        """1. A server is stuck in BUILD: claimed, the conductor waiting.
        2. Placement becomes unreachable; the user deletes the server.
        3. Placement and the bus are back, the conductor gives up, the
           deleted rows are archived and the periodics run: every
           allocation must belong to a live server (on vanilla nova no
           process will ever delete them). The delete was refused and the
           server is still listed: the conductor buried it in cell0, in
           ERROR, and removed the claim it will never use.
        4. The user deletes it again: nothing is left.
        """
        server, claim, bus_back, built = self._stuck_in_build()
        response, failed = self._delete_while_placement_is_down(server)
        bus_back.set()
        self.wait_for(built, 'the conductor to give up')
        self.archive_and_run_periodics()

        self.assert_no_leaked_allocations()
        self._assert_refused(server, response, failed)
        self.assertEqual('ERROR', self.api.get_server(server['id'])['status'])
        # Buried in cell0, the server no longer holds the claim (see
        # BuriedInCell0Test): until the drop-in of _bury_in_cell0 it kept
        # it until this delete.
        self.assertEqual({},
                         self._get_allocations_by_server_uuid(server['id']))

        self.delete_server_and_wait(server)
        self._assert_deleted_cleanly(server, 'after the retried delete')
        self.archive_and_run_periodics()
        self._assert_placement_clean('after archive_deleted_rows and the '
                                     'resource tracker periodic')


class DeleteWhilePlacementFailsTest(DeleteWhilePlacementUnreachableTest):
    """Window 2, placement answering 503 (a proxy in front of it, say):
    nova's report client raises AllocationDeleteFailed, which the API's
    cleanup logs and forgets just the same.
    """

    def placement_failure(self):
        response = requests.Response()
        response.status_code = 503
        response._content = b'503 Service Unavailable'
        return response


class DeleteBeforeTheComputeWhilePlacementUnreachableTest(_WindowsTestBase):
    """Window 2, later: the server is in its cell, not on a compute yet.

    The conductor has created the instance in its cell, destroyed the
    build request and cast the build to the compute the scheduler chose;
    the compute has not claimed it yet, so the instance has no host. The
    user deletes the server while placement is unreachable: nova's API
    destroys the record itself, then deletes the allocations, a delete
    the report client only logs. On vanilla nova the DELETE answers 204
    and the claim stays with nothing naming it (found by the race
    explorer's ``outage`` variant). The delete must instead fail,
    retryable, with nothing destroyed; the retry once placement answers
    leaves nothing, nor once the compute got the build of the deleted
    server.
    """

    def _hold_the_build_cast(self):
        cast = threading.Event()
        go = threading.Event()
        self.addCleanup(go.set)
        build = compute_rpcapi.ComputeAPI.build_and_run_instance

        def held(*args, **kwargs):
            cast.set()
            go.wait(TIMEOUT)
            return build(*args, **kwargs)

        self.stub_out('nova.compute.rpcapi.ComputeAPI.'
                      'build_and_run_instance', held)
        return cast, go

    def test_retry_the_delete(self):
        cast, go = self._hold_the_build_cast()
        built = self.watch(conductor_manager.ComputeTaskManager,
                           'schedule_and_build_instances')
        server = self._boot(1)[0]
        self.wait_for(cast, 'the conductor to cast the build')
        self.assertFalse(self._build_request_exists(server))
        self.assertTrue(self._instance_in_a_cell(server))
        self.assertIsNone(self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host'])

        failed, down = self.placement_down()
        response = self.api.api_delete('/servers/%s' % server['id'],
                                        check_response_status=[204, 503])
        down.clear()
        self.assertIn(('delete', '/allocations/%s' % server['id']), failed)
        if response.status == 204:
            self.assertEqual({}, self._get_allocations_by_server_uuid(
                server['id']), base.LEAK + 'the server was deleted and its '
                'allocations stay')
        self.assertEqual(503, response.status, response)
        message = response.body['serviceUnavailable']['message']
        self.assertIn('The delete can be retried', message)

        self.delete_server_and_wait(server)
        self._assert_placement_clean('after the retried delete')
        go.set()
        self.wait_for(built, 'the conductor to finish the build request')
        self._assert_placement_clean('once the conductor cast the build')
        self.archive_and_run_periodics()
        self._assert_placement_clean('after archive_deleted_rows and the '
                                     'resource tracker periodic')


# -- window 4: the scheduler's reply is lost, the server buried in cell0 -----


class BuriedInCell0Test(_WindowsTestBase):
    """Window 4: the conductor buries a server in cell0 after the scheduler
    claimed for it.

    The scheduler claims and replies, and the reply is lost on the message
    bus: the conductor gets MessagingTimeout and buries the server in
    cell0, in ERROR. ComputeTaskManager._bury_in_cell0 keeps the claim:
    capacity on a compute host (and, with
    [quota]count_usage_from_placement, the user's cores and RAM) is held by
    a server that never reached it, for as long as the user does not
    delete it. No resource tracker accounts for it (it is on no host).

    1. The scheduler claims host1 for a new server; its reply is lost.
    2. The conductor gives up and buries the server in cell0.
    3. The server is in ERROR in cell0 and holds nothing in placement,
       nor after archive and the periodics.
    4. Its delete leaves nothing.
    """

    def test_lost_scheduler_reply(self):
        claimed, bus_back, built = (
            DeleteWhilePlacementUnreachableTest._lose_scheduler_reply(self))
        server = self._boot(1)[0]
        self.wait_for(claimed, 'the scheduler to claim')
        self.assertNotEqual({}, self._get_allocations_by_server_uuid(
            server['id']))
        bus_back.set()
        self.wait_for(built, 'the conductor to give up')

        self.assertEqual('ERROR', self.api.get_server(server['id'])['status'])
        self.assertFalse(self._instance_in_a_cell(server))
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']), base.LEAK + 'the claim of a server buried in '
            'cell0')
        self._assert_placement_clean('once the server is buried in cell0')
        self.archive_and_run_periodics()
        self._assert_placement_clean('after archive_deleted_rows and the '
                                     'resource tracker periodic')
        self.assertEqual({'instances': 1, 'cores': 1, 'ram': 64},
                         self._quota_in_use(server))

        self._delete_and_assert_left_nothing([server])


class BuriedInCell0PlacementQuotaTest(BuriedInCell0Test):
    """Window 4 with [quota]count_usage_from_placement: the kept claim
    counts as the user's cores and RAM.
    """

    def setUp(self):
        super(BuriedInCell0PlacementQuotaTest, self).setUp()
        self.flags(count_usage_from_placement=True, group='quota')

    def test_lost_scheduler_reply(self):
        claimed, bus_back, built = (
            DeleteWhilePlacementUnreachableTest._lose_scheduler_reply(self))
        server = self._boot(1)[0]
        self.wait_for(claimed, 'the scheduler to claim')
        bus_back.set()
        self.wait_for(built, 'the conductor to give up')

        self.assertEqual('ERROR', self.api.get_server(server['id'])['status'])
        self.assertEqual({'instances': 1, 'cores': 0, 'ram': 0},
                         self._quota_in_use(server),
                         base.LEAK + 'quota usage of a server buried in cell0')
        self._delete_and_assert_left_nothing([server])


# -- window 3: the claim lands after the delete, the conductor is dead -------


class ClaimAfterDeleteTest(_WindowsTestBase):
    """Window 3: the claim lands after the API's delete, and the conductor
    dies before its build request check.

    Not fixed: out of reach. The API deleted the server completely before
    the claim existed (build request destroyed, allocations deleted: there
    were none, instance mapping queued for delete) and has returned. The
    conductor that asked for the claim is the only process that would look
    at the build request again (schedule_and_build_instances deletes the
    claim of a server whose build request is gone), and it died. A
    restarted conductor does not come back to the request, no instance
    exists in any cell, so no resource tracker knows the consumer (its
    periodic skips allocations of instances it cannot find, since they may
    be in the middle of a build). No record nova keeps names the consumer
    with a claim, so no drop-in in the API or conductor can find it. (Only
    the scheduler that made the claim could check the build request right
    after it, which would leave the window of a scheduler dying between
    the two; nova-fixes does not change the scheduler.)

    The remedy is the operator's: ``nova-manage placement audit --delete``
    lists the allocations on each compute node whose consumer is neither
    an instance on that node nor a migration in progress, and deletes
    them. This test recreates the leak with and without the drop-ins and
    shows that the audit removes it.
    """

    out_of_reach = True

    def _hold_conductor_after_claim(self):
        """Stop the conductor's schedule_and_build_instances right after
        the scheduler has claimed in placement and replied, before the
        conductor looks at the build requests.

        :returns: (claimed, resume, built): claimed is set once the
            scheduler's claim is in placement; set resume to let the
            conductor go on; built is set once it is done.
        """
        claimed = threading.Event()
        resume = threading.Event()
        built = self.watch(conductor_manager.ComputeTaskManager,
                           'schedule_and_build_instances')
        # Cleanups run last first: the conductor is let go, then waited
        # for, before the services stop.
        self.addCleanup(built.wait, TIMEOUT)
        self.addCleanup(resume.set)
        original = conductor_manager.ComputeTaskManager._schedule_instances

        def schedule(*args, **kwargs):
            host_lists = original(*args, **kwargs)
            claimed.set()
            resume.wait(TIMEOUT)
            return host_lists

        self.stub_out('nova.conductor.manager.ComputeTaskManager.'
                      '_schedule_instances', schedule)
        return claimed, resume, built

    def test_claim_after_delete_until_audit(self):
        """1. The scheduler is about to claim for a new server.
        2. The user deletes the server: the API removes everything.
        3. The scheduler claims; the conductor dies (it is held for the
           rest of the test) before it checks the build request.
        4. The claim is left, and stays after archive and periodics.
        5. placement audit finds it (dry run), then deletes it.
        """
        about_to_claim = threading.Event()
        deleted = threading.Event()
        self.addCleanup(deleted.set)
        claim_resources = conductor_manager.scheduler_utils.claim_resources

        def claim(*args, **kwargs):
            about_to_claim.set()
            deleted.wait(TIMEOUT)
            return claim_resources(*args, **kwargs)

        self.stub_out('nova.scheduler.utils.claim_resources', claim)
        claimed, _resume, _built = self._hold_conductor_after_claim()

        server = self._boot(1)[0]
        self.wait_for(about_to_claim, 'the scheduler to claim')
        self.assertTrue(self._build_request_exists(server))
        self.assertEqual({}, self._all_allocations())
        self.delete_server_and_wait(server)
        deleted.set()
        self.wait_for(claimed, 'the scheduler to claim')

        # The leak, on any nova.
        claim = self._get_allocations_by_server_uuid(server['id'])
        self.assertEqual(
            {self._get_provider_uuid_by_host('host1'): FLAVOR_RESOURCES},
            {rp: alloc['resources'] for rp, alloc in claim.items()})
        self.assertFalse(self._build_request_exists(server))
        self.assertFalse(self._instance_in_a_cell(server))
        self.assertTrue(objects.InstanceMapping.get_by_instance_uuid(
            self.ctxt, server['id']).queued_for_delete)
        self.assertEqual({}, self._live_servers())
        self.archive_and_run_periodics()
        self.assertEqual(claim, self._get_allocations_by_server_uuid(
            server['id']))

        # The remedy.
        result, output = self.placement_audit(delete=False)
        self.assertEqual(3, result, output)
        self.assertIn(server['id'], output)
        self.assertEqual(claim, self._get_allocations_by_server_uuid(
            server['id']))
        result, output = self.placement_audit(delete=True)
        self.assertEqual(4, result, output)
        self.assertIn('Deleted allocations for consumer UUID %s'
                      % server['id'], output)
        self._assert_placement_clean('after placement audit --delete')
        self.assert_no_leaked_allocations()
        result, output = self.placement_audit(delete=False)
        self.assertEqual(0, result, output)
