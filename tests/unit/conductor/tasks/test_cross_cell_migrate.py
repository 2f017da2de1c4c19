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

from nova.compute import instance_actions
from nova.compute import task_states
from nova import exception
from nova import objects
import testtools

from nova_fixes.nova.conductor.tasks import cross_cell_migrate as ccm
from nova_fixes.nova import exception as fixes_exception

DELETED_DURING_REVERT = mock.patch(
    'nova.exception.InstanceDeletedDuringRevert', create=True,
    new=fixes_exception.InstanceDeletedDuringRevert)


@mock.patch('nova.objects.BlockDeviceMappingList.get_by_instance_uuid')
@mock.patch('nova.objects.InstanceAction.action_start')
class DeleteInstanceOfDeletedServerTestCase(testtools.TestCase):

    def setUp(self):
        super(DeleteInstanceOfDeletedServerTestCase, self).setUp()
        objects.register_all()
        self.rpcapi = mock.Mock()
        self.instance = mock.Mock(uuid='uuid', host='host1',
                                  task_state=task_states.RESIZE_REVERTING)

    def _delete(self):
        return ccm.delete_instance_of_deleted_server(
            self.rpcapi, self.instance, task_states.RESIZE_REVERTING)

    def test_deleted_as_the_api_deletes(self, action_start, bdms):
        self.assertTrue(self._delete())
        self.assertEqual(task_states.DELETING, self.instance.task_state)
        self.instance.save.assert_called_once_with(
            expected_task_state=[task_states.RESIZE_REVERTING])
        ctxt = self.instance._context
        action_start.assert_called_once_with(
            ctxt, 'uuid', instance_actions.DELETE, want_result=False)
        bdms.assert_called_once_with(ctxt, 'uuid')
        self.rpcapi.terminate_instance.assert_called_once_with(
            ctxt, self.instance, bdms.return_value)

    def test_being_deleted_by_somebody_else(self, action_start, bdms):
        # A DELETE that read the mapping after the swap deletes this copy.
        self.instance.save.side_effect = exception.UnexpectedTaskStateError(
            instance_uuid='uuid', expected='x', actual=task_states.DELETING)
        self.assertFalse(self._delete())
        action_start.assert_not_called()
        self.rpcapi.terminate_instance.assert_not_called()

    def test_already_gone(self, action_start, bdms):
        self.instance.save.side_effect = exception.InstanceNotFound(
            instance_id='uuid')
        self.assertFalse(self._delete())
        action_start.assert_not_called()
        self.rpcapi.terminate_instance.assert_not_called()


class _Task(object):
    """A task of nova's with the drop-ins as methods and nova's originals
    (Target.original_as) mocked.
    """

    def __init__(self, **originals):
        self.context = mock.Mock(name='target_cell_context')
        self.instance = mock.Mock(uuid='uuid')
        self.compute_rpcapi = mock.Mock()
        self.source_cell_instance = mock.Mock(uuid='uuid')
        self.migration = mock.Mock(source_compute='host1')
        self.__dict__.update(originals)


class FinishTask(_Task):
    _update_instance_mapping = ccm.FinishResizeAtDestTask.\
        _update_instance_mapping


class RevertTask(_Task):
    _update_instance_mapping = ccm.RevertResizeTask._update_instance_mapping
    _execute = ccm.RevertResizeTask._execute


class ConfirmTask(_Task):
    _execute = ccm.ConfirmResizeTask._execute


@mock.patch.object(ccm, 'delete_instance_of_deleted_server')
@mock.patch('nova.compute.utils.is_instance_deleted', create=True)
class FinishResizeAtDestTaskTestCase(testtools.TestCase):

    def test_source_copy_alive(self, deleted, delete):
        deleted.return_value = False
        task = FinishTask(_swap_instance_mapping_to_target=mock.Mock())
        task._update_instance_mapping()
        task._swap_instance_mapping_to_target.assert_called_once_with()
        # Asked of the source cell, after the swap.
        deleted.assert_called_once_with(
            task.source_cell_instance._context, 'uuid')
        delete.assert_not_called()

    def test_source_copy_deleted_deletes_the_target_copy(self, deleted,
                                                         delete):
        order = mock.Mock()
        task = FinishTask(_swap_instance_mapping_to_target=order.swap)
        order.attach_mock(deleted, 'deleted')
        deleted.return_value = True
        task._update_instance_mapping()
        self.assertEqual(['swap', 'deleted'],
                         [c[0] for c in order.mock_calls])
        delete.assert_called_once_with(task.compute_rpcapi, task.instance,
                                       None)

    def test_source_copy_removed_before_it_was_hidden(self, deleted,
                                                      delete):
        deleted.return_value = True
        task = FinishTask(_swap_instance_mapping_to_target=mock.Mock(
            side_effect=exception.InstanceNotFound(instance_id='uuid')))
        task._update_instance_mapping()
        delete.assert_called_once_with(task.compute_rpcapi, task.instance,
                                       None)

    def test_instance_not_found_of_a_live_server_is_raised(self, deleted,
                                                           delete):
        deleted.return_value = False
        task = FinishTask(_swap_instance_mapping_to_target=mock.Mock(
            side_effect=exception.InstanceNotFound(instance_id='uuid')))
        self.assertRaises(exception.InstanceNotFound,
                          task._update_instance_mapping)
        delete.assert_not_called()


@DELETED_DURING_REVERT
@mock.patch.object(ccm, 'delete_instance_of_deleted_server')
@mock.patch('nova.compute.utils.is_instance_deleted', create=True)
class RevertResizeTaskTestCase(testtools.TestCase):

    def setUp(self):
        super(RevertResizeTaskTestCase, self).setUp()
        self.source = mock.Mock(uuid='uuid')
        self.mapping = mock.sentinel.source_cell_mapping

    def _task(self, error=None):
        return RevertTask(_swap_instance_mapping_to_source=mock.Mock(
            side_effect=error))

    def _assert_revert_stops(self, task, delete):
        self.assertRaises(fixes_exception.InstanceDeletedDuringRevert,
                          task._update_instance_mapping, self.source,
                          self.mapping)
        delete.assert_called_once_with(task.compute_rpcapi, self.source,
                                       task_states.RESIZE_REVERTING)

    def test_target_copy_alive(self, deleted, delete):
        deleted.return_value = False
        task = self._task()
        task._update_instance_mapping(self.source, self.mapping)
        task._swap_instance_mapping_to_source.assert_called_once_with(
            self.source, self.mapping)
        deleted.assert_called_once_with(task.context, 'uuid')
        delete.assert_not_called()

    def test_target_copy_deleted_deletes_the_source_copy(self, deleted,
                                                         delete):
        deleted.return_value = True
        self._assert_revert_stops(self._task(), delete)

    def test_target_copy_removed_before_it_was_hidden(self, deleted,
                                                      delete):
        deleted.return_value = True
        self._assert_revert_stops(
            self._task(exception.InstanceNotFound(instance_id='uuid')),
            delete)

    def test_instance_not_found_of_a_live_server_is_raised(self, deleted,
                                                           delete):
        deleted.return_value = False
        task = self._task(exception.InstanceNotFound(instance_id='uuid'))
        self.assertRaises(exception.InstanceNotFound,
                          task._update_instance_mapping, self.source,
                          self.mapping)
        delete.assert_not_called()

    def test_execute_ends_the_revert_of_a_deleted_server(self, deleted,
                                                         delete):
        task = RevertTask(_revert_in_both_cells=mock.Mock(
            side_effect=fixes_exception.InstanceDeletedDuringRevert(
                instance_uuid='uuid')))
        self.assertIsNone(task._execute())
        task._revert_in_both_cells.assert_called_once_with()

    def test_execute_raises_other_failures(self, deleted, delete):
        task = RevertTask(_revert_in_both_cells=mock.Mock(
            side_effect=exception.InstanceNotFound(instance_id='uuid')))
        self.assertRaises(exception.InstanceNotFound, task._execute)


@mock.patch.object(ccm, 'get_inst_and_cell_map_from_source')
class ConfirmResizeTaskTestCase(testtools.TestCase):

    def _task(self, error=None):
        return ConfirmTask(
            _confirm_in_both_cells=mock.Mock(side_effect=error),
            _finish_confirm_in_target_cell=mock.Mock(),
            _send_resize_confirm_notification=mock.Mock())

    def test_confirmed(self, lookup):
        task = self._task()
        task._execute()
        task._confirm_in_both_cells.assert_called_once_with()
        lookup.assert_not_called()
        task._finish_confirm_in_target_cell.assert_not_called()

    def test_source_cleaned_up_by_another_confirmation(self, lookup):
        lookup.side_effect = exception.InstanceNotFound(instance_id='uuid')
        task = self._task(exception.InstanceActionNotFound(
            request_id='req', instance_uuid='uuid'))
        task._execute()
        lookup.assert_called_once_with(task.context, 'host1', 'uuid')
        task._finish_confirm_in_target_cell.assert_called_once_with()
        task._send_resize_confirm_notification.assert_called_once_with(
            task.instance, 'end')

    def test_source_copy_left_is_a_failure(self, lookup):
        task = self._task(exception.InstanceActionNotFound(
            request_id='req', instance_uuid='uuid'))
        self.assertRaises(exception.InstanceActionNotFound, task._execute)
        task._finish_confirm_in_target_cell.assert_not_called()

    def test_other_failures_are_rolled_back_without_a_look(self, lookup):
        task = self._task(exception.HostMappingNotFound(name='host1'))
        self.assertRaises(exception.HostMappingNotFound, task._execute)
        lookup.assert_not_called()
        task._finish_confirm_in_target_cell.assert_not_called()

    def test_failed_lookup_raises_the_failure(self, lookup):
        lookup.side_effect = ValueError('cell database down')
        task = self._task(exception.InstanceActionNotFound(
            request_id='req', instance_uuid='uuid'))
        self.assertRaises(exception.InstanceActionNotFound, task._execute)
        task._finish_confirm_in_target_cell.assert_not_called()


class ConfirmAtSourceTask(_Task):
    _cleanup_source_host = ccm.ConfirmResizeTask._cleanup_source_host
    _finish_confirm_in_target_cell = \
        ccm.ConfirmResizeTask._finish_confirm_in_target_cell


@mock.patch('nova.objects.Migration.get_by_uuid')
class ConfirmKeepsAllocationsLeftTestCase(testtools.TestCase):
    """ConfirmResizeTask: a source that left the migration's allocations
    makes the target cell's migration 'error' too.
    """

    @classmethod
    def setUpClass(cls):
        super(ConfirmKeepsAllocationsLeftTestCase, cls).setUpClass()
        objects.register_all()

    def _task(self):
        return ConfirmAtSourceTask(_confirm_at_source=mock.Mock(),
                                   _finish_confirm_as_confirmed=mock.Mock())

    def test_source_released(self, get):
        get.return_value = mock.Mock(status='confirmed')
        task = self._task()
        source = mock.Mock()
        task._cleanup_source_host(source)
        task._confirm_at_source.assert_called_once_with(source)
        # Read in the source cell, after the source answered.
        get.assert_called_once_with(source._context, task.migration.uuid)
        self.assertFalse(getattr(task, '_allocations_left_at_source', False))

    def test_source_left_the_allocations(self, get):
        get.return_value = mock.Mock(status='error')
        task = self._task()
        task._cleanup_source_host(mock.Mock())
        self.assertTrue(task._allocations_left_at_source)

    def test_source_migration_gone(self, get):
        get.side_effect = exception.MigrationNotFound(migration_id='m')
        task = self._task()
        task._cleanup_source_host(mock.Mock())
        self.assertFalse(getattr(task, '_allocations_left_at_source', False))

    def test_finish_confirmed(self, get):
        get.return_value = mock.Mock(status='confirming')
        task = self._task()
        task._finish_confirm_in_target_cell()
        task._finish_confirm_as_confirmed.assert_called_once_with()
        task.migration.save.assert_not_called()

    def test_finish_after_the_source_left_the_allocations(self, get):
        task = self._task()
        task._allocations_left_at_source = True
        order = mock.Mock()
        order.attach_mock(task._finish_confirm_as_confirmed, 'nova')
        order.attach_mock(task.migration.save, 'save')
        task._finish_confirm_in_target_cell()
        get.assert_not_called()
        self.assertEqual('error', task.migration.status)
        self.assertEqual(['nova', 'save'],
                         [c[0] for c in order.mock_calls])

    def test_finish_after_another_confirmation_recorded_it(self, get):
        # The confirmation that cleaned up the source recorded 'error';
        # the other one finishes later and keeps it.
        get.return_value = mock.Mock(status='error')
        task = self._task()
        task._finish_confirm_in_target_cell()
        get.assert_called_once_with(task.context, task.migration.uuid)
        self.assertEqual('error', task.migration.status)
        task.migration.save.assert_called_once_with()
