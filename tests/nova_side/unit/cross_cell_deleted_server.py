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

from nova.compute import instance_actions
from nova.compute import power_state
from nova.compute import task_states
from nova.compute import vm_states
from nova.conductor.tasks import cross_cell_migrate
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.objects import fields
from nova import test
from nova.tests.unit import fake_instance


class FinishResizeAtDestDeletedDuringCrossCellTestCase(test.TestCase):
    """Tests for FinishResizeAtDestTask._update_instance_mapping when the
    server is deleted while the destination finishes (bug 1848343).
    """

    def setUp(self):
        super(FinishResizeAtDestDeletedDuringCrossCellTestCase,
              self).setUp()
        cells = list(self.cell_mappings.values())
        self.source_cell, self.target_cell = cells[0], cells[1]
        self.source_context = nova_context.RequestContext(
            user_id='fake-user', project_id='fake-project', is_admin=True)
        self.target_context = self.source_context.elevated()
        nova_context.set_target_cell(self.source_context, self.source_cell)
        nova_context.set_target_cell(self.target_context, self.target_cell)
        source_instance = self._create_instance(
            self.source_context, host='source-host', hidden=False,
            vm_state=vm_states.ACTIVE,
            task_state=task_states.RESIZE_MIGRATED)
        objects.InstanceMapping(
            self.source_context, instance_uuid=source_instance.uuid,
            project_id=source_instance.project_id,
            cell_mapping=self.source_cell).create()
        objects.InstanceAction.action_start(
            self.source_context, source_instance.uuid,
            instance_actions.RESIZE, want_result=False)
        # The destination has finished: the target cell's copy is RESIZED
        # with no task_state.
        target_instance = self._create_instance(
            self.target_context, host='dest-host', hidden=True,
            vm_state=vm_states.RESIZED, task_state=None)
        self.task = cross_cell_migrate.FinishResizeAtDestTask(
            self.target_context, target_instance,
            objects.Migration(dest_compute='dest-host'), source_instance,
            compute_rpcapi=mock.Mock(),
            target_cell_mapping=self.target_cell,
            snapshot_id=uuids.snapshot_id,
            request_spec=objects.RequestSpec())

    def _create_instance(self, ctxt, **updates):
        inst = objects.Instance(
            ctxt, uuid=uuids.instance, project_id='fake-project',
            user_id='fake-user', **updates)
        inst.create()
        return inst

    def _source_copy(self):
        return objects.Instance.get_by_uuid(self.source_context,
                                            uuids.instance)

    def _target_copy(self):
        return objects.Instance.get_by_uuid(self.target_context,
                                            uuids.instance)

    def _actions(self, ctxt):
        return [action.action for action in
                objects.InstanceActionList.get_by_instance_uuid(
                    ctxt, uuids.instance)]

    def _assert_mapped_to_target(self):
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            self.target_context, uuids.instance)
        self.assertEqual(self.target_cell.uuid, mapping.cell_mapping.uuid)

    def _assert_target_copy_deleted(self):
        target = self._target_copy()
        self.assertEqual(task_states.DELETING, target.task_state)
        self.assertFalse(target.hidden)
        self.assertEqual([instance_actions.DELETE],
                         self._actions(self.target_context))
        terminate = self.task.compute_rpcapi.terminate_instance
        terminate.assert_called_once_with(
            self.target_context, self.task.instance, mock.ANY)
        bdms = terminate.call_args[0][2]
        self.assertIsInstance(bdms, objects.BlockDeviceMappingList)
        self.assertEqual(0, len(bdms))

    def test_source_copy_alive(self):
        """The ordinary finish: the mapping is swapped, nothing deleted."""
        self.task._update_instance_mapping()
        self._assert_mapped_to_target()
        self.assertTrue(self._source_copy().hidden)
        target = self._target_copy()
        self.assertFalse(target.hidden)
        self.assertIsNone(target.task_state)
        self.assertEqual([], self._actions(self.target_context))
        self.task.compute_rpcapi.terminate_instance.assert_not_called()

    def test_source_copy_being_deleted(self):
        """A DELETE read the mapping before the swap and is deleting the
        source cell's copy: the target cell's copy is deleted too.
        """
        source = self._source_copy()
        source.task_state = task_states.DELETING
        source.save()
        self.task._update_instance_mapping()
        self._assert_mapped_to_target()
        self.assertTrue(self._source_copy().hidden)
        self._assert_target_copy_deleted()

    def test_source_copy_destroyed(self):
        """The DELETE has destroyed the source cell's copy already: hiding
        it fails, which is no error, and the target cell's copy is deleted.
        """
        self._source_copy().destroy()
        self.task._update_instance_mapping()
        self._assert_mapped_to_target()
        self._assert_target_copy_deleted()

    def test_execute_delete_during_finish(self):
        """The whole task, the DELETE arriving while the destination
        finishes the resize.
        """
        def fake_finish(ctxt, instance, migration, snapshot_id, reqspec):
            # The API deletes the copy the mapping names, the source's.
            self._source_copy().destroy()
            # The destination finishes the resize.
            target = self._target_copy()
            target.task_state = None
            target.save()

        finish = self.task.compute_rpcapi.finish_snapshot_based_resize_at_dest
        finish.side_effect = fake_finish
        self.task.execute()
        finish.assert_called_once_with(
            self.target_context, self.task.instance, self.task.migration,
            uuids.snapshot_id, self.task.request_spec)
        self._assert_mapped_to_target()
        self._assert_target_copy_deleted()

    def test_target_copy_gone_source_alive(self):
        """A failure of the swap is still raised when the source cell's
        copy is not deleted.
        """
        self._target_copy().destroy()
        self.assertRaises(exception.InstanceNotFound,
                          self.task._update_instance_mapping)
        self.assertFalse(self._source_copy().hidden)
        self.task.compute_rpcapi.terminate_instance.assert_not_called()

    def test_target_copy_taken_by_another_delete(self):
        """A DELETE that read the mapping after the swap deletes the target
        cell's copy itself: it is not deleted twice.
        """
        self._source_copy().destroy()
        target = self._target_copy()
        target.task_state = task_states.DELETING
        target.save()
        self.task._update_instance_mapping()
        self._assert_mapped_to_target()
        self.assertEqual([], self._actions(self.target_context))
        self.task.compute_rpcapi.terminate_instance.assert_not_called()


class RevertResizeDeletedDuringCrossCellTestCase(test.NoDBTestCase):
    """Tests for RevertResizeTask._update_instance_mapping and _execute when
    the server is deleted before the revert swaps the mapping (bug 1848343).
    """

    def setUp(self):
        super(RevertResizeDeletedDuringCrossCellTestCase, self).setUp()
        target_cell_context = nova_context.get_admin_context()
        target_cell_context.cell_uuid = uuids.target_cell
        instance = fake_instance.fake_instance_obj(
            target_cell_context, vm_state=vm_states.RESIZED,
            task_state=task_states.RESIZE_REVERTING, host='dest-host',
            expected_attrs=['system_metadata', 'flavor'])
        migration = objects.Migration(
            target_cell_context, uuid=uuids.migration, status='reverting',
            source_compute='source-host', dest_compute='dest-host')
        self.task = cross_cell_migrate.RevertResizeTask(
            target_cell_context, instance, migration, mock.MagicMock(),
            mock.MagicMock())
        source_cell_context = nova_context.get_admin_context()
        source_cell_context.cell_uuid = uuids.source_cell
        self.source_instance = instance.obj_clone()
        self.source_instance._context = source_cell_context
        self.source_instance.host = 'source-host'
        self.source_instance.hidden = True
        self.source_instance.obj_reset_changes()
        self.source_mapping = objects.CellMapping(source_cell_context,
                                                  uuid=uuids.source_cell)
        self.inst_map = objects.InstanceMapping(
            cell_mapping=objects.CellMapping(uuid=uuids.target_cell))
        for patcher in (
                mock.patch.object(objects.InstanceMapping,
                                  'get_by_instance_uuid',
                                  return_value=self.inst_map),
                mock.patch.object(self.inst_map, 'save'),
                mock.patch.object(self.task.instance, 'save'),
                mock.patch.object(objects.InstanceAction, 'action_start'),
                mock.patch.object(objects.BlockDeviceMappingList,
                                  'get_by_instance_uuid')):
            patcher.start()
            self.addCleanup(patcher.stop)
        # The saves of the source cell's copy, and the task_state each saw.
        self.source_saves = []

        def fake_source_save(expected_task_state=None):
            self.source_saves.append(
                (self.source_instance.hidden, self.source_instance.task_state,
                 expected_task_state))
        patcher = mock.patch.object(self.source_instance, 'save',
                                    side_effect=fake_source_save)
        self.mock_source_save = patcher.start()
        self.addCleanup(patcher.stop)

    def _mock_target_copy(self, task_state=None, vm_state=vm_states.RESIZED,
                          side_effect=None):
        """Stub the lookup of the target cell's copy, which must come once
        the mapping is swapped.
        """
        copy = objects.Instance(uuid=self.task.instance.uuid,
                                vm_state=vm_state, task_state=task_state)

        def fake_get(ctxt, instance_uuid, expected_attrs=None):
            self.assertTrue(self.inst_map.save.called,
                            'looked up before the mapping was swapped')
            if side_effect:
                raise side_effect
            return copy
        patcher = mock.patch.object(objects.Instance, 'get_by_uuid',
                                    side_effect=fake_get)
        mock_get = patcher.start()
        self.addCleanup(patcher.stop)
        return mock_get

    def _assert_source_copy_deleted(self):
        self.assertEqual(task_states.DELETING,
                         self.source_instance.task_state)
        # Unhidden with the swap, then DELETING if still reverting.
        self.assertEqual(
            [(False, task_states.RESIZE_REVERTING, None),
             (False, task_states.DELETING, [task_states.RESIZE_REVERTING])],
            self.source_saves)
        source_ctxt = self.source_instance._context
        objects.InstanceAction.action_start.assert_called_once_with(
            source_ctxt, self.source_instance.uuid, instance_actions.DELETE,
            want_result=False)
        objects.BlockDeviceMappingList.get_by_instance_uuid.\
            assert_called_once_with(source_ctxt, self.source_instance.uuid)
        self.task.compute_rpcapi.terminate_instance.assert_called_once_with(
            source_ctxt, self.source_instance,
            objects.BlockDeviceMappingList.get_by_instance_uuid.return_value)

    def test_target_copy_alive(self):
        """The ordinary revert: the mapping is swapped, nothing deleted."""
        mock_get = self._mock_target_copy(
            task_state=task_states.RESIZE_REVERTING)
        self.task._update_instance_mapping(self.source_instance,
                                           self.source_mapping)
        self.assertIs(self.source_mapping, self.inst_map.cell_mapping)
        self.inst_map.save.assert_called_once_with()
        self.assertFalse(self.source_instance.hidden)
        self.assertTrue(self.task.instance.hidden)
        self.assertEqual([(False, task_states.RESIZE_REVERTING, None)],
                         self.source_saves)
        self.task.compute_rpcapi.terminate_instance.assert_not_called()
        objects.InstanceAction.action_start.assert_not_called()
        # The target cell's copy was looked up.
        mock_get.assert_called_once_with(mock.ANY, self.task.instance.uuid,
                                         expected_attrs=mock.ANY)
        self.assertEqual(uuids.target_cell,
                         mock_get.call_args[0][0].cell_uuid)

    def test_target_copy_being_deleted(self):
        """A DELETE of the target cell's copy: the source cell's copy is
        deleted too and the revert stops.
        """
        mock_get = self._mock_target_copy(task_state=task_states.DELETING)
        ex = self.assertRaises(exception.InstanceDeletedDuringRevert,
                               self.task._update_instance_mapping,
                               self.source_instance, self.source_mapping)
        self.assertIn(self.task.instance.uuid, str(ex))
        # The swap was saved first.
        self.assertIs(self.source_mapping, self.inst_map.cell_mapping)
        self.inst_map.save.assert_called_once_with()
        self.task.instance.save.assert_called_once_with()
        self.assertEqual(uuids.target_cell,
                         mock_get.call_args[0][0].cell_uuid)
        self._assert_source_copy_deleted()

    def test_target_copy_vm_state_deleted(self):
        self._mock_target_copy(vm_state=vm_states.DELETED)
        self.assertRaises(exception.InstanceDeletedDuringRevert,
                          self.task._update_instance_mapping,
                          self.source_instance, self.source_mapping)
        self._assert_source_copy_deleted()

    def test_target_copy_destroyed(self):
        """Hiding the target cell's copy fails as the DELETE has destroyed
        it: that is no error, the source cell's copy is deleted.
        """
        self._mock_target_copy(side_effect=exception.InstanceNotFound(
            instance_id=self.task.instance.uuid))
        self.task.instance.save.side_effect = exception.InstanceNotFound(
            instance_id=self.task.instance.uuid)
        self.assertRaises(exception.InstanceDeletedDuringRevert,
                          self.task._update_instance_mapping,
                          self.source_instance, self.source_mapping)
        self.assertIs(self.source_mapping, self.inst_map.cell_mapping)
        self._assert_source_copy_deleted()

    def test_swap_fails_target_copy_alive(self):
        """InstanceNotFound from the swap is raised as before when the
        target cell's copy is not deleted.
        """
        self._mock_target_copy(task_state=task_states.RESIZE_REVERTING)
        self.task.instance.save.side_effect = exception.InstanceNotFound(
            instance_id=self.task.instance.uuid)
        self.assertRaises(exception.InstanceNotFound,
                          self.task._update_instance_mapping,
                          self.source_instance, self.source_mapping)
        self.task.compute_rpcapi.terminate_instance.assert_not_called()
        objects.InstanceAction.action_start.assert_not_called()

    def test_source_copy_taken_by_another_delete(self):
        """A DELETE that read the mapping after the swap deletes the source
        cell's copy itself: it is not deleted twice, the revert stops.
        """
        self._mock_target_copy(task_state=task_states.DELETING)
        self.mock_source_save.side_effect = [
            None, exception.UnexpectedTaskStateError(
                instance_uuid=self.source_instance.uuid,
                expected=task_states.RESIZE_REVERTING,
                actual=task_states.DELETING)]
        self.assertRaises(exception.InstanceDeletedDuringRevert,
                          self.task._update_instance_mapping,
                          self.source_instance, self.source_mapping)
        self.task.compute_rpcapi.terminate_instance.assert_not_called()
        objects.InstanceAction.action_start.assert_not_called()

    def _execute(self, update_mapping_error=None):
        with test.nested(
            mock.patch.object(cross_cell_migrate,
                              'get_inst_and_cell_map_from_source',
                              return_value=(self.source_instance,
                                            self.source_mapping)),
            mock.patch.object(self.task, '_send_resize_revert_notification'),
            mock.patch.object(self.task, '_update_instance_in_source_cell',
                              return_value=objects.Migration(
                                  self.source_instance._context,
                                  status='reverting',
                                  dest_compute='dest-host')),
            mock.patch.object(self.task.migration, 'save'),
            mock.patch.object(self.task.instance, 'destroy'),
            mock.patch.object(objects.RequestSpec, 'get_by_instance_uuid'),
            mock.patch('nova.scheduler.utils.set_vm_state_and_notify'),
        ) as (mock_get_source, mock_notify, mock_update_source,
              mock_mig_save, mock_destroy, mock_get_reqspec,
              mock_set_state):
            if update_mapping_error:
                with mock.patch.object(self.task, '_update_instance_mapping',
                                       side_effect=update_mapping_error):
                    self.assertRaises(type(update_mapping_error),
                                      self.task.execute)
            else:
                self.task.execute()
        mock_notify.assert_called_once_with(self.task.instance,
                                            fields.NotificationPhase.START)
        mock_update_source.assert_called_once_with(self.source_instance)
        return mock_mig_save, mock_destroy, mock_set_state

    def test_execute_target_copy_deleted(self):
        """The revert stops without error and without a rollback."""
        self._mock_target_copy(task_state=task_states.DELETING)
        mock_mig_save, mock_destroy, mock_set_state = self._execute()
        self._assert_source_copy_deleted()
        rpcapi = self.task.compute_rpcapi
        rpcapi.revert_snapshot_based_resize_at_dest.assert_not_called()
        rpcapi.finish_revert_snapshot_based_resize_at_source.\
            assert_not_called()
        mock_destroy.assert_not_called()
        # No rollback: the deleted server is not put in ERROR.
        mock_mig_save.assert_not_called()
        mock_set_state.assert_not_called()
        self.assertEqual('reverting', self.task.migration.status)
        self.assertIsNone(self.task._source_cell_migration)

    def test_execute_other_error_rolled_back(self):
        """Any other failure of the swap is rolled back as before."""
        error = test.TestingException('oops')
        mock_mig_save, mock_destroy, mock_set_state = self._execute(
            update_mapping_error=error)
        mock_mig_save.assert_called_once_with()
        self.assertEqual('error', self.task.migration.status)
        # The rollback of a revert that did not swap the mapping.
        mock_set_state.assert_called_once_with(
            self.source_instance._context, self.task.instance.uuid,
            'compute_task', 'migrate_server',
            {'vm_state': vm_states.ERROR, 'task_state': None}, error,
            mock.ANY)
        self.task.compute_rpcapi.terminate_instance.assert_not_called()


class ConfirmResizeDeletedDuringCrossCellTestCase(test.NoDBTestCase):
    """Tests for ConfirmResizeTask._execute, _cleanup_source_host and
    _finish_confirm_in_target_cell: a confirmation running while another
    one (a DELETE's) has cleaned up the source, and the source's 'error'
    for allocations it left (bug 1848343).
    """

    def setUp(self):
        super(ConfirmResizeDeletedDuringCrossCellTestCase, self).setUp()
        context = nova_context.get_admin_context()
        context.cell_uuid = uuids.target_cell
        self.task = cross_cell_migrate.ConfirmResizeTask(
            context,
            objects.Instance(context, uuid=uuids.instance,
                             host='target-host', vm_state=vm_states.RESIZED,
                             task_state=task_states.DELETING,
                             power_state=power_state.RUNNING,
                             old_flavor=objects.Flavor(),
                             new_flavor=objects.Flavor(),
                             system_metadata={
                                 'old_vm_state': vm_states.ACTIVE}),
            objects.Migration(context, uuid=uuids.migration,
                              dest_compute='target-host',
                              source_compute='source-host',
                              status='confirming'),
            mock.sentinel.legacy_notifier,
            mock.Mock())
        source_context = nova_context.get_admin_context()
        source_context.cell_uuid = uuids.source_cell
        self.source_instance = objects.Instance(
            source_context, uuid=uuids.instance, host='source-host')
        self.source_instance.destroy = mock.Mock()
        self.source_lookups = [(self.source_instance, objects.CellMapping())]
        # Migration.get_by_uuid answers by cell.
        self.migrations = {
            uuids.source_cell: objects.Migration(
                source_context, uuid=uuids.migration, status='confirming',
                source_compute='source-host'),
            uuids.target_cell: objects.Migration(
                context, uuid=uuids.migration, status='confirming')}

        def fake_get_migration(ctxt, migration_uuid):
            self.assertEqual(uuids.migration, migration_uuid)
            migration = self.migrations[ctxt.cell_uuid]
            if isinstance(migration, Exception):
                raise migration
            return migration

        def fake_get_source(ctxt, source_compute, instance_uuid):
            self.assertEqual('source-host', source_compute)
            answer = self.source_lookups.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

        patchers = (
            mock.patch.object(objects.Migration, 'get_by_uuid',
                              side_effect=fake_get_migration),
            mock.patch.object(cross_cell_migrate,
                              'get_inst_and_cell_map_from_source',
                              side_effect=fake_get_source),
            mock.patch.object(objects.InstanceAction, 'action_start'),
            mock.patch.object(objects, 'InstanceActionEvent'),
            mock.patch.object(self.task, '_send_resize_confirm_notification'),
            mock.patch.object(self.task.migration, 'save'),
            mock.patch.object(self.task.instance, 'save'),
            mock.patch.object(self.task.instance, 'drop_migration_context'),
            mock.patch.object(objects.RequestSpec, 'get_by_instance_uuid'),
            mock.patch('nova.scheduler.utils.set_vm_state_and_notify'))
        for patcher in patchers:
            patcher.start()
            self.addCleanup(patcher.stop)
        # The target cell migration's status at each save.
        self.migration_saves = []
        self.task.migration.save.side_effect = (
            lambda: self.migration_saves.append(self.task.migration.status))

    @property
    def confirm_at_source(self):
        return self.task.compute_rpcapi.confirm_snapshot_based_resize_at_source

    @property
    def set_vm_state_and_notify(self):
        return cross_cell_migrate.scheduler_utils.set_vm_state_and_notify

    def _assert_finished_in_target_cell(self, status='confirmed'):
        self.assertEqual(status, self.task.migration.status)
        self.assertEqual(vm_states.ACTIVE, self.task.instance.vm_state)
        self.assertIsNone(self.task.instance.task_state)
        self.assertIsNone(self.task.instance.old_flavor)
        self.assertNotIn('old_vm_state', self.task.instance.system_metadata)
        self.task.instance.drop_migration_context.assert_called_once_with()
        self.task.instance.save.assert_called_once_with(expected_task_state=[
            None, task_states.DELETING, task_states.SOFT_DELETING])
        self.task._send_resize_confirm_notification.assert_called_with(
            self.task.instance, fields.NotificationPhase.END)
        self.set_vm_state_and_notify.assert_not_called()

    def _assert_rolled_back(self, error):
        self.assertEqual(['error'], self.migration_saves)
        self.set_vm_state_and_notify.assert_called_once_with(
            self.task.context, self.task.instance.uuid, 'compute_task',
            'migrate_server',
            {'vm_state': vm_states.ERROR, 'task_state': None}, error,
            mock.ANY)
        self.task.instance.save.assert_not_called()

    def test_execute(self):
        """The ordinary confirmation: unchanged."""
        self.migrations[uuids.source_cell].status = 'confirmed'
        self.task.execute()
        self.confirm_at_source.assert_called_once_with(
            self.source_instance._context, self.source_instance,
            self.migrations[uuids.source_cell])
        self.source_instance.destroy.assert_called_once_with(
            hard_delete=True)
        self._assert_finished_in_target_cell()
        self.assertEqual(['confirmed'], self.migration_saves)
        self.assertEqual([], self.source_lookups)

    def _test_execute_source_cleaned_up_by_other(self, error):
        self.confirm_at_source.side_effect = error
        self.source_lookups.append(exception.InstanceNotFound(
            instance_id=uuids.instance))
        self.task.execute()
        self.assertEqual([], self.source_lookups)
        self.source_instance.destroy.assert_not_called()
        self._assert_finished_in_target_cell()
        self.assertEqual(['confirmed'], self.migration_saves)

    def test_execute_action_gone_source_cleaned_up_by_other(self):
        """The user's confirmation hard-deleted the source cell's copy with
        its actions while this one (the DELETE's) waited on the source.
        """
        self._test_execute_source_cleaned_up_by_other(
            exception.InstanceActionNotFound(request_id='req',
                                             instance_uuid=uuids.instance))

    def test_execute_instance_gone_source_cleaned_up_by_other(self):
        self._test_execute_source_cleaned_up_by_other(
            exception.InstanceNotFound(instance_id=uuids.instance))

    def test_execute_migration_gone_source_cleaned_up_by_other(self):
        self._test_execute_source_cleaned_up_by_other(
            exception.MigrationNotFound(migration_id=uuids.migration))

    def test_execute_source_copy_gone_before_start(self):
        """The other confirmation completed before this one started."""
        self.source_lookups = [
            exception.InstanceNotFound(instance_id=uuids.instance)] * 2
        self.task.execute()
        self.assertEqual([], self.source_lookups)
        self.confirm_at_source.assert_not_called()
        self._assert_finished_in_target_cell()

    def test_execute_other_recorded_left_allocations(self):
        """The other confirmation recorded the target cell's migration
        'error' for allocations the source left: it stays 'error'.
        """
        self.confirm_at_source.side_effect = exception.InstanceActionNotFound(
            request_id='req', instance_uuid=uuids.instance)
        self.source_lookups.append(exception.InstanceNotFound(
            instance_id=uuids.instance))
        self.migrations[uuids.target_cell].status = 'error'
        self.task.execute()
        self._assert_finished_in_target_cell(status='error')
        self.assertEqual(['confirmed', 'error'], self.migration_saves)

    def test_execute_action_gone_source_copy_still_there(self):
        """The source cell's copy is still there: rolled back as before."""
        error = exception.InstanceActionNotFound(
            request_id='req', instance_uuid=uuids.instance)
        self.confirm_at_source.side_effect = error
        self.source_lookups.append(self.source_lookups[0])
        self.assertRaises(exception.InstanceActionNotFound,
                          self.task.execute)
        self.assertEqual([], self.source_lookups)
        self.source_instance.destroy.assert_not_called()
        self._assert_rolled_back(error)

    def test_execute_source_lookup_fails(self):
        """The source cell's copy cannot be looked up: the confirmation's
        own failure is rolled back.
        """
        error = exception.InstanceActionNotFound(
            request_id='req', instance_uuid=uuids.instance)
        self.confirm_at_source.side_effect = error
        self.source_lookups.append(exception.HostMappingNotFound(
            name='source-host'))
        self.assertRaises(exception.InstanceActionNotFound,
                          self.task.execute)
        self.assertEqual([], self.source_lookups)
        self._assert_rolled_back(error)

    def test_execute_other_error_source_copy_gone(self):
        """Only a failure on a source cell record that is gone is taken for
        another confirmation's work; any other is rolled back.
        """
        error = test.TestingException('oops')
        self.confirm_at_source.side_effect = error
        self.source_lookups.append(exception.InstanceNotFound(
            instance_id=uuids.instance))
        self.assertRaises(test.TestingException, self.task.execute)
        # The source cell's copy is not looked up again.
        self.assertEqual(1, len(self.source_lookups))
        self._assert_rolled_back(error)

    def test_execute_source_left_allocations(self):
        """The source recorded its migration 'error': the target cell's
        migration, the one the delete reads, is recorded 'error' too.
        """
        self.migrations[uuids.source_cell].status = 'error'
        self.task.execute()
        self.source_instance.destroy.assert_called_once_with(
            hard_delete=True)
        self._assert_finished_in_target_cell(status='error')
        self.assertEqual(['confirmed', 'error'], self.migration_saves)

    def test_cleanup_source_host_migration_gone(self):
        """The source cell's migration cannot be read again: no error."""
        source_migration = self.migrations[uuids.source_cell]

        def fake_confirm_at_source(ctxt, instance, migration):
            # Another confirmation hard-deleted the source cell's records.
            self.migrations[uuids.source_cell] = exception.MigrationNotFound(
                migration_id=uuids.migration)
        self.confirm_at_source.side_effect = fake_confirm_at_source
        self.task._cleanup_source_host(self.source_instance)
        self.assertEqual(2, objects.Migration.get_by_uuid.call_count)
        self.confirm_at_source.assert_called_once_with(
            self.source_instance._context, self.source_instance,
            source_migration)
        self.task._finish_confirm_in_target_cell()
        self._finish_confirm_status_is('confirmed')

    def _finish_confirm_status_is(self, status):
        self.assertEqual(status, self.task.migration.status)
        self.assertEqual(status, self.migration_saves[-1])

    def test_finish_confirm_in_target_cell_migration_gone(self):
        self.migrations[uuids.target_cell] = exception.MigrationNotFound(
            migration_id=uuids.migration)
        self.task._finish_confirm_in_target_cell()
        self.assertEqual(['confirmed'], self.migration_saves)
        self._finish_confirm_status_is('confirmed')

    def test_finish_confirm_in_target_cell_reads_target_cell(self):
        """The migration read is the target cell's, not the source's."""
        self.migrations[uuids.source_cell].status = 'error'
        self.task._finish_confirm_in_target_cell()
        self.assertEqual(['confirmed'], self.migration_saves)
        self.migrations[uuids.target_cell].status = 'error'
        self.task._finish_confirm_in_target_cell()
        self.assertEqual(['confirmed', 'confirmed', 'error'],
                         self.migration_saves)
