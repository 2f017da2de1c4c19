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

    1. The instance is deleted (or being deleted): remove the migration's
       allocations instead of giving them to a consumer nobody will delete.
    2. Otherwise revert as nova always did.
    3. Ask again: a delete that removed the instance's allocations between
       step 1 and the move in step 2 has recorded DELETING/DELETED before
       doing so (see is_instance_deleted), so it is seen here and what the
       move re-created is removed.
    """
    reportclient = report.report_client_singleton()
    if compute_utils.is_instance_deleted(context, instance.uuid):
        LOG.info('Instance was deleted during migration %s; removing the '
                 'allocations held by the migration instead of reverting '
                 'them.', migration.uuid, instance=instance)
        _delete_allocations(reportclient, context, migration.uuid,
                            'migration')
        return

    _move_allocations_back_to_instance(
        context, source_cn, instance, migration)

    if compute_utils.is_instance_deleted(context, instance.uuid):
        LOG.info('Instance was deleted while the allocations of migration '
                 '%s were reverted to it; removing them.', migration.uuid,
                 instance=instance)
        _delete_allocations(reportclient, context, instance.uuid,
                            'instance')


def _delete_allocations(reportclient, context, consumer_uuid, consumer_type):
    try:
        reportclient.delete_allocation_for_instance(
            context, consumer_uuid, consumer_type=consumer_type, force=True)
    except exception.AllocationDeleteFailed:
        LOG.error('Unable to delete the allocations of %s %s in placement; '
                  'they may need to be removed by hand.', consumer_type,
                  consumer_uuid)
