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

import ddt
from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import manager
from nova import context
from nova import exception
from nova import objects
from nova import test
from nova.tests.unit import fake_instance


class CompleteDeletionMigrationAllocationsTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._complete_deletion removing the allocations
    of the deleted instance's migrations, and raising when it cannot
    (bug 1848343).
    """

    def setUp(self):
        super(CompleteDeletionMigrationAllocationsTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.instance = fake_instance.fake_instance_obj(
            self.context, expected_attrs=['system_metadata'])
        # Everything the delete does once the allocations are removed.
        self.calls = mock.Mock()
        for name in ('reportclient', '_update_resource_tracker',
                     '_clean_instance_console_tokens',
                     '_delete_scheduler_instance_info'):
            patcher = mock.patch.object(self.compute, name)
            self.calls.attach_mock(patcher.start(), name)
            self.addCleanup(patcher.stop)
        self.mock_delete = (
            self.calls.reportclient.delete_allocation_for_instance)
        self.mock_delete.return_value = True
        patcher = mock.patch.object(
            objects.MigrationList, 'get_by_filters',
            return_value=objects.MigrationList(objects=[
                objects.Migration(uuid=uuids.migration1),
                objects.Migration(uuid=uuids.migration2)]))
        self.mock_migrations = patcher.start()
        self.addCleanup(patcher.stop)

    def _delete_call(self, uuid, force=True, consumer_type='instance'):
        return mock.call.reportclient.delete_allocation_for_instance(
            self.context, uuid, consumer_type=consumer_type, force=force)

    def _completed_calls(self, force=True):
        """The calls of the delete once the allocations are removed."""
        return [
            mock.call._update_resource_tracker(self.context, self.instance),
            mock.call.reportclient.delete_allocation_for_instance(
                self.context, self.instance.uuid, force=force),
            mock.call._clean_instance_console_tokens(
                self.context, self.instance),
            mock.call._delete_scheduler_instance_info(
                self.context, self.instance.uuid)]

    def _assert_not_completed(self):
        self.calls._update_resource_tracker.assert_not_called()
        self.calls._clean_instance_console_tokens.assert_not_called()
        self.calls._delete_scheduler_instance_info.assert_not_called()

    def test_deletes_migration_allocations_first(self):
        self.compute._complete_deletion(self.context, self.instance)
        self.assertEqual(
            [self._delete_call(self.instance.uuid),
             self._delete_call(uuids.migration1, consumer_type='migration'),
             self._delete_call(uuids.migration2, consumer_type='migration')
             ] + self._completed_calls(),
            self.calls.mock_calls)
        self.mock_migrations.assert_called_once_with(self.context, mock.ANY)
        filters = self.mock_migrations.call_args[0][1]
        self.assertEqual(self.instance.uuid, filters['instance_uuid'])

    def test_no_migrations(self):
        """The ordinary delete: nothing else is deleted."""
        self.mock_migrations.return_value = objects.MigrationList(objects=[])
        self.compute._complete_deletion(self.context, self.instance)
        self.assertEqual(
            [self._delete_call(self.instance.uuid)] +
            self._completed_calls(),
            self.calls.mock_calls)

    def test_deferred_delete_does_not_force(self):
        self.flags(reclaim_instance_interval=60)
        self.mock_migrations.return_value = objects.MigrationList(objects=[])
        self.compute._complete_deletion(self.context, self.instance)
        self.assertEqual(
            [self._delete_call(self.instance.uuid, force=False)] +
            self._completed_calls(force=False),
            self.calls.mock_calls)

    def test_nothing_left_to_delete(self):
        """Allocations deleted before (a retry) are not a failure."""
        self.mock_delete.return_value = False
        self.compute._complete_deletion(self.context, self.instance)
        self.assertEqual(
            [self._delete_call(self.instance.uuid),
             self._delete_call(uuids.migration1, consumer_type='migration'),
             self._delete_call(uuids.migration2, consumer_type='migration')
             ] + self._completed_calls(),
            self.calls.mock_calls)

    def test_placement_unreachable_for_instance(self):
        """The report client returns None: the delete fails, before the
        caller destroys the record.
        """
        self.mock_delete.return_value = None
        ex = self.assertRaises(exception.AllocationDeleteFailed,
                               self.compute._complete_deletion,
                               self.context, self.instance)
        self.assertIn(self.instance.uuid, str(ex))
        self.assertEqual([self._delete_call(self.instance.uuid)],
                         self.calls.mock_calls)
        self.mock_migrations.assert_not_called()
        self._assert_not_completed()

    def test_instance_delete_fails(self):
        self.mock_delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=self.instance.uuid, error='conflict')
        self.assertRaises(exception.AllocationDeleteFailed,
                          self.compute._complete_deletion,
                          self.context, self.instance)
        self.mock_migrations.assert_not_called()
        self._assert_not_completed()

    def test_placement_unreachable_for_migration(self):
        self.mock_delete.side_effect = [True, None, True]
        ex = self.assertRaises(exception.AllocationDeleteFailed,
                               self.compute._complete_deletion,
                               self.context, self.instance)
        self.assertIn(uuids.migration1, str(ex))
        self.assertEqual(
            [self._delete_call(self.instance.uuid),
             self._delete_call(uuids.migration1, consumer_type='migration')],
            self.calls.mock_calls)
        self._assert_not_completed()

    def test_migration_delete_fails(self):
        self.mock_delete.side_effect = [
            True, True, exception.AllocationDeleteFailed(
                consumer_uuid=uuids.migration2, error='conflict')]
        self.assertRaises(exception.AllocationDeleteFailed,
                          self.compute._complete_deletion,
                          self.context, self.instance)
        self.assertEqual(3, self.mock_delete.call_count)
        self._assert_not_completed()

    def test_listing_migrations_fails(self):
        self.mock_migrations.side_effect = test.TestingException()
        self.assertRaises(test.TestingException,
                          self.compute._complete_deletion,
                          self.context, self.instance)
        self.assertEqual([self._delete_call(self.instance.uuid)],
                         self.calls.mock_calls)
        self._assert_not_completed()


@ddt.ddt
class DeleteAllocationAfterMoveLeftTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._delete_allocation_after_move recording
    'error' a migration whose allocations it could not delete, so that the
    delete of its server removes them (bug 1848343).
    """

    def setUp(self):
        super(DeleteAllocationAfterMoveLeftTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.instance = fake_instance.fake_instance_obj(self.context)
        self.migration = objects.Migration(
            context=self.context, id=1, uuid=uuids.migration,
            instance_uuid=self.instance.uuid, status='confirmed')
        # The status each save records.
        self.saved = []
        self.mock_save = self.migration.save = mock.Mock(
            side_effect=lambda: self.saved.append(self.migration.status))
        patcher = mock.patch.object(self.compute, 'reportclient')
        self.mock_delete = patcher.start().delete_allocation_for_instance
        self.addCleanup(patcher.stop)

    def _delete(self):
        return self.compute._delete_allocation_after_move(
            self.context, self.instance, self.migration)

    def _assert_delete_called(self):
        self.mock_delete.assert_called_once_with(
            self.context, uuids.migration, consumer_type='migration',
            force=False)

    @ddt.data(True, False)
    def test_deleted_or_nothing_left(self, result):
        self.mock_delete.return_value = result
        self.assertIsNone(self._delete())
        self._assert_delete_called()
        self.assertEqual('confirmed', self.migration.status)
        self.mock_save.assert_not_called()

    @ddt.data('confirmed', 'completed')
    @mock.patch.object(manager, 'LOG')
    def test_placement_unreachable(self, status, mock_log):
        self.migration.status = status
        self.mock_delete.return_value = None
        self.assertIsNone(self._delete())
        self._assert_delete_called()
        self.assertEqual(['error'], self.saved)
        self.assertEqual('error', self.migration.status)
        mock_log.error.assert_called_once()
        mock_log.exception.assert_not_called()

    def test_delete_fails(self):
        error = exception.AllocationDeleteFailed(
            consumer_uuid=uuids.migration, error='conflict')
        self.mock_delete.side_effect = error
        ex = self.assertRaises(exception.AllocationDeleteFailed,
                               self._delete)
        self.assertIs(error, ex)
        self.assertEqual(['error'], self.saved)

    @mock.patch.object(manager, 'LOG')
    def test_placement_unreachable_save_fails(self, mock_log):
        """A failure to record it is logged: the move is not failed."""
        self.mock_delete.return_value = None
        self.mock_save.side_effect = test.TestingException()
        self.assertIsNone(self._delete())
        self.mock_save.assert_called_once_with()
        mock_log.exception.assert_called_once_with(mock.ANY,
                                                   uuids.migration)

    @mock.patch.object(manager, 'LOG')
    def test_delete_fails_save_fails(self, mock_log):
        """The failure of the delete is raised, not the save's."""
        self.mock_delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=uuids.migration, error='conflict')
        self.mock_save.side_effect = test.TestingException()
        self.assertRaises(exception.AllocationDeleteFailed, self._delete)
        self.mock_save.assert_called_once_with()
        mock_log.exception.assert_called_once_with(mock.ANY,
                                                   uuids.migration)
