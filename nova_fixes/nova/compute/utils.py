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

"""Pieces the fixes add to nova/compute/utils.py."""

from oslo_log import log

from nova.compute import task_states
from nova.compute import vm_states
from nova import exception
from nova import objects
from nova import utils

LOG = log.getLogger(__name__)

# NOTE(bug 1848343): the statuses of a migration that ended having
# released what its consumer held in placement: a confirmed resize or
# cold migration and a completed live migration (the source's allocations
# are deleted, ComputeManager._delete_allocation_after_move, which records
# the migration 'error' when that fails), and an evacuation (done, then
# completed once the source cleaned up: it never uses the migration
# consumer).
MIGRATION_STATUSES_RELEASED = ('confirmed', 'completed', 'done')
# Every other status nova gives a migration: it may hold allocations. A
# move in progress ('accepted' to 'post-migrating', 'finished',
# 'confirming', 'reverting'), one that failed ('error', 'failed': its
# rollback may have failed), and a revert or an abort that ended
# ('reverted', 'cancelled': the status is set after _revert_allocation,
# which cannot record that placement was unreachable). The database API
# filters with IN only, hence a list of its own.
MIGRATION_STATUSES_HOLDING = (
    'accepted', 'queued', 'pre-migrating', 'preparing', 'migrating',
    'running', 'post-migrating', 'finished', 'confirming', 'reverting',
    'reverted', 'cancelled', 'error', 'failed')


def is_instance_deleted(context, instance_uuid):
    """Added to nova.compute.utils (bug 1848343).

    Tell whether an instance is deleted, or being deleted.

    The answer comes from the instance's cell database.

    Every delete path (the compute's _delete_instance, the API's local
    delete) saves vm_state DELETED or task_state DELETING before it removes
    the instance's allocations in placement and destroys the record. So
    allocations that a caller moved to the instance consumer before asking
    this question are either removed by the delete itself or seen here.

    Soft-deleted instances keep their allocations and are not deleted here.
    When the record cannot be read for another reason, the answer is False
    (not known to be deleted) and the caller keeps nova's usual behaviour.

    :param context: nova request context, targeted at the instance's cell
    :param instance_uuid: UUID of the instance
    :returns: True if the instance is deleted or being deleted
    """
    try:
        instance = objects.Instance.get_by_uuid(
            context.elevated(read_deleted='no'), instance_uuid,
            expected_attrs=[])
    except exception.InstanceNotFound:
        return True
    except Exception:
        LOG.exception('Unable to look up instance %s; assuming it still '
                      'exists.', instance_uuid)
        return False
    return (instance.vm_state == vm_states.DELETED or
            instance.task_state == task_states.DELETING)


def delete_allocations_of_migrations(context, reportclient, instance_uuid,
                                     strict=False):
    """Added to nova.compute.utils (bug 1848343).

    Delete the allocations of every migration of a deleted instance.

    A delete removes the allocations of the instance consumer. During a
    move the migration consumer holds the source node (cold migration,
    resize, revert, live migration), and the step that would have removed
    or reverted them fails on the deleted instance before it does
    (finish_revert_resize, post_live_migration_at_destination). The
    resource tracker never heals migration consumers and the migration
    rows are deleted with their instance, so nothing else ever removes
    them. Called by every delete path once the instance is recorded
    deleted, for the migrations that may still hold allocations (see
    migrations_of_instance): a step that writes allocations for a
    migration later on checks afterwards whether the instance is deleted
    (see delete_allocations_if_deleted).

    Failures are logged and the delete of the server goes on, unless
    ``strict``: then the first failure is raised, before the record that
    names the allocations is destroyed, for a retry.

    :param context: nova request context, targeted at the instance's cell
    :param reportclient: the placement report client to use
    :param instance_uuid: UUID of the deleted instance
    :param strict: raise a failure instead of logging it
    :raises: AllocationDeleteFailed (placement could not be reached, or
        failed), or the database's error listing the migrations, only if
        ``strict``
    """
    try:
        migrations = migrations_of_instance(context, instance_uuid)
    except Exception:
        if strict:
            raise
        LOG.exception('Unable to list the migrations of deleted instance '
                      '%s; their allocations, if any, are left in '
                      'placement.', instance_uuid)
        return
    for migration in migrations:
        if strict:
            delete_allocations_or_raise(context, reportclient,
                                        migration.uuid, 'migration')
        else:
            _delete_consumer_allocations(context, reportclient,
                                         migration.uuid, 'migration')


def delete_allocations_or_raise(context, reportclient, consumer_uuid,
                                consumer_type='instance', force=True):
    """Added to nova.compute.utils (bug 1848343).

    Delete the allocations of a consumer, or raise.

    The report client's delete_allocation_for_instance only logs a
    placement it cannot reach (safe_connect returns None): a caller that
    destroys the record naming the allocations once it returns must know.

    :param context: nova request context
    :param reportclient: the placement report client to use
    :param consumer_uuid: UUID of the consumer
    :param consumer_type: 'instance' or 'migration'
    :param force: as delete_allocation_for_instance's
    :returns: True if allocations were deleted, False if there were none
    :raises: AllocationDeleteFailed if placement could not be reached, or
        failed
    """
    deleted = reportclient.delete_allocation_for_instance(
        context, consumer_uuid, consumer_type=consumer_type, force=force)
    if deleted is None:
        raise exception.AllocationDeleteFailed(
            consumer_uuid=consumer_uuid,
            error='placement could not be reached')
    return deleted


def migrations_of_instance(context, instance_uuid):
    """Added to nova.compute.utils (bug 1848343).

    The migrations of an instance whose consumers a delete removes: those
    that may still hold allocations.

    A migration that ended as it should (MIGRATION_STATUSES_RELEASED)
    released what its consumer held when it got that status, and is left
    out, so that a delete costs the same whatever the server's history:
    a server live migrated at every host maintenance has dozens of them.
    Where that release fails, the migration is recorded 'error'
    (ComputeManager._delete_allocation_after_move), and is read here.
    Every other status is read: a move in progress, a failed one (its
    rollback may have failed), a revert or an abort (their callers set
    the status after _revert_allocation, whatever it did). The query
    filters on the status, so the rows of the released migrations are not
    read either.

    Deleted rows are included: the compute's delete reads them once the
    instance, and its migrations with it, are deleted.

    :param context: nova request context, targeted at the instance's cell
    :param instance_uuid: UUID of the instance
    :returns: a MigrationList
    """
    with utils.temporary_mutation(context, read_deleted='yes'):
        return objects.MigrationList.get_by_filters(
            context, {'instance_uuid': instance_uuid,
                      'status': list(MIGRATION_STATUSES_HOLDING)})


def delete_allocations_if_deleted(context, reportclient, instance_uuid,
                                  migration_uuid=None):
    """Added to nova.compute.utils (bug 1848343).

    Delete what a move wrote for an instance that turns out deleted.

    A step of a move that writes allocations for the instance consumer or
    a migration consumer (the scheduler's claim, a revert, a rollback, an
    evacuation) may do so after the server was deleted, and create again a
    consumer that nobody will delete. Such a step calls this after it has
    written, never before: every delete path records DELETING or DELETED
    (see is_instance_deleted) before it removes the allocations of the
    instance and of its migrations, so either the delete comes after the
    write and removes it, or it is seen here and the write is removed.

    :param context: nova request context, targeted at the instance's cell
    :param reportclient: the placement report client to use
    :param instance_uuid: UUID of the instance
    :param migration_uuid: UUID of the migration whose allocations the
        step wrote or reverted, if any
    :returns: True if the instance is deleted and its allocations (and the
        migration's) were removed
    """
    if not is_instance_deleted(context, instance_uuid):
        return False
    LOG.info('Instance %s was deleted during its move; removing the '
             'allocations written for it after the delete.', instance_uuid)
    _delete_consumer_allocations(context, reportclient, instance_uuid,
                                 'instance')
    if migration_uuid is not None:
        _delete_consumer_allocations(context, reportclient, migration_uuid,
                                     'migration')
    return True


def _delete_consumer_allocations(context, reportclient, consumer_uuid,
                                 consumer_type):
    try:
        reportclient.delete_allocation_for_instance(
            context, consumer_uuid, consumer_type=consumer_type, force=True)
    except Exception:
        LOG.exception('Unable to delete the allocations of %s %s in '
                      'placement; "nova-manage placement audit --delete" '
                      'finds them.', consumer_type, consumer_uuid)


def may_have_ports_or_volumes(instance):
    """Replaces compute_utils.may_have_ports_or_volumes (bug 1848343).

    Whether an instance may have ports, volumes or (with the fixes)
    allocations, to be deleted as one that was scheduled: nova asks it of
    an instance that has no host, to tell one that never left the
    scheduler from one whose host a compute nilled out (SHELVED_OFFLOADED,
    or ERROR after a failed build). It now also answers True for an
    instance that has a host.

    API._delete asks it once, of the instance as the request read it, and
    decides with that answer twice: before it saves the delete's task
    state and after, when the save has refreshed the instance. A compute
    that reschedules the build in between nils out the host of an
    instance still BUILDING: nova's second check then saw "no host, no
    ports nor volumes", destroyed the record and only then deleted the
    allocations, a delete the report client only logs during a placement
    outage, which left the claim with nothing naming it (found by the
    race explorer's outage variant, building two servers). An instance
    that had a host when it was read was scheduled: it is now deleted as
    one, by the local delete, which deletes its allocations first or
    refuses with a 503 the user can retry. Every caller that acts on the
    answer checks that the host is None first, so nothing else changes
    (an instance whose host is not loaded is answered as one with none).
    """
    if instance.obj_attr_is_set('host') and instance.host:
        return True
    return instance.vm_state in (vm_states.SHELVED_OFFLOADED,
                                 vm_states.ERROR)
