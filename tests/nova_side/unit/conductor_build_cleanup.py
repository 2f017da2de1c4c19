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

from unittest import mock

from oslo_db import exception as db_exc
from oslo_utils.fixture import uuidsentinel as uuids

from nova.conductor import manager as conductor_manager
from nova import context
from nova import exception as exc
from nova import objects
from nova.scheduler.client import report
from nova import test


class CleanupBuildArtifactsClaimTestCase(test.TestCase):
    """ComputeTaskManager._cleanup_build_artifacts and the scheduler's claim

    Bug 1859496: when schedule_and_build_instances gave up after the
    scheduler claimed (the quota recheck failed, say), the instances were
    put in ERROR and their build requests destroyed, but their allocations
    were kept. The allocations of the instances never handed to a compute
    (their instance mapping had no cell before the cleanup) are now
    deleted after nova's own cleanup; those of an instance already mapped
    to a cell are kept, and a failure to read the mappings or to delete
    the allocations is logged, not raised.
    """

    def setUp(self):
        super().setUp()
        self.ctxt = context.RequestContext(
            'fake-user', 'fake-project').elevated()
        self.conductor = conductor_manager.ComputeTaskManager()
        self.cell1 = self.cell_mappings['cell1']
        patcher = mock.patch.object(report, 'report_client_singleton')
        self.report_client = patcher.start().return_value
        self.addCleanup(patcher.stop)
        self.delete = self.report_client.delete_allocation_for_instance
        self.delete.return_value = True
        patcher = mock.patch.object(
            conductor_manager.ComputeTaskManager, '_set_vm_state_and_notify')
        self.set_vm_state = patcher.start()
        self.addCleanup(patcher.stop)

    def _instance(self, uuid, cell=None):
        objects.InstanceMapping(
            self.ctxt, instance_uuid=uuid, cell_mapping=cell,
            project_id=self.ctxt.project_id).create()
        return objects.Instance(self.ctxt, uuid=uuid)

    def _cleanup(self, instances):
        build_requests = [mock.Mock() if inst else None for inst in instances]
        request_specs = [mock.Mock() if inst else None for inst in instances]
        self.conductor._cleanup_build_artifacts(
            self.ctxt, exc.TooManyInstances('test'), instances,
            build_requests, request_specs, None, None,
            {inst.uuid: self.cell1 for inst in instances if inst})
        return build_requests, request_specs

    def _cell_of(self, uuid):
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            self.ctxt, uuid)
        return mapping.cell_mapping.uuid if mapping.cell_mapping else None

    def test_unmapped_instances_lose_their_claims(self):
        instances = [self._instance(uuids.inst1), self._instance(uuids.inst2)]

        build_requests, request_specs = self._cleanup(instances)

        self.assertEqual(
            [mock.call(self.ctxt, uuids.inst1, force=True),
             mock.call(self.ctxt, uuids.inst2, force=True)],
            self.delete.call_args_list)
        self.assertIn('Deleted the allocations of the instance',
                      self.stdlog.logger.output)
        # nova's own cleanup is unchanged.
        self.assertEqual(2, self.set_vm_state.call_count)
        for inst, build_request, spec in zip(
                instances, build_requests, request_specs):
            self.assertEqual(self.cell1.uuid, self._cell_of(inst.uuid))
            build_request.destroy.assert_called_once_with()
            spec.destroy.assert_called_once_with()

    def test_claims_deleted_after_nova_cleanup(self):
        instance = self._instance(uuids.inst1)
        seen = []

        def fake_delete(ctxt, uuid, force=False):
            seen.append((self.set_vm_state.called, self._cell_of(uuid)))
            return True

        self.delete.side_effect = fake_delete
        self._cleanup([instance])

        self.assertEqual([(True, self.cell1.uuid)], seen)

    def test_instances_mapped_to_a_cell_keep_their_claims(self):
        # The first was cast to its compute before the failure, the
        # second was buried in cell0 (a placeholder).
        handed_over = self._instance(uuids.handed_over, cell=self.cell1)
        unmapped = self._instance(uuids.unmapped)

        build_requests, _ = self._cleanup([handed_over, None, unmapped])

        self.delete.assert_called_once_with(
            self.ctxt, uuids.unmapped, force=True)
        self.assertEqual(2, self.set_vm_state.call_count)
        build_requests[0].destroy.assert_called_once_with()
        build_requests[2].destroy.assert_called_once_with()

    def test_no_instance_left(self):
        self._cleanup([None])

        self.delete.assert_not_called()
        self.set_vm_state.assert_not_called()

    @mock.patch.object(objects.InstanceMappingList, 'get_by_instance_uuids',
                       side_effect=db_exc.DBConnectionError())
    def test_unreadable_mappings_keep_claims(self, mock_get):
        instance = self._instance(uuids.inst1)

        build_requests, _ = self._cleanup([instance])

        mock_get.assert_called_once_with(self.ctxt, [uuids.inst1])
        self.delete.assert_not_called()
        self.assertIn('Unable to read the instance mappings of instances '
                      '%s' % uuids.inst1, self.stdlog.logger.output)
        # nova's own cleanup still ran.
        self.set_vm_state.assert_called_once()
        self.assertEqual(self.cell1.uuid, self._cell_of(uuids.inst1))
        build_requests[0].destroy.assert_called_once_with()

    def test_failed_deletes_are_logged(self):
        instances = [self._instance(uuids.inst1), self._instance(uuids.inst2),
                     self._instance(uuids.inst3)]
        self.delete.side_effect = [
            exc.AllocationDeleteFailed(consumer_uuid=uuids.inst1,
                                       error='conflict'),
            ValueError('unexpected'),
            None]

        build_requests, _ = self._cleanup(instances)

        self.assertEqual(3, self.delete.call_count)
        output = self.stdlog.logger.output
        self.assertEqual(3, output.count('Unable to delete the allocations'))
        self.assertIn('Error: conflict', output)
        self.assertIn('(unexpected)', output)
        self.assertIn('(placement could not be reached)', output)
        self.assertNotIn('Deleted the allocations', output)
        for build_request in build_requests:
            build_request.destroy.assert_called_once_with()

    def test_no_allocations_to_delete(self):
        instance = self._instance(uuids.inst1)
        self.delete.return_value = False

        self._cleanup([instance])

        self.delete.assert_called_once_with(
            self.ctxt, uuids.inst1, force=True)
        output = self.stdlog.logger.output
        self.assertNotIn('Deleted the allocations', output)
        self.assertNotIn('Unable to delete the allocations', output)
