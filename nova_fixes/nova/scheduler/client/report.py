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

"""Drop-ins for nova/scheduler/client/report.py."""

from oslo_log import log as logging

from nova import exception
from nova.scheduler.client.report import CONSUMER_GENERATION_VERSION
from nova.scheduler.client.report import retries
from nova.scheduler.client.report import Retry
from nova.scheduler.client.report import safe_connect

LOG = logging.getLogger(__name__)


def move_allocations(self, context, source_consumer_uuid,
                     target_consumer_uuid,
                     target_consumer_generation_required=False):
    """Replaces SchedulerReportClient.move_allocations (bug 1848343).

    Move allocations from one consumer to another.

    Without ``target_consumer_generation_required`` the move is the one
    nova always made, which creates the target consumer if it is missing.

    :param target_consumer_generation_required: if True, the target
        consumer must still exist in placement, and its generation is
        required to match when the allocations are written. When it does
        not exist (it was deleted, for example with its server during a
        migration) it is not created again: the source consumer's
        allocations are removed and AllocationMoveTargetNotFound is raised.
    :returns: True if the move was successful (or already done),
              False otherwise.
    :raises AllocationMoveFailed: a consumer was changed concurrently.
    :raises AllocationMoveTargetNotFound: the target is required and gone.
    """
    if target_consumer_generation_required:
        return self._move_allocations_to_existing_consumer(
            context, source_consumer_uuid, target_consumer_uuid)
    return self._move_allocations_to_any_consumer(
        context, source_consumer_uuid, target_consumer_uuid)


@safe_connect
@retries
def _move_allocations_to_existing_consumer(self, context,
                                           source_consumer_uuid,
                                           target_consumer_uuid):
    """Added to SchedulerReportClient (bug 1848343).

    Move allocations to a target consumer that must exist.

    Every allocation of the source consumer moves to the target consumer
    in one POST /allocations that names the generations of both, so that
    a target deleted after it was read makes placement refuse the write
    instead of re-creating the consumer. See move_allocations().
    """
    source = self.get_allocs_for_consumer(context, source_consumer_uuid)
    target = self.get_allocs_for_consumer(context, target_consumer_uuid)

    if 'consumer_generation' not in target:
        # Placement drops a consumer left with no allocations, so a
        # consumer without a generation does not exist.
        if source.get('allocations'):
            r = self._put_allocations(context, source_consumer_uuid, {
                'allocations': {},
                'consumer_generation': source['consumer_generation'],
                'project_id': source['project_id'],
                'user_id': source['user_id']})
            if r.status_code == 409:
                raise Retry('move_allocations',
                            'consumer %s changed while its allocations '
                            'were being removed' % source_consumer_uuid)
            if r.status_code != 204:
                return False
        LOG.info('Consumer %s no longer exists in placement; removed '
                 'the allocations of consumer %s instead of moving them '
                 'to it.', target_consumer_uuid, source_consumer_uuid)
        raise exception.AllocationMoveTargetNotFound(
            source_consumer=source_consumer_uuid,
            target_consumer=target_consumer_uuid)

    if not source.get('allocations'):
        LOG.info('Consumer %s has no allocations; assuming they were '
                 'already moved to consumer %s.',
                 source_consumer_uuid, target_consumer_uuid)
        return True

    owner = {'project_id': source['project_id'],
             'user_id': source['user_id']}
    payload = {
        source_consumer_uuid: dict(
            owner, allocations={},
            consumer_generation=source['consumer_generation']),
        target_consumer_uuid: dict(
            owner, allocations=source['allocations'],
            consumer_generation=target['consumer_generation']),
    }
    r = self.post('/allocations', payload,
                  version=CONSUMER_GENERATION_VERSION,
                  global_request_id=context.global_id)
    if r.status_code == 204:
        return True
    if r.status_code != 409:
        LOG.warning('Unable to move allocations of consumer %s to '
                    'consumer %s: %s %s', source_consumer_uuid,
                    target_consumer_uuid, r.status_code, r.text)
        return False
    detail = r.json()['errors'][0]['detail']
    if 'consumer generation conflict' not in detail:
        raise Retry('move_allocations',
                    'a resource provider changed: %s' % detail)
    gone = 'consumer_generation' not in self.get_allocs_for_consumer(
        context, target_consumer_uuid)
    if gone:
        # Deleted between our read and our write: the next attempt removes
        # the source allocations.
        raise Retry('move_allocations',
                    'consumer %s was deleted' % target_consumer_uuid)
    raise exception.AllocationMoveFailed(
        source_consumer=source_consumer_uuid,
        target_consumer=target_consumer_uuid, error=r.text)
