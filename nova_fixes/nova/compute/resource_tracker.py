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

"""Drop-in code for nova.compute.resource_tracker (stale moves).

The resource tracker's periodic finds the allocations a move left behind
when it ended without giving them back (its rollback could not reach
placement, or the process running it died), and corrects them when it
has positive evidence of where the server's guest runs; otherwise it
warns, as nova does.
"""

from keystoneauth1 import exceptions as ks_exc
from oslo_log import log as logging
from oslo_utils import timeutils

from nova.compute import instance_actions
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import exception
from nova import objects
from nova.scheduler import utils as scheduler_utils

LOG = logging.getLogger(__name__)

#: The statuses of a migration whose move is over (nova's
#: migration_get_in_progress_by_host_and_node leaves them out).
ENDED_MIGRATION_STATUSES = ('confirmed', 'reverted', 'error', 'failed',
                            'completed', 'cancelled', 'done')
#: The instance actions of a move finished by finish_resize on its
#: destination, and the event its failure records there.
FINISHED_MOVE_ACTIONS = (instance_actions.MIGRATE, instance_actions.RESIZE)
FINISH_EVENT = 'compute_finish_resize'
#: Seconds for which a migration nova records in progress, and its
#: instance with no task state, must have been left unchanged before the
#: periodic takes the move for abandoned (_abandoned_move): a move's last
#: steps clear the task state just before they end the migration.
ABANDONED_AFTER = 300


def _remove_deleted_instances_allocations(self, context, cn,
                                          migrations, instance_by_uuid):
    """Replaces ResourceTracker._remove_deleted_instances_allocations.

    Remove (and, for a move that is over, correct) the allocations
    against this compute node that no instance or move on it accounts
    for.

    Besides nova's cases (a deleted instance's allocations are removed),
    two are corrected when a move ended without giving its allocations
    back (_correct_ended_move, _correct_moved_instance): a migration
    consumer of a move that is over still holding this node, and an
    instance consumer holding this node while the instance lives on
    another host. Each makes placement requests only for such a consumer:
    when nothing is wrong, the periodic makes the one request nova makes.
    """
    migration_uuids = [migration.uuid for migration in migrations
                       if 'uuid' in migration]
    # NOTE(jaypipes): All of this code sucks. It's basically dealing with
    # all the corner cases in move, local delete, unshelve and rebuild
    # operations for when allocations should be deleted when things didn't
    # happen according to the normal flow of events where the scheduler
    # always creates allocations for an instance
    try:
        # pai: report.ProviderAllocInfo namedtuple
        pai = self.reportclient.get_allocations_for_resource_provider(
            context, cn.uuid)
    except (exception.ResourceProviderAllocationRetrievalFailed,
            ks_exc.ClientException) as e:
        LOG.error("Skipping removal of allocations for deleted instances: "
                  "%s", e)
        return
    allocations = pai.allocations
    if not allocations:
        # The main loop below would short-circuit anyway, but this saves us
        # the (potentially expensive) context.elevated construction below.
        return
    read_deleted_context = context.elevated(read_deleted='yes')
    for consumer_uuid, alloc in allocations.items():
        if consumer_uuid in self.tracked_instances:
            LOG.debug("Instance %s actively managed on this compute host "
                      "and has allocations in placement: %s.",
                      consumer_uuid, alloc)
            continue
        if consumer_uuid in migration_uuids:
            migration = next(m for m in migrations
                             if 'uuid' in m and m.uuid == consumer_uuid)
            if ('status' in migration and
                    (migration.status in ENDED_MIGRATION_STATUSES or
                     self._abandoned_move(context, migration))):
                # NOTE(stale moves): a move that ended in error, or that
                # nothing will end, and did not give its allocations
                # back.
                self._correct_ended_move(context, cn, migration,
                                         migrations, alloc)
                continue
            LOG.debug("Migration %s is active on this compute host "
                      "and has allocations in placement: %s.",
                      consumer_uuid, alloc)
            continue

        # We know these are instances now, so proceed
        instance_uuid = consumer_uuid
        instance = instance_by_uuid.get(instance_uuid)
        # NOTE(stale moves): read after the allocations, so that an
        # operation that claimed them is seen.
        fresh = not instance
        if not instance:
            try:
                instance = objects.Instance.get_by_uuid(
                    read_deleted_context, consumer_uuid,
                    expected_attrs=[])
            except exception.InstanceNotFound:
                # NOTE(stale moves): or the migration of a move that is
                # over on another host, which the periodic did not load.
                migration = self._ended_migration(context, consumer_uuid)
                if migration is not None:
                    self._correct_ended_move(context, cn, migration,
                                             migrations, alloc)
                    continue
                # The instance isn't even in the database. Either the
                # scheduler _just_ created an allocation for it and we're
                # racing with the creation in the cell database, or the
                #  instance was deleted and fully archived before we got a
                # chance to run this. The former is far more likely than
                # the latter. Avoid deleting allocations for a building
                # instance here.
                LOG.info("Instance %(uuid)s has allocations against this "
                         "compute host but is not found in the database.",
                         {'uuid': instance_uuid},
                         exc_info=False)
                continue

        # NOTE(mriedem): A cross-cell migration will work with instance
        # records across two cells once the migration is confirmed/reverted
        # one of them will be deleted but the instance still exists in the
        # other cell. Before the instance is destroyed from the old cell
        # though it is marked hidden=True so if we find a deleted hidden
        # instance with allocations against this compute node we just
        # ignore it since the migration operation will handle cleaning up
        # those allocations.
        if instance.deleted and not instance.hidden:
            # The instance is gone, so we definitely want to remove
            # allocations associated with it.
            LOG.debug("Instance %s has been deleted (perhaps locally). "
                      "Deleting allocations that remained for this "
                      "instance against this compute host: %s.",
                      instance_uuid, alloc)
            # We don't force delete the allocation in this case because if
            # there is a conflict we'll retry on the next
            # update_available_resource periodic run.
            self.reportclient.delete_allocation_for_instance(context,
                                                             instance_uuid,
                                                             force=False)
            continue
        if (not instance.host or instance.host == cn.host) and (
                self._correct_unhosted_instance(context, cn, instance,
                                                migrations, alloc)):
            # NOTE(stale moves): a server with no host to run on (its
            # build failed, it is shelved offloaded) still holds this
            # node: a release that could not reach placement.
            continue
        if not instance.host:
            # Allocations related to instances being scheduled should not
            # be deleted if we already wrote the allocation previously.
            LOG.debug("Instance %s has been scheduled to this compute "
                      "host, the scheduler has made an allocation "
                      "against this compute node but the instance has "
                      "yet to start. Skipping heal of allocation: %s.",
                      instance_uuid, alloc)
            continue
        if (instance.host == cn.host and
                instance.node == cn.hypervisor_hostname):
            # The instance is supposed to be on this compute host but is
            # not in the list of actively managed instances. This could be
            # because we are racing with an instance_claim call during
            # initial build or unshelve where the instance host/node is set
            # before the instance is added to tracked_instances. If the
            # task_state is set, then consider things in motion and log at
            # debug level instead of warning.
            if instance.task_state:
                LOG.debug('Instance with task_state "%s" is not being '
                          'actively managed by this compute host but has '
                          'allocations referencing this compute node '
                          '(%s): %s. Skipping heal of allocations during '
                          'the task state transition.',
                          instance.task_state, cn.uuid, alloc,
                          instance=instance)
            else:
                LOG.warning("Instance %s is not being actively managed by "
                            "this compute host but has allocations "
                            "referencing this compute host: %s. Skipping "
                            "heal of allocation because we do not know "
                            "what to do.", instance_uuid, alloc)
            continue
        if instance.host != cn.host:
            # NOTE(stale moves): the instance moved to another host, or a
            # move to this one ended without giving back its claim here.
            # With positive evidence that nothing here is the server's
            # any more, this node is removed from its allocations;
            # otherwise nova's warning.
            self._correct_moved_instance(context, cn, instance, fresh,
                                         migrations, alloc)


def _ended_migration(self, context, consumer_uuid):
    """Added to ResourceTracker (stale moves).

    The migration ``consumer_uuid`` names, if it is one whose move is
    over; None otherwise (not a migration, or one in progress). Only
    asked for a consumer that is not an instance of this cell: one
    database query, made only when something holds this node that
    nothing here accounts for.
    """
    try:
        migration = objects.Migration.get_by_uuid(context, consumer_uuid)
    except exception.MigrationNotFound:
        return None
    except Exception:
        LOG.exception('Unable to look consumer %s up as a migration; the '
                      'next periodic run looks again.', consumer_uuid)
        return None
    if migration.status not in ENDED_MIGRATION_STATUSES:
        return None
    return migration


def _abandoned_move(self, context, migration):
    """Added to ResourceTracker (stale moves).

    Whether ``migration``, which nova records in progress and which
    holds this node, belongs to a move that nothing will end; if so it
    is recorded 'error' here, so that its allocations are corrected as
    those of a move that is over (_correct_ended_move).

    Every move sets its instance's task state before its migration is
    created and keeps one until it ends, but for VERIFY_RESIZE (and the
    confirm the API starts from it): a migration still in progress
    whose instance has no task state and is not resized belongs to a
    move that stopped without ending it. An RPC handler of the move
    failed before its body ran (the write of its instance action event
    failed, and reverts_task_state cleared the task state), or its
    source restarted in it and init_host cleared the task state
    RESIZE_PREP without recording the migration over. The migration and
    the instance must both have been left unchanged for ABANDONED_AFTER
    seconds (a live migration's destination clears the task state just
    before its source records the migration completed). One database
    read, made only for a migration unchanged for that long; a failure
    is logged and the next run looks again.
    """
    now = timeutils.utcnow().replace(tzinfo=None)

    def unchanged(record):
        # Seconds since the record last changed (0: no timestamp read).
        for field in ('updated_at', 'created_at'):
            if record.obj_attr_is_set(field) and getattr(record, field):
                when = getattr(record, field).replace(tzinfo=None)
                return (now - when).total_seconds()
        return 0

    if unchanged(migration) < ABANDONED_AFTER:
        return False
    try:
        instance = objects.Instance.get_by_uuid(
            context, migration.instance_uuid, expected_attrs=[])
        if (instance.task_state is not None or instance.hidden or
                instance.vm_state == vm_states.RESIZED or
                unchanged(instance) < ABANDONED_AFTER):
            return False
        LOG.warning('Migration %s has been %s for %d s, and its instance '
                    '(%s, no task state) unchanged for %d s: nothing will '
                    'end its move. Recording it \'error\', so that its '
                    'allocations are corrected as those of a move that '
                    'is over.', migration.uuid, migration.status,
                    unchanged(migration), instance.vm_state,
                    unchanged(instance), instance=instance)
        status = migration.status
        migration.status = 'error'
        try:
            migration.save()
        except Exception:
            migration.status = status
            raise
        return True
    except exception.InstanceNotFound:
        # Deleted: the delete gives the move's allocations back.
        return False
    except Exception:
        LOG.exception('Unable to decide whether migration %s was '
                      'abandoned; the next periodic run looks again.',
                      migration.uuid)
        return False


def _settled_instance(self, context, instance_uuid, migrations,
                      instance=None):
    """Added to ResourceTracker (stale moves).

    The instance (``instance``, or read from the database: it must have
    been read after the allocations were), if nothing is moving or
    changing it: no task state, not waiting for a resize to be
    confirmed, and no migration of it in progress on this node; or
    deleted (and not a cross-cell move's hidden copy). None otherwise,
    with the reason logged at debug level.
    """
    try:
        instance = instance or objects.Instance.get_by_uuid(
            context.elevated(read_deleted='yes'), instance_uuid,
            expected_attrs=[])
    except exception.InstanceNotFound:
        LOG.debug('Instance %s of a stale allocation is not in this cell.',
                  instance_uuid)
        return None
    if instance.deleted:
        return None if instance.hidden else instance
    moving = [m.uuid for m in migrations
              if m.instance_uuid == instance_uuid and
              m.status not in ENDED_MIGRATION_STATUSES]
    if (instance.hidden or instance.task_state or moving or
            instance.vm_state == vm_states.RESIZED):
        LOG.debug('Instance %s is in motion (task state %s, vm state '
                  '%s, migrations in progress %s): its '
                  'allocations are left to the operation in progress.',
                  instance_uuid, instance.task_state, instance.vm_state,
                  moving)
        return None
    return instance


def _correct_ended_move(self, context, cn, migration, migrations, alloc):
    """Added to ResourceTracker (stale moves).

    A migration consumer holds this node though its move is over: the
    move ended (rolled back, failed, cancelled, reverted) without giving
    its allocations back, because placement could not be reached then
    or the service running it stopped. Placement keeps them for as long
    as the server lives.

    When the server is deleted they are removed. When it is settled (see
    _settled_instance) and its guest runs on this node (the instance's
    host and node are this one's and the driver has the guest) they are
    moved to the instance consumer, replacing what it holds (a claim on
    the destination, or nothing): the server then holds its flavor where
    its guest runs; but if the instance consumer holds this node already
    (a resize on the same host), this node is removed from the
    migration's allocations instead. When its guest is elsewhere (the
    instance on another host, the driver without it), this node is
    removed from the migration's allocations. The writes name the
    consumer generations read, so that an operation that started
    meanwhile makes placement refuse them; the next run looks again.
    Otherwise they are left, and a warning says so. A failure of
    placement, the database or the driver is logged, and the periodic
    goes on with the other consumers and its update of the node.
    """
    try:
        instance = self._settled_instance(context, migration.instance_uuid,
                                          migrations)
        if instance is None:
            return
        if instance.deleted:
            LOG.debug('Migration %s of deleted instance %s still holds '
                      'this compute node; deleting its allocations: %s.',
                      migration.uuid, instance.uuid, alloc)
            self.reportclient.delete_allocation_for_instance(
                context, migration.uuid, consumer_type='migration',
                force=False)
            return
        here = (instance.host == cn.host and
                instance.node == cn.hypervisor_hostname)
        guest = self.driver.instance_exists(instance)
        client = self.reportclient
        if here and guest:
            held = client.get_allocations_for_consumer(context,
                                                       instance.uuid)
            if held is None:
                return
            if cn.uuid in held:
                # A resize on this same host: the instance holds this
                # node already. The flavor its guest uses tells which of
                # the two is extra: the migration's (the old flavor, once
                # the resize finished) or the instance's (the new
                # flavor's claim, when the resize failed before its
                # finish and the instance kept its flavor).
                used = {rc: amount for rc, amount in
                        scheduler_utils.resources_from_flavor(
                            instance, instance.flavor).items() if amount}
                if (alloc['resources'] == used and
                        held[cn.uuid]['resources'] != used):
                    LOG.warning('Migration %s (%s) holds this compute '
                                'node with the flavor its instance '
                                'uses, and the instance holds it with '
                                'another (a resize on this host that '
                                'did not finish): moving the '
                                'migration\'s allocations to the '
                                'instance: %s.', migration.uuid,
                                migration.status, alloc,
                                instance=instance)
                    client.move_allocations(context, migration.uuid,
                                            instance.uuid)
                    compute_utils.delete_allocations_if_deleted(
                        context, client, instance.uuid,
                        migration_uuid=migration.uuid)
                    return
                LOG.warning('Migration %s (%s) still holds this compute '
                            'node, which its instance holds too: removing '
                            'this node from the migration\'s allocations: '
                            '%s.', migration.uuid, migration.status, alloc,
                            instance=instance)
                client.remove_provider_tree_from_instance_allocation(
                    context, migration.uuid, cn.uuid)
                return
            LOG.warning('Migration %s (%s) still holds this compute node '
                        'for its instance, whose guest runs here: moving '
                        'its allocations to the instance: %s.',
                        migration.uuid, migration.status, alloc,
                        instance=instance)
            client.move_allocations(context, migration.uuid,
                                    instance.uuid)
            compute_utils.delete_allocations_if_deleted(
                context, client, instance.uuid,
                migration_uuid=migration.uuid)
            return
        if not here and not guest:
            LOG.warning('Migration %s (%s) still holds this compute node, '
                        'where its instance is not: removing this node '
                        'from its allocations: %s.', migration.uuid,
                        migration.status, alloc, instance=instance)
            client.remove_provider_tree_from_instance_allocation(
                context, migration.uuid, cn.uuid)
            return
        if not here and self._finish_failed_on_destination(
                context, instance, migration):
            LOG.warning('Migration %s (%s) still holds this compute node: '
                        'the finish of its move failed on %s, where its '
                        'instance is, and could not give it back. '
                        'Removing this node from its allocations, as that '
                        'failure does: %s.', migration.uuid,
                        migration.status, migration.dest_compute, alloc,
                        instance=instance)
            client.remove_provider_tree_from_instance_allocation(
                context, migration.uuid, cn.uuid)
            return
        LOG.warning('Migration %s (%s) still holds this compute node, '
                    'but its instance is on %s (%s) and its guest is %s '
                    'here: its allocations are left as they are: %s.',
                    migration.uuid, migration.status, instance.host,
                    instance.node, 'present' if guest else 'not', alloc,
                    instance=instance)
    except exception.AllocationMoveFailed as e:
        LOG.info('The allocations of migration %s changed meanwhile; the '
                 'next periodic run looks again: %s', migration.uuid, e)
    except Exception:
        # Placement, the database or the driver failing here must not
        # stop the periodic's update of this node: what was written
        # stands, and the next run looks again.
        LOG.exception('Unable to correct the allocations of migration %s '
                      'on this compute node; the next periodic run looks '
                      'again.', migration.uuid)


def _finish_failed_on_destination(self, context, instance, migration):
    """Added to ResourceTracker (stale moves).

    Whether ``migration``, a move that is over, is a cold migration or
    a resize whose finish failed on its destination, where its settled
    instance now is. finish_resize's failure keeps the destination's
    allocations for the instance (a hard reboot recovers it there) and
    removes what the migration holds on the source; when placement could
    not be reached then, the migration keeps the source, for as long as
    the server lives. The evidence is nova's own record: the migration
    'error', the instance's host and node its destination's, and the
    server's action of that move (the newest migrate or resize that
    started before the migration was created) with a finish_resize
    event that failed. A revert that failed on the destination (whose
    move had finished) is not one: its source keeps the disk the revert
    would have used. Two database reads, made only for such a migration.
    """
    if not all(migration.obj_attr_is_set(field) for field in (
            'status', 'migration_type', 'source_compute', 'dest_compute',
            'dest_node', 'created_at')):
        # Only what the periodic read decides: no lazy load here.
        return False
    if (migration.status != 'error' or
            migration.migration_type not in ('migration', 'resize') or
            migration.source_compute == migration.dest_compute or
            instance.host != migration.dest_compute or
            instance.node != migration.dest_node):
        return False
    actions = objects.InstanceActionList.get_by_instance_uuid(
        context, instance.uuid)
    mine = [action for action in actions
            if action.action in FINISHED_MOVE_ACTIONS and
            action.start_time <= migration.created_at]
    if not mine:
        return False
    # The newest first, as nova lists them.
    events = objects.InstanceActionEventList.get_by_action(context,
                                                           mine[0].id)
    return any(event.event == FINISH_EVENT and event.result == 'Error'
               for event in events)


def _correct_unhosted_instance(self, context, cn, instance, migrations,
                               alloc):
    """Added to ResourceTracker (stale moves).

    The instance consumer holds this node while its server has no
    host to run on: a build that failed (``ERROR``, no host) or a
    shelved offloaded server (whatever its host says: an offload that
    failed after it powered off and destroyed the guest leaves it set).
    Its release could not reach placement (a build's rollback, a shelve
    offload, an unshelve that failed), and nothing gives the claim back
    for as long as the server lives.

    ``instance`` is what the periodic read (before or after the
    allocations); it only chooses the consumers worth a look, so that
    nothing is asked when nothing is wrong. For one of them, the
    consumer's allocations and generation are read first, then the
    instance again: a build or an unshelve that claimed before that read
    shows its task state, one that claims after it changes the generation
    and placement refuses the write. If the server is then settled (no
    task state, no move of it in progress here), still without a host
    (``ERROR``) or shelved offloaded, and the driver has no guest of it
    here, this node's tree is removed from its allocations with that
    generation. Returns True when the consumer was looked at (corrected,
    or left with the reason logged), False for nova's own handling.
    """
    if not all(instance.obj_attr_is_set(field)
               for field in ('vm_state', 'task_state', 'deleted')):
        # Only what the periodic read decides: no lazy load here.
        return False
    if instance.task_state or instance.deleted:
        return False
    if not (instance.vm_state == vm_states.SHELVED_OFFLOADED or
            (instance.vm_state == vm_states.ERROR and not instance.host)):
        return False
    client = self.reportclient
    try:
        held = client.get_allocs_for_consumer(context, instance.uuid)
        settled = self._settled_instance(context, instance.uuid,
                                         migrations)
        if (settled is None or settled.deleted or not (
                settled.vm_state == vm_states.SHELVED_OFFLOADED or
                (settled.vm_state == vm_states.ERROR and
                 not settled.host)) or
                (settled.host and settled.host != cn.host) or
                self.driver.instance_exists(settled)):
            LOG.debug('Instance %s, %s on %s, holds this compute node; '
                      'it changed since, or has its guest here: its '
                      'allocations are left as they are: %s.',
                      instance.uuid, instance.vm_state, instance.host,
                      alloc)
            return True
        tree = {rp['uuid'] for rp in
                client.get_providers_in_tree(context, cn.uuid)}
        kept = {rp: {'resources': held_rp['resources']}
                for rp, held_rp in held['allocations'].items()
                if rp not in tree}
        if len(kept) == len(held['allocations']):
            return True
        LOG.warning('Instance %s is %s with no host to run on, but still '
                    'holds this compute node: removing this node from its '
                    'allocations: %s.', settled.uuid, settled.vm_state,
                    alloc)
        client.put_allocations(context, settled.uuid, {
            'allocations': kept,
            'consumer_generation': held['consumer_generation'],
            'project_id': held['project_id'],
            'user_id': held['user_id']})
    except exception.AllocationUpdateFailed as e:
        LOG.info('The allocations of instance %s changed meanwhile; the '
                 'next periodic run looks again: %s', instance.uuid, e)
    except Exception:
        # As in _correct_ended_move: the periodic goes on, and its next
        # run looks again.
        LOG.exception('Unable to correct the allocations of instance %s '
                      'on this compute node; the next periodic run looks '
                      'again.', instance.uuid)
    return True


def _correct_moved_instance(self, context, cn, instance, fresh,
                            migrations, alloc):
    """Added to ResourceTracker (stale moves).

    The instance consumer holds this node while the instance lives on
    another host: a move that left this host, or one to this host that
    was rolled back, did not give this node back. When the instance is
    settled (see _settled_instance: a resize waiting for its confirm
    keeps both nodes) and the driver has no guest of it here, this node
    is removed from its allocations (with the consumer generation read);
    otherwise nova's warning. Only for an instance read after the
    allocations (``fresh``): one the periodic loaded before them may have
    started a move that claimed this node since. A failure is logged, and
    the periodic goes on.
    """
    try:
        settled = fresh and self._settled_instance(
            context, instance.uuid, migrations, instance=instance)
        if (settled and not settled.deleted and
                settled.host and settled.host != cn.host and
                not self.driver.instance_exists(settled)):
            LOG.warning('Instance %s lives on %s (%s) and has no guest '
                        'here, but still holds this compute node: '
                        'removing this node from its allocations: %s.',
                        settled.uuid, settled.host, settled.node, alloc)
            client = self.reportclient
            client.remove_provider_tree_from_instance_allocation(
                context, settled.uuid, cn.uuid)
            return
    except Exception:
        # As in _correct_ended_move: the periodic goes on, and its next
        # run looks again.
        LOG.exception('Unable to correct the allocations of instance %s '
                      'on this compute node; the next periodic run looks '
                      'again.', instance.uuid)
        return
    LOG.warning("Instance %s has been moved to another host "
                "%s(%s). There are allocations remaining against "
                "the source host that might need to be removed: "
                "%s.",
                instance.uuid, instance.host, instance.node, alloc)
