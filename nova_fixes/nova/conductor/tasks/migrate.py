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

"""Drop-ins for nova/conductor/tasks/migrate.py."""

from oslo_log import log as logging

from nova.compute import utils as compute_utils
from nova import exception
from nova.scheduler.client import report

LOG = logging.getLogger(__name__)

#: nova's own revert_allocation_for_migration, by the name the patch gives
#: it (Target.original_as): activation binds it here and in nova's module.
_move_allocations_back_to_instance = None


def revert_allocation_for_migration(context, source_cn, instance, migration):
    """Replaces nova's revert_allocation_for_migration (bug 1848343).

    Revert a migration's allocations to its instance unless it is deleted.

    Used by the MigrationTask and LiveMigrationTask rollbacks. After the
    conductor moved the instance's source allocations to the migration
    consumer, the instance consumer no longer exists in placement, live
    server or not, so placement cannot tell us whether the server was
    deleted meanwhile: nova's cell database can.

    1. Revert as nova always did (the move creates the instance consumer
       again if the server was deleted), unless the migration holds
       nothing any more: a delete of the server removes the allocations
       of its migrations, and nova's move fails on a source consumer that
       does not exist.
    2. Then ask whether the instance is deleted, or being deleted: every
       delete path records DELETING/DELETED before it removes the
       allocations of the instance and its migrations, so a delete either
       came after the move and removed what it wrote, or is seen here and
       what the move wrote (and whatever the migration still holds, if the
       move failed) is removed. One lookup of the instance, after the
       move, with no window between a check and the write.
    """
    reportclient = report.report_client_singleton()
    try:
        if reportclient.get_allocations_for_consumer(context,
                                                     migration.uuid):
            _move_allocations_back_to_instance(
                context, source_cn, instance, migration)
        else:
            LOG.info('Migration %s holds no allocations; nothing to '
                     'revert.', migration.uuid, instance=instance)
    finally:
        compute_utils.delete_allocations_if_deleted(
            context, reportclient, instance.uuid, migration.uuid)


def _schedule(self):
    """Replaces MigrationTask._schedule (bug 1848343).

    Claim a destination, unless the server is deleted meanwhile.

    The scheduler claims the destination for the instance consumer. A
    server deleted before the claim lands has no instance consumer any
    more, and the claim creates it again. In the server's cell the
    destination's prep_resize finds the instance deleted and removes what
    the claim wrote, but a cross-cell resize fails in the conductor first,
    and its rollback moves nothing back: the migration holds nothing. So
    once the claim is written, the instance is looked up (after the write,
    never before: see delete_allocations_if_deleted); if it is deleted,
    what the claim wrote and what the migration holds are removed and the
    move stops.
    """
    selection = self._schedule_destination()
    # The migration _preallocate_migration made, if it ran.
    migration = self._migration
    if compute_utils.delete_allocations_if_deleted(
            self.context, self.reportclient, self.instance.uuid,
            migration.uuid if migration is not None else None):
        raise exception.InstanceNotFound(instance_id=self.instance.uuid)
    return selection
