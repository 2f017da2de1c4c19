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

import io
import os
import textwrap
from unittest import mock

import fixtures
import testtools

from tests import recreate
from tests.recreate import __main__ as recreate_main

LEAK_TB = 'AssertionError: LEAK: allocations left for the deleted server'
OTHER_TB = 'TypeError: something else broke'
DELETED = 'tests.functional.test_bug_1848343.DeletedServerTest.test_a'
LIVE = 'tests.functional.test_bug_1848343.LiveServerTest.test_b'
FIXED_BUG = 'tests.functional.test_bug_1859496.DeleteBuildTest.test_c'
ORPHAN = 'tests.functional.test_orphan_instances.SafetyTest.test_d'
REACH = ('tests.functional.test_bug_1859496_windows.ClaimAfterDeleteTest.'
         'test_claim_after_delete_until_audit')
LONG = ('tests.functional.test_bug_1848343.DeletedServerRevertPathsTest.'
        'test_' + 'very_long_name_' * 6)


def _class_kind(test_id, tree):
    if 'Safety' in test_id:
        return recreate.FIX_ITSELF
    if 'ClaimAfterDelete' in test_id:
        return recreate.OUT_OF_REACH
    if 'Live' in test_id:
        return recreate.NO_REGRESSION
    if recreate.fixed_upstream(test_id):
        return recreate.FIXED_UPSTREAM
    return recreate.RECREATES


def _leak():
    return recreate.Outcome('fail', LEAK_TB)


def _pass():
    return recreate.Outcome('success')


@mock.patch.object(recreate, 'scenario_kind', _class_kind)
class BuildRowsTestCase(testtools.TestCase):

    def _row(self, test_id, vanilla, fixed, without=None):
        return recreate.build_rows(
            '.', {test_id: vanilla}, {test_id: fixed},
            {test_id: without} if without else None)[0]

    def test_recreated_and_fixed(self):
        row = self._row(DELETED, _leak(), _pass())
        self.assertEqual(('RECREATED', '', 'PASS', True),
                         (row['vanilla'], row['without'], row['fixed'],
                          row['ok']))
        self.assertEqual(1848343, row['bug'])
        self.assertEqual(recreate.RECREATES, row['kind'])
        self.assertEqual('DeletedServerTest.test_a', row['scenario'])

    def test_failing_elsewhere_is_not_recreating(self):
        row = self._row(DELETED, recreate.Outcome('fail', OTHER_TB),
                        _pass())
        self.assertEqual(('not recreated', False),
                         (row['vanilla'], row['ok']))

    def test_passing_on_vanilla_is_not_recreating(self):
        row = self._row(DELETED, _pass(), _pass())
        self.assertEqual(('not recreated', False),
                         (row['vanilla'], row['ok']))

    def test_fixed_failure(self):
        row = self._row(DELETED, _leak(), _leak())
        self.assertEqual(('FAIL', False), (row['fixed'], row['ok']))

    def test_fixed_side_alone(self):
        """A run of the patched side only is judged on that side."""
        rows = recreate.build_rows('.', {}, {DELETED: _pass()},
                                   vanilla_ran=False)
        self.assertEqual(('not run', 'PASS', True),
                         (rows[0]['vanilla'], rows[0]['fixed'],
                          rows[0]['ok']))
        rows = recreate.build_rows('.', {}, {DELETED: _leak()},
                                   vanilla_ran=False)
        self.assertEqual(('FAIL', False), (rows[0]['fixed'], rows[0]['ok']))

    def test_missing_fixed_result(self):
        rows = recreate.build_rows('.', {DELETED: _leak()}, {})
        self.assertEqual(('FAIL', False), (rows[0]['fixed'], rows[0]['ok']))

    def test_no_regression_case(self):
        row = self._row(LIVE, _pass(), _pass())
        self.assertEqual(('passes', True), (row['vanilla'], row['ok']))
        row = self._row(LIVE, recreate.Outcome('fail', OTHER_TB), _pass())
        self.assertEqual(('FAILS', False), (row['vanilla'], row['ok']))

    def test_bug_fixed_upstream_must_recreate_without_its_fix(self):
        row = self._row(FIXED_BUG, _pass(), _pass(), _leak())
        self.assertEqual(
            ('passes', 'RECREATED', True, 1859496, ['f35930eef8',
                                                    'nova 21.0.0']),
            (row['vanilla'], row['without'], row['ok'], row['bug'],
             row['upstream_fix']))
        for outcome in (_pass(), recreate.Outcome('fail', OTHER_TB)):
            row = self._row(FIXED_BUG, _pass(), _pass(), outcome)
            self.assertEqual(('not recreated', False),
                             (row['without'], row['ok']))
        row = recreate.build_rows('.', {FIXED_BUG: _pass()},
                                  {FIXED_BUG: _pass()})[0]
        self.assertEqual(('did not run', False), (row['without'], row['ok']))

    def test_fixed_upstream_filters(self):
        self.assertEqual({'f35930eef8': [FIXED_BUG]},
                         recreate.fixed_upstream_filters(
                             [FIXED_BUG, DELETED, LIVE]))

    def test_test_of_the_fix_itself(self):
        row = self._row(ORPHAN, recreate.Outcome('skip'), _pass())
        self.assertEqual(('n/a', 'PASS', True),
                         (row['vanilla'], row['fixed'], row['ok']))
        self.assertEqual('orphans', row['bug'])
        row = self._row(ORPHAN, recreate.Outcome('skip'),
                        recreate.Outcome('skip'))
        self.assertEqual(('FAIL', False), (row['fixed'], row['ok']))

    def test_out_of_reach_shows_the_leak_everywhere(self):
        row = self._row(REACH, _pass(), _pass())
        self.assertEqual(('leak shown', 'leak shown', True),
                         (row['vanilla'], row['fixed'], row['ok']))
        # Its test asserts the leak: failing anywhere is not as expected.
        row = self._row(REACH, recreate.Outcome('fail', OTHER_TB), _pass())
        self.assertEqual(('FAILS', False), (row['vanilla'], row['ok']))
        row = self._row(REACH, _pass(), recreate.Outcome('fail', OTHER_TB))
        self.assertEqual(('FAIL', False), (row['fixed'], row['ok']))


class WindowOpenedUpstreamTestCase(testtools.TestCase):
    """A scenario whose window an upstream change opened passes on a nova
    without that change, as a no-regression case.
    """

    LIVE_MIGRATION = (
        'tests.functional.test_bug_1848343_deleted_moves.'
        'LiveMigrationCompletesAfterDeleteTest.'
        'test_delete_before_post_live_migration_at_destination')

    def _kind(self, version):
        root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        with mock.patch('nova_fixes.activation.nova_version',
                        return_value=version):
            return recreate.scenario_kind(self.LIVE_MIGRATION, root)

    def test_kind_by_nova_version(self):
        # "Fix bug 2000069" is in 31.0.0 and, on stable/2024.2, in 30.2.1.
        for version, kind in (('26.2.2', recreate.PREDATES),
                              ('29.4.0', recreate.PREDATES),
                              ('30.2.0', recreate.PREDATES),
                              ('30.2.1', recreate.RECREATES),
                              ('30.3.0', recreate.RECREATES),
                              ('31.0.0.0rc1', recreate.RECREATES),
                              ('34.0.0', recreate.RECREATES)):
            self.assertEqual(kind, self._kind(version), version)

    @mock.patch.object(recreate, 'scenario_kind',
                       return_value=recreate.PREDATES)
    @mock.patch.object(recreate, '_opened_by',
                       return_value=['a87b80fb39', 'Fix bug 2000069'])
    def test_must_pass_on_vanilla(self, opened_by, kind):
        row = recreate.build_rows('.', {DELETED: _pass()},
                                  {DELETED: _pass()})[0]
        self.assertEqual(('passes', 'PASS', True,
                          ['a87b80fb39', 'Fix bug 2000069']),
                         (row['vanilla'], row['fixed'], row['ok'],
                          row['opened_by']))
        row = recreate.build_rows('.', {DELETED: _leak()},
                                  {DELETED: _pass()})[0]
        self.assertEqual(('RECREATED', False), (row['vanilla'], row['ok']))
        self.assertIn('predates the upstream change that opened the window '
                      '(a87b80fb39, Fix bug 2000069)',
                      recreate.format_table([row]).replace('\n    ', ' '))


@mock.patch.object(recreate, 'scenario_kind', _class_kind)
class FormatTableTestCase(testtools.TestCase):

    def _rows(self):
        return recreate.build_rows(
            '.', {DELETED: _leak(), FIXED_BUG: _pass(), LIVE: _pass(),
                  REACH: _pass(), ORPHAN: recreate.Outcome('skip'),
                  LONG: _leak()},
            {DELETED: _pass(), FIXED_BUG: _pass(), LIVE: _pass(),
             REACH: _pass(), ORPHAN: _pass(), LONG: _pass()},
            {FIXED_BUG: _leak()})

    def test_fits_the_width_without_trailing_spaces(self):
        lines = recreate.format_table(self._rows()).splitlines()
        self.assertEqual(['scenario', 'vanilla', 'w/o', 'fix', 'fixed'],
                         lines[0].split())
        for line in lines:
            self.assertLessEqual(len(line), recreate.WIDTH, line)
            self.assertEqual(line.rstrip(), line)

    def test_rows_under_their_class_heading(self):
        lines = recreate.format_table(self._rows()).splitlines()
        i = lines.index('1848343, DeletedServerTest: recreates the bug on '
                        'vanilla nova')
        self.assertEqual(['test_a', 'RECREATED', 'PASS'],
                         lines[i + 1].split())
        i = lines.index('1859496, DeleteBuildTest: fixed upstream '
                        '(f35930eef8, nova 21.0.0): recreates the bug '
                        'without it')
        self.assertEqual(['test_c', 'passes', 'RECREATED', 'PASS'],
                         lines[i + 1].split())
        reach = [n for n, line in enumerate(lines)
                 if line.startswith('1859496, ClaimAfterDeleteTest: out of '
                                    'reach of any fix')]
        self.assertEqual(1, len(reach))
        self.assertEqual(['test_claim_after_delete_until_audit', 'leak',
                          'shown', 'leak', 'shown'],
                         lines[reach[0] + 1].split())

    def test_a_long_name_is_cut_in_the_middle(self):
        lines = recreate.format_table(self._rows()).splitlines()
        long_line = [line for line in lines if '...' in line]
        self.assertEqual(1, len(long_line))
        self.assertTrue(long_line[0].startswith('  test_very_long_name_'))

    def test_wide_has_the_full_ids(self):
        lines = recreate.format_table(self._rows(), wide=True).splitlines()
        self.assertEqual(['bug', 'test', 'vanilla', 'w/o', 'fix', 'fixed'],
                         lines[0].split())
        self.assertIn('1848343  %s' % LONG, '\n'.join(lines))
        self.assertNotIn('...', '\n'.join(lines))

    def test_no_without_column_without_fixed_upstream_scenarios(self):
        rows = recreate.build_rows('.', {DELETED: _leak()},
                                   {DELETED: _pass()})
        table = recreate.format_table(rows, fixed_label='patched')
        self.assertEqual(['scenario', 'vanilla', 'patched'],
                         table.splitlines()[0].split())
        self.assertNotIn('w/o fix', table)


@mock.patch.object(recreate, 'scenario_kind', _class_kind)
class ProgressTestCase(testtools.TestCase):

    def _line(self, progress, mode, test_id, outcome, without=()):
        out = io.StringIO()
        progress.stream = out
        progress(mode, without, test_id, outcome, 3, 50)
        return out.getvalue()

    def test_phase_count_and_expectation(self):
        kinds = {t: _class_kind(t, '.') for t in (DELETED, LIVE, FIXED_BUG)}
        progress = recreate.Progress(kinds=kinds)
        self.assertEqual(
            '[vanilla  3/50] RECREATED (expected)  '
            'test_bug_1848343.DeletedServerTest.test_a\n',
            self._line(progress, 'vanilla', DELETED, _leak()))
        self.assertEqual(
            '[vanilla  3/50] pass (NOT AS EXPECTED)  '
            'test_bug_1848343.DeletedServerTest.test_a\n',
            self._line(progress, 'vanilla', DELETED, _pass()))
        self.assertEqual(
            '[fixed  3/50] pass  test_bug_1848343.LiveServerTest.test_b\n',
            self._line(progress, 'dropin', LIVE, _pass()))
        self.assertEqual(
            '[without f35930eef8  3/50] RECREATED (expected)  '
            'test_bug_1859496.DeleteBuildTest.test_c\n',
            self._line(progress, 'vanilla', FIXED_BUG, _leak(),
                       without=('f35930eef8',)))

    def test_labelled_phase(self):
        self.assertEqual(
            '[unit  3/50] FAIL  test_x.T.test_y\n',
            self._line(recreate.Progress(label='unit'), 'dropin',
                       'tests.unit.test_x.T.test_y',
                       recreate.Outcome('fail', OTHER_TB)))


class SummarizeTestCase(testtools.TestCase):

    def _summary(self, rows):
        out = io.StringIO()
        with mock.patch('sys.stdout', out):
            bad = recreate.summarize('report', rows, fixed_label='patched')
        return bad, out.getvalue().splitlines()

    def test_one_line_per_scenario_not_as_expected(self):
        rows = [{'test': DELETED, 'vanilla': 'RECREATED', 'without': '',
                 'fixed': 'PASS', 'ok': True},
                {'test': LIVE, 'vanilla': 'FAILS', 'without': '',
                 'fixed': 'PASS', 'ok': False}]
        bad, lines = self._summary(rows)
        self.assertEqual([rows[1]], bad)
        self.assertEqual(
            ['report: 2 scenarios, 1 as expected, 1 not',
             '  NOT AS EXPECTED %s (vanilla: FAILS, patched: PASS)' % LIVE],
            lines)

    def test_one_scenario(self):
        rows = [{'test': DELETED, 'vanilla': 'RECREATED', 'without': '',
                 'fixed': 'PASS', 'ok': True}]
        self.assertEqual(['report: 1 scenario, 1 as expected, 0 not'],
                         self._summary(rows)[1])

    def test_test_ids_map_to_their_fix(self):
        self.assertEqual(1848343, recreate.bug_of_test(DELETED))
        self.assertEqual('orphans', recreate.bug_of_test(ORPHAN))
        self.assertEqual(('f35930eef8', 'nova 21.0.0'),
                         recreate.fixed_upstream(FIXED_BUG))
        self.assertIsNone(recreate.fixed_upstream(DELETED))


class CountTestCase(testtools.TestCase):

    def test_a_failure_says_why_in_one_line(self):
        results = {
            'a.ok': recreate.Outcome('success'),
            'a.skipped': recreate.Outcome('skip'),
            'a.failed': recreate.Outcome('fail', textwrap.dedent("""\
                Traceback (most recent call last):
                  File "x.py", line 1, in test
                    self.assertEqual(1, 2)
                testtools.matchers._impl.MismatchError: 1 != 2
                """))}
        out = io.StringIO()
        with mock.patch('sys.stdout', out):
            counted = recreate.count('suite', results)
        self.assertEqual((1, 1, 1), counted)
        self.assertEqual(
            ['suite: 1 passed, 1 failed, 1 skipped',
             '  FAILED a.failed: testtools.matchers._impl.MismatchError: '
             '1 != 2',
             '  skipped a.skipped'], out.getvalue().splitlines())


class MainTestCase(testtools.TestCase):
    """A user's mistake: one line on stderr, exit 2, no traceback."""

    def _main(self, argv):
        err = io.StringIO()
        with mock.patch('sys.stderr', err):
            rc = recreate_main.main(argv)
        return rc, err.getvalue()

    def test_tree_that_does_not_exist(self):
        rc, err = self._main(['--tree', '/nonexistent/nova-fixes'])
        self.assertEqual(2, rc)
        self.assertEqual(
            'python -m tests.recreate: --tree /nonexistent/nova-fixes: no '
            'such directory\n', err)

    def test_tree_that_is_not_nova_fixes(self):
        tree = self.useFixture(fixtures.TempDir()).path
        rc, err = self._main(['--tree', tree])
        self.assertEqual(2, rc)
        self.assertEqual(1, len(err.splitlines()))
        self.assertIn('is not a nova-fixes source tree', err)
        self.assertIn('give the directory that holds tox.ini', err)

    def test_filter_matching_nothing(self):
        with mock.patch.object(recreate, 'list_suite', return_value=[]):
            rc, err = self._main(['no_such_test'])
        self.assertEqual(
            (2, 'python -m tests.recreate: no regression test matches '
                'no_such_test\n'), (rc, err))

    def test_unknown_flag_prints_the_runners_usage(self):
        err = io.StringIO()
        with mock.patch('sys.stderr', err):
            exc = self.assertRaises(SystemExit, recreate_main.main,
                                    ['--bogus-flag'])
        self.assertEqual(2, exc.code)
        self.assertTrue(err.getvalue().startswith(
            'usage: python -m tests.recreate'))
        self.assertIn('unrecognized arguments: --bogus-flag',
                      err.getvalue())

    def test_the_default_tree_is_this_one(self):
        self.assertIsNone(recreate_main.check_tree(recreate_main.TREE))
        self.assertTrue(os.path.isfile(os.path.join(recreate_main.TREE,
                                                    'tox.ini')))


class ListSuiteTestCase(testtools.TestCase):
    """stestr list in a tree as a fresh clone has it (no .stestr/)."""

    def setUp(self):
        super(ListSuiteTestCase, self).setUp()
        self.tree = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(self.tree, 'suite'))
        with open(os.path.join(self.tree, '.stestr.conf'), 'w') as f:
            f.write('[DEFAULT]\ntest_path=./suite\ntop_dir=./\n')
        with open(os.path.join(self.tree, 'suite', '__init__.py'), 'w'):
            pass
        with open(os.path.join(self.tree, 'suite', 'test_a.py'), 'w') as f:
            f.write('import unittest\n\n\nclass T(unittest.TestCase):\n'
                    '    def test_one(self):\n        pass\n\n'
                    '    def test_two(self):\n        pass\n')

    def test_fresh_tree(self):
        self.assertEqual(
            ['suite.test_a.T.test_one', 'suite.test_a.T.test_two'],
            sorted(recreate.list_suite(self.tree, 'suite')))
        self.assertEqual(['suite.test_a.T.test_two'], recreate.list_suite(
            self.tree, 'suite', filters=['two$']))

    def test_suite_that_cannot_be_listed(self):
        with open(os.path.join(self.tree, 'suite', 'test_b.py'), 'w') as f:
            f.write('import no_such_module\n')
        exc = self.assertRaises(recreate.HarnessError, recreate.list_suite,
                                self.tree, 'suite')
        self.assertEqual("could not list the tests of suite in %s: "
                         "ModuleNotFoundError: No module named "
                         "'no_such_module'" % self.tree, str(exc))
        self.assertNotIn('\n', str(exc))


class RunSuiteTestCase(testtools.TestCase):
    """run_suite's real stestr workers: their stderr and exit status."""

    SUITE = textwrap.dedent('''\
        import os
        import signal
        import sys
        import unittest


        class T(unittest.TestCase):
            def test_a_passes(self):
                pass

            def test_b_fails(self):
                self.fail('as a recreated leak does')

            def test_c_warns(self):
                sys.stderr.write('DeprecationWarning: a worker warned\\n')

            def test_d_exits(self):
                sys.stderr.write('RuntimeError: the worker broke\\n')
                sys.stderr.flush()
                os._exit(3)

            def test_e_is_killed(self):
                os.kill(os.getpid(), signal.SIGKILL)
        ''')

    def setUp(self):
        super(RunSuiteTestCase, self).setUp()
        self.tree = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(self.tree, 'suite'))
        with open(os.path.join(self.tree, 'suite', '__init__.py'), 'w'):
            pass
        with open(os.path.join(self.tree, 'suite', 'test_w.py'), 'w') as f:
            f.write(self.SUITE)
        self.stderr = self.useFixture(fixtures.MockPatch(
            'sys.stderr', io.StringIO())).mock

    def _run(self, *names):
        return recreate.run_suite(
            self.tree, 'vanilla', test_path='suite', concurrency=1,
            test_ids=['suite.test_w.T.' + name for name in names])

    def test_a_successful_run_prints_nothing_more(self):
        # Failing tests are results, not a broken worker.
        results = self._run('test_a_passes', 'test_b_fails')
        self.assertEqual({'suite.test_w.T.test_a_passes': 'success',
                          'suite.test_w.T.test_b_fails': 'fail'},
                         {t: o.status for t, o in results.items()})
        self.assertEqual('', self.stderr.getvalue())

    def test_what_a_worker_writes_on_stderr_is_shown(self):
        results = self._run('test_a_passes', 'test_c_warns')
        self.assertEqual(2, len(results))
        self.assertEqual(
            '--- test worker 1 of the vanilla phase (exit status 0): its '
            'stderr:\n'
            'DeprecationWarning: a worker warned\n'
            "--- end of test worker 1's stderr\n", self.stderr.getvalue())

    def test_a_worker_that_exits_non_zero_is_shown(self):
        # The worker dies in its second test, the first one has a result.
        results = self._run('test_a_passes', 'test_d_exits')
        self.assertEqual({'suite.test_w.T.test_a_passes': 'success'},
                         {t: o.status for t, o in results.items()})
        self.assertEqual(
            '--- test worker 1 of the vanilla phase (exit status 3): its '
            'stderr:\n'
            'RuntimeError: the worker broke\n'
            "--- end of test worker 1's stderr\n", self.stderr.getvalue())

    def test_a_killed_worker_is_shown_with_nothing_on_stderr(self):
        self._run('test_a_passes', 'test_e_is_killed')
        self.assertEqual(
            '--- test worker 1 of the vanilla phase (killed by signal 9): '
            'nothing on stderr\n', self.stderr.getvalue())

    def test_no_test_ran_is_one_line_from_the_workers_stderr(self):
        exc = self.assertRaises(recreate.HarnessError, self._run,
                                'test_d_exits')
        self.assertIn('no test ran in mode vanilla', str(exc))
        self.assertTrue(str(exc).endswith(
            ': RuntimeError: the worker broke'), str(exc))
        self.assertNotIn('\n', str(exc))


class ShowWorkerReportsTestCase(testtools.TestCase):

    def _show(self, reports, **kwargs):
        out = io.StringIO()
        recreate.show_worker_reports(reports, 'fixed', stream=out, **kwargs)
        return out.getvalue().splitlines()

    def test_long_stderr_shows_its_last_lines(self):
        text = ''.join('warning %d\n' % n for n in range(1, 101))
        lines = self._show([('test worker 1', 0, text)], limit=3)
        self.assertEqual(
            ['--- test worker 1 of the fixed phase (exit status 0): '
             'its stderr:',
             '... (its first 97 lines left out)',
             'warning 98', 'warning 99', 'warning 100',
             "--- end of test worker 1's stderr"], lines)

    def test_short_stderr_is_shown_whole(self):
        lines = self._show([('test worker 2', -9, 'one\ntwo')])
        self.assertEqual(
            ['--- test worker 2 of the fixed phase (killed by signal 9): '
             'its stderr:', 'one', 'two',
             "--- end of test worker 2's stderr"], lines)

    def test_failed_worker_with_blank_stderr(self):
        lines = self._show([('test worker 3', 2, '\n \n')])
        self.assertEqual(
            ['--- test worker 3 of the fixed phase (exit status 2): '
             'nothing on stderr'], lines)


class AuditSummaryTest(testtools.TestCase):
    """tests.recreate.audit_summary: found, healed right, false positives
    and errors, from the records the tests' tearDown writes.
    """

    COUNTS = {'right': 1, 'in flight': 0, 'misplaced': 1, 'leaked': 1,
              'missing': 0, 'unknown': 0}

    def record(self, test, before, found, after, false_positives=()):
        return {'test': test, 'mode': 'vanilla', 'before': before,
                'found': list(found), 'after': after,
                'false_positives': list(false_positives),
                'counts': dict(self.COUNTS)}

    def summary(self, records, results):
        out = io.StringIO()
        with mock.patch('sys.stdout', out):
            counts = recreate.audit_summary(records, results)
        return counts, out.getvalue()

    def test_found_and_healed(self):
        leak = recreate.Outcome('fail', 'AssertionError: LEAK: x')
        records = {
            't.a': self.record('t.a', {'c1': 'leaked', 's1': 'misplaced'},
                               ['c1', 's1'], {}),
            # recreated, but nothing wrong in placement at its end
            't.b': self.record('t.b', {}, [], {}),
            # a passing no-regression case, nothing wrong
            't.c': self.record('t.c', {}, [], {}),
        }
        results = {'t.a': leak, 't.b': leak,
                   't.c': recreate.Outcome('success')}
        (passed, failed), text = self.summary(records, results)
        self.assertEqual((3, 0), (passed, failed))
        self.assertIn('3 tests audited; 1 leaking sequences left placement '
                      'wrong: 1 found, 1 healed right; 1 left it right',
                      text)
        self.assertIn('misplaced 3, leaked 3', text)

    def test_missed_not_healed_false_positive_error_not_audited(self):
        leak = recreate.Outcome('fail', 'AssertionError: LEAK: x')
        records = {
            't.a': self.record('t.a', {'c1': 'leaked', 's1': 'missing'},
                               ['c1'], {'s1': 'missing'}),
            't.b': self.record('t.b', {}, [], {}, ['c9 (leaked)']),
            't.c': {'test': 't.c', 'error': 'KeyError: x'},
        }
        results = {'t.a': leak, 't.b': recreate.Outcome('success'),
                   't.c': leak, 't.d': leak,
                   't.e': recreate.Outcome('skip')}
        (passed, failed), text = self.summary(records, results)
        self.assertEqual((0, 4), (passed, failed))
        self.assertIn('MISSED t.a: s1 (missing)', text)
        self.assertIn('NOT HEALED t.a: still s1 (missing)', text)
        self.assertIn('FALSE POSITIVE t.b: c9 (leaked)', text)
        self.assertIn('AUDIT ERROR t.c: KeyError: x', text)
        self.assertIn('NOT AUDITED t.d', text)
        self.assertNotIn('t.e', text)

    def test_records_read_from_the_directory(self):
        where = self.useFixture(fixtures.TempDir()).path
        import json
        with open(os.path.join(where, 't.a.json'), 'w') as f:
            json.dump({'test': 't.a', 'error': 'x'}, f)
        with open(os.path.join(where, 'other.txt'), 'w') as f:
            f.write('not a record')
        self.assertEqual({'t.a': {'test': 't.a', 'error': 'x'}},
                         recreate.audit_records(where))
