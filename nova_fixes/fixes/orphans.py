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

"""Orphan instances: guests running on a compute host that nova does not
account for there are never found (no Launchpad bug; nova's
running_deleted_instance_action only handles deleted records).
"""

from nova_fixes import registry

COMMIT_MESSAGE = """\
A guest running on a compute host that nova does not account for there
runs unseen: _cleanup_running_deleted_instances only finds guests whose
instance record is deleted but still present. A guest whose record was
archived or purged, or was never created by nova, and the duplicate a
failed live migration cleanup leaves on the source host (its live
record names the destination), keep running and using the host's
resources.

The new _cleanup_orphan_instances periodic task classifies the guests
of the hypervisor against the cell database in at most five queries
whatever the number of guests and nodes, and acts on the ones that are
orphans as [orphan_instances]action says: log (the default), stop or
reap. Only on positive evidence: an unknown guest has no record in the
cell, hidden or deleted, and no instance mapping in the API database
(so no other cell knows it); where the mappings cannot be read, as in
the superconductor layout whose cell conductors have no API database,
no migration of it in the cell and no allocations in placement, which
every server nova knows holds from its scheduling to its delete; a
foreign guest has a live record naming another host. A hidden record
(either side of a cross-cell resize), a record naming no host
(shelved), a migration in progress involving the host or any
task_state protects the guest. A guest is only acted
upon after it was seen as an orphan for grace_period seconds, at most
max_actions_per_run a run; a failed lookup makes the run decide
nothing. Reaping destroys the guest on this host only: its disks are
kept, no volume is detached and no port is unbound."""

OPTIONS_MESSAGE = """\
The orphan instances periodic task, added by the next change, is
configured in a group of its own, [orphan_instances], rather than with
[DEFAULT]running_deleted_instance_action: that option's default is
reap, and a task that can destroy guests nova has no record of must
default to doing nothing but logging. The group has the action (log,
stop or reap; log by default), the interval between runs, the grace
period a guest must stay an orphan before it is acted on, the most
guests acted on in one run and the guests never to touch.

Nothing reads the options yet; the group is registered and listed for
the sample configuration."""

NOTE_MESSAGE = """\
Operators need to know what the orphan instances periodic task does
before they change its default. This adds its release note and a page
of the admin guide, listed under Maintenance: what the task takes for an
orphan and what it leaves alone, its options and their safe defaults
(log only; what stop and reap do and do not do: reap keeps disks,
volumes and ports), what a run logs, and how it decides where the
compute cannot read the API database (the superconductor layout)."""

#: The feature's blueprint (its spec: patches/master/specs/
#: orphan-instances.rst), which each of its changes implements.
BLUEPRINT = 'Implements: blueprint orphan-instances-periodic-task'

FIX = registry.Fix(
    bug='orphans',
    title='Guests running on a compute host that nova does not know '
          'about are never found',
    open_upstream=True,
    upstream='open; nova only handles guests whose record is deleted '
             '(running_deleted_instance_action)',
    targets=(
        registry.Target('nova.compute.manager:ComputeManager.'
                        '_cleanup_orphan_instances',
                        'nova_fixes.nova.compute.manager:'
                        'orphan_instances_periodic_task',
                        new=True, periodic=True, services=('compute',)),
    ),
    tests=('test_orphan_instances',),
    nova_tests=(
        registry.NovaTest(
            'nova/tests/functional/compute/test_orphan_instances.py',
            'test_orphan_instances.py',
            pairs=(
                ('test_default_only_logs',
                 'test_orphan_instances.OrphanInstancesSafetyTest.'
                 'test_log_is_the_default_and_changes_nothing'),
                ('test_unknown_guest_stopped',
                 'test_orphan_instances.OrphanInstancesTest.'
                 'test_unknown_guest_is_stopped'),
                ('test_unknown_guest_reaped_after_grace_period',
                 'test_orphan_instances.OrphanInstancesSafetyTest.'
                 'test_grace_period'),
                ('test_foreign_guest_reaped_without_its_disks',
                 'test_orphan_instances.OrphanInstancesTest.'
                 'test_live_migration_whose_source_cleanup_failed'),
                ('test_migration_in_progress_protects_the_guest',
                 'test_orphan_instances.OrphanInstancesSafetyTest.'
                 'test_migration_in_progress_protects_the_guest'),
                ('test_target_guest_while_its_record_is_hidden',
                 'test_orphan_instances.CrossCellResizeTest.'
                 'test_target_guest_while_its_record_is_hidden'),
                ('test_source_guest_at_verify_resize',
                 'test_orphan_instances.CrossCellResizeTest.'
                 'test_source_guest_at_verify_resize'),
                ('test_decided_without_the_api_database',
                 'test_orphan_instances.SuperconductorOrphanTest.'
                 'test_guest_of_an_archived_server_is_reaped'),
            )),
    ),
    notes=('orphan-instances-periodic-task-8d41c6f0a97e2b35.yaml',),
    unit_tests=(registry.NovaUnitTests(
        'nova/tests/unit/compute/test_compute_mgr.py',
        'compute_mgr_orphans.py'),),
    docs=(registry.NovaDoc('doc/source/admin/orphan-instances.rst',
                           'orphan-instances.rst',
                           'doc/source/admin/index.rst', 'support-compute'),),
    patch=registry.Patch(
        slug='Add-a-periodic-task-for-orphan-instances',
        subject='Add a periodic task for orphan instances',
        body=COMMIT_MESSAGE,
        trailers=(BLUEPRINT,),
        conf_modules=('nova_fixes.nova.conf.orphan_instances',),
        # As nova's reviewers take a new feature: its options, the task
        # with its tests, its documentation (the spec:
        # patches/master/specs/orphan-instances.rst).
        changes=(
            registry.Change(
                slug='Add-the-orphan_instances-configuration-options',
                subject='Add the [orphan_instances] configuration options',
                body=OPTIONS_MESSAGE,
                trailers=(BLUEPRINT,),
                conf_modules=('nova_fixes.nova.conf.orphan_instances',)),
            registry.Change(
                slug='Add-a-periodic-task-for-orphan-instances',
                subject='Add a periodic task for orphan instances',
                body=COMMIT_MESSAGE,
                trailers=(BLUEPRINT,),
                targets=('nova.compute.manager:ComputeManager.'
                         '_cleanup_orphan_instances',),
                nova_tests=('nova/tests/functional/compute/'
                            'test_orphan_instances.py',),
                unit_tests=('compute_mgr_orphans.py',)),
            registry.Change(
                slug='Document-the-orphan-instances-task',
                subject='Document the orphan instances task',
                body=NOTE_MESSAGE,
                trailers=(BLUEPRINT,),
                notes=('orphan-instances-periodic-task-'
                       '8d41c6f0a97e2b35.yaml',),
                docs=('doc/source/admin/orphan-instances.rst',)),
        ),
    ),
)
