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

"""Exceptions the fixes add to nova/exception.py."""

from nova.exception import NovaException
from nova.i18n import _


class AllocationMoveTargetNotFound(NovaException):
    """Added to nova.exception (bug 1848343).

    The target consumer that move_allocations was required to find is gone.

    SchedulerReportClient.move_allocations raises it when its caller
    required the target consumer to exist and it did not: the source
    consumer's allocations were removed instead of moved.
    """
    msg_fmt = _('Consumer %(target_consumer)s no longer exists in '
                'placement; the allocations of consumer %(source_consumer)s '
                'were removed instead of moved to it.')


class PlacementUnavailableForDelete(NovaException):
    """Added to nova.exception (bug 1859496).

    The allocations of a server being deleted could not be deleted.

    Raised by API._attempt_delete_of_buildrequest when the allocations of
    a server that has not reached a cell could not be deleted in
    placement (and, with the fix of bug 1848343, by the API's local
    delete and its confirm-on-delete of a resized server). Nothing of the
    server has been destroyed then: it is still listed, with its
    allocations, and deleting it again once placement answers completes
    the delete. The servers controller's delete returns it as 503 Service
    Unavailable; its message is safe to show to users.
    """
    msg_fmt = _('Placement could not be reached to delete the allocations '
                'of server %(instance_uuid)s (%(reason)s), so the server was '
                'not deleted. The delete can be retried.')
    code = 503
    safe = True


class ConfirmNotAnsweredForDelete(PlacementUnavailableForDelete):
    """Added to nova.exception (bug 1848343).

    The confirm of the resize of a server being deleted got no reply.

    API._confirm_resize_on_deleting raises it when its RPC call to confirm
    the resize before the delete times out: the source compute (or the
    superconductor, for a cross-cell resize) did not answer in time, or
    its answer was lost. Nothing of the delete was done, and API._delete
    puts the server's task state back, so the user can delete it again.
    It is a PlacementUnavailableForDelete so that the servers controller
    returns it as that one, 503 Service Unavailable, for the same reason:
    a service the delete needs did not answer and the delete can be
    retried. Its message is safe to show to users.
    """
    msg_fmt = _('The confirm of the resize of server %(instance_uuid)s, '
                'which its delete needs first, got no reply (%(reason)s), so '
                'the server was not deleted. The delete can be retried.')


class DatabaseUnavailableForDelete(PlacementUnavailableForDelete):
    """Added to nova.exception (related to bug 1783613).

    The API database failed to queue the instance mapping of a server
    being deleted for deletion.

    API._do_delete and API._do_soft_delete raise it when that write fails
    before the delete is sent to the compute (or done locally): nothing
    of the delete was done, and API._delete puts the server's task state
    back, so the user can delete it again. It is a
    PlacementUnavailableForDelete so that the servers controller returns
    it as that one, 503 Service Unavailable: a service the delete needs
    did not answer and the delete can be retried. Its message is safe to
    show to users.
    """
    msg_fmt = _('The database could not record the delete of server '
                '%(instance_uuid)s (%(reason)s), so the server was not '
                'deleted. The delete can be retried.')


class InstanceDeletedDuringRevert(NovaException):
    """Added to nova.exception (bug 1848343).

    The server was deleted while its cross-cell resize was being reverted.

    RevertResizeTask._update_instance_mapping raises it once it has
    deleted the source cell's copy of a server whose target cell copy was
    deleted; RevertResizeTask._execute ends the revert on it.
    """
    msg_fmt = _('Instance %(instance_uuid)s was deleted while its resize '
                'was being reverted; its copy in the source cell is being '
                'deleted too.')
