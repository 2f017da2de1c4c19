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

"""Servers that live through a placement outage in the middle of a move:
the move fails, and its rollback cannot give the allocations back.

The property (base.NovaFixesTestMixin.assert_survivor): once placement
is back and every compute has run one pass of its periodics, the server
holds exactly its flavor on the host where its guest runs and nothing
anywhere else, no migration of a move that is over holds anything, it
has no task state, and the quota counts it once in both counting modes.
Then its delete leaves nothing.

On vanilla nova (checked on 34.0.0) the conductor's or the compute's
rollback logs that it cannot reach placement and records the migration
'error': the migration consumer keeps the source's allocations, and the
instance consumer holds the destination's claim (a failed prep_resize)
or nothing at all (a failed scheduling), for as long as the server
lives. The resource tracker's periodic skips the migration ('error' is
loaded with the moves in progress) and only warns about the instance
consumer on the destination. The race explorer's survive mode finds the
same at almost every step of every move (the outage fault).
"""

import datetime
import threading
from unittest import mock

from oslo_db import exception as db_exc
from oslo_utils import timeutils

from nova.compute import manager as compute_manager
from nova import context as nova_context
from nova import objects
from nova.scheduler.client import query
from nova.tests.functional import integrated_helpers

from tests.functional import base

TIMEOUT = 30


class _StaleMoveTestBase(base.NovaFixesTestMixin,
                         integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(_StaleMoveTestBase, self).setUp()
        self._start_compute('host1')
        self._start_compute('host2')
        self.server = self._create_server(networks='none')
        self.source = self.server['OS-EXT-SRV-ATTR:host']
        self.target = 'host2' if self.source == 'host1' else 'host1'

    def placement_down_in(self, cls, method):
        """Placement becomes unreachable for nova's services when
        ``cls.method`` is entered, and stays so until the returned event
        is cleared.
        """
        state = {}
        original = getattr(cls, method)

        def entered(*args, **kwargs):
            if 'down' not in state:
                state['down'] = self.placement_down()[1]
            return original(*args, **kwargs)

        self.stub_out('%s.%s.%s' % (cls.__module__, cls.__name__, method),
                      entered)
        return state

    def placement_back(self, state):
        self.assertIn('down', state, 'the outage never started')
        state['down'].clear()

    def move_fails(self, action, status, host=None):
        """Run ``action``; once its migration is 'error' and the server
        has no task state (the rollback is over, placement still down),
        return the server. It is then on its source, or on ``host``, the
        destination its migration names (a finish that failed there).
        """
        self.api.post_server_action(self.server['id'], action)
        migration = self._wait_for_migration_status(self.server, ['error'])
        self.assertEqual(self.source, migration['source_compute'])
        if host is not None:
            self.assertEqual(host, migration['dest_compute'])
        return self._wait_for_server_parameter(
            self.server, {'status': status, 'OS-EXT-STS:task_state': None,
                          'OS-EXT-SRV-ATTR:host': host or self.source})

    def assert_healed(self, server):
        # Placement is back: one pass of every compute's periodics puts
        # the allocations where the guest runs, a second changes nothing.
        self._run_periodics()
        self.assert_survivor(server, self.source)
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)


class RollbackWithoutPlacementTest(_StaleMoveTestBase):
    """A move whose rollback runs while placement is unreachable."""

    def test_live_migration_scheduling_fails(self):
        # The conductor moved the source's allocations to the migration;
        # placement goes down as it asks the scheduler for a host, which
        # then finds none, and the rollback cannot move them back. The
        # instance holds nothing.
        state = self.placement_down_in(query.SchedulerQueryClient,
                                       'select_destinations')
        server = self.move_fails(
            {'os-migrateLive': {'host': None, 'block_migration': 'auto'}},
            'ACTIVE')
        self.placement_back(state)
        self.assert_healed(server)

    def test_cold_migration_scheduling_fails(self):
        state = self.placement_down_in(query.SchedulerQueryClient,
                                       'select_destinations')
        server = self.move_fails({'migrate': None}, 'ACTIVE')
        self.placement_back(state)
        self.assert_healed(server)

    def test_cold_migration_prep_resize_fails(self):
        # The destination's prep_resize cannot claim: the server goes to
        # ERROR on the source; the instance consumer keeps the
        # destination's claim, the migration the source's allocations.
        state = self.placement_down_in(compute_manager.ComputeManager,
                                       '_prep_resize')
        server = self.move_fails({'migrate': None}, 'ERROR')
        self.placement_back(state)
        self.assert_healed(server)


class StaleMoveNoRegressionTest(_StaleMoveTestBase):
    """No regression: the periodics change nothing for a resize waiting
    for its confirm (the instance holds the destination, the migration
    the source, as nova defines it), nor for a move that nova's own
    rollback completed.
    """

    recreates = False

    def test_verify_resize_left_as_it_is(self):
        server = self._migrate_server(self.server)
        before = self._all_allocations()
        self._run_periodics()
        self.assertEqual(before, self._all_allocations())
        server = self._confirm_resize(server)
        self._run_periodics()
        self.assert_survivor(server, self.target)

    def test_rolled_back_move_left_as_it_is(self):
        # prep_resize fails with placement up: nova's rollback gives the
        # allocations back itself.
        original = compute_manager.ComputeManager._prep_resize

        def fails(*args, **kwargs):
            raise Exception('the destination fails its prep_resize')

        self.stub_out('nova.compute.manager.ComputeManager._prep_resize',
                      fails)
        self.api.post_server_action(self.server['id'], {'migrate': None})
        self._wait_for_migration_status(self.server, ['error'])
        self.stub_out('nova.compute.manager.ComputeManager._prep_resize',
                      original)
        server = self._wait_for_server_parameter(
            self.server, {'OS-EXT-STS:task_state': None,
                          'OS-EXT-SRV-ATTR:host': self.source})
        self.assert_survivor(server, self.source)


class UnhostedWithoutPlacementTest(_StaleMoveTestBase):
    """A server with no host to run on whose claim could not be given back
    while placement was unreachable: a build that failed (the compute's
    reschedule found no host, the server is ERROR without a host), a
    shelve offload (the guest is destroyed, the server SHELVED_OFFLOADED).
    On vanilla nova (checked on 34.0.0) the claim stays on the compute for
    as long as the server lives: its periodic takes a hostless instance
    for one being scheduled, and a shelved offloaded one on its host for
    one it does not know what to do with.
    """

    def test_build_fails(self):
        self.delete_server_and_wait(self.server)
        state = self.placement_down_in(compute_manager.ComputeManager,
                                       '_build_and_run_instance')
        server = self._create_server(networks='none',
                                     expected_state='ERROR')
        server = self._wait_for_server_parameter(
            server, {'OS-EXT-STS:task_state': None,
                     'OS-EXT-SRV-ATTR:host': None})
        self.placement_back(state)
        self._run_periodics()
        self.assert_survivor(server, None)
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)

    def test_shelve_offload_fails(self):
        # The offload destroys the guest, cannot give the allocations
        # back, records the server SHELVED_OFFLOADED and fails before it
        # clears the host.
        state = self.placement_down_in(compute_manager.ComputeManager,
                                       '_shelve_offload_instance')
        self.api.post_server_action(self.server['id'], {'shelve': None})
        server = self._wait_for_server_parameter(
            self.server, {'status': 'SHELVED_OFFLOADED',
                          'OS-EXT-STS:task_state': None})
        self.placement_back(state)
        self._run_periodics()
        self.assert_survivor(server, None)
        # Unshelved, it holds its flavor where its guest runs again.
        self.api.post_server_action(server['id'], {'unshelve': None})
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assert_survivor(server, server['OS-EXT-SRV-ATTR:host'])
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)

    def test_unshelve_fails(self):
        # The conductor claimed a host; the compute's unshelve fails
        # while placement is down and cannot give the claim back.
        self.api.post_server_action(self.server['id'], {'shelve': None})
        server = self._wait_for_server_parameter(
            self.server, {'status': 'SHELVED_OFFLOADED',
                          'OS-EXT-STS:task_state': None,
                          'OS-EXT-SRV-ATTR:host': None})
        state = self.placement_down_in(compute_manager.ComputeManager,
                                       '_unshelve_instance')
        self.api.post_server_action(server['id'], {'unshelve': None})
        server = self._wait_for_server_parameter(
            server, {'status': 'SHELVED_OFFLOADED',
                     'OS-EXT-STS:task_state': None})
        self.placement_back(state)
        self._run_periodics()
        self.assert_survivor(server, None)
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)


class FinishFailsWithoutPlacementTest(_StaleMoveTestBase):
    """A cold migration or resize whose finish_resize fails on the
    destination while placement is unreachable. resize_instance on the
    source has moved the server to the destination (its guest there, the
    source's powered off and kept on its disk); finish_resize's failure
    puts the server in ERROR there, records the migration 'error' and
    removes what the migration holds on the source, which it cannot do
    without placement. On vanilla nova (checked on 34.0.0) the migration
    keeps the source's allocations for as long as the server lives: the
    source's periodic sees its own, powered-off guest and only warns.
    """

    def finish_fails(self, action):
        state = self.placement_down_in(compute_manager.ComputeManager,
                                       'finish_resize')
        server = self.move_fails(action, 'ERROR', host=self.target)
        self.placement_back(state)
        self._run_periodics()
        self.assert_survivor(server, self.target)
        # A hard reboot recovers it where it is, as nova's failure path
        # says, and it holds its flavor there.
        self.api.post_server_action(server['id'],
                                    {'reboot': {'type': 'HARD'}})
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assert_survivor(server, self.target)
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)

    def test_cold_migration_finish_fails(self):
        self.finish_fails({'migrate': None})

    def test_resize_finish_fails(self):
        bigger = self._create_flavor(vcpu=2, memory_mb=1024, disk=1,
                                     ephemeral=0)
        self.finish_fails({'resize': {'flavorRef': bigger}})


class SameHostResizeWithoutPlacementTest(_StaleMoveTestBase):
    """A resize on the same host whose prep_resize fails while placement
    is unreachable: the server goes to ERROR on its host with its old
    flavor, the migration keeps the old flavor's allocations and the
    instance the new flavor's claim, both on the one host. On vanilla
    nova (checked on 34.0.0) both stay for as long as the server lives;
    the periodic that took the migration's for the extra ones (a resize
    that finished) left the instance holding the flavor its guest does
    not use.
    """

    def setUp(self):
        # One compute: the resize can only stay on it.
        super(_StaleMoveTestBase, self).setUp()
        self.flags(allow_resize_to_same_host=True)
        self._start_compute('host1')
        self.server = self._create_server(networks='none')
        self.source = self.target = 'host1'

    def test_resize_prep_resize_fails(self):
        bigger = self._create_flavor(vcpu=2, memory_mb=1024, disk=1,
                                     ephemeral=0)
        state = self.placement_down_in(compute_manager.ComputeManager,
                                       '_prep_resize')
        server = self.move_fails({'resize': {'flavorRef': bigger}},
                                 'ERROR')
        self.placement_back(state)
        self.assert_healed(server)


class _AbandonedMoveTestBase(_StaleMoveTestBase):
    """A move abandoned by a failed database write, and time passing."""

    def prep_resize_event_fails(self, action):
        failed = threading.Event()
        original = objects.InstanceActionEvent.event_start

        def event_start(cls, ctxt, instance_uuid, event_name, *args,
                        **kwargs):
            # stub_out keeps it a classmethod, as nova's is.
            if event_name == 'compute_prep_resize' and not failed.is_set():
                failed.set()
                raise db_exc.DBConnectionError('the cell database is gone')
            return original(ctxt, instance_uuid, event_name, *args,
                            **kwargs)

        self.stub_out('nova.objects.InstanceActionEvent.event_start',
                      event_start)
        self.api.post_server_action(self.server['id'], action)
        self.assertTrue(failed.wait(TIMEOUT), 'prep_resize never started')
        server = self._wait_for_server_parameter(
            self.server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None,
                          'OS-EXT-SRV-ATTR:host': self.source})
        migration, = self.migrations_of(server)
        self.assertEqual('pre-migrating', migration.status)
        return server

    def migrations_of(self, server):
        return objects.MigrationList.get_by_filters(
            nova_context.get_admin_context(), {'instance_uuid': server['id']})

    def an_hour_later(self):
        """Time as the services see it an hour later, until the returned
        callable puts it back.
        """
        later = timeutils.utcnow() + datetime.timedelta(hours=1)
        clock = mock.patch('oslo_utils.timeutils.utcnow',
                           return_value=later)
        clock.start()
        self.addCleanup(clock.stop)
        return clock.stop

    def assert_abandoned_move_healed(self, server):
        back = self.an_hour_later()
        self.assert_survivor(server, self.source, right_away=False)
        back()
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)


class AbandonedMoveTest(_AbandonedMoveTestBase):
    """A move that nothing will end: the destination's prep_resize fails
    before its body runs, because the write of its instance action event
    fails (the cell database is briefly gone). nova's reverts_task_state
    clears the task state; nothing records the migration over. The
    server lives on its source, ACTIVE, but the migration stays
    'pre-migrating' holding the source's allocations, and the instance
    consumer holds the destination's claim (the conductor's swap), for
    as long as the server lives. On vanilla nova (checked on 34.0.0) the
    resource tracker's periodic takes the migration for a move in
    progress and leaves both. The race explorer's survive mode with its
    dbfail fault finds it at the start of every compute RPC handler of a
    move.

    The periodic takes such a move for abandoned once the migration and
    its instance have been left unchanged for a grace (five minutes):
    the check runs an hour later.
    """

    def test_cold_migration_prep_resize_event_fails(self):
        server = self.prep_resize_event_fails({'migrate': None})
        self.assert_abandoned_move_healed(server)

    def test_resize_prep_resize_event_fails(self):
        bigger = self._create_flavor(vcpu=2, memory_mb=1024, disk=1,
                                     ephemeral=0)
        server = self.prep_resize_event_fails(
            {'resize': {'flavorRef': bigger}})
        self.assert_abandoned_move_healed(server)

    def test_source_restarts_after_the_cast_was_lost(self):
        # The conductor swapped the allocations and cast prep_resize to
        # the destination, which never got it (the message was lost);
        # the source compute restarts and its init_host clears the task
        # state RESIZE_PREP, as nova does for a move it takes for not
        # started. The migration stays 'pre-migrating'.
        lost = threading.Event()

        def prep_resize(manager, *args, **kwargs):
            lost.set()

        self.stub_out('nova.compute.manager.ComputeManager.prep_resize',
                      prep_resize)
        self.api.post_server_action(self.server['id'], {'migrate': None})
        self.assertTrue(lost.wait(TIMEOUT), 'prep_resize was never cast')
        self.computes[self.source] = self.restart_compute_service(
            self.computes[self.source])
        server = self._wait_for_server_parameter(
            self.server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None,
                          'OS-EXT-SRV-ATTR:host': self.source})
        migration, = self.migrations_of(server)
        self.assertEqual('pre-migrating', migration.status)
        self.assert_abandoned_move_healed(server)


class AbandonedMoveNoRegressionTest(_AbandonedMoveTestBase):
    """No regression: within the grace, the periodic takes the same move
    for one in progress and leaves it; a move whose server has a task
    state is never abandoned, however long it has been.
    """

    recreates = False

    def test_left_within_the_grace(self):
        server = self.prep_resize_event_fails({'migrate': None})
        migration, = self.migrations_of(server)
        before = self._get_allocations_by_server_uuid(migration.uuid)
        self.assertEqual([self._get_provider_uuid_by_host(self.source)],
                         list(before))
        self._run_periodics()
        self.assertEqual(before, self._get_allocations_by_server_uuid(
            migration.uuid))
        migration, = self.migrations_of(server)
        self.assertEqual('pre-migrating', migration.status)

    def test_left_while_its_server_has_a_task_state(self):
        # The destination's prep_resize does not start for an hour: the
        # server keeps its task state, the move is in progress.
        started = threading.Event()
        go_on = threading.Event()
        original = compute_manager.ComputeManager.prep_resize

        def held(manager, *args, **kwargs):
            started.set()
            go_on.wait(TIMEOUT)
            return original(manager, *args, **kwargs)

        self.stub_out('nova.compute.manager.ComputeManager.prep_resize',
                      held)
        self.api.post_server_action(self.server['id'], {'migrate': None})
        self.assertTrue(started.wait(TIMEOUT), 'prep_resize never started')
        before = self._all_allocations()
        back = self.an_hour_later()
        self._run_periodics()
        back()
        self.assertEqual(before, self._all_allocations())
        migration, = self.migrations_of(self.server)
        self.assertEqual('pre-migrating', migration.status)
        go_on.set()
        server = self._wait_for_state_change(self.server, 'VERIFY_RESIZE')
        server = self._confirm_resize(server)
        self.assert_survivor(server, self.target)
