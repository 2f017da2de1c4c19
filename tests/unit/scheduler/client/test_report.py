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

import fixtures

from nova import exception
import testtools

from nova_fixes import fixture
from nova_fixes.nova.scheduler.client import report

SOURCE = 'source-uuid'
TARGET = 'target-uuid'
SOURCE_ALLOCS = {
    'allocations': {'rp1': {'resources': {'VCPU': 1}}},
    'consumer_generation': 3, 'project_id': 'p', 'user_id': 'u'}
TARGET_ALLOCS = {
    'allocations': {'rp2': {'resources': {'VCPU': 2}}},
    'consumer_generation': 7, 'project_id': 'p', 'user_id': 'u'}
GONE = {'allocations': {}}


def _response(status, detail=''):
    r = mock.Mock(status_code=status, text=detail)
    r.json.return_value = {'errors': [
        {'code': 'placement.concurrent_update', 'detail': detail}]}
    return r


class MoveAllocationsTestCase(testtools.TestCase):

    def setUp(self):
        super(MoveAllocationsTestCase, self).setUp()
        # The drop-ins name nova.exception.AllocationMoveTargetNotFound,
        # which activation adds.
        self.useFixture(fixture.NovaFixes())
        self.useFixture(fixtures.MockPatch('time.sleep'))
        self.context = mock.Mock(global_id='req-1')
        self.client = mock.Mock()
        self.client._move_allocations_to_existing_consumer = (
            lambda *a: report._move_allocations_to_existing_consumer(
                self.client, *a))

    def _move(self, *states, required=True):
        self.client.get_allocs_for_consumer.side_effect = list(states)
        return report.move_allocations(
            self.client, self.context, SOURCE, TARGET,
            target_consumer_generation_required=required)

    def test_not_required_runs_nova_original(self):
        result = self._move(required=False)
        original = self.client._move_allocations_to_any_consumer
        original.assert_called_once_with(self.context, SOURCE, TARGET)
        self.assertIs(original.return_value, result)

    def test_target_gone_removes_source_and_raises(self):
        self.client._put_allocations.return_value = _response(204)
        self.assertRaises(exception.AllocationMoveTargetNotFound,
                          self._move, SOURCE_ALLOCS, GONE)
        self.client._put_allocations.assert_called_once_with(
            self.context, SOURCE, {
                'allocations': {}, 'consumer_generation': 3,
                'project_id': 'p', 'user_id': 'u'})
        self.client.post.assert_not_called()

    def test_target_and_source_gone_raises_without_writing(self):
        self.assertRaises(exception.AllocationMoveTargetNotFound,
                          self._move, GONE, GONE)
        self.client._put_allocations.assert_not_called()
        self.client.post.assert_not_called()

    def test_target_exists_moves_with_both_generations(self):
        self.client.post.return_value = _response(204)
        self.assertTrue(self._move(SOURCE_ALLOCS, TARGET_ALLOCS))
        url, payload = self.client.post.call_args[0]
        self.assertEqual('/allocations', url)
        self.assertEqual({
            SOURCE: {'allocations': {}, 'consumer_generation': 3,
                     'project_id': 'p', 'user_id': 'u'},
            TARGET: {'allocations': SOURCE_ALLOCS['allocations'],
                     'consumer_generation': 7,
                     'project_id': 'p', 'user_id': 'u'}}, payload)

    def test_source_already_moved(self):
        self.assertTrue(self._move(GONE, TARGET_ALLOCS))
        self.client.post.assert_not_called()

    def test_target_deleted_between_read_and_write(self):
        """Read: target exists. Write: 409 because it was deleted. The
        retry sees it gone and removes the source allocations.
        """
        self.client.post.return_value = _response(
            409, 'consumer generation conflict')
        self.client._put_allocations.return_value = _response(204)
        self.assertRaises(exception.AllocationMoveTargetNotFound,
                          self._move, SOURCE_ALLOCS, TARGET_ALLOCS, GONE,
                          SOURCE_ALLOCS, GONE)
        self.client._put_allocations.assert_called_once()

    def test_target_changed_concurrently_fails_as_nova_does(self):
        self.client.post.return_value = _response(
            409, 'consumer generation conflict')
        self.assertRaises(exception.AllocationMoveFailed,
                          self._move, SOURCE_ALLOCS, TARGET_ALLOCS,
                          TARGET_ALLOCS)
        self.client._put_allocations.assert_not_called()

    def test_provider_conflict_is_retried(self):
        self.client.post.side_effect = [
            _response(409, 'resource provider generation conflict'),
            _response(204)]
        self.assertTrue(self._move(SOURCE_ALLOCS, TARGET_ALLOCS,
                                   SOURCE_ALLOCS, TARGET_ALLOCS))
        self.assertEqual(2, self.client.post.call_count)

    def test_other_error_returns_false(self):
        self.client.post.return_value = _response(500, 'boom')
        self.assertFalse(self._move(SOURCE_ALLOCS, TARGET_ALLOCS))

    def test_source_changed_while_removing_is_retried(self):
        self.client._put_allocations.side_effect = [
            _response(409), _response(204)]
        self.assertRaises(exception.AllocationMoveTargetNotFound,
                          self._move, SOURCE_ALLOCS, GONE,
                          SOURCE_ALLOCS, GONE)
        self.assertEqual(2, self.client._put_allocations.call_count)
