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

from nova.compute import manager as compute_manager
from nova import context
from nova import objects
from nova.tests.functional import integrated_helpers
from nova.virt import fake


class _Stopped(BaseException):
    """The source compute process stopped inside the driver call: none of
    nova's exception handlers runs.
    """


class InterruptedMoveTestBase(integrated_helpers.ProviderUsageBaseTestCase):
    """Two computes, and a compute service that stops inside a driver
    call (_stop_in) and starts again.
    """
    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super().setUp()
        self._start_compute('host1')
        self._start_compute('host2')

    def _stop_in(self, driver_method, entry):
        reached = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)
        original = getattr(fake.FakeDriver, driver_method)
        calls = []
        ended = threading.Event()

        def stopping(driver, *args, **kwargs):
            if calls:
                return original(driver, *args, **kwargs)
            calls.append(args)
            reached.set()
            release.wait(30)
            raise _Stopped()

        self.stub_out('nova.virt.fake.FakeDriver.' + driver_method, stopping)
        top = getattr(compute_manager.ComputeManager, entry)

        def thread_top(*args, **kwargs):
            try:
                return top(*args, **kwargs)
            except _Stopped:
                ended.set()

        self.stub_out('nova.compute.manager.ComputeManager.' + entry,
                      thread_top)
        return reached, release, ended


class TestMoveInterruptedOnItsSource(InterruptedMoveTestBase):
    """A move whose source compute service stops inside the driver call
    and starts again: init_host rolls the move back, and the server must
    then hold exactly its flavor on the source, and nothing else.
    """

    def _interrupt(self, driver_method, entry, action):
        server = self._create_server(networks='none')
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        reached, release, ended = self._stop_in(driver_method, entry)
        self.api.post_server_action(server['id'], action)
        self.assertTrue(reached.wait(30))
        # The process stops: the thread ends there, then the service
        # starts again and init_host runs.
        release.set()
        self.assertTrue(ended.wait(30))
        self.computes[source] = self.restart_compute_service(
            self.computes[source])
        server = self._wait_for_server_parameter(
            server, {'OS-EXT-SRV-ATTR:host': source,
                     'OS-EXT-STS:task_state': None, 'status': 'ACTIVE'})
        return server, source, target

    def _assert_interrupted_move_given_back(self, server, source, target):
        source_rp = self._get_provider_uuid_by_host(source)
        target_rp = self._get_provider_uuid_by_host(target)
        migrations = objects.MigrationList.get_by_filters(
            context.get_admin_context(), {'instance_uuid': server['id']})
        self.assertEqual(1, len(migrations))
        migration = migrations[0]
        # recreate: begin
        # FIXME: The instance consumer keeps the destination's claim and
        # the migration consumer the source's allocations, for as long as
        # the server lives.
        self.assertFlavorMatchesAllocation(
            server['flavor'], server['id'], target_rp)
        self.assertFlavorMatchesAllocation(
            server['flavor'], migration.uuid, source_rp)
        # recreate: else
        self.assertFlavorMatchesAllocation(
            server['flavor'], server['id'], source_rp)
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            migration.uuid))
        self.assertEqual({}, self._get_allocations_by_provider_uuid(
            target_rp))
        self.assertEqual('error', migration.status)
        self._delete_server(server)
        for rp in (source_rp, target_rp):
            self.assertEqual({}, self._get_allocations_by_provider_uuid(rp))
        # recreate: end

    def test_source_stops_in_migrate_disk_and_power_off(self):
        server, source, target = self._interrupt(
            'migrate_disk_and_power_off', 'resize_instance',
            {'migrate': None})
        self._assert_interrupted_move_given_back(server, source, target)

    def test_source_stops_in_live_migration(self):
        server, source, target = self._interrupt(
            'live_migration', '_do_live_migration',
            {'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
        self._assert_interrupted_move_given_back(server, source, target)
