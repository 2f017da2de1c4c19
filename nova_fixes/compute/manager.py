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

from oslo_log import log as logging

from nova.compute import utils as compute_utils
from nova import exception

LOG = logging.getLogger(__name__)


def _revert_allocation(self, context, instance, migration):
    """Replaces ComputeManager._revert_allocation (bug 1848343).

    Give the instance back the allocations its migration holds on the
    source node, replacing the instance's allocations on the destination.
    Used on every compute-side revert: prep_resize and resize_instance
    failures, finish_revert_resize, the cross-cell revert at the source,
    live_migration_abort and _rollback_live_migration.

    During a move the instance consumer holds the destination claim, so it
    exists in placement unless the server was deleted: the move requires
    its generation, and when it is gone the migration's allocations are
    removed instead of being given to a deleted server.

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
            LOG.error('The instance has no allocations in placement although '
                      'it was not deleted; the allocations of migration %s '
                      'were removed. Run "nova-manage placement '
                      'heal_allocations" to restore its allocations.',
                      migration.uuid, instance=instance)
        return False
    return orig_alloc
