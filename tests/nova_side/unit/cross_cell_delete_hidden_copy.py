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
from nova.compute import task_states
from nova.compute import vm_states
from nova.conductor.tasks import cross_cell_migrate
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import test
from nova.tests.unit import fake_instance


class DeleteHiddenCopyOfDeletedServerTestCase(test.NoDBTestCase):
    """Tests for cross_cell_migrate.delete_instance_of_deleted_server
    (bug 1848343).
    """

    def setUp(self):
        super(DeleteHiddenCopyOfDeletedServerTestCase, self).setUp()
        self.context = nova_context.get_admin_context()
        self.context.cell_uuid = uuids.cell2
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, host='host2',
            vm_state=vm_states.ERROR, task_state=None, hidden=True)
        self.compute_rpcapi = mock.Mock()
        self.bdms = objects.BlockDeviceMappingList(objects=[])
        patchers = {
            'save': mock.patch.object(objects.Instance, 'save'),
            'action': mock.patch.object(objects.InstanceAction,
                                        'action_start'),
            'bdms': mock.patch.object(objects.BlockDeviceMappingList,
                                      'get_by_instance_uuid',
                                      return_value=self.bdms),
        }
        self.mocks = {}
        for name, patcher in patchers.items():
            self.mocks[name] = patcher.start()
            self.addCleanup(patcher.stop)

    def _delete(self, expected_task_state=None):
        return cross_cell_migrate.delete_instance_of_deleted_server(
            self.compute_rpcapi, self.instance, expected_task_state)

    def _assert_not_deleted(self):
        self.mocks['action'].assert_not_called()
        self.mocks['bdms'].assert_not_called()
        self.compute_rpcapi.terminate_instance.assert_not_called()

    def test_deletes_the_copy(self):
        """DELETING is saved, then the delete is recorded and cast to the
        copy's host, all in the copy's cell.
        """
        task_states_saved = []
        self.mocks['save'].side_effect = (
            lambda **kw: task_states_saved.append(self.instance.task_state))
        self.assertTrue(self._delete())
        self.assertEqual([task_states.DELETING], task_states_saved)
        self.mocks['save'].assert_called_once_with(expected_task_state=[None])
        self.mocks['action'].assert_called_once_with(
            self.context, uuids.instance, instance_actions.DELETE,
            want_result=False)
        self.mocks['bdms'].assert_called_once_with(
            self.context, uuids.instance)
        self.compute_rpcapi.terminate_instance.assert_called_once_with(
            self.context, self.instance, self.bdms)

    def test_expected_task_state_passed_on(self):
        self.instance.task_state = task_states.RESIZE_REVERTING
        self.assertTrue(self._delete(task_states.RESIZE_REVERTING))
        self.mocks['save'].assert_called_once_with(
            expected_task_state=[task_states.RESIZE_REVERTING])
        self.assertEqual(task_states.DELETING, self.instance.task_state)
        self.compute_rpcapi.terminate_instance.assert_called_once_with(
            self.context, self.instance, self.bdms)

    def test_somebody_else_acts_on_it(self):
        """Another task state: nothing is recorded nor cast."""
        self.mocks['save'].side_effect = exception.UnexpectedTaskStateError(
            instance_uuid=uuids.instance, expected=[None],
            actual=task_states.DELETING)
        self.assertFalse(self._delete())
        self._assert_not_deleted()

    def test_copy_gone(self):
        self.mocks['save'].side_effect = exception.InstanceNotFound(
            instance_id=uuids.instance)
        self.assertFalse(self._delete())
        self._assert_not_deleted()

    def test_save_fails(self):
        """Any other failure of the save is the caller's."""
        self.mocks['save'].side_effect = test.TestingException()
        self.assertRaises(test.TestingException, self._delete)
        self._assert_not_deleted()


class DeleteHiddenCopyOfDeletedServerDBTestCase(test.TestCase):
    """Tests for cross_cell_migrate.delete_instance_of_deleted_server with
    a database (bug 1848343).
    """

    def setUp(self):
        super(DeleteHiddenCopyOfDeletedServerDBTestCase, self).setUp()
        self.context = nova_context.get_admin_context()
        self.instance = objects.Instance(
            context=self.context, uuid=uuids.instance,
            project_id=self.context.project_id,
            user_id=self.context.user_id, host='host1',
            vm_state=vm_states.ERROR, task_state=task_states.RESIZE_REVERTING,
            hidden=True)
        self.instance.create()
        self.compute_rpcapi = mock.Mock()

    def _actions(self):
        return [a.action for a in
                objects.InstanceActionList.get_by_instance_uuid(
                    self.context, uuids.instance)]

    def test_deletes_the_copy(self):
        self.assertTrue(cross_cell_migrate.delete_instance_of_deleted_server(
            self.compute_rpcapi, self.instance,
            task_states.RESIZE_REVERTING))
        record = objects.Instance.get_by_uuid(self.context, uuids.instance)
        self.assertEqual(task_states.DELETING, record.task_state)
        self.assertEqual([instance_actions.DELETE], self._actions())
        self.compute_rpcapi.terminate_instance.assert_called_once_with(
            self.context, self.instance, test.MatchType(
                objects.BlockDeviceMappingList))

    def test_task_state_changed_in_between(self):
        """The record's task state is not the one expected: nothing is
        changed.
        """
        self.assertFalse(cross_cell_migrate.delete_instance_of_deleted_server(
            self.compute_rpcapi, self.instance, None))
        record = objects.Instance.get_by_uuid(self.context, uuids.instance)
        self.assertEqual(task_states.RESIZE_REVERTING, record.task_state)
        self.assertEqual([], self._actions())
        self.compute_rpcapi.terminate_instance.assert_not_called()
