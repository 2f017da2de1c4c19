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


class InterruptedMoveTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._init_instance and
    _return_interrupted_move: a move interrupted on its source, which
    init_host rolls back, gives back what it took in placement.
    """

    HOST = 'source-host'

    def setUp(self):
        super(InterruptedMoveTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.compute.host = self.HOST
        self.context = context.get_admin_context()
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, host=self.HOST,
            vm_state=vm_states.ACTIVE, task_state=None)
        self.migration = objects.Migration(
            id=1, uuid=uuids.migration, status='migrating',
            source_compute=self.HOST, dest_compute='dest-host',
            migration_type='migration')

    def _init(self, task_state, vm_state=vm_states.ACTIVE):
        """nova's init finds ``task_state`` and clears it; returns the
        give-back's mock and the task states each call saw, in order.
        """
        self.instance.task_state = task_state
        self.instance.vm_state = vm_state
        seen = []

        def init(ctxt, instance):
            seen.append(('init', instance.task_state))
            instance.task_state = None

        def give_back(ctxt, instance, task_state):
            seen.append(('give back', instance.task_state))

        with mock.patch.object(self.compute, '_init_instance_as_nova_does',
                               side_effect=init) as nova_init, \
                mock.patch.object(self.compute, '_return_interrupted_move',
                                  side_effect=give_back) as give_back:
            self.compute._init_instance(self.context, self.instance)
        nova_init.assert_called_once_with(self.context, self.instance)
        give_back.seen = seen
        return give_back

    def test_init_gives_back_an_interrupted_resize(self):
        give_back = self._init(task_states.RESIZE_MIGRATING)
        give_back.assert_called_once_with(
            self.context, self.instance, task_states.RESIZE_MIGRATING)
        # Before nova's init clears the task state: once it is cleared
        # another move may start, whose claim a later give-back would undo.
        self.assertEqual([('give back', task_states.RESIZE_MIGRATING),
                          ('init', task_states.RESIZE_MIGRATING)],
                         give_back.seen)

    def test_init_gives_back_an_interrupted_live_migration(self):
        give_back = self._init(task_states.MIGRATING)
        give_back.assert_called_once_with(
            self.context, self.instance, task_states.MIGRATING)
        self.assertEqual([('give back', task_states.MIGRATING),
                          ('init', task_states.MIGRATING)], give_back.seen)

    def test_init_gives_back_a_resize_in_error(self):
        # nova's init rolls back RESIZE_MIGRATING in ERROR too.
        self._init(task_states.RESIZE_MIGRATING,
                   vm_states.ERROR).assert_called_once_with(
            self.context, self.instance, task_states.RESIZE_MIGRATING)

    def test_init_of_an_instance_without_task_state(self):
        # A partly deleted instance may have no task state loaded: nova's
        # init returns early for it, and nothing else is done.
        instance = objects.Instance(uuid=uuids.instance, host=self.HOST,
                                    vm_state=vm_states.DELETED)
        with mock.patch.object(self.compute,
                               '_init_instance_as_nova_does') as nova_init, \
                mock.patch.object(self.compute,
                                  '_return_interrupted_move') as give_back:
            self.compute._init_instance(self.context, instance)
        nova_init.assert_called_once_with(self.context, instance)
        give_back.assert_not_called()

    def test_init_leaves_other_task_states(self):
        for task_state in (None, task_states.RESIZE_PREP,
                           task_states.RESIZE_FINISH, task_states.DELETING):
            self._init(task_state).assert_not_called()

    def test_init_leaves_what_nova_does_not_roll_back(self):
        # nova's init returns before its roll-back for these.
        for task_state, vm_state in (
                (task_states.MIGRATING, vm_states.ERROR),
                (task_states.MIGRATING, vm_states.SOFT_DELETED),
                (task_states.RESIZE_MIGRATING, vm_states.DELETED),
                (task_states.RESIZE_MIGRATING, vm_states.BUILDING)):
            self._init(task_state, vm_state).assert_not_called()
        # Another host's instance: nova's init skips it.
        self.instance.host = 'other-host'
        self._init(task_states.MIGRATING).assert_not_called()

    def _give_back(self, task_state, exists=True):
        self.instance.migration_context = objects.MigrationContext(
            migration_id=self.migration.id)
        copy = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, host=self.HOST,
            task_state=task_state)
        copy.system_metadata = {'old_vm_state': 'active', 'other': 'kept'}
        with mock.patch.object(objects.Migration, 'get_by_id_and_instance',
                               return_value=self.migration) as get, \
                mock.patch.object(objects.Instance, 'get_by_uuid',
                                  return_value=copy) as get_copy, \
                mock.patch.object(copy, 'save') as save_copy, \
                mock.patch.object(copy, 'drop_migration_context') as drop, \
                mock.patch.object(self.compute, 'driver') as driver, \
                mock.patch.object(self.compute,
                                  '_revert_allocation') as revert, \
                mock.patch.object(self.migration, 'save') as save, \
                mock.patch.object(self.instance, 'save') as save_instance:
            driver.instance_exists.return_value = exists
            self.compute._return_interrupted_move(
                self.context, self.instance, task_state)
        get.assert_called_once_with(self.context, self.migration.id,
                                    self.instance.uuid)
        save_instance.assert_not_called()
        return revert, save, drop, get_copy, save_copy, copy

    def test_resize_given_back_when_the_guest_is_here(self):
        revert, save, drop, get_copy, save_copy, copy = self._give_back(
            task_states.RESIZE_MIGRATING)
        revert.assert_called_once_with(self.context, self.instance,
                                       self.migration)
        self.assertEqual('error', self.migration.status)
        save.assert_called_once_with()
        # What prep_resize set is dropped through a copy read from the
        # database, with the move's task state required; the instance nova's
        # roll-back reads keeps its migration context.
        get_copy.assert_called_once_with(
            self.context, uuids.instance, expected_attrs=[
                'migration_context', 'flavor', 'system_metadata'])
        self.assertIsNone(copy.new_flavor)
        self.assertIsNone(copy.old_flavor)
        self.assertEqual({'other': 'kept'}, copy.system_metadata)
        save_copy.assert_called_once_with(
            expected_task_state=[task_states.RESIZE_MIGRATING])
        drop.assert_called_once_with()
        self.assertIsNotNone(self.instance.migration_context)
        # Unchanged: nova's save of the instance does not write it back.
        self.assertNotIn('migration_context',
                         self.instance.obj_what_changed())

    def test_nothing_changed_when_the_guest_is_not_here(self):
        revert, save, drop, get_copy, save_copy, _ = self._give_back(
            task_states.RESIZE_MIGRATING, exists=False)
        revert.assert_not_called()
        save.assert_not_called()
        get_copy.assert_not_called()
        save_copy.assert_not_called()
        drop.assert_not_called()
        self.assertEqual('migrating', self.migration.status)

    @mock.patch.object(objects.MigrationList, 'get_by_filters')
    def test_live_migration_from_this_host(self, get_by_filters):
        other = objects.Migration(id=2, uuid=uuids.other, status='running',
                                  source_compute='other-host')
        self.migration.migration_type = 'live-migration'
        self.migration.status = 'running'
        get_by_filters.return_value = [other, self.migration]
        with mock.patch.object(self.compute, 'driver') as driver, \
                mock.patch.object(self.compute,
                                  '_revert_allocation') as revert, \
                mock.patch.object(self.migration, 'save') as save:
            driver.instance_exists.return_value = True
            self.compute._return_interrupted_move(
                self.context, self.instance, task_states.MIGRATING)
        revert.assert_called_once_with(self.context, self.instance,
                                       self.migration)
        # Left 'running': nova's _reset_live_migration, which runs next,
        # aborts a running one and records it 'error'.
        save.assert_not_called()
        self.assertEqual('running', self.migration.status)
        filters = get_by_filters.call_args[0][1]
        self.assertEqual(uuids.instance, filters['instance_uuid'])
        self.assertEqual('live-migration', filters['migration_type'])

    @mock.patch.object(objects.MigrationList, 'get_by_filters')
    def test_live_migration_not_yet_running(self, get_by_filters):
        # nova's init does not touch a queued or preparing one.
        self.migration.migration_type = 'live-migration'
        for status in ('queued', 'preparing'):
            self.migration.status = status
            get_by_filters.return_value = [self.migration]
            with mock.patch.object(self.compute, 'driver') as driver, \
                    mock.patch.object(self.compute,
                                      '_revert_allocation') as revert, \
                    mock.patch.object(self.migration, 'save') as save:
                driver.instance_exists.return_value = True
                self.compute._return_interrupted_move(
                    self.context, self.instance, task_states.MIGRATING)
            revert.assert_called_once_with(self.context, self.instance,
                                           self.migration)
            save.assert_called_once_with()
            self.assertEqual('error', self.migration.status)

    @mock.patch.object(objects.MigrationList, 'get_by_filters',
                       return_value=[])
    def test_no_live_migration_found(self, get_by_filters):
        with mock.patch.object(self.compute,
                               '_revert_allocation') as revert:
            self.compute._return_interrupted_move(
                self.context, self.instance, task_states.MIGRATING)
        revert.assert_not_called()

    def test_a_failure_does_not_stop_the_start(self):
        with mock.patch.object(
                objects.Migration, 'get_by_id_and_instance',
                side_effect=ValueError('no database')):
            self.instance.migration_context = objects.MigrationContext(
                migration_id=1)
            # Logged, not raised.
            self.compute._return_interrupted_move(
                self.context, self.instance, task_states.RESIZE_MIGRATING)
