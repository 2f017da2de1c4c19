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

import datetime
from unittest import mock

from oslo_utils import fixture as utils_fixture
from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import api as compute_api
from nova.compute import instance_actions
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import context
from nova import exception
from nova.image import glance as image_api
from nova import objects
from nova.servicegroup import api as servicegroup_api
from nova import test
from nova.tests.unit import fake_instance


class DeleteLeftBehindTestBase(test.NoDBTestCase):
    """Common set up of the tests of API._delete (bug 1848343): the compute
    of the server is up, every database access is mocked.
    """

    NOW = datetime.datetime(2026, 12, 5, 12, 0, 0)

    def setUp(self):
        super(DeleteLeftBehindTestBase, self).setUp()
        self.compute_api = compute_api.API()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.useFixture(utils_fixture.TimeFixture(self.NOW))
        self.flags(rpc_response_timeout=60)
        self.cb = mock.Mock()
        self.bdms = objects.BlockDeviceMappingList(objects=[])
        self.cell = objects.CellMapping(uuid=uuids.cell,
                                        transport_url='fake://',
                                        database_connection='fake://')
        self.mocks = {}
        self._patch('save', objects.Instance, 'save')
        self._patch('bdms', objects.BlockDeviceMappingList,
                    'get_by_instance_uuid', return_value=self.bdms)
        self._patch('service', objects.Service, 'get_by_compute_host',
                    return_value=objects.Service(host='host1'))
        self._patch('is_up', servicegroup_api.API, 'service_is_up',
                    return_value=True)
        self._patch('record', compute_api.API, '_record_action_start')
        self._patch('mapping', objects.InstanceMapping,
                    'get_by_instance_uuid',
                    return_value=objects.InstanceMapping(
                        cell_mapping=self.cell))
        self._patch('local_delete', compute_api.API, '_local_delete')

    def _patch(self, name, target, attribute, **kwargs):
        patcher = mock.patch.object(target, attribute, **kwargs)
        self.mocks[name] = patcher.start()
        self.addCleanup(patcher.stop)

    def _instance(self, **updates):
        fields = dict(uuid=uuids.instance, host='host1', node='node1',
                      vm_state=vm_states.ACTIVE, task_state=None)
        fields.update(updates)
        return fake_instance.fake_instance_obj(self.context, **fields)

    def _delete(self, instance, delete_type='delete'):
        if delete_type == 'soft_delete':
            return self.compute_api._delete(
                self.context, instance, 'soft_delete', self.cb,
                task_state=task_states.SOFT_DELETING,
                deleted_at=self.NOW)
        return self.compute_api._delete(
            self.context, instance, 'delete', self.cb,
            task_state=task_states.DELETING)

    def _assert_cast(self, instance):
        self.cb.assert_called_once_with(self.context, instance, self.bdms)
        self.mocks['record'].assert_called_once_with(
            self.context, instance, instance_actions.DELETE)

    def _assert_ignored(self):
        self.cb.assert_not_called()
        self.mocks['record'].assert_not_called()


class DeleteLeftBehindRestoreTaskStateTestCase(DeleteLeftBehindTestBase):
    """Tests for API._delete putting the task state back when the delete
    fails (bug 1848343).
    """

    def test_delete_succeeds(self):
        """The ordinary delete: nothing is put back."""
        instance = self._instance()
        self._delete(instance)
        self._assert_cast(instance)
        self.mocks['save'].assert_called_once_with()
        self.assertEqual(task_states.DELETING, instance.task_state)

    def test_cast_fails(self):
        instance = self._instance()
        self.cb.side_effect = test.TestingException()
        self.assertRaises(test.TestingException, self._delete, instance)
        self.assertIsNone(instance.task_state)
        self.assertEqual(
            [mock.call(), mock.call(expected_task_state=['deleting'])],
            self.mocks['save'].call_args_list)

    def test_task_state_of_before_the_request(self):
        instance = self._instance(task_state=task_states.POWERING_OFF)
        self.cb.side_effect = test.TestingException()
        self.assertRaises(test.TestingException, self._delete, instance)
        self.assertEqual(task_states.POWERING_OFF, instance.task_state)
        self.mocks['save'].assert_called_with(
            expected_task_state=[task_states.DELETING])

    def test_soft_delete_fails(self):
        instance = self._instance()
        self.cb.side_effect = test.TestingException()
        self.assertRaises(test.TestingException, self._delete, instance,
                          'soft_delete')
        self.assertIsNone(instance.task_state)
        self.assertEqual(
            [mock.call(), mock.call(expected_task_state=['soft-deleting'])],
            self.mocks['save'].call_args_list)

    def test_local_delete_fails(self):
        """A compute that is down: the local delete fails (placement
        unreachable, for example).
        """
        self.mocks['is_up'].return_value = False
        self.mocks['local_delete'].side_effect = test.TestingException()
        instance = self._instance()
        self.assertRaises(test.TestingException, self._delete, instance)
        self.assertIsNone(instance.task_state)
        self.assertEqual(
            [mock.call(), mock.call(expected_task_state=['deleting'])],
            self.mocks['save'].call_args_list)
        self.mocks['record'].assert_not_called()

    def test_fails_before_the_save(self):
        """Nothing to put back when the task state was not saved."""
        self.mocks['bdms'].side_effect = test.TestingException()
        instance = self._instance()
        self.assertRaises(test.TestingException, self._delete, instance)
        self.assertIsNone(instance.task_state)
        self.mocks['save'].assert_not_called()
        self.cb.assert_not_called()

    def test_put_back_refused(self):
        """Somebody changed the task state: the delete's error is raised."""
        instance = self._instance()
        self.cb.side_effect = test.TestingException()
        self.mocks['save'].side_effect = [
            None, exception.UnexpectedTaskStateError(
                instance_uuid=uuids.instance, expected=['deleting'],
                actual=None)]
        self.assertRaises(test.TestingException, self._delete, instance)
        self.assertEqual(2, self.mocks['save'].call_count)

    def test_put_back_fails(self):
        """The database fails too: the delete's error is raised."""
        instance = self._instance()
        self.cb.side_effect = test.TestingException()
        self.mocks['save'].side_effect = [None, ValueError()]
        self.assertRaises(test.TestingException, self._delete, instance)
        self.assertEqual(2, self.mocks['save'].call_count)


class DeleteLeftBehindResendTestCase(DeleteLeftBehindTestBase):
    """Tests for API._delete sending again a delete that stopped before it
    reached the compute (bug 1848343).
    """

    def _left(self, task_state=task_states.DELETING, seconds=61):
        return self._instance(
            task_state=task_state,
            updated_at=self.NOW - datetime.timedelta(seconds=seconds))

    def test_deleting_left_behind(self):
        instance = self._left()
        self._delete(instance)
        self._assert_cast(instance)
        self.assertEqual(task_states.DELETING, instance.task_state)
        self.mocks['save'].assert_called_once_with()

    def test_soft_deleting_left_behind(self):
        instance = self._left(task_states.SOFT_DELETING)
        self._delete(instance, 'soft_delete')
        self._assert_cast(instance)
        self.assertEqual(task_states.SOFT_DELETING, instance.task_state)

    def test_delete_under_way(self):
        """Updated within rpc_response_timeout: the request is ignored."""
        instance = self._left(seconds=59)
        self._delete(instance)
        self._assert_ignored()

    def test_rpc_response_timeout(self):
        self.flags(rpc_response_timeout=120)
        instance = self._left()
        self._delete(instance)
        self._assert_ignored()
        self.flags(rpc_response_timeout=30)
        self._delete(instance)
        self._assert_cast(instance)

    def test_not_updated(self):
        instance = self._left()
        instance.updated_at = None
        self._delete(instance)
        self._assert_ignored()

    def test_other_task_state(self):
        instance = self._left(task_states.POWERING_OFF)
        self._delete(instance)
        self._assert_cast(instance)

    def test_left_behind_and_fails_again(self):
        """The task state goes back to the one the server was left in."""
        instance = self._left()
        self.cb.side_effect = test.TestingException()
        self.assertRaises(test.TestingException, self._delete, instance)
        self.assertEqual(task_states.DELETING, instance.task_state)
        self.assertEqual(
            [mock.call(), mock.call(expected_task_state=['deleting'])],
            self.mocks['save'].call_args_list)


class DeleteUnderWayTestCase(DeleteLeftBehindTestBase):
    """Tests for API._delete ignoring a DELETE of a server whose delete is
    under way before it saves anything (bug 1848343): a save would refresh
    the updated_at that tells a delete left behind from one under way.
    """

    def _under_way(self, task_state=task_states.DELETING, **updates):
        return self._instance(
            task_state=task_state,
            updated_at=self.NOW - datetime.timedelta(seconds=10),
            **updates)

    def _assert_ignored_before_saving(self, instance, task_state):
        self._assert_ignored()
        self.mocks['save'].assert_not_called()
        self.mocks['bdms'].assert_not_called()
        self.mocks['local_delete'].assert_not_called()
        self.assertEqual(task_state, instance.task_state)
        self.mocks['service'].assert_called_once_with(mock.ANY, 'host1')
        self.assertTrue(self.mocks['service'].call_args[0][0].is_admin)
        self.mocks['is_up'].assert_called_once_with(
            self.mocks['service'].return_value)

    def test_deleting(self):
        instance = self._under_way()
        self.assertIsNone(self._delete(instance))
        self._assert_ignored_before_saving(instance, task_states.DELETING)

    def test_soft_deleting(self):
        instance = self._under_way(task_states.SOFT_DELETING)
        self.assertIsNone(self._delete(instance, 'soft_delete'))
        self._assert_ignored_before_saving(instance,
                                           task_states.SOFT_DELETING)

    def test_compute_down(self):
        """nova's delete goes on: a local delete, as before."""
        self.mocks['is_up'].return_value = False
        instance = self._under_way()
        self._delete(instance)
        self.mocks['local_delete'].assert_called_once_with(
            mock.ANY, instance, self.bdms, 'delete', self.cb)
        self.mocks['save'].assert_called_once_with()
        self.cb.assert_not_called()

    def test_host_unknown(self):
        self.mocks['service'].side_effect = exception.ComputeHostNotFound(
            host='host1')
        instance = self._under_way()
        self._delete(instance)
        self.mocks['local_delete'].assert_called_once_with(
            mock.ANY, instance, self.bdms, 'delete', self.cb)
        self.mocks['is_up'].assert_not_called()
        self.cb.assert_not_called()

    def test_no_host(self):
        """A server on no host is deleted locally, never ignored."""
        self._patch('image_delete', image_api.API, 'delete')
        instance = self._under_way(host=None, node=None,
                                   vm_state=vm_states.SHELVED_OFFLOADED)
        instance.system_metadata = {'shelved_image_id': uuids.image}
        self._delete(instance)
        self.mocks['local_delete'].assert_called_once_with(
            mock.ANY, instance, self.bdms, 'delete', self.cb)
        self.mocks['service'].assert_not_called()

    def test_other_task_state(self):
        """Only a delete's task state is looked up before nova's delete."""
        instance = self._under_way(task_states.POWERING_OFF)
        self._delete(instance)
        self._assert_cast(instance)
        self.mocks['service'].assert_called_once_with(mock.ANY, 'host1')


class DeleteLeftBehindHostChangedTestCase(DeleteLeftBehindTestBase):
    """Tests for API._delete deleting a server put on a host while it was
    deleted as a server on no host (bug 1848343).
    """

    def setUp(self):
        super(DeleteLeftBehindHostChangedTestCase, self).setUp()
        self._patch('image_delete', image_api.API, 'delete')
        self._patch('refresh', objects.Instance, 'refresh')
        self._patch('destroy', objects.Instance, 'destroy')
        self._patch('cleanup', compute_api.API, '_local_delete_cleanup')
        self.instance = self._instance(
            host=None, node=None, vm_state=vm_states.SHELVED_OFFLOADED)
        self.instance.system_metadata = {'shelved_image_id': uuids.image}
        self.host_changed = exception.ObjectActionError(
            action='destroy', reason='host changed')

    def _put_on_host1(self):
        # What the local delete and the unshelve left in the record.
        self.instance.host = 'host1'
        self.instance.vm_state = vm_states.DELETED
        self.instance.task_state = None

    def test_deleted_on_its_new_host(self):
        self.mocks['is_up'].side_effect = [True]
        self.mocks['local_delete'].side_effect = self.host_changed
        self.mocks['refresh'].side_effect = self._put_on_host1
        self.assertIsNone(self._delete(self.instance))
        self.mocks['local_delete'].assert_called_once_with(
            mock.ANY, self.instance, self.bdms, 'delete', self.cb)
        self.mocks['refresh'].assert_called_once_with()
        self.mocks['service'].assert_called_once_with(mock.ANY, 'host1')
        self._assert_cast(self.instance)
        self.assertEqual(task_states.DELETING, self.instance.task_state)

    def test_new_host_down(self):
        self.mocks['is_up'].return_value = False
        self.mocks['local_delete'].side_effect = [self.host_changed, None]
        self.mocks['refresh'].side_effect = self._put_on_host1
        self._delete(self.instance)
        self.assertEqual(
            [mock.call(mock.ANY, self.instance, self.bdms, 'delete',
                       self.cb)] * 2,
            self.mocks['local_delete'].call_args_list)
        self.mocks['refresh'].assert_called_once_with()
        self.mocks['service'].assert_called_once_with(mock.ANY, 'host1')
        self.cb.assert_not_called()

    def test_gone_in_between(self):
        self.mocks['local_delete'].side_effect = self.host_changed
        self.mocks['refresh'].side_effect = exception.InstanceNotFound(
            instance_id=uuids.instance)
        self.assertIsNone(self._delete(self.instance))
        self.mocks['local_delete'].assert_called_once_with(
            mock.ANY, self.instance, self.bdms, 'delete', self.cb)
        self._assert_ignored()

    def test_other_object_action_error(self):
        self.mocks['local_delete'].side_effect = (
            exception.ObjectActionError(action='destroy',
                                        reason='already destroyed'))
        self.assertRaises(exception.ObjectActionError, self._delete,
                          self.instance)
        self.mocks['refresh'].assert_not_called()
        self.assertIsNone(self.instance.task_state)
        self.assertEqual(
            [mock.call(), mock.call(expected_task_state=['deleting'])],
            self.mocks['save'].call_args_list)

    def test_shelved_offloaded(self):
        """The ordinary local delete of a server on no host."""
        self._delete(self.instance)
        self.mocks['local_delete'].assert_called_once_with(
            mock.ANY, self.instance, self.bdms, 'delete', self.cb)
        self.mocks['refresh'].assert_not_called()
        self.mocks['service'].assert_not_called()

    def test_host_nilled_out_by_a_reschedule(self):
        """A build read on its host and rescheduled before the save of
        DELETING: it is deleted as a server that was scheduled (the local
        delete deletes its allocations first), not destroyed at once.
        """
        instance = self._instance(vm_state=vm_states.BUILDING)

        def save():
            instance.host = None
            instance.node = None
        self.mocks['save'].side_effect = save
        self._delete(instance)
        self.mocks['destroy'].assert_not_called()
        self.mocks['cleanup'].assert_not_called()
        self.mocks['local_delete'].assert_called_once_with(
            mock.ANY, instance, self.bdms, 'delete', self.cb)

    @mock.patch.object(compute_utils, 'notify_about_instance_delete')
    def test_building_with_no_host(self, mock_notify):
        """A build never scheduled is destroyed at once, as it was."""
        instance = self._instance(host=None, node=None,
                                  vm_state=vm_states.BUILDING)
        with mock.patch.object(self.compute_api, '_delete_while_booting',
                               return_value=False):
            with mock.patch.object(self.compute_api, '_lookup_instance',
                                   return_value=(self.cell, instance)):
                with mock.patch.object(instance, 'get_bdms',
                                       return_value=self.bdms):
                    self._delete(instance)
        self.mocks['destroy'].assert_called_once_with()
        self.mocks['cleanup'].assert_called_once_with(
            self.context, uuids.instance)
        self.mocks['local_delete'].assert_not_called()


class DeleteLeftBehindHiddenCopyTestCase(DeleteLeftBehindTestBase):
    """Tests for API._delete deleting the copy of a server that a failed
    cross-cell resize left hidden in another cell (bug 1848343).
    """

    def setUp(self):
        super(DeleteLeftBehindHiddenCopyTestCase, self).setUp()
        self.cells = {
            'host1': objects.CellMapping(uuid=uuids.cell1,
                                         transport_url='none://',
                                         database_connection='fake://'),
            'host2': objects.CellMapping(uuid=uuids.cell2,
                                         transport_url='none://',
                                         database_connection='fake://')}
        self.migration = objects.Migration(
            uuid=uuids.migration, cross_cell_move=True,
            source_compute='host1', dest_compute='host2')
        self._patch('migrations', compute_utils, 'migrations_of_instance',
                    return_value=objects.MigrationList(
                        objects=[self.migration]))
        self._patch('host_mapping', objects.HostMapping, 'get_by_host',
                    side_effect=self._get_host_mapping)
        self._patch('get', objects.Instance, 'get_by_uuid',
                    side_effect=self._get_copy)
        self._patch('action', objects.InstanceAction, 'action_start')
        self._patch('terminate', self.compute_api.compute_rpcapi,
                    'terminate_instance')
        self._patch('soft_delete', self.compute_api.compute_rpcapi,
                    'soft_delete_instance')
        self._patch('queued', compute_api.API, '_update_queued_for_deletion')
        self.copies = []
        self.instance = self._in_cell('host2', vm_state=vm_states.ERROR)

    def _in_cell(self, host, **updates):
        ctxt = context.RequestContext('fake-user', 'fake-project')
        ctxt.cell_uuid = self.cells[host].uuid
        instance = self._instance(host=host, **updates)
        instance._context = ctxt
        return instance

    def _get_host_mapping(self, ctxt, host):
        if host not in self.cells:
            raise exception.HostMappingNotFound(name=host)
        return objects.HostMapping(host=host, cell_mapping=self.cells[host])

    def _get_copy(self, ctxt, uuid):
        other = self.migration.source_compute
        if self.instance.host == other:
            other = self.migration.dest_compute
        self.assertEqual(self.cells[other].uuid, ctxt.cell_uuid)
        other_copy = fake_instance.fake_instance_obj(
            ctxt, uuid=uuid, host=other, vm_state=vm_states.ERROR,
            task_state=None, hidden=True)
        self.copies.append(other_copy)
        return other_copy

    def _assert_copy_deleted(self, cell):
        self.assertEqual(1, len(self.copies))
        other_copy = self.copies[0]
        cctxt = other_copy._context
        self.assertEqual(cell.uuid, cctxt.cell_uuid)
        self.assertEqual(task_states.DELETING, other_copy.task_state)
        self.mocks['save'].assert_called_with(expected_task_state=[None])
        self.mocks['action'].assert_called_once_with(
            cctxt, uuids.instance, instance_actions.DELETE,
            want_result=False)
        self.assertEqual(
            [mock.call(self.context, self.instance, self.bdms),
             mock.call(cctxt, other_copy, self.bdms)],
            self.mocks['terminate'].call_args_list)

    def _assert_only_the_server_deleted(self):
        self.mocks['terminate'].assert_called_once_with(
            self.context, self.instance, self.bdms)
        self.mocks['action'].assert_not_called()

    def test_hidden_copy_deleted(self):
        self.compute_api.delete(self.context, self.instance)
        self.mocks['migrations'].assert_called_once_with(
            self.instance._context, uuids.instance)
        self.mocks['host_mapping'].assert_called_once_with(
            self.instance._context, 'host1')
        self.mocks['get'].assert_called_once_with(mock.ANY, uuids.instance)
        self._assert_copy_deleted(self.cells['host1'])

    def test_server_on_the_source(self):
        self.instance = self._in_cell('host1', vm_state=vm_states.ERROR)
        self.compute_api.delete(self.context, self.instance)
        self.mocks['host_mapping'].assert_called_once_with(
            self.instance._context, 'host2')
        self._assert_copy_deleted(self.cells['host2'])

    @mock.patch.object(compute_api.API, '_confirm_resize_on_deleting')
    def test_resized(self, mock_confirm):
        self.instance = self._in_cell('host2', vm_state=vm_states.RESIZED)
        self.compute_api.delete(self.context, self.instance)
        mock_confirm.assert_called_once_with(self.context, self.instance)
        self._assert_copy_deleted(self.cells['host1'])

    def test_copy_not_hidden(self):
        self.mocks['get'].side_effect = (
            lambda ctxt, uuid: fake_instance.fake_instance_obj(
                ctxt, uuid=uuid, host='host1', hidden=False))
        self.compute_api.delete(self.context, self.instance)
        self._assert_only_the_server_deleted()

    def test_active(self):
        """Only a server in ERROR or RESIZED is looked for a copy."""
        self.instance = self._in_cell('host2', vm_state=vm_states.ACTIVE)
        self.compute_api.delete(self.context, self.instance)
        self.mocks['migrations'].assert_not_called()
        self._assert_only_the_server_deleted()

    def test_same_cell(self):
        self.cells['host1'] = self.cells['host2']
        self.compute_api.delete(self.context, self.instance)
        self.mocks['get'].assert_not_called()
        self._assert_only_the_server_deleted()

    def test_not_cross_cell(self):
        self.migration.cross_cell_move = False
        self.compute_api.delete(self.context, self.instance)
        self.mocks['host_mapping'].assert_not_called()
        self._assert_only_the_server_deleted()

    def test_context_of_no_cell(self):
        self.instance._context.cell_uuid = None
        self.compute_api.delete(self.context, self.instance)
        self.mocks['migrations'].assert_not_called()
        self._assert_only_the_server_deleted()

    def test_soft_delete(self):
        self.instance.launched_at = self.NOW
        self.compute_api.soft_delete(self.context, self.instance)
        self.mocks['migrations'].assert_not_called()
        self.mocks['soft_delete'].assert_called_once_with(
            self.context, self.instance)
        self.mocks['terminate'].assert_not_called()
        self.mocks['action'].assert_not_called()

    def test_termination_disabled(self):
        self.instance.disable_terminate = True
        self.compute_api.delete(self.context, self.instance)
        self.mocks['migrations'].assert_not_called()
        self.mocks['terminate'].assert_not_called()
        self.mocks['action'].assert_not_called()

    def test_host_mapping_not_found(self):
        del self.cells['host1']
        self.compute_api.delete(self.context, self.instance)
        self.mocks['get'].assert_not_called()
        self._assert_only_the_server_deleted()

    def test_host_mapping_not_found_then_found(self):
        """A host with no mapping is skipped; the next migration is read."""
        self.mocks['migrations'].return_value = objects.MigrationList(
            objects=[objects.Migration(uuid=uuids.old_migration,
                                       cross_cell_move=True,
                                       source_compute='host3',
                                       dest_compute='host2'),
                     self.migration])
        self.compute_api.delete(self.context, self.instance)
        self.assertEqual(
            [mock.call(self.instance._context, 'host3'),
             mock.call(self.instance._context, 'host1')],
            self.mocks['host_mapping'].call_args_list)
        self._assert_copy_deleted(self.cells['host1'])

    def test_copy_gone(self):
        self.mocks['get'].side_effect = exception.InstanceNotFound(
            instance_id=uuids.instance)
        self.compute_api.delete(self.context, self.instance)
        self._assert_only_the_server_deleted()

    def test_lookup_fails(self):
        """The server is deleted, its copy left, as nova did."""
        self.mocks['migrations'].side_effect = test.TestingException()
        self.compute_api.delete(self.context, self.instance)
        self._assert_only_the_server_deleted()

    def test_delete_of_the_copy_fails(self):
        self.mocks['terminate'].side_effect = [None, test.TestingException()]
        self.compute_api.delete(self.context, self.instance)
        self._assert_copy_deleted(self.cells['host1'])

    def test_delete_of_the_server_fails(self):
        """The copy is deleted only once the server's own delete is done."""
        self.mocks['terminate'].side_effect = test.TestingException()
        self.assertRaises(test.TestingException, self.compute_api.delete,
                          self.context, self.instance)
        self._assert_only_the_server_deleted()
        self.assertIsNone(self.instance.task_state)
