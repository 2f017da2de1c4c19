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
from nova.compute import vm_states
import nova.conf
from nova import context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.tests.unit import fake_instance


class FinishedMovesLeftRemovalTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._remove_allocations_of_finished_moves

    Bug 1848343: a source compute that stopped between recording a
    migration 'confirmed' or 'completed' and removing the allocations the
    migration consumer holds on its node left them for good. The source
    now reads what its nodes hold and removes the allocations of the
    finished migrations from this host among those consumers; a node it
    cannot read is returned, and a migration whose allocations are not
    deleted is recorded 'error'.
    """

    HOST = 'source-host'

    def setUp(self):
        super(FinishedMovesLeftRemovalTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.compute.host = self.HOST
        self.context = context.get_admin_context()
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.compute.reportclient = self.reportclient
        self.nodes = [objects.ComputeNode(uuid=uuids.node1),
                      objects.ComputeNode(uuid=uuids.node2)]
        patcher = mock.patch.object(objects.ComputeNodeList,
                                    'get_all_by_host',
                                    return_value=self.nodes)
        self.mock_nodes = patcher.start()
        self.addCleanup(patcher.stop)
        self.held = {uuids.node1: {}, uuids.node2: {}}
        self.reportclient.get_allocations_for_resource_provider.side_effect = (
            self._get_allocations)
        self.reportclient.delete_allocation_for_instance.return_value = True
        patcher = mock.patch.object(objects.MigrationList, 'get_by_filters',
                                    side_effect=self._get_migrations)
        self.mock_migrations = patcher.start()
        self.addCleanup(patcher.stop)
        self.finished = {}
        patcher = mock.patch.object(objects.Migration, 'save')
        self.mock_save = patcher.start()
        self.addCleanup(patcher.stop)

    def _get_allocations(self, ctxt, rp_uuid):
        held = self.held[rp_uuid]
        if isinstance(held, Exception):
            raise held
        return report.ProviderAllocInfo(allocations=held)

    def _get_migrations(self, ctxt, filters):
        return [self.finished[uuid] for uuid in filters['uuid']
                if uuid in self.finished]

    def _migration(self, uuid, status='confirmed'):
        migration = objects.Migration(uuid=uuid, status=status,
                                      source_compute=self.HOST)
        self.finished[uuid] = migration
        return migration

    @staticmethod
    def _alloc():
        return {'resources': {'VCPU': 1, 'MEMORY_MB': 512}}

    def test_removes_allocations_of_finished_migrations(self):
        confirmed = self._migration(uuids.confirmed)
        completed = self._migration(uuids.completed, status='completed')
        self.held[uuids.node1] = {uuids.confirmed: self._alloc(),
                                  uuids.instance: self._alloc()}
        self.held[uuids.node2] = {uuids.completed: self._alloc()}

        unread = self.compute._remove_allocations_of_finished_moves(
            self.context)

        self.assertEqual(set(), unread)
        self.mock_nodes.assert_called_once_with(self.context, self.HOST)
        self.reportclient.get_allocations_for_resource_provider.\
            assert_has_calls([mock.call(self.context, uuids.node1),
                              mock.call(self.context, uuids.node2)])
        # One query per node, for the consumers it holds only.
        self.assertEqual(2, self.mock_migrations.call_count)
        for call, held in zip(self.mock_migrations.call_args_list,
                              ([uuids.confirmed, uuids.instance],
                               [uuids.completed])):
            ctxt, filters = call[0]
            self.assertIs(self.context, ctxt)
            self.assertEqual(sorted(held), sorted(filters.pop('uuid')))
            self.assertEqual({'source_compute': self.HOST,
                              'status': ['confirmed', 'completed']},
                             filters)
        self.assertEqual(
            [mock.call(self.context, uuids.confirmed,
                       consumer_type='migration', force=True),
             mock.call(self.context, uuids.completed,
                       consumer_type='migration', force=True)],
            self.reportclient.delete_allocation_for_instance.call_args_list)
        # Deleted: the migrations keep their status.
        self.assertEqual('confirmed', confirmed.status)
        self.assertEqual('completed', completed.status)
        self.mock_save.assert_not_called()

    def test_no_finished_migration_among_consumers(self):
        self.held[uuids.node1] = {uuids.instance: self._alloc(),
                                  uuids.migration: self._alloc()}

        unread = self.compute._remove_allocations_of_finished_moves(
            self.context)

        self.assertEqual(set(), unread)
        self.mock_migrations.assert_called_once_with(
            self.context, mock.ANY)
        self.reportclient.delete_allocation_for_instance.assert_not_called()

    def test_nodes_holding_nothing_are_not_queried(self):
        unread = self.compute._remove_allocations_of_finished_moves(
            self.context)

        self.assertEqual(set(), unread)
        self.assertEqual(
            2, self.reportclient.get_allocations_for_resource_provider.
            call_count)
        self.mock_migrations.assert_not_called()
        self.reportclient.delete_allocation_for_instance.assert_not_called()

    def test_first_start_without_compute_node(self):
        self.mock_nodes.side_effect = exception.ComputeHostNotFound(
            host=self.HOST)

        unread = self.compute._remove_allocations_of_finished_moves(
            self.context)

        self.assertEqual(set(), unread)
        self.reportclient.get_allocations_for_resource_provider.\
            assert_not_called()
        self.mock_migrations.assert_not_called()

    def test_unreadable_node_is_returned_and_others_read(self):
        self._migration(uuids.confirmed)
        self.held[uuids.node1] = (
            exception.ResourceProviderAllocationRetrievalFailed(
                rp_uuid=uuids.node1, error='placement down'))
        self.held[uuids.node2] = {uuids.confirmed: self._alloc()}

        unread = self.compute._remove_allocations_of_finished_moves(
            self.context)

        self.assertEqual({uuids.node1}, unread)
        self.reportclient.delete_allocation_for_instance.\
            assert_called_once_with(self.context, uuids.confirmed,
                                    consumer_type='migration', force=True)

    def test_only_reads_the_nodes_given(self):
        self._migration(uuids.confirmed)
        self._migration(uuids.completed, status='completed')
        self.held[uuids.node1] = {uuids.confirmed: self._alloc()}
        self.held[uuids.node2] = {uuids.completed: self._alloc()}

        unread = self.compute._remove_allocations_of_finished_moves(
            self.context, only={uuids.node2})

        self.assertEqual(set(), unread)
        self.reportclient.get_allocations_for_resource_provider.\
            assert_called_once_with(self.context, uuids.node2)
        self.reportclient.delete_allocation_for_instance.\
            assert_called_once_with(self.context, uuids.completed,
                                    consumer_type='migration', force=True)

    def test_not_deleted_records_the_migration_error(self):
        left = self._migration(uuids.left)
        self.held[uuids.node1] = {uuids.left: self._alloc()}
        # The report client only logs a placement it cannot reach.
        self.reportclient.delete_allocation_for_instance.return_value = None

        unread = self.compute._remove_allocations_of_finished_moves(
            self.context)

        self.assertEqual(set(), unread)
        self.assertEqual('error', left.status)
        self.mock_save.assert_called_once_with()

    def test_delete_failure_records_error_and_goes_on(self):
        left = self._migration(uuids.left)
        done = self._migration(uuids.done, status='completed')
        self.held[uuids.node1] = {uuids.left: self._alloc()}
        self.held[uuids.node2] = {uuids.done: self._alloc()}
        self.reportclient.delete_allocation_for_instance.side_effect = [
            exception.AllocationDeleteFailed(consumer_uuid=uuids.left,
                                             error='conflict'),
            True]

        unread = self.compute._remove_allocations_of_finished_moves(
            self.context)

        self.assertEqual(set(), unread)
        self.assertEqual(
            2, self.reportclient.delete_allocation_for_instance.call_count)
        self.assertEqual('error', left.status)
        self.assertEqual('completed', done.status)
        self.mock_save.assert_called_once_with()

    def test_record_error_failure_is_not_raised(self):
        left = self._migration(uuids.left)
        self.held[uuids.node1] = {uuids.left: self._alloc()}
        self.reportclient.delete_allocation_for_instance.return_value = None
        self.mock_save.side_effect = exception.MigrationNotFound(
            migration_id=1)

        unread = self.compute._remove_allocations_of_finished_moves(
            self.context)

        self.assertEqual(set(), unread)
        self.assertEqual('error', left.status)
        self.mock_save.assert_called_once_with()


class FinishedMovesLeftQueryTestCase(test.TestCase):
    """Tests for ComputeManager._remove_allocations_of_finished_moves

    Bug 1848343: the query it makes, against a database. Only the
    migrations of the consumers a node holds that are 'confirmed' or
    'completed' and from this host have their allocations removed.
    """

    HOST = 'source-host'

    def setUp(self):
        super(FinishedMovesLeftQueryTestCase, self).setUp()
        self.context = context.get_admin_context()
        self.compute = manager.ComputeManager()
        self.compute.host = self.HOST
        self.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.compute.reportclient = self.reportclient
        self.reportclient.delete_allocation_for_instance.return_value = True
        patcher = mock.patch.object(
            objects.ComputeNodeList, 'get_all_by_host',
            return_value=[objects.ComputeNode(uuid=uuids.node)])
        patcher.start()
        self.addCleanup(patcher.stop)
        instance = objects.Instance(
            context=self.context, uuid=uuids.instance,
            project_id=self.context.project_id,
            user_id=self.context.user_id, vm_state=vm_states.ACTIVE)
        instance.create()

    def _create_migration(self, uuid, status, source=HOST):
        migration = objects.Migration(
            context=self.context, uuid=uuid, instance_uuid=uuids.instance,
            status=status, migration_type='migration',
            source_compute=source, dest_compute='dest')
        migration.create()
        return migration

    def test_only_finished_migrations_from_this_host(self):
        self._create_migration(uuids.confirmed, 'confirmed')
        self._create_migration(uuids.completed, 'completed')
        self._create_migration(uuids.finished, 'finished')
        self._create_migration(uuids.elsewhere, 'confirmed', source='other')
        self._create_migration(uuids.not_held, 'confirmed')
        held = {uuid: {'resources': {'VCPU': 1}} for uuid in (
            uuids.confirmed, uuids.completed, uuids.finished,
            uuids.elsewhere, uuids.instance)}
        self.reportclient.get_allocations_for_resource_provider.\
            return_value = report.ProviderAllocInfo(allocations=held)

        self.compute._remove_allocations_of_finished_moves(self.context)

        deleted = self.reportclient.delete_allocation_for_instance
        self.assertEqual(
            sorted([uuids.confirmed, uuids.completed]),
            sorted(call[0][1] for call in deleted.call_args_list))


class FinishedMovesLeftInitHostTestCase(test.NoDBTestCase):
    """Tests for what ComputeManager.init_host now does last

    Bug 1848343: once the service is initialized, init_host removes the
    allocations that moves finished on this source left when it stopped
    (_remove_allocations_of_finished_moves) and keeps the nodes it could
    not read for _remove_allocations_of_finished_moves_left. A failure
    does not stop the service: every node is read again later.
    """

    def setUp(self):
        super(FinishedMovesLeftInitHostTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        # nova before 2023.1 calls init_host() without a service_ref.
        argcount = manager.ComputeManager.init_host.__code__.co_argcount
        self.args = (mock.sentinel.service_ref,) * (argcount - 1)

    @mock.patch.object(manager.ComputeManager,
                       '_remove_allocations_of_finished_moves')
    @mock.patch.object(manager.ComputeManager, '_init_host_as_nova_does')
    def test_init_host_removes_finished_moves_allocations(
            self, mock_init, mock_remove):
        calls = mock.Mock()
        calls.attach_mock(mock_init, 'init')
        calls.attach_mock(mock_remove, 'remove')
        mock_remove.return_value = {uuids.node}

        self.compute.init_host(*self.args)

        self.assertEqual([mock.call.init(*self.args),
                          mock.call.remove(mock.ANY)], calls.mock_calls)
        ctxt = mock_remove.call_args[0][0]
        self.assertTrue(ctxt.is_admin)
        self.assertEqual({uuids.node}, self.compute._finished_moves_unread)

    @mock.patch.object(manager, 'LOG')
    @mock.patch.object(manager.ComputeManager,
                       '_remove_allocations_of_finished_moves',
                       side_effect=exception.NovaException('db down'))
    @mock.patch.object(manager.ComputeManager, '_init_host_as_nova_does')
    def test_init_host_failure_leaves_every_node_for_later(
            self, mock_init, mock_remove, mock_log):
        self.compute.init_host(*self.args)

        mock_init.assert_called_once_with(*self.args)
        mock_remove.assert_called_once_with(mock.ANY)
        self.assertEqual(manager.EVERY_NODE,
                         self.compute._finished_moves_unread)
        mock_log.exception.assert_called_once()

    @mock.patch.object(manager.ComputeManager,
                       '_remove_allocations_of_finished_moves')
    @mock.patch.object(manager.ComputeManager, '_init_host_as_nova_does',
                       side_effect=exception.NovaException('bad config'))
    def test_init_host_failure_of_nova_init_is_raised(
            self, mock_init, mock_remove):
        self.assertRaises(exception.NovaException,
                          self.compute.init_host, *self.args)
        mock_remove.assert_not_called()


class FinishedMovesLeftPeriodicTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._remove_allocations_of_finished_moves_left

    Bug 1848343: a periodic task reads again, every
    instance_delete_interval, the nodes init_host could not read (all of
    them when init_host failed) until each has been read.
    """

    def setUp(self):
        super(FinishedMovesLeftPeriodicTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.context = context.get_admin_context()

    def test_periodic_task_registered(self):
        method = (manager.ComputeManager.
                  _remove_allocations_of_finished_moves_left)
        self.assertTrue(method._periodic_task)
        self.assertEqual(nova.conf.CONF.instance_delete_interval,
                         method._periodic_spacing)
        self.assertIn('_remove_allocations_of_finished_moves_left',
                      [name for name, _ in self.compute._periodic_tasks])

    @mock.patch.object(manager.ComputeManager,
                       '_remove_allocations_of_finished_moves')
    def test_nothing_left(self, mock_remove):
        # Before init_host ran, and once every node was read.
        self.compute._remove_allocations_of_finished_moves_left(self.context)
        self.compute._finished_moves_unread = set()
        self.compute._remove_allocations_of_finished_moves_left(self.context)

        mock_remove.assert_not_called()
        self.assertEqual(set(), self.compute._finished_moves_unread)

    @mock.patch.object(manager.ComputeManager,
                       '_remove_allocations_of_finished_moves')
    def test_reads_the_nodes_left(self, mock_remove):
        self.compute._finished_moves_unread = {uuids.node1, uuids.node2}
        mock_remove.side_effect = [{uuids.node2}, set()]

        self.compute._remove_allocations_of_finished_moves_left(self.context)
        mock_remove.assert_called_once_with(
            self.context, only={uuids.node1, uuids.node2})
        self.assertEqual({uuids.node2}, self.compute._finished_moves_unread)

        mock_remove.reset_mock()
        self.compute._remove_allocations_of_finished_moves_left(self.context)
        mock_remove.assert_called_once_with(self.context, only={uuids.node2})
        self.assertEqual(set(), self.compute._finished_moves_unread)

        mock_remove.reset_mock()
        self.compute._remove_allocations_of_finished_moves_left(self.context)
        mock_remove.assert_not_called()

    @mock.patch.object(manager.ComputeManager,
                       '_remove_allocations_of_finished_moves',
                       return_value=set())
    def test_reads_every_node_after_init_host_failed(self, mock_remove):
        self.compute._finished_moves_unread = manager.EVERY_NODE

        self.compute._remove_allocations_of_finished_moves_left(self.context)

        mock_remove.assert_called_once_with(self.context, only=None)
        self.assertEqual(set(), self.compute._finished_moves_unread)

    @mock.patch.object(manager.ComputeManager,
                       '_remove_allocations_of_finished_moves',
                       side_effect=exception.NovaException('db down'))
    def test_failure_keeps_the_nodes_left(self, mock_remove):
        self.compute._finished_moves_unread = {uuids.node}

        self.assertRaises(
            exception.NovaException,
            self.compute._remove_allocations_of_finished_moves_left,
            self.context)

        self.assertEqual({uuids.node}, self.compute._finished_moves_unread)


class PartialDeletionsCompletionTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._complete_partial_deletion

    Bug 1848343: nova destroyed the record of an instance left DELETED
    before removing its allocations, so that a removal that failed left
    them with no record naming them. The record is now destroyed only
    once _complete_deletion succeeded.
    """

    def setUp(self):
        super(PartialDeletionsCompletionTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.context = context.get_admin_context()
        self.instance = fake_instance.fake_instance_obj(
            self.context, uuid=uuids.instance, vm_state=vm_states.DELETED,
            task_state=None, host=self.compute.host)
        self.calls = mock.Mock()
        for name, patcher in (
                ('complete', mock.patch.object(self.compute,
                                               '_complete_deletion')),
                ('destroy', mock.patch.object(self.instance, 'destroy')),
                ('bdms', mock.patch.object(
                    objects.BlockDeviceMappingList, 'get_by_instance_uuid')),
                ('usage', mock.patch.object(
                    self.compute, '_notify_about_instance_usage')),
                ('action', mock.patch.object(
                    manager.compute_utils, 'notify_about_instance_action'))):
            self.calls.attach_mock(patcher.start(), name)
            self.addCleanup(patcher.stop)

    def test_record_destroyed_after_the_allocations(self):
        self.compute._complete_partial_deletion(self.context, self.instance)

        names = [call[0] for call in self.calls.mock_calls]
        self.assertEqual(['complete', 'destroy', 'bdms', 'usage', 'action'],
                         names)
        self.calls.complete.assert_called_once_with(self.context,
                                                    self.instance)
        self.calls.usage.assert_called_once_with(
            self.context, self.instance, 'delete.end')

    def test_record_kept_when_the_allocations_are_not_removed(self):
        self.calls.complete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=uuids.instance, error='placement down')

        self.assertRaises(exception.AllocationDeleteFailed,
                          self.compute._complete_partial_deletion,
                          self.context, self.instance)

        self.calls.destroy.assert_not_called()
        self.calls.usage.assert_not_called()
        self.calls.action.assert_not_called()


class PartialDeletionsPeriodicTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._complete_partial_deletions

    Bug 1848343: only init_host completed the delete of an instance left
    DELETED (a reclaim that failed with placement down), so it stayed
    listed with its allocations until the compute restarted. A periodic
    task now completes those of this host, each read again under its lock
    and completed only if it is still DELETED, on this host, with no task.
    """

    def setUp(self):
        super(PartialDeletionsPeriodicTestCase, self).setUp()
        self.compute = manager.ComputeManager()
        self.compute.host = 'this-host'
        self.context = context.get_admin_context()
        self.listed = []
        self.current = {}
        patcher = mock.patch.object(objects.InstanceList, 'get_by_filters',
                                    side_effect=lambda *a, **k: self.listed)
        self.mock_list = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(objects.Instance, 'get_by_uuid',
                                    side_effect=self._get_by_uuid)
        self.mock_get = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(self.compute,
                                    '_complete_partial_deletion')
        self.mock_complete = patcher.start()
        self.addCleanup(patcher.stop)

    def _get_by_uuid(self, ctxt, uuid, expected_attrs=None):
        if uuid not in self.current:
            raise exception.InstanceNotFound(instance_id=uuid)
        return self.current[uuid]

    def _instance(self, uuid, **updates):
        """An instance listed DELETED, and as it is read again."""
        fields = dict(uuid=uuid, vm_state=vm_states.DELETED,
                      task_state=None, host=self.compute.host)
        self.listed.append(fake_instance.fake_instance_obj(
            self.context, **fields))
        fields.update(updates)
        instance = fake_instance.fake_instance_obj(self.context, **fields)
        self.current[uuid] = instance
        return instance

    def test_periodic_task_registered(self):
        method = manager.ComputeManager._complete_partial_deletions
        self.assertTrue(method._periodic_task)
        self.assertEqual(nova.conf.CONF.instance_delete_interval,
                         method._periodic_spacing)
        self.assertIn('_complete_partial_deletions',
                      [name for name, _ in self.compute._periodic_tasks])

    def test_completes_the_instances_still_deleted(self):
        first = self._instance(uuids.first)
        second = self._instance(uuids.second)

        self.compute._complete_partial_deletions(self.context)

        self.mock_list.assert_called_once_with(
            self.context, {'vm_state': vm_states.DELETED,
                           'task_state': None, 'host': 'this-host'},
            expected_attrs=[], use_slave=True)
        self.mock_get.assert_has_calls([
            mock.call(self.context, uuids.first,
                      expected_attrs=['system_metadata']),
            mock.call(self.context, uuids.second,
                      expected_attrs=['system_metadata'])])
        self.assertEqual([mock.call(self.context, first),
                          mock.call(self.context, second)],
                         self.mock_complete.call_args_list)

    def test_nothing_left_deleted(self):
        self.compute._complete_partial_deletions(self.context)

        self.mock_list.assert_called_once()
        self.mock_get.assert_not_called()
        self.mock_complete.assert_not_called()

    @mock.patch.object(manager, 'LOG')
    def test_skips_the_instances_changed_meanwhile(self, mock_log):
        self._instance(uuids.gone)
        del self.current[uuids.gone]
        self._instance(uuids.restored, vm_state=vm_states.ACTIVE)
        self._instance(uuids.deleting, task_state='deleting')
        self._instance(uuids.moved, host='other-host')
        kept = self._instance(uuids.kept)

        self.compute._complete_partial_deletions(self.context)

        self.assertEqual(5, self.mock_get.call_count)
        self.mock_complete.assert_called_once_with(self.context, kept)
        # Deleted meanwhile is not a failure.
        mock_log.exception.assert_not_called()

    def test_a_failure_does_not_stop_the_others(self):
        self._instance(uuids.first)
        second = self._instance(uuids.second)
        self.mock_complete.side_effect = [
            exception.AllocationDeleteFailed(consumer_uuid=uuids.first,
                                             error='placement down'),
            None]

        self.compute._complete_partial_deletions(self.context)

        self.assertEqual(2, self.mock_complete.call_count)
        self.mock_complete.assert_called_with(self.context, second)

    def test_listing_failure_is_not_raised(self):
        self.mock_list.side_effect = exception.NovaException('db down')

        self.compute._complete_partial_deletions(self.context)

        self.mock_get.assert_not_called()
        self.mock_complete.assert_not_called()

    def test_read_and_completed_under_the_instance_lock(self):
        events = []

        def fake_synchronized(name):
            def decorator(function):
                def locked(*args, **kwargs):
                    events.append(('lock', name))
                    try:
                        return function(*args, **kwargs)
                    finally:
                        events.append(('unlock', name))
                return locked
            return decorator

        self._instance(uuids.first)
        self.mock_get.side_effect = lambda ctxt, uuid, **kw: (
            events.append(('read', uuid)) or self._get_by_uuid(ctxt, uuid))
        self.mock_complete.side_effect = lambda ctxt, instance: (
            events.append(('complete', instance.uuid)))

        with mock.patch.object(manager.utils, 'synchronized',
                               side_effect=fake_synchronized):
            self.compute._complete_partial_deletions(self.context)

        self.assertEqual([('lock', uuids.first), ('read', uuids.first),
                          ('complete', uuids.first),
                          ('unlock', uuids.first)], events)
