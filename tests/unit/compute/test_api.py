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
import types
from unittest import mock

from keystoneauth1 import exceptions as ks_exc
from nova import exception
from nova import objects
import oslo_messaging
from oslo_messaging import opts as messaging_opts
from oslo_utils import timeutils
import testtools

from nova_fixes import fixture
from nova_fixes.nova.compute import api
from nova_fixes.nova import exception as fixes_exception

UUID = 'e2f1a3c4-0000-4000-8000-000000000001'


@mock.patch('nova.objects.BuildRequest.get_by_instance_uuid')
class AttemptDeleteOfBuildRequestTestCase(testtools.TestCase):

    def setUp(self):
        super(AttemptDeleteOfBuildRequestTestCase, self).setUp()
        objects.register_all()
        # The drop-in names nova.exception.PlacementUnavailableForDelete,
        # which activation adds.
        self.useFixture(fixture.NovaFixes(bugs=[1859496]))
        patcher = mock.patch.object(api, 'LOG')
        self.log = patcher.start()
        self.addCleanup(patcher.stop)
        self.api = mock.Mock()
        self.delete = self.api.placementclient.delete_allocation_for_instance
        self.context = mock.sentinel.context
        self.instance = mock.Mock(uuid=UUID)

    def _attempt(self):
        return api._attempt_delete_of_buildrequest(self.api, self.context,
                                                   self.instance)

    def test_in_a_cell_already(self, get_br):
        """No build request, and the server is not BUILDING (buried in
        cell0): the delete proceeds normally; placement is not called
        here.
        """
        self.instance.vm_state = 'error'
        get_br.side_effect = exception.BuildRequestNotFound(uuid=UUID)
        self.assertFalse(self._attempt())
        get_br.assert_called_once_with(self.context, UUID)
        self.delete.assert_not_called()
        self.api._local_cleanup_bdm_volumes.assert_not_called()

    def test_building_in_a_cell_without_host(self, get_br):
        """No build request, the server BUILDING: its record is in a cell
        and API._delete destroys it next; the allocations go first.
        """
        self.instance.vm_state = 'building'
        self.context = types.SimpleNamespace()
        get_br.side_effect = exception.BuildRequestNotFound(uuid=UUID)
        self.delete.return_value = True
        self.assertFalse(self._attempt())
        self.delete.assert_called_once_with(
            self.context, UUID, consumer_type='instance', force=True)
        self.assertEqual({UUID},
                         getattr(self.context, api.ALLOCATIONS_DELETED))
        self.api._local_cleanup_bdm_volumes.assert_not_called()

    def test_building_in_a_cell_refused(self, get_br):
        self.instance.vm_state = 'building'
        self.context = types.SimpleNamespace()
        get_br.side_effect = exception.BuildRequestNotFound(uuid=UUID)
        self.delete.return_value = None
        self.assertRaises(fixes_exception.PlacementUnavailableForDelete,
                          self._attempt)
        self.assertFalse(hasattr(self.context, api.ALLOCATIONS_DELETED))

    def test_allocations_deleted_before_the_build_request(self, get_br):
        for deleted in (True, False):
            order = []
            self.delete.reset_mock()
            self.delete.side_effect = (
                lambda *a, r=deleted, **k: order.append('placement') or r)
            get_br.return_value.destroy.side_effect = (
                lambda: order.append('build request'))
            self.assertTrue(self._attempt())
            self.assertEqual(['placement', 'build request'], order)
            self.delete.assert_called_once_with(
                self.context, UUID, consumer_type='instance', force=True)
            self.api._local_cleanup_bdm_volumes.assert_called_with(
                get_br.return_value.block_device_mappings, self.instance,
                self.context)
        # One lookup of the build request per delete, as nova's own.
        self.assertEqual(2, get_br.call_count)

    def test_tells_local_delete_cleanup(self, get_br):
        """The request context carries the instances whose allocations
        this request deleted with their build requests.
        """
        self.context = types.SimpleNamespace()
        self.assertTrue(self._attempt())
        self.assertEqual({UUID},
                         getattr(self.context, api.ALLOCATIONS_DELETED))

    def test_conductor_destroyed_it_meanwhile(self, get_br):
        get_br.return_value.destroy.side_effect = (
            exception.BuildRequestNotFound(uuid=UUID))
        self.context = types.SimpleNamespace()
        self.assertFalse(self._attempt())
        self.assertFalse(hasattr(self.context, api.ALLOCATIONS_DELETED))
        self.delete.assert_called_once_with(
            self.context, UUID, consumer_type='instance', force=True)
        self.api._local_cleanup_bdm_volumes.assert_not_called()

    def _assert_refused(self, get_br, reason):
        exc = self.assertRaises(
            fixes_exception.PlacementUnavailableForDelete, self._attempt)
        get_br.return_value.destroy.assert_not_called()
        self.api._local_cleanup_bdm_volumes.assert_not_called()
        self.log.warning.assert_called_once()
        self.assertEqual(503, exc.code)
        self.assertTrue(exc.safe)
        message = exc.format_message()
        self.assertIn(UUID, message)
        self.assertIn('Placement could not be reached', message)
        self.assertIn('The delete can be retried', message)
        self.assertIn(reason, message)
        return message

    def test_unreachable_refuses_before_destroying(self, get_br):
        # safe_connect returns None when placement cannot be reached.
        self.delete.return_value = None
        self._assert_refused(get_br, '(placement could not be reached)')

    def test_placement_error_refuses(self, get_br):
        self.delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=UUID, error='503 Service Unavailable')
        self._assert_refused(get_br, '503 Service Unavailable')

    def test_connection_errors_safe_connect_lets_through_refuse(
            self, get_br):
        self.delete.side_effect = ks_exc.ConnectTimeout()
        self._assert_refused(get_br, 'ConnectTimeout')

    def test_other_errors_are_not_turned_into_a_503(self, get_br):
        self.delete.side_effect = ValueError('bug')
        self.assertRaises(ValueError, self._attempt)
        get_br.return_value.destroy.assert_not_called()


MIGRATION = 'e2f1a3c4-0000-4000-8000-00000000000a'


@mock.patch('nova.compute.utils.migrations_of_instance', create=True,
            return_value=[mock.Mock(uuid=MIGRATION)])
class LocalDeleteTestCase(testtools.TestCase):

    def setUp(self):
        super(LocalDeleteTestCase, self).setUp()
        self.useFixture(fixture.NovaFixes(bugs=[1859496]))
        patcher = mock.patch.object(api, 'LOG')
        self.log = patcher.start()
        self.addCleanup(patcher.stop)
        self.compute_api = mock.Mock()
        self.delete = (
            self.compute_api.placementclient.delete_allocation_for_instance)
        self.instance = mock.Mock(uuid=UUID)

    def _local_delete(self):
        api._local_delete(self.compute_api, mock.sentinel.ctxt,
                          self.instance, mock.sentinel.bdms, 'delete',
                          mock.sentinel.cb)

    def test_allocations_deleted_before_nova_original(self, migrations):
        order = mock.Mock()
        order.attach_mock(self.delete, 'placement')
        order.attach_mock(self.compute_api._local_delete_instance, 'delete')
        self._local_delete()
        migrations.assert_called_once_with(mock.sentinel.ctxt, UUID)
        self.assertEqual([
            mock.call.placement(mock.sentinel.ctxt, UUID,
                                consumer_type='instance', force=True),
            mock.call.placement(mock.sentinel.ctxt, MIGRATION,
                                consumer_type='migration', force=True),
            mock.call.delete(mock.sentinel.ctxt, self.instance,
                             mock.sentinel.bdms, 'delete', mock.sentinel.cb)],
            order.mock_calls)

    def test_instance_in_cell0_is_nova_delete(self, migrations):
        # Never scheduled: no allocation to refuse on.
        self.instance.host = None
        self.instance._context.cell_uuid = objects.CellMapping.CELL0_UUID
        self.delete.return_value = None
        self._local_delete()
        self.compute_api._local_delete_instance.assert_called_once_with(
            mock.sentinel.ctxt, self.instance, mock.sentinel.bdms, 'delete',
            mock.sentinel.cb)
        self.delete.assert_not_called()
        migrations.assert_not_called()

    def test_instance_on_no_host_in_a_cell_deletes_first(self, migrations):
        # A build that failed on its compute, or an unshelve being
        # scheduled: a claim may be there, and placement is not answering.
        for cell in ('c6b0d7a4-0000-4000-8000-000000000002', None):
            self.delete.reset_mock()
            self.instance.host = None
            self.instance._context.cell_uuid = cell
            self.delete.return_value = None
            self.assertRaises(
                fixes_exception.PlacementUnavailableForDelete,
                self._local_delete)
            self.delete.assert_called_once_with(
                mock.sentinel.ctxt, UUID, consumer_type='instance',
                force=True)
            self.compute_api._local_delete_instance.assert_not_called()

    def test_unreachable_placement_refuses_before_anything(self, migrations):
        for unreachable in ('instance', 'migration'):
            self.delete.reset_mock()
            self.log.reset_mock()
            self.delete.side_effect = (
                lambda ctxt, uuid, consumer_type, force, u=unreachable:
                None if consumer_type == u else True)
            exc = self.assertRaises(
                fixes_exception.PlacementUnavailableForDelete,
                self._local_delete)
            self.assertEqual(503, exc.code)
            self.assertIn('The delete can be retried', exc.format_message())
            self.compute_api._local_delete_instance.assert_not_called()
            self.log.warning.assert_called_once()

    def test_placement_failure_refuses(self, migrations):
        self.delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=UUID, error='502 Bad Gateway')
        exc = self.assertRaises(
            fixes_exception.PlacementUnavailableForDelete,
            self._local_delete)
        self.assertIn('502 Bad Gateway', exc.format_message())
        self.compute_api._local_delete_instance.assert_not_called()


class DeleteTestCase(testtools.TestCase):
    """API._delete: a failed delete puts the task state back."""

    def setUp(self):
        super(DeleteTestCase, self).setUp()
        objects.register_all()
        patcher = mock.patch.object(api, 'LOG')
        self.log = patcher.start()
        self.addCleanup(patcher.stop)
        self.compute_api = mock.Mock()
        self.original = self.compute_api._delete_as_requested
        self.instance = objects.Instance(id=1, uuid=UUID, task_state=None)
        self.instance.obj_reset_changes()
        save = mock.patch.object(objects.Instance, 'save').start()
        self.addCleanup(mock.patch.stopall)
        self.save = save
        # rpc_response_timeout: oslo.messaging registers it with nova's
        # first RPC client (the API's compute_rpcapi).
        for group, opts in messaging_opts.list_opts():
            if group is None:
                api.CONF.register_opts(list(opts))

    def _delete(self):
        return api._delete(self.compute_api, mock.sentinel.ctxt,
                           self.instance, 'delete', mock.sentinel.cb,
                           task_state='deleting')

    def _fail_after_saving(self, error):
        def delete(ctxt, instance, delete_type, cb, **attrs):
            instance.update(attrs)
            raise error
        self.original.side_effect = delete

    def test_success_is_nova_original(self):
        self.assertEqual(self.original.return_value, self._delete())
        self.original.assert_called_once_with(
            mock.sentinel.ctxt, self.instance, 'delete', mock.sentinel.cb,
            task_state='deleting')
        self.save.assert_not_called()

    def test_failure_after_saving_puts_the_task_state_back(self):
        self._fail_after_saving(ValueError('placement'))
        self.assertRaises(ValueError, self._delete)
        self.assertIsNone(self.instance.task_state)
        self.save.assert_called_once_with(expected_task_state=['deleting'])

    def test_failure_before_saving_saves_nothing(self):
        self.original.side_effect = ValueError('before')
        self.assertRaises(ValueError, self._delete)
        self.save.assert_not_called()

    def test_instance_not_saved_yet_is_left_alone(self):
        # A server still in BUILD: its instance came from a build request.
        self.instance = objects.Instance(uuid=UUID, task_state=None)
        self._fail_after_saving(ValueError('placement'))
        self.assertRaises(ValueError, self._delete)
        self.save.assert_not_called()

    def test_task_state_changed_meanwhile_is_kept(self):
        self._fail_after_saving(ValueError('placement'))
        self.save.side_effect = exception.UnexpectedTaskStateError(
            instance_uuid=UUID, expected='deleting', actual='migrating')
        self.assertRaises(ValueError, self._delete)
        self.log.info.assert_called_once()

    def test_database_failure_keeps_the_delete_error(self):
        self._fail_after_saving(ValueError('placement'))
        self.save.side_effect = RuntimeError('database down')
        self.assertRaises(ValueError, self._delete)
        self.log.exception.assert_called_once()

    def _host_changed_once(self):
        host_changed = exception.ObjectActionError(action='destroy',
                                                   reason='host changed')
        self.original.side_effect = [host_changed,
                                     self.original.return_value]

    @mock.patch.object(objects.Instance, 'refresh')
    def test_host_changed_deletes_it_again_on_its_host(self, refresh):
        self._host_changed_once()
        self.assertEqual(self.original.return_value, self._delete())
        refresh.assert_called_once_with()
        call = mock.call(mock.sentinel.ctxt, self.instance, 'delete',
                         mock.sentinel.cb, task_state='deleting')
        self.assertEqual([call, call], self.original.call_args_list)

    @mock.patch.object(objects.Instance, 'refresh')
    def test_host_changed_and_gone_meanwhile(self, refresh):
        self._host_changed_once()
        refresh.side_effect = exception.InstanceNotFound(instance_id=UUID)
        self.assertIsNone(self._delete())
        self.original.assert_called_once()

    @mock.patch.object(objects.Instance, 'refresh')
    def test_host_changed_twice_fails_as_other_failures(self, refresh):
        # Only once: a second failure is the delete's error, and its task
        # state is put back as for any other.
        self._fail_after_saving(exception.ObjectActionError(
            action='destroy', reason='host changed'))
        self.assertRaises(exception.ObjectActionError, self._delete)
        self.assertEqual(2, self.original.call_count)
        self.assertIsNone(self.instance.task_state)

    @mock.patch.object(objects.Instance, 'refresh')
    def test_other_object_action_errors_are_not_retried(self, refresh):
        self._fail_after_saving(exception.ObjectActionError(
            action='destroy', reason='already destroyed'))
        self.assertRaises(exception.ObjectActionError, self._delete)
        self.original.assert_called_once()
        refresh.assert_not_called()

    def _left(self, task_state, seconds_ago):
        self.instance.task_state = task_state
        self.instance.updated_at = (timeutils.utcnow(with_timezone=True) -
                                    datetime.timedelta(seconds=seconds_ago))
        self.instance.obj_reset_changes()

    def test_delete_left_behind_is_sent_again(self):
        timeout = api.CONF.rpc_response_timeout
        for task_state in ('deleting', 'soft-deleting'):
            self._left(task_state, timeout + 5)
            seen = []
            self.original.side_effect = (
                lambda ctxt, instance, *args, **kwargs:
                seen.append(instance.task_state))
            self._delete()
            # nova's delete sees no delete's task state: it deletes.
            self.assertEqual([None], seen)
            self.log.warning.assert_called()

    def test_delete_on_no_host_under_way_is_left_to_nova(self):
        # nova deletes it locally: not a delete it would ignore.
        timeout = api.CONF.rpc_response_timeout
        self._left('deleting', timeout - 5)
        seen = []
        self.original.side_effect = (
            lambda ctxt, instance, *args, **kwargs:
            seen.append(instance.task_state))
        self._delete()
        self.assertEqual(['deleting'], seen)
        self.log.warning.assert_not_called()

    def _under_way_on_a_host(self, task_state='deleting'):
        self.instance.host = 'compute1'
        self._left(task_state, api.CONF.rpc_response_timeout - 5)
        ctxt = mock.Mock()
        get = mock.patch.object(objects.Service, 'get_by_compute_host').start()
        return ctxt, get

    def _ignored_before_saving(self, task_state):
        ctxt, get = self._under_way_on_a_host(task_state)
        self.compute_api.servicegroup_api.service_is_up.return_value = True
        self.assertIsNone(api._delete(self.compute_api, ctxt, self.instance,
                                      'delete', mock.sentinel.cb,
                                      task_state='deleting'))
        get.assert_called_once_with(ctxt.elevated.return_value, 'compute1')
        self.compute_api.servicegroup_api.service_is_up.assert_called_with(
            get.return_value)
        # Neither nova's delete nor a save: updated_at stays what the
        # delete under way left, for _delete_left_behind to read.
        self.original.assert_not_called()
        self.save.assert_not_called()
        self.assertEqual(task_state, self.instance.task_state)
        self.log.info.assert_called_once()

    def test_delete_under_way_is_ignored_before_saving(self):
        self._ignored_before_saving('deleting')

    def test_soft_delete_under_way_is_ignored_before_saving(self):
        self._ignored_before_saving('soft-deleting')

    def test_delete_under_way_on_a_compute_down_is_left_to_nova(self):
        ctxt, get = self._under_way_on_a_host()
        self.compute_api.servicegroup_api.service_is_up.return_value = False
        api._delete(self.compute_api, ctxt, self.instance, 'delete',
                    mock.sentinel.cb, task_state='deleting')
        # nova's delete deletes it locally.
        self.original.assert_called_once()

    def test_delete_under_way_on_an_unknown_host_is_left_to_nova(self):
        ctxt, get = self._under_way_on_a_host()
        get.side_effect = exception.ComputeHostNotFound(host='compute1')
        api._delete(self.compute_api, ctxt, self.instance, 'delete',
                    mock.sentinel.cb, task_state='deleting')
        self.original.assert_called_once()
        self.compute_api.servicegroup_api.service_is_up.assert_not_called()

    def test_other_task_states_are_not_looked_up(self):
        ctxt, get = self._under_way_on_a_host(task_state='migrating')
        api._delete(self.compute_api, ctxt, self.instance, 'delete',
                    mock.sentinel.cb, task_state='deleting')
        get.assert_not_called()
        self.original.assert_called_once()

    def test_only_a_delete_task_state_is_left_behind(self):
        for task_state in (None, 'migrating', 'resize_prep', 'spawning'):
            self._left(task_state, 3600)
            self.assertFalse(api._delete_left_behind(self.instance,
                                                     task_state))
        self._left('deleting', 3600)
        self.assertTrue(api._delete_left_behind(self.instance, 'deleting'))
        # A server never updated since its creation has no updated_at.
        instance = objects.Instance(uuid=UUID, task_state='deleting',
                                    updated_at=None)
        self.assertFalse(api._delete_left_behind(instance, 'deleting'))
        instance = objects.Instance(uuid=UUID, task_state='deleting')
        self.assertFalse(api._delete_left_behind(instance, 'deleting'))


class ConfirmResizeOnDeletingTestCase(testtools.TestCase):

    def setUp(self):
        super(ConfirmResizeOnDeletingTestCase, self).setUp()
        self.useFixture(fixture.NovaFixes(bugs=[1859496]))
        patcher = mock.patch.object(api, 'LOG')
        self.log = patcher.start()
        self.addCleanup(patcher.stop)
        self.compute_api = mock.Mock()
        self.original = self.compute_api._confirm_resize_before_delete
        self.probe = self.compute_api.placementclient.get_allocs_for_consumer
        self.instance = mock.Mock(uuid=UUID)

    def _confirm(self):
        api._confirm_resize_on_deleting(self.compute_api, mock.sentinel.ctxt,
                                        self.instance)

    def test_success_asks_placement_nothing(self):
        self._confirm()
        self.original.assert_called_once_with(mock.sentinel.ctxt,
                                              self.instance)
        self.probe.assert_not_called()

    def test_failure_while_placement_is_unreachable_is_a_503(self):
        self.original.side_effect = ValueError('remote ConnectFailure')
        for failure, reason in (
                (ks_exc.ConnectFailure(), 'could not be reached'),
                (exception.ConsumerAllocationRetrievalFailed(
                    consumer_uuid=UUID, error='503'), 'placement failed')):
            self.probe.side_effect = failure
            exc = self.assertRaises(
                fixes_exception.PlacementUnavailableForDelete,
                self._confirm)
            self.assertIn(reason, exc.format_message())
            self.assertIn('The delete can be retried', exc.format_message())

    def test_no_reply_is_a_503(self):
        self.useFixture(fixture.NovaFixes(bugs=[1848343]))
        self.original.side_effect = oslo_messaging.MessagingTimeout(
            'No reply on topic compute')
        exc = self.assertRaises(
            fixes_exception.PlacementUnavailableForDelete, self._confirm)
        self.assertIsInstance(exc,
                              fixes_exception.ConfirmNotAnsweredForDelete)
        self.assertEqual(503, exc.code)
        self.assertIn('got no reply (MessagingTimeout)',
                      exc.format_message())
        self.assertIn('The delete can be retried', exc.format_message())
        # Whether placement answers has nothing to do with it.
        self.probe.assert_not_called()

    def test_failure_with_placement_answering_is_raised_as_it_was(self):
        self.original.side_effect = ValueError('something else')
        self.probe.return_value = {'allocations': {}}
        self.assertRaises(ValueError, self._confirm)
        self.probe.assert_called_once_with(mock.sentinel.ctxt, UUID)


class LocalDeleteCleanupTestCase(testtools.TestCase):

    def setUp(self):
        super(LocalDeleteCleanupTestCase, self).setUp()
        self.api = mock.Mock()
        self.original = self.api._local_delete_cleanup_with_allocations
        self.context = types.SimpleNamespace()

    def test_nova_original_unless_this_request_deleted_them(self):
        api._local_delete_cleanup(self.api, self.context, UUID)
        self.original.assert_called_once_with(self.context, UUID)
        self.api._update_queued_for_deletion.assert_not_called()

    def test_no_second_delete_of_the_allocations(self):
        setattr(self.context, api.ALLOCATIONS_DELETED, {UUID})
        api._local_delete_cleanup(self.api, self.context, UUID)
        self.original.assert_not_called()
        self.api.placementclient.delete_allocation_for_instance.\
            assert_not_called()
        self.api._update_queued_for_deletion.assert_called_once_with(
            self.context, UUID, True)
        # Another instance deleted by the same request is nova's.
        api._local_delete_cleanup(self.api, self.context, 'other')
        self.original.assert_called_once_with(self.context, 'other')

    def test_missing_mapping_is_logged(self):
        setattr(self.context, api.ALLOCATIONS_DELETED, {UUID})
        self.api._update_queued_for_deletion.side_effect = (
            exception.InstanceMappingNotFound(uuid=UUID))
        with mock.patch.object(api, 'LOG') as log:
            api._local_delete_cleanup(self.api, self.context, UUID)
        log.info.assert_called_once()


class HiddenCopiesTestCase(testtools.TestCase):
    """API._delete deletes the copies a failed or stopped cross-cell
    resize left hidden in other cells (_hidden_copies).
    """

    def setUp(self):
        super(HiddenCopiesTestCase, self).setUp()
        objects.register_all()
        self.addCleanup(mock.patch.stopall)
        self.log = mock.patch.object(api, 'LOG').start()
        self.migrations = mock.patch(
            'nova.compute.utils.migrations_of_instance', create=True).start()
        self.host_mapping = mock.patch(
            'nova.objects.HostMapping.get_by_host').start()
        self.get = mock.patch('nova.objects.Instance.get_by_uuid').start()
        self.cell1 = mock.Mock(uuid='cell1')
        self.cell2 = mock.Mock(uuid='cell2')
        self.host_mapping.side_effect = lambda ctxt, host: mock.Mock(
            cell_mapping={'host1': self.cell1, 'host2': self.cell2}[host])
        self.context = mock.Mock()
        self.context.elevated.side_effect = lambda: mock.Mock()
        self.instance = objects.Instance(uuid=UUID, host='host2',
                                         vm_state='error',
                                         disable_terminate=False)
        self.instance._context = mock.Mock(cell_uuid='cell2')
        self.migrations.return_value = [mock.Mock(
            cross_cell_move=True, source_compute='host1',
            dest_compute='host2')]
        self.copy = mock.Mock(hidden=True)
        self.get.return_value = self.copy

    def _copies(self):
        return api._hidden_copies(self.context, self.instance)

    @mock.patch('nova.context.set_target_cell')
    def test_hidden_copy_in_the_other_cell(self, target):
        self.assertEqual([self.copy], self._copies())
        self.migrations.assert_called_once_with(self.instance._context,
                                                UUID)
        self.host_mapping.assert_called_once_with(self.instance._context,
                                                  'host1')
        # Read in the other host's cell, with the request's credentials.
        ctxt = self.get.call_args[0][0]
        target.assert_called_once_with(ctxt, self.cell1)
        self.get.assert_called_once_with(ctxt, UUID)
        self.context.elevated.assert_called_once_with()

    def test_other_host_is_the_destination_after_a_revert(self):
        self.instance.host = 'host1'
        self.instance._context = mock.Mock(cell_uuid='cell1')
        self.assertEqual([self.copy], self._copies())
        self.host_mapping.assert_called_once_with(self.instance._context,
                                                  'host2')

    def test_visible_copy_is_left(self):
        self.copy.hidden = False
        self.assertEqual([], self._copies())

    def test_no_copy_there(self):
        self.get.side_effect = exception.InstanceNotFound(instance_id=UUID)
        self.assertEqual([], self._copies())

    def test_move_within_a_cell(self):
        self.migrations.return_value[0].cross_cell_move = False
        self.assertEqual([], self._copies())
        self.host_mapping.assert_not_called()

    def test_other_host_unmapped(self):
        self.host_mapping.side_effect = exception.HostMappingNotFound(
            name='host1')
        self.assertEqual([], self._copies())
        self.get.assert_not_called()

    def test_only_a_server_in_error_or_resized_is_looked_at(self):
        for vm_state in ('active', 'stopped', 'shelved_offloaded'):
            self.instance.vm_state = vm_state
            self.assertEqual([], self._copies())
        self.instance.host = None
        self.instance.vm_state = 'error'
        self.assertEqual([], self._copies())
        self.migrations.assert_not_called()
        self.instance.host = 'host2'
        self.instance.vm_state = 'resized'
        self.assertEqual([self.copy], self._copies())

    def test_server_whose_termination_is_disabled(self):
        # nova's _delete leaves such a server: its copy stays with it.
        self.instance.disable_terminate = True
        self.assertEqual([], self._copies())
        self.migrations.assert_not_called()
        self.instance.disable_terminate = False
        self.assertEqual([self.copy], self._copies())

    def test_instance_of_a_build_request(self):
        instance = objects.Instance(uuid=UUID, vm_state='error')
        self.assertEqual([], api._hidden_copies(self.context, instance))
        self.migrations.assert_not_called()

    def test_failed_lookup_costs_the_delete_nothing(self):
        self.migrations.side_effect = RuntimeError('database')
        self.assertEqual([], self._copies())
        self.log.exception.assert_called_once()

    @mock.patch('nova.conductor.tasks.cross_cell_migrate.'
                'delete_instance_of_deleted_server', create=True)
    def test_delete_deletes_them_after_the_server(self, delete):
        compute_api = mock.Mock()
        order = mock.Mock()
        order.attach_mock(compute_api._delete_as_requested, 'delete')
        order.attach_mock(delete, 'copy')
        self.copy.task_state = 'resize_migrated'
        result = api._delete(compute_api, self.context, self.instance,
                             'delete', mock.sentinel.cb,
                             task_state='deleting')
        self.assertEqual(compute_api._delete_as_requested.return_value,
                         result)
        self.assertEqual(['delete', 'copy'],
                         [c[0] for c in order.mock_calls])
        delete.assert_called_once_with(compute_api.compute_rpcapi,
                                       self.copy, 'resize_migrated')

    @mock.patch('nova.conductor.tasks.cross_cell_migrate.'
                'delete_instance_of_deleted_server', create=True)
    def test_failed_delete_leaves_them(self, delete):
        compute_api = mock.Mock()
        compute_api._delete_as_requested.side_effect = ValueError('503')
        self.assertRaises(ValueError, api._delete, compute_api,
                          self.context, self.instance, 'delete',
                          mock.sentinel.cb, task_state='deleting')
        delete.assert_not_called()

    @mock.patch('nova.conductor.tasks.cross_cell_migrate.'
                'delete_instance_of_deleted_server', create=True)
    def test_soft_delete_leaves_them(self, delete):
        compute_api = mock.Mock()
        api._delete(compute_api, self.context, self.instance, 'soft_delete',
                    mock.sentinel.cb, task_state='soft-deleting')
        self.migrations.assert_not_called()
        delete.assert_not_called()

    @mock.patch('nova.conductor.tasks.cross_cell_migrate.'
                'delete_instance_of_deleted_server', create=True)
    def test_copy_delete_failure_is_logged(self, delete):
        delete.side_effect = RuntimeError('database')
        compute_api = mock.Mock()
        result = api._delete(compute_api, self.context, self.instance,
                             'delete', mock.sentinel.cb,
                             task_state='deleting')
        self.assertEqual(compute_api._delete_as_requested.return_value,
                         result)
        self.log.exception.assert_called_once()
