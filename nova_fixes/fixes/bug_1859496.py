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

"""Bug 1859496: servers that fail to build before reaching a compute, or
that are deleted while placement is unreachable, leak their allocations.

https://bugs.launchpad.net/nova/+bug/1859496 (and 1783613, whose modern
form nova's f35930eef8 closed with it)
"""

import ast

from nova_fixes import errors
from nova_fixes.export import edits
from nova_fixes import registry

COMMIT_MESSAGE = """\
Commit f35930eef8 made the API delete the allocations of a server it
deletes while the server is still being built. Three ways remain for the
scheduler's claim to outlive a server that never reached a compute host:

* When schedule_and_build_instances gives up after the scheduler claimed
  (the quota recheck fails, or filling the resource provider mapping of
  an instance fails), _cleanup_build_artifacts puts the instances in
  ERROR and destroys their build requests, but keeps their allocations:
  the servers hold capacity on a host where they never ran, and count as
  the user's cores and RAM with [quota]count_usage_from_placement. The
  conductor now deletes the allocations of the instances it had not
  handed to a compute yet (those whose instance mapping has no cell);
  a failure to do so is logged and does not change the build's outcome.

* When placement cannot be reached while the API deletes such a server,
  the build request is destroyed first and the failure to delete the
  allocations is only logged: nothing names them any more. The API now
  deletes the allocations before the build request, and if that fails it
  refuses the delete with PlacementUnavailableForDelete, returned by the
  servers controller as 503 Service Unavailable: nothing was destroyed,
  and deleting the server again once placement answers completes it.
  _local_delete_cleanup then does not delete them a second time (one
  placement request per delete, as before); a claim that lands between
  the two deletes, for a build whose conductor had already found the
  build request, is deleted by that conductor in _delete_build_request
  when it finds the build request gone. The same holds a little later,
  once the conductor has created the instance in its cell and cast the
  build, before the compute claimed it: the instance has no host, so
  the API destroys its record itself and deletes the allocations after.
  For an instance BUILDING with no build request left, the allocations
  are now deleted first too, or the delete refused.

* When the conductor buries servers in cell0 after the scheduler
  claimed for them (the scheduler's reply was lost and the conductor
  timed out), _bury_in_cell0 kept the claim: the conductor now deletes
  the allocations of the instances it mapped to cell0.

A claim that lands after the API deleted the server, when the conductor
that asked for it dies before it notices, stays out of reach of all:
nova-manage placement audit --delete finds it (see the release note)."""


REGRESSIONS = 'nova/tests/functional/regressions/'

#: The fix's changes for nova's review: a recreate change and its fix for
#: each window f35930eef8 left open.
RECREATE_CLEANUP_MESSAGE = """\
Commit f35930eef8 made the API delete the allocations of a server it
deletes while the server is still being built. The scheduler's claim
can still outlive a server that never reached a compute host when the
conductor gives the build up after the scheduler claimed: its quota
recheck fails (a concurrent request of the project, or an admin,
lowered the quota after the API checked it), or filling the resource
provider mapping of an instance fails.

This adds a functional regression test that fails the quota recheck
for a request of two servers. Both go to ERROR, on no host, and still
hold the scheduler's claim on host1: the test asserts that under a
FIXME, and the change that fixes it flips the assertion."""

CLEANUP_MESSAGE = """\
When schedule_and_build_instances gives up after the scheduler claimed
(the quota recheck fails, or filling the resource provider mapping of
an instance fails), _cleanup_build_artifacts puts the instances in
ERROR and destroys their build requests, but keeps their allocations:
the servers hold capacity on a host where they never ran, and count as
the user's cores and RAM with [quota]count_usage_from_placement.

The conductor now deletes the allocations of the instances it had not
handed to a compute yet (those whose instance mapping has no cell); a
failure to do so is logged and does not change the build's outcome.
The regression test now asserts that no claim is left."""

RECREATE_PLACEMENT_MESSAGE = """\
Commit f35930eef8 made the API delete the allocations of a server it
deletes while the server is still being built. When placement cannot
be reached during that delete, the build request is destroyed first
and the failure to delete the allocations is only logged: the DELETE
answers 204 and nothing names the claim any more.

This adds a functional regression test that holds the conductor after
the scheduler claimed, deletes the server while placement's requests
fail, then lets the conductor go on. The claim is left once the server
is gone: the test asserts that under a FIXME, and the change that fixes
it flips the assertion."""

PLACEMENT_MESSAGE = """\
When placement cannot be reached while the API deletes a server that is
being built, the build request was destroyed first and the failure to
delete the allocations only logged: nothing named them any more.

The API now deletes the allocations before the build request, and if
that fails it refuses the delete with PlacementUnavailableForDelete,
returned by the servers controller as 503 Service Unavailable: nothing
was destroyed, and deleting the server again once placement answers
completes it. _local_delete_cleanup then does not delete them a second
time (one placement request per delete, as before); a claim that lands
between the two deletes, for a build whose conductor had already found
the build request, is deleted by that conductor in
_delete_build_request when it finds the build request gone. The same
holds a little later, once the conductor has created the instance in
its cell and cast the build, before the compute claimed it: the
instance has no host, so the API destroys its record itself and
deletes the allocations after. For an instance BUILDING with no build
request left, the allocations are now deleted first too, or the delete
refused.

A claim that lands after the API deleted the server, when the
conductor that asked for it dies before it notices, stays out of
reach: nova-manage placement audit --delete finds it (see the release
note). The regression test now asserts the 503 and a retry that leaves
nothing.

nova's tests that delete a server being built with no placement at all
(test_bug_1914777's test_build_request_and_instance_not_found and
test_deleting_instance_at_the_same_time, and the unit tests of the build
request's delete) now give the report client a placement that answers:
they test the life of the build request, not an outage, and such a
delete now needs placement to answer, since without it the allocations
would be left with nothing naming them."""

RECREATE_BURY_MESSAGE = """\
When the scheduler's reply to select_destinations is lost after it
claimed (the conductor times out), the conductor buries the server in
cell0, in ERROR, and keeps the scheduler's claim: capacity on a
compute host, and with [quota]count_usage_from_placement the user's
cores and RAM, stay held by a server that never reached the host, for
as long as the user does not delete it.

This adds a functional regression test that loses the reply once the
scheduler has claimed. The server is buried in cell0 with the claim on
host1: the test asserts that under a FIXME, and the change that fixes
it flips the assertion."""

BURY_MESSAGE = """\
When the conductor buries servers in cell0 after the scheduler claimed
for them (the scheduler's reply was lost and the conductor timed out),
_bury_in_cell0 kept the claim. The conductor now deletes the
allocations of the instances it mapped to cell0; a failure to do so is
logged. The regression test now asserts that no claim is left.

This is the last window the fix of bug 1859496 (f35930eef8) left open
that a change can close."""


#: nova unit tests that delete a build request with no placement to talk
#: to: the allocations are now deleted first, and an unreachable placement
#: refuses the delete, so they get a report client that succeeds.
BUILD_REQUEST_DELETE_TESTS = (
    ('nova/tests/unit/compute/test_api.py',
     ('test_attempt_delete_of_buildrequest_success',
      'test_attempt_delete_of_buildrequest_already_deleted')),
    ('nova/tests/unit/compute/test_compute.py',
     ('test_delete_while_booting_instance_not_in_cell_db_cellsv2',)),
    # No placement at all there: the delete of a server BUILDING in its
    # cell now deletes its allocations first, or is refused.
    ('nova/tests/functional/regressions/test_bug_1914777.py',
     ('test_build_request_and_instance_not_found',
      'test_deleting_instance_at_the_same_time')),
)


def build_request_tests_mock_placement(files):
    """Give nova's unit tests of the build request delete a placement."""
    changed = {}
    for path, names in BUILD_REQUEST_DELETE_TESTS:

        def edit(text, names=names):
            lines = text.splitlines(True)
            tree = ast.parse(text)
            for name in names:
                func = edits.function(tree, name)
                if func is None:
                    raise errors.ExportError('%s: no test %s' % (path, name))
            for func in sorted((edits.function(tree, n) for n in names),
                               key=lambda f: -f.lineno):
                indent = ' ' * func.col_offset
                lines.insert(func.lineno - 1, (
                    "%s@mock.patch('nova.scheduler.client.report."
                    "SchedulerReportClient.'\n"
                    "%s            'delete_allocation_for_instance',\n"
                    "%s            new=mock.Mock(return_value=True))\n"
                    % (indent, indent, indent)))
            return ''.join(lines)

        changed.update(edits.edit_python(files, path, edit))
    return changed


def bury_without_cell0_test_passes_a_list(files):
    """nova's test of _bury_in_cell0 without cell0: a list of build
    requests.

    test_bury_in_cell0_no_cell0 passes build_requests=1, which nova's
    original never iterates when cell0 is missing. _bury_in_cell0 now
    reads the UUIDs of what it was given after the original returns (to
    delete the claims of the instances it mapped to cell0: none here), so
    it gets an empty list; the test still checks that the original looked
    cell0 up and returned.
    """
    path = 'nova/tests/unit/conductor/test_conductor.py'

    def edit(text):
        tree = ast.parse(text)
        func = edits.function(tree, 'test_bury_in_cell0_no_cell0')
        if func is None or text.count('build_requests=1)') != 1:
            raise errors.ExportError('%s: no test_bury_in_cell0_no_cell0 '
                                     'passing build_requests=1' % path)
        return text.replace('build_requests=1)', 'build_requests=[])')

    return edits.edit_python(files, path, edit)


#: nova's unit tests of the conductor's manager, where the tests of the
#: three windows' conductor functions go.
CONDUCTOR_UNIT = 'nova/tests/unit/conductor/test_conductor.py'

FIX = registry.Fix(
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
        registry.Target('nova.exception:PlacementUnavailableForDelete',
                        'nova_fixes.nova.exception:'
                        'PlacementUnavailableForDelete', new=True,
                        services=('api',), after='AllocationDeleteFailed'),
        registry.Target('nova.conductor.manager:'
                        'ComputeTaskManager._cleanup_build_artifacts',
                        'nova_fixes.nova.conductor.manager:'
                        '_cleanup_build_artifacts',
                        original_as='_error_out_build_artifacts',
                        services=('conductor',)),
        registry.Target('nova.conductor.manager:'
                        'ComputeTaskManager._delete_build_request',
                        'nova_fixes.nova.conductor.manager:'
                        '_delete_build_request',
                        original_as='_destroy_built_instance',
                        services=('conductor',)),
        registry.Target('nova.compute.api:'
                        'API._attempt_delete_of_buildrequest',
                        'nova_fixes.nova.compute.api:'
                        '_attempt_delete_of_buildrequest',
                        services=('api',)),
        registry.Target('nova.conductor.manager:'
                        'ComputeTaskManager._bury_in_cell0',
                        'nova_fixes.nova.conductor.manager:_bury_in_cell0',
                        original_as='_bury_instances_in_cell0',
                        services=('conductor',)),
        registry.Target('nova.compute.api:API._local_delete_cleanup',
                        'nova_fixes.nova.compute.api:_local_delete_cleanup',
                        original_as='_local_delete_cleanup_with_allocations',
                        services=('api',)),
        # nova 33 (2026.1) added a response schema to the method: a drop-in
        # per form.
        registry.Target('nova.api.openstack.compute.servers:'
                        'ServersController.delete',
                        'nova_fixes.nova.api.openstack.compute.servers:'
                        'ServersControllerBefore2026.delete',
                        series=('2022.2', '2023.1', '2023.2', '2024.1',
                                '2024.2', '2025.1', '2025.2'),
                        services=('api',)),
        registry.Target('nova.api.openstack.compute.servers:'
                        'ServersController.delete',
                        'nova_fixes.nova.api.openstack.compute.servers:'
                        'ServersController.delete',
                        series=('2026.1', '2026.2'), services=('api',)),
    ),
    tests=('test_bug_1859496_windows',),
    fixed_upstream=(
        registry.FixedUpstream('test_bug_1859496', 1859496, 'f35930eef8',
                               'nova 21.0.0'),
        # The reservations of the original report went with counted quotas
        # (Pike); what is left of the bug (leaked allocations, mappings not
        # queued for delete: quota drift) is what f35930eef8 closed.
        registry.FixedUpstream('test_bug_1783613', 1783613, 'f35930eef8',
                               'nova 21.0.0'),
    ),
    nova_tests=(
        registry.NovaTest(
            REGRESSIONS + 'test_bug_1859496_build_cleanup.py',
            'test_bug_1859496_build_cleanup.py',
            pairs=(('test_quota_recheck_failure_drops_the_claim',
                    'test_bug_1859496_windows.BuildCleanupQuotaRecheckTest.'
                    'test_quota_recheck_fails'),)),
        registry.NovaTest(
            REGRESSIONS + 'test_bug_1859496_placement_down.py',
            'test_bug_1859496_placement_down.py',
            pairs=(('test_delete_while_placement_is_unreachable',
                    'test_bug_1859496_windows.'
                    'DeleteWhilePlacementUnreachableTest.'
                    'test_retry_while_the_conductor_waits'),)),
        registry.NovaTest(
            REGRESSIONS + 'test_bug_1859496_bury_in_cell0.py',
            'test_bug_1859496_bury_in_cell0.py',
            pairs=(('test_lost_scheduler_reply_buries_the_server_without_'
                    'its_claim',
                    'test_bug_1859496_windows.BuriedInCell0Test.'
                    'test_lost_scheduler_reply'),)),
    ),
    notes=('bug-1859496-conductor-build-cleanup-e1c495f169030405.yaml',
           'bug-1859496-delete-placement-unreachable-a4624a407dbf0447.yaml',
           'bug-1859496-claim-after-delete-1364567135489ce0.yaml',
           'bug-1859496-bury-in-cell0-28ac114e9e782140.yaml',
           'bug-1859496-build-delete-one-request-7b0e5d2c4a9f1e36.yaml'),
    unit_tests=(
        registry.NovaUnitTests(CONDUCTOR_UNIT, 'conductor_build_cleanup.py'),
        registry.NovaUnitTests(CONDUCTOR_UNIT,
                               'conductor_delete_build_request.py'),
        registry.NovaUnitTests('nova/tests/unit/compute/test_api.py',
                               'compute_api_build_request.py'),
        registry.NovaUnitTests(
            'nova/tests/unit/api/openstack/compute/test_servers.py',
            'servers_delete_placement.py'),
        registry.NovaUnitTests(CONDUCTOR_UNIT, 'conductor_bury_in_cell0.py'),
    ),
    patch=registry.Patch(
        slug='Do-not-leak-allocations-of-servers-that-never-reached-a-compute',
        subject='Do not leak allocations of servers that never reached a '
                    'compute',
        body=COMMIT_MESSAGE,
        trailers=('Closes-Bug: #1859496', 'Related-Bug: #1783613'),
        test_edits=(build_request_tests_mock_placement,
                    bury_without_cell0_test_passes_a_list),
        # A recreate change and its fix per window; the windows need
        # nothing of each other.
        changes=(
            registry.Change(
                slug='Recreate-bug-1859496-a-build-given-up-keeps-its-claim',
                subject='Recreate bug 1859496: a build given up keeps its '
                        'claim',
                body=RECREATE_CLEANUP_MESSAGE,
                trailers=('Related-Bug: #1859496',),
                recreates=(REGRESSIONS + 'test_bug_1859496_build_cleanup.py',),
                needs=()),
            registry.Change(
                slug='Delete-the-claim-of-a-build-the-conductor-gives-up',
                subject='Delete the claim of a build the conductor gives up',
                body=CLEANUP_MESSAGE,
                trailers=('Partial-Bug: #1859496', 'Related-Bug: #1783613'),
                targets=('nova.conductor.manager:'
                         'ComputeTaskManager._cleanup_build_artifacts',),
                nova_tests=(
                    REGRESSIONS + 'test_bug_1859496_build_cleanup.py',),
                notes=('bug-1859496-conductor-build-cleanup-'
                       'e1c495f169030405.yaml',),
                unit_tests=('conductor_build_cleanup.py',),
                needs=('Recreate-bug-1859496-a-build-given-up-keeps-its-'
                       'claim',)),
            registry.Change(
                slug='Recreate-bug-1859496-delete-in-BUILD-with-placement-'
                     'down',
                subject='Recreate bug 1859496: delete in BUILD with '
                        'placement down',
                body=RECREATE_PLACEMENT_MESSAGE,
                trailers=('Related-Bug: #1859496',),
                recreates=(
                    REGRESSIONS + 'test_bug_1859496_placement_down.py',),
                needs=()),
            registry.Change(
                slug='Refuse-a-delete-in-BUILD-while-placement-is-'
                     'unreachable',
                subject='Refuse a delete in BUILD while placement is '
                        'unreachable',
                body=PLACEMENT_MESSAGE,
                trailers=('Partial-Bug: #1859496',),
                targets=(
                    'nova.exception:PlacementUnavailableForDelete',
                    'nova.conductor.manager:'
                    'ComputeTaskManager._delete_build_request',
                    'nova.compute.api:API._attempt_delete_of_buildrequest',
                    'nova.compute.api:API._local_delete_cleanup',
                    'nova.api.openstack.compute.servers:'
                    'ServersController.delete'),
                test_edits=('build_request_tests_mock_placement',),
                nova_tests=(
                    REGRESSIONS + 'test_bug_1859496_placement_down.py',),
                notes=('bug-1859496-delete-placement-unreachable-'
                       'a4624a407dbf0447.yaml',
                       'bug-1859496-claim-after-delete-'
                       '1364567135489ce0.yaml',
                       'bug-1859496-build-delete-one-request-'
                       '7b0e5d2c4a9f1e36.yaml'),
                unit_tests=('conductor_delete_build_request.py',
                            'compute_api_build_request.py',
                            'servers_delete_placement.py'),
                needs=('Recreate-bug-1859496-delete-in-BUILD-with-'
                       'placement-down',)),
            registry.Change(
                slug='Recreate-bug-1859496-a-server-buried-in-cell0-keeps-'
                     'its-claim',
                subject='Recreate bug 1859496: buried in cell0 with its '
                        'claim',
                body=RECREATE_BURY_MESSAGE,
                trailers=('Related-Bug: #1859496',),
                recreates=(
                    REGRESSIONS + 'test_bug_1859496_bury_in_cell0.py',),
                needs=()),
            registry.Change(
                slug='Delete-the-claim-of-a-server-buried-in-cell0',
                subject='Delete the claim of a server buried in cell0',
                body=BURY_MESSAGE,
                trailers=('Closes-Bug: #1859496',),
                targets=('nova.conductor.manager:'
                         'ComputeTaskManager._bury_in_cell0',),
                test_edits=('bury_without_cell0_test_passes_a_list',),
                nova_tests=(
                    REGRESSIONS + 'test_bug_1859496_bury_in_cell0.py',),
                notes=('bug-1859496-bury-in-cell0-28ac114e9e782140.yaml',),
                unit_tests=('conductor_bury_in_cell0.py',),
                needs=('Recreate-bug-1859496-a-server-buried-in-cell0-'
                       'keeps-its-claim',)),
        ),
    ),
)
