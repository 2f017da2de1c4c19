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

"""Drop-ins for nova/conductor/tasks/live_migrate.py."""

from nova.compute import utils as compute_utils
from nova import exception


def _find_destination(self):
    """Replaces LiveMigrationTask._find_destination (bug 1848343).

    Find and claim a destination unless the server is deleted meanwhile.

    The scheduler claims the destination for the instance consumer. A
    server deleted before the claim lands has no instance consumer any
    more, and the claim creates it again; nothing on the way to the
    compute removes it, and the source compute goes on to migrate a
    deleted guest. So once the claim is written, the instance is looked
    up (after the write, never before: see delete_allocations_if_deleted);
    if it is deleted, what the claim wrote and what the migration holds
    are removed and the live migration stops.
    """
    found = self._find_and_claim_destination()
    if compute_utils.delete_allocations_if_deleted(
            self.context, self.report_client, self.instance.uuid,
            self.migration.uuid):
        raise exception.InstanceNotFound(instance_id=self.instance.uuid)
    return found
