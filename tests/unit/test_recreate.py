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
from unittest import mock

import testtools

from tests import recreate

LEAK_TB = 'AssertionError: LEAK: allocations left for the deleted server'
OTHER_TB = 'TypeError: something else broke'
DELETED = 'tests.functional.test_bug_1848343.DeletedServerTest.test_a'
LIVE = 'tests.functional.test_bug_1848343.LiveServerTest.test_b'
FIXED_BUG = 'tests.functional.test_bug_1859496.DeleteBuildTest.test_c'


ORPHAN = 'tests.functional.test_orphan_instances.SafetyTest.test_d'


def _recreates(test_id, tree):
    if 'Safety' in test_id:
        return None
    return 'Live' not in test_id


@mock.patch.object(recreate, '_recreates', _recreates)
class BuildRowsTestCase(testtools.TestCase):

    def _row(self, test_id, vanilla, fixed):
        return recreate.build_rows('.', {test_id: vanilla},
                                   {test_id: fixed})[0]

    def test_recreated_and_fixed(self):
        row = self._row(DELETED, recreate.Outcome('fail', LEAK_TB),
                        recreate.Outcome('success'))
        self.assertEqual(('RECREATED', 'PASS', True),
                         (row['vanilla'], row['fixed'], row['ok']))
        self.assertEqual(1848343, row['bug'])
        self.assertEqual('DeletedServerTest.test_a', row['scenario'])

    def test_failing_elsewhere_is_not_recreating(self):
        row = self._row(DELETED, recreate.Outcome('fail', OTHER_TB),
                        recreate.Outcome('success'))
        self.assertEqual('not recreated', row['vanilla'])
        self.assertFalse(row['ok'])

    def test_passing_on_vanilla_is_not_recreating(self):
        row = self._row(DELETED, recreate.Outcome('success'),
                        recreate.Outcome('success'))
        self.assertFalse(row['ok'])

    def test_fixed_failure(self):
        row = self._row(DELETED, recreate.Outcome('fail', LEAK_TB),
                        recreate.Outcome('fail', LEAK_TB))
        self.assertEqual('FAIL', row['fixed'])
        self.assertFalse(row['ok'])

    def test_missing_fixed_result(self):
        rows = recreate.build_rows(
            '.', {DELETED: recreate.Outcome('fail', LEAK_TB)}, {})
        self.assertEqual('FAIL', rows[0]['fixed'])
        self.assertFalse(rows[0]['ok'])

    def test_no_regression_case(self):
        row = self._row(LIVE, recreate.Outcome('success'),
                        recreate.Outcome('success'))
        self.assertEqual(('passes (no-regression case)', True),
                         (row['vanilla'], row['ok']))
        row = self._row(LIVE, recreate.Outcome('fail', OTHER_TB),
                        recreate.Outcome('success'))
        self.assertEqual(('FAILS', False), (row['vanilla'], row['ok']))

    def test_bug_fixed_upstream_must_recreate_without_its_fix(self):
        without = {FIXED_BUG: recreate.Outcome('fail', LEAK_TB)}
        row = recreate.build_rows(
            '.', {FIXED_BUG: recreate.Outcome('success')},
            {FIXED_BUG: recreate.Outcome('success')}, without)[0]
        self.assertEqual(
            ('not recreated (fixed by f35930eef8, nova 21.0.0); without '
             'f35930eef8: RECREATED', True, 1859496),
            (row['vanilla'], row['ok'], row['bug']))
        for outcome in (recreate.Outcome('success'),
                        recreate.Outcome('fail', OTHER_TB)):
            row = recreate.build_rows(
                '.', {FIXED_BUG: recreate.Outcome('success')},
                {FIXED_BUG: recreate.Outcome('success')},
                {FIXED_BUG: outcome})[0]
            self.assertTrue(row['vanilla'].endswith(
                'without f35930eef8: not recreated'))
            self.assertFalse(row['ok'])

    def test_fixed_upstream_filters(self):
        self.assertEqual({'f35930eef8': ['^%s$' % FIXED_BUG.replace(
            '.', '\\.')]}, recreate.fixed_upstream_filters(
                [FIXED_BUG, DELETED, LIVE]))

    def test_test_of_the_fix_itself(self):
        row = self._row(ORPHAN, recreate.Outcome('skip'),
                        recreate.Outcome('success'))
        self.assertEqual(('n/a (tests the fix itself)', 'PASS', True),
                         (row['vanilla'], row['fixed'], row['ok']))
        self.assertEqual('orphans', row['bug'])
        row = self._row(ORPHAN, recreate.Outcome('skip'),
                        recreate.Outcome('skip'))
        self.assertEqual(('FAIL', False), (row['fixed'], row['ok']))

    def test_table(self):
        rows = [self._row(DELETED, recreate.Outcome('fail', LEAK_TB),
                          recreate.Outcome('success'))]
        table = recreate.format_table(rows).splitlines()
        self.assertEqual(['bug', 'scenario', 'vanilla', 'fixed'],
                         table[0].split())
        self.assertEqual(['1848343', 'DeletedServerTest.test_a',
                          'RECREATED', 'PASS'], table[2].split())


class SummarizeTestCase(testtools.TestCase):

    def test_one_line_per_scenario_not_as_expected(self):
        rows = [{'test': DELETED, 'vanilla': 'RECREATED', 'fixed': 'PASS',
                 'ok': True},
                {'test': LIVE, 'vanilla': 'FAILS', 'fixed': 'PASS',
                 'ok': False}]
        out = io.StringIO()
        with mock.patch('sys.stdout', out):
            bad = recreate.summarize('report', rows, fixed_label='patched')
        self.assertEqual([rows[1]], bad)
        self.assertEqual(
            ['report: 1 scenarios as expected, 1 not',
             '  NOT AS EXPECTED %s (vanilla: FAILS, patched: PASS)' % LIVE],
            out.getvalue().splitlines())

    def test_test_ids_map_to_their_fix(self):
        self.assertEqual(1848343, recreate.bug_of_test(DELETED))
        self.assertEqual('orphans', recreate.bug_of_test(ORPHAN))
        self.assertEqual(('f35930eef8', 'nova 21.0.0'),
                         recreate.fixed_upstream(FIXED_BUG))
        self.assertIsNone(recreate.fixed_upstream(DELETED))
