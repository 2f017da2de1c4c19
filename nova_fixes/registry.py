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

"""One record per fix: what it closes and which nova code it replaces.

This module is data only and imports no nova code, so that entry points can
import it before nova's own monkey patching has run.
"""

import dataclasses

from nova_fixes import errors

#: nova major version -> series name, for every supported series.
SERIES_BY_MAJOR = {
    29: '2024.1',
    30: '2024.2',
    31: '2025.1',
    32: '2025.2',
    33: '2026.1',
    34: '2026.2',
}
SUPPORTED_SERIES = tuple(SERIES_BY_MAJOR.values())
DEFAULT_SERIES = '2026.2'

#: The nova and openstack-placement release each series is tested with.
RELEASES = {
    '2024.1': ('29.4.0', '11.0.1'),
    '2024.2': ('30.3.0', '12.0.2'),
    '2025.1': ('31.3.1', '13.0.1'),
    '2025.2': ('32.2.1', '14.0.0'),
    '2026.1': ('33.0.2', '15.0.0'),
    '2026.2': ('34.0.0', '16.0.0'),
}


def check_series(series):
    if series not in SUPPORTED_SERIES:
        raise errors.UnknownSeries(series, SUPPORTED_SERIES)
    return series


@dataclasses.dataclass(frozen=True)
class Target:
    """One attribute of nova that a fix replaces or adds.

    ``path`` is ``module:attribute`` where attribute may be dotted
    (``Class.method``). ``replacement`` is the same form, in nova_fixes.
    ``new`` targets do not exist in nova: activation adds them and refuses
    if nova already has something by that name.
    """
    path: str
    replacement: str
    new: bool = False
    #: The replacement is a factory returning a periodic task (decorated
    #: with oslo.service's periodic_task), added to the owner's periodic
    #: tasks at activation and removed at deactivation.
    periodic: bool = False
    #: For a replaced target whose drop-in delegates to nova's original:
    #: the name the original keeps in nova once patched. The drop-in calls
    #: it by that name (``self.<name>(...)`` for a method, ``<name>(...)``
    #: for a module-level function); activation binds it while active.
    original_as: str = ''
    #: The series this target applies to, when nova's original differs
    #: between series so that each form has its own drop-in.
    series: tuple = SUPPORTED_SERIES

    @property
    def module(self):
        return self.path.split(':')[0]

    @property
    def attribute(self):
        return self.path.split(':')[1]


@dataclasses.dataclass(frozen=True)
class Fix:
    #: The Launchpad bug number, or a name for a fix that has none.
    bug: object
    title: str
    #: True while the bug is open in nova master: its regression tests must
    #: fail (recreate the bug) on vanilla nova.
    open_upstream: bool
    upstream: str
    targets: tuple
    #: Name of its functional test module(s): tests/functional/<name>*.py
    test_module: str = ''
    #: The series whose originals are recorded (see fingerprints.json) and
    #: on which its tests have been seen to pass.
    series: tuple = SUPPORTED_SERIES


FIXES = (
    Fix(
        bug=1848343,
        title='Reverting migration-based allocations leaks allocations if '
              'the server is deleted',
        open_upstream=True,
        upstream='open; nova test_bug_1848343 asserts the leak under a FIXME',
        targets=(
            Target('nova.exception:AllocationMoveTargetNotFound',
                   'nova_fixes.exception:AllocationMoveTargetNotFound',
                   new=True),
            Target('nova.compute.utils:is_instance_deleted',
                   'nova_fixes.compute.utils:is_instance_deleted',
                   new=True),
            Target('nova.scheduler.client.report:'
                   'SchedulerReportClient._move_allocations_to_existing_'
                   'consumer',
                   'nova_fixes.scheduler.client.report:'
                   '_move_allocations_to_existing_consumer', new=True),
            Target('nova.scheduler.client.report:'
                   'SchedulerReportClient.move_allocations',
                   'nova_fixes.scheduler.client.report:move_allocations',
                   original_as='_move_allocations_to_any_consumer'),
            Target('nova.conductor.tasks.migrate:'
                   'revert_allocation_for_migration',
                   'nova_fixes.conductor.tasks.migrate:'
                   'revert_allocation_for_migration',
                   original_as='_move_allocations_back_to_instance'),
            Target('nova.compute.manager:ComputeManager._revert_allocation',
                   'nova_fixes.compute.manager:_revert_allocation'),
        ),
        test_module='test_bug_1848343',
    ),
    Fix(
        bug='orphans',
        title='Guests running on a compute host that nova does not know '
              'about are never found',
        open_upstream=True,
        upstream='open; nova only handles guests whose record is deleted '
                 '(running_deleted_instance_action)',
        targets=(
            Target('nova.compute.manager:ComputeManager.'
                   '_cleanup_orphan_instances',
                   'nova_fixes.compute.manager:'
                   'orphan_instances_periodic_task',
                   new=True, periodic=True),
        ),
        test_module='test_orphan_instances',
    ),
    Fix(
        bug=1859496,
        title='Servers that fail to build before reaching a compute, or '
              'that are deleted while placement is unreachable, leak '
              'their allocations',
        open_upstream=True,
        upstream='windows left by f35930eef8 (nova 21.0.0), which deletes '
                 'the allocations when the API deletes a server in BUILD: '
                 'the conductor\'s _cleanup_build_artifacts keeps them; a '
                 'delete while placement is unreachable loses them',
        targets=(
            Target('nova.exception:PlacementUnavailableForDelete',
                   'nova_fixes.exception:PlacementUnavailableForDelete',
                   new=True),
            Target('nova.conductor.manager:'
                   'ComputeTaskManager._cleanup_build_artifacts',
                   'nova_fixes.conductor.manager:_cleanup_build_artifacts',
                   original_as='_error_out_build_artifacts'),
            Target('nova.compute.api:API._attempt_delete_of_buildrequest',
                   'nova_fixes.compute.api:'
                   '_attempt_delete_of_buildrequest'),
            Target('nova.api.openstack.compute.servers:'
                   'ServersController.delete',
                   'nova_fixes.api.openstack.compute.servers:'
                   'ServersControllerBefore2026.delete',
                   series=('2024.1', '2024.2', '2025.1', '2025.2')),
            Target('nova.api.openstack.compute.servers:'
                   'ServersController.delete',
                   'nova_fixes.api.openstack.compute.servers:'
                   'ServersController.delete',
                   series=('2026.1', '2026.2')),
        ),
        test_module='test_bug_1859496_windows',
    ),
)

FIXES_BY_BUG = {str(fix.bug): fix for fix in FIXES}

#: Regression test modules (tests/functional/<module>.py) of bugs fixed in
#: nova itself: {module: (commit, release)}. Vanilla nova passes them; a
#: run with the commit taken out (NOVA_FIXES_WITHOUT=<commit>, see
#: tests/functional/base.py) shows that they catch the bug. Keyed by
#: module, not bug: the windows upstream's fix left open have tests of
#: their own (test_bug_1859496_windows) that must recreate on vanilla.
FIXED_UPSTREAM = {
    'test_bug_1859496': ('f35930eef8', 'nova 21.0.0'),
    # The reservations of the original report went with counted quotas
    # (Pike); what is left of the bug (leaked allocations, mappings not
    # queued for delete: quota drift) is what f35930eef8 closed.
    'test_bug_1783613': ('f35930eef8', 'nova 21.0.0'),
}


def targets_of(fix, series):
    """The targets of a fix that apply to a series."""
    return [target for target in fix.targets if series in target.series]


def get_fix(bug):
    try:
        return FIXES_BY_BUG[str(bug)]
    except KeyError:
        raise errors.UnknownFix(bug, sorted(FIXES_BY_BUG))
