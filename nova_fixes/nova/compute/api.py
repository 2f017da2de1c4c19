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

"""Drop-ins for nova/compute/api.py."""

from keystoneauth1 import exceptions as ks_exc
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_messaging import exceptions as oslo_exceptions
from oslo_utils import excutils
from oslo_utils import timeutils

from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.conductor.tasks import cross_cell_migrate
import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

#: Set on a request context: the instance UUIDs whose allocations this
#: request deleted before it destroyed their build requests.
ALLOCATIONS_DELETED = '_allocations_deleted_with_build_request'


def _attempt_delete_of_buildrequest(self, context, instance):
    """Replaces API._attempt_delete_of_buildrequest (bug 1859496).

    Delete the allocations and then the build request of a server that
    has not reached a cell yet.

    Deleting a server still being built destroys its build request, and
    then (since nova commit f35930eef8, in _local_delete_cleanup) its
    allocations in placement. When placement could not be reached, that
    delete was only logged: the server was gone and nothing named its
    allocations any more, so no process would ever delete them. Here the
    allocations are deleted while the build request still exists; if
    placement cannot be reached, or fails, PlacementUnavailableForDelete
    is raised before anything is destroyed: the user gets a 503, the
    server is still there, and deleting it again once placement answers
    completes the delete. That is the only delete of the allocations:
    _local_delete_cleanup, which API._delete calls next, is told so
    through the request context and does not send another. A claim that
    lands after it, for a build whose conductor already found the build
    request, is removed by that conductor when it finds the build request
    gone (ComputeTaskManager._delete_build_request); a claim for a build
    whose conductor looks later is removed by nova's own check there.

    Why this order is safe with a conductor building the same server
    concurrently (schedule_and_build_instances: the scheduler claims, the
    instance is created in its cell, the conductor destroys the build
    request, the build is cast to a compute): if the conductor destroys
    the build request between the delete of the allocations and ours,
    this returns False and API._delete goes on with the instance the
    conductor created, which this same request deletes (locally if no
    compute has it yet, else through its compute). The server was being
    deleted anyway; it only lacks its allocations while its compute may
    still be building it.

    The build request is looked up once, as nova always did.

    When it is gone, a server still BUILDING is in a cell with no host
    yet: the scheduler has claimed for it and its build is on its way to
    the compute. API._delete then destroys its record itself and deletes
    its allocations after (_local_delete_cleanup), which during a
    placement outage left them with nothing naming them, as above. Its
    allocations are deleted first here too, or the delete refused, before
    anything is destroyed (an instance in ERROR, buried in cell0, holds
    none and is deleted as before).

    :returns: True if the build request was deleted here; False if it was
        gone (the instance is in a cell: the delete proceeds normally)
    :raises PlacementUnavailableForDelete: the allocations could not be
        deleted; nothing was
    """
    try:
        build_req = objects.BuildRequest.get_by_instance_uuid(
            context, instance.uuid)
    except exception.BuildRequestNotFound:
        if (instance.obj_attr_is_set('vm_state') and
                instance.vm_state == vm_states.BUILDING):
            _delete_allocations_or_refuse(self.placementclient, context,
                                          instance)
            _allocations_deleted(context, instance.uuid)
        return False
    _delete_allocations_or_refuse(self.placementclient, context, instance)
    try:
        build_req.destroy()
    except exception.BuildRequestNotFound:
        return False
    _allocations_deleted(context, instance.uuid)
    # Detach any volumes so that they are not orphaned.
    self._local_cleanup_bdm_volumes(
        build_req.block_device_mappings, instance, context)
    return True


def _allocations_deleted(context, instance_uuid):
    """Tell _local_delete_cleanup that this request deleted the
    allocations of the instance already.
    """
    deleted = getattr(context, ALLOCATIONS_DELETED, None)
    if deleted is None:
        deleted = set()
        setattr(context, ALLOCATIONS_DELETED, deleted)
    deleted.add(instance_uuid)


def _local_delete_cleanup(self, context, instance_uuid):
    """Replaces API._local_delete_cleanup (bug 1859496).

    Delete the allocations of an instance the API deleted and queue its
    instance mapping for deletion; the allocations only if this request
    did not delete them already, before it destroyed the build request or
    the record of a server BUILDING with no host
    (_attempt_delete_of_buildrequest): a second DELETE would only answer
    404, one placement round trip per delete of a server in BUILD.
    """
    if instance_uuid not in getattr(context, ALLOCATIONS_DELETED, ()):
        return self._local_delete_cleanup_with_allocations(context,
                                                           instance_uuid)
    try:
        self._update_queued_for_deletion(context, instance_uuid, True)
    except exception.InstanceMappingNotFound:
        LOG.info("Instance Mapping does not exist while attempting "
                 "local delete cleanup.",
                 instance_uuid=instance_uuid)


def _delete_allocations_or_refuse(reportclient, context, instance,
                                  consumer_uuid=None,
                                  consumer_type='instance'):
    """Delete the allocations of the server, or of one of its migrations
    (consumer_uuid), or refuse the delete of the server.

    :raises PlacementUnavailableForDelete: placement could not be reached,
        or failed
    """
    consumer_uuid = consumer_uuid or instance.uuid
    try:
        deleted = reportclient.delete_allocation_for_instance(
            context, consumer_uuid, consumer_type=consumer_type, force=True)
    except exception.AllocationDeleteFailed as e:
        reason = 'placement failed: %s' % e.format_message()
    except ks_exc.ClientException as e:
        reason = 'placement could not be reached: %s' % type(e).__name__
    else:
        if deleted is not None:
            return
        reason = 'placement could not be reached'
    LOG.warning('Refusing to delete the server: the allocations of %s %s '
                'could not be deleted (%s). Nothing was deleted; the delete '
                'can be retried.', consumer_type, consumer_uuid, reason,
                instance=instance)
    raise exception.PlacementUnavailableForDelete(
        instance_uuid=instance.uuid, reason=reason)


def _local_delete(self, context, instance, bdms, delete_type, cb):
    """Replaces API._local_delete (bug 1848343).

    Delete an instance whose compute is down (or that is shelved
    offloaded) from the database, and its allocations and those of its
    migrations from placement, or refuse before anything is deleted.

    nova's original removes the allocations of the instance consumer
    through the report client, which only logs a placement it cannot
    reach, and then destroys the record: during a placement outage the
    allocations were left with nothing to name them. And a server deleted
    during a move also has a migration consumer holding the source node
    (an evacuation or a revert whose compute went down), which nothing
    else removes: see delete_allocations_of_migrations.

    Here every one of those allocations is deleted first, while the
    record still names them (its task_state is already DELETING, so a
    step of a move that writes allocations later sees the delete, see
    delete_allocations_if_deleted). That includes an instance on no host
    in a cell: a build that failed on its compute (ERROR, its host nilled
    out) or an unshelve being scheduled (SHELVED_OFFLOADED) may hold a
    claim whose removal failed or has not happened yet. Only an instance
    buried in cell0 was never scheduled and holds none: nova's delete goes
    on as before. If placement cannot be reached or fails,
    PlacementUnavailableForDelete is raised before anything else is done:
    API._delete puts the server back as it was and the user gets a 503
    and can retry. An API that dies after the record is destroyed leaves
    nothing either.
    """
    cell = getattr(getattr(instance, '_context', None), 'cell_uuid', None)
    if not instance.host and cell == objects.CellMapping.CELL0_UUID:
        # Never scheduled: it holds no allocation of its own, and nova's
        # delete goes on as it did.
        self._local_delete_instance(context, instance, bdms, delete_type,
                                    cb)
        return
    _delete_allocations_or_refuse(self.placementclient, context, instance)
    for migration in compute_utils.migrations_of_instance(context,
                                                          instance.uuid):
        _delete_allocations_or_refuse(self.placementclient, context,
                                      instance, migration.uuid,
                                      'migration')
    self._local_delete_instance(context, instance, bdms, delete_type, cb)


def _delete(self, context, instance, delete_type, cb, **instance_attrs):
    """Replaces API._delete (bug 1848343).

    Delete a server, or leave it in a state that accepts another delete.

    nova saves the delete's task state (DELETING, or SOFT_DELETING) before
    it confirms a resize, deletes the server locally or asks its compute
    to. When one of those steps failed (placement unreachable during a
    local delete or during the confirm of a resize), the server was left
    in that task state, and every later DELETE was ignored ("already in
    deleting state"): no request could remove it any more. Here a delete
    that fails once it has saved its task state puts the task state back
    as it was before the request, so that the user can retry.

    A server left in a delete's task state by a delete that stopped
    before it reached the compute (_delete_left_behind) is deleted again
    rather than ignored; a DELETE of a server whose delete is under way
    is ignored before it saves anything (_delete_under_way), so that
    retries do not put that off.

    A server whose host changed under a local delete is deleted on its
    new host (_delete_on_its_new_host).

    A server that a cross-cell resize which failed or stopped left with a
    hidden copy in another cell (_hidden_copies) has that copy deleted
    too, once its own delete is done: no other request reaches it.
    """
    task_state = (instance.task_state
                  if instance.obj_attr_is_set('task_state') else None)
    if _delete_left_behind(instance, task_state):
        LOG.warning('The server has been in task state %s for more than '
                    '%d seconds: deleting it again.', task_state,
                    CONF.rpc_response_timeout, instance=instance)
        # nova's delete ignores a server in a delete's task state.
        instance.task_state = None
    elif _delete_under_way(self, context, instance, task_state):
        LOG.info('Instance is already in deleting state, ignoring this '
                 'request', instance=instance)
        return None
    hidden = (_hidden_copies(context, instance)
              if delete_type == 'delete' else [])
    try:
        try:
            result = self._delete_as_requested(context, instance,
                                               delete_type, cb,
                                               **instance_attrs)
        except exception.ObjectActionError as e:
            if e.kwargs.get('reason') != 'host changed':
                raise
            result = _delete_on_its_new_host(
                self, context, instance, delete_type, cb, instance_attrs)
    except Exception:
        with excutils.save_and_reraise_exception():
            _restore_task_state(instance, task_state,
                                instance_attrs.get('task_state'))
    for other_copy in hidden:
        try:
            cross_cell_migrate.delete_instance_of_deleted_server(
                self.compute_rpcapi, other_copy, other_copy.task_state)
        except Exception:
            LOG.exception('Unable to delete the copy of the server that '
                          'its cross-cell resize left in cell %s.',
                          other_copy._context.cell_uuid, instance=instance)
    return result


def _do_delete(self, context, instance, bdms, local=False):
    """Replaces API._do_delete (related to bug 1783613).

    Queue the instance mapping for deletion, then delete the instance
    locally or cast its delete to its compute.

    nova wrote the mapping after the cast: when the API database failed
    that write, the DELETE answered 500 while the compute deleted the
    server, and its mapping stayed not queued_for_delete, so that with
    [quota]count_usage_from_placement the quota counted the deleted
    server until its rows were archived. Here the mapping is written
    first (_queue_for_delete_or_refuse): if that fails nothing was sent,
    the user gets a 503 (API._delete puts the task state back) and can
    retry. If the delete then fails before it reaches the compute, the
    mapping is put back (_unqueue_for_delete).
    """
    _queue_for_delete_or_refuse(self, context, instance)
    try:
        if local:
            instance.vm_state = vm_states.DELETED
            instance.task_state = None
            instance.terminated_at = timeutils.utcnow()
            instance.save()
        else:
            self.compute_rpcapi.terminate_instance(context, instance,
                                                   bdms)
    except Exception:
        with excutils.save_and_reraise_exception():
            _unqueue_for_delete(self, context, instance)


def _do_soft_delete(self, context, instance, bdms, local=False):
    """Replaces API._do_soft_delete (related to bug 1783613).

    The same as _do_delete, for a soft delete: the mapping is queued for
    deletion before the soft delete is sent or done, or the soft delete
    refused with a 503.
    """
    _queue_for_delete_or_refuse(self, context, instance)
    try:
        if local:
            instance.vm_state = vm_states.SOFT_DELETED
            instance.task_state = None
            instance.terminated_at = timeutils.utcnow()
            instance.save()
        else:
            self.compute_rpcapi.soft_delete_instance(context, instance)
    except Exception:
        with excutils.save_and_reraise_exception():
            _unqueue_for_delete(self, context, instance)


def _queue_for_delete_or_refuse(compute_api, context, instance):
    """Queue the instance mapping for deletion, or refuse the delete.

    :raises DatabaseUnavailableForDelete: the API database failed the
        write; nothing of the delete was done
    """
    try:
        compute_api._update_queued_for_deletion(context, instance.uuid,
                                                True)
    except db_exc.DBError as e:
        LOG.warning('Refusing to delete the server: its instance mapping '
                    'could not be queued for deletion (%s). Nothing was '
                    'deleted; the delete can be retried.',
                    type(e).__name__, instance=instance)
        raise exception.DatabaseUnavailableForDelete(
            instance_uuid=instance.uuid, reason=type(e).__name__)


def _unqueue_for_delete(compute_api, context, instance):
    """Put back the instance mapping of a delete that did not happen."""
    try:
        compute_api._update_queued_for_deletion(context, instance.uuid,
                                                False)
    except Exception:
        # The delete's own error is the one the user gets; the mapping
        # stays queued and the quota counts the server no more until it
        # is deleted again or restored.
        LOG.exception('The delete failed, and so did putting its '
                      'instance mapping back.', instance=instance)


def _delete_left_behind(instance, task_state):
    """Whether a delete left the server in its task state and stopped.

    nova's API._delete saves the delete's task state (DELETING, or
    SOFT_DELETING) and then casts the delete to the server's compute;
    every later DELETE of a server in that task state whose compute is
    up is ignored ("already in deleting state"), as the delete is under
    way. An API process that stops in between (restarted, killed, its
    worker recycled) or a cast the message bus loses leaves the server
    in that task state with no delete under way, and no request could
    move it out any more. A delete task state that nothing has updated
    for longer than an RPC call waits for its reply
    ([DEFAULT]rpc_response_timeout) is taken as left behind: the delete
    is sent again. If the first is still running on the compute after
    all, the second waits for the instance's lock and finds the server
    gone.
    """
    if task_state not in (task_states.DELETING, task_states.SOFT_DELETING):
        return False
    updated_at = (instance.updated_at
                  if instance.obj_attr_is_set('updated_at') else None)
    return (updated_at is not None and
            timeutils.is_older_than(updated_at, CONF.rpc_response_timeout))


def _delete_under_way(compute_api, context, instance, task_state):
    """Whether nova's delete would ignore this DELETE as one under way:
    the server is in a delete's task state on a host whose compute is up.

    nova's API._delete decides that only after it has saved the instance
    (the request's task state, progress 0), and that save refreshes
    updated_at: each ignored DELETE restarted the time _delete_left_behind
    waits for, so that a client retrying more often than
    [DEFAULT]rpc_response_timeout never had a server a stopped delete left
    behind deleted. Decided here first, with the same lookups, the
    request is ignored with nothing saved. A server on no host, or whose
    compute is down or unknown, goes on to nova's delete (a local one).
    """
    if (task_state not in (task_states.DELETING,
                           task_states.SOFT_DELETING) or
            not instance.obj_attr_is_set('host') or not instance.host):
        return False
    try:
        service = objects.Service.get_by_compute_host(context.elevated(),
                                                      instance.host)
    except exception.ComputeHostNotFound:
        return False
    return compute_api.servicegroup_api.service_is_up(service)


def _delete_on_its_new_host(compute_api, context, instance, delete_type,
                            cb, instance_attrs):
    """Delete a server that was put on a host while the API deleted it
    locally as a server on no host.

    A server read on no host (shelved offloaded, or a build that failed
    and is rescheduled) is deleted locally: its record is saved DELETED,
    then destroyed on the condition that it still has no host. When an
    unshelve's or a reschedule's claim lands in between, the compute has
    put the server on its host and Instance.destroy refuses ("host
    changed"): nova answered 500, and left the server DELETED on that
    host, with whatever the compute goes on to build there. The server
    is read again and deleted once more, now as the API deletes a server
    on that host: through its compute when it is up (which waits for the
    build under the instance's lock, then removes the guest, the
    allocations and the record), or locally again when it is down.
    """
    LOG.info('The server was put on a host while it was deleted as a '
             'server on no host; deleting it on its new host.',
             instance=instance)
    try:
        instance.refresh()
    except exception.InstanceNotFound:
        return None
    return compute_api._delete_as_requested(context, instance, delete_type,
                                             cb, **instance_attrs)


def _hidden_copies(context, instance):
    """The copies of a server that a cross-cell resize which failed or
    stopped left hidden in another cell, for its delete to delete too.

    A cross-cell resize has a copy of the server in each cell, and only
    its successful confirm or revert deletes the one it leaves (the
    conductor hard-deletes it). When the confirm or the revert fails, or
    its call to a compute gets no reply, or its conductor stops, the
    server is left in ERROR (or RESIZED) with the other copy hidden in
    the other cell: a DELETE deleted only the copy the instance mapping
    names, and no process reaches the other cell's copy again. Only a
    server with a host in ERROR or RESIZED can be in that state: its
    migrations that may still hold allocations are read in its cell (one
    query), and for each cross-cell one, the server's copy in the other
    host's cell, if it is there and hidden. A server whose termination is
    disabled is not deleted, nor is its copy. A lookup that fails costs
    the delete nothing: the copy is left, as nova did.

    :returns: the hidden copies, Instances targeted at their cells
    """
    ictxt = getattr(instance, '_context', None)
    if (ictxt is None or getattr(ictxt, 'cell_uuid', None) is None or
            not instance.obj_attr_is_set('host') or not instance.host or
            instance.vm_state not in (vm_states.ERROR, vm_states.RESIZED)):
        return []
    if instance.disable_terminate:
        # nova's _delete returns without deleting such a server: its
        # hidden copy holds the allocations of the server's consumer too.
        return []
    copies = []
    try:
        migrations = compute_utils.migrations_of_instance(ictxt,
                                                          instance.uuid)
        for migration in migrations:
            if not migration.cross_cell_move:
                continue
            other = (migration.source_compute
                     if instance.host == migration.dest_compute
                     else migration.dest_compute)
            if not other:
                continue
            try:
                cell = objects.HostMapping.get_by_host(
                    ictxt, other).cell_mapping
            except exception.HostMappingNotFound:
                continue
            if cell.uuid == ictxt.cell_uuid:
                continue
            cctxt = context.elevated()
            nova_context.set_target_cell(cctxt, cell)
            try:
                other_copy = objects.Instance.get_by_uuid(
                    cctxt, instance.uuid)
            except exception.InstanceNotFound:
                continue
            if other_copy.hidden:
                copies.append(other_copy)
    except Exception:
        LOG.exception('Unable to look for copies of the server that a '
                      'cross-cell resize left in another cell.',
                      instance=instance)
    return copies


def _restore_task_state(instance, task_state, delete_task_state):
    """Put back the task state a failed delete saved, if it did."""
    if (delete_task_state is None or
            not instance.obj_attr_is_set('id') or
            not instance.obj_attr_is_set('task_state') or
            instance.task_state != delete_task_state):
        return
    instance.task_state = task_state
    try:
        instance.save(expected_task_state=[delete_task_state])
    except (exception.InstanceNotFound,
            exception.UnexpectedTaskStateError) as e:
        LOG.info('The delete failed; the task state it set was not put '
                 'back: %s', e, instance=instance)
    except Exception:
        # The database failed too: the delete's own error is the one the
        # user gets.
        LOG.exception('The delete failed, and so did putting its task '
                      'state back.', instance=instance)
    else:
        LOG.info('The delete failed; the task state is back to %s: the '
                 'delete can be retried.', task_state, instance=instance)


def _confirm_resize_on_deleting(self, context, instance):
    """Replaces API._confirm_resize_on_deleting (bug 1848343).

    Confirm the resize of a server being deleted; if that fails while
    placement is unreachable, or gets no reply, refuse the delete with a
    retryable error.

    The source compute's confirm fails when it cannot reach placement,
    and nova's DELETE then answered 500 (the error went through the
    servers controller as it came), with the server left in its delete
    task state. Here such a failure, when placement does not answer the
    API either, is PlacementUnavailableForDelete: a 503 telling the user
    to retry (API._delete puts the task state back). A confirm whose RPC
    call times out (the request or its reply was lost) answered 500 too:
    it is ConfirmNotAnsweredForDelete, the same 503. Any other failure is
    raised as it was. Nothing is asked of placement while the confirm
    succeeds.
    """
    try:
        self._confirm_resize_before_delete(context, instance)
    except oslo_exceptions.MessagingTimeout as error:
        LOG.warning('Refusing to delete the server: the confirm of its '
                    'resize got no reply (%s). The delete can be retried.',
                    error, instance=instance)
        raise exception.ConfirmNotAnsweredForDelete(
            instance_uuid=instance.uuid, reason=type(error).__name__)
    except Exception as error:
        reason = _placement_unavailable(self.placementclient, context,
                                        instance)
        if reason is None:
            raise
        LOG.warning('Refusing to delete the server: the confirm of its '
                    'resize failed (%s) and %s. The delete can be '
                    'retried.', type(error).__name__, reason,
                    instance=instance)
        raise exception.PlacementUnavailableForDelete(
            instance_uuid=instance.uuid, reason=reason)


def _placement_unavailable(reportclient, context, instance):
    """Why placement cannot serve a delete now, or None if it answers."""
    try:
        reportclient.get_allocs_for_consumer(context, instance.uuid)
    except exception.ConsumerAllocationRetrievalFailed as e:
        return 'placement failed: %s' % e.format_message()
    except ks_exc.ClientException as e:
        return 'placement could not be reached: %s' % type(e).__name__
    return None
