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

from oslo_messaging import exceptions as oslo_exceptions
from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import api as compute_api
from nova.compute import instance_actions
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import context
from nova import exception
from nova import objects
from nova import test
from nova.tests.unit import fake_instance


class _PlacementDeleteTestMixin(object):

    def setUp(self):
        super(_PlacementDeleteTestMixin, self).setUp()
        self.compute_api = compute_api.API()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.reportclient = mock.create_autospec(
            compute_api.report.SchedulerReportClient, instance=True)
        self.reportclient.delete_allocation_for_instance.return_value = True
        patcher = mock.patch.object(
            compute_api.API, 'placementclient',
            new_callable=mock.PropertyMock, return_value=self.reportclient)
        patcher.start()
        self.addCleanup(patcher.stop)

    def _assert_refused(self, ex, reason):
        self.assertEqual(503, ex.code)
        message = ex.format_message()
        self.assertIn(uuids.instance, message)
        self.assertIn(reason, message)
        self.assertIn('The delete can be retried', message)


class LocalDeletePlacementTestCase(_PlacementDeleteTestMixin,
                                   test.NoDBTestCase):
    """Tests for API._local_delete (bug 1848343).

    The allocations of the instance and of its migrations are deleted
    before anything else; when placement cannot be reached or fails, the
    delete is refused with PlacementUnavailableForDelete and nothing is
    destroyed. An instance with no host buried in cell0 is deleted as
    before.
    """

    def setUp(self):
        super(LocalDeletePlacementTestCase, self).setUp()
        self.cell_context = context.RequestContext('fake-user',
                                                   'fake-project')
        self.cell_context.cell_uuid = uuids.cell1
        self.instance = fake_instance.fake_instance_obj(
            self.cell_context, uuid=uuids.instance, host='down-host',
            vm_state=vm_states.ACTIVE, task_state='deleting')
        self.migrations = [objects.Migration(uuid=uuids.migration1),
                           objects.Migration(uuid=uuids.migration2)]
        self.cb = mock.Mock()
        self.calls = mock.Mock()
        for name, target in (
                ('migrations_of_instance', compute_utils),
                ('delete_arqs_if_needed', compute_utils),
                ('notify_about_instance_delete', compute_utils)):
            patcher = mock.patch.object(target, name)
            self.calls.attach_mock(patcher.start(), name)
            self.addCleanup(patcher.stop)
        self.calls.migrations_of_instance.return_value = self.migrations
        patcher = mock.patch.object(self.compute_api.network_api,
                                    'deallocate_for_instance')
        self.calls.attach_mock(patcher.start(), 'deallocate')
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(objects.Instance, 'destroy')
        self.calls.attach_mock(patcher.start(), 'destroy')
        self.addCleanup(patcher.stop)
        self.calls.attach_mock(
            self.reportclient.delete_allocation_for_instance,
            'delete_allocations')
        self.calls.attach_mock(self.cb, 'cb')

    def _local_delete(self, delete_type='delete'):
        self.compute_api._local_delete(self.context, self.instance, [],
                                       delete_type, self.cb)

    def _deleted_first(self):
        return [
            mock.call.delete_allocations(
                self.context, uuids.instance, consumer_type='instance',
                force=True),
            mock.call.migrations_of_instance(self.context, uuids.instance),
            mock.call.delete_allocations(
                self.context, uuids.migration1, consumer_type='migration',
                force=True),
            mock.call.delete_allocations(
                self.context, uuids.migration2, consumer_type='migration',
                force=True)]

    def _assert_nothing_destroyed(self):
        self.calls.deallocate.assert_not_called()
        self.calls.delete_arqs_if_needed.assert_not_called()
        self.calls.notify_about_instance_delete.assert_not_called()
        self.cb.assert_not_called()
        self.calls.destroy.assert_not_called()

    def _assert_destroyed(self):
        self.calls.notify_about_instance_delete.assert_called_once_with(
            self.compute_api.notifier, self.context, self.instance,
            'delete')
        self.calls.deallocate.assert_called_once_with(mock.ANY,
                                                      self.instance)
        self.cb.assert_called_once_with(self.context, self.instance, [],
                                        local=True)
        self.calls.destroy.assert_called_once_with()

    def test_allocations_deleted_first(self):
        self._local_delete()

        method_calls = [c for c in self.calls.mock_calls
                        if not c[0].startswith('notify_about_instance_delete')]
        self.assertEqual(self._deleted_first(), method_calls[:4])
        self.assertEqual(
            [mock.call.deallocate(mock.ANY, self.instance),
             mock.call.delete_arqs_if_needed(self.context, self.instance),
             # nova's own delete of the allocations, which finds none.
             mock.call.delete_allocations(self.context, uuids.instance,
                                          force=True),
             mock.call.cb(self.context, self.instance, [], local=True),
             mock.call.destroy()], method_calls[4:])
        self._assert_destroyed()

    def test_soft_delete(self):
        self._local_delete('soft_delete')

        self.assertEqual(self._deleted_first(), self.calls.mock_calls[:4])
        self._assert_destroyed()

    def test_no_allocations_to_delete(self):
        # Placement answers 404 for each consumer: the delete goes on.
        self.reportclient.delete_allocation_for_instance.return_value = False

        self._local_delete()

        self._assert_destroyed()

    def test_placement_unreachable_refuses(self):
        # The report client's safe_connect answers None.
        self.reportclient.delete_allocation_for_instance.return_value = None

        ex = self.assertRaises(exception.PlacementUnavailableForDelete,
                               self._local_delete)

        self._assert_refused(ex, 'placement could not be reached')
        self.reportclient.delete_allocation_for_instance.\
            assert_called_once_with(self.context, uuids.instance,
                                    consumer_type='instance', force=True)
        self._assert_nothing_destroyed()

    def test_placement_client_exception_refuses(self):
        self.reportclient.delete_allocation_for_instance.side_effect = (
            compute_api.ks_exc.ConnectFailure())

        ex = self.assertRaises(exception.PlacementUnavailableForDelete,
                               self._local_delete)

        self._assert_refused(ex,
                             'placement could not be reached: ConnectFailure')
        self._assert_nothing_destroyed()

    def test_placement_fails_for_a_migration_refuses(self):
        self.reportclient.delete_allocation_for_instance.side_effect = [
            True, exception.AllocationDeleteFailed(
                consumer_uuid=uuids.migration1, error='boom')]

        ex = self.assertRaises(exception.PlacementUnavailableForDelete,
                               self._local_delete)

        self._assert_refused(ex, 'placement failed')
        self.assertEqual(self._deleted_first()[:3], self.calls.mock_calls)
        self._assert_nothing_destroyed()

    def test_shelved_offloaded_placement_unreachable(self):
        # An unshelve being scheduled may hold a claim.
        self.instance.host = None
        self.instance.vm_state = vm_states.SHELVED_OFFLOADED
        self.reportclient.delete_allocation_for_instance.return_value = None

        self.assertRaises(exception.PlacementUnavailableForDelete,
                          self._local_delete)

        self._assert_nothing_destroyed()

    def test_no_host_in_a_cell(self):
        # A build that failed on its compute: ERROR, its host nilled out.
        self.instance.host = None
        self.instance.vm_state = vm_states.ERROR

        self._local_delete()

        self.assertEqual(self._deleted_first(), self.calls.mock_calls[:4])
        self._assert_destroyed()

    def test_no_host_in_cell0(self):
        # Never scheduled: nova's delete, whose delete of the allocations
        # only logs a placement it cannot reach.
        self.instance.host = None
        self.instance.vm_state = vm_states.ERROR
        self.cell_context.cell_uuid = objects.CellMapping.CELL0_UUID
        self.reportclient.delete_allocation_for_instance.return_value = None

        self._local_delete()

        self.reportclient.delete_allocation_for_instance.\
            assert_called_once_with(self.context, uuids.instance,
                                    force=True)
        self.calls.migrations_of_instance.assert_not_called()
        self._assert_destroyed()

    def test_host_in_cell0(self):
        # Only an instance with no host is taken as never scheduled.
        self.cell_context.cell_uuid = objects.CellMapping.CELL0_UUID
        self.reportclient.delete_allocation_for_instance.return_value = None

        self.assertRaises(exception.PlacementUnavailableForDelete,
                          self._local_delete)

        self._assert_nothing_destroyed()


class ConfirmResizeOnDeletingPlacementTestCase(_PlacementDeleteTestMixin,
                                               test.NoDBTestCase):
    """Tests for API._confirm_resize_on_deleting (bug 1848343).

    A confirm that fails while placement does not answer the API either
    refuses the delete with PlacementUnavailableForDelete, one that gets no
    reply with ConfirmNotAnsweredForDelete; any other failure is raised as
    it was.
    """

    def setUp(self):
        super(ConfirmResizeOnDeletingPlacementTestCase, self).setUp()
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, host='dest',
            vm_state=vm_states.RESIZED, task_state='deleting')
        self.migration = objects.Migration(
            id=1, uuid=uuids.migration, status='finished',
            source_compute='src', dest_compute='dest',
            cross_cell_move=False)
        patcher = mock.patch.object(objects.Migration,
                                    'get_by_instance_and_status',
                                    return_value=self.migration)
        self.mock_get_migration = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(compute_api.API, '_record_action_start')
        self.mock_record = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(self.compute_api.compute_rpcapi,
                                    'confirm_resize')
        self.mock_confirm = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(self.compute_api.compute_task_api,
                                    'confirm_snapshot_based_resize')
        self.mock_confirm_cross_cell = patcher.start()
        self.addCleanup(patcher.stop)

    def _confirm(self):
        self.compute_api._confirm_resize_on_deleting(self.context,
                                                     self.instance)

    def test_confirm(self):
        self._confirm()

        self.mock_record.assert_called_once_with(
            self.context, self.instance, instance_actions.CONFIRM_RESIZE)
        self.mock_confirm.assert_called_once_with(
            self.context, self.instance, self.migration, 'src', cast=False)
        self.reportclient.get_allocs_for_consumer.assert_not_called()

    def test_confirm_cross_cell(self):
        self.migration.cross_cell_move = True

        self._confirm()

        self.mock_confirm_cross_cell.assert_called_once_with(
            self.context, self.instance, self.migration, do_cast=False)
        self.mock_confirm.assert_not_called()
        self.reportclient.get_allocs_for_consumer.assert_not_called()

    def test_no_migration_to_confirm(self):
        self.mock_get_migration.side_effect = (
            exception.MigrationNotFoundByStatus(instance_id=uuids.instance,
                                                status='finished'))

        self._confirm()

        self.assertEqual(2, self.mock_get_migration.call_count)
        self.mock_record.assert_not_called()
        self.mock_confirm.assert_not_called()
        self.reportclient.get_allocs_for_consumer.assert_not_called()

    def test_confirm_not_answered(self):
        self.mock_confirm.side_effect = oslo_exceptions.MessagingTimeout()

        ex = self.assertRaises(exception.ConfirmNotAnsweredForDelete,
                               self._confirm)

        # The servers controller answers it as a 503.
        self.assertIsInstance(ex, exception.PlacementUnavailableForDelete)
        self.assertEqual(503, ex.code)
        message = ex.format_message()
        self.assertIn(uuids.instance, message)
        self.assertIn('got no reply (MessagingTimeout)', message)
        self.assertIn('The delete can be retried', message)
        self.reportclient.get_allocs_for_consumer.assert_not_called()

    def test_confirm_cross_cell_not_answered(self):
        self.migration.cross_cell_move = True
        self.mock_confirm_cross_cell.side_effect = (
            oslo_exceptions.MessagingTimeout())

        self.assertRaises(exception.ConfirmNotAnsweredForDelete,
                          self._confirm)

    def test_confirm_fails_placement_unreachable(self):
        self.mock_confirm.side_effect = test.TestingException()
        self.reportclient.get_allocs_for_consumer.side_effect = (
            compute_api.ks_exc.ConnectFailure())

        ex = self.assertRaises(exception.PlacementUnavailableForDelete,
                               self._confirm)

        self.assertNotIsInstance(ex, exception.ConfirmNotAnsweredForDelete)
        self._assert_refused(ex,
                             'placement could not be reached: ConnectFailure')
        self.reportclient.get_allocs_for_consumer.assert_called_once_with(
            self.context, uuids.instance)

    def test_confirm_fails_placement_fails(self):
        self.mock_confirm.side_effect = test.TestingException()
        self.reportclient.get_allocs_for_consumer.side_effect = (
            exception.ConsumerAllocationRetrievalFailed(
                consumer_uuid=uuids.instance, error='boom'))

        ex = self.assertRaises(exception.PlacementUnavailableForDelete,
                               self._confirm)

        self._assert_refused(ex, 'placement failed')

    def test_confirm_fails_placement_answers(self):
        # Not a placement outage: the confirm's error is raised as it was.
        self.mock_confirm.side_effect = test.TestingException()
        self.reportclient.get_allocs_for_consumer.return_value = {}

        self.assertRaises(test.TestingException, self._confirm)

        self.reportclient.get_allocs_for_consumer.assert_called_once_with(
            self.context, uuids.instance)
