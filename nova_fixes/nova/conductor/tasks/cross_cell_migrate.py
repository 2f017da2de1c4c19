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

"""Drop-ins for nova/conductor/tasks/cross_cell_migrate.py.

During a cross-cell resize the server has a copy in each cell, and the
instance mapping says which one the API acts on: the source cell's until
the destination has finished, the target cell's from then on, and the
source cell's again once a revert has swapped it back. A DELETE deletes
the copy the mapping named when the API read it. When a task swaps the
mapping after that, the copy it points the mapping at lives on, with its
guest: the server outlives its DELETE. Each task that swaps the mapping
therefore looks, once the swap is saved (never before: a DELETE that reads
the mapping after the save deletes the new copy itself), whether the copy
it pointed away from is deleted, and if so deletes the other one as the
API would have.
"""

from oslo_log import log as logging
from oslo_utils import excutils

from nova.compute import instance_actions
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.conductor.tasks.cross_cell_migrate import (
    get_inst_and_cell_map_from_source)
from nova import exception
from nova import objects
from nova.objects import fields

LOG = logging.getLogger(__name__)


def delete_instance_of_deleted_server(compute_rpcapi, instance,
                                      expected_task_state):
    """Added to nova.conductor.tasks.cross_cell_migrate (bug 1848343).

    Delete a cell's copy of a server whose other copy a DELETE deleted.

    It is deleted as the API deletes a server on a compute that is up:
    DELETING is saved, a delete action recorded in the copy's cell, and
    terminate_instance cast to the copy's host, which removes the guest
    and its disks, the allocations of the instance and of its migrations,
    and the record. A compute that is down completes the delete of an
    instance left DELETING when it starts again.

    :param compute_rpcapi: nova.compute.rpcapi.ComputeAPI
    :param instance: the copy, an Instance targeted at its cell
    :param expected_task_state: the task_state the copy is in while the
        caller's task runs; any other means somebody else acts on it (a
        DELETE that read the mapping after the swap deletes it already)
    :returns: whether this deleted it
    """
    ctxt = instance._context
    instance.task_state = task_states.DELETING
    try:
        instance.save(expected_task_state=[expected_task_state])
    except (exception.UnexpectedTaskStateError,
            exception.InstanceNotFound) as e:
        LOG.info('Not deleting the copy of the deleted server in cell %s: '
                 '%s', ctxt.cell_uuid, e, instance=instance)
        return False
    LOG.info('The server was deleted during its cross-cell resize; '
             'deleting its copy in cell %s on host %s.', ctxt.cell_uuid,
             instance.host, instance=instance)
    objects.InstanceAction.action_start(
        ctxt, instance.uuid, instance_actions.DELETE, want_result=False)
    bdms = objects.BlockDeviceMappingList.get_by_instance_uuid(
        ctxt, instance.uuid)
    compute_rpcapi.terminate_instance(ctxt, instance, bdms)
    return True


class FinishResizeAtDestTask(object):

    def _update_instance_mapping(self):
        """Replaces this method of FinishResizeAtDestTask (bug 1848343).

        Point the mapping at the target cell, unless the server is deleted.

        Until the swap the mapping names the source cell, so a DELETE
        during the finish at the destination deletes the source cell's
        copy; nova then pointed the mapping at the target cell's copy,
        which lived on with its guest on the destination host. Once the
        swap is saved, the source cell's copy is looked up: if it is
        deleted or being deleted, so is the target cell's. The swap ends by
        hiding the source copy, which fails if the DELETE has removed it
        already: that is no error then.
        """
        source_context = self.source_cell_instance._context
        try:
            self._swap_instance_mapping_to_target()
        except exception.InstanceNotFound:
            with excutils.save_and_reraise_exception() as ctxt:
                if compute_utils.is_instance_deleted(
                        source_context, self.instance.uuid):
                    ctxt.reraise = False
        if compute_utils.is_instance_deleted(source_context,
                                             self.instance.uuid):
            delete_instance_of_deleted_server(
                self.compute_rpcapi, self.instance, None)


class RevertResizeTask(object):

    def _update_instance_mapping(self, source_cell_instance,
                                 source_cell_mapping):
        """Replaces RevertResizeTask._update_instance_mapping (bug 1848343).

        Point the mapping at the source cell, unless the server is deleted.

        Until the swap the mapping names the target cell, so a DELETE
        while the revert is on its way deletes the target cell's copy;
        nova then pointed the mapping at the source cell's copy and
        reverted: the deleted server lived again in the source cell. Once
        the swap is saved, the target cell's copy is looked up: if it is
        deleted or being deleted, the source cell's copy is deleted and
        InstanceDeletedDuringRevert ends the revert (see _execute). The
        swap ends by hiding the target copy, which fails if the DELETE has
        removed it already: that is no error then.
        """
        try:
            self._swap_instance_mapping_to_source(
                source_cell_instance, source_cell_mapping)
        except exception.InstanceNotFound:
            with excutils.save_and_reraise_exception() as ctxt:
                if compute_utils.is_instance_deleted(self.context,
                                                     self.instance.uuid):
                    ctxt.reraise = False
        if compute_utils.is_instance_deleted(self.context,
                                             self.instance.uuid):
            delete_instance_of_deleted_server(
                self.compute_rpcapi, source_cell_instance,
                task_states.RESIZE_REVERTING)
            raise exception.InstanceDeletedDuringRevert(
                instance_uuid=self.instance.uuid)

    def _execute(self):
        """Replaces RevertResizeTask._execute (bug 1848343).

        Revert, or stop when the server was deleted on the way.

        _update_instance_mapping raises InstanceDeletedDuringRevert once it
        has deleted the source cell's copy of a server deleted in the
        target cell: nothing is left to revert, and the rollback would put
        the deleted server in ERROR.
        """
        try:
            self._revert_in_both_cells()
        except exception.InstanceDeletedDuringRevert as e:
            LOG.info('%s', e, instance=self.instance)


class ConfirmResizeTask(object):

    def _execute(self):
        """Replaces ConfirmResizeTask._execute (bug 1848343).

        Confirm, or finish a confirmation another one has done at the
        source.

        The API confirms a cross-cell resize of a server it deletes in
        VERIFY_RESIZE, also when the migration is 'confirming': the user's
        confirmation may be running. Both call the source compute, one
        after the other (the source holds the server's lock), and the
        first hard-deletes the source cell's copy, with its instance
        actions, as soon as its call returns: the second's call then fails
        (the event of its action is not found), the rollback puts the
        server in ERROR and the DELETE returns 500, the server and its
        quota usage left.

        When a confirmation fails on a record of the source cell that is
        gone (the instance, its action, its migration) and the source
        cell's copy is indeed gone, the source is cleaned up: only a
        confirmation that has done so deletes that copy (a DELETE of the
        source copy deleted it on the source host too). The target cell's
        part is then done here (it is the same whichever confirmation does
        it), and nothing is rolled back. Any other failure is rolled back
        as before.
        """
        try:
            self._confirm_in_both_cells()
        except (exception.InstanceNotFound, exception.InstanceActionNotFound,
                exception.MigrationNotFound):
            with excutils.save_and_reraise_exception() as ctxt:
                try:
                    get_inst_and_cell_map_from_source(
                        self.context, self.migration.source_compute,
                        self.instance.uuid)
                except exception.InstanceNotFound:
                    ctxt.reraise = False
                    LOG.info('Another confirmation of this resize has '
                             'cleaned up the source; finishing it in the '
                             'target cell.', instance=self.instance)
                except Exception:
                    LOG.exception('Unable to look up the source cell copy '
                                  'of the instance.', instance=self.instance)
            self._finish_confirm_in_target_cell()
            self._send_resize_confirm_notification(
                self.instance, fields.NotificationPhase.END)

    def _cleanup_source_host(self, source_instance):
        """Replaces ConfirmResizeTask._cleanup_source_host (bug 1848343).

        Confirm at the source, and note whether the source left the
        migration's allocations there.

        The source records its migration 'error' when it cannot delete
        what the migration consumer holds on the source node
        (ComputeManager._delete_allocation_after_move), so that the delete
        of the server removes it. For a cross-cell resize that record is
        in the source cell, whose copy of the server, migrations included,
        the conductor hard-deletes next; and the migration the delete
        reads, the target cell's, was then saved 'confirmed', a status the
        delete skips: the allocations were left for good. The source
        cell's migration is read once the source has answered, and
        _finish_confirm_in_target_cell records the target cell's 'error'
        too.
        """
        self._confirm_at_source(source_instance)
        try:
            status = objects.Migration.get_by_uuid(
                source_instance._context, self.migration.uuid).status
        except exception.MigrationNotFound:
            return
        if status == 'error':
            LOG.warning('The source host left the allocations of migration '
                        '%s; it is recorded as failed in the target cell '
                        'too, so that the delete of the server removes '
                        'them.', self.migration.uuid, instance=self.instance)
            self._allocations_left_at_source = True

    def _finish_confirm_in_target_cell(self):
        """Replaces this method of ConfirmResizeTask (bug 1848343).

        Set the terminal states in the target cell, keeping the
        migration 'error' when the source left its allocations.

        nova records the target cell's migration 'confirmed'. When the
        source could not delete the migration's allocations
        (_cleanup_source_host), or another confirmation of the same resize
        recorded that already (a DELETE confirms a server in VERIFY_RESIZE
        while the user's confirmation runs, and the later one finishes
        here after the other), it is recorded 'error' instead, as for a
        resize within a cell: the delete of the server removes what it
        holds.
        """
        left = getattr(self, '_allocations_left_at_source', False)
        if not left:
            try:
                left = objects.Migration.get_by_uuid(
                    self.context, self.migration.uuid).status == 'error'
            except exception.MigrationNotFound:
                left = False
        self._finish_confirm_as_confirmed()
        if left:
            self.migration.status = 'error'
            self.migration.save()
