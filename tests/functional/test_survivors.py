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

"""Servers that live through a fault: a move whose source compute dies in
the middle of its driver call and restarts.

The property (base.NovaFixesTestMixin.assert_survivor): once the services
are back and have run their init_host and one pass of their periodics,
the server that was not deleted holds exactly its flavor on the host
where its guest runs and nothing anywhere else, has no migration left in
progress for a move that is over, has no task state that nothing will
clear, and is counted once by the quota in both counting modes. Then its
delete leaves nothing.

On vanilla nova (checked on 34.0.0) the source's init_host rolls the
move back (RESIZE_MIGRATING: driver.finish_revert_migration; MIGRATING:
_reset_live_migration) and touches no allocation: the instance consumer
keeps the destination's claim and the migration consumer the source's,
for as long as the server lives. A cold migration's migration even stays
'migrating'. The quota counted from placement counts the flavor twice.
"""

import threading

import requests

from nova.compute import manager as compute_manager
from nova import context as nova_context
from nova import objects
from nova.tests.functional import integrated_helpers
from nova.virt import fake

from tests.functional import base

TIMEOUT = 30


class Died(BaseException):
    """The compute process died inside the driver call: a BaseException,
    so that none of nova's ``except Exception`` handlers (error out the
    instance, revert the allocations, record the migration 'error') runs,
    as none would in a process that died.
    """


def _unavailable():
    """What placement answers when it is there but cannot serve."""
    response = requests.Response()
    response.status_code = 503
    response._content = b'503 Service Unavailable'
    return response


class _SurvivorTestBase(base.NovaFixesTestMixin,
                        integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(_SurvivorTestBase, self).setUp()
        self._start_compute('host1')
        self._start_compute('host2')

    def _create_server(self):
        server = super(_SurvivorTestBase, self)._create_server(
            networks='none')
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        return server, source, target

    def die_in(self, driver_method, entry):
        """The compute that calls ``FakeDriver.<driver_method>`` first
        dies there: the call blocks until the test restarts that compute;
        its thread then ends (Died) without running any more of nova's
        code, and the service starts again (restart_after_death).
        ``entry`` is the ComputeManager method at the top of that thread,
        where Died stops.

        :returns: an event set once the call is reached
        """
        reached = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)
        ended = threading.Event()
        self._death = (release, ended)
        original = getattr(fake.FakeDriver, driver_method)
        state = {'died': False}

        def dying(driver, *args, **kwargs):
            if state['died']:
                return original(driver, *args, **kwargs)
            state['died'] = True
            reached.set()
            release.wait(TIMEOUT)
            raise Died()

        self.stub_out('nova.virt.fake.FakeDriver.' + driver_method, dying)
        top = getattr(compute_manager.ComputeManager, entry)

        def ends(*args, **kwargs):
            try:
                return top(*args, **kwargs)
            except Died:
                ended.set()
                return None

        self.stub_out('nova.compute.manager.ComputeManager.' + entry, ends)
        return reached

    def restart_after_death(self, host):
        """The dead compute's thread ends, then its service starts again
        (init_host runs, its guests as they were). The service's stop
        waits for the RPC handlers in flight: the thread must end first.
        """
        release, ended = self._death
        release.set()
        self.wait_for(ended, 'the dead thread to end', TIMEOUT)
        self.computes[host] = self.restart_compute_service(
            self.computes[host])

    def record_task_state_cleared(self, server):
        """What placement and the migrations of ``server`` hold at the
        moment its task state is first saved None: once it is, the API
        accepts another move, so nothing of the interrupted one may be
        left to do then.

        :returns: a list the record is appended to
        """
        record = []
        save = objects.Instance.save

        def recording_save(instance, *args, **kwargs):
            clearing = (instance.uuid == server['id'] and not record and
                        'task_state' in instance.obj_what_changed() and
                        instance.task_state is None)
            result = save(instance, *args, **kwargs)
            if clearing:
                record.append({
                    'server': self._get_allocations_by_server_uuid(
                        server['id']),
                    'migrations': {
                        m.uuid: (m.status,
                                 self._get_allocations_by_server_uuid(
                                     m.uuid))
                        for m in self.migrations_of(server)}})
            return result

        self.stub_out('nova.objects.Instance.save', recording_save)
        return record

    def assert_given_back_when_task_state_cleared(self, record, source):
        """The record of record_task_state_cleared shows the server holding
        its flavor on the source only, and its migration over and holding
        nothing.
        """
        self.assertEqual(1, len(record), 'the task state was never cleared')
        source_rp = self._get_provider_uuid_by_host(source)
        self.assertEqual(
            [source_rp], list(record[0]['server']),
            base.LEAK + 'the server held %s, not only its source, when its '
            'task state was cleared' % list(record[0]['server']))
        self.assertEqual(
            [('error', {})], list(record[0]['migrations'].values()),
            base.LEAK + 'its migration was still in progress or holding '
            'allocations when the task state was cleared: %s'
            % record[0]['migrations'])

    def restart_during_outage(self, action, driver_method, entry,
                              failure=None):
        """The source dies in ``driver_method`` during ``action`` and
        starts again while placement fails (``failure``, see
        base.placement_down); placement comes back, then the survivor
        property is checked after the periodics: nothing could be
        written before.
        """
        server, source, target = self._create_server()
        died = self.die_in(driver_method, entry)
        self.api.post_server_action(server['id'], action)
        self.wait_for(died, driver_method, TIMEOUT)
        failed, down = self.placement_down(failure)
        self.restart_after_death(source)
        # The restarted service met the outage (its start's update of the
        # node's inventory at least).
        self.assertNotEqual([], failed)
        down.clear()
        self.assert_survivor(server, source, right_away=False)
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)

    def migrations_of(self, server):
        ctxt = nova_context.get_admin_context()
        return objects.MigrationList.get_by_filters(
            ctxt, {'instance_uuid': server['id']})


class ColdMigrationSourceDiesTest(_SurvivorTestBase):
    """The source compute dies inside migrate_disk_and_power_off (the
    guest is being powered off and its disk moved) and restarts: its
    init_host finds the server in RESIZE_MIGRATING and brings the guest
    back on the source.
    """

    def test_source_dies_in_migrate_disk_and_power_off(self):
        server, source, target = self._create_server()
        died = self.die_in('migrate_disk_and_power_off', 'resize_instance')
        self.api.post_server_action(server['id'], {'migrate': None})
        self.wait_for(died, 'migrate_disk_and_power_off', TIMEOUT)
        self.restart_after_death(source)
        self.assert_survivor(server, source)
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)

    def test_given_back_before_the_task_state_is_cleared(self):
        """Once init_host saves the task state None, another move may be
        asked for; a give-back after that could replace its claim and
        drop its migration context. All is given back before.
        """
        server, source, target = self._create_server()
        died = self.die_in('migrate_disk_and_power_off', 'resize_instance')
        self.api.post_server_action(server['id'], {'migrate': None})
        self.wait_for(died, 'migrate_disk_and_power_off', TIMEOUT)
        record = self.record_task_state_cleared(server)
        self.restart_after_death(source)
        self.assert_given_back_when_task_state_cleared(record, source)
        self.assert_survivor(server, source)

    def test_source_restarts_while_placement_is_down(self):
        """The source starts again while placement is down: init_host
        cannot give back what the move took, and nova's init rolls the
        move back all the same. The move must still be recorded over (its
        migration 'error', not 'migrating' for ever), so that once
        placement is back the resource tracker's periodic gives the
        source back to the server on positive evidence (the move is
        over, the server is settled here and the driver has its guest).
        """
        self.restart_during_outage({'migrate': None},
                                   'migrate_disk_and_power_off',
                                   'resize_instance')

    def test_source_restarts_while_placement_answers_503(self):
        """As above, placement answering 503 instead of not answering."""
        self.restart_during_outage({'migrate': None},
                                   'migrate_disk_and_power_off',
                                   'resize_instance', failure=_unavailable)

    def test_resize_source_dies_in_migrate_disk_and_power_off(self):
        """A resize: the destination holds the new flavor, the source the
        old one; the guest is back with the old flavor on the source.
        """
        server, source, target = self._create_server()
        flavor = self._create_flavor(vcpu=2, memory_mb=1024, disk=2)
        died = self.die_in('migrate_disk_and_power_off', 'resize_instance')
        self.api.post_server_action(server['id'],
                                    {'resize': {'flavorRef': flavor}})
        self.wait_for(died, 'migrate_disk_and_power_off', TIMEOUT)
        self.restart_after_death(source)
        self.assert_survivor(server, source)
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)


class FinishDestinationDiesTest(_SurvivorTestBase):
    """The destination compute dies inside finish_migration (the source
    had moved the instance to it: its host is the destination) and
    restarts: nova's init has no branch for RESIZE_FINISH and leaves the
    server there, where no request acts on it, its migration holding the
    source. As a failed finish_resize does, the server must end in ERROR
    on the destination (a hard reboot may recover it) holding only the
    destination, its migration 'error'.
    """

    def _interrupt_finish(self, server, target, action):
        died = self.die_in('finish_migration', 'finish_resize')
        self.api.post_server_action(server['id'], action)
        self.wait_for(died, 'finish_migration', TIMEOUT)
        self.restart_after_death(target)

    def test_destination_dies_in_finish_migration(self):
        server, source, target = self._create_server()
        self._interrupt_finish(server, target, {'migrate': None})
        self.assert_survivor(server, target)
        self.assertEqual('ERROR', self.api.get_server(server['id'])['status'])
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)

    def test_resize_destination_dies_in_finish_migration(self):
        server, source, target = self._create_server()
        flavor = self._create_flavor(vcpu=2, memory_mb=1024, disk=2)
        self._interrupt_finish(server, target,
                               {'resize': {'flavorRef': flavor}})
        self.assert_survivor(server, target)
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)


class RevertSourceDiesTest(_SurvivorTestBase):
    """The source compute dies inside finish_revert_migration (the revert
    had put the instance back on the source, its old flavor saved and its
    allocations moved back) and restarts: nova's init has no branch for
    RESIZE_REVERTING and leaves the server there, in RESIZED, where no
    request acts on it. The revert must be finished: the guest back on
    the source, the server in the state it had before the resize.
    """

    def _interrupt_revert(self, server, source, action):
        self.api.post_server_action(server['id'], action)
        self._wait_for_state_change(server, 'VERIFY_RESIZE')
        died = self.die_in('finish_revert_migration',
                           'finish_revert_resize')
        self.api.post_server_action(server['id'], {'revertResize': None})
        self.wait_for(died, 'finish_revert_migration', TIMEOUT)
        self.restart_after_death(source)

    def test_source_dies_in_finish_revert_migration(self):
        server, source, target = self._create_server()
        self._interrupt_revert(server, source, {'migrate': None})
        self.assert_survivor(server, source)
        self.assertEqual('ACTIVE', self.api.get_server(server['id'])['status'])
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)

    def test_resize_source_dies_in_finish_revert_migration(self):
        server, source, target = self._create_server()
        flavor = self._create_flavor(vcpu=2, memory_mb=1024, disk=2)
        self._interrupt_revert(server, source,
                               {'resize': {'flavorRef': flavor}})
        self.assert_survivor(server, source)
        server = self.api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual(1, server['flavor']['vcpus'])
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)


class LiveMigrationSourceDiesTest(_SurvivorTestBase):
    """The source compute dies inside the driver's live_migration and
    restarts: its init_host finds the server in MIGRATING, aborts the
    migration in the driver and records it 'error'; the guest runs on the
    source.
    """

    def test_source_dies_in_live_migration(self):
        server, source, target = self._create_server()
        died = self.die_in('live_migration', '_do_live_migration')
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
        self.wait_for(died, 'live_migration', TIMEOUT)
        self.restart_after_death(source)
        self.assert_survivor(server, source)
        self.delete_server_and_wait(server)
        self.assert_server_left_nothing(server)

    def test_source_restarts_while_placement_is_down(self):
        """As for a cold migration: nova's init aborts the live migration
        and records it 'error'; the periodic gives the source back once
        placement is back.
        """
        self.restart_during_outage(
            {'os-migrateLive': {'host': None, 'block_migration': 'auto'}},
            'live_migration', '_do_live_migration')

    def test_given_back_before_the_task_state_is_cleared(self):
        """As for a cold migration: nothing is left to give back once the
        task state is saved None.
        """
        server, source, target = self._create_server()
        died = self.die_in('live_migration', '_do_live_migration')
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
        self.wait_for(died, 'live_migration', TIMEOUT)
        record = self.record_task_state_cleared(server)
        self.restart_after_death(source)
        self.assert_given_back_when_task_state_cleared(record, source)
        self.assert_survivor(server, source)


class SurvivorNoRegressionTest(_SurvivorTestBase):
    """No regression: a compute that restarts with no move in flight, and
    one whose move was rolled back by nova's own error handling, leave
    their servers exactly as they were.
    """

    recreates = False

    def test_restart_with_nothing_in_flight(self):
        server, source, target = self._create_server()
        self.computes[source] = self.restart_compute_service(
            self.computes[source])
        self.assert_survivor(server, source)

    def test_move_completed_then_restart(self):
        server, source, target = self._create_server()
        self._migrate_server(server)
        server = self._confirm_resize(server)
        for host in (source, target):
            self.computes[host] = self.restart_compute_service(
                self.computes[host])
        self.assert_survivor(server, target)
