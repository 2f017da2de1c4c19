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
from nova.compute import vm_states
from nova import context
from nova.db.main import api as db
from nova import exception
from nova import test
from nova.tests.unit import fake_instance


class DeleteMappingWriteTestCase(test.NoDBTestCase):
    """Tests for API._do_delete and API._do_soft_delete (related to bug
    1783613).

    The instance mapping is queued for deletion before the delete is sent
    to the compute or done locally; when the API database fails that
    write, nothing is sent and DatabaseUnavailableForDelete (503) is
    raised; when the delete fails after it, the mapping is put back.
    """

    def setUp(self):
        super(DeleteMappingWriteTestCase, self).setUp()
        self.compute_api = compute_api.API()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, host='host1',
            vm_state=vm_states.ACTIVE, task_state='deleting')
        self.calls = mock.Mock()
        for name, target in (
                ('_update_queued_for_deletion', compute_api.API),
                ('terminate_instance', self.compute_api.compute_rpcapi),
                ('soft_delete_instance', self.compute_api.compute_rpcapi),
                ('save', self.instance)):
            patcher = mock.patch.object(target, name)
            self.calls.attach_mock(patcher.start(), name)
            self.addCleanup(patcher.stop)

    def _queue(self, qfd):
        return mock.call._update_queued_for_deletion(
            self.context, uuids.instance, qfd)

    def test_queued_before_the_cast(self):
        self.compute_api._do_delete(self.context, self.instance, [])
        self.assertEqual(
            [self._queue(True),
             mock.call.terminate_instance(self.context, self.instance, [])],
            self.calls.mock_calls)

    def test_queued_before_the_soft_delete_cast(self):
        self.compute_api._do_soft_delete(self.context, self.instance, [])
        self.assertEqual(
            [self._queue(True),
             mock.call.soft_delete_instance(self.context, self.instance)],
            self.calls.mock_calls)

    def test_queued_before_the_local_save(self):
        self.compute_api._do_delete(self.context, self.instance, [],
                                    local=True)
        self.assertEqual([self._queue(True), mock.call.save()],
                         self.calls.mock_calls)
        self.assertEqual(vm_states.DELETED, self.instance.vm_state)
        self.assertIsNone(self.instance.task_state)

    def test_write_fails_nothing_sent(self):
        self.calls._update_queued_for_deletion.side_effect = (
            db.db_exc.DBConnectionError())
        for local in (False, True):
            ex = self.assertRaises(
                exception.DatabaseUnavailableForDelete,
                self.compute_api._do_delete, self.context, self.instance,
                [], local=local)
            self.assertEqual(503, ex.code)
            self.assertIn('The delete can be retried', ex.format_message())
            self.assertIsInstance(ex, exception.PlacementUnavailableForDelete)
        self.calls.terminate_instance.assert_not_called()
        self.calls.save.assert_not_called()

    def test_soft_delete_write_fails_nothing_sent(self):
        self.calls._update_queued_for_deletion.side_effect = (
            db.db_exc.DBConnectionError())
        self.assertRaises(exception.DatabaseUnavailableForDelete,
                          self.compute_api._do_soft_delete, self.context,
                          self.instance, [])
        self.calls.soft_delete_instance.assert_not_called()

    def test_other_error_raised_as_it_was(self):
        self.calls._update_queued_for_deletion.side_effect = (
            exception.InstanceMappingNotFound(uuid=uuids.instance))
        self.assertRaises(exception.InstanceMappingNotFound,
                          self.compute_api._do_delete, self.context,
                          self.instance, [])
        self.calls.terminate_instance.assert_not_called()

    def test_cast_fails_mapping_put_back(self):
        self.calls.terminate_instance.side_effect = (
            oslo_exceptions.MessageDeliveryFailure())
        self.assertRaises(oslo_exceptions.MessageDeliveryFailure,
                          self.compute_api._do_delete, self.context,
                          self.instance, [])
        self.assertEqual(
            [self._queue(True),
             mock.call.terminate_instance(self.context, self.instance, []),
             self._queue(False)],
            self.calls.mock_calls)

    def test_local_save_fails_mapping_put_back(self):
        self.calls.save.side_effect = db.db_exc.DBConnectionError()
        self.assertRaises(db.db_exc.DBConnectionError,
                          self.compute_api._do_delete, self.context,
                          self.instance, [], local=True)
        self.assertEqual(
            [self._queue(True), mock.call.save(), self._queue(False)],
            self.calls.mock_calls)

    def test_putting_back_fails_the_delete_error_raised(self):
        self.calls.terminate_instance.side_effect = (
            oslo_exceptions.MessageDeliveryFailure())
        self.calls._update_queued_for_deletion.side_effect = [
            None, db.db_exc.DBConnectionError()]
        self.assertRaises(oslo_exceptions.MessageDeliveryFailure,
                          self.compute_api._do_delete, self.context,
                          self.instance, [])
        self.assertEqual(2, self.calls._update_queued_for_deletion.call_count)
