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

"""Regression tests for orphan instances.

Guests run on a compute host that nova does not account for there: nova's
own running_deleted_instance_action task only sees guests whose instance
record is deleted but still present, so a guest whose record was archived
or purged, never existed, or names another host (the duplicate a failed
live migration cleanup leaves on the source) runs forever, unseen.

The fix adds the compute periodic task _cleanup_orphan_instances. These
tests run it the way nova runs periodic tasks: through the compute
manager's registered periodic tasks. Vanilla nova has no such task, so the
orphan is still running at the end of the scenarios that expect it to be
stopped or reaped: that is the bug.
"""

import threading
from unittest import mock

from nova.compute import power_state
from nova import context as nova_context
from nova.tests.functional import integrated_helpers
from nova.virt import fake
from oslo_utils.fixture import uuidsentinel as uuids

from tests import common
from tests.functional import base

TASK = '_cleanup_orphan_instances'


class _OrphanTestBase(base.NovaFixesTestMixin,
                      integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(_OrphanTestBase, self).setUp()
        self._start_compute('host1')
        self._start_compute('host2')

    def _driver(self, host):
        return self.computes[host].manager.driver

    def _inject_guest(self, host, uuid, state=power_state.RUNNING):
        """A guest on the fake hypervisor that nova knows nothing of."""
        self._driver(host).instances[uuid] = fake.FakeInstance(
            'guest-%s' % uuid[:8], state, uuid)

    def _run_orphan_task(self, host):
        """Run the orphan instances periodic task of host's compute, if
        it has one registered (vanilla nova has none).
        """
        manager = self.computes[host].manager
        tasks = dict(manager._periodic_tasks)
        if TASK not in tasks:
            return False
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(
                ctxt, self.host_mappings[host].cell_mapping) as cctxt:
            tasks[TASK](manager, cctxt)
        return True

    def assert_gone(self, host, uuid):
        self.assertNotIn(uuid, self._driver(host).instances,
                         base.LEAK + 'orphan guest %s still on %s'
                         % (uuid, host))

    def assert_stopped(self, host, uuid):
        self.assertEqual(power_state.SHUTDOWN,
                         self._driver(host).instances[uuid].state,
                         base.LEAK + 'orphan guest %s still running on %s'
                         % (uuid, host))

    def assert_untouched(self, host, uuid):
        self.assertIn(uuid, self._driver(host).instances)
        self.assertEqual(power_state.RUNNING,
                         self._driver(host).instances[uuid].state)

    def orphan_log_lines(self):
        return [line for line in self.stdlog.logger.output.splitlines()
                if 'Orphan instance' in line]

    def assert_logged(self, *words):
        lines = self.orphan_log_lines()
        for line in lines:
            if all(word in line for word in words):
                return line
        self.fail('No orphan instance log line with %s in %s'
                  % (words, lines))


class OrphanInstancesTest(_OrphanTestBase):
    """Regression test for orphan instances: they are stopped or reaped."""

    def test_unknown_guest_is_reaped(self):
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        self._inject_guest('host1', uuids.unknown)
        self._run_orphan_task('host1')
        self.assert_gone('host1', uuids.unknown)
        self.assert_logged(uuids.unknown, 'unknown', 'reaped')

    def test_unknown_guest_is_stopped(self):
        self.flags(action='stop', grace_period=0, group='orphan_instances')
        self._inject_guest('host1', uuids.unknown)
        self._run_orphan_task('host1')
        self.assert_stopped('host1', uuids.unknown)
        self.assert_logged(uuids.unknown, 'unknown', 'stopped')
        # Stopping is all: the guest is still defined, and a second run
        # does not act on it again.
        self._run_orphan_task('host1')
        self.assert_logged(uuids.unknown, 'already stopped')

    def test_server_deleted_while_its_compute_was_down(self):
        """The reporter's first scenario.

        1. A server runs on host1; host1's compute goes down.
        2. The server is deleted: the API deletes it locally, the guest
           keeps running on the unreachable host.
        3. archive_deleted_rows moves its row away.
        4. host1's compute comes back: nova's running-deleted task cannot
           see the guest (no row), only the orphan task can.
        """
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        server = self._create_server(host='host1', networks='none')
        compute = self.computes['host1']
        compute.stop()
        self.api.put_service(compute.service_ref.uuid,
                             {'forced_down': True})
        self.delete_server_and_wait(server)
        self.assertIn(server['id'], self._driver('host1').instances)
        self.archive_and_run_periodics()

        self.api.put_service(compute.service_ref.uuid,
                             {'forced_down': False})
        self.restart_compute_service(compute)
        self.assertIn(server['id'], self._driver('host1').instances)
        self.computes['host1'].manager._cleanup_running_deleted_instances(
            nova_context.get_admin_context())
        self.assertIn(server['id'], self._driver('host1').instances)

        self._run_orphan_task('host1')
        self.assert_gone('host1', server['id'])
        self.assert_logged(server['id'], 'unknown', 'reaped')

    def test_live_migration_whose_source_cleanup_failed(self):
        """The reporter's second scenario.

        1. A server is live migrated from host1 to host2.
        2. The source's cleanup of the guest fails silently: the guest runs
           on both hosts, nova's record says host2.
        3. On host1 the guest is foreign: it is reaped there only, without
           its disks; the server on host2 keeps its guest, its state and
           its allocations.
        """
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        server = self._create_server(host='host1', networks='none')
        self.stub_out('nova.virt.fake.FakeDriver.post_live_migration',
                      lambda *args, **kwargs: None)
        server = self.live_migrate_to(server, 'host2')
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        self.assertIn(server['id'], self._driver('host1').instances)
        host2_rp = self._get_provider_uuid_by_host('host2')
        allocations = self._get_allocations_by_server_uuid(server['id'])

        with mock.patch.object(self._driver('host1'), 'destroy',
                               wraps=self._driver('host1').destroy) as d:
            self._run_orphan_task('host1')
        self.assert_gone('host1', server['id'])
        d.assert_called_once()
        self.assertFalse(d.call_args.kwargs['destroy_disks'])
        self.assertEqual([], d.call_args.kwargs['network_info'])
        self.assertIsNone(d.call_args.kwargs['block_device_info'])
        self.assert_logged(server['id'], 'foreign', 'host2', 'reaped')

        self.assert_untouched('host2', server['id'])
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(allocations,
                         self._get_allocations_by_server_uuid(server['id']))
        self.assertFlavorMatchesAllocation(server['flavor'], server['id'],
                                           host2_rp)
        self.assert_no_leaked_allocations()

    def test_acts_on_a_bounded_number_per_run(self):
        self.flags(action='reap', grace_period=0, max_actions_per_run=2,
                   group='orphan_instances')
        guests = [uuids.g1, uuids.g2, uuids.g3]
        for uuid in guests:
            self._inject_guest('host1', uuid)
        self._run_orphan_task('host1')
        left = [u for u in guests if u in self._driver('host1').instances]
        self.assertEqual(1, len(left), base.LEAK + 'expected 2 reaped')
        self.assert_logged(left[0], 'deferred to the next run')
        self._run_orphan_task('host1')
        self.assert_gone('host1', left[0])


class OrphanInstancesSafetyTest(_OrphanTestBase):
    """The safety rules of the orphan instances task.

    These test the task itself: vanilla nova has no such task, so they do
    not apply to it (the recreate report shows them as n/a there).
    """

    recreates = None

    def setUp(self):
        super(OrphanInstancesSafetyTest, self).setUp()
        if common.mode() == 'vanilla':
            self.skipTest('tests the orphan instances task itself')

    def test_log_is_the_default_and_changes_nothing(self):
        self._inject_guest('host1', uuids.unknown)
        self.assertTrue(self._run_orphan_task('host1'))
        self.assert_untouched('host1', uuids.unknown)
        self.assert_logged(uuids.unknown, 'unknown', 'none (action is log)')

    def test_grace_period(self):
        self.flags(action='reap', grace_period=600, group='orphan_instances')
        self._inject_guest('host1', uuids.unknown)
        with mock.patch('time.monotonic', return_value=1000.0):
            self._run_orphan_task('host1')
        self.assert_untouched('host1', uuids.unknown)
        self.assert_logged(uuids.unknown, 'grace period')
        with mock.patch('time.monotonic', return_value=1599.0):
            self._run_orphan_task('host1')
        self.assert_untouched('host1', uuids.unknown)
        with mock.patch('time.monotonic', return_value=1600.0):
            self._run_orphan_task('host1')
        self.assert_gone('host1', uuids.unknown)

    def test_failed_lookup_decides_nothing(self):
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        self._inject_guest('host1', uuids.unknown)
        for failure in (
                'nova.objects.InstanceList.get_by_filters',
                'nova.objects.MigrationList.'
                'get_in_progress_by_host_and_node',
                'nova.objects.ComputeNodeList.get_all_by_host'):
            with mock.patch(failure, side_effect=Exception('DB down')):
                self._run_orphan_task('host1')
            self.assert_untouched('host1', uuids.unknown)
            self.assertIn('no decision in this run',
                          self.stdlog.logger.output)
        self._run_orphan_task('host1')
        self.assert_gone('host1', uuids.unknown)

    def test_migration_in_progress_protects_the_guest(self):
        """A cold migration waiting for confirmation: the guest is on both
        hosts, the record says host2, the migration protects host1's.
        """
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        server = self._create_server(host='host1', networks='none')
        self._migrate_server(server, host='host2')
        self.assertIn(server['id'], self._driver('host1').instances)
        self._run_orphan_task('host1')
        self._run_orphan_task('host2')
        self.assert_untouched('host1', server['id'])
        self.assert_untouched('host2', server['id'])
        self._confirm_resize(server)
        self._run_orphan_task('host2')
        self.assert_untouched('host2', server['id'])

    def test_live_migration_in_progress_protects_the_guest(self):
        """A live migration in progress: the hypervisor of the destination
        already shows the incoming guest while the record still names the
        source; the migration protects it.
        """
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        server = self._create_server(host='host1', networks='none')
        started, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)
        original = fake.FakeDriver.live_migration

        def live_migration(driver, context, instance, *args, **kwargs):
            # The incoming guest, as libvirt defines it on the destination.
            self._inject_guest('host2', instance.uuid)
            started.set()
            release.wait()
            return original(driver, context, instance, *args, **kwargs)

        self.stub_out('nova.virt.fake.FakeDriver.live_migration',
                      live_migration)
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': 'host2', 'block_migration': 'auto'}})
        self.assertTrue(started.wait(30))
        self._run_orphan_task('host2')
        self._run_orphan_task('host1')
        self.assert_untouched('host2', server['id'])
        self.assert_untouched('host1', server['id'])
        self.assertEqual([], self.orphan_log_lines())
        release.set()
        self._wait_for_migration_status(server, ['completed'])

    def test_deleted_record_is_left_to_nova(self):
        """A guest whose record is deleted (not archived) belongs to
        running_deleted_instance_action.
        """
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        server = self._create_server(host='host1', networks='none')
        self.stub_out('nova.virt.fake.FakeDriver.destroy',
                      lambda *args, **kwargs: None)
        self.delete_server_and_wait(server)
        self.assertIn(server['id'], self._driver('host1').instances)
        self._run_orphan_task('host1')
        self.assert_untouched('host1', server['id'])
        self.assertEqual([], self.orphan_log_lines())

    def test_ignored_guests_are_never_touched(self):
        self.flags(action='reap', grace_period=0,
                   ignore_uuids=[uuids.kept], group='orphan_instances')
        self._inject_guest('host1', uuids.kept)
        self._inject_guest('host1', uuids.unknown)
        self._run_orphan_task('host1')
        self.assert_untouched('host1', uuids.kept)
        self.assert_gone('host1', uuids.unknown)
        self.assertEqual([], [line for line in self.orphan_log_lines()
                              if uuids.kept in line])

    def test_own_guests_are_not_orphans(self):
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        server = self._create_server(host='host1', networks='none')
        self._run_orphan_task('host1')
        self.assert_untouched('host1', server['id'])
        self.assertEqual([], self.orphan_log_lines())
