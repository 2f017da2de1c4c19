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

LOG = log.getLogger(__name__)


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
