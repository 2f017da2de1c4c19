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

"""Drop-ins for nova/conductor/manager.py."""

from oslo_log import log as logging

from nova import exception
from nova import objects

LOG = logging.getLogger(__name__)


def _cleanup_build_artifacts(self, context, exc, instances, build_requests,
                             request_specs, block_device_mappings, tags,
                             cell_mapping_cache):
    """Replaces ComputeTaskManager._cleanup_build_artifacts (bug 1859496).

    Clean up a failed build, and the claims of what reached no host.

    schedule_and_build_instances calls it when the quota recheck fails, or
    when filling the resource provider mapping or binding the accelerator
    requests of an instance fails: nova's original puts the instances in
    ERROR in their cell and destroys their build requests, but keeps the
    allocations the scheduler claimed for them. Such a server never ran on
    the host it holds capacity on and no resource tracker accounts for it
    (the update_available_resource periodic skips instances on no host).
    A compute that fails a build drops the claim, and so does the
    conductor when the quota recheck of an unshelve fails; here it stays
    until the user deletes the server (and, with
    [quota]count_usage_from_placement, counts as the user's cores and RAM).

    This runs nova's original, then deletes the allocations of the
    instances it handled that were never handed to a compute host.

    Which instances were never handed to a compute: nova's original also
    puts in ERROR the instances that schedule_and_build_instances had
    already cast to their compute before the failure, and those keep their
    allocations (the compute builds them, and its delete removes them). An
    instance is mapped to its cell right before that cast, and its mapping
    has no cell until then (the original maps every instance it handles,
    hence the mappings are read before it runs). The only mapped instance
    that was not handed over is the one whose accelerator binding failed,
    mapped just before the binding: it keeps its allocations, as on
    vanilla nova, until it is deleted.

    Nothing here may hide the build failure being re-raised around this
    call or skip nova's own cleanup: a failed lookup deletes nothing, and a
    failed delete is logged, not raised (the allocations go when the server
    is deleted, and ``nova-manage placement audit --delete`` finds them).
    """
    never_mapped = _never_mapped(context, instances)
    self._error_out_build_artifacts(
        context, exc, instances, build_requests, request_specs,
        block_device_mappings, tags, cell_mapping_cache)
    for instance in instances:
        if instance is not None and instance.uuid in never_mapped:
            _delete_allocations(self.report_client, context, instance)


def _bury_in_cell0(self, context, request_spec, exc,
                   build_requests=None, instances=None,
                   block_device_mapping=None,
                   tags=None):
    """Replaces ComputeTaskManager._bury_in_cell0 (bug 1859496).

    Ensure all provided build_requests and instances end up in cell0,
    holding no claim in placement.

    schedule_and_build_instances buries the servers it could not schedule
    in cell0, in ERROR. When the scheduler did claim for them (its reply
    was lost on the message bus and the conductor got MessagingTimeout,
    or the host it picked has no host mapping), nova's original keeps the
    claim: capacity on a compute host (and, with
    [quota]count_usage_from_placement, the user's cores and RAM) is held
    by a server that never reached it, until the user deletes it. No
    resource tracker accounts for it: it is on no host.

    This runs nova's original, then deletes the allocations of the
    instances it buried: those whose instance mapping now names cell0
    (the original leaves alone an instance already mapped to another
    cell).
    """
    self._bury_instances_in_cell0(
        context, request_spec, exc, build_requests=build_requests,
        instances=instances, block_device_mapping=block_device_mapping,
        tags=tags)
    by_uuid = {request.instance_uuid: request.instance
               for request in build_requests or []}
    by_uuid.update((inst.uuid, inst) for inst in instances or [])
    for uuid in _mapped_to_cell0(context, sorted(by_uuid)):
        _delete_allocations(self.report_client, context, by_uuid[uuid])


def _mapped_to_cell0(context, uuids):
    """UUIDs of the instances whose instance mapping names cell0."""
    return {mapping.instance_uuid
            for mapping in _instance_mappings(context, uuids)
            if mapping.cell_mapping is not None and
            mapping.cell_mapping.uuid == objects.CellMapping.CELL0_UUID}


def _never_mapped(context, instances):
    """UUIDs of the instances whose instance mapping has no cell yet."""
    uuids = [instance.uuid for instance in instances if instance is not None]
    return {mapping.instance_uuid
            for mapping in _instance_mappings(context, uuids)
            if mapping.cell_mapping is None}


def _instance_mappings(context, uuids):
    """The instance mappings of these instances; none if unreadable (the
    caller then keeps their allocations).
    """
    if not uuids:
        return []
    try:
        return objects.InstanceMappingList.get_by_instance_uuids(
            context, uuids)
    except Exception:
        LOG.exception('Unable to read the instance mappings of instances %s; '
                      'their allocations are kept.', ', '.join(uuids))
        return []


def _delete_allocations(reportclient, context, instance):
    try:
        # safe_connect returns None when placement cannot be reached.
        deleted = reportclient.delete_allocation_for_instance(
            context, instance.uuid, force=True)
    except exception.AllocationDeleteFailed as e:
        reason = e.format_message()
        deleted = None
    except Exception as e:
        reason = str(e)
        deleted = None
    else:
        reason = 'placement could not be reached'
    if deleted is None:
        LOG.error('Unable to delete the allocations of the instance, which '
                  'failed to build and never reached a compute host (%s); '
                  'they are removed when the server is deleted.', reason,
                  instance=instance)
    elif deleted:
        LOG.info('Deleted the allocations of the instance, which failed to '
                 'build and never reached a compute host.',
                 instance=instance)


def _delete_build_request(self, context, build_request, instance, cell,
                          instance_bdms, instance_tags):
    """Replaces ComputeTaskManager._delete_build_request (bug 1859496).

    Delete a build request after creating the instance in the cell; when
    the build request is already gone (the user deleted the server), undo
    the build, the scheduler's claim included.

    The API deletes a server in BUILD by deleting its allocations and then
    its build request (API._attempt_delete_of_buildrequest), once each. A
    claim that lands between those two, for a build whose conductor
    already found the build request, is seen by nobody but this
    conductor: it finds the build request gone here, and nova's original
    destroys the instance record it created and keeps the claim. The claim
    is this conductor's own, made for a server that no longer exists, so
    it is deleted here.

    :returns: True if the build request was deleted, False if it was gone
        (the instance is destroyed, and its allocations)
    """
    if self._destroy_built_instance(context, build_request, instance, cell,
                                    instance_bdms, instance_tags):
        return True
    try:
        self.report_client.delete_allocation_for_instance(
            context, instance.uuid, force=True)
    except Exception:
        LOG.exception('Unable to delete the allocations of the instance, '
                      'deleted while it was being built; "nova-manage '
                      'placement audit --delete" finds them.',
                      instance=instance)
    return False
