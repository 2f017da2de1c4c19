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

from nova import exception
from nova import objects
from oslo_config import fixture as config_fixture
import testtools

from nova_fixes import fixture
from nova_fixes.nova.compute import manager


class RevertAllocationTestCase(testtools.TestCase):

    def setUp(self):
        super(RevertAllocationTestCase, self).setUp()
        self.useFixture(fixture.NovaFixes())
        self.compute = mock.Mock()
        self.context = mock.sentinel.context
        self.instance = mock.Mock(uuid='instance-uuid')
        self.migration = mock.Mock(uuid='migration-uuid', source_node='n1')
        self.reportclient = self.compute.reportclient
        self.reportclient.get_allocations_for_consumer.return_value = {
            'rp1': {'resources': {'VCPU': 1}}}
        patcher = mock.patch('nova.compute.utils.'
                             'delete_allocations_if_deleted',
                             return_value=False)
        self.check = patcher.start()
        self.addCleanup(patcher.stop)

    def _revert(self):
        return manager._revert_allocation(
            self.compute, self.context, self.instance, self.migration)

    def test_requires_the_instance_consumer(self):
        self.assertEqual({'rp1': {'resources': {'VCPU': 1}}},
                         self._revert())
        self.reportclient.move_allocations.assert_called_once_with(
            self.context, 'migration-uuid', 'instance-uuid',
            target_consumer_generation_required=True)
        self.check.assert_called_once_with(
            self.context, self.reportclient, 'instance-uuid',
            'migration-uuid')

    def test_deleted_after_the_move(self):
        # A claim that landed after the delete re-created the instance
        # consumer: the move succeeds, the check after it removes it.
        self.check.return_value = True
        self.assertFalse(self._revert())
        self.reportclient.move_allocations.assert_called_once()
        self.check.assert_called_once_with(
            self.context, self.reportclient, 'instance-uuid',
            'migration-uuid')

    def test_nothing_held_by_the_migration(self):
        self.reportclient.get_allocations_for_consumer.return_value = {}
        self.assertFalse(self._revert())
        self.reportclient.move_allocations.assert_not_called()
        self.check.assert_called_once_with(
            self.context, self.reportclient, 'instance-uuid')

    @mock.patch('nova.compute.utils.is_instance_deleted', create=True,
                return_value=True)
    @mock.patch.object(manager, 'LOG')
    def test_deleted_server(self, log, deleted):
        self.reportclient.move_allocations.side_effect = (
            exception.AllocationMoveTargetNotFound(
                source_consumer='migration-uuid',
                target_consumer='instance-uuid'))
        self.assertFalse(self._revert())
        deleted.assert_called_once_with(self.context, 'instance-uuid')
        log.info.assert_called()
        log.error.assert_not_called()

    @mock.patch('nova.compute.utils.is_instance_deleted', create=True,
                return_value=False)
    @mock.patch.object(manager, 'LOG')
    def test_consumer_gone_for_a_live_server_is_reported(self, log, deleted):
        self.reportclient.move_allocations.side_effect = (
            exception.AllocationMoveTargetNotFound(
                source_consumer='migration-uuid',
                target_consumer='instance-uuid'))
        self.assertFalse(self._revert())
        self.assertIn('heal_allocations', log.error.call_args[0][0])

    def test_move_failure_propagates(self):
        self.reportclient.move_allocations.side_effect = (
            exception.AllocationMoveFailed(source_consumer='m',
                                           target_consumer='i', error='x'))
        self.assertRaises(exception.AllocationMoveFailed, self._revert)


class DeleteAllocationAfterMoveTestCase(testtools.TestCase):

    def setUp(self):
        super(DeleteAllocationAfterMoveTestCase, self).setUp()
        self.compute = mock.Mock()
        self.delete = self.compute.reportclient.delete_allocation_for_instance
        self.migration = mock.Mock(uuid='migration-uuid', status='confirmed')
        self.instance = mock.Mock(uuid='instance-uuid')

    def _delete(self):
        return manager._delete_allocation_after_move(
            self.compute, mock.sentinel.ctxt, self.instance, self.migration)

    def test_deleted(self):
        self.delete.return_value = True
        self._delete()
        self.delete.assert_called_once_with(
            mock.sentinel.ctxt, 'migration-uuid', consumer_type='migration',
            force=False)
        self.assertEqual('confirmed', self.migration.status)
        self.migration.save.assert_not_called()

    def test_nothing_held(self):
        self.delete.return_value = False
        self._delete()
        self.assertEqual('confirmed', self.migration.status)
        self.migration.save.assert_not_called()

    def test_placement_unreachable_records_error(self):
        # safe_connect returns None when placement cannot be reached.
        self.delete.return_value = None
        with mock.patch.object(manager, 'LOG') as log:
            self._delete()
        self.assertEqual('error', self.migration.status)
        self.migration.save.assert_called_once_with()
        log.error.assert_called_once()

    def test_failure_records_error_and_raises(self):
        self.delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid='migration-uuid', error='500')
        self.assertRaises(exception.AllocationDeleteFailed, self._delete)
        self.assertEqual('error', self.migration.status)
        self.migration.save.assert_called_once_with()

    def test_failing_record_is_logged(self):
        self.delete.return_value = None
        self.migration.save.side_effect = exception.DBNotAllowed(binary='x')
        with mock.patch.object(manager, 'LOG') as log:
            self._delete()
        log.exception.assert_called_once()
        # The save's error does not hide the delete's own.
        self.delete.return_value = mock.DEFAULT
        self.delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid='migration-uuid', error='500')
        self.assertRaises(exception.AllocationDeleteFailed, self._delete)


@mock.patch('nova.compute.utils.delete_allocations_of_migrations',
            create=True)
@mock.patch('nova.compute.utils.delete_allocations_or_raise', create=True)
class CompleteDeletionTestCase(testtools.TestCase):

    def setUp(self):
        super(CompleteDeletionTestCase, self).setUp()
        self.conf = self.useFixture(config_fixture.Config(manager.CONF))
        self.compute = mock.Mock()
        self.instance = mock.Mock(uuid='instance-uuid')

    def _complete(self):
        manager._complete_deletion(self.compute, mock.sentinel.ctxt,
                                   self.instance)

    def test_allocations_then_nova_original(self, instance, migrations):
        order = mock.Mock()
        order.attach_mock(instance, 'instance')
        order.attach_mock(migrations, 'migrations')
        order.attach_mock(self.compute._complete_deletion_of_instance,
                          'complete')
        self._complete()
        self.assertEqual([
            mock.call.instance(mock.sentinel.ctxt, self.compute.reportclient,
                               'instance-uuid', force=True),
            mock.call.migrations(mock.sentinel.ctxt,
                                 self.compute.reportclient, 'instance-uuid',
                                 strict=True),
            mock.call.complete(mock.sentinel.ctxt, self.instance)],
            order.mock_calls)

    def test_deferred_deletes_are_not_forced(self, instance, migrations):
        self.conf.config(reclaim_instance_interval=60)
        self._complete()
        instance.assert_called_once_with(
            mock.sentinel.ctxt, self.compute.reportclient, 'instance-uuid',
            force=False)

    def test_instance_failure_raised_before_anything(self, instance,
                                                      migrations):
        instance.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid='instance-uuid', error='unreachable')
        self.assertRaises(exception.AllocationDeleteFailed, self._complete)
        migrations.assert_not_called()
        self.compute._complete_deletion_of_instance.assert_not_called()

    def test_migration_failure_raised_before_nova_original(self, instance,
                                                            migrations):
        migrations.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid='migration-uuid', error='unreachable')
        self.assertRaises(exception.AllocationDeleteFailed, self._complete)
        self.compute._complete_deletion_of_instance.assert_not_called()


@mock.patch('nova.compute.utils.delete_allocations_if_deleted',
            create=True)
class DoRebuildInstanceWithClaimTestCase(testtools.TestCase):

    ARGS = tuple('arg%d' % i for i in range(18))

    def setUp(self):
        super(DoRebuildInstanceWithClaimTestCase, self).setUp()
        self.compute = mock.Mock()
        self.original = self.compute._rebuild_instance_with_claim
        self.instance = mock.Mock(uuid='instance-uuid')

    def _rebuild(self):
        return manager._do_rebuild_instance_with_claim(
            self.compute, mock.sentinel.ctxt, self.instance, *self.ARGS)

    def test_success_checks_nothing(self, check):
        self._rebuild()
        self.original.assert_called_once_with(
            mock.sentinel.ctxt, self.instance, *self.ARGS)
        check.assert_not_called()

    def test_deleted_instance_is_checked_and_reraised(self, check):
        for error in (exception.InstanceNotFound(instance_id='x'),
                      exception.UnexpectedDeletingTaskStateError(
                          instance_uuid='x', expected='a', actual='b')):
            check.reset_mock()
            self.original.side_effect = error
            self.assertRaises(type(error), self._rebuild)
            check.assert_called_once_with(
                mock.sentinel.ctxt, self.compute.reportclient,
                'instance-uuid')

    def test_other_failures_check_nothing(self, check):
        self.original.side_effect = exception.BuildAbortException(
            instance_uuid='x', reason='y')
        self.assertRaises(exception.BuildAbortException, self._rebuild)
        check.assert_not_called()


@mock.patch('nova.compute.utils.delete_allocations_if_deleted',
            create=True)
class UnshelveInstanceTestCase(testtools.TestCase):

    ARGS = ('image', 'filter_properties', 'node', 'request_spec',
            'accel_uuids')

    def setUp(self):
        super(UnshelveInstanceTestCase, self).setUp()
        self.compute = mock.Mock()
        self.original = self.compute._unshelve_instance_on_host
        self.instance = mock.Mock(uuid='instance-uuid')

    def _unshelve(self):
        return manager._unshelve_instance(
            self.compute, mock.sentinel.ctxt, self.instance, *self.ARGS)

    def test_success_checks_nothing(self, check):
        self._unshelve()
        self.original.assert_called_once_with(
            mock.sentinel.ctxt, self.instance, *self.ARGS)
        check.assert_not_called()

    def test_deleted_instance_is_checked_and_reraised(self, check):
        self.original.side_effect = exception.InstanceNotFound(
            instance_id='instance-uuid')
        self.assertRaises(exception.InstanceNotFound, self._unshelve)
        check.assert_called_once_with(
            mock.sentinel.ctxt, self.compute.reportclient, 'instance-uuid')

    def test_other_failures_check_nothing(self, check):
        self.original.side_effect = ValueError
        self.assertRaises(ValueError, self._unshelve)
        check.assert_not_called()


class CompletePartialDeletionTestCase(testtools.TestCase):

    def setUp(self):
        super(CompletePartialDeletionTestCase, self).setUp()
        objects.register_all()
        self.manager = mock.Mock()
        self.instance = mock.Mock(uuid='uuid')
        patcher = mock.patch('nova.objects.BlockDeviceMappingList.'
                             'get_by_instance_uuid')
        self.bdms = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch.object(manager.compute_utils,
                                    'notify_about_instance_action')
        self.notify = patcher.start()
        self.addCleanup(patcher.stop)

    def test_record_destroyed_after_the_allocations(self):
        order = mock.Mock()
        order.attach_mock(self.manager._complete_deletion, 'complete')
        order.attach_mock(self.instance.destroy, 'destroy')
        manager._complete_partial_deletion(self.manager, mock.sentinel.ctxt,
                                           self.instance)
        self.assertEqual([mock.call.complete(mock.sentinel.ctxt,
                                             self.instance),
                          mock.call.destroy()], order.mock_calls)
        self.notify.assert_called_once()

    def test_failure_keeps_the_record(self):
        self.manager._complete_deletion.side_effect = ValueError('placement')
        self.assertRaises(ValueError, manager._complete_partial_deletion,
                          self.manager, mock.sentinel.ctxt, self.instance)
        self.instance.destroy.assert_not_called()
        self.notify.assert_not_called()


@mock.patch('nova.objects.Instance.get_by_uuid')
@mock.patch('nova.objects.InstanceList.get_by_filters')
class CompletePartialDeletionsTestCase(testtools.TestCase):

    def setUp(self):
        super(CompletePartialDeletionsTestCase, self).setUp()
        self.manager = mock.Mock(host='host1')
        patcher = mock.patch.object(manager, 'LOG')
        self.log = patcher.start()
        self.addCleanup(patcher.stop)

    def _instance(self, uuid, **kwargs):
        attrs = dict(uuid=uuid, vm_state='deleted', task_state=None,
                     host='host1')
        attrs.update(kwargs)
        return mock.Mock(**attrs)

    def _run(self):
        manager._complete_partial_deletions(self.manager, mock.sentinel.ctxt)

    def test_only_what_is_still_deleted_here_is_completed(self, listed, get):
        listed.return_value = [mock.Mock(uuid=u) for u in 'abcde']
        current = {
            'a': self._instance('a'),
            'b': exception.InstanceNotFound(instance_id='b'),
            'c': self._instance('c', vm_state='active'),
            'd': self._instance('d', task_state='deleting'),
            'e': self._instance('e', host='host2'),
        }

        def read(ctxt, uuid, expected_attrs):
            if isinstance(current[uuid], Exception):
                raise current[uuid]
            return current[uuid]

        get.side_effect = read
        self._run()
        listed.assert_called_once_with(
            mock.sentinel.ctxt, {'vm_state': 'deleted', 'task_state': None,
                                 'host': 'host1'},
            expected_attrs=[], use_slave=True)
        self.assertEqual(5, get.call_count)
        self.manager._complete_partial_deletion.assert_called_once_with(
            mock.sentinel.ctxt, current['a'])

    def test_a_failure_is_logged_and_the_rest_completed(self, listed, get):
        listed.return_value = [mock.Mock(uuid='a'), mock.Mock(uuid='b')]
        get.side_effect = lambda ctxt, uuid, expected_attrs: self._instance(
            uuid)
        self.manager._complete_partial_deletion.side_effect = [
            ValueError('placement'), None]
        self._run()
        self.assertEqual(2,
                         self.manager._complete_partial_deletion.call_count)
        self.log.exception.assert_called_once()

    def test_listing_failure_is_logged(self, listed, get):
        listed.side_effect = ValueError('database')
        self._run()
        self.log.exception.assert_called_once()
        get.assert_not_called()

    def test_registered_with_nova_spacing(self, listed, get):
        task = manager.complete_partial_deletions_periodic_task()
        self.assertTrue(task._periodic_task)
        self.assertEqual(manager.CONF.instance_delete_interval,
                         task._periodic_spacing)


class RemoveAllocationsOfFinishedMovesTestCase(testtools.TestCase):
    """What a source left of finished moves when it stopped."""

    def run(self, result=None):
        # nova's objects are registered by the fixture only: the
        # drop-in's module is given mocks of the two lists it reads.
        with mock.patch.object(manager, 'objects') as objs:
            self.objects = objs
            return super(RemoveAllocationsOfFinishedMovesTestCase,
                         self).run(result)

    def setUp(self):
        super(RemoveAllocationsOfFinishedMovesTestCase, self).setUp()
        self.compute = mock.Mock(host='host1')
        self.context = mock.sentinel.context
        self.reportclient = self.compute.reportclient
        self.reportclient.get_allocations_for_resource_provider.side_effect = (
            lambda context, rp: mock.Mock(allocations=self.held[rp]))
        self.held = {'rp1': {'instance-1': {}, 'migration-1': {}},
                     'rp2': {}}

    def _remove(self, only=None):
        return manager._remove_allocations_of_finished_moves(
            self.compute, self.context, only=only)

    @property
    def nodes(self):
        return self.objects.ComputeNodeList.get_all_by_host

    @property
    def migrations(self):
        return self.objects.MigrationList.get_by_filters

    def test_finished_migrations_of_this_source_are_removed(self):
        self.nodes.return_value = [mock.Mock(uuid='rp1'),
                                   mock.Mock(uuid='rp2')]
        self.migrations.return_value = [mock.Mock(uuid='migration-1',
                                                  status='completed')]
        self._remove()
        # One query per node holding something, for its consumers only.
        self.migrations.assert_called_once_with(self.context, {
            'uuid': ['instance-1', 'migration-1'],
            'source_compute': 'host1',
            'status': ['confirmed', 'completed']})
        self.reportclient.delete_allocation_for_instance.\
            assert_called_once_with(self.context, 'migration-1',
                                    consumer_type='migration', force=True)

    def test_nothing_finished_nothing_removed(self):
        self.nodes.return_value = [mock.Mock(uuid='rp1')]
        self.migrations.return_value = []
        self._remove()
        self.reportclient.delete_allocation_for_instance.assert_not_called()

    def test_first_start_reads_nothing(self):
        self.nodes.side_effect = exception.ComputeHostNotFound(host='host1')
        self._remove()
        self.reportclient.get_allocations_for_resource_provider.\
            assert_not_called()
        self.migrations.assert_not_called()

    def test_placement_unreachable_goes_on(self):
        self.nodes.return_value = [mock.Mock(uuid='rp1'),
                                   mock.Mock(uuid='rp2')]
        self.reportclient.get_allocations_for_resource_provider.side_effect = (
            exception.ResourceProviderAllocationRetrievalFailed(
                rp_uuid='rp1', error='down'))
        # Both nodes unread: they are returned, to be read again.
        self.assertEqual({'rp1', 'rp2'}, self._remove())
        self.migrations.assert_not_called()

    def test_the_nodes_read_are_not_returned(self):
        self.nodes.return_value = [mock.Mock(uuid='rp1'),
                                   mock.Mock(uuid='rp2')]
        self.migrations.return_value = []
        read = self.reportclient.get_allocations_for_resource_provider
        original = read.side_effect

        def rp2_unreachable(context, rp):
            if rp == 'rp2':
                raise exception.ResourceProviderAllocationRetrievalFailed(
                    rp_uuid=rp, error='down')
            return original(context, rp)

        read.side_effect = rp2_unreachable
        self.assertEqual({'rp2'}, self._remove())

    def test_only_the_nodes_named(self):
        self.nodes.return_value = [mock.Mock(uuid='rp1'),
                                   mock.Mock(uuid='rp2')]
        self.migrations.return_value = []
        self.assertEqual(set(), self._remove(only={'rp2'}))
        self.reportclient.get_allocations_for_resource_provider.\
            assert_called_once_with(self.context, 'rp2')

    def test_first_start_leaves_nothing_unread(self):
        self.nodes.side_effect = exception.ComputeHostNotFound(host='host1')
        self.assertEqual(set(), self._remove())

    def test_a_failed_delete_does_not_stop_the_others(self):
        self.nodes.return_value = [mock.Mock(uuid='rp1')]
        self.migrations.return_value = [
            mock.Mock(uuid='migration-1', status='confirmed'),
            mock.Mock(uuid='migration-2', status='completed')]
        self.reportclient.delete_allocation_for_instance.side_effect = [
            exception.AllocationDeleteFailed(consumer_uuid='migration-1',
                                             error='x'), None]
        self._remove()
        self.assertEqual(
            2, self.reportclient.delete_allocation_for_instance.call_count)
        # Both left their allocations (one failed, the other's placement
        # was unreachable): each is recorded 'error', so that the delete
        # of its server removes them.
        for migration in self.migrations.return_value:
            self.assertEqual('error', migration.status)
            migration.save.assert_called_once_with()

    def test_a_removed_migration_keeps_its_status(self):
        self.nodes.return_value = [mock.Mock(uuid='rp1')]
        migration = mock.Mock(uuid='migration-1', status='confirmed')
        self.migrations.return_value = [migration]
        self.reportclient.delete_allocation_for_instance.return_value = True
        self._remove()
        self.assertEqual('confirmed', migration.status)
        migration.save.assert_not_called()


class InitHostTestCase(testtools.TestCase):

    def test_nova_first_then_the_finished_moves(self):
        compute = mock.Mock()
        manager.init_host(compute, mock.sentinel.service_ref)
        self.assertEqual([
            mock.call._init_host_as_nova_does(mock.sentinel.service_ref),
            mock.call._remove_allocations_of_finished_moves(mock.ANY)],
            compute.mock_calls)

    def test_nova_26(self):
        compute = mock.Mock()
        manager.ComputeManagerZed.init_host(compute)
        self.assertEqual([
            mock.call._init_host_as_nova_does(),
            mock.call._remove_allocations_of_finished_moves(mock.ANY)],
            compute.mock_calls)

    def test_a_failed_init_host_stops_there(self):
        compute = mock.Mock()
        compute._init_host_as_nova_does.side_effect = ValueError()
        self.assertRaises(ValueError, manager.init_host, compute, None)
        compute._remove_allocations_of_finished_moves.assert_not_called()

    def test_a_failed_clean_up_does_not_stop_the_start(self):
        compute = mock.Mock()
        compute._remove_allocations_of_finished_moves.side_effect = (
            exception.NovaException('no database'))
        manager.init_host(compute, None)
        # Every node is left to the periodic task.
        self.assertEqual(manager.EVERY_NODE, compute._finished_moves_unread)
        compute._finished_moves_unread = None
        manager.ComputeManagerZed.init_host(compute)
        self.assertEqual(manager.EVERY_NODE, compute._finished_moves_unread)
        self.assertEqual(
            2, compute._remove_allocations_of_finished_moves.call_count)

    def test_the_nodes_left_unread_are_kept(self):
        for init_host, args in ((manager.init_host, (None,)),
                                (manager.ComputeManagerZed.init_host, ())):
            compute = mock.Mock()
            compute._remove_allocations_of_finished_moves.return_value = {
                'rp1'}
            init_host(compute, *args)
            self.assertEqual({'rp1'}, compute._finished_moves_unread)


class RemoveAllocationsOfFinishedMovesLeftTestCase(testtools.TestCase):
    """The periodic task reads again what init_host could not."""

    def _run(self, unread):
        compute = mock.Mock(spec=['_remove_allocations_of_finished_moves'])
        if unread is not None:
            compute._finished_moves_unread = unread
        compute._remove_allocations_of_finished_moves.return_value = set()
        manager._remove_allocations_of_finished_moves_left(
            compute, mock.sentinel.context)
        return compute

    def test_nothing_left_costs_nothing(self):
        for unread in (None, set()):
            compute = self._run(unread)
            compute._remove_allocations_of_finished_moves.assert_not_called()

    def test_the_nodes_left_are_read_until_they_are_read(self):
        compute = self._run({'rp1'})
        compute._remove_allocations_of_finished_moves.\
            assert_called_once_with(mock.sentinel.context, only={'rp1'})
        self.assertEqual(set(), compute._finished_moves_unread)

    def test_every_node(self):
        compute = self._run(manager.EVERY_NODE)
        compute._remove_allocations_of_finished_moves.\
            assert_called_once_with(mock.sentinel.context, only=None)

    def test_a_failure_keeps_them_for_the_next_run(self):
        compute = mock.Mock(spec=['_remove_allocations_of_finished_moves'])
        compute._finished_moves_unread = {'rp1'}
        compute._remove_allocations_of_finished_moves.side_effect = (
            exception.NovaException('no database'))
        self.assertRaises(exception.NovaException,
                          manager._remove_allocations_of_finished_moves_left,
                          compute, mock.sentinel.context)
        self.assertEqual({'rp1'}, compute._finished_moves_unread)

    def test_registered_every_instance_delete_interval(self):
        task = manager.remove_allocations_of_finished_moves_periodic_task()
        self.assertTrue(task._periodic_task)
        self.assertEqual(manager.CONF.instance_delete_interval,
                         task._periodic_spacing)


class InterruptedMoveTestCase(testtools.TestCase):
    """_init_instance and _return_interrupted_move (interrupted moves)."""

    def setUp(self):
        super(InterruptedMoveTestCase, self).setUp()
        objects.register_all()

    def _compute(self):
        compute = mock.Mock(host='src')
        return compute

    def _init(self, before, after, host='src', vm_state='active'):
        compute = self._compute()
        instance = mock.Mock(task_state=before, host=host, vm_state=vm_state)
        seen = []

        def init(ctxt, inst):
            seen.append(('nova init', inst.task_state))
            inst.task_state = after

        def give_back(ctxt, inst, task_state):
            seen.append(('give back', inst.task_state))

        compute._init_instance_as_nova_does.side_effect = init
        compute._return_interrupted_move.side_effect = give_back
        manager._init_instance(compute, mock.sentinel.ctxt, instance)
        compute.seen = seen
        return compute, instance

    def test_interrupted_moves_are_given_back_before_nova_init(self):
        # Once nova's init cleared the task state another move may start:
        # the give-back runs before, while the move's task state is kept.
        for state in manager.INTERRUPTED_MOVE_STATES:
            compute, instance = self._init(state, None)
            compute._return_interrupted_move.assert_called_once_with(
                mock.sentinel.ctxt, instance, state)
            self.assertEqual([('give back', state), ('nova init', state)],
                             compute.seen)

    def test_an_instance_without_task_state(self):
        # A partly deleted instance may have no task state loaded.
        compute = self._compute()
        instance = objects.Instance(host='src', vm_state='deleted')
        manager._init_instance(compute, mock.sentinel.ctxt, instance)
        compute._init_instance_as_nova_does.assert_called_once_with(
            mock.sentinel.ctxt, instance)
        compute._return_interrupted_move.assert_not_called()

    def test_resize_migrating_in_error_is_given_back(self):
        # nova's init rolls back RESIZE_MIGRATING even in ERROR.
        compute, instance = self._init('resize_migrating', None,
                                       vm_state='error')
        compute._return_interrupted_move.assert_called_once_with(
            mock.sentinel.ctxt, instance, 'resize_migrating')

    def test_nothing_else_is_given_back(self):
        for before, host, vm_state in (
                ('resize_prep', 'src', 'active'),
                (None, 'src', 'active'),
                ('migrating', 'dest', 'active'),
                # nova's init returns before its roll-back for these.
                ('migrating', 'src', 'error'),
                ('migrating', 'src', 'deleted'),
                ('resize_migrating', 'src', 'soft-delete'),
                ('resize_migrating', 'src', 'building')):
            compute, _ = self._init(before, None, host, vm_state)
            compute._return_interrupted_move.assert_not_called()
            compute._init_instance_as_nova_does.assert_called_once_with(
                mock.sentinel.ctxt, mock.ANY)

    def _migration(self, **kwargs):
        values = dict(uuid='mig', status='migrating', source_compute='src',
                      dest_compute='dest', id=1)
        values.update(kwargs)
        return mock.Mock(**values)

    @mock.patch('nova.objects.Instance.get_by_uuid')
    @mock.patch('nova.objects.Migration.get_by_id_and_instance')
    def test_resize_given_back_then_recorded_error(self, get, get_copy):
        compute = self._compute()
        migration = get.return_value = self._migration()
        instance = mock.Mock(uuid='inst')
        copy = get_copy.return_value
        copy.system_metadata = {'old_vm_state': 'active', 'other': 'x'}
        compute._revert_allocation.side_effect = (
            lambda *a: self.assertEqual('migrating', migration.status))
        manager._return_interrupted_move(compute, mock.sentinel.ctxt,
                                         instance, 'resize_migrating')
        compute._revert_allocation.assert_called_once_with(
            mock.sentinel.ctxt, instance, migration)
        self.assertEqual('error', migration.status)
        migration.save.assert_called_once_with()
        # What prep_resize set is dropped from a copy, with the move's
        # task state required; the instance nova's init rolls back from
        # keeps it.
        get_copy.assert_called_once_with(
            mock.sentinel.ctxt, 'inst', expected_attrs=[
                'migration_context', 'flavor', 'system_metadata'])
        self.assertIsNone(copy.old_flavor)
        self.assertIsNone(copy.new_flavor)
        self.assertEqual({'other': 'x'}, copy.system_metadata)
        copy.save.assert_called_once_with(
            expected_task_state=['resize_migrating'])
        copy.drop_migration_context.assert_called_once_with()
        instance.drop_migration_context.assert_not_called()
        instance.save.assert_not_called()
        # nova's save would write back a migration context with changes.
        instance.obj_reset_changes.assert_called_once_with(
            ['migration_context'], recursive=True)

    @mock.patch('nova.objects.MigrationList.get_by_filters')
    def test_a_running_live_migration_is_left_to_nova_init(self, get_by):
        # nova's _reset_live_migration aborts a 'running' one and records
        # it 'error'; recorded here, it would not be aborted.
        compute = self._compute()
        running = self._migration(status='running')
        get_by.return_value = [running]
        manager._return_interrupted_move(compute, mock.sentinel.ctxt,
                                         mock.Mock(), 'migrating')
        compute._revert_allocation.assert_called_once_with(
            mock.sentinel.ctxt, mock.ANY, running)
        self.assertEqual('running', running.status)
        running.save.assert_not_called()

    @mock.patch('nova.objects.MigrationList.get_by_filters')
    def test_a_live_migration_not_yet_running_is_recorded_error(self,
                                                                get_by):
        for status in ('queued', 'preparing'):
            compute = self._compute()
            migration = self._migration(status=status)
            get_by.return_value = [migration]
            manager._return_interrupted_move(compute, mock.sentinel.ctxt,
                                             mock.Mock(), 'migrating')
            compute._revert_allocation.assert_called_once_with(
                mock.sentinel.ctxt, mock.ANY, migration)
            self.assertEqual('error', migration.status)
            migration.save.assert_called_once_with()

    @mock.patch('nova.objects.Migration.get_by_id_and_instance')
    def test_no_evidence_no_change(self, get):
        compute = self._compute()
        compute.driver.instance_exists.return_value = False
        migration = get.return_value = self._migration()
        instance = mock.Mock(uuid='inst')
        manager._return_interrupted_move(compute, mock.sentinel.ctxt,
                                         instance, 'resize_migrating')
        compute._revert_allocation.assert_not_called()
        migration.save.assert_not_called()
        instance.drop_migration_context.assert_not_called()

    @mock.patch('nova.objects.Migration.get_by_id_and_instance')
    def test_a_failed_revert_leaves_the_migration_in_progress(self, get):
        # A later pass finds it in progress and can try again.
        compute = self._compute()
        migration = get.return_value = self._migration()
        compute._revert_allocation.side_effect = exception.NovaException()
        manager._return_interrupted_move(compute, mock.sentinel.ctxt,
                                         mock.Mock(), 'resize_migrating')
        self.assertEqual('migrating', migration.status)
        migration.save.assert_not_called()

    @mock.patch('nova.objects.MigrationList.get_by_filters')
    def test_the_newest_live_migration_from_this_host(self, get_by_filters):
        mine = self._migration(status='running')
        get_by_filters.return_value = [self._migration(source_compute='x'),
                                       mine]
        compute = self._compute()
        self.assertIs(mine, manager._interrupted_migration(
            compute, mock.sentinel.ctxt, mock.Mock(uuid='inst'),
            'migrating'))
        filters = get_by_filters.call_args[0][1]
        self.assertEqual(['queued', 'preparing', 'running'],
                         filters['status'])
        self.assertEqual(['created_at', 'id'],
                         get_by_filters.call_args[1]['sort_keys'])

    def test_a_resize_without_migration_context(self):
        self.assertIsNone(manager._interrupted_migration(
            self._compute(), mock.sentinel.ctxt,
            mock.Mock(migration_context=None), 'resize_migrating'))

    def test_an_interrupted_finish_is_ended(self):
        compute, instance = self._init('resize_finish', 'resize_finish')
        compute._error_out_interrupted_finish.assert_called_once_with(
            mock.sentinel.ctxt, instance)
        compute._return_interrupted_move.assert_not_called()

    def test_a_finish_nova_cleared_or_on_another_host_is_left(self):
        for after, host in ((None, 'src'), ('resize_finish', 'dest')):
            compute, _ = self._init('resize_finish', after, host)
            compute._error_out_interrupted_finish.assert_not_called()

    @mock.patch('nova.objects.Migration.get_by_id_and_instance')
    def test_interrupted_finish_ends_in_error(self, get):
        compute = self._compute()
        migration = get.return_value = self._migration(
            status='post-migrating')
        compute._delete_allocation_after_move.side_effect = (
            lambda *a: self.assertEqual('error', migration.status))
        instance = mock.Mock(uuid='inst')
        manager._error_out_interrupted_finish(compute, mock.sentinel.ctxt,
                                              instance)
        migration.save.assert_called_once_with()
        compute._delete_allocation_after_move.assert_called_once_with(
            mock.sentinel.ctxt, instance, migration)
        compute._set_instance_obj_error_state.assert_called_once_with(
            instance, clean_task_state=True)

    @mock.patch('nova.objects.Migration.get_by_id_and_instance',
                side_effect=exception.NovaException('no database'))
    def test_interrupted_finish_in_error_whatever_fails(self, get):
        compute = self._compute()
        instance = mock.Mock(uuid='inst')
        manager._error_out_interrupted_finish(compute, mock.sentinel.ctxt,
                                              instance)
        compute._set_instance_obj_error_state.assert_called_once_with(
            instance, clean_task_state=True)

    def test_an_interrupted_revert_is_finished(self):
        compute, instance = self._init('resize_reverting',
                                       'resize_reverting')
        compute._finish_interrupted_revert.assert_called_once_with(
            mock.sentinel.ctxt, instance)
        compute._error_out_interrupted_finish.assert_not_called()

    @mock.patch('nova.objects.Migration.get_by_id_and_instance')
    def test_interrupted_revert_finished(self, get):
        compute = self._compute()
        compute.reportclient.get_allocations_for_consumer.return_value = {}
        migration = get.return_value = self._migration(status='reverting')
        instance = mock.Mock(uuid='inst', system_metadata={})
        manager._finish_interrupted_revert(compute, mock.sentinel.ctxt,
                                           instance)
        compute._revert_allocation.assert_not_called()
        self.assertTrue(compute.driver.finish_revert_migration.call_args[0][5])
        instance.drop_migration_context.assert_called_once_with()
        self.assertEqual('active', instance.vm_state)
        self.assertIsNone(instance.task_state)
        compute._delete_stashed_flavor_info.assert_called_once_with(instance)
        self.assertEqual('reverted', migration.status)

    @mock.patch('nova.objects.Migration.get_by_id_and_instance')
    def test_interrupted_revert_failure_is_an_error(self, get):
        compute = self._compute()
        compute.reportclient.get_allocations_for_consumer.return_value = {
            'rp': {}}
        compute.driver.finish_revert_migration.side_effect = ValueError()
        migration = get.return_value = self._migration(status='reverting')
        instance = mock.Mock(uuid='inst', system_metadata={})
        manager._finish_interrupted_revert(compute, mock.sentinel.ctxt,
                                           instance)
        compute._revert_allocation.assert_called_once_with(
            mock.sentinel.ctxt, instance, migration)
        self.assertEqual('error', migration.status)
        compute._set_instance_obj_error_state.assert_called_once_with(
            instance, clean_task_state=True)

    @mock.patch('nova.objects.Migration.get_by_id_and_instance')
    def test_interrupted_revert_on_its_destination_is_left(self, get):
        compute = self._compute()
        migration = get.return_value = self._migration(
            status='reverting', source_compute='other')
        instance = mock.Mock(uuid='inst', system_metadata={})
        manager._finish_interrupted_revert(compute, mock.sentinel.ctxt,
                                           instance)
        compute.driver.finish_revert_migration.assert_not_called()
        compute._revert_allocation.assert_not_called()
        compute._set_instance_obj_error_state.assert_not_called()
        self.assertEqual('reverting', migration.status)
