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

"""What each fix's patch holds besides the drop-ins' code.

The code comes from the drop-ins (nova_fixes.export.source). A plan adds
what only a patch has: its commit message, the options module to add to
nova/conf, the edits of nova's own tests that the change makes necessary,
nova-side regression tests written for nova's tree, and the reno note
(the project's own, from releasenotes/notes).
"""

import ast
import dataclasses
import os
import textwrap

from nova_fixes import errors

HERE = os.path.dirname(os.path.abspath(__file__))
NOVA_TESTS = os.path.join(HERE, 'nova_tests')


@dataclasses.dataclass(frozen=True)
class Plan:
    #: The registry key of the fix.
    bug: object
    #: File name of the patch, without its number: 0001-<slug>.patch
    slug: str
    subject: str
    body: str
    #: Commit message trailers, e.g. ('Closes-Bug: #1848343',)
    trailers: tuple
    #: The date of the last change of this plan or of its fix (DEP-3
    #: Last-Update, and the patch's Date). Bump it with the fix.
    updated: str
    #: Drop-in option modules added to nova/conf.
    conf_modules: tuple = ()
    #: {nova path: file in nova_fixes/export/nova_tests}
    new_tests: tuple = ()
    #: Functions (files) -> {path: text}, editing nova's existing tests.
    test_edits: tuple = ()
    #: The project's reno notes that become nova's.
    renos: tuple = ()
    #: DEP-3 Forwarded
    forwarded: str = 'no'


# -- edits of nova's tests ---------------------------------------------------

def _edit_python(files, path, edit):
    if path not in files:
        raise errors.ExportError('the nova tree has no %s' % path)
    text = edit(files[path])
    compile(text, path, 'exec')
    return {path: text}


def _function(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _calls(node, attr):
    return any(isinstance(sub, ast.Call) and
               isinstance(sub.func, ast.Attribute) and sub.func.attr == attr
               for sub in ast.walk(node))


def flip_1848343_fixme(files):
    """nova's test_bug_1848343 asserts the leak under a FIXME: flip it.

    In _assert_no_allocations, the branch that expects the deleted
    server's flavor to be allocated on its source host is the bug; with
    the fix, no provider has allocations, which is what the else branch
    asserts. The FIXME comment above the branch goes with it.
    """
    path = 'nova/tests/functional/regressions/test_bug_1848343.py'

    def edit(text):
        tree = ast.parse(text)
        func = _function(tree, '_assert_no_allocations')
        branch = None
        for node in ast.walk(func) if func else ():
            if (isinstance(node, ast.If) and node.orelse and
                    _calls(ast.Module(body=node.body, type_ignores=[]),
                           'assertFlavorMatchesAllocation')):
                branch = node
        if branch is None:
            raise errors.ExportError(
                '%s: no FIXME branch asserting the leak of bug 1848343 in '
                '_assert_no_allocations' % path)
        lines = text.splitlines(True)
        start = branch.lineno - 1
        while lines[start - 1].strip().startswith('#'):
            start -= 1
        if 'FIXME' not in ''.join(lines[start:branch.lineno - 1]):
            raise errors.ExportError('%s: the branch asserting the leak of '
                                     'bug 1848343 has no FIXME' % path)
        first, last = branch.orelse[0].lineno, branch.orelse[-1].end_lineno
        kept = textwrap.dedent(''.join(lines[first - 1:last]))
        indent = ' ' * branch.col_offset
        kept = textwrap.indent(kept, indent)
        return ''.join(lines[:start]) + kept + ''.join(
            lines[branch.end_lineno:])

    return _edit_python(files, path, edit)


def revert_allocation_assertions(files):
    """nova's unit tests of _revert_allocation: the new keyword.

    The compute now requires the instance consumer to exist when it moves
    a migration's allocations back: the assertions on that call to
    move_allocations (three positional arguments, no keyword) expect
    target_consumer_generation_required=True.
    """
    changed = {}
    for path in ('nova/tests/unit/compute/test_compute_mgr.py',
                 'nova/tests/unit/compute/test_compute.py'):
        changed.update(_edit_python(files, path, _add_required_keyword))
    return changed


def _add_required_keyword(text):
    lines = text.splitlines(True)
    found = []
    for node in ast.walk(ast.parse(text)):
        if (isinstance(node, ast.Call) and
                isinstance(node.func, ast.Attribute) and
                node.func.attr == 'assert_called_once_with' and
                isinstance(node.func.value, ast.Attribute) and
                node.func.value.attr == 'move_allocations' and
                len(node.args) == 3 and not node.keywords):
            found.append(node)
    if not found:
        raise errors.ExportError('no assertion on the move_allocations call '
                                 'of _revert_allocation to update')
    for node in sorted(found, key=lambda n: -n.end_lineno):
        last = node.args[-1]
        line = lines[last.end_lineno - 1]
        indent = ' ' * node.args[0].col_offset
        lines[last.end_lineno - 1] = (
            line[:last.end_col_offset] + ',\n' + indent +
            'target_consumer_generation_required=True' +
            line[last.end_col_offset:])
    return ''.join(lines)


#: nova unit tests that delete a build request with no placement to talk
#: to: the allocations are now deleted first, and an unreachable placement
#: refuses the delete, so they get a report client that succeeds.
BUILD_REQUEST_DELETE_TESTS = (
    ('nova/tests/unit/compute/test_api.py',
     ('test_attempt_delete_of_buildrequest_success',
      'test_attempt_delete_of_buildrequest_already_deleted')),
    ('nova/tests/unit/compute/test_compute.py',
     ('test_delete_while_booting_instance_not_in_cell_db_cellsv2',)),
)


def build_request_tests_mock_placement(files):
    """Give nova's unit tests of the build request delete a placement."""
    changed = {}
    for path, names in BUILD_REQUEST_DELETE_TESTS:

        def edit(text, names=names):
            lines = text.splitlines(True)
            tree = ast.parse(text)
            for name in names:
                func = _function(tree, name)
                if func is None:
                    raise errors.ExportError('%s: no test %s' % (path, name))
            for func in sorted((_function(tree, n) for n in names),
                               key=lambda f: -f.lineno):
                indent = ' ' * func.col_offset
                lines.insert(func.lineno - 1, (
                    "%s@mock.patch('nova.scheduler.client.report."
                    "SchedulerReportClient.'\n"
                    "%s            'delete_allocation_for_instance',\n"
                    "%s            new=mock.Mock(return_value=True))\n"
                    % (indent, indent, indent)))
            return ''.join(lines)

        changed.update(_edit_python(files, path, edit))
    return changed


PLANS = (
    Plan(
        bug=1848343,
        slug='Do-not-leak-allocations-reverting-a-deleted-server-s-move',
        subject="Do not leak allocations reverting a deleted server's move",
        body="""\
When a cold migration, resize or live migration fails or is reverted,
the allocations the migration consumer holds on the source node are
moved back to the instance consumer. If the server was deleted during
the move, its instance consumer is gone from placement, and
move_allocations created it again: the source node's resources stay
allocated to a server that no longer exists, forever, since nothing
deletes the allocations of a deleted server's consumer again.

move_allocations gains target_consumer_generation_required: when the
caller requires it, the target consumer must exist and its generation
is passed to placement with the move, so a target deleted concurrently
makes placement refuse the write. A missing target gets nothing; the
source consumer's allocations are removed and
AllocationMoveTargetNotFound is raised.

The compute's _revert_allocation requires it: during a move the
instance consumer holds the destination allocations, so it exists
unless the server was deleted. The conductor's rollback runs when the
instance consumer has no allocations at all (the conductor moved them
to the migration), so it asks the cell database instead, before the
move and again after it: every delete path records DELETING or DELETED
before it removes the allocations, so a delete landing between the two
questions is seen by the second one.

nova's regression test for the bug asserted the leak under a FIXME; it
now asserts that no allocation is left.""",
        trailers=('Closes-Bug: #1848343',),
        updated='2026-11-30',
        test_edits=(flip_1848343_fixme, revert_allocation_assertions),
        renos=('bug-1848343-revert-allocations-deleted-server-'
               '5c1e0d7a2b9f4e61.yaml',),
    ),
    Plan(
        bug=1859496,
        slug='Do-not-leak-allocations-of-servers-that-never-reached-a-compute',
        subject='Do not leak allocations of servers that never reached a '
                'compute',
        body="""\
Commit f35930eef8 made the API delete the allocations of a server it
deletes while the server is still being built. Two ways remain for the
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

A claim that lands after the API deleted the server, when the conductor
that asked for it dies before it notices, stays out of reach of both:
nova-manage placement audit --delete finds it (see the release note).""",
        trailers=('Closes-Bug: #1859496', 'Related-Bug: #1783613'),
        updated='2026-11-30',
        test_edits=(build_request_tests_mock_placement,),
        new_tests=(('nova/tests/functional/regressions/test_bug_1859496.py',
                    'test_bug_1859496.py'),),
        renos=('bug-1859496-conductor-build-cleanup-e1c495f169030405.yaml',
               'bug-1859496-delete-placement-unreachable-'
               'a4624a407dbf0447.yaml',
               'bug-1859496-claim-after-delete-1364567135489ce0.yaml'),
    ),
    Plan(
        bug='orphans',
        slug='Add-a-periodic-task-for-orphan-instances',
        subject='Add a periodic task for orphan instances',
        body="""\
A guest running on a compute host that nova does not account for there
runs unseen: _cleanup_running_deleted_instances only finds guests whose
instance record is deleted but still present. A guest whose record was
archived or purged, or was never created by nova, and the duplicate a
failed live migration cleanup leaves on the source host (its live
record names the destination), keep running and using the host's
resources.

The new _cleanup_orphan_instances periodic task classifies the guests
of the hypervisor against the cell database in a constant number of
queries, and acts on the ones that are orphans as
[orphan_instances]action says: log (the default), stop or reap. A
guest is only acted upon after it was seen as an orphan for
grace_period seconds, at most max_actions_per_run a run; a migration
in progress involving the host, or any task_state, protects it; a
failed lookup makes the run decide nothing. Reaping destroys the guest
on this host only: its disks are kept, no volume is detached and no
port is unbound.""",
        trailers=(),
        updated='2026-11-30',
        conf_modules=('nova_fixes.conf.orphan_instances',),
        new_tests=(('nova/tests/functional/compute/test_orphan_instances.py',
                    'test_orphan_instances.py'),),
        renos=('orphan-instances-periodic-task-8d41c6f0a97e2b35.yaml',),
    ),
)

PLANS_BY_BUG = {str(plan.bug): plan for plan in PLANS}


def plan_of(fix):
    try:
        return PLANS_BY_BUG[str(fix.bug)]
    except KeyError:
        raise errors.ExportError('fix %s has no patch plan' % fix.bug)


def new_test_text(name):
    with open(os.path.join(NOVA_TESTS, name), encoding='utf-8') as f:
        return f.read()
