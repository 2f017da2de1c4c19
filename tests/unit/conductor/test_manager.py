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

from nova import exception
from nova import objects
import testtools

from nova_fixes.nova.conductor import manager


def _mapping(uuid, cell):
    return mock.Mock(instance_uuid=uuid, cell_mapping=cell)


@mock.patch('nova.objects.InstanceMappingList.get_by_instance_uuids')
class CleanupBuildArtifactsTestCase(testtools.TestCase):

    def setUp(self):
        super(CleanupBuildArtifactsTestCase, self).setUp()
        objects.register_all()
        self.conductor = mock.Mock()
        # nova's original, by the name the drop-in calls it.
        self.original = self.conductor._error_out_build_artifacts
        client = self.conductor.report_client
        self.delete = client.delete_allocation_for_instance
        self.delete.return_value = True
        self.context = mock.sentinel.context
        self.exc = mock.sentinel.exc
        self.args = [mock.sentinel.build_requests, mock.sentinel.request_specs,
                     mock.sentinel.bdms, mock.sentinel.tags,
                     mock.sentinel.cell_mapping_cache]

    def _instances(self, *uuids):
        return [None if uuid is None else mock.Mock(uuid=uuid)
                for uuid in uuids]

    def _cleanup(self, instances):
        manager._cleanup_build_artifacts(
            self.conductor, self.context, self.exc, instances, *self.args)

    def _deleted(self):
        return [c.args[1] for c in self.delete.call_args_list]

    def test_runs_nova_original_with_the_same_arguments(self, mappings):
        instances = self._instances('a')
        mappings.return_value = [_mapping('a', None)]
        self._cleanup(instances)
        self.original.assert_called_once_with(
            self.context, self.exc, instances, *self.args)

    def test_quota_recheck_failure_deletes_every_claim(self, mappings):
        """Nothing was handed to a compute: no instance is mapped."""
        mappings.return_value = [_mapping('a', None), _mapping('b', None)]
        self._cleanup(self._instances('a', None, 'b'))
        mappings.assert_called_once_with(self.context, ['a', 'b'])
        self.assertEqual(['a', 'b'], self._deleted())
        for call in self.delete.call_args_list:
            self.assertEqual(self.context, call.args[0])
            self.assertEqual({'force': True}, call.kwargs)

    def test_instances_handed_to_a_compute_keep_their_claim(self, mappings):
        """The mapping failed for b: a was cast to its compute (mapped to
        its cell), c was not reached.
        """
        cell = mock.sentinel.cell
        mappings.return_value = [_mapping('a', cell), _mapping('b', None),
                                 _mapping('c', None)]
        self._cleanup(self._instances('a', 'b', 'c'))
        self.assertEqual(['b', 'c'], self._deleted())

    def test_mappings_are_read_before_the_original_maps_them(self, mappings):
        order = []
        mappings.side_effect = lambda *a: order.append('read') or [
            _mapping('a', None)]
        self.original.side_effect = lambda *a: order.append('nova')
        self.delete.side_effect = lambda *a, **k: order.append('delete')
        self._cleanup(self._instances('a'))
        self.assertEqual(['read', 'nova', 'delete'], order)

    def test_no_instance_nothing_read(self, mappings):
        self._cleanup(self._instances(None, None))
        mappings.assert_not_called()
        self.original.assert_called_once()
        self.delete.assert_not_called()

    def test_unknown_mapping_keeps_the_claim(self, mappings):
        mappings.return_value = [_mapping('a', None)]
        self._cleanup(self._instances('a', 'b'))
        self.assertEqual(['a'], self._deleted())

    def test_failed_lookup_keeps_every_claim_and_runs_nova(self, mappings):
        mappings.side_effect = exception.NovaException('db down')
        with mock.patch.object(manager, 'LOG') as log:
            self._cleanup(self._instances('a'))
        log.exception.assert_called_once()
        self.original.assert_called_once()
        self.delete.assert_not_called()

    def test_original_failure_deletes_nothing(self, mappings):
        mappings.return_value = [_mapping('a', None)]
        self.original.side_effect = exception.NovaException('boom')
        self.assertRaises(exception.NovaException, self._cleanup,
                          self._instances('a'))
        self.delete.assert_not_called()

    def test_delete_failures_are_logged_not_raised(self, mappings):
        mappings.return_value = [_mapping(u, None) for u in 'abcd']
        self.delete.side_effect = [
            exception.AllocationDeleteFailed(consumer_uuid='a', error='500'),
            None,  # safe_connect: placement could not be reached
            ValueError('unexpected'),
            False,  # nothing to delete
        ]
        with mock.patch.object(manager, 'LOG') as log:
            self._cleanup(self._instances('a', 'b', 'c', 'd'))
        self.assertEqual(['a', 'b', 'c', 'd'], self._deleted())
        self.assertEqual(3, log.error.call_count)
        reasons = [c.args[1] for c in log.error.call_args_list]
        self.assertIn('500', reasons[0])
        self.assertEqual('placement could not be reached', reasons[1])
        self.assertEqual('unexpected', reasons[2])
        log.info.assert_not_called()

    def test_deleted_claim_is_logged(self, mappings):
        mappings.return_value = [_mapping('a', None)]
        instance = self._instances('a')
        with mock.patch.object(manager, 'LOG') as log:
            self._cleanup(instance)
        log.info.assert_called_once()
        self.assertIs(instance[0], log.info.call_args.kwargs['instance'])


@mock.patch('nova.objects.InstanceMappingList.get_by_instance_uuids')
class BuryInCell0TestCase(testtools.TestCase):

    def setUp(self):
        super(BuryInCell0TestCase, self).setUp()
        objects.register_all()
        self.conductor = mock.Mock()
        client = self.conductor.report_client
        self.delete = client.delete_allocation_for_instance
        self.delete.return_value = True
        self.context = mock.sentinel.context
        self.cell0 = mock.Mock(uuid=objects.CellMapping.CELL0_UUID)
        self.original = self.conductor._bury_instances_in_cell0

    def _bury(self, build_requests=None, instances=None):
        manager._bury_in_cell0(
            self.conductor, self.context, mock.sentinel.spec,
            mock.sentinel.exc, build_requests=build_requests,
            instances=instances, block_device_mapping=mock.sentinel.bdms,
            tags=mock.sentinel.tags)

    def _deleted(self):
        return [c.args[1] for c in self.delete.call_args_list]

    def test_claims_of_the_buried_deleted_after_nova(self,
                                                     mappings):
        order = mock.Mock()
        order.attach_mock(self.original, 'bury')
        order.attach_mock(self.delete, 'delete')
        requests = [mock.Mock(instance_uuid='a', instance=mock.Mock(uuid='a'))]
        instances = [mock.Mock(uuid='b')]
        mappings.return_value = [_mapping('a', self.cell0),
                                 _mapping('b', self.cell0)]
        self._bury(requests, instances)
        mappings.assert_called_once_with(self.context, ['a', 'b'])
        # nova's original ran first.
        self.assertEqual('bury', order.mock_calls[0][0])
        self.assertEqual(['delete', 'delete'],
                         [c[0] for c in order.mock_calls[1:]])
        self.original.assert_called_once_with(
            self.context, mock.sentinel.spec,
            mock.sentinel.exc, build_requests=requests, instances=instances,
            block_device_mapping=mock.sentinel.bdms, tags=mock.sentinel.tags)
        self.assertEqual(['a', 'b'], sorted(self._deleted()))

    def test_instance_mapped_to_another_cell_keeps_its_claim(self,
                                                             mappings):
        mappings.return_value = [_mapping('a', mock.Mock(uuid='cell1')),
                                 _mapping('b', None)]
        self._bury(instances=[mock.Mock(uuid='a'), mock.Mock(uuid='b')])
        self.assertEqual([], self._deleted())

    def test_failed_lookup_keeps_every_claim(self, mappings):
        mappings.side_effect = exception.DBNotAllowed(binary='x')
        with mock.patch.object(manager, 'LOG') as log:
            self._bury(instances=[mock.Mock(uuid='a')])
        log.exception.assert_called_once()
        self.assertEqual([], self._deleted())

    def test_nothing_to_bury_reads_nothing(self, mappings):
        self._bury()
        mappings.assert_not_called()
        self.assertEqual([], self._deleted())

    def test_original_failure_deletes_nothing(self, mappings):
        self.original.side_effect = ValueError
        self.assertRaises(ValueError, self._bury,
                          instances=[mock.Mock(uuid='a')])
        mappings.assert_not_called()


class DeleteBuildRequestTestCase(testtools.TestCase):

    def setUp(self):
        super(DeleteBuildRequestTestCase, self).setUp()
        self.conductor = mock.Mock()
        self.original = self.conductor._destroy_built_instance
        self.delete = self.conductor.report_client.\
            delete_allocation_for_instance
        self.instance = mock.Mock(uuid='a')
        self.args = [mock.sentinel.context, mock.sentinel.build_request,
                     self.instance, mock.sentinel.cell, mock.sentinel.bdms,
                     mock.sentinel.tags]

    def _delete_build_request(self):
        return manager._delete_build_request(self.conductor, *self.args)

    def test_deleted_build_request(self):
        self.original.return_value = True
        self.assertTrue(self._delete_build_request())
        self.original.assert_called_once_with(*self.args)
        self.delete.assert_not_called()

    def test_gone_deletes_the_claim(self):
        self.original.return_value = False
        self.assertFalse(self._delete_build_request())
        self.delete.assert_called_once_with(mock.sentinel.context, 'a',
                                            force=True)

    def test_failed_delete_is_logged(self):
        self.original.return_value = False
        self.delete.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid='a', error='boom')
        with mock.patch.object(manager, 'LOG') as log:
            self.assertFalse(self._delete_build_request())
        log.exception.assert_called_once()
