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

import collections

import os_resource_classes as orc

from nova.cmd import common as cmd_common
from nova.compute import vm_states
from nova import context
from nova import exception
from nova.i18n import _
from nova import objects
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils


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
                consumer_type, reason, _misplaced = (
                    self._orphaned_consumer(ctxt, consumer_uuid, cn_uuid))
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
    orphaned: (consumer type, None, None) if nothing may still use them,
    or (consumer type, why they are left alone, misplaced). ``misplaced``
    is the evidence for allocations that are misplaced, not orphaned (a
    live server's away from its node, a migration's that its server
    needs): (the server's instance, the migration or None, the server's
    cell mapping); None for the others. Left alone are:

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
        return 'instance', _('a build request exists, the build is '
                             'going'), None
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
        return 'instance', None, None
    instance, reason = self._live_instance(ctxt, mapping.cell_mapping,
                                           consumer_uuid)
    if reason is not None or instance is None:
        return 'instance', reason, None
    if instance.task_state is not None:
        return 'instance', _('its server has task state %s, an operation '
                             'is going') % instance.task_state, None
    if instance.host is None:
        if instance.vm_state == vm_states.BUILDING:
            return 'instance', _('its server is building, with no host '
                                 'yet'), None
        # Not building and no host (a failed build, a shelved offloaded
        # server): its guest runs nowhere.
        return 'instance', None, None
    return 'instance', _('its server lives on %(host)s (%(node)s): the '
                         'allocations are misplaced, not orphaned') % {
        'host': instance.host, 'node': instance.node}, (
        instance, None, mapping.cell_mapping)


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
                sorted(unread)), None
        # Unknown to nova: a deleted and archived server's.
        return 'instance', None, None
    if migration.status not in ('confirmed', 'reverted', 'error',
                                'failed', 'completed', 'cancelled',
                                'done'):
        going = _('migration %(uuid)s is %(status)s, the move is '
                  'going') % {'uuid': migration.uuid,
                              'status': migration.status}
        return 'migration', going, None
    try:
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            ctxt, migration.instance_uuid)
    except exception.InstanceMappingNotFound:
        return 'migration', None, None
    if mapping.cell_mapping is None:
        return 'migration', None, None
    instance, reason = self._live_instance(ctxt, mapping.cell_mapping,
                                           migration.instance_uuid)
    if reason is not None or instance is None:
        return 'migration', reason, None
    if instance.task_state is not None:
        return 'migration', _('its server has task state %s, an operation '
                              'is going') % instance.task_state, None
    node = self.cn_uuid_mapping.get(cn_uuid)
    if node and (instance.host, instance.node) == tuple(node[1:]):
        return 'migration', _('the move is over (%(status)s) but its '
                              'server runs on this node: the allocations '
                              'are misplaced, not orphaned') % {
            'status': migration.status}, (
            instance, migration, mapping.cell_mapping)
    return 'migration', None, None


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


@cmd_common.action_description(
    _("Audits orphaned allocations that are no longer corresponding to "
      "existing instance resources, and with --heal moves misplaced "
      "allocations to where their server runs. This command requires "
      "that the [api_database]/connection and [placement] configuration "
      "options are set."))
@cmd_common.args('--verbose', action='store_true', dest='verbose',
                 default=False,
                 help='Provide verbose output during execution.')
@cmd_common.args('--resource_provider', metavar='<provider_uuid>',
                 dest='provider_uuid',
                 help='UUID of a specific resource provider to verify.')
@cmd_common.args('--delete', action='store_true', dest='delete',
                 default=False,
                 help='Deletes orphaned allocations that were found.')
@cmd_common.args('--heal', action='store_true', dest='heal', default=False,
                 help='Moves misplaced allocations (a live server\'s on a '
                      'node its guest is not on, a migration\'s of a move '
                      'that is over on the node its server runs on) to '
                      'the server on its node, with the consumer '
                      'generations read: an allocation written meanwhile '
                      'is not overwritten.')
def audit(self, verbose=False, provider_uuid=None, delete=False,
          heal=False):
    """Replaces PlacementCommands.audit (the placement audit's heal).

    Provides information about orphaned allocations that can be removed.

    With ``heal``, misplaced allocations are moved too.

    The audit runs as before (_audit_as_nova_does), which leaves misplaced
    allocations alone; with ``heal``, a second pass over the same
    providers (_heal_misplaced_allocations) moves them.

    Return codes:

    * 0: Command completed successfully and no orphaned allocations exist.
    * 1: An unexpected error happened during run.
    * 3: Orphaned or misplaced allocations were detected.
    * 4: Orphaned allocations were detected and deleted, or misplaced ones
      healed.
    * 127: Invalid input.
    """
    result = self._audit_as_nova_does(verbose=verbose,
                                      provider_uuid=provider_uuid,
                                      delete=delete)
    if not heal or result not in (0, 3, 4):
        return result
    output = print if verbose else (lambda msg: None)
    healed, faults = self._heal_misplaced_allocations(
        output, provider_uuid)
    if faults:
        print(_('Some misplaced allocations could not be healed. Please '
                'fix the problem by hand and run again.'))
        return 1
    if healed:
        output(_('Healed %d misplaced allocation(s).') % healed)
        return 4
    return result


def _heal_misplaced_allocations(self, output, provider_uuid=None):
    """Added to PlacementCommands.

    The heal's pass of the audit.

    On each resource provider (or the one named) whose root is a
    compute node, every consumer that nothing on the node accounts for
    and that _orphaned_consumer finds misplaced is healed
    (_heal_misplaced). A sharing provider's consumers are not on any
    node and are left alone.

    :returns: (the number healed, the number that failed)
    """
    ctxt = context.get_admin_context()
    placement = report.report_client_singleton()
    if provider_uuid:
        providers = [self._get_resource_provider(ctxt, placement,
                                                 provider_uuid)]
    else:
        providers = self._get_resource_providers(ctxt, placement)
    healed = faults = 0
    # What the audit's pass read of the nodes' instances may be stale.
    self.instances_mapping = collections.defaultdict(list)
    for provider in providers:
        cn_uuid = provider.get('root_provider_uuid')
        accounted = self._get_instances_and_current_migrations(ctxt,
                                                               cn_uuid)
        if accounted is False:
            continue
        inst_uuids, mig_uuids = accounted
        allocations = placement.get_allocations_for_resource_provider(
            ctxt, provider['uuid']).allocations
        for consumer_uuid in allocations:
            if consumer_uuid in inst_uuids or consumer_uuid in mig_uuids:
                continue
            _type, _reason, misplaced = self._orphaned_consumer(
                ctxt, consumer_uuid, cn_uuid)
            if misplaced is None:
                continue
            done, how = self._heal_misplaced(ctxt, placement, cn_uuid,
                                             consumer_uuid)
            if done is None:
                print(_('Not able to heal allocations for consumer UUID '
                        '%(consumer)s: %(how)s') % {
                    'consumer': consumer_uuid, 'how': how})
                faults += 1
            elif done:
                output(_('Healed allocations of consumer UUID '
                         '%(consumer)s on Resource Provider %(rp)s: '
                         '%(how)s.') % {'consumer': consumer_uuid,
                                        'rp': provider['uuid'],
                                        'how': how})
                healed += 1
            else:
                output(_('Allocations of consumer UUID %(consumer)s on '
                         'Resource Provider %(rp)s are left alone: '
                         '%(how)s.') % {'consumer': consumer_uuid,
                                        'rp': provider['uuid'],
                                        'how': how})
    return healed, faults


#: How many times the heal of one consumer reads it again when placement
#: refuses its write because an allocation was written meanwhile.
HEAL_ATTEMPTS = 3
#: The resource classes the heal puts on a compute node's root provider
#: for a server holding nothing where its guest runs. A flavor asking for
#: others (held by nested providers) is left to heal_allocations.
ROOT_RESOURCE_CLASSES = (orc.VCPU, orc.PCPU, orc.MEMORY_MB, orc.DISK_GB)


def _heal_misplaced(self, ctxt, placement, cn_uuid, consumer_uuid):
    """Added to PlacementCommands.

    Heal the misplaced allocations of ``consumer_uuid``.

    They are on the compute node ``cn_uuid``. The consumers'
    allocations (and their generations) are read first, then the records
    are read again and the verdict made again (_orphaned_consumer):
    every write requires the generations read, so that an allocation
    written after the verdict (a move's or a build's claim) makes
    placement refuse it, and the consumer is read again, up to
    HEAL_ATTEMPTS times; nothing is overwritten.

    - A live server holding this node though its guest runs on another:
      what it holds in this node's tree is removed, and if it then holds
      nothing in the tree of its own node, its flavor is put there; but
      then only if its flavor and what it holds here are of the root
      provider's classes (ROOT_RESOURCE_CLASSES): a port's bandwidth on
      a child provider would otherwise be lost.
    - The migration of a move that is over holding this node, where its
      server runs: if the server holds nothing in this node's tree, what
      the migration holds here is moved to it (one request for both
      consumers); if it does, the migration's part is removed.

    :returns: (True, what was done), (False, why it was left alone), or
        (None, why it failed)
    """
    tree = {rp['uuid'] for rp in placement.get_providers_in_tree(
        ctxt, cn_uuid)}
    for attempt in range(HEAL_ATTEMPTS):
        _type, reason, misplaced = self._orphaned_consumer(
            ctxt, consumer_uuid, cn_uuid)
        if misplaced is None:
            return False, reason or _('no longer misplaced')
        server_uuid = misplaced[0].uuid
        held = placement.get_allocs_for_consumer(ctxt, consumer_uuid)
        server = (held if server_uuid == consumer_uuid else
                  placement.get_allocs_for_consumer(ctxt, server_uuid))
        # The verdict again, on records read after the generations.
        _type, reason, misplaced = self._orphaned_consumer(
            ctxt, consumer_uuid, cn_uuid)
        if misplaced is None or misplaced[0].uuid != server_uuid:
            return False, reason or _('no longer misplaced')
        instance, migration, cell_mapping = misplaced
        if not tree & set(held['allocations']):
            return False, _('it holds nothing on this node any more')
        try:
            if migration is None:
                done = self._heal_misplaced_server(
                    ctxt, placement, instance, cell_mapping, held, tree)
            else:
                done = self._heal_ended_move(
                    ctxt, placement, instance, migration, held, server,
                    tree)
        except exception.AllocationUpdateFailed:
            continue
        return done
    return False, _('its allocations changed %d times while it was being '
                    'healed; run the audit again') % HEAL_ATTEMPTS


def _heal_misplaced_server(self, ctxt, placement, instance, cell_mapping,
                           held, tree):
    """Added to PlacementCommands.

    Heal a live server's allocations on a node its guest is not on.

    ``tree`` is that node's provider tree (see _heal_misplaced).

    :returns: (True, what was done), (False, why it was left alone), or
        (None, why it failed)
    :raises: AllocationUpdateFailed when placement refused the write for
        a consumer generation: written meanwhile, to be read again
    """
    with context.target_cell(ctxt, cell_mapping) as cctxt:
        try:
            node = objects.ComputeNode.get_by_host_and_nodename(
                cctxt, instance.host, instance.node)
        except exception.ComputeHostNotFound:
            return False, _('its node %s is not known') % instance.node
    if node.uuid in tree:
        return False, _('its server now runs on this node')
    own = {rp['uuid'] for rp in placement.get_providers_in_tree(
        ctxt, node.uuid)}
    allocations = {rp: {'resources': alloc['resources']}
                   for rp, alloc in held['allocations'].items()
                   if rp not in tree}
    how = _('removed from this node')
    if not own & set(allocations):
        resources = scheduler_utils.resources_from_flavor(instance,
                                                          instance.flavor)
        if not set(resources) <= set(ROOT_RESOURCE_CLASSES):
            return False, _('it holds nothing on its node %s and its '
                            'flavor needs resources of nested providers: '
                            'run "nova-manage placement heal_allocations" '
                            'once it holds nothing') % instance.node
        # What only the flavor's allocation would not put back (a port's
        # bandwidth on a child provider) is not removed either.
        nested = sorted({rc for rp, alloc in held['allocations'].items()
                         if rp in tree for rc in alloc['resources']} -
                        set(ROOT_RESOURCE_CLASSES))
        if nested:
            return False, _('it holds nothing on its node %(node)s and '
                            'holds %(rcs)s here, which its flavor alone '
                            'would not put back there: move them by '
                            'hand') % {'node': instance.node,
                                       'rcs': ', '.join(nested)}
        allocations[node.uuid] = {'resources': resources}
        how = _('moved to its node %s') % instance.node
    payload = {'allocations': allocations,
               'consumer_generation': held['consumer_generation'],
               'project_id': held['project_id'],
               'user_id': held['user_id']}
    if not placement.put_allocations(ctxt, instance.uuid, payload):
        return None, _('placement did not accept the allocations')
    return True, how


def _heal_ended_move(self, ctxt, placement, instance, migration, held,
                     server, tree):
    """Added to PlacementCommands.

    Heal what the migration of a move that is over holds.

    ``tree`` is the provider tree of the node its server runs on (see
    _heal_misplaced).

    :returns: as _heal_misplaced_server's
    """
    here = {rp: {'resources': alloc['resources']}
            for rp, alloc in held['allocations'].items() if rp in tree}
    rest = {rp: {'resources': alloc['resources']}
            for rp, alloc in held['allocations'].items() if rp not in tree}
    mine = {rp: {'resources': alloc['resources']}
            for rp, alloc in server.get('allocations', {}).items()}
    if tree & set(mine) and not self._replaces_a_claim(instance, here,
                                                       mine, tree):
        payload = {'allocations': rest,
                   'consumer_generation': held['consumer_generation'],
                   'project_id': held['project_id'],
                   'user_id': held['user_id']}
        if not placement.put_allocations(ctxt, migration.uuid, payload):
            return None, _('placement did not accept the allocations')
        return True, _('removed: its server %s holds this node') % (
            instance.uuid)
    mine = {rp: alloc for rp, alloc in mine.items() if rp not in tree}
    mine.update(here)
    body = {
        migration.uuid: {
            'allocations': rest,
            'consumer_generation': held['consumer_generation'],
            'project_id': held['project_id'],
            'user_id': held['user_id']},
        instance.uuid: {
            'allocations': mine,
            'consumer_generation': server.get('consumer_generation'),
            'project_id': instance.project_id,
            'user_id': instance.user_id},
    }
    resp = placement.post('/allocations', body, version='1.28',
                          global_request_id=ctxt.global_id)
    if resp is None:
        return None, _('placement cannot be reached')
    if (resp.status_code == 409 and
            'consumer generation conflict' in resp.text):
        # Written meanwhile: read again.
        raise exception.AllocationUpdateFailed(consumer_uuid=instance.uuid,
                                               error=resp.text)
    if resp.status_code != 204:
        return None, resp.text
    return True, _('moved to its server %s') % instance.uuid


def _replaces_a_claim(self, instance, here, mine, tree):
    """Added to PlacementCommands.

    Whether the migration of a move that is over, holding ``here`` in
    the tree of the node its server runs on, holds there exactly the
    flavor the server uses, while the server holds something else on
    one provider of that tree only: a resize on the same host that
    failed before its finish (the server holds the new flavor's claim,
    its guest the old flavor). The migration's part then replaces the
    server's, as the resource tracker's correction decides too. A
    server holding more than one provider of the tree (a port's
    bandwidth on a child provider) is not: the migration only loses its
    part.
    """
    held_here = {rp: alloc['resources'] for rp, alloc in mine.items()
                 if rp in tree}
    if len(held_here) != 1 or set(here) != set(held_here):
        return False
    rp, = here
    if held_here[rp] == here[rp]['resources']:
        return False
    used = {rc: amount for rc, amount in
            scheduler_utils.resources_from_flavor(
                instance, instance.flavor).items() if amount}
    return here[rp]['resources'] == used
