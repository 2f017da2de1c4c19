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

"""Drop-in code for nova.cmd.manage (the placement audit's live claims).

``nova-manage placement audit`` called a consumer an orphan unless it was
an instance recorded on the node or a migration in progress there, so
``--delete`` removed the claims of builds and moves in flight: the
scheduler claims a node before the instance is recorded on it. A
consumer nothing on the node accounts for is now an orphan only when
nothing may still use what it holds.
"""

import os_resource_classes as orc

from nova.compute import vm_states
from nova import context
from nova import exception
from nova.i18n import _
from nova import objects


def _check_orphaned_allocations_for_provider(self, ctxt, placement,
                                             output, provider,
                                             delete):
    """Replaces PlacementCommands._check_orphaned_allocations_for_provider.

    Finds orphaned allocations for a specific resource provider.

    :param ctxt: nova.context.RequestContext
    :param placement: nova.scheduler.client.report.SchedulerReportClient
        to communicate with the Placement service API.
    :param output: function that takes a single message for verbose output
    :param provider: Resource Provider to look at.
    :param delete: deletes the found orphaned allocations.
    :return: a tuple (<number of orphaned allocs>, <number of faults>)
    """
    num_processed = 0
    faults = 0

    # TODO(sbauza): Are we sure we have all Nova RCs ?
    # FIXME(sbauza): Possibly use consumer types once Placement API
    # supports them.
    # NOTE(sbauza): We check allocations having *any* below RC, not having
    # *all* of them.
    NOVA_RCS = [orc.VCPU, orc.MEMORY_MB, orc.DISK_GB, orc.VGPU,
                orc.NET_BW_EGR_KILOBIT_PER_SEC,
                orc.NET_BW_IGR_KILOBIT_PER_SEC,
                orc.PCPU, orc.MEM_ENCRYPTION_CONTEXT]

    # Since the RP can be a child RP, we need to get the root RP as it's
    # the compute node UUID
    # NOTE(sbauza): In case Placement doesn't support 1.14 microversion,
    # that means we don't have nested RPs.
    # Since we ask for microversion 1.14, all RPs have a root RP UUID.
    cn_uuid = provider.get("root_provider_uuid")
    # Now get all the existing instances and active migrations for this
    # compute node
    result = self._get_instances_and_current_migrations(ctxt, cn_uuid)
    if result is False:
        # We don't want to hard stop here because the compute service could
        # have disappear while we could still have orphaned allocations.
        output(_('The compute node for UUID %s can not be '
                 'found') % cn_uuid)
    inst_uuids, mig_uuids = result or ([], [])
    try:
        pallocs = placement.get_allocations_for_resource_provider(
            ctxt, provider['uuid'])
    except exception.ResourceProviderAllocationRetrievalFailed:
        print(_('Not able to find allocations for resource '
                'provider %s.') % provider['uuid'])
        raise

    # Verify every allocations for each consumer UUID
    for consumer_uuid, consumer_resources in pallocs.allocations.items():
        consumer_allocs = consumer_resources['resources']
        if any(rc in NOVA_RCS
               for rc in consumer_allocs):
            # We reset the consumer type for each allocation
            consumer_type = None
            # This is an allocation for Nova resources
            # We need to guess whether the instance was deleted
            # or if the instance is currently migrating
            if not (consumer_uuid in inst_uuids or
                    consumer_uuid in mig_uuids):
                # Nothing on this node accounts for the consumer. It is
                # orphaned only if nothing may still use what it holds:
                # a build or a move claims this node before its
                # instance or migration is recorded here.
                consumer_type, reason = self._orphaned_consumer(
                    ctxt, consumer_uuid, cn_uuid)
                if reason is not None:
                    output(_('Allocations of consumer UUID '
                             '%(consumer_uuid)s on Resource Provider '
                             '%(rp)s are left alone: %(reason)s.')
                           % {'consumer_uuid': consumer_uuid,
                              'rp': provider['uuid'], 'reason': reason})
                    consumer_type = None
            if consumer_type is not None:
                output(_('Allocations were set against consumer UUID '
                         '%(consumer_uuid)s but no existing instances or '
                         'active migrations are related. ')
                       % {'consumer_uuid': consumer_uuid})
                if delete:
                    deleted = self._delete_allocations_from_consumer(
                        ctxt, placement, provider, consumer_uuid,
                        consumer_type)
                    if not deleted:
                        print(_('Not able to delete allocations '
                                'for consumer UUID %s')
                              % consumer_uuid)
                        faults += 1
                        continue
                    output(_('Deleted allocations for consumer UUID '
                             '%(consumer_uuid)s on Resource Provider '
                             '%(rp)s: %(allocations)s')
                           % {'consumer_uuid': consumer_uuid,
                              'rp': provider['uuid'],
                              'allocations': consumer_allocs})
                else:
                    output(_('Allocations for consumer UUID '
                             '%(consumer_uuid)s on Resource Provider '
                             '%(rp)s can be deleted: '
                             '%(allocations)s')
                           % {'consumer_uuid': consumer_uuid,
                              'rp': provider['uuid'],
                              'allocations': consumer_allocs})
                num_processed += 1
    return (num_processed, faults)


def _orphaned_consumer(self, ctxt, consumer_uuid, cn_uuid):
    """Added to PlacementCommands.

    Whether the allocations of a consumer that no instance on the node
    ``cn_uuid`` and no migration in progress there account for are
    orphaned: (consumer type, None) if nothing may still use them, or
    (consumer type, why they are left alone). Left alone are:

    - a build in flight (a build request, or an instance building with
      no host yet), and any instance with a task state;
    - a live server on another host: its allocations are misplaced, not
      orphaned, and deleting them would leave it holding less than its
      guest uses;
    - a migration in progress anywhere, and the migration of a move that
      is over whose server runs on this node: what it holds is what the
      server uses;
    - a consumer whose records are in a cell that cannot be read.

    Orphaned are a deleted or archived server's, a server's that runs
    nowhere (an instance with no host that is not building), and a
    migration's whose move is over and whose server runs elsewhere or is
    gone. Made only for a consumer the node does not account for.
    """
    try:
        objects.BuildRequest.get_by_instance_uuid(ctxt, consumer_uuid)
        return 'instance', _('a build request exists, the build is going')
    except exception.BuildRequestNotFound:
        pass
    try:
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            ctxt, consumer_uuid)
    except exception.InstanceMappingNotFound:
        return self._orphaned_migration(ctxt, consumer_uuid, cn_uuid)
    if mapping.cell_mapping is None:
        # Neither a build request nor a cell: a build deleted before it
        # was scheduled.
        return 'instance', None
    instance, reason = self._live_instance(ctxt, mapping.cell_mapping,
                                           consumer_uuid)
    if reason is not None or instance is None:
        return 'instance', reason
    if instance.task_state is not None:
        return 'instance', _('its server has task state %s, an operation '
                             'is going') % instance.task_state
    if instance.host is None:
        if instance.vm_state == vm_states.BUILDING:
            return 'instance', _('its server is building, with no host '
                                 'yet')
        # Not building and no host (a failed build, a shelved offloaded
        # server): its guest runs nowhere.
        return 'instance', None
    return 'instance', _('its server lives on %(host)s (%(node)s): the '
                         'allocations are misplaced, not orphaned') % {
        'host': instance.host, 'node': instance.node}


def _orphaned_migration(self, ctxt, consumer_uuid, cn_uuid):
    """Added to PlacementCommands.

    The verdict of _orphaned_consumer for a consumer that is not an
    instance: a migration, or a consumer nova does not know.
    """
    results = context.scatter_gather_skip_cell0(
        ctxt, objects.Migration.get_by_uuid, consumer_uuid)
    migration = None
    unread = []
    for cell_uuid, result in results.items():
        if isinstance(result, exception.MigrationNotFound):
            continue
        if context.is_cell_failure_sentinel(result):
            unread.append(cell_uuid)
            continue
        migration = result
    if migration is None:
        if unread:
            return 'migration', _('cells %s cannot be read') % ', '.join(
                sorted(unread))
        # Unknown to nova: a deleted and archived server's.
        return 'instance', None
    if migration.status not in ('confirmed', 'reverted', 'error',
                                'failed', 'completed', 'cancelled',
                                'done'):
        return 'migration', _('migration %(uuid)s is %(status)s, the move '
                              'is going') % {'uuid': migration.uuid,
                                             'status': migration.status}
    try:
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            ctxt, migration.instance_uuid)
    except exception.InstanceMappingNotFound:
        return 'migration', None
    if mapping.cell_mapping is None:
        return 'migration', None
    instance, reason = self._live_instance(ctxt, mapping.cell_mapping,
                                           migration.instance_uuid)
    if reason is not None or instance is None:
        return 'migration', reason
    if instance.task_state is not None:
        return 'migration', _('its server has task state %s, an operation '
                              'is going') % instance.task_state
    node = self.cn_uuid_mapping.get(cn_uuid)
    if node and (instance.host, instance.node) == tuple(node[1:]):
        return 'migration', _('the move is over (%(status)s) but its '
                              'server runs on this node: the allocations '
                              'are misplaced, not orphaned') % {
            'status': migration.status}
    return 'migration', None


def _live_instance(self, ctxt, cell_mapping, instance_uuid):
    """Added to PlacementCommands.

    (the instance, None) if it is not deleted, (None, None) if it is
    deleted or gone, (None, why) if its cell cannot be read.
    """
    result = context.scatter_gather_single_cell(
        ctxt, cell_mapping, objects.Instance.get_by_uuid, instance_uuid,
        expected_attrs=[])[cell_mapping.uuid]
    if isinstance(result, exception.InstanceNotFound):
        return None, None
    if context.is_cell_failure_sentinel(result):
        return None, _('cell %s cannot be read') % (
            cell_mapping.name or cell_mapping.uuid)
    return result, None
