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

"""nova's own functional tests for moves, run with the drop-ins active.

Shows that the drop-ins do not regress nova: a selection of nova's in-tree
functional tests (SELECTION below) runs, under nova's own test ids, in a
process where ``nova_fixes.activate()`` replaced nova's code::

    stestr --test-path ./tests/nova_intree --top-dir ./ run

(or ``tox -e nova-intree``). This package implements the unittest
``load_tests`` protocol; it has no tests of its own.

NOVA_FIXES_INTREE chooses how much of SELECTION runs: ``full`` (default)
or ``quick``, SELECTION without REPEATS (``tox -e all`` and CI run that).

NOVA_FIXES_MODE chooses the nova under test, as for tests/functional:

- dropin (default): every fix is activated when this package is imported;
- vanilla: nothing is activated, to compare with nova as released;
- patched: nothing is activated, nova has the fixes applied as patches.

With the fixes (dropin or patched), nova's test_bug_1848343 must fail on
the assertion it makes under a FIXME, which asserts the very leak of bug
1848343: see EXPECTED_FLIPS.
"""

import ast
import functools
import importlib
import inspect
import os
import sys
import textwrap
import traceback
from unittest import mock

from testtools import content

import nova_fixes
import tests
from tests import common

_F = 'nova.tests.functional.'
_R = _F + 'regressions.test_bug_'

#: nova's tests that run, as ``module`` (every test of the module) or
#: ``module:Class`` (the tests of that class, inherited ones included).
#: Chosen because they move allocations from the instance to a migration
#: consumer and back: conductor's replace_allocation_with_migration and
#: revert_allocation_for_migration, the compute's _revert_allocation and
#: SchedulerReportClient.move_allocations, which the fix of bug 1848343
#: replaces.
SELECTION = (
    # -- test_servers: resize, cold migrate, live migrate -------------------
    # Resize (confirm, revert, same host, reschedule), cold migrate, live
    # migrate and evacuate of one server, with the allocations checked at
    # each step; the Nested classes repeat them with nested providers.
    _F + 'test_servers:ServerMovingTests',
    _F + 'test_servers:ServerMovingTestsWithNestedComputes',
    _F + 'test_servers:ServerMovingTestsWithNestedResourceRequests',
    _F + 'test_servers:ServerMovingTestsFromFlatToNested',
    # Forced live migration, and live migration abort (_revert_allocation
    # via live_migration_abort / _rollback_live_migration).
    _F + 'test_servers:ServerLiveMigrateForceAndAbort',
    _F + 'test_servers:'
         'ServerLiveMigrateForceAndAbortWithNestedResourcesRequest',
    # The compute periodic task that confirms resizes.
    _F + 'test_servers:PollUnconfirmedResizesTest',
    # Consumer generation conflicts while allocations are moved: what
    # move_allocations reports when placement refuses the write.
    _F + 'test_servers:ConsumerGenerationConflictTest',
    # -- moves with ports that have resource requests ------------------------
    # move_allocations carries the port's bandwidth allocations on the
    # network device providers too.
    _F + 'test_servers_resource_request:ServerMoveWithPortResourceRequestTest',
    _F + 'test_servers_resource_request:'
         'ServerMoveWithMultiGroupResourceRequestBasedSchedulingTest',
    _F + 'test_servers_resource_request:'
         'LiveMigrateAbortWithPortResourceRequestTest',
    _F + 'test_servers_resource_request:CrossCellResizeWithQoSPort',
    # -- cold migration and cross-cell resize ------------------------------
    _F + 'test_cold_migrate',
    # Cross-cell resize: its revert at the source uses _revert_allocation.
    _F + 'test_cross_cell_migrate',
    # -- nova/tests/functional/compute -------------------------------------
    # Live migration failures and their rollback.
    _F + 'compute.test_live_migration',
    # A resize reverted by the compute's init_host after a crash.
    _F + 'compute.test_init_host',
    # -- regressions: every module whose tests resize, cold migrate, live
    # migrate or evacuate a server (grep for _migrate, resize,
    # live_migrat, evacuat, move_allocations; 1943431 is left out: it is
    # a Cinder volume migration, not a server move).
    _R + '1595962',  # live migrate with a serial console (libvirt)
    _R + '1628606',  # post live migration fails
    _R + '1669054',  # resize, then evacuate
    _R + '1702454',  # evacuate to a target host the scheduler checks
    _R + '1713783',  # evacuate that fails with NoValidHost
    _R + '1718455',  # live migrate one of several servers created together
    _R + '1718512',  # resize rescheduled, then live migrate
    _R + '1735407',  # parallel evacuations in a server group
    _R + '1741125',  # resize rescheduled
    _R + '1741364',  # live migrate with rbd volumes (libvirt)
    _R + '1764556',  # cold migrate with a deleted service
    _R + '1764883',  # evacuate while the source comes back
    _R + '1781286',  # migrate reschedule in a cell conductor
    _R + '1790204',  # resize to the same host: doubled allocations
    _R + '1794996',  # evacuate, delete, restart the source compute
    _R + '1797580',  # cold migrate to a target host, then live migrate
    _R + '1815153',  # cold migrate and evacuate keep requested_destination
    _R + '1823370',  # evacuate in a multi-cell deployment
    _R + '1825020',  # volume-backed resize to a smaller disk
    _R + '1825537',  # finish_resize fails: allocations cleaned up
    _R + '1830747',  # cold migrate reschedule with a server group
    _R + '1843090',  # migrate with pinned compute RPC
    _R + '1845291',  # forced host migrate reschedule
    _R + '1848343',  # server deleted during a move (see EXPECTED_FLIPS)
    _R + '1849165',  # live migration and the resource tracker race
    _R + '1879878',  # confirm/revert and the resource tracker race
    _R + '1888395',  # live migrate without multiple port bindings
    _R + '1889108',  # pre_live_migration rollback and volume attachments
    _R + '1890244',  # evacuate with deleted server groups
    _R + '1896463',  # evacuate and the resource tracker race
    _R + '1899835',  # pre_live_migration rollback and volume disconnect
    _R + '1922053',  # force up a compute with done evacuations
    _R + '1938326',  # migrate from a disabled or down host
    _R + '1939545',  # live migrate with block volumes (libvirt)
    _R + '1944619',  # live migration rollback with offloaded OVS (libvirt)
    _R + '1978983',  # evacuate with a task state
    _R + '1983753',  # resize with PCI devices (libvirt)
    _R + '2007968',  # resize (libvirt)
    _R + '2044235',  # messaging timeout in live migration checks
    _R + '2080531',  # live migrate after an interface attach (libvirt)
    _R + '2085975',  # compute startup with an evacuation in progress
    _R + '2108974',  # cross-cell resize keeps keypairs
    _R + '2139351',  # live migrate and iothread pinning (libvirt)
    _R + '2143972',  # post live migration fails
    # -- delete while booting and quota (bugs 1859496, 1783613): the API's
    # _delete_while_booting, the conductor's _cleanup_build_artifacts and
    # quota counting, which the 1859496 drop-ins replace or rely on.
    _F + 'test_servers:ServerDeleteBuildTests',
    _F + 'db.test_quota',
    _R + '1670627',  # quota usage of a server deleted in cell0
    _R + '1678326',  # quota usage of a server deleted while booting
    _R + '1780373',  # quota counted for a multi-create request
    _R + '1806064',  # volumes of a server deleted in cell0
    _R + '1893284',  # per-user quota counted on create
    _R + '1914777',  # deleted while booting: API/conductor races
    _R + '2152697',  # live migrate a pre-existing instance (libvirt)
    _R + '2153425',  # NUMA live migration allocation ratio (libvirt)
)

#: Classes of SELECTION whose tests are those of another class of it, run
#: again with nested resource providers or with the port's request split
#: in groups: the same code paths of the fixes on other provider trees.
#: The quick selection leaves them out (140 of the 344 tests, about 7 of
#: the 17 minutes on 2 cores).
REPEATS = frozenset((
    _F + 'test_servers:ServerMovingTestsWithNestedComputes',
    _F + 'test_servers:ServerMovingTestsWithNestedResourceRequests',
    _F + 'test_servers_resource_request:'
         'ServerMoveWithMultiGroupResourceRequestBasedSchedulingTest',
))
#: NOVA_FIXES_INTREE's values.
SELECTIONS = ('full', 'quick')


def selection(which=None):
    """The entries of SELECTION that run: all of them (``full``), or all
    but REPEATS (``quick``); ``which`` defaults to NOVA_FIXES_INTREE.
    """
    if which is None:
        which = os.environ.get('NOVA_FIXES_INTREE') or 'full'
    if which not in SELECTIONS:
        raise ValueError('NOVA_FIXES_INTREE=%s: not one of %s'
                         % (which, ', '.join(SELECTIONS)))
    if which == 'quick':
        return tuple(e for e in SELECTION if e not in REPEATS)
    return SELECTION


#: Tests of nova that assert a leak the fixes close: each fix's nova_flips.
#: test_bug_1848343's assert it under a FIXME (in
#: DeletedServerAllocationRevertTest._assert_no_allocations, the source
#: host must still have the deleted server's allocations); others by their
#: last statement, after deleting the server (test_servers'
#: ConsumerGenerationConflictTest: the migration's allocations are left).
#: With the fixes that assertion must fail; see _expect_flip.
EXPECTED_FLIPS = frozenset(test for fix in nova_fixes.FIXES
                           for test in fix.nova_flips)
#: Tests of nova that delete a server in BUILD with no placement at all
#: (test.TestCase, no PlacementFixture): with the fixes the API deletes the
#: allocations of a server BUILDING in its cell before its record, and
#: refuses the delete when placement does not answer. The patches give
#: them a placement that answers (bug_1859496.build_delete_tests_placement_
#: answers); with the drop-ins, so does _give_placement.
NEEDS_PLACEMENT = frozenset((
    _R + '1914777.TestDeleteWhileBooting.'
    'test_build_request_and_instance_not_found',
    _R + '1914777.TestDeleteWhileBooting.'
    'test_deleting_instance_at_the_same_time',
))
#: Tests of nova that assert, under FIXME comments naming the bug, what
#: is left of a live server whose move was interrupted (bug 1836369, in
#: test_init_host): with the fix, one of those statements fails (an
#: assertion, or the lookup of a migration still 'migrating'); then the
#: server must hold allocations on its own host's provider only.
LIVE_FLIPS = {
    'nova.tests.functional.compute.test_init_host.'
    'ComputeManagerInitHostTestCase.'
    'test_migrate_disk_and_power_off_crash_finish_revert_migration':
        '1836369',
}
#: The frame that makes the FIXME assertion, and the call it makes.
FLIP_FRAME = ('_assert_no_allocations', 'test_bug_1848343.py')
FLIP_CALL = 'assertFlavorMatchesAllocation'


def _split(entry):
    module, _, cls = entry.partition(':')
    return module, cls


def import_selection():
    """Import nova's tests package, then every module of SELECTION.

    nova.tests monkey patches (eventlet) when it is imported; it must come
    before anything imports the rest of nova, activate() included.
    """
    importlib.import_module('nova.tests')
    return {module: importlib.import_module(module)
            for module in sorted({_split(e)[0] for e in SELECTION})}


def _is_flip(tb, test):
    """Whether a traceback is the leak assertion ``test`` is expected to
    fail on; returns the server the assertion was about, or None.

    In test_bug_1848343: raised inside its _assert_no_allocations, by the
    call to assertFlavorMatchesAllocation under the FIXME. Elsewhere: raised
    by the last statement of the test method itself (its assertion of the
    leak once the server is deleted).
    """
    frames = [(frame, lineno) for frame, lineno in traceback.walk_tb(tb)]
    if test.id() in LIVE_FLIPS:
        return _fixme_statement_failed(frames, test, LIVE_FLIPS[test.id()])
    if '.test_bug_1848343.' in test.id():
        for (caller, _), (callee, _) in zip(frames, frames[1:]):
            name, filename = FLIP_FRAME
            if (caller.f_code.co_name == name and
                    os.path.basename(caller.f_code.co_filename) ==
                    filename and callee.f_code.co_name == FLIP_CALL):
                return caller.f_locals.get('server')
        return None
    method = getattr(type(test), test._testMethodName)
    last = _last_statement(method)
    for frame, lineno in frames:
        if (frame.f_code is method.__code__ and
                last[0] <= lineno <= last[1]):
            return frame.f_locals.get('server')
    return None


def _fixme_statement_failed(frames, test, bug):
    """The server of ``test`` if it failed in a statement of its own that
    comes right after a FIXME comment naming ``bug``, else None.
    """
    method = getattr(type(test), test._testMethodName)
    lines, start = inspect.getsourcelines(method)
    tree = ast.parse(textwrap.dedent(''.join(lines)))
    for frame, lineno in frames:
        if frame.f_code is not method.__code__:
            continue
        for node in ast.walk(tree.body[0]):
            if not isinstance(node, ast.stmt) or node is tree.body[0]:
                continue
            first = start + node.lineno - 1
            if not first <= lineno <= start + node.end_lineno - 1:
                continue
            above = []
            for line in reversed(lines[:node.lineno - 1]):
                if not line.strip().startswith('#'):
                    break
                above.append(line)
            comment = ''.join(above)
            if 'FIXME' in comment and bug in comment:
                return frame.f_locals.get('server')
    return None


def _last_statement(function):
    """(first line, last line) of a function's last statement."""
    lines, start = inspect.getsourcelines(function)
    node = ast.parse(textwrap.dedent(''.join(lines))).body[0].body[-1]
    return start + node.lineno - 1, start + node.end_lineno - 1


def _expect_flip(test):
    """Make ``test`` pass only if its FIXME leak assertion fails.

    The test id is unchanged: only the instance's test method is wrapped.
    Once the FIXME assertion is seen to fail, what the test would assert
    without the FIXME is checked instead: no provider has allocations.
    """
    method = getattr(test, test._testMethodName)

    @functools.wraps(method)
    def flipped():
        live = test.id() in LIVE_FLIPS
        try:
            method()
        except (Exception if live else AssertionError):
            server = _is_flip(sys.exc_info()[2], test)
            if server is None:
                raise
            test.addDetail('nova-fixes-flip', content.text_content(
                'Recognised flip: the assertion of the leak failed, as it '
                'must with the fix active:\n' + traceback.format_exc()))
        else:
            test.fail('The assertion of the leak (the deleted server\'s '
                      'allocations are kept) was expected to flip with the '
                      'fix active, but the test passed.')
        if live:
            # The live server holds its allocations on its host only.
            test.assertEqual(
                [test._get_provider_uuid_by_host(
                    server['OS-EXT-SRV-ATTR:host'])],
                list(test._get_allocations_by_server_uuid(server['id'])))
            return
        for rp in test._get_all_providers():
            test.assertEqual(
                {}, test._get_allocations_by_provider_uuid(rp['uuid']),
                'Leaked allocations on provider %s (%s) of deleted server '
                '%s' % (rp['uuid'], rp['name'], server['id']))

    setattr(test, test._testMethodName, flipped)


def _give_placement(test):
    """Run ``test`` with a report client whose delete of allocations
    answers, as the patched test does.
    """
    method = getattr(test, test._testMethodName)

    @functools.wraps(method)
    def answered():
        with mock.patch('nova.scheduler.client.report.SchedulerReportClient.'
                        'delete_allocation_for_instance', return_value=True):
            method()

    setattr(test, test._testMethodName, answered)


def _iter_tests(suite):
    for test in suite:
        if hasattr(test, '__iter__'):
            yield from _iter_tests(test)
        else:
            yield test


def load_tests(loader, standard_tests, pattern):
    seen = set()
    for entry in selection():
        module, cls = _split(entry)
        if cls:
            suite = loader.loadTestsFromTestCase(
                getattr(_MODULES[module], cls))
        else:
            suite = loader.loadTestsFromModule(_MODULES[module])
        for test in _iter_tests(suite):
            # A module can name a test class of another one it imports.
            if test.id() in seen:
                continue
            seen.add(test.id())
            # A patched nova carries its test_bug_1848343 flipped already.
            if common.mode() == 'dropin' and test.id() in EXPECTED_FLIPS:
                _expect_flip(test)
            if common.mode() == 'dropin' and test.id() in NEEDS_PLACEMENT:
                _give_placement(test)
            standard_tests.addTest(test)
    return standard_tests


_MODULES = import_selection()
tests.quiet_outside_tests()
if common.mode() == 'dropin':
    nova_fixes.activate()
common.install_api_paste_config()
