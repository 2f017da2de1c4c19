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

from nova import exception
from nova.i18n import _


class AllocationMoveTargetNotFound(exception.NovaException):
    """Added to nova.exception (bug 1848343).

    Raised by SchedulerReportClient.move_allocations when the caller required
    the target consumer to exist and it did not: the source consumer's
    allocations were removed instead of moved.
    """
    msg_fmt = _('Consumer %(target_consumer)s no longer exists in '
                'placement; the allocations of consumer %(source_consumer)s '
                'were removed instead of moved to it.')
