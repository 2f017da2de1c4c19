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

from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.conductor import manager as conductor_manager
from nova import context
from nova import exception as exc
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.tests.unit import fake_build_request
from nova.tests.unit import fake_request_spec


class BuryInCell0ClaimTestCase(test.TestCase):
    """ComputeTaskManager._bury_in_cell0 and the scheduler's claim

    Bug 1859496: a server buried in cell0 after the scheduler claimed for
    it (its reply was lost and the conductor timed out) kept the claim on
    a host it never reached. The allocations of the instances whose
    instance mapping names cell0 after nova's own burial are now deleted;
    an instance already mapped to another cell keeps them, and a failure
    to read the mappings or to delete the allocations is logged, not
    raised.
    """

    def setUp(self):
        super().setUp()
        self.ctxt = context.RequestContext(
            'fake-user', 'fake-project').elevated()
        self.conductor = conductor_manager.ComputeTaskManager()
        self.cell0 = self.cell_mappings['cell0']
        self.cell1 = self.cell_mappings['cell1']
        patcher = mock.patch.object(report, 'report_client_singleton')
        self.report_client = patcher.start().return_value
        self.addCleanup(patcher.stop)
        self.delete = self.report_client.delete_allocation_for_instance
        self.delete.return_value = True
        patcher = mock.patch.object(
            compute_utils, 'notify_about_compute_task_error')
        patcher.start()
        self.addCleanup(patcher.stop)
        self.request_spec = fake_request_spec.fake_spec_obj()

    def _build_request(self, cell=None):
        build_request = fake_build_request.fake_req_obj(self.ctxt)
        del build_request.instance.id
        build_request.create()
        objects.InstanceMapping(
            self.ctxt, instance_uuid=build_request.instance_uuid,
            cell_mapping=cell, project_id=self.ctxt.project_id).create()
        return build_request

    def _bury(self, build_requests, instances=None):
        self.conductor._bury_in_cell0(
            self.ctxt, self.request_spec, exc.MaxRetriesExceeded(reason='x'),
            build_requests=build_requests, instances=instances)

    def _cell_of(self, uuid):
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            self.ctxt, uuid)
        return mapping.cell_mapping.uuid if mapping.cell_mapping else None

    def _in_cell0(self, uuid):
        with context.target_cell(self.ctxt, self.cell0) as cctxt:
            return objects.Instance.get_by_uuid(cctxt, uuid)

    def test_buried_instances_lose_their_claims(self):
        brs = [self._build_request(), self._build_request()]
        instance_uuids = [br.instance_uuid for br in brs]

        self._bury(brs)

        self.assertCountEqual(
            [mock.call(self.ctxt, uuid, force=True)
             for uuid in instance_uuids],
            self.delete.call_args_list)
        self.assertIn('Deleted the allocations of the instance',
                      self.stdlog.logger.output)
        # nova's own burial is unchanged.
        for uuid in instance_uuids:
            self.assertEqual(self.cell0.uuid, self._cell_of(uuid))
            self.assertEqual(vm_states.ERROR, self._in_cell0(uuid).vm_state)
        for br in brs:
            self.assertRaises(exc.BuildRequestNotFound,
                              objects.BuildRequest.get_by_instance_uuid,
                              self.ctxt, br.instance_uuid)

    def test_instance_with_its_build_request_deleted_once(self):
        br = self._build_request()
        instance = br.get_new_instance(self.ctxt)
        seen = []

        def fake_delete(ctxt, uuid, force=False):
            seen.append(self._cell_of(uuid))
            return True

        self.delete.side_effect = fake_delete
        self._bury([br], instances=[instance])

        self.delete.assert_called_once_with(
            self.ctxt, instance.uuid, force=True)
        self.assertEqual([self.cell0.uuid], seen)

    def test_instance_only(self):
        br = self._build_request()
        instance = br.get_new_instance(self.ctxt)

        self._bury(None, instances=[instance])

        self.delete.assert_called_once_with(
            self.ctxt, instance.uuid, force=True)
        self.assertEqual(self.cell0.uuid, self._cell_of(instance.uuid))

    def test_build_request_deleted_by_user(self):
        br = self._build_request()
        br.destroy()

        self._bury([br])

        self.delete.assert_called_once_with(
            self.ctxt, br.instance_uuid, force=True)
        self.assertEqual(self.cell0.uuid, self._cell_of(br.instance_uuid))
        self.assertRaises(exc.InstanceNotFound, self._in_cell0,
                          br.instance_uuid)

    def test_instance_mapped_to_another_cell_keeps_its_claim(self):
        elsewhere = self._build_request(cell=self.cell1)
        buried = self._build_request()

        self._bury([elsewhere, buried])

        self.delete.assert_called_once_with(
            self.ctxt, buried.instance_uuid, force=True)
        self.assertEqual(self.cell1.uuid,
                         self._cell_of(elsewhere.instance_uuid))
        self.assertRaises(exc.InstanceNotFound, self._in_cell0,
                          elsewhere.instance_uuid)

    @mock.patch.object(objects.CellMapping, 'get_by_uuid',
                       side_effect=exc.CellMappingNotFound(uuid='0'))
    def test_no_cell0_keeps_claims(self, mock_get):
        br = self._build_request()

        self._bury([br])

        self.delete.assert_not_called()
        self.assertIsNone(self._cell_of(br.instance_uuid))

    def test_nothing_to_bury(self):
        self._bury([])

        self.delete.assert_not_called()

    @mock.patch.object(objects.InstanceMappingList, 'get_by_instance_uuids',
                       side_effect=db_exc.DBConnectionError())
    def test_unreadable_mappings_keep_claims(self, mock_get):
        br = self._build_request()

        self._bury([br])

        mock_get.assert_called_once_with(self.ctxt, [br.instance_uuid])
        self.delete.assert_not_called()
        self.assertIn('Unable to read the instance mappings of instances '
                      '%s' % br.instance_uuid, self.stdlog.logger.output)
        self.assertEqual(self.cell0.uuid, self._cell_of(br.instance_uuid))

    def test_failed_deletes_are_logged(self):
        brs = [self._build_request() for _ in range(3)]
        self.delete.side_effect = [
            exc.AllocationDeleteFailed(consumer_uuid=brs[0].instance_uuid,
                                       error='conflict'),
            ValueError('unexpected'),
            None]

        self._bury(brs)

        self.assertEqual(3, self.delete.call_count)
        output = self.stdlog.logger.output
        self.assertEqual(3, output.count('Unable to delete the allocations'))
        self.assertIn('Error: conflict', output)
        self.assertIn('(unexpected)', output)
        self.assertIn('(placement could not be reached)', output)
        for br in brs:
            self.assertEqual(self.cell0.uuid, self._cell_of(br.instance_uuid))
