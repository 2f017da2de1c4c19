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

from nova import context
from nova import objects
from nova.tests.functional.compute import test_interrupted_moves


class TestResizeFinishInterrupted(
        test_interrupted_moves.InterruptedMoveTestBase):
    """The destination compute service stops inside the driver's
    finish_migration (resize_instance had moved the instance to it) and
    starts again: the server must not stay in RESIZE_FINISH, where no
    request acts on it. As a failed finish_resize does, it ends in ERROR
    on the destination, holding only the destination, its migration
    'error' and holding nothing.
    """

    def test_destination_stops_in_finish_migration(self):
        server = self._create_server(networks='none')
        source = server['OS-EXT-SRV-ATTR:host']
        target = 'host2' if source == 'host1' else 'host1'
        source_rp = self._get_provider_uuid_by_host(source)
        target_rp = self._get_provider_uuid_by_host(target)
        reached, release, ended = self._stop_in('finish_migration',
                                                'finish_resize')
        self.api.post_server_action(server['id'], {'migrate': None})
        self.assertTrue(reached.wait(30))
        release.set()
        self.assertTrue(ended.wait(30))
        self.computes[target] = self.restart_compute_service(
            self.computes[target])
        server = self.api.get_server(server['id'])
        self.assertEqual(target, server['OS-EXT-SRV-ATTR:host'])
        migration = objects.MigrationList.get_by_filters(
            context.get_admin_context(), {'instance_uuid': server['id']})[0]
        # recreate: begin
        # FIXME: init_host leaves the server in RESIZE_FINISH, where no
        # request acts on it, and its migration holding the source.
        self.assertEqual('resize_finish', server['OS-EXT-STS:task_state'])
        self.assertEqual('post-migrating', migration.status)
        self.assertFlavorMatchesAllocation(
            server['flavor'], migration.uuid, source_rp)
        # recreate: else
        self.assertEqual('ERROR', server['status'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertEqual('error', migration.status)
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            migration.uuid))
        self.assertFlavorMatchesAllocation(
            server['flavor'], server['id'], target_rp)
        self.assertEqual({}, self._get_allocations_by_provider_uuid(
            source_rp))
        # recreate: end
        self.assertFlavorMatchesAllocation(
            server['flavor'], server['id'], target_rp)
