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
from unittest import mock

from oslo_db import exception as db_exc
from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import power_state
from nova import context as nova_context
from nova.policies import base as base_policies
from nova.policies import servers as servers_policies
from nova.tests.functional import integrated_helpers
from nova.virt import fake


class OrphanInstancesTest(integrated_helpers.ProviderUsageBaseTestCase):
    """Tests for the _cleanup_orphan_instances compute periodic task.

    Guests running on a compute host that nova does not account for there
    (no instance record at all, or a live record naming another host with
    no migration in progress) are logged, stopped or reaped as
    [orphan_instances]action says.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self._start_compute('host2')

    def _driver(self, host):
        return self.computes[host].manager.driver

    def _add_unknown_guest(self, host, uuid):
        self._driver(host).instances[uuid] = fake.FakeInstance(
            'guest-%s' % uuid[:8], power_state.RUNNING, uuid)

    def _run_task(self, host):
        manager = self.computes[host].manager
        task = dict(manager._periodic_tasks)['_cleanup_orphan_instances']
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(
                ctxt, self.host_mappings[host].cell_mapping) as cctxt:
            task(manager, cctxt)

    def _logged(self, *words):
        return [line for line in self.stdlog.logger.output.splitlines()
                if 'Orphan instance' in line and
                all(word in line for word in words)]

    def test_default_only_logs(self):
        self._add_unknown_guest('host1', uuids.guest)
        self._run_task('host1')
        self.assertEqual(power_state.RUNNING,
                         self._driver('host1').instances[uuids.guest].state)
        self.assertTrue(self._logged(uuids.guest, 'action is log'))

    def test_unknown_guest_stopped(self):
        self.flags(action='stop', grace_period=0, group='orphan_instances')
        self._add_unknown_guest('host1', uuids.guest)
        self._run_task('host1')
        self.assertEqual(power_state.SHUTDOWN,
                         self._driver('host1').instances[uuids.guest].state)

    def test_unknown_guest_reaped_after_grace_period(self):
        self.flags(action='reap', grace_period=600, group='orphan_instances')
        self._add_unknown_guest('host1', uuids.guest)
        with mock.patch('time.monotonic', return_value=1000.0):
            self._run_task('host1')
        self.assertIn(uuids.guest, self._driver('host1').instances)
        with mock.patch('time.monotonic', return_value=1600.0):
            self._run_task('host1')
        self.assertNotIn(uuids.guest, self._driver('host1').instances)
        self.assertTrue(self._logged(uuids.guest, 'reaped'))

    def test_foreign_guest_reaped_without_its_disks(self):
        """The source guest a failed live migration cleanup leaves behind.

        It is destroyed on the source only, without its disks; the server
        on the destination keeps its guest and its allocations.
        """
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        server = self._create_server(host='host1', networks='none')
        self.stub_out('nova.virt.fake.FakeDriver.post_live_migration',
                      lambda *args, **kwargs: None)
        self.api.post_server_action(
            server['id'], {'os-migrateLive': {'host': 'host2',
                                              'block_migration': 'auto'}})
        self._wait_for_migration_status(server, ['completed'])
        server = self._wait_for_server_parameter(
            server, {'OS-EXT-SRV-ATTR:host': 'host2', 'status': 'ACTIVE'})
        self.assertIn(server['id'], self._driver('host1').instances)
        allocations = self._get_allocations_by_server_uuid(server['id'])

        destroy = self._driver('host1').destroy
        with mock.patch.object(self._driver('host1'), 'destroy',
                               wraps=destroy) as mock_destroy:
            self._run_task('host1')

        self.assertNotIn(server['id'], self._driver('host1').instances)
        self.assertFalse(mock_destroy.call_args.kwargs['destroy_disks'])
        self.assertIn(server['id'], self._driver('host2').instances)
        self.assertEqual(allocations,
                         self._get_allocations_by_server_uuid(server['id']))
        self.assertTrue(self._logged(server['id'], 'foreign', 'host2'))

    def test_migration_in_progress_protects_the_guest(self):
        """A resize waiting for confirmation protects the source guest.

        The guest is on both hosts and the record names host2 until the
        resize is confirmed; once it is, a guest left on host1 is an
        orphan.
        """
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        server = self._create_server(host='host1', networks='none')
        self._migrate_server(server, host='host2')
        self.assertIn(server['id'], self._driver('host1').instances)
        self._run_task('host1')
        self.assertIn(server['id'], self._driver('host1').instances)

        self._confirm_resize(server)
        # The source cleanup of the confirm failed to remove the guest.
        self._add_unknown_guest('host1', server['id'])
        self._run_task('host1')
        self.assertNotIn(server['id'], self._driver('host1').instances)
        self.assertIn(server['id'], self._driver('host2').instances)


class OrphanInstancesCrossCellTest(
        integrated_helpers.ProviderUsageBaseTestCase):
    """Both guests of a cross-cell resize are left alone.

    One of the two records of a cross-cell resize is hidden (the target
    cell's until the guest runs on the destination, the source cell's
    from then on until confirm or revert) and InstanceList.get_by_filters
    skips hidden records: such a guest has a record nova knows all the
    same. host1 is in cell1, host2 in cell2.
    """
    compute_driver = 'fake.MediumFakeDriver'
    NUMBER_OF_CELLS = 2
    _driver = OrphanInstancesTest._driver
    _run_task = OrphanInstancesTest._run_task
    _logged = OrphanInstancesTest._logged

    def setUp(self):
        super().setUp()
        self._start_compute('host1', cell_name='cell1')
        self._start_compute('host2', cell_name='cell2')
        self.policy.set_rules({
            servers_policies.CROSS_CELL_RESIZE:
                base_policies.RULE_ADMIN_API}, overwrite=False)
        self.flags(action='reap', grace_period=0, group='orphan_instances')

    def _resize(self, server):
        self.api.post_server_action(server['id'], {
            'resize': {'flavorRef': self.api.get_flavors()[1]['id']}})

    def test_target_guest_while_its_record_is_hidden(self):
        server = self._create_server(host='host1', networks='none')
        spawned, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)
        original = fake.FakeDriver.spawn
        host2 = self._driver('host2')

        def spawn(driver, *args, **kwargs):
            original(driver, *args, **kwargs)
            if driver is host2 and not spawned.is_set():
                spawned.set()
                release.wait()

        self.stub_out('nova.virt.fake.FakeDriver.spawn', spawn)
        self._resize(server)
        self.assertTrue(spawned.wait(30))
        self._run_task('host2')
        self.assertIn(server['id'], self._driver('host2').instances)
        release.set()
        self._wait_for_state_change(server, 'VERIFY_RESIZE')
        self.assertEqual([], self._logged(server['id']))

    def test_source_guest_at_verify_resize(self):
        server = self._create_server(host='host1', networks='none')

        def destroy(driver, context, instance, *args, **kwargs):
            # A source guest the driver still lists, stopped.
            driver.instances[instance.uuid].state = power_state.SHUTDOWN

        self.stub_out('nova.virt.fake.FakeDriver.destroy', destroy)
        self._resize(server)
        self._wait_for_state_change(server, 'VERIFY_RESIZE')
        self._run_task('host1')
        self.assertIn(server['id'], self._driver('host1').instances)
        self.assertEqual([], self._logged(server['id']))

    def test_decided_without_the_api_database(self):
        """A cell conductor without [api_database] cannot read the
        instance mappings: the guest of a server cell1 holds is left on
        host2 (its allocations), an unknown guest is reaped (no record and
        no migration in cell2, no allocations).
        """
        server = self._create_server(host='host1', networks='none')
        self._driver('host2').instances[server['id']] = fake.FakeInstance(
            'guest', power_state.RUNNING, server['id'])
        self._driver('host2').instances[uuids.unknown] = fake.FakeInstance(
            'guest', power_state.RUNNING, uuids.unknown)
        with mock.patch(
                'nova.objects.InstanceMappingList.'
                '_get_by_instance_uuids_from_db',
                side_effect=db_exc.CantStartEngineError('no API database')):
            self._run_task('host2')
        self.assertIn(server['id'], self._driver('host2').instances)
        self.assertNotIn(uuids.unknown, self._driver('host2').instances)
        self.assertEqual(1, len(self._logged(
            uuids.unknown, 'no allocations in placement', 'reaped')))
