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

"""The race explorer's command line: operation filters, step names and
the matrix' counts (no nova services run here).
"""

import io

import fixtures
import testtools

from tests.explore import __main__ as explore
from tests.explore import tracker


class OperationFilterTest(testtools.TestCase):

    def test_patterns(self):
        self.assertEqual(['live-migrate', 'live-migrate-pre-fails',
                          'live-migrate-driver-fails', 'live-migrate-abort'],
                         explore._operations(['live-migrate*']))
        self.assertEqual(['boot'], explore._operations(['boot', 'bo?t']))

    def test_unknown_operation_is_one_line(self):
        error = self.assertRaises(SystemExit, explore._operations,
                                  ['cold-migrate-revrt'])
        self.assertIn("no operation matches 'cold-migrate-revrt'",
                      str(error))

    def test_bad_variant_exits(self):
        stderr = self.useFixture(fixtures.MonkeyPatch('sys.stderr',
                                                      io.StringIO())).new_value
        self.assertRaises(SystemExit, explore.main,
                          ['--variants', 'delete,crash', 'boot'])
        self.assertIn('--variants: one or both of delete, down',
                      stderr.getvalue())


class StepTest(testtools.TestCase):

    def test_labels(self):
        self.assertEqual('rpc compute.prep_resize', tracker.Step(
            'rpc', 'compute', 'prep_resize', 1).label)
        self.assertEqual('ComputeManager._prep_resize#2', tracker.Step(
            'entry', 'ComputeManager', '_prep_resize', 2).label)

    def test_not_steps(self):
        self.assertFalse(tracker.is_step('_get_power_state'))
        self.assertFalse(tracker.is_step('_unshelve_instance_key_scrub'))
        self.assertTrue(tracker.is_step('_revert_allocation'))
        self.assertTrue(tracker.is_step('_get_power_state',
                                        all_entries=True))


class ReportTest(testtools.TestCase):

    def _report(self, cells, ops=('cold-migrate-revert',)):
        out = io.StringIO()
        steps = {'cold-migrate-revert': [
            'after', 'rpc compute.revert_resize',
            'rpc compute-alt.finish_revert_resize',
            'ComputeManager._finish_revert_resize',
            'rpc compute.prep_resize', 'ComputeManager._revert_allocation']}
        counts = explore.report(list(ops), steps, cells, ['delete'],
                                ['vanilla', 'fixed'], out=out)
        return counts, out.getvalue().splitlines()

    def _cells(self, vanilla, fixed):
        cells = {}
        for step in ('after', 'rpc compute.revert_resize',
                     'rpc compute-alt.finish_revert_resize',
                     'ComputeManager._finish_revert_resize',
                     'rpc compute.prep_resize',
                     'ComputeManager._revert_allocation'):
            cells[('vanilla', 'cold-migrate-revert', step, 'delete')] = (
                vanilla.get(step, 'LEAK'), ['x'])
            cells[('fixed', 'cold-migrate-revert', step, 'delete')] = (
                fixed.get(step, 'OK'), [])
        return cells

    def test_all_well(self):
        (passed, failed), lines = self._report(
            self._cells({'after': 'OK'}, {}))
        # 6 fixed-side OK, 5 known vanilla leaks found.
        self.assertEqual((11, 0), (passed, failed))
        self.assertEqual(
            ['explored (vanilla): 6 steps, 5 leaks, 0 wrong, 0 errors',
             'explored (fixed): 6 steps, 0 leaks, 0 wrong, 0 errors'],
            lines[-2:])

    def test_fixed_leak_and_missed_vanilla_leak_fail(self):
        (passed, failed), lines = self._report(self._cells(
            {'after': 'OK', 'rpc compute.revert_resize': 'OK'},
            {'rpc compute.prep_resize': 'LEAK', 'after': 'ERROR'}))
        self.assertEqual((8, 3), (passed, failed))
        self.assertIn('vanilla did not show the known leak: '
                      'cold-migrate-revert | rpc compute.revert_resize | '
                      'delete (1848343 revert_resize)', lines)
        self.assertEqual(
            'explored (fixed): 6 steps, 1 leaks, 0 wrong, 1 errors',
            lines[-1])
