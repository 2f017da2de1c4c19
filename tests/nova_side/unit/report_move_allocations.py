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

from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids

from nova import context
from nova import exception
from nova.scheduler.client import report
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.unit import fake_requests


class TestMoveAllocationsToExistingConsumer(test.NoDBTestCase):
    """move_allocations with and without target_consumer_generation_required

    Bug 1848343: reverting a migration's allocations to the instance
    consumer of a server deleted during the move created that consumer again
    and leaked the source node's resources. With
    target_consumer_generation_required=True the target consumer must exist:
    its generation is passed to placement, and when it is missing the source
    consumer's allocations are removed and AllocationMoveTargetNotFound is
    raised.
    """

    def setUp(self):
        super().setUp()
        self.context = context.get_admin_context()
        self.useFixture(nova_fixtures.KSAFixture())
        self.client = report.SchedulerReportClient(mock.Mock())

        patcher = mock.patch(
            'nova.scheduler.client.report.SchedulerReportClient.get')
        self.mock_get = patcher.start()
        self.addCleanup(patcher.stop)
        patcher = mock.patch(
            'nova.scheduler.client.report.SchedulerReportClient.post')
        self.mock_post = patcher.start()
        self.addCleanup(patcher.stop)
        self.mock_post.return_value = fake_requests.FakeResponse(204)
        patcher = mock.patch(
            'nova.scheduler.client.report.SchedulerReportClient.put')
        self.mock_put = patcher.start()
        self.addCleanup(patcher.stop)
        self.mock_put.return_value = fake_requests.FakeResponse(204)
        # The retries decorator sleeps between attempts.
        patcher = mock.patch('time.sleep')
        patcher.start()
        self.addCleanup(patcher.stop)

        self.source = uuids.migration
        self.target = uuids.instance
        self.source_allocs = {
            uuids.source_node: {
                'generation': 3,
                'resources': {'VCPU': 1, 'MEMORY_MB': 512},
            },
        }
        self.source_data = {
            'allocations': self.source_allocs,
            'consumer_generation': 2,
            'project_id': uuids.project_id,
            'user_id': uuids.user_id,
        }
        self.target_data = {
            'allocations': {
                uuids.dest_node: {
                    'generation': 5,
                    'resources': {'VCPU': 1, 'MEMORY_MB': 512},
                },
            },
            'consumer_generation': 7,
            'project_id': uuids.project_id,
            'user_id': uuids.user_id,
        }
        # GET /allocations/{consumer} of placement (>= 1.28) for a consumer
        # that does not exist: no consumer_generation.
        self.missing_data = {'allocations': {}}

    @staticmethod
    def _get_rsp(data):
        return fake_requests.FakeResponse(200, jsonutils.dumps(data))

    @staticmethod
    def _409(detail):
        return fake_requests.FakeResponse(
            409, jsonutils.dumps(
                {'errors': [{'code': 'placement.concurrent_update',
                             'detail': detail}]}))

    def _gets(self, *bodies):
        self.mock_get.side_effect = [self._get_rsp(d) for d in bodies]

    def _assert_gets(self, *consumers):
        self.assertEqual(
            [mock.call('/allocations/%s' % c, version='1.28',
                       global_request_id=self.context.global_id)
             for c in consumers],
            self.mock_get.call_args_list)

    def _expected_move_payload(self, target_generation):
        return {
            self.source: {
                'allocations': {},
                'consumer_generation': 2,
                'project_id': uuids.project_id,
                'user_id': uuids.user_id,
            },
            self.target: {
                'allocations': self.source_allocs,
                'consumer_generation': target_generation,
                'project_id': uuids.project_id,
                'user_id': uuids.user_id,
            },
        }

    def _assert_source_removed(self, times=1):
        put = mock.call(
            '/allocations/%s' % self.source,
            {'allocations': {},
             'consumer_generation': 2,
             'project_id': uuids.project_id,
             'user_id': uuids.user_id},
            version='1.28', global_request_id=self.context.global_id)
        self.assertEqual([put] * times, self.mock_put.call_args_list)

    def test_not_required_creates_missing_target(self):
        """Without the flag the move is nova's: a missing target is created
        by a POST /allocations with consumer_generation None.
        """
        self._gets(self.source_data, self.missing_data)

        with mock.patch.object(
                self.client,
                '_move_allocations_to_existing_consumer') as mock_existing:
            self.assertTrue(self.client.move_allocations(
                self.context, self.source, self.target,
                target_consumer_generation_required=False))

        mock_existing.assert_not_called()
        self.mock_post.assert_called_once_with(
            '/allocations', self._expected_move_payload(None),
            version='1.28', global_request_id=self.context.global_id)
        self.mock_put.assert_not_called()

    def test_default_is_not_required(self):
        self._gets(self.source_data, self.missing_data)

        self.assertTrue(self.client.move_allocations(
            self.context, self.source, self.target))

        self.mock_post.assert_called_once_with(
            '/allocations', self._expected_move_payload(None),
            version='1.28', global_request_id=self.context.global_id)

    def test_required_existing_target_passes_its_generation(self):
        self._gets(self.source_data, self.target_data)

        self.assertTrue(self.client.move_allocations(
            self.context, self.source, self.target,
            target_consumer_generation_required=True))

        self._assert_gets(self.source, self.target)
        self.mock_post.assert_called_once_with(
            '/allocations', self._expected_move_payload(7),
            version='1.28', global_request_id=self.context.global_id)
        self.mock_put.assert_not_called()

    def test_required_missing_target_removes_source(self):
        """The server was deleted during its move: nothing is written for
        the instance consumer, the migration's allocations are removed and
        AllocationMoveTargetNotFound is raised.
        """
        self._gets(self.source_data, self.missing_data)

        ex = self.assertRaises(
            exception.AllocationMoveTargetNotFound,
            self.client.move_allocations, self.context, self.source,
            self.target, target_consumer_generation_required=True)

        self.assertIn(self.source, str(ex))
        self.assertIn(self.target, str(ex))
        self._assert_gets(self.source, self.target)
        self.mock_post.assert_not_called()
        self._assert_source_removed()
        # Only the source consumer was written to.
        for call in self.mock_put.call_args_list:
            self.assertNotIn(self.target, call.args[0])

    def test_required_missing_target_empty_source(self):
        """Neither consumer holds anything: nothing is written at all."""
        self._gets(self.missing_data, self.missing_data)

        self.assertRaises(
            exception.AllocationMoveTargetNotFound,
            self.client.move_allocations, self.context, self.source,
            self.target, target_consumer_generation_required=True)

        self.mock_post.assert_not_called()
        self.mock_put.assert_not_called()

    def test_required_missing_target_source_changed_is_retried(self):
        """A 409 on the removal of the source's allocations is retried: on
        the next attempt the source is read again, then removed.
        """
        self._gets(self.source_data, self.missing_data,
                   self.source_data, self.missing_data)
        self.mock_put.side_effect = [
            self._409('consumer generation conflict'),
            fake_requests.FakeResponse(204)]

        self.assertRaises(
            exception.AllocationMoveTargetNotFound,
            self.client.move_allocations, self.context, self.source,
            self.target, target_consumer_generation_required=True)

        self._assert_gets(self.source, self.target, self.source, self.target)
        self._assert_source_removed(times=2)
        self.mock_post.assert_not_called()

    def test_required_missing_target_source_removal_fails(self):
        """The source's allocations could not be removed: the move fails
        (False), as a failed move always did, and nothing is created.
        """
        self._gets(self.source_data, self.missing_data)
        self.mock_put.return_value = fake_requests.FakeResponse(
            503, 'placement not there')

        self.assertFalse(self.client.move_allocations(
            self.context, self.source, self.target,
            target_consumer_generation_required=True))

        self._assert_source_removed()
        self.mock_post.assert_not_called()

    @mock.patch('nova.scheduler.client.report.LOG.info')
    def test_required_empty_source_already_moved(self, mock_info):
        self._gets(self.missing_data, self.target_data)

        self.assertTrue(self.client.move_allocations(
            self.context, self.source, self.target,
            target_consumer_generation_required=True))

        self.mock_post.assert_not_called()
        self.mock_put.assert_not_called()
        mock_info.assert_called_once()
        self.assertIn('assuming they were already moved',
                      mock_info.call_args.args[0])

    def test_required_consumer_generation_conflict(self):
        """Placement refuses the write with a consumer generation conflict
        and the target still exists: AllocationMoveFailed.
        """
        self._gets(self.source_data, self.target_data, self.target_data)
        self.mock_post.return_value = self._409(
            'consumer generation conflict')

        self.assertRaises(
            exception.AllocationMoveFailed,
            self.client.move_allocations, self.context, self.source,
            self.target, target_consumer_generation_required=True)

        self._assert_gets(self.source, self.target, self.target)
        self.mock_post.assert_called_once_with(
            '/allocations', self._expected_move_payload(7),
            version='1.28', global_request_id=self.context.global_id)
        self.mock_put.assert_not_called()

    def test_required_target_deleted_before_write(self):
        """The target was deleted between the read and the write: placement
        refuses the POST, the move is retried, sees the target gone and
        removes the source's allocations.
        """
        self._gets(self.source_data, self.target_data, self.missing_data,
                   self.source_data, self.missing_data)
        self.mock_post.return_value = self._409(
            'consumer generation conflict')

        self.assertRaises(
            exception.AllocationMoveTargetNotFound,
            self.client.move_allocations, self.context, self.source,
            self.target, target_consumer_generation_required=True)

        self._assert_gets(self.source, self.target, self.target,
                          self.source, self.target)
        self.mock_post.assert_called_once_with(
            '/allocations', self._expected_move_payload(7),
            version='1.28', global_request_id=self.context.global_id)
        self._assert_source_removed()

    def test_required_concurrent_provider_update(self):
        """A resource provider changed: retried, 1 attempt and 3 retries."""
        self._gets(*[self.source_data, self.target_data] * 4)
        self.mock_post.return_value = self._409('')

        self.assertFalse(self.client.move_allocations(
            self.context, self.source, self.target,
            target_consumer_generation_required=True))

        self.assertEqual(4, self.mock_post.call_count)
        self.mock_put.assert_not_called()

    @mock.patch('nova.scheduler.client.report.LOG.warning')
    def test_required_not_409_failure(self, mock_warning):
        self._gets(self.source_data, self.target_data)
        self.mock_post.return_value = fake_requests.FakeResponse(
            503, 'placement not there')

        self.assertFalse(self.client.move_allocations(
            self.context, self.source, self.target,
            target_consumer_generation_required=True))

        self.mock_post.assert_called_once()
        self.mock_put.assert_not_called()
        self.assertIn('placement not there', mock_warning.call_args.args)
