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

"""Drop-ins for nova/compute/manager.py."""

import time

from oslo_log import log as logging
from oslo_service import periodic_task
from oslo_utils import excutils

from nova.compute import power_state
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.objects import fields
from nova import utils

from nova_fixes.nova import conf as fixes_conf

CONF = nova.conf.CONF
fixes_conf.register_opts(CONF)
LOG = logging.getLogger(__name__)


def _revert_allocation(self, context, instance, migration):
    """Replaces ComputeManager._revert_allocation (bug 1848343).

    Revert an allocation that is held by migration to our instance.

    The instance gets back the allocations its migration holds on the
    source node, replacing its allocations on the destination. Used on
    every compute-side revert: prep_resize and resize_instance failures,
    finish_revert_resize, the cross-cell revert at the source,
    live_migration_abort and _rollback_live_migration.

    During a move the instance consumer holds the destination claim, so
    it exists in placement unless the server was deleted: the move
    requires its generation, and when it is gone the migration's
    allocations are removed instead of being given to a deleted server.

    The instance consumer can also exist for a deleted server: the
    scheduler's claim for the move may land after the delete and create
    it again. So, once the allocations are written, the instance is looked
    up (delete_allocations_if_deleted): if it is deleted, what is left for
    it and its migration is removed.

    :returns: the allocations moved back, keyed by provider UUID, or False
        when there was nothing to move back
    """
    orig_alloc = self.reportclient.get_allocations_for_consumer(
        context, migration.uuid)
    if not orig_alloc:
        LOG.error('Did not find resource allocations for migration '
                  '%s on source node %s. Unable to revert source node '
                  'allocations back to the instance.',
                  migration.uuid, migration.source_node, instance=instance)
        # NOTE(bug 1848343): the delete of the server removed them, and a
        # claim that landed afterwards may have created the instance
        # consumer again.
        compute_utils.delete_allocations_if_deleted(
            context, self.reportclient, instance.uuid)
        return False

    LOG.info('Swapping old allocation on %(rp_uuids)s held by migration '
             '%(mig)s for instance',
             {'rp_uuids': orig_alloc.keys(), 'mig': migration.uuid},
             instance=instance)
    try:
        self.reportclient.move_allocations(
            context, migration.uuid, instance.uuid,
            target_consumer_generation_required=True)
    except exception.AllocationMoveTargetNotFound:
        if compute_utils.is_instance_deleted(context, instance.uuid):
            LOG.info('Instance was deleted during migration %s; its '
                     'allocations were removed instead of reverted.',
                     migration.uuid, instance=instance)
        else:
            LOG.error('The instance has no allocations in placement '
                      'although it was not deleted; the allocations of '
                      'migration %s were removed. Run "nova-manage '
                      'placement heal_allocations" to restore its '
                      'allocations.', migration.uuid, instance=instance)
        return False
    # NOTE(bug 1848343): checked after the move, not before, so that a
    # delete racing it either removes what was moved or is seen here.
    if compute_utils.delete_allocations_if_deleted(
            context, self.reportclient, instance.uuid, migration.uuid):
        return False
    return orig_alloc


def _delete_allocation_after_move(self, context, instance, migration):
    """Replaces ComputeManager._delete_allocation_after_move (bug 1848343).

    Deletes resource allocations held by the migration record against
    the source compute node resource provider after a confirmed cold /
    successful live migration.

    The callers record the migration 'confirmed' or 'completed' before
    this runs, and a delete of the server skips a migration in those
    statuses (see compute_utils.migrations_of_instance). So when the
    allocations could not be deleted (placement unreachable, which the
    report client only logs, or a failure it raises) the migration is
    recorded 'error': the delete of the server then removes them.
    """
    try:
        # NOTE(danms): We're finishing on the source node, so try
        # to delete the allocation based on the migration uuid
        deleted = self.reportclient.delete_allocation_for_instance(
            context, migration.uuid, consumer_type='migration',
            force=False)
    except exception.AllocationDeleteFailed:
        LOG.error('Deleting allocation in placement for migration '
                  '%(migration_uuid)s failed. The instance '
                  '%(instance_uuid)s will be put to ERROR state '
                  'but the allocation held by the migration is '
                  'leaked.',
                  {'instance_uuid': instance.uuid,
                   'migration_uuid': migration.uuid})
        _record_allocations_left(migration)
        raise
    if deleted is None:
        # The report client could not reach placement.
        LOG.error('Unable to delete the allocations of migration %s in '
                  'placement; they are deleted with the server.',
                  migration.uuid, instance=instance)
        _record_allocations_left(migration)


def _record_allocations_left(migration):
    """Record a migration whose allocations are left 'error', so that the
    delete of its server removes them.
    """
    try:
        migration.status = 'error'
        migration.save()
    except Exception:
        LOG.exception('Unable to record migration %s as failed; its '
                      'allocations are left in placement.', migration.uuid)


def _complete_deletion(self, context, instance):
    """Replaces ComputeManager._complete_deletion (bug 1848343).

    Finish the delete of an instance, allocations of its migrations
    included, or raise while its record still names them.

    nova's original removes the allocations of the instance consumer, and
    its callers destroy the record only if it does not raise: "therefore
    allocation is successfully deleted in placement". But the report
    client only logs a placement it cannot reach, so the record was
    destroyed with the allocations left: a compute restarting during a
    placement outage completes the deletes left DELETED in init_host,
    before its resource tracker calls placement at all. The allocations
    are now deleted first, and a failure is raised (AllocationDeleteFailed)
    with the record kept: the user's delete gets an ERROR server it can
    delete again, and a delete left DELETED is completed by init_host or
    by the periodic _complete_partial_deletions once placement answers.
    nova's original then finds nothing to delete (one more request).

    A server deleted during a move (a revert not finished yet, a live
    migration about to complete) also has a migration consumer holding
    the source node, and the step that would have removed it fails on the
    deleted instance: the allocations of the migrations that may still
    hold some are removed here too, with the same check (see
    compute_utils.delete_allocations_of_migrations).
    """
    # As nova's: with deferred deletes, a conflict is not forced through.
    force = CONF.reclaim_instance_interval <= 0
    compute_utils.delete_allocations_or_raise(
        context, self.reportclient, instance.uuid, force=force)
    compute_utils.delete_allocations_of_migrations(
        context, self.reportclient, instance.uuid, strict=True)
    self._complete_deletion_of_instance(context, instance)


def _complete_partial_deletion(self, context, instance):
    """Replaces ComputeManager._complete_partial_deletion (bug 1848343).

    Complete deletion for instances in DELETED status but not marked as
    deleted in the DB

    A delete records vm_state DELETED, removes the instance's allocations
    and only then destroys the record, so that a delete that fails in
    between (placement unreachable) is completed later. nova's original
    destroyed the record first: when removing the allocations then
    failed, they were left with no record naming them. The record is now
    destroyed once the rest is done.
    """
    self._complete_deletion(context, instance)
    instance.destroy()
    bdms = objects.BlockDeviceMappingList.get_by_instance_uuid(
            context, instance.uuid)
    self._notify_about_instance_usage(context, instance, "delete.end")
    compute_utils.notify_about_instance_action(context, instance,
            self.host, action=fields.NotificationAction.DELETE,
            phase=fields.NotificationPhase.END, bdms=bdms)


def _complete_partial_deletions(self, context):
    """Added to nova.compute.manager.ComputeManager (bug 1848343).

    Complete the deletes of this host's instances left DELETED.

    A delete that fails once it recorded vm_state DELETED (the resource
    tracker's update or the delete of the allocations failed: placement
    was unreachable) leaves the record, with its allocations, for a
    retry. A user's delete gets an ERROR server back and can retry, but
    nothing retried the reclaim of a soft-deleted server (the reclaim
    only looks for SOFT_DELETED ones), nor a delete whose compute did not
    restart (init_host completes such deletes): the server stayed listed
    as DELETED, its allocations held, until an operator restarted the
    compute. This does what init_host does, every
    [DEFAULT]instance_delete_interval seconds: each instance is read again
    under its lock (a delete in progress holds it) and completed only if
    it is still DELETED, on this host, with no task.
    """
    filters = {'vm_state': vm_states.DELETED, 'task_state': None,
               'host': self.host}
    try:
        instances = objects.InstanceList.get_by_filters(
            context, filters, expected_attrs=[], use_slave=True)
    except Exception:
        LOG.exception('Unable to list the instances left DELETED on this '
                      'host; their deletes are completed at a later run.')
        return
    for listed in instances:
        try:
            utils.synchronized(listed.uuid)(_complete_if_still_deleted)(
                self, context, listed.uuid)
        except Exception:
            LOG.exception('Failed to complete a deletion; it is retried '
                          'at the next run.', instance=listed)


def _complete_if_still_deleted(manager, context, instance_uuid):
    """Complete the delete of an instance left DELETED on this host, if it
    still is: read again under its lock.
    """
    try:
        instance = objects.Instance.get_by_uuid(
            context, instance_uuid, expected_attrs=['system_metadata'])
    except exception.InstanceNotFound:
        return
    if (instance.vm_state != vm_states.DELETED or
            instance.task_state is not None or
            instance.host != manager.host):
        return
    LOG.info('Completing the delete of an instance left DELETED.',
             instance=instance)
    manager._complete_partial_deletion(context, instance)


def complete_partial_deletions_periodic_task():
    """The periodic task as registered on ComputeManager at activation."""
    return periodic_task.periodic_task(
        spacing=CONF.instance_delete_interval)(_complete_partial_deletions)


def _confirm_resize(self, context, instance, migration=None):
    """Replaces ComputeManager._confirm_resize (bug 1848343).

    Destroys the source instance, once the server's lock is held in
    confirm_resize, unless another confirm has done it meanwhile.

    Two confirms can be sent for one migration: the user's, and the one
    the API sends when the server is deleted in VERIFY_RESIZE, which finds
    the migration 'confirming' while the user's still runs. The second
    waits for the server's lock, and confirm_resize then trusts the status
    the migration had when the API read it: it confirms again, fails on
    the migration context the first dropped, puts the server in ERROR and
    fails the DELETE. The migration is read again here: a confirm that
    another has completed returns, and what confirm_resize does after it
    (removing the migration's allocations, the stashed flavors) finds
    nothing left to do. The check is here rather than in confirm_resize,
    whose status checks it belongs with, because confirm_resize is an RPC
    endpoint under nova's decorators: this is the first step under the
    lock that can be replaced alone.
    """
    try:
        status = objects.Migration.get_by_id(context.elevated(),
                                             migration.id).status
    except exception.MigrationNotFound:
        status = 'gone'
    if status in ('confirmed', 'gone'):
        LOG.info('Migration %(id)s is %(status)s: another confirmation '
                 'completed while this one waited for the instance lock',
                 {'id': migration.id, 'status': status}, instance=instance)
        return
    self._confirm_resize_on_source(context, instance, migration=migration)


def init_host(self, service_ref):
    """Replaces ComputeManager.init_host (bug 1848343).

    Initialization for a standalone compute service, then the removal of
    the allocations that moves finished on this source left behind when
    it stopped (_remove_allocations_of_finished_moves).
    """
    self._init_host_as_nova_does(service_ref)
    _remove_allocations_of_finished_moves_at_start(self)


#: The task states in which nova's init rolls back a move that this host
#: was the source of when its compute service stopped: RESIZE_MIGRATING
#: (resize_instance, the driver's migrate_disk_and_power_off) and
#: MIGRATING (the driver's live migration).
INTERRUPTED_MOVE_STATES = (task_states.RESIZE_MIGRATING,
                           task_states.MIGRATING)
#: The statuses of a live migration that init_host may find interrupted,
#: before nova's init: in progress on this source.
INTERRUPTED_LIVE_MIGRATION_STATUSES = ('queued', 'preparing', 'running')


def _init_instance(self, context, instance):
    """Replaces ComputeManager._init_instance (interrupted moves).

    Initialize this instance during service init.

    A move whose source compute service stopped in the middle of it
    (inside resize_instance or the driver's live migration) is rolled
    back by nova's init: the guest runs on this host again and the task
    state is cleared. Nothing gave back what the move took in placement:
    the instance consumer kept the destination's claim and the migration
    consumer this host's allocations, for as long as the server lives.
    _return_interrupted_move gives them back, before nova's init: once
    the task state is cleared a user may ask for another move, whose
    claim and migration context a later give-back would undo.

    A resize whose finish this host was running when its compute service
    stopped (inside the driver's finish_migration) is left by nova's init
    in RESIZE_FINISH, where no request acts on it, its migration holding
    the source. _error_out_interrupted_finish ends it as a failed
    finish_resize does.

    A revert whose finish this host, its source, was running when its
    compute service stopped (inside the driver's finish_revert_migration)
    is left by nova's init in RESIZE_REVERTING, where no request acts on
    it. _finish_interrupted_revert finishes it.
    """
    # An instance nova's init returns early for may have no task state
    # loaded (a partly deleted one, for example).
    task_state = (instance.task_state
                  if instance.obj_attr_is_set('task_state') else None)
    if (task_state in INTERRUPTED_MOVE_STATES and
            instance.host == self.host and
            _nova_init_rolls_back(instance)):
        self._return_interrupted_move(context, instance, task_state)
    self._init_instance_as_nova_does(context, instance)
    if (task_state == task_states.RESIZE_FINISH and
            instance.host == self.host and
            instance.task_state == task_states.RESIZE_FINISH):
        self._error_out_interrupted_finish(context, instance)
    if (task_state == task_states.RESIZE_REVERTING and
            instance.host == self.host and
            instance.task_state == task_states.RESIZE_REVERTING):
        self._finish_interrupted_revert(context, instance)


def _return_interrupted_move(self, context, instance, task_state):
    """Added to ComputeManager (interrupted moves).

    Give back what a move interrupted on this host, its source, took.

    Called by _init_instance before nova's init rolls the move back,
    while the task state still keeps every other request away. The
    migration consumer holds what the instance had on this host's node,
    the instance consumer the destination's claim. Only on positive
    evidence that the guest is here (the driver has it): the migration's
    allocations are moved back to the instance (_revert_allocation, which
    requires the instance consumer's generation and removes them instead
    for a deleted server), replacing the destination's claim, and the
    migration is recorded 'error': a move that is over. A running live
    migration is left to nova's init, which aborts it and records it
    'error' itself. A cold migration or resize also drops what
    prep_resize set on the instance (its migration context, new flavor
    and stashed vm_state; bug 1836369), written through a copy read from
    the database: ``instance`` keeps what nova's roll-back reads. Where
    the guest is not here (a live migration that ended on the
    destination before the source stopped) nothing is changed, and a
    warning says what is left. A failure is logged; the service starts
    all the same.

    :param context: an admin request context
    :param instance: the instance, in the task state of its move
    :param task_state: its task state (one of INTERRUPTED_MOVE_STATES)
    """
    try:
        migration = _interrupted_migration(self, context, instance,
                                           task_state)
        if migration is None:
            return
        if not self.driver.instance_exists(instance):
            LOG.warning('The guest of the interrupted migration %s is not '
                        'on this host; its allocations are left as they '
                        'are: the instance holds its destination %s, the '
                        'migration this host.', migration.uuid,
                        migration.dest_compute, instance=instance)
            return
        self._revert_allocation(context, instance, migration)
        if migration.status != 'running':
            migration.status = 'error'
            migration.save()
        if task_state == task_states.RESIZE_MIGRATING:
            _drop_resize_of_interrupted_move(context, instance)
    except Exception:
        LOG.exception('Unable to give back the allocations of the move '
                      'interrupted when this service stopped.',
                      instance=instance)


def _nova_init_rolls_back(instance):
    """Whether nova's init reaches its roll-back of a move interrupted in
    RESIZE_MIGRATING or MIGRATING: it returns before it for a deleted,
    soft-deleted or building instance and for one in ERROR, unless in
    RESIZE_MIGRATING. (A failure to plug the guest's VIFs also returns
    before it, and puts the server in ERROR: it then holds its flavor on
    this host, where its guest is.)
    """
    if instance.vm_state in (vm_states.DELETED, vm_states.SOFT_DELETED,
                             vm_states.BUILDING):
        return False
    if instance.vm_state == vm_states.ERROR:
        return instance.task_state == task_states.RESIZE_MIGRATING
    return True


def _drop_resize_of_interrupted_move(context, instance):
    """Drop what prep_resize set on the instance, in the database only,
    while its task state is still RESIZE_MIGRATING: through a copy read
    from the database, so that ``instance`` keeps what nova's roll-back
    reads. The migration context ``instance`` holds is marked unchanged:
    nova's save of the instance writes back a migration context that has
    changes, which would undo the drop.
    """
    copy = objects.Instance.get_by_uuid(
        context, instance.uuid,
        expected_attrs=['migration_context', 'flavor', 'system_metadata'])
    copy.old_flavor = None
    copy.new_flavor = None
    copy.system_metadata.pop('old_vm_state', None)
    copy.save(expected_task_state=[task_states.RESIZE_MIGRATING])
    copy.drop_migration_context()
    if instance.obj_attr_is_set('migration_context'):
        instance.obj_reset_changes(['migration_context'], recursive=True)


def _error_out_interrupted_finish(self, context, instance):
    """Added to ComputeManager (interrupted moves).

    End a resize whose finish this host was interrupted in.

    resize_instance on the source had moved the instance to this host
    (its host and node are this one's) and the driver's finish_migration
    did not return: the guest here may be incomplete. As
    _finish_resize's failure does, the allocations the migration holds
    on the source node are removed (_delete_allocation_after_move) and
    the instance keeps this node's, where a hard reboot may recover it;
    the migration is recorded 'error' and the instance ERROR with no task
    state, a state its user and the operator can act on. A failure to
    remove the allocations is logged and leaves the migration 'error'
    holding them, which the delete of the server removes.

    :param context: an admin request context
    :param instance: the instance, left in RESIZE_FINISH by nova's init
    """
    LOG.warning('The resize of this instance was interrupted in its '
                'finish on this host when the service stopped; it is put '
                'in ERROR. You may be able to recover it by hard '
                'rebooting it.', instance=instance)
    try:
        if instance.migration_context is not None:
            migration = objects.Migration.get_by_id_and_instance(
                context, instance.migration_context.migration_id,
                instance.uuid)
            migration.status = 'error'
            migration.save()
            self._delete_allocation_after_move(context, instance,
                                               migration)
    except Exception:
        LOG.exception('Unable to remove the allocations the interrupted '
                      'resize holds on its source node.',
                      instance=instance)
    self._set_instance_obj_error_state(instance, clean_task_state=True)


def _finish_interrupted_revert(self, context, instance):
    """Added to ComputeManager (interrupted moves).

    Finish a revert whose finish on this host was interrupted.

    finish_revert_resize on this host, the source, had put the instance
    back here (its host, node and old flavor saved) and moved the
    allocations back to it, and the driver's finish_revert_migration did
    not return. The revert is finished as nova's init finishes a resize
    interrupted on its source: the driver's finish_revert_migration
    again, then what finish_revert_resize does after it (the migration
    context and the stashed flavors dropped, the state the server had
    before the resize), and the migration is recorded 'reverted'. What
    the migration still holds, if the stop came before the allocations
    were moved back, is moved back (_revert_allocation). A failure puts
    the server in ERROR with its migration 'error', as a failed
    finish_revert_resize does. A revert interrupted on its destination
    (in revert_resize, before the source was sent the rest) is left as
    it is, with a warning.

    :param context: an admin request context
    :param instance: the instance, left in RESIZE_REVERTING by nova's init
    """
    migration = None
    try:
        migration = objects.Migration.get_by_id_and_instance(
            context, instance.migration_context.migration_id,
            instance.uuid)
        if migration.source_compute != self.host:
            # The destination stopped in revert_resize, before it sent
            # the revert on to the source: not this method's to finish.
            LOG.warning('The revert of the resize of this instance was '
                        'interrupted on its destination; it is left as '
                        'it is.', instance=instance)
            return
        LOG.info('The revert of the resize of this instance was '
                 'interrupted on this host, its source, when the service '
                 'stopped; finishing it.', instance=instance)
        if self.reportclient.get_allocations_for_consumer(
                context, migration.uuid):
            self._revert_allocation(context, instance, migration)
        power_on = (instance.system_metadata.get('old_vm_state') !=
                    vm_states.STOPPED)
        self.driver.finish_revert_migration(
            context, instance, instance.get_network_info(), migration,
            self._get_instance_block_device_info(context, instance),
            power_on)
        instance.drop_migration_context()
        instance.vm_state = (vm_states.ACTIVE if power_on
                             else vm_states.STOPPED)
        instance.task_state = None
        self._delete_stashed_flavor_info(instance)
        migration.status = 'reverted'
        migration.save()
    except Exception:
        LOG.exception('Unable to finish the interrupted revert; the '
                      'instance is put in ERROR.', instance=instance)
        if migration is not None:
            migration.status = 'error'
            migration.save()
        self._set_instance_obj_error_state(instance, clean_task_state=True)


def _interrupted_migration(manager, context, instance, task_state):
    """The migration of the move interrupted on this host, or None."""
    if task_state == task_states.RESIZE_MIGRATING:
        if instance.migration_context is None:
            return None
        return objects.Migration.get_by_id_and_instance(
            context, instance.migration_context.migration_id, instance.uuid)
    migrations = objects.MigrationList.get_by_filters(
        context, {'instance_uuid': instance.uuid,
                  'migration_type': fields.MigrationType.LIVE_MIGRATION,
                  'status': list(INTERRUPTED_LIVE_MIGRATION_STATUSES)},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'])
    for migration in migrations:
        if migration.source_compute == manager.host:
            return migration
    return None


# What _finished_moves_unread holds when init_host could not even list
# the host's nodes: all of them are read again.
EVERY_NODE = 'every node'


def _remove_allocations_of_finished_moves_at_start(manager):
    """init_host's clean-up: the service starts whatever it meets. What
    it could not read is left to _remove_allocations_of_finished_moves_left
    (the manager's _finished_moves_unread).
    """
    try:
        manager._finished_moves_unread = (
            manager._remove_allocations_of_finished_moves(
                nova_context.get_admin_context()))
    except Exception:
        LOG.exception('Unable to remove the allocations of moves that '
                      'finished while this service stopped; retried every '
                      '%d seconds.', CONF.instance_delete_interval)
        manager._finished_moves_unread = EVERY_NODE


def _remove_allocations_of_finished_moves(self, context, only=None):
    """Added to ComputeManager (bug 1848343).

    Remove the allocations that finished moves still hold on this host's
    nodes.

    A confirm, or the end of a live migration, records the migration
    'confirmed' or 'completed' on the source, and then removes what the
    migration consumer holds on the source node
    (_delete_allocation_after_move). A source that stops in between
    (restarted, killed, its host rebooted) leaves those allocations, and
    nothing else removes them: the resource tracker only considers moves
    in progress, and the delete of the server skips finished migrations,
    so that its cost does not grow with the server's history
    (compute_utils.migrations_of_instance). init_host removes them when
    the source starts again. What it reads is bounded by what the nodes
    hold now, not by the host's history: one placement request per node
    and one database query for the consumers among them that are finished
    migrations from this host. A migration whose allocations placement
    does not delete then is recorded 'error', as
    _delete_allocation_after_move does: the delete of its server removes
    them. A node whose allocations placement does not return is read
    again later (_remove_allocations_of_finished_moves_left).

    :param context: an admin request context
    :param only: the uuids of the nodes to read; all of the host's if None
    :returns: the uuids of the nodes whose allocations could not be read
    """
    try:
        nodes = objects.ComputeNodeList.get_all_by_host(context,
                                                        self.host)
    except exception.ComputeHostNotFound:
        # A first start: nothing was moved from here.
        return set()
    client = self.reportclient
    unread = set()
    for node in nodes:
        if only is not None and node.uuid not in only:
            continue
        try:
            held = client.get_allocations_for_resource_provider(
                context, node.uuid).allocations
        except Exception:
            LOG.warning('Unable to read the allocations of compute '
                        'node %s in placement; those of moves that '
                        'finished while this service stopped, if any, '
                        'are looked for again in %d seconds.', node.uuid,
                        CONF.instance_delete_interval)
            unread.add(node.uuid)
            continue
        if not held:
            continue
        finished = objects.MigrationList.get_by_filters(
            context, {'uuid': list(held), 'source_compute': self.host,
                      'status': ['confirmed', 'completed']})
        for migration in finished:
            LOG.info('Migration %(uuid)s is %(status)s but still '
                     'holds allocations on its source node %(node)s: '
                     'this service stopped before it removed them. '
                     'Removing them.', {'uuid': migration.uuid,
                                        'status': migration.status,
                                        'node': node.uuid})
            try:
                deleted = client.delete_allocation_for_instance(
                    context, migration.uuid, consumer_type='migration',
                    force=True)
            except Exception:
                LOG.exception('Unable to delete the allocations of '
                              'migration %s in placement; they are '
                              'deleted with the server.', migration.uuid)
                deleted = None
            if deleted is None:
                # Not deleted (the report client only logs a placement it
                # cannot reach): the migration is recorded 'error', so
                # that the delete of its server removes them.
                _record_allocations_left(migration)
    return unread


def _remove_allocations_of_finished_moves_left(self, context):
    """Added to nova.compute.manager.ComputeManager (bug 1848343).

    Look again at the nodes whose allocations init_host could not read.

    init_host removes what finished moves left on this host's nodes
    (_remove_allocations_of_finished_moves). A compute that starts during
    a placement outage cannot read them, and nothing else removes them:
    the delete of the server skips finished migrations. This runs every
    [DEFAULT]instance_delete_interval seconds and reads only the nodes
    left unread, until placement answers for all of them; once it has,
    it costs nothing.
    """
    unread = getattr(self, '_finished_moves_unread', None)
    if not unread:
        return
    LOG.info('Looking again for the allocations that finished moves left '
             'on this host\'s nodes.')
    only = None if unread == EVERY_NODE else unread
    self._finished_moves_unread = (
        self._remove_allocations_of_finished_moves(context, only=only))


def remove_allocations_of_finished_moves_periodic_task():
    """The periodic task as registered on ComputeManager at activation."""
    return periodic_task.periodic_task(
        spacing=CONF.instance_delete_interval)(
            _remove_allocations_of_finished_moves_left)


def _do_rebuild_instance_with_claim(
        self, context, instance, orig_image_ref, image_meta,
        injected_files, new_pass, orig_sys_metadata, bdms, evacuate,
        on_shared_storage, preserve_ephemeral, migration,
        request_spec, allocations, rebuild_claim, scheduled_node,
        limits, accel_uuids, reimage_boot_volume, target_state):
    """Replaces _do_rebuild_instance_with_claim (bug 1848343).

    Rebuild or evacuate an instance, and remove the scheduler's claim of
    an evacuation when the instance turns out to be deleted.

    An evacuation's claim on the destination can land after the API
    deleted the server (its compute is down, so the API deleted it
    locally, allocations included): it creates the instance consumer
    again. rebuild_instance then fails on the deleted instance and only
    logs it; here the allocations written for the deleted instance are
    removed (delete_allocations_if_deleted), and the failure goes on as
    before.
    """
    try:
        self._rebuild_instance_with_claim(
            context, instance, orig_image_ref, image_meta,
            injected_files, new_pass, orig_sys_metadata, bdms,
            evacuate, on_shared_storage, preserve_ephemeral, migration,
            request_spec, allocations, rebuild_claim, scheduled_node,
            limits, accel_uuids, reimage_boot_volume, target_state)
    except (exception.InstanceNotFound,
            exception.UnexpectedDeletingTaskStateError):
        with excutils.save_and_reraise_exception():
            compute_utils.delete_allocations_if_deleted(
                context, self.reportclient, instance.uuid)


class ComputeManagerZed(object):
    """Replaces ComputeManager methods of nova 26 (2022.2) whose signature
    differs (bug 1848343): _do_rebuild_instance_with_claim has no
    target_state argument, init_host no service_ref. The same fixes as
    _do_rebuild_instance_with_claim and init_host above.
    """

    def init_host(self):
        """Initialization for a standalone compute service."""
        self._init_host_as_nova_does()
        _remove_allocations_of_finished_moves_at_start(self)

    def _do_rebuild_instance_with_claim(
            self, context, instance, orig_image_ref, image_meta,
            injected_files, new_pass, orig_sys_metadata, bdms, evacuate,
            on_shared_storage, preserve_ephemeral, migration, request_spec,
            allocations, rebuild_claim, scheduled_node, limits, accel_uuids,
            reimage_boot_volume):
        """Helper to avoid deep nesting in the top-level method."""
        try:
            self._rebuild_instance_with_claim(
                context, instance, orig_image_ref, image_meta,
                injected_files, new_pass, orig_sys_metadata, bdms,
                evacuate, on_shared_storage, preserve_ephemeral, migration,
                request_spec, allocations, rebuild_claim, scheduled_node,
                limits, accel_uuids, reimage_boot_volume)
        except (exception.InstanceNotFound,
                exception.UnexpectedDeletingTaskStateError):
            # The evacuation's claim landed after the API deleted the
            # server: remove what it wrote for the deleted instance.
            with excutils.save_and_reraise_exception():
                compute_utils.delete_allocations_if_deleted(
                    context, self.reportclient, instance.uuid)


def _unshelve_instance(self, context, instance, image, filter_properties,
                       node, request_spec, accel_uuids):
    """Replaces ComputeManager._unshelve_instance (bug 1848343).

    Unshelve an instance on this host, and remove the scheduler's claim
    when the instance turns out to be deleted.

    The scheduler's claim for an unshelve can land after the API deleted
    the shelved offloaded server (it has no host, so the API deletes it
    locally, allocations included): it creates the instance consumer
    again. The unshelve then fails on the deleted instance before it
    does anything; here the allocations written for the deleted instance
    are removed (delete_allocations_if_deleted), and the failure goes on
    as before.
    """
    try:
        self._unshelve_instance_on_host(
            context, instance, image, filter_properties, node,
            request_spec, accel_uuids)
    except (exception.InstanceNotFound,
            exception.UnexpectedDeletingTaskStateError):
        with excutils.save_and_reraise_exception():
            compute_utils.delete_allocations_if_deleted(
                context, self.reportclient, instance.uuid)


# -- orphan instances ------------------------------------------------------

ORPHAN_TASK = '_cleanup_orphan_instances'
ORPHAN_UNKNOWN = 'unknown'
ORPHAN_FOREIGN = 'foreign'


#: Migration statuses nova sets before a migration ends (nova/compute,
#: nova/conductor, the virt drivers); every other status nova sets ends it
#: (confirmed, reverted, error, failed, completed, cancelled, done: what
#: nova's migration_get_in_progress_by_host_and_node leaves out).
MIGRATION_IN_PROGRESS = ('accepted', 'queued', 'preparing', 'pre-migrating',
                         'migrating', 'running', 'running (post-copy)',
                         'post-migrating', 'finished', 'confirming',
                         'reverting')


class OrphanGuest(object):
    """A guest on this host that nova does not account for here."""

    def __init__(self, uuid, reason, record=None, mapped=True):
        self.uuid = uuid
        self.reason = reason
        self.record = record
        #: For an unknown guest: whether the API database told that it
        #: has no instance mapping (False: the instance mappings could
        #: not be read, and this cell and placement told, _unclaimed).
        self.mapped = mapped

    @property
    def host(self):
        return self.record.host if self.record is not None else None

    def describe(self):
        if self.reason == ORPHAN_UNKNOWN and self.mapped:
            return ('unknown: no instance record in the cell database and '
                    'no instance mapping in the API database')
        if self.reason == ORPHAN_UNKNOWN:
            return ('unknown: no instance record and no migration in the '
                    'cell database and no allocations in placement (the '
                    'instance mappings cannot be read here)')
        return ('foreign: its instance record names host %s and no '
                'migration involving this host is in progress' % self.host)


def find_orphan_instances(manager, context):
    """Classify the guests of the hypervisor against nova's records.

    A guest is an orphan only on positive evidence:

    * unknown: no record in this cell, deleted, hidden or live, no
      migration of it in progress involving this host, and no instance
      mapping in the API database (so no cell knows it: a server deleted
      and archived has none left, a cross-cell resize keeps one). The
      mappings are read through nova's objects, as nova-compute reads
      everything; where that fails (a cell conductor without the API
      database, nova's recommended superconductor layout), no migration
      of it in this cell and no allocations in placement (_unclaimed),
      and where that fails too, no unknown guest is decided.
    * foreign: a live record, not hidden, naming another host, with no
      task in progress and no migration of it in progress involving this
      host.

    Every other guest is left alone: this host's own records, hidden ones
    included (either side of a cross-cell resize), records with no host
    (being shelved or unshelved), deleted records ([DEFAULT]
    running_deleted_instance_action's business).

    At most four database round trips whatever the number of guests and
    of nodes, each made only if the previous ones left a guest to decide:
    the UUIDs of this host's records (one column), the records of the
    other guests (base columns only), the migrations in progress involving
    this host and the instance mappings of the guests with no record;
    where those mappings cannot be read, one cell query and one placement
    request for each guest with no record (there are none in a healthy
    cloud). Only the guests that are not this host's own are loaded as
    Instance objects. The hidden records of unknown guests, a second
    guard (see hidden_records), are looked up only before acting on them.

    :returns: the list of OrphanGuest, unknown and foreign
    :raises: whatever a lookup of this cell raises: without a complete
        answer there is no decision
    """
    conf = CONF.orphan_instances
    ignored = set(uuid.lower() for uuid in conf.ignore_uuids)
    guests = set(manager.driver.list_instance_uuids()) - ignored
    if not guests:
        return []

    own = set(objects.InstanceList.get_uuids_by_host(context, manager.host))
    others = sorted(guests - own)
    if not others:
        return []

    with utils.temporary_mutation(context, read_deleted='yes'):
        by_uuid = {record.uuid: record for record in
                   objects.InstanceList.get_by_filters(
                       context, {'uuid': others}, expected_attrs=[],
                       use_slave=True)}
    candidates = []
    for uuid in others:
        record = by_uuid.get(uuid)
        if record is None:
            candidates.append(uuid)
        elif (record.deleted or record.hidden or record.host is None or
                record.host == manager.host):
            # Deleted but present: running_deleted_instance_action's.
            # Hidden: one side of a cross-cell resize. No host: being
            # shelved or unshelved. This host: became its own meanwhile.
            continue
        elif record.task_state is not None:
            LOG.debug('Guest %s: its record names host %s, but a task is '
                      'in progress; not an orphan.', uuid, record.host)
        else:
            candidates.append(uuid)
    if not candidates:
        return []

    moving = set(mig.instance_uuid for mig in objects.MigrationList.
                 get_by_filters(context, {'host': manager.host,
                                          'status': MIGRATION_IN_PROGRESS}))
    for uuid in sorted(moving.intersection(candidates)):
        LOG.debug('Guest %s: a migration involving this host is in '
                  'progress; not an orphan.', uuid)
    orphans = [OrphanGuest(uuid, ORPHAN_FOREIGN, by_uuid[uuid])
               for uuid in candidates
               if uuid in by_uuid and uuid not in moving]
    unknown, mapped = _unmapped(manager, context,
                                [uuid for uuid in candidates
                                 if uuid not in by_uuid and
                                 uuid not in moving])
    orphans.extend(OrphanGuest(uuid, ORPHAN_UNKNOWN, mapped=mapped)
                   for uuid in unknown)
    return sorted(orphans, key=lambda orphan: orphan.uuid)


def hidden_records(context, uuids):
    """The UUIDs among ``uuids`` that have a hidden record in this cell.

    InstanceList.get_by_filters skips hidden records unless asked for them
    alone. A cross-cell resize hides one of its instance's two records,
    and that instance has a mapping, which find_orphan_instances checks:
    this is a second guard, made before an unknown guest is acted on.
    """
    if not uuids:
        return set()
    with utils.temporary_mutation(context, read_deleted='yes'):
        return set(record.uuid for record in
                   objects.InstanceList.get_by_filters(
                       context, {'uuid': list(uuids), 'hidden': True},
                       expected_attrs=[], use_slave=True))


def _unmapped(manager, context, uuids):
    """(The UUIDs that no cell knows, whether the instance mappings told).

    An instance mapping exists from the API's create until the record is
    archived (nova-manage db archive_deleted_rows deletes both), and it
    names the cell that holds the record: a UUID without one is unknown.

    A compute reads the mappings through its cell's conductor, which in
    a superconductor layout has no API database. Then (or whenever the
    mappings cannot be read) the evidence is the cell's and placement's
    instead, see _unclaimed. Where that is missing too, none of them is
    decided, and that is said once for the scan, not once per guest.
    """
    if not uuids:
        return [], True
    try:
        mapped = objects.InstanceMappingList.get_by_instance_uuids(
            context, uuids)
    except Exception as e:
        LOG.debug('Orphan instances: the instance mappings cannot be '
                  'read here (%s: a cell conductor without the API '
                  'database?); %d guests with no record in this cell '
                  'are decided on the evidence of this cell and '
                  'placement.', type(e).__name__, len(uuids))
        try:
            return _unclaimed(manager, context, uuids), False
        except Exception:
            LOG.warning('Orphan instances: cannot decide %d guests with '
                        'no record in this cell: neither the instance '
                        'mappings nor this cell and placement could '
                        'tell whether nova knows them; they are left '
                        'alone in this scan.', len(uuids), exc_info=True)
            return [], False
    known = set(mapping.instance_uuid for mapping in mapped)
    for uuid in sorted(known.intersection(uuids)):
        LOG.debug('Guest %s: no record in this cell, but an instance '
                  'mapping; not an orphan.', uuid)
    return [uuid for uuid in uuids if uuid not in known], True


def _unclaimed(manager, context, uuids):
    """The UUIDs that nova holds nothing for, told without the API
    database: no migration of them in this cell (deleted ones included,
    whatever their host) and no allocations in placement.

    Every server nova knows holds allocations from its scheduling until
    its delete removes them: a server being built (whose record a cell
    database replica may not show yet), either side of a cross-cell
    resize (its hidden copy is in this cell too), a server being
    shelved, evacuated or live migrated. A deleted and archived server
    has no record, no migration and no allocations left. One cell query
    and one placement request per guest, made only for guests with no
    record in this cell; raises when any of them fails, so that nothing
    is decided on a partial answer.
    """
    unclaimed = []
    with utils.temporary_mutation(context, read_deleted='yes'):
        for uuid in uuids:
            if objects.MigrationList.get_by_filters(
                    context, {'instance_uuid': uuid}):
                LOG.debug('Guest %s: no record in this cell, but a '
                          'migration of it; not an orphan.', uuid)
                continue
            held = manager.reportclient.get_allocs_for_consumer(
                context, uuid)['allocations']
            if held:
                LOG.debug('Guest %s: no record in this cell, but '
                          'allocations in placement (on %s); not an '
                          'orphan.', uuid, ', '.join(sorted(held)))
                continue
            unclaimed.append(uuid)
    return unclaimed


def _guest_instance(context, orphan):
    """The Instance handed to the virt driver for an orphan guest.

    A foreign guest has its live record, read in full (with its flavor)
    only now that it is acted on. An unknown guest has none: drivers find
    guests by UUID, and the empty flavor keeps a driver's own accounting
    of resources it never claimed for this guest unchanged.
    """
    if orphan.record is not None:
        return objects.Instance.get_by_uuid(
            context, orphan.uuid, expected_attrs=['flavor'])
    return objects.Instance(
        context, uuid=orphan.uuid, system_metadata={},
        flavor=objects.Flavor(vcpus=0, memory_mb=0, root_gb=0,
                              ephemeral_gb=0, swap=0, extra_specs={}))


def _still_foreign(manager, instance):
    return not (instance.hidden or instance.host in (None, manager.host) or
                instance.task_state is not None)


def _act_on_orphan(manager, context, orphan, action):
    try:
        instance = _guest_instance(context, orphan)
    except exception.InstanceNotFound:
        return 'none (its record was deleted meanwhile)'
    if orphan.record is not None and not _still_foreign(manager, instance):
        return 'none (its record changed meanwhile: not an orphan)'
    if action == 'stop':
        if manager.driver.get_info(instance).state == power_state.SHUTDOWN:
            return 'none (already stopped)'
        manager.driver.power_off(instance)
        return 'stopped'
    # Only the guest on this host: no disks (a foreign guest's live
    # instance may be on the same shared storage), no volume detach, no
    # port unbinding.
    manager.driver.destroy(context, instance, network_info=[],
                           block_device_info=None, destroy_disks=False)
    return 'reaped (guest destroyed, disks kept)'


def _cleanup_orphan_instances(self, context):
    """Added to ComputeManager (orphan instances).

    Act on the guests of this host's hypervisor that nova does not
    account for here (see find_orphan_instances): as
    [orphan_instances]action says, log them (default), stop them or reap
    them once they have been orphans for grace_period seconds, at most
    max_actions_per_run a run. Every decision is logged with the guest's
    UUID and reason.

    Guests whose record is deleted but still present are left to
    _cleanup_running_deleted_instances.
    """
    conf = CONF.orphan_instances
    try:
        orphans = find_orphan_instances(self, context)
    except NotImplementedError:
        LOG.debug('Orphan instances: the virt driver cannot list its '
                  'guests by UUID; nothing to do.')
        return
    except Exception:
        LOG.exception('Orphan instances: looking the guests of this host '
                      'up failed; no decision in this run, the next run '
                      'tries again.')
        return

    now = time.monotonic()
    first_seen = getattr(self, '_orphan_instances_first_seen', {})
    first_seen = {o.uuid: first_seen.get(o.uuid, now) for o in orphans}
    self._orphan_instances_first_seen = first_seen

    if conf.action != 'log':
        due = [o.uuid for o in orphans if o.reason == ORPHAN_UNKNOWN and
               now - first_seen[o.uuid] >= conf.grace_period]
        try:
            hidden = hidden_records(context, due)
        except Exception:
            LOG.exception('Orphan instances: looking up hidden records '
                          'failed; no decision in this run, the next run '
                          'tries again.')
            return
        for uuid in sorted(hidden):
            LOG.debug('Guest %s: a hidden record in this cell (a '
                      'cross-cell resize); not an orphan.', uuid)
        orphans = [o for o in orphans if o.uuid not in hidden]

    acted = 0
    for orphan in orphans:
        age = now - first_seen[orphan.uuid]
        if conf.action == 'log':
            outcome = 'none (action is log)'
        elif age < conf.grace_period:
            outcome = ('none yet (orphan for %d s of the %d s grace '
                       'period)' % (age, conf.grace_period))
        elif acted >= conf.max_actions_per_run:
            outcome = ('deferred to the next run (max_actions_per_run %d '
                       'reached)' % conf.max_actions_per_run)
        else:
            try:
                outcome = _act_on_orphan(self, context, orphan,
                                         conf.action)
            except Exception:
                LOG.exception('Orphan instance %s (%s): action %s failed.',
                              orphan.uuid, orphan.describe(), conf.action)
                continue
            acted += 1
        LOG.warning('Orphan instance %s (%s); action: %s.',
                    orphan.uuid, orphan.describe(), outcome)


def orphan_instances_periodic_task():
    """The periodic task as registered on ComputeManager at activation.

    Its spacing is [orphan_instances]poll_interval when the fixes are
    activated (0 disables it).
    """
    return periodic_task.periodic_task(
        spacing=CONF.orphan_instances.poll_interval or -1,
        run_immediately=False)(_cleanup_orphan_instances)
