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

from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test


class MigrationsOfInstanceTestCase(test.TestCase):
    """Tests for compute_utils.migrations_of_instance (bug 1848343)."""

    # A migration in one of these statuses released its allocations.
    RELEASED = ('confirmed', 'completed', 'done')
    # Every other status a migration gets may leave allocations.
    HOLDING = (
        'accepted', 'queued', 'pre-migrating', 'preparing', 'migrating',
        'running', 'post-migrating', 'finished', 'confirming', 'reverting',
        'reverted', 'cancelled', 'error', 'failed')

    def setUp(self):
        super(MigrationsOfInstanceTestCase, self).setUp()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.instance = self._create_instance(uuids.instance)
        self.other = self._create_instance(uuids.other_instance)
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)

    def _create_instance(self, uuid):
        instance = objects.Instance(
            context=self.context, uuid=uuid,
            project_id=self.context.project_id,
            user_id=self.context.user_id, vm_state=vm_states.ACTIVE)
        instance.create()
        return instance

    def _create_migration(self, instance, status):
        migration = objects.Migration(
            context=self.context, instance_uuid=instance.uuid,
            status=status, migration_type='migration',
            source_compute='src', dest_compute='dest')
        migration.create()
        return migration

    def _create_migrations(self):
        """Create a migration in each status, and one of another instance.

        :returns: the UUIDs of the instance's migrations that may hold
            allocations
        """
        holding = set()
        for status in self.HOLDING:
            holding.add(self._create_migration(self.instance, status).uuid)
        for status in self.RELEASED:
            self._create_migration(self.instance, status)
        self._create_migration(self.other, 'error')
        return holding

    def test_migrations_that_may_hold_allocations(self):
        holding = self._create_migrations()
        migrations = compute_utils.migrations_of_instance(
            self.context, self.instance.uuid)
        self.assertEqual(holding, {m.uuid for m in migrations})
        self.assertEqual(set(self.HOLDING), {m.status for m in migrations})

    def test_reads_deleted_migrations(self):
        """The migrations of a destroyed instance are read."""
        holding = self._create_migrations()
        self.instance.destroy()
        self.assertEqual('no', self.context.read_deleted)
        migrations = compute_utils.migrations_of_instance(
            self.context, self.instance.uuid)
        self.assertEqual(holding, {m.uuid for m in migrations})
        # The caller's context is restored.
        self.assertEqual('no', self.context.read_deleted)

    def test_no_migrations(self):
        self._create_migration(self.instance, 'confirmed')
        self.assertEqual([], list(compute_utils.migrations_of_instance(
            self.context, self.instance.uuid)))

    def test_delete_allocations_of_migrations(self):
        """Only the migrations that may hold allocations are deleted."""
        holding = self._create_migrations()
        self.instance.destroy()
        self.reportclient.delete_allocation_for_instance.return_value = True
        compute_utils.delete_allocations_of_migrations(
            self.context, self.reportclient, self.instance.uuid,
            strict=True)
        calls = self.reportclient.delete_allocation_for_instance.mock_calls
        self.assertEqual(
            sorted(mock.call(self.context, uuid, consumer_type='migration',
                             force=True) for uuid in holding),
            sorted(calls))


class DeleteAllocationsOrRaiseTestCase(test.NoDBTestCase):
    """Tests for compute_utils.delete_allocations_or_raise (bug 1848343)."""

    def setUp(self):
        super(DeleteAllocationsOrRaiseTestCase, self).setUp()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.mock_delete = self.reportclient.delete_allocation_for_instance

    def test_deleted(self):
        self.mock_delete.return_value = True
        self.assertTrue(compute_utils.delete_allocations_or_raise(
            self.context, self.reportclient, uuids.instance))
        self.mock_delete.assert_called_once_with(
            self.context, uuids.instance, consumer_type='instance',
            force=True)

    def test_nothing_to_delete(self):
        self.mock_delete.return_value = False
        self.assertFalse(compute_utils.delete_allocations_or_raise(
            self.context, self.reportclient, uuids.migration, 'migration',
            force=False))
        self.mock_delete.assert_called_once_with(
            self.context, uuids.migration, consumer_type='migration',
            force=False)

    def test_placement_unreachable(self):
        """The report client returns None when placement is unreachable."""
        self.mock_delete.return_value = None
        ex = self.assertRaises(
            exception.AllocationDeleteFailed,
            compute_utils.delete_allocations_or_raise,
            self.context, self.reportclient, uuids.instance)
        self.assertIn(uuids.instance, str(ex))
        self.assertIn('placement could not be reached', str(ex))

    def test_delete_fails(self):
        self.mock_delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=uuids.instance, error='conflict')
        self.assertRaises(
            exception.AllocationDeleteFailed,
            compute_utils.delete_allocations_or_raise,
            self.context, self.reportclient, uuids.instance)


class DeleteAllocationsOfMigrationsTestCase(test.NoDBTestCase):
    """Tests for compute_utils.delete_allocations_of_migrations."""

    def setUp(self):
        super(DeleteAllocationsOfMigrationsTestCase, self).setUp()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.mock_delete = self.reportclient.delete_allocation_for_instance
        patcher = mock.patch.object(
            compute_utils, 'migrations_of_instance', autospec=True,
            return_value=objects.MigrationList(objects=[
                objects.Migration(uuid=uuids.migration1),
                objects.Migration(uuid=uuids.migration2)]))
        self.mock_migrations = patcher.start()
        self.addCleanup(patcher.stop)
        self.expected_calls = [
            mock.call(self.context, uuids.migration1,
                      consumer_type='migration', force=True),
            mock.call(self.context, uuids.migration2,
                      consumer_type='migration', force=True)]

    def _delete(self, strict=False):
        return compute_utils.delete_allocations_of_migrations(
            self.context, self.reportclient, uuids.instance, strict=strict)

    def test_deletes_each_migration(self):
        self.mock_delete.return_value = True
        self._delete()
        self.mock_migrations.assert_called_once_with(
            self.context, uuids.instance)
        self.assertEqual(self.expected_calls,
                         self.mock_delete.call_args_list)

    def test_no_migrations(self):
        self.mock_migrations.return_value = objects.MigrationList(objects=[])
        self._delete(strict=True)
        self.mock_delete.assert_not_called()

    @mock.patch.object(compute_utils.LOG, 'exception')
    def test_delete_fails_is_logged(self, mock_log):
        """A failure is logged and the next migration is deleted."""
        self.mock_delete.side_effect = [
            exception.AllocationDeleteFailed(consumer_uuid=uuids.migration1,
                                             error='conflict'),
            True]
        self._delete()
        self.assertEqual(self.expected_calls,
                         self.mock_delete.call_args_list)
        mock_log.assert_called_once_with(
            mock.ANY, 'migration', uuids.migration1)

    def test_placement_unreachable_not_strict(self):
        self.mock_delete.return_value = None
        self._delete()
        self.assertEqual(self.expected_calls,
                         self.mock_delete.call_args_list)

    @mock.patch.object(compute_utils.LOG, 'exception')
    def test_listing_fails_is_logged(self, mock_log):
        self.mock_migrations.side_effect = test.TestingException()
        self.assertIsNone(self._delete())
        self.mock_delete.assert_not_called()
        mock_log.assert_called_once_with(mock.ANY, uuids.instance)

    def test_listing_fails_strict(self):
        self.mock_migrations.side_effect = test.TestingException()
        self.assertRaises(test.TestingException, self._delete, strict=True)
        self.mock_delete.assert_not_called()

    def test_strict_deletes_each_migration(self):
        self.mock_delete.return_value = True
        self._delete(strict=True)
        self.assertEqual(self.expected_calls,
                         self.mock_delete.call_args_list)

    def test_strict_placement_unreachable(self):
        """The first failure is raised; the next migration is not tried."""
        self.mock_delete.return_value = None
        self.assertRaises(exception.AllocationDeleteFailed, self._delete,
                          strict=True)
        self.assertEqual(self.expected_calls[:1],
                         self.mock_delete.call_args_list)

    def test_strict_delete_fails(self):
        self.mock_delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=uuids.migration1, error='conflict')
        self.assertRaises(exception.AllocationDeleteFailed, self._delete,
                          strict=True)
        self.assertEqual(self.expected_calls[:1],
                         self.mock_delete.call_args_list)
