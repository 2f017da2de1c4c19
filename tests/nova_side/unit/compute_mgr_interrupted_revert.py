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

from unittest import mock

from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import manager
from nova.compute import task_states
from nova.compute import vm_states
from nova import context
from nova import objects
from nova import test
from nova.tests.unit import fake_instance


class InterruptedRevertTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._init_instance and
    _finish_interrupted_revert: a revert whose finish was interrupted on
    this host, its source, is finished.
    """

    HOST = 'source-host'

    def setUp(self):
        super(InterruptedRevertTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.compute.host = self.HOST
        self.context = context.get_admin_context()
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, host=self.HOST,
            vm_state=vm_states.RESIZED,
            task_state=task_states.RESIZE_REVERTING)
        self.instance.migration_context = objects.MigrationContext(
            migration_id=1)
        self.instance.system_metadata = {}
        self.migration = objects.Migration(
            id=1, uuid=uuids.migration, status='reverting',
            source_compute=self.HOST, dest_compute='dest-host')

    def _init(self, after):
        def init(ctxt, instance):
            instance.task_state = after

        with mock.patch.object(self.compute, '_init_instance_as_nova_does',
                               side_effect=init), \
                mock.patch.object(self.compute,
                                  '_finish_interrupted_revert') as finish:
            self.compute._init_instance(self.context, self.instance)
        return finish

    def test_init_finishes_an_interrupted_revert(self):
        self._init(task_states.RESIZE_REVERTING).assert_called_once_with(
            self.context, self.instance)

    def test_init_leaves_a_revert_on_another_host(self):
        self.instance.host = 'dest-host'
        self._init(task_states.RESIZE_REVERTING).assert_not_called()

    def _finish(self, held=None, driver_error=None):
        patches = (
            mock.patch.object(objects.Migration, 'get_by_id_and_instance',
                              return_value=self.migration),
            mock.patch.object(self.migration, 'save'),
            mock.patch.object(self.compute, 'reportclient'),
            mock.patch.object(self.compute, 'driver'),
            mock.patch.object(self.compute, '_revert_allocation'),
            mock.patch.object(self.compute,
                              '_get_instance_block_device_info'),
            mock.patch.object(self.instance, 'save'),
            mock.patch.object(self.instance, 'drop_migration_context'),
            mock.patch.object(self.instance, 'get_network_info'),
        )
        mocks = [p.start() for p in patches]
        for p in patches:
            self.addCleanup(p.stop)
        (_get, save, reportclient, driver, revert, _bdi, _isave, drop,
         _nw) = mocks
        reportclient.get_allocations_for_consumer.return_value = held or {}
        driver.finish_revert_migration.side_effect = driver_error
        self.compute._finish_interrupted_revert(self.context, self.instance)
        return save, revert, driver, drop

    def test_revert_finished(self):
        save, revert, driver, drop = self._finish()
        revert.assert_not_called()
        driver.finish_revert_migration.assert_called_once()
        drop.assert_called_once_with()
        self.assertEqual(vm_states.ACTIVE, self.instance.vm_state)
        self.assertIsNone(self.instance.task_state)
        self.assertIsNone(self.instance.old_flavor)
        self.assertEqual('reverted', self.migration.status)
        save.assert_called_once_with()

    def test_allocations_still_held_are_moved_back(self):
        save, revert, driver, drop = self._finish(held={uuids.rp: {}})
        revert.assert_called_once_with(self.context, self.instance,
                                       self.migration)
        self.assertEqual('reverted', self.migration.status)

    def test_stopped_before_the_resize_stays_stopped(self):
        self.instance.system_metadata['old_vm_state'] = vm_states.STOPPED
        save, revert, driver, drop = self._finish()
        self.assertFalse(driver.finish_revert_migration.call_args[0][5])
        self.assertEqual(vm_states.STOPPED, self.instance.vm_state)

    def test_a_driver_failure_puts_it_in_error(self):
        save, revert, driver, drop = self._finish(
            driver_error=ValueError('disk'))
        drop.assert_not_called()
        self.assertEqual(vm_states.ERROR, self.instance.vm_state)
        self.assertIsNone(self.instance.task_state)
        self.assertEqual('error', self.migration.status)

    def test_a_revert_interrupted_on_its_destination_is_left(self):
        # The destination stopped in revert_resize (the instance is still
        # its): the source was never sent the rest.
        self.migration.source_compute = 'other-host'
        save, revert, driver, drop = self._finish(held={uuids.rp: {}})
        revert.assert_not_called()
        driver.finish_revert_migration.assert_not_called()
        save.assert_not_called()
        self.assertEqual('reverting', self.migration.status)
        self.assertEqual(vm_states.RESIZED, self.instance.vm_state)
