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

"""Regression tests for deletes that meet a placement outage (bug 1848343).

https://bugs.launchpad.net/nova/+bug/1848343

What must hold: a delete during a placement outage either completes and
leaves nothing, or fails in a way the user can retry (503, the server
still there in a state that accepts another DELETE) and the retry once
placement answers completes it. Never a 500, never a server stuck in a
task state no request moves it out of, never a record destroyed while its
allocations stay.

nova's report client swallows a ConnectFailure in
delete_allocation_for_instance (safe_connect logs "Placement API service
is not responding" and returns None), so a caller goes on as if the
allocations were gone:

1. The API deletes a server locally (its compute is down) while
   placement is unreachable: the DELETE answers 204, the record is
   destroyed and the allocations stay, with nothing left to name them.
2. The API deletes a server in VERIFY_RESIZE while placement is
   unreachable: its confirm-on-delete fails on the source compute, the
   DELETE answers 500 and the server is left in ERROR with task_state
   'deleting'; a new DELETE is ignored ("already in deleting state").
3. (No regression.) An ACTIVE server whose compute is up: whatever the
   compute's delete did during the outage, a DELETE once placement is back
   leaves nothing.
"""

import datetime
import threading
import time

from oslo_utils import timeutils

from nova.compute import manager as compute_manager
from nova.conductor import api as conductor_api
from nova.conductor import manager as conductor_manager
import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.tests.functional.api import client as api_client
from nova.tests.functional import integrated_helpers

from tests.functional import base

CONF = nova.conf.CONF

TIMEOUT = 30
# How long a retried DELETE may take to remove the server.
RETRY_TIMEOUT = 10


class _DeleteFaultsTestBase(base.NovaFixesTestMixin,
                            integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(_DeleteFaultsTestBase, self).setUp()
        self._start_compute('host1')
        self._start_compute('host2')

    def _create_server(self):
        server = super(_DeleteFaultsTestBase, self)._create_server(
            networks='none')
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        return server, source, target

    def _run_periodic_tasks(self, host):
        """Every periodic task of the compute, once (time has passed)."""
        manager = self.computes[host].manager
        ctxt = nova_context.get_admin_context()
        for name, task in manager._periodic_tasks:
            task(manager, ctxt)

    def _unshelve_held_at_the_compute(self):
        """Create a server, shelve and offload it (it holds nothing), and
        unshelve it: the conductor schedules it, and its compute holds
        the unshelve at its start.

        :returns: the server, and the event that lets the unshelve go on
        """
        self.flags(shelved_offload_time=0)
        server, _source, _target = self._create_server()
        self.api.post_server_action(server['id'], {'shelve': {}})
        self._wait_for_state_change(server, 'SHELVED_OFFLOADED')
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']))

        reached = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)
        original = compute_manager.ComputeManager.unshelve_instance

        def unshelve(manager, *args, **kwargs):
            reached.set()
            release.wait(TIMEOUT)
            return original(manager, *args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.'
                      'unshelve_instance', unshelve)
        self.api.post_server_action(server['id'], {'unshelve': None})
        self.wait_for(reached, 'the compute\'s unshelve', TIMEOUT)
        return server, release

    def _compute_down(self, host):
        """Stop ``host``'s compute and force its service down, as an
        operator does for a host that is gone: the API deletes its servers
        locally.
        """
        compute = self.computes[host]
        compute.stop()
        self.api.put_service(compute.service_ref.uuid,
                             {'forced_down': 'true'})
        return compute

    def _compute_back(self, host, compute):
        self.computes[host] = self.restart_compute_service(compute)
        self.api.put_service(compute.service_ref.uuid,
                             {'forced_down': 'false'})

    def _delete_during_outage(self, server, statuses=(204, 500, 503)):
        """The user's DELETE while placement is unreachable for nova's
        services; returns the API's response and the placement calls that
        failed meanwhile.
        """
        failed, down = self.placement_down()
        try:
            response = self.api.api_delete(
                '/servers/%s' % server['id'],
                check_response_status=list(statuses))
        finally:
            down.clear()
        return response, failed

    def _server_or_none(self, server):
        try:
            return self.api.get_server(server['id'])
        except api_client.OpenStackApiNotFoundException:
            return None

    def assert_no_guest_left(self, server):
        for host, compute in self.computes.items():
            self.assertNotIn(server['id'],
                             compute.driver.list_instance_uuids(),
                             base.LEAK + 'a guest of the deleted server is '
                             'left on %s' % host)

    def assert_refused_for_placement(self, response, failed):
        """The DELETE was refused, retryable, in nova's fault format."""
        self.assertTrue(failed, 'the DELETE did not meet the outage')
        self.assert_retryable_503(response, 'Placement could not be reached')

    def assert_retryable_503(self, response, cause):
        """Not a 500: a 503 in nova's fault format that names ``cause``
        and tells the user to retry.
        """
        self.assertNotEqual(500, response.status, base.STUCK +
                            'the DELETE failed with a 500: %s'
                            % (response.body,))
        self.assertEqual(503, response.status, response.body)
        message = response.body['serviceUnavailable']['message']
        self.assertIn(cause, message)
        self.assertIn('The delete can be retried', message)

    def assert_retry_deletes(self, server, timeout=RETRY_TIMEOUT):
        """Once the fault cleared, a new DELETE removes the server: it is
        not stuck in a task state that ignores DELETE.
        """
        if self._server_or_none(server) is None:
            return
        self.api.api_delete('/servers/%s' % server['id'],
                            check_response_status=[204])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self._server_or_none(server)
            if current is None:
                return
            time.sleep(0.1)
        current = self.admin_api.get_server(server['id'])
        self.fail(base.STUCK + 'the server is still there %s s after a '
                  'DELETE retried once the fault cleared: %s, task_state '
                  '%s' % (timeout, current['status'],
                          current['OS-EXT-STS:task_state']))


class LocalDeleteDuringPlacementOutageTest(_DeleteFaultsTestBase):
    """Regression test for a delete's placement faults: sequence 1.

    1. A server is ACTIVE on a host whose compute goes down (its service
       forced down): the API deletes its servers itself (local delete).
    2. Placement becomes unreachable for nova's services; the user
       deletes the server. nova's local delete removes the allocations
       through the report client, which logs the ConnectFailure and
       returns, then destroys the record: the DELETE answers 204 and the
       allocations stay, with no record left to name them.
    3. Placement is back. With the fix the DELETE was refused (503,
       "retry the delete") before anything was destroyed, and the server
       is as it was: ACTIVE, no task state.
    4. The user deletes it again (test_retry_while_the_compute_is_down:
       locally again; test_retry_once_the_compute_is_back: through its
       compute, which a server left in task_state 'deleting' would not
       allow): nothing is left, nor after archive and the periodics.
    """

    def _refused_local_delete(self):
        server, source, target = self._create_server()
        compute = self._compute_down(source)
        response, failed = self._delete_during_outage(server)

        self.assertIn(('delete', '/allocations/%s' % server['id']), failed)
        # On vanilla nova the record is gone and its allocations are not.
        self.assert_no_leaked_allocations()
        self.assert_refused_for_placement(response, failed)
        current = self.api.get_server(server['id'])
        self.assertEqual('ACTIVE', current['status'])
        self.assertIsNone(current['OS-EXT-STS:task_state'])
        self.assertFlavorMatchesAllocation(
            server['flavor'], server['id'],
            self._get_provider_uuid_by_host(source))
        return server, source, compute

    def test_retry_while_the_compute_is_down(self):
        server, source, compute = self._refused_local_delete()
        self.assert_retry_deletes(server)
        self._compute_back(source, compute)
        self.assert_server_left_nothing(server)

    def test_retry_once_the_compute_is_back(self):
        server, source, compute = self._refused_local_delete()
        self._compute_back(source, compute)
        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)


class DeleteResizedServerDuringPlacementOutageTest(_DeleteFaultsTestBase):
    """Regression test for a delete's placement faults: sequence 2.

    1. A cold migration finishes: VERIFY_RESIZE; the migration consumer
       holds the source node, the instance consumer the destination.
    2. Placement becomes unreachable for nova's services; the user
       deletes the server. The API saves task_state 'deleting' and
       confirms the resize on the source first (confirm-on-delete), which
       fails there on placement: nova's DELETE answers 500 and leaves the
       server in ERROR with task_state 'deleting', which every later
       DELETE ignores ("already in deleting state").
    3. Placement is back. With the fix the DELETE was refused (503,
       "retry the delete") before the source was asked to confirm: the
       server is still in VERIFY_RESIZE, no task state.
    4. The user deletes it again: it is confirmed and deleted, and
       nothing is left of it (instance and migration consumers), nor
       after archive and the periodics.
    """

    def test_retry_the_delete(self):
        server, source, target = self._create_server()
        self._migrate_server(server)
        response, failed = self._delete_during_outage(server)

        self.assert_retry_deletes(server)
        self.assert_refused_for_placement(response, failed)
        self.assert_server_left_nothing(server)
        self.assert_no_guest_left(server)


class DeleteResizedServerConfirmFailsTest(_DeleteFaultsTestBase):
    """Regression test for a delete's placement faults: sequence 2, the
    outage starting once the API has checked placement.

    Placement answers the API and fails the source compute's confirm of
    the resize (confirm-on-delete): the confirm fails there, the source
    puts the server in ERROR. nova's DELETE answers 500 with the server
    left in task_state 'deleting', which every later DELETE ignores. With
    the fix the DELETE is refused (503) and the server's task state is
    cleared: the user's retry once placement answers deletes it (it is
    in ERROR now, so it is deleted through its compute without a confirm)
    and nothing is left of it.
    """

    def test_retry_the_delete(self):
        server, source, target = self._create_server()
        self._migrate_server(server)
        failed, down = self.placement_down()
        down.clear()
        # The outage starts as the source compute starts the confirm.
        confirmed = self.watch(compute_manager.ComputeManager,
                               'confirm_resize', before=down.set)
        try:
            response = self.api.api_delete(
                '/servers/%s' % server['id'],
                check_response_status=[204, 500, 503])
            self.wait_for(confirmed, 'the confirm on the source', TIMEOUT)
        finally:
            down.clear()

        self.assert_retry_deletes(server)
        self.assert_refused_for_placement(response, failed)
        self.assert_server_left_nothing(server)
        self.assert_no_guest_left(server)


class DeleteActiveServerDuringPlacementOutageTest(_DeleteFaultsTestBase):
    """No-regression case for a delete's placement faults: sequence 3.

    1. A server is ACTIVE on a compute that is up.
    2. Placement becomes unreachable; the user deletes the server: the
       compute's delete fails in the resource tracker's update before it
       destroys anything, and the server goes to ERROR.
    3. Placement is back; the user deletes the server again if it is
       still there: nothing is left of it.
    """

    recreates = False

    def test_retry_the_delete(self):
        server, source, target = self._create_server()
        failed, down = self.placement_down()
        terminated = self.watch(compute_manager.ComputeManager,
                                'terminate_instance')
        try:
            self.api.api_delete('/servers/%s' % server['id'],
                                check_response_status=[204])
            self.wait_for(terminated, 'the compute\'s delete', TIMEOUT)
        finally:
            down.clear()
        self.assertTrue(failed, 'the delete did not meet the outage')
        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)


class _ConfirmGetsNoReplyTestBase(_DeleteFaultsTestBase):
    """The RPC call of the confirm-on-delete gets no reply.

    1. A cold migration finishes: VERIFY_RESIZE.
    2. The user deletes the server. The API saves task_state 'deleting'
       and calls the source compute to confirm the resize; no reply comes
       back and the call times out (MessagingTimeout): the DELETE fails.
    3. The fault clears; the user deletes the server again: it is taken,
       and nothing is left of the server.

    nova answers the failed DELETE with a 500, as an unexpected error.
    With the fix it is a 503 that says the delete can be retried (the
    API cannot tell whether the confirm ran), with the server's task
    state put back.
    """

    #: Whether the source confirmed before its reply was lost.
    confirmed = None

    def _confirm_gets_no_reply(self):
        from nova.compute import rpcapi as compute_rpcapi
        import oslo_messaging
        original = compute_rpcapi.ComputeAPI.confirm_resize
        calls = []

        def confirm_resize(*args, **kwargs):
            calls.append(kwargs.get('cast'))
            if len(calls) == 1:
                if self.confirmed:
                    original(*args, **kwargs)
                raise oslo_messaging.MessagingTimeout('No reply on topic '
                                                      'compute')
            return original(*args, **kwargs)

        self.stub_out('nova.compute.rpcapi.ComputeAPI.confirm_resize',
                      confirm_resize)
        return calls

    def test_retry_the_delete(self):
        server, source, target = self._create_server()
        self._migrate_server(server)
        calls = self._confirm_gets_no_reply()
        response = self.api.api_delete('/servers/%s' % server['id'],
                                       check_response_status=[204, 500,
                                                              503])
        self.assertEqual([False], calls, 'the confirm-on-delete was not '
                         'called once')
        # The user is told to retry, in nova's fault format: not a 500.
        self.assert_retryable_503(response, 'got no reply')
        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)
        self.assert_no_guest_left(server)


class DeleteResizedServerConfirmRequestLostTest(_ConfirmGetsNoReplyTestBase):
    """Regression test for a delete's faults: the confirm-on-delete's
    request is lost before the source sees it.

    nova leaves the server in VERIFY_RESIZE with task_state 'deleting'.
    The user's retry answers 204 and does not delete it: it confirms the
    resize (the source clears the task state) and then ignores the delete
    ("already in deleting state"), so only a third DELETE removes the
    server. With the fix the failed DELETE put the task state back: the
    retry confirms the resize and deletes the server.
    """

    confirmed = False


class DeleteResizedServerConfirmReplyLostTest(_ConfirmGetsNoReplyTestBase):
    """Regression test for a delete's faults: the confirm-on-delete's
    reply is lost after the source confirmed.

    The source's confirm clears the task state itself (its save expects
    None or 'deleting'), so the retry is taken on any nova: the server is
    ACTIVE on the destination and is deleted there. But nova answered the
    first DELETE with a 500; with the fix it is a 503 saying the delete
    can be retried.
    """

    confirmed = True


class ReclaimDuringPlacementOutageTest(_DeleteFaultsTestBase):
    """Regression test for a delete's placement faults: soft delete's
    reclaim.

    1. With [DEFAULT]reclaim_instance_interval set, the user deletes a
       server: it is SOFT_DELETED, its guest and allocations kept.
    2. Placement becomes unreachable as the compute's periodic task
       reclaims it: the delete records vm_state DELETED, then fails in the
       resource tracker's update before it removes the allocations and
       destroys the record; the periodic task logs it.
    3. Placement is back and the compute's periodic tasks run again. The
       reclaim only looks for SOFT_DELETED servers, and only init_host (a
       restart of the compute) completes a delete left DELETED: on nova
       the server stays listed as DELETED with its allocations, and no
       request of the user's is due (they deleted it already). With the
       fix a periodic task completes such partial deletions: nothing is
       left of the server.
    """

    def test_reclaim_completes(self):
        self.flags(reclaim_instance_interval=1)
        server, source, target = self._create_server()
        self.api.delete_server(server['id'])
        self._wait_for_state_change(server, 'SOFT_DELETED')
        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_deleted_old_enough', lambda *args, **kwargs: True)
        manager = self.computes[source].manager
        failed, down = self.placement_down()
        manager._reclaim_queued_deletes(nova_context.get_admin_context())
        down.clear()
        self.assertTrue(failed, 'the reclaim did not meet the outage')

        self._run_periodic_tasks(source)
        self.assertIsNone(self._server_or_none(server), base.STUCK +
                          'the server is still listed once the periodic '
                          'tasks ran again')
        self.assert_server_left_nothing(server)


class _ReleaseFailsThenDeleteMixin(object):
    """A move ends while placement cannot be reached, then the server is
    deleted.

    1. A move ends as it should, and the source compute records the
       migration 'confirmed' (a cold migration's confirm) or 'completed'
       (a live migration), then deletes the allocations the migration
       consumer holds on the source node: placement is unreachable right
       then, and the report client only logs it.
    2. Placement is back; the user deletes the server.

    On nova the migration consumer keeps the source node's allocations:
    the delete removes those of the server only, and nothing names them
    once the rows are archived. The fixes' delete skips a migration that
    ended as it should, whatever the server's history, so that its cost
    does not grow with it: the source records the migration 'error' when
    it could not delete those allocations, and the delete removes them.
    """

    def _release_fails(self):
        """Placement is unreachable while the source deletes the
        migration's allocations, and only then.
        """
        failed, down = self.placement_down()
        down.clear()
        released = threading.Event()
        self.addCleanup(released.set)
        owner = compute_manager.ComputeManager
        original = owner._delete_allocation_after_move

        def release(manager, *args, **kwargs):
            down.set()
            try:
                return original(manager, *args, **kwargs)
            finally:
                down.clear()
                released.set()

        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_delete_allocation_after_move', release)
        return failed, released

    #: nova's fake driver never removes the source's guest of a live
    #: migration (a real hypervisor moves it): only the target's is
    #: checked then.
    source_guest_stays = False

    def _move(self, server, target):
        raise NotImplementedError()

    def test_delete_after_the_move(self):
        server, source, target = self._create_server()
        failed, released = self._release_fails()
        self._move(server, target)
        self.wait_for(released, 'the source\'s release of the migration\'s '
                      'allocations', TIMEOUT)
        self.assertTrue(failed, 'the move did not meet the outage')
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(target, server['OS-EXT-SRV-ATTR:host'])

        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)
        if self.source_guest_stays:
            guests = self.computes[target].driver.list_instance_uuids()
            self.assertNotIn(server['id'], guests,
                             base.LEAK + 'the guest is left on %s' % target)
        else:
            self.assert_no_guest_left(server)


class ConfirmDuringPlacementOutageThenDeleteTest(
        _ReleaseFailsThenDeleteMixin, _DeleteFaultsTestBase):
    __doc__ = _ReleaseFailsThenDeleteMixin.__doc__

    def _move(self, server, target):
        self._migrate_server(server)
        self._confirm_resize(server)


class LiveMigrationDuringPlacementOutageThenDeleteTest(
        _ReleaseFailsThenDeleteMixin, _DeleteFaultsTestBase):
    __doc__ = _ReleaseFailsThenDeleteMixin.__doc__
    source_guest_stays = True

    def _move(self, server, target):
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': target, 'block_migration': 'auto'}})


class RestartDuringPlacementOutageTest(ReclaimDuringPlacementOutageTest):
    """Regression test for a delete's placement faults: the compute
    restarts while placement is unreachable.

    1. A delete is left DELETED: the reclaim of a soft-deleted server
       meets a placement outage (as in ReclaimDuringPlacementOutageTest).
    2. The compute restarts, placement still unreachable. Its init_host
       completes the deletes left DELETED, before its resource tracker
       calls placement at all: the delete of the allocations is the first
       call, and the report client only logs that it failed. nova destroys
       the record and the allocations stay: the resource tracker's next
       periodic run removes them if the row is still there, nothing does
       once archive_deleted_rows ran. With the fix the allocations are
       deleted first and a failure keeps the record.
    3. Placement is back and the compute's periodic tasks run: nothing is
       left of the server.
    """

    def test_reclaim_completes(self):
        self.flags(reclaim_instance_interval=1)
        server, source, target = self._create_server()
        self.api.delete_server(server['id'])
        self._wait_for_state_change(server, 'SOFT_DELETED')
        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_deleted_old_enough', lambda *args, **kwargs: True)
        manager = self.computes[source].manager
        failed, down = self.placement_down()
        manager._reclaim_queued_deletes(nova_context.get_admin_context())
        self.assertTrue(failed, 'the reclaim did not meet the outage')
        del failed[:]
        self.computes[source] = self.restart_compute_service(
            self.computes[source])
        down.clear()
        # A deferred delete reads the allocations before it deletes them.
        self.assertTrue(
            set(failed) & {('get', '/allocations/%s' % server['id']),
                           ('delete', '/allocations/%s' % server['id'])},
            'init_host did not try to complete the delete: %s' % failed)
        # nova's resource tracker removes the allocations of a deleted
        # instance at its next periodic run, if the row is still there:
        # an archive_deleted_rows in between leaves them for good.
        if self._server_or_none(server) is None:
            self.assertEqual({}, self._get_allocations_by_server_uuid(
                server['id']), base.LEAK + 'the record was destroyed while '
                'its allocations stay')

        self._run_periodic_tasks(source)
        self.assertIsNone(self._server_or_none(server), base.STUCK +
                          'the server is still listed once the periodic '
                          'tasks ran again')
        self.assert_server_left_nothing(server)


class AllocationDeleteFailsTest(_DeleteFaultsTestBase):
    """Regression test for a delete's placement faults: placement fails
    only the compute's delete of the server's allocations.

    1. A server is ACTIVE on a compute that is up; the user deletes it.
    2. The compute's resource tracker reaches placement, then placement
       cannot be reached as the compute deletes the server's allocations:
       the report client only logs it. nova destroys the record, and the
       allocations stay (until the resource tracker's next periodic run,
       if archive_deleted_rows has not run before). With the fix the
       compute's delete fails before the record is destroyed: the server
       goes to ERROR.
    3. Placement is back; the user deletes the server again if it is still
       there: nothing is left of it.
    """

    def test_retry_the_delete(self):
        server, source, target = self._create_server()
        url = '/allocations/%s' % server['id']
        failed = []
        armed = threading.Event()
        original = compute_manager.ComputeManager._complete_deletion
        delete = report.SchedulerReportClient.delete

        def complete(manager, context, instance):
            # The first delete meets the failure, no other.
            if not failed:
                armed.set()
            try:
                return original(manager, context, instance)
            finally:
                armed.clear()

        def one_delete_fails(client, path, *args, **kwargs):
            if armed.is_set() and path == url:
                failed.append(('delete', path))
                raise base._connect_failure()
            return delete(client, path, *args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_complete_deletion', complete)
        self.stub_out('nova.scheduler.client.report.SchedulerReportClient.'
                      'delete', one_delete_fails)
        terminated = self.watch(compute_manager.ComputeManager,
                                'terminate_instance')
        self.api.api_delete('/servers/%s' % server['id'],
                            check_response_status=[204])
        self.wait_for(terminated, 'the compute\'s delete', TIMEOUT)
        self.assertEqual([('delete', url)], failed,
                         'the delete did not meet the failure')
        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)
        self.assert_no_guest_left(server)


class DeleteFailedBuildDuringPlacementOutageTest(_DeleteFaultsTestBase):
    """Regression test for a delete's placement faults: a server whose
    build failed on its compute.

    1. Placement becomes unreachable, and a build is aborted on its
       compute (BuildAbortException): nova nils out the server's host and
       node, puts it in ERROR and deletes the scheduler's claim, which
       the report client only logs as failed: the claim stays.
    2. The user deletes the server, placement still unreachable. It is on
       no host, so the API deletes it locally: the report client only
       logs the ConnectFailure again, the record is destroyed, the DELETE
       answers 204 and the claim stays with nothing to name it. With the
       fix the DELETE is refused (503) before anything is destroyed.
    3. Placement is back; the user deletes the server again: nothing is
       left of it.

    The race explorer's outage variant found it: a build of several
    servers that meets the outage fails on its compute, and the harness
    then deletes every server.
    """

    def test_retry_the_delete(self):
        failed, down = self.placement_down()
        down.clear()

        def abort(manager, context, instance, *args, **kwargs):
            down.set()
            raise exception.BuildAbortException(
                instance_uuid=instance.uuid, reason='the test aborts it')

        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_build_and_run_instance', abort)
        try:
            server = super(_DeleteFaultsTestBase, self)._create_server(
                networks='none', expected_state='ERROR')
            self.assertIsNone(server['OS-EXT-SRV-ATTR:host'])
            self.assertIn(('delete', '/allocations/%s' % server['id']),
                          failed, 'the compute removed the claim of the '
                          'failed build before the outage')
            del failed[:]
            response = self.api.api_delete(
                '/servers/%s' % server['id'],
                check_response_status=[204, 500, 503])
        finally:
            down.clear()
        self.assertIn(('delete', '/allocations/%s' % server['id']), failed)
        # On vanilla nova the record is gone and its allocations are not.
        self.assert_no_leaked_allocations()
        self.assert_refused_for_placement(response, failed)
        current = self.api.get_server(server['id'])
        self.assertEqual('ERROR', current['status'])
        self.assertIsNone(current['OS-EXT-STS:task_state'])
        self.assertNotEqual({}, self._get_allocations_by_server_uuid(
            server['id']))

        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)


class DeleteDuringRescheduleDuringPlacementOutageTest(
        _DeleteFaultsTestBase):
    """Regression test for a delete's placement faults: a server whose
    build is being rescheduled.

    1. The server's build fails on its compute, after the claim (host
       set, still BUILDING), while placement is unreachable.
    2. The user deletes it. The API reads it on its host; the compute
       reschedules the build meanwhile: it nils out the host, sets the
       task state 'scheduling' and deletes the claim, which the report
       client only logs as failed. Then the API saves 'deleting', which
       refreshes the instance: no host any more. nova's API._delete
       decided from the instance it read that it had no ports nor volumes,
       so it destroys the record itself and deletes the allocations after,
       which the report client only logs again: the DELETE answers 204 and
       the claim stays with nothing naming it. With the fix the instance
       is deleted as one that was scheduled: the local delete refuses
       (503) before anything is destroyed.
    3. The conductor finds no other host: the server goes to ERROR.
       Placement is back; the user deletes the server again: nothing is
       left of it.

    The race explorer's outage variant found it, building two servers
    (boot-multi): the second one's build met the outage in its claim.
    """

    def test_retry_the_delete(self):
        spawning = threading.Event()
        go = threading.Event()
        self.addCleanup(go.set)

        def spawn(*args, **kwargs):
            spawning.set()
            go.wait(TIMEOUT)
            raise test.TestingException('the test fails the spawn')

        self.stub_out('nova.virt.fake.FakeDriver.spawn', spawn)
        rescheduled = self.watch(conductor_api.ComputeTaskAPI,
                                 'build_instances')
        gave_up = self.watch(conductor_manager.ComputeTaskManager,
                             'build_instances')
        server = self.api.post_server({'server': self._build_server(
            networks='none')})
        self.wait_for(spawning, 'the compute to spawn the server')
        read = self.admin_api.get_server(server['id'])
        self.assertEqual('BUILD', read['status'])
        host = read['OS-EXT-SRV-ATTR:host']
        self.assertIsNotNone(host)

        get_bdms = objects.BlockDeviceMappingList.get_by_instance_uuid

        def reschedule_then_get_bdms(cls, context, instance_uuid, *a,
                                     **kw):
            # The API has read the server on its host; before it saves
            # the delete's task state, the compute reschedules the build.
            if not go.is_set():
                go.set()
                self.wait_for(rescheduled, 'the compute to reschedule',
                              TIMEOUT)
            return get_bdms(context, instance_uuid, *a, **kw)

        failed, down = self.placement_down()
        try:
            self.stub_out('nova.objects.BlockDeviceMappingList.'
                          'get_by_instance_uuid', reschedule_then_get_bdms)
            response = self.api.api_delete(
                '/servers/%s' % server['id'],
                check_response_status=[204, 500, 503])
            self.wait_for(gave_up, 'the conductor to give the build up',
                          TIMEOUT)
        finally:
            down.clear()
        self.assertTrue(go.is_set(), 'the DELETE did not read the BDMs')
        self.assertIn(('delete', '/allocations/%s' % server['id']), failed,
                      'the compute did not try to delete the claim of the '
                      'build it rescheduled during the outage')
        # On vanilla nova the record is gone and its allocations are not.
        self.assert_no_leaked_allocations()
        self.assert_refused_for_placement(response, failed)
        self.assertNotEqual({}, self._get_allocations_by_server_uuid(
            server['id']))
        self._wait_for_state_change(server, 'ERROR')

        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)


class DeleteDuringUnshelveDuringPlacementOutageTest(_DeleteFaultsTestBase):
    """Regression test for a delete's placement faults: a server being
    unshelved.

    1. A server is shelved and offloaded: it is on no host and holds no
       allocation.
    2. The user unshelves it: the conductor schedules it, which claims
       resources on a host, and casts to that host's compute, which has
       not started yet.
    3. Placement becomes unreachable; the user deletes the server. It is
       SHELVED_OFFLOADED on no host, so the API deletes it locally: the
       report client only logs the ConnectFailure, the record is
       destroyed, the DELETE answers 204 and the scheduler's claim stays
       with nothing to name it. With the fix the DELETE is refused (503)
       before anything is destroyed, the server is as it was (unshelving).
    4. Placement is back; the compute's unshelve goes on and the server
       is ACTIVE. The user deletes it again: nothing is left of it, no
       guest either.

    The race explorer's outage variant found it (shelve-unshelve, held at
    the compute's unshelve).
    """

    def test_retry_the_delete(self):
        server, release = self._unshelve_held_at_the_compute()
        self.assertNotEqual({}, self._get_allocations_by_server_uuid(
            server['id']), 'the scheduler claimed nothing for the unshelve')

        response, failed = self._delete_during_outage(server)
        self.assertIn(('delete', '/allocations/%s' % server['id']), failed)
        # On vanilla nova the record is gone and its allocations are not.
        self.assert_no_leaked_allocations()
        self.assert_refused_for_placement(response, failed)
        current = self.api.get_server(server['id'])
        self.assertEqual('SHELVED_OFFLOADED', current['status'])
        self.assertEqual('unshelving', current['OS-EXT-STS:task_state'])

        release.set()
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)
        self.assert_no_guest_left(server)


class DeleteLeftByAStoppedRequestTest(_DeleteFaultsTestBase):
    """Regression test for a delete's faults: the API's process stops in
    the middle of a DELETE.

    1. The user deletes a server whose compute is up. The API saves
       task_state 'deleting', and its process stops right then
       (restarted for an upgrade, killed, its WSGI worker recycled),
       before it casts the delete to the compute. The test writes what
       that leaves: the server ACTIVE in task_state 'deleting', last
       updated longer ago than [DEFAULT]rpc_response_timeout.
    2. The user deletes it again. nova ignores every DELETE of a server
       in 'deleting' whose compute is up ("already in deleting state"):
       the server stays for good, with its guest and its allocations,
       until an admin's reset-state. With the fix the delete is sent
       again: nothing is left of the server, no guest either.
    """

    def _leave_deleting(self, server, seconds_ago):
        """What a DELETE that stopped ``seconds_ago`` leaves: the server in
        task_state 'deleting', last updated then.
        """
        left = timeutils.utcnow() - datetime.timedelta(seconds=seconds_ago)
        for cctxt in self._cell_contexts():
            try:
                instance = objects.Instance.get_by_uuid(cctxt, server['id'])
            except exception.InstanceNotFound:
                continue
            instance.task_state = 'deleting'
            instance.updated_at = left
            instance.save()
            instance.refresh()
            self.assertEqual('deleting', instance.task_state)
            return instance
        self.fail('no cell holds the server')

    def test_retries_inside_the_window_do_not_put_it_off(self):
        """A client that retries sooner than [DEFAULT]rpc_response_timeout
        gets the server deleted once that long has passed since the
        stopped DELETE, not since its last retry.

        nova's delete saves the instance before it ignores a DELETE of a
        server in 'deleting', which refreshed updated_at: each retry
        restarted the wait, and a client retrying every 30 s never had
        the server deleted. The test shortens the window rather than
        wait for it: the stopped DELETE is 40 s old and the window 60 s;
        a retry is ignored (the delete may still be under way); then the
        window is made 30 s, which 40 s exceed unless the retry put the
        server's clock back.
        """
        self.flags(rpc_response_timeout=60)
        server, _source, _target = self._create_server()
        instance = self._leave_deleting(server, 40)
        stopped_at = instance.updated_at
        self.api.api_delete('/servers/%s' % server['id'],
                            check_response_status=[204])
        instance.refresh()
        self.assertEqual('deleting', instance.task_state,
                         'a DELETE inside the window was not ignored')
        self.assertEqual(stopped_at, instance.updated_at,
                         base.STUCK + 'the ignored DELETE saved the server: '
                         'each retry restarts the wait for a stopped delete')
        self.flags(rpc_response_timeout=30)
        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)
        self.assert_no_guest_left(server)

    def test_retry_the_delete(self):
        server, _source, _target = self._create_server()
        instance = self._leave_deleting(server,
                                        CONF.rpc_response_timeout + 60)
        self.assertTrue(timeutils.is_older_than(
            instance.updated_at, CONF.rpc_response_timeout))
        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)
        self.assert_no_guest_left(server)


class DeleteWhileUnshelveLandsTest(_DeleteFaultsTestBase):
    """Regression test for a delete's faults: a server on no host is put
    on one while the API deletes it.

    1. A server is shelved and offloaded: it is on no host.
    2. The user unshelves it; the conductor schedules it and casts to the
       target's compute.
    3. The user deletes it. It is on no host, so the API deletes it
       locally: it saves the record DELETED and destroys it on the
       condition that it still has no host. In between, the compute's
       unshelve claims the host (the test lets it run up to there as the
       API reaches the destroy), and Instance.destroy refuses ("host
       changed"). nova's DELETE answers 500 and leaves the record DELETED
       on that host, where the unshelve goes on.
    4. With the fix the API reads the server again and deletes it as a
       server on that host: the DELETE answers 204, and nothing is left
       of it once the target's compute has deleted it, no guest either.
    """

    def test_delete_completes(self):
        server, release = self._unshelve_held_at_the_compute()
        destroy = objects.Instance.destroy
        landed = []

        def claim_lands(instance, *args, **kwargs):
            if (not landed and instance.uuid == server['id'] and
                    not instance.host):
                # The API's destroy of the record it read on no host: the
                # unshelve claims its host now.
                release.set()
                deadline = time.monotonic() + TIMEOUT
                while time.monotonic() < deadline:
                    current = objects.Instance.get_by_uuid(
                        instance._context, instance.uuid)
                    if current.host:
                        landed.append(current.host)
                        break
                    time.sleep(0.05)
            return destroy(instance, *args, **kwargs)

        self.stub_out('nova.objects.Instance.destroy', claim_lands)
        response = self.api.api_delete('/servers/%s' % server['id'],
                                       check_response_status=[204, 500])
        self.assertEqual(1, len(landed), 'the unshelve did not claim its '
                         'host during the delete: nothing to recreate')
        self.assertEqual(204, response.status, base.SERVER_ERROR +
                         'the DELETE of a server put on a host while it '
                         'was deleted answered %s' % response.status)
        self.assert_retry_deletes(server)
        self.assert_server_left_nothing(server)
        self.assert_no_guest_left(server)


class _SourceStopsBeforeReleaseMixin(object):
    """Regression test for a move's source that stops before it removes
    the migration's allocations (found by the race explorer's restart
    variant).

    1. A move ends as it should: the source records the migration
       'confirmed' (a cold migration's confirm) or 'completed' (a live
       migration), and stops right then, before it deletes the
       allocations the migration consumer holds on the source node
       (_delete_allocation_after_move never runs).
    2. The source compute service starts again.
    3. The user deletes the server.

    On nova, nothing ever removes the migration consumer's allocations on
    the source: the resource tracker only considers moves in progress,
    and the delete removes those of the server only. The fixes' delete
    skips finished migrations (its cost does not grow with the server's
    history), so the restarted source's init_host removes the allocations
    of finished migrations it was the source of that its nodes still
    hold. Before the delete, the server holds exactly its flavor on the
    target.
    """

    source_guest_stays = False

    def _move(self, server, target):
        raise NotImplementedError()

    def _source_stops_before_release(self):
        """Move a server; its source stops right before it releases the
        migration's allocations, which are left.

        :returns: the server (ACTIVE on the target), the source and
            target hosts, and the migration's uuid
        """
        original = compute_manager.ComputeManager.__dict__[
            '_delete_allocation_after_move']
        server, source, target = self._create_server()
        stopped = threading.Event()
        self.addCleanup(stopped.set)

        def stop_here(manager, *args, **kwargs):
            # The service stops here: nothing of the release runs.
            stopped.set()

        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_delete_allocation_after_move', stop_here)
        self._move(server, target)
        self.wait_for(stopped, 'the source\'s release of the migration\'s '
                      'allocations', TIMEOUT)
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(target, server['OS-EXT-SRV-ATTR:host'])
        migration = self.get_migration_uuid_for_instance(server['id'])
        self.assertNotEqual({}, self._get_allocations_by_server_uuid(
            migration), 'the release ran: nothing to recreate')
        # The source service that starts again runs nova's code.
        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_delete_allocation_after_move', original)
        return server, source, target, migration

    def test_delete_after_the_restart(self):
        server, source, target, migration = (
            self._source_stops_before_release())
        held = self._get_allocations_by_server_uuid(server['id'])
        target_rp = self._get_provider_uuid_by_host(target)
        self.assertEqual([target_rp], list(held))

        self.computes[source] = self.restart_compute_service(
            self.computes[source])
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            migration), base.LEAK + 'the finished migration still holds '
            'the source node once its source restarted')
        # The live server keeps exactly its allocations.
        self.assertEqual(held, self._get_allocations_by_server_uuid(
            server['id']))

        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)

    def test_delete_after_a_restart_that_could_not_release(self):
        # The same, and when the source starts again placement fails the
        # delete of the migration's allocations: the migration must be
        # recorded so that the delete of the server removes them.
        server, source, _target, migration = (
            self._source_stops_before_release())
        url = '/allocations/%s' % migration
        delete = report.SchedulerReportClient.delete
        failed = []

        def migration_delete_fails(client, path, *args, **kwargs):
            if path == url:
                failed.append(('delete', path))
                raise base._connect_failure()
            return delete(client, path, *args, **kwargs)

        self.stub_out('nova.scheduler.client.report.SchedulerReportClient.'
                      'delete', migration_delete_fails)
        self.computes[source] = self.restart_compute_service(
            self.computes[source])
        self.stub_out('nova.scheduler.client.report.SchedulerReportClient.'
                      'delete', delete)

        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)
        self.assertEqual([('delete', url)], failed,
                         'the restarted source did not meet the failure')

    def test_delete_after_a_restart_that_could_not_read(self):
        # The same, and placement is unreachable while the source starts
        # again: it cannot even read what its nodes hold. Nothing would
        # look again, and the delete of the server skips finished
        # migrations: a periodic task reads what init_host could not.
        server, source, _target, migration = (
            self._source_stops_before_release())
        failed, down = self.placement_down()
        self.computes[source] = self.restart_compute_service(
            self.computes[source])
        down.clear()
        self.assertIn(('get', '/resource_providers/%s/allocations'
                       % self._get_provider_uuid_by_host(source)), failed,
                      'the restarted source did not meet the outage')
        self.assertNotEqual({}, self._get_allocations_by_server_uuid(
            migration), 'the restart removed them: nothing to recreate')

        self._run_periodic_tasks(source)
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            migration), base.LEAK + 'the finished migration still holds '
            'the source node once the source\'s periodic tasks ran with '
            'placement back')
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)


class ConfirmSourceRestartsThenDeleteTest(
        _SourceStopsBeforeReleaseMixin, _DeleteFaultsTestBase):
    __doc__ = _SourceStopsBeforeReleaseMixin.__doc__

    def _move(self, server, target):
        self._migrate_server(server)
        self._confirm_resize(server)


class LiveMigrationSourceRestartsThenDeleteTest(
        _SourceStopsBeforeReleaseMixin, _DeleteFaultsTestBase):
    __doc__ = _SourceStopsBeforeReleaseMixin.__doc__

    def _move(self, server, target):
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': target, 'block_migration': 'auto'}})
