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


class InterruptedFinishTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._init_instance and
    _error_out_interrupted_finish: a resize whose finish was interrupted
    on this host ends in ERROR here, as a failed finish_resize does.
    """

    HOST = 'dest-host'

    def setUp(self):
        super(InterruptedFinishTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.compute.host = self.HOST
        self.context = context.get_admin_context()
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, host=self.HOST,
            vm_state=vm_states.ACTIVE, task_state=task_states.RESIZE_FINISH)
        self.instance.migration_context = objects.MigrationContext(
            migration_id=1)
        self.migration = objects.Migration(
            id=1, uuid=uuids.migration, status='post-migrating',
            source_compute='source-host', dest_compute=self.HOST)

    def _init(self, after):
        def init(ctxt, instance):
            instance.task_state = after

        with mock.patch.object(self.compute, '_init_instance_as_nova_does',
                               side_effect=init), \
                mock.patch.object(self.compute,
                                  '_error_out_interrupted_finish') as end:
            self.compute._init_instance(self.context, self.instance)
        return end

    def test_init_ends_an_interrupted_finish(self):
        self._init(task_states.RESIZE_FINISH).assert_called_once_with(
            self.context, self.instance)

    def test_init_leaves_a_finish_nova_handled(self):
        self._init(None).assert_not_called()
        self.instance.host = 'other-host'
        self._init(task_states.RESIZE_FINISH).assert_not_called()

    def _end(self, delete_error=None):
        with mock.patch.object(objects.Migration, 'get_by_id_and_instance',
                               return_value=self.migration), \
                mock.patch.object(self.migration, 'save') as save, \
                mock.patch.object(self.compute,
                                  '_delete_allocation_after_move',
                                  side_effect=delete_error) as delete, \
                mock.patch.object(self.instance, 'save') as instance_save:
            self.compute._error_out_interrupted_finish(
                self.context, self.instance)
        return save, delete, instance_save

    def test_ends_in_error_without_the_source_allocations(self):
        save, delete, instance_save = self._end()
        self.assertEqual('error', self.migration.status)
        save.assert_called_once_with()
        delete.assert_called_once_with(self.context, self.instance,
                                       self.migration)
        self.assertEqual(vm_states.ERROR, self.instance.vm_state)
        self.assertIsNone(self.instance.task_state)
        instance_save.assert_called_once_with()

    def test_a_failed_delete_still_ends_in_error(self):
        save, delete, instance_save = self._end(
            delete_error=ValueError('placement'))
        self.assertEqual('error', self.migration.status)
        self.assertEqual(vm_states.ERROR, self.instance.vm_state)
        self.assertIsNone(self.instance.task_state)
