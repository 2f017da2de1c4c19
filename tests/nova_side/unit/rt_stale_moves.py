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

from keystoneauth1 import exceptions as ks_exc
from oslo_utils.fixture import uuidsentinel as uuids
from oslo_utils import timeutils

from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import exception as exc
from nova import objects
from nova.scheduler.client import report


class TestStaleMoveAllocations(BaseTestCase):  # noqa: F821
    """Tests for ResourceTracker._remove_deleted_instances_allocations
    correcting the allocations of a move that is over.
    """

    ALLOC = {'resources': {'VCPU': 1, 'MEMORY_MB': 512}}

    def setUp(self):
        super(TestStaleMoveAllocations, self).setUp()
        self._setup_rt()
        self.cn = _COMPUTE_NODE_FIXTURES[0].obj_clone()  # noqa: F821
        host, node = self.cn.host, self.cn.hypervisor_hostname
        self.rt.compute_nodes[node] = self.cn
        self.rc = self.rt.reportclient
        self.ctx = mock.MagicMock()
        self.instance = objects.Instance(
            uuid=uuids.instance, host=host, node=node,
            vm_state=vm_states.ACTIVE, task_state=None, deleted=False,
            hidden=False)
        self.migration = objects.Migration(
            uuid=uuids.migration, instance_uuid=uuids.instance,
            status='error', source_compute=host,
            source_node=node, dest_compute='dest-host',
            dest_node='dest-node')
        self.driver_mock.instance_exists.return_value = True
        # The instance consumer holds the destination's claim.
        self.rc.get_allocations_for_consumer.return_value = {
            uuids.dest_node: self.ALLOC}
        p = mock.patch('nova.objects.Instance.get_by_uuid',
                       return_value=self.instance)
        self.get_instance = p.start()
        self.addCleanup(p.stop)

    def _held(self, *consumers):
        self.rc.get_allocations_for_resource_provider.return_value = (
            report.ProviderAllocInfo(
                allocations={c: self.ALLOC for c in consumers}))

    def _run(self, migrations=None, instance_by_uuid=None):
        self.rt._remove_deleted_instances_allocations(
            self.ctx, self.cn,
            [self.migration] if migrations is None else migrations,
            instance_by_uuid or {})

    @mock.patch.object(compute_utils, 'delete_allocations_if_deleted')
    def test_error_migration_moved_to_instance_running_here(
            self, if_deleted):
        self._held(uuids.migration)
        self._run()
        self.rc.move_allocations.assert_called_once_with(
            self.ctx, uuids.migration, uuids.instance)
        if_deleted.assert_called_once_with(
            self.ctx, self.rc, uuids.instance,
            migration_uuid=uuids.migration)
        self.driver_mock.instance_exists.assert_called_once_with(
            self.instance)
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()

    NEW = {'resources': {'VCPU': 2, 'MEMORY_MB': 1024}}

    def _same_host(self, instance_holds, flavor_uses):
        # A resize on this host: the instance holds this node already;
        # the migration holds the old flavor (ALLOC).
        self.instance.flavor = objects.Flavor(vcpus=1, memory_mb=512)
        self.rc.get_allocations_for_consumer.return_value = {
            self.cn.uuid: dict(instance_holds, generation=3)}
        self._held(uuids.migration, uuids.instance)
        self.rt.tracked_instances = set([uuids.instance])
        with mock.patch('nova.scheduler.utils.resources_from_flavor',
                        return_value=dict(flavor_uses['resources'],
                                          DISK_GB=0)) as used:
            self._run()
        used.assert_called_once_with(self.instance, self.instance.flavor)
        self.rc.get_allocations_for_consumer.assert_called_once_with(
            self.ctx, uuids.instance)

    def test_same_host_resize_keeps_the_instance_allocations(self):
        # The resize finished: the guest uses the new flavor, which the
        # instance holds; the migration's allocations here go.
        self._same_host(self.NEW, self.NEW)
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.ctx, uuids.migration,
                                    self.cn.uuid)
        self.rc.move_allocations.assert_not_called()

    @mock.patch.object(compute_utils, 'delete_allocations_if_deleted')
    def test_same_host_resize_not_finished_moved_to_instance(
            self, if_deleted):
        # prep_resize failed: the guest uses the old flavor, which the
        # migration holds; the instance holds the new flavor's claim.
        self._same_host(self.NEW, self.ALLOC)
        self.rc.move_allocations.assert_called_once_with(
            self.ctx, uuids.migration, uuids.instance)
        if_deleted.assert_called_once_with(
            self.ctx, self.rc, uuids.instance,
            migration_uuid=uuids.migration)
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()

    def test_same_host_same_amounts_keeps_the_instance_allocations(self):
        # Both hold what the guest uses (a migration to the same host):
        # the migration's go.
        self._same_host(self.ALLOC, self.ALLOC)
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.ctx, uuids.migration,
                                    self.cn.uuid)
        self.rc.move_allocations.assert_not_called()

    def test_unreadable_instance_allocations_decide_nothing(self):
        self.rc.get_allocations_for_consumer.return_value = None
        self._held(uuids.migration)
        self._run()
        self.rc.move_allocations.assert_not_called()
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()

    def test_error_migration_of_instance_elsewhere_leaves_this_node(self):
        self.instance.host = 'dest-host'
        self.instance.node = 'dest-node'
        self.driver_mock.instance_exists.return_value = False
        self._held(uuids.migration)
        self._run()
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.ctx, uuids.migration,
                                    self.cn.uuid)
        self.rc.move_allocations.assert_not_called()

    @mock.patch('nova.compute.resource_tracker.LOG.warning')
    def test_no_evidence_left_with_a_warning(self, warn):
        # The instance is recorded here but the driver has no guest.
        self.driver_mock.instance_exists.return_value = False
        self._held(uuids.migration)
        self._run()
        self.rc.move_allocations.assert_not_called()
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()
        self.assertIn('its allocations are left as they are',
                      warn.call_args[0][0])

    def test_error_migration_of_deleted_instance_removed(self):
        self.instance.deleted = True
        self._held(uuids.migration)
        self._run()
        self.rc.delete_allocation_for_instance.assert_called_once_with(
            self.ctx, uuids.migration, consumer_type='migration',
            force=False)
        self.rc.move_allocations.assert_not_called()

    def test_instance_in_motion_left_alone(self):
        for field, value in (('task_state', task_states.MIGRATING),
                             ('vm_state', vm_states.RESIZED),
                             ('hidden', True)):
            instance = self.instance.obj_clone()
            setattr(instance, field, value)
            self.get_instance.return_value = instance
            self._held(uuids.migration)
            self._run()
        self.rc.move_allocations.assert_not_called()
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()
        self.rc.delete_allocation_for_instance.assert_not_called()

    def test_other_move_in_progress_left_alone(self):
        moving = objects.Migration(
            uuid=uuids.other, instance_uuid=uuids.instance,
            status='pre-migrating')
        self._held(uuids.migration)
        self._run(migrations=[self.migration, moving])
        self.rc.move_allocations.assert_not_called()

    def test_migration_in_progress_left_alone(self):
        self.migration.status = 'post-migrating'
        self._held(uuids.migration)
        self._run()
        self.get_instance.assert_not_called()
        self.rc.move_allocations.assert_not_called()

    def test_move_refused_is_left_for_the_next_run(self):
        self.rc.move_allocations.side_effect = exc.AllocationMoveFailed(
            source_consumer=uuids.migration, target_consumer=uuids.instance,
            error='consumer generation conflict')
        self._held(uuids.migration)
        self._run()
        self.rc.move_allocations.assert_called_once_with(
            self.ctx, uuids.migration, uuids.instance)

    @mock.patch('nova.objects.Migration.get_by_uuid')
    def test_ended_migration_not_loaded_is_looked_up(self, get_migration):
        # A cancelled live migration: the periodic loads only the
        # migrations in progress and in error.
        self.migration.status = 'cancelled'
        get_migration.return_value = self.migration
        self.get_instance.side_effect = [
            exc.InstanceNotFound(instance_id=uuids.migration),
            self.instance]
        self._held(uuids.migration)
        self._run(migrations=[])
        get_migration.assert_called_once_with(self.ctx, uuids.migration)
        self.rc.move_allocations.assert_called_once_with(
            self.ctx, uuids.migration, uuids.instance)

    @mock.patch('nova.objects.Migration.get_by_uuid')
    def test_unknown_consumer_left_alone(self, get_migration):
        get_migration.side_effect = exc.MigrationNotFound(
            migration_id=uuids.unknown)
        self.get_instance.side_effect = exc.InstanceNotFound(
            instance_id=uuids.unknown)
        self._held(uuids.unknown)
        self._run(migrations=[])
        self.rc.move_allocations.assert_not_called()
        self.rc.delete_allocation_for_instance.assert_not_called()

    def test_instance_elsewhere_without_guest_leaves_this_node(self):
        self.instance.host = 'dest-host'
        self.instance.node = 'dest-node'
        self.driver_mock.instance_exists.return_value = False
        self._held(uuids.instance)
        self._run(migrations=[])
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.ctx, uuids.instance,
                                    self.cn.uuid)

    @mock.patch('nova.compute.resource_tracker.LOG.warning')
    def test_instance_elsewhere_with_guest_here_warned(self, warn):
        self.instance.host = 'dest-host'
        self._held(uuids.instance)
        self._run(migrations=[])
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()
        self.assertIn('has been moved to another host', warn.call_args[0][0])

    def _finish_failed(self, actions):
        # The move reached its destination, where the instance is; the
        # source keeps its powered-off guest.
        self.instance.host = 'dest-host'
        self.instance.node = 'dest-node'
        self.migration.migration_type = 'resize'
        self.migration.created_at = datetime.datetime(2026, 12, 7, 10, 0, 1)
        self._held(uuids.migration)
        by_id = {}
        listed = []
        for i, (name, start, finish) in enumerate(actions):
            action = objects.InstanceAction(
                id=i, action=name, instance_uuid=uuids.instance,
                start_time=datetime.datetime(2026, 12, 7, 10, 0, start))
            listed.append(action)
            by_id[i] = [objects.InstanceActionEvent(
                event='compute_finish_resize', result=finish)]
        p = mock.patch('nova.objects.InstanceActionList.get_by_instance_uuid',
                       return_value=listed)
        p.start()
        self.addCleanup(p.stop)
        p = mock.patch('nova.objects.InstanceActionEventList.get_by_action',
                       side_effect=lambda ctx, action_id: by_id[action_id])
        p.start()
        self.addCleanup(p.stop)
        self._run()

    def test_finish_failed_on_destination_leaves_this_node(self):
        self._finish_failed([('resize', 0, 'Error')])
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.ctx, uuids.migration,
                                    self.cn.uuid)
        self.rc.move_allocations.assert_not_called()

    @mock.patch('nova.compute.resource_tracker.LOG.warning')
    def test_finish_succeeded_left_with_a_warning(self, warn):
        # A revert that failed on the destination after the move had
        # finished: the source keeps the disk the revert would use.
        self._finish_failed([('revertResize', 30, None),
                             ('resize', 0, 'Success')])
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()
        self.assertIn('its allocations are left as they are',
                      warn.call_args[0][0])

    def test_action_started_after_the_migration_not_its_own(self):
        self._finish_failed([('migrate', 30, 'Error')])
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()

    def test_migration_in_another_state_not_considered(self):
        self.migration.status = 'failed'
        self._finish_failed([('resize', 0, 'Error')])
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()

    def test_instance_loaded_before_the_allocations_not_corrected(self):
        # The periodic loaded it before it read the allocations: a move
        # may have claimed this node since. It is looked at next time.
        self.instance.host = 'dest-host'
        self.driver_mock.instance_exists.return_value = False
        self._held(uuids.instance)
        self._run(migrations=[],
                  instance_by_uuid={uuids.instance: self.instance})
        self.get_instance.assert_not_called()
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()

    @mock.patch('nova.compute.resource_tracker.LOG.exception')
    def test_placement_failure_does_not_stop_the_periodic(self, logged):
        # The correction of the first consumer fails on placement; the
        # second is still looked at, and nothing is raised.
        self.instance.host = 'dest-host'
        self.instance.node = 'dest-node'
        self.driver_mock.instance_exists.return_value = False
        remove = self.rc.remove_provider_tree_from_instance_allocation
        remove.side_effect = [ks_exc.ConnectFailure('placement is down'),
                              True]
        other = objects.Migration(
            uuid=uuids.other, instance_uuid=uuids.instance,
            status='error')
        self._held(uuids.migration, uuids.other)
        self._run(migrations=[self.migration, other])
        self.assertEqual(
            [mock.call(self.ctx, uuids.migration, self.cn.uuid),
             mock.call(self.ctx, uuids.other, self.cn.uuid)],
            remove.call_args_list)
        logged.assert_called_once()

    @mock.patch('nova.compute.resource_tracker.LOG.exception')
    def test_database_failure_decides_nothing(self, logged):
        # Reading the migration's instance fails: nothing is decided, and
        # the periodic goes on.
        self.get_instance.side_effect = Exception('database unreachable')
        self._held(uuids.migration)
        self._run()
        self.rc.move_allocations.assert_not_called()
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()
        logged.assert_called_once()

    @mock.patch('nova.compute.resource_tracker.LOG.exception')
    @mock.patch('nova.objects.Migration.get_by_uuid')
    def test_migration_lookup_failure_decides_nothing(self, get_migration,
                                                      logged):
        get_migration.side_effect = Exception('database unreachable')
        self.get_instance.side_effect = exc.InstanceNotFound(
            instance_id=uuids.migration)
        self._held(uuids.migration)
        self._run(migrations=[])
        self.rc.move_allocations.assert_not_called()
        self.rc.delete_allocation_for_instance.assert_not_called()
        logged.assert_called_once()

    def test_nothing_wrong_costs_nothing(self):
        # A tracked instance and a migration in progress: no lookup, no
        # driver call, no placement request but nova's one read.
        self.rt.tracked_instances = set([uuids.instance])
        self.migration.status = 'finished'
        self._held(uuids.instance, uuids.migration)
        self._run()
        self.get_instance.assert_not_called()
        self.driver_mock.instance_exists.assert_not_called()
        self.assertEqual(
            [mock.call.get_allocations_for_resource_provider(
                self.ctx, self.cn.uuid)], self.rc.mock_calls)


class TestAbandonedMoveAllocations(BaseTestCase):  # noqa: F821
    """Tests for ResourceTracker._abandoned_move: a migration nova records
    in progress whose move nothing will end.
    """

    ALLOC = {'resources': {'VCPU': 1, 'MEMORY_MB': 512}}

    def setUp(self):
        super(TestAbandonedMoveAllocations, self).setUp()
        self._setup_rt()
        self.cn = _COMPUTE_NODE_FIXTURES[0].obj_clone()  # noqa: F821
        host, node = self.cn.host, self.cn.hypervisor_hostname
        self.rt.compute_nodes[node] = self.cn
        self.rc = self.rt.reportclient
        self.ctx = mock.MagicMock()
        long_ago = timeutils.utcnow() - datetime.timedelta(hours=1)
        self.instance = objects.Instance(
            uuid=uuids.instance, host=host, node=node,
            vm_state=vm_states.ACTIVE, task_state=None, deleted=False,
            hidden=False, updated_at=long_ago)
        self.migration = objects.Migration(
            uuid=uuids.migration, instance_uuid=uuids.instance,
            status='pre-migrating', source_compute=host, source_node=node,
            created_at=long_ago, updated_at=None)
        self.driver_mock.instance_exists.return_value = True
        # The conductor's swap: the instance holds the destination's claim.
        self.rc.get_allocations_for_consumer.return_value = {
            uuids.dest_node: self.ALLOC}
        self.rc.get_allocations_for_resource_provider.return_value = (
            report.ProviderAllocInfo(
                allocations={uuids.migration: self.ALLOC}))
        p = mock.patch('nova.objects.Instance.get_by_uuid',
                       return_value=self.instance)
        self.get_instance = p.start()
        self.addCleanup(p.stop)
        p = mock.patch('nova.objects.Migration.save')
        self.save = p.start()
        self.addCleanup(p.stop)

    def _run(self):
        self.rt._remove_deleted_instances_allocations(
            self.ctx, self.cn, [self.migration], {})

    def _assert_left(self):
        self.save.assert_not_called()
        self.assertEqual('pre-migrating', self.migration.status)
        self.rc.move_allocations.assert_not_called()
        self.rc.remove_provider_tree_from_instance_allocation.\
            assert_not_called()

    @mock.patch.object(compute_utils, 'delete_allocations_if_deleted')
    def test_abandoned_move_ended_and_given_back(self, if_deleted):
        self._run()
        self.assertEqual('error', self.migration.status)
        self.save.assert_called_once_with()
        self.rc.move_allocations.assert_called_once_with(
            self.ctx, uuids.migration, uuids.instance)

    def test_recently_changed_migration_costs_nothing(self):
        self.migration.updated_at = timeutils.utcnow()
        self._run()
        self.get_instance.assert_not_called()
        self._assert_left()

    def test_migration_without_timestamps_left_alone(self):
        self.migration = objects.Migration(
            uuid=uuids.migration, instance_uuid=uuids.instance,
            status='pre-migrating')
        self._run()
        self.get_instance.assert_not_called()
        self.rc.move_allocations.assert_not_called()

    def test_recently_changed_instance_left_alone(self):
        self.instance.updated_at = timeutils.utcnow()
        self._run()
        self._assert_left()

    def test_instance_in_motion_never_abandoned(self):
        for field, value in (('task_state', task_states.RESIZE_PREP),
                             ('vm_state', vm_states.RESIZED),
                             ('hidden', True)):
            instance = self.instance.obj_clone()
            setattr(instance, field, value)
            self.get_instance.return_value = instance
            self._run()
        self._assert_left()

    def test_deleted_instance_left_to_its_delete(self):
        self.get_instance.side_effect = exc.InstanceNotFound(
            instance_id=uuids.instance)
        self._run()
        self._assert_left()

    @mock.patch('nova.compute.resource_tracker.LOG.exception')
    def test_failed_write_decides_nothing(self, logged):
        self.save.side_effect = Exception('the cell database is gone')
        self._run()
        self.assertTrue(logged.called)
        self.assertEqual('pre-migrating', self.migration.status)
        self.rc.move_allocations.assert_not_called()


class TestUnhostedInstanceAllocations(BaseTestCase):  # noqa: F821
    """Tests for ResourceTracker._remove_deleted_instances_allocations
    correcting the claim of a server with no host to run on: a build that
    failed, a shelved offloaded server.
    """

    ALLOC = {'resources': {'VCPU': 1, 'MEMORY_MB': 512}}

    def setUp(self):
        super(TestUnhostedInstanceAllocations, self).setUp()
        self._setup_rt()
        self.cn = _COMPUTE_NODE_FIXTURES[0].obj_clone()  # noqa: F821
        self.rt.compute_nodes[self.cn.hypervisor_hostname] = self.cn
        self.rc = self.rt.reportclient
        self.ctx = mock.MagicMock()
        self.instance = objects.Instance(
            uuid=uuids.instance, host=None, node=None,
            vm_state=vm_states.ERROR, task_state=None, deleted=False,
            hidden=False)
        self.driver_mock.instance_exists.return_value = False
        self.rc.get_allocations_for_resource_provider.return_value = (
            report.ProviderAllocInfo(
                allocations={uuids.instance: self.ALLOC}))
        self.rc.get_providers_in_tree.return_value = [
            {'uuid': self.cn.uuid}, {'uuid': uuids.child}]
        self.calls = []
        self.held = {
            'allocations': {
                self.cn.uuid: dict(self.ALLOC, generation=4),
                uuids.child: {'resources': {'VGPU': 1}, 'generation': 1},
                uuids.shared: {'resources': {'DISK_GB': 1},
                               'generation': 2}},
            'consumer_generation': 3,
            'project_id': uuids.project, 'user_id': uuids.user}

        def allocs(ctx, consumer):
            self.calls.append('allocations')
            return self.held

        def instance(*args, **kwargs):
            self.calls.append('instance')
            return self.instance

        self.rc.get_allocs_for_consumer.side_effect = allocs
        p = mock.patch('nova.objects.Instance.get_by_uuid',
                       side_effect=instance)
        self.get_instance = p.start()
        self.addCleanup(p.stop)

    def _run(self, migrations=(), instance_by_uuid=None):
        self.rt._remove_deleted_instances_allocations(
            self.ctx, self.cn, list(migrations), instance_by_uuid or {})

    def _assert_removed(self):
        self.rc.put_allocations.assert_called_once_with(
            self.ctx, uuids.instance, {
                'allocations': {uuids.shared: {'resources': {'DISK_GB': 1}}},
                'consumer_generation': 3,
                'project_id': uuids.project, 'user_id': uuids.user})

    def test_failed_build_leaves_this_node(self):
        self._run()
        self._assert_removed()
        # The instance is read again after its allocations and their
        # generation: a build or unshelve that claimed before shows in it.
        self.assertEqual(['instance', 'allocations', 'instance'],
                         self.calls)
        self.driver_mock.instance_exists.assert_called_once_with(
            self.instance)

    def test_shelved_offloaded_still_on_this_host_leaves_this_node(self):
        # An offload that failed after the guest was destroyed: the
        # instance is loaded by the periodic with its host still set.
        self.instance.vm_state = vm_states.SHELVED_OFFLOADED
        self.instance.host = self.cn.host
        self.instance.node = self.cn.hypervisor_hostname
        self._run(instance_by_uuid={uuids.instance: self.instance})
        self._assert_removed()
        self.assertEqual(['allocations', 'instance'], self.calls)

    def test_shelved_offloaded_without_host_leaves_this_node(self):
        self.instance.vm_state = vm_states.SHELVED_OFFLOADED
        self._run()
        self._assert_removed()

    def test_claim_in_progress_left_alone(self):
        # Read again, the instance is being built or unshelved: its claim
        # is the scheduler's.
        for vm_state, task_state in (
                (vm_states.ERROR, task_states.REBUILDING),
                (vm_states.SHELVED_OFFLOADED, task_states.UNSHELVING),
                (vm_states.SHELVED_OFFLOADED, task_states.SPAWNING)):
            again = self.instance.obj_clone()
            again.vm_state = vm_state
            again.task_state = task_state
            self.get_instance.side_effect = [self.instance, again]
            self._run()
        self.rc.put_allocations.assert_not_called()

    def test_moved_meanwhile_left_alone(self):
        again = self.instance.obj_clone()
        again.host = 'other-host'
        again.vm_state = vm_states.ACTIVE
        self.get_instance.side_effect = [self.instance, again]
        self._run()
        self.rc.put_allocations.assert_not_called()

    def test_guest_here_left_alone(self):
        self.driver_mock.instance_exists.return_value = True
        self._run()
        self.rc.put_allocations.assert_not_called()

    def test_building_or_hosted_instance_costs_nothing(self):
        # A build still scheduled here, a server in ERROR on its host:
        # nova's handling, with no extra request.
        for host, vm_state in ((None, vm_states.BUILDING),
                               (self.cn.host, vm_states.ERROR)):
            self.instance.host = host
            self.instance.node = host and self.cn.hypervisor_hostname
            self.instance.vm_state = vm_state
            self._run()
        self.rc.get_allocs_for_consumer.assert_not_called()
        self.rc.put_allocations.assert_not_called()
        self.driver_mock.instance_exists.assert_not_called()

    def test_partly_loaded_instance_decides_nothing(self):
        self.get_instance.side_effect = [objects.Instance(
            uuid=uuids.instance, deleted=False, host=None)]
        self._run()
        self.rc.get_allocs_for_consumer.assert_not_called()
        self.rc.put_allocations.assert_not_called()

    def test_refused_write_left_for_the_next_run(self):
        self.rc.put_allocations.side_effect = exc.AllocationUpdateFailed(
            consumer_uuid=uuids.instance,
            error='consumer generation conflict')
        self._run()
        self._assert_removed()

    @mock.patch('nova.compute.resource_tracker.LOG.exception')
    def test_placement_failure_does_not_stop_the_periodic(self, logged):
        self.rc.get_allocs_for_consumer.side_effect = (
            ks_exc.ConnectFailure('placement is down'))
        self._run()
        self.rc.put_allocations.assert_not_called()
        logged.assert_called_once()
