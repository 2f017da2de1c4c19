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
import sys
from unittest import mock

import fixtures
import testtools

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'tools')
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

import nova_gate  # noqa: E402

from nova_fixes import errors  # noqa: E402
from nova_fixes import registry  # noqa: E402

IDS = ['nova.tests.unit.test_%03d.T.test_%d' % (i, i) for i in range(500)]


class SliceTest(testtools.TestCase):

    def test_parse(self):
        self.assertEqual((3, 8), nova_gate.parse_slice('3/8'))
        self.assertEqual((1, 1), nova_gate.parse_slice('1/1'))

    def test_parse_refuses_bad_input(self):
        for text in ('0/8', '9/8', '1/0', '3', 'a/b', '', '-1/2', None):
            e = self.assertRaises(nova_gate.GateError,
                                  nova_gate.parse_slice, text)
            self.assertIn('--slice', str(e))

    def test_slices_cover_the_suite_once(self):
        n = 7
        pieces = [nova_gate.select(IDS, (k, n)) for k in range(1, n + 1)]
        seen = [t for piece in pieces for t in piece]
        self.assertEqual(sorted(IDS), sorted(seen))
        self.assertEqual(len(IDS), len(set(seen)))
        # A stable hash spreads 500 ids evenly enough: no empty slice,
        # none above twice its share.
        for piece in pieces:
            self.assertGreater(len(piece), 0)
            self.assertLess(len(piece), 2 * len(IDS) / n)

    def test_slice_does_not_depend_on_the_list(self):
        # The same test lands in the same slice whatever else is listed
        # (the patched tree can have tests vanilla has not).
        whole = nova_gate.select(IDS, (2, 5))
        part = nova_gate.select(IDS[::3], (2, 5))
        self.assertEqual(sorted(set(whole) & set(IDS[::3])), part)

    def test_slice_is_stable(self):
        # sha256, not Python's salted hash(): the value is fixed. The
        # sha256 of "hello" starts with 2cf24dba5fb0.
        self.assertEqual(0x2cf24dba5fb0 % 8 + 1,
                         nova_gate.slice_of('hello', 8))

    def test_no_slice_is_all_sorted(self):
        self.assertEqual(sorted(IDS), nova_gate.select(reversed(IDS), None))


class CompareTest(testtools.TestCase):

    def test_compare(self):
        patched = {'a': 'success', 'b': 'fail', 'c': 'fail', 'd': 'skip',
                   'e': 'xfail', 'f': 'uxsuccess', 'g': 'fail',
                   'h': 'fail'}
        vanilla = {'a': 'success', 'b': 'success', 'c': 'fail',
                   'd': 'skip', 'e': 'xfail', 'f': 'success',
                   'g': 'skip'}
        result = nova_gate.compare(patched, vanilla)
        self.assertEqual(2, result.passed)
        self.assertEqual(5, result.failed)
        self.assertEqual(1, result.skipped)
        # h exists only on the patched tree; g is skipped on vanilla.
        self.assertEqual(['b', 'f', 'g', 'h'], result.only_patched)
        self.assertEqual(['c'], result.both)

    def test_verdict(self):
        self.assertEqual('pass', nova_gate.verdict('success'))
        self.assertEqual('pass', nova_gate.verdict('xfail'))
        self.assertEqual('skip', nova_gate.verdict('skip'))
        self.assertEqual('fail', nova_gate.verdict('fail'))
        self.assertEqual('fail', nova_gate.verdict('uxsuccess'))
        self.assertIsNone(nova_gate.verdict(None))


SHARED = '''# a comment

nova.tests.unit.a.T.test_x | * | needs /dev/kvm
nova.tests.unit.a.T.test_y(scenario one) | 2026.2,2026.1 | a fixture
'''


class SharedFailuresTest(testtools.TestCase):

    def test_parse(self):
        shared = nova_gate.parse_shared(SHARED)
        self.assertEqual(
            ['nova.tests.unit.a.T.test_x',
             'nova.tests.unit.a.T.test_y(scenario one)'], sorted(shared))
        x = shared['nova.tests.unit.a.T.test_x']
        self.assertEqual(((), 'needs /dev/kvm', 3), tuple(x))
        y = shared['nova.tests.unit.a.T.test_y(scenario one)']
        self.assertEqual(('2026.2', '2026.1'), y.series)

    def test_listed_for(self):
        shared = nova_gate.parse_shared(SHARED)
        self.assertEqual(2, len(nova_gate.listed_for(shared, '2026.2')))
        self.assertEqual({'nova.tests.unit.a.T.test_x'},
                         nova_gate.listed_for(shared, '2025.1'))

    def _refused(self, text, *words):
        e = self.assertRaises(nova_gate.GateError, nova_gate.parse_shared,
                              text, 'list.txt')
        for word in words:
            self.assertIn(word, str(e))

    def test_refuses_a_line_without_reason(self):
        self._refused('nova.tests.unit.a.T.test_x | *\n', 'list.txt:1')
        self._refused('nova.tests.unit.a.T.test_x | * |  \n', 'list.txt:1')

    def test_refuses_a_test_listed_twice(self):
        self._refused(SHARED + 'nova.tests.unit.a.T.test_x | * | again\n',
                      'list.txt:5', 'listed already (line 3)')

    def test_refuses_an_unknown_series(self):
        self._refused('nova.tests.unit.a.T.test_x | 2099.1 | r\n',
                      'list.txt:1', '2099.1', '2026.2')

    def test_refuses_what_is_not_a_test_id(self):
        self._refused('tests.unit.x | * | r\n', 'not a nova test id')

    def test_check_shared(self):
        shared = nova_gate.parse_shared(SHARED)
        vanilla = {'nova.tests.unit.a.T.test_x': 'success',
                   'nova.tests.unit.b.T.test_z': 'fail'}
        unlisted, stale = nova_gate.check_shared(
            ['nova.tests.unit.b.T.test_z'], vanilla, shared, '2026.2')
        self.assertEqual(['nova.tests.unit.b.T.test_z'], unlisted)
        # test_y did not run (another slice): not stale.
        self.assertEqual(['nova.tests.unit.a.T.test_x'], stale)

    def test_the_list_of_the_repo_parses(self):
        shared = nova_gate.load_shared()
        for test_id, entry in shared.items():
            self.assertTrue(entry.reason, test_id)


class SeriesTest(testtools.TestCase):

    def test_unknown_series_names_it_and_the_known_ones(self):
        e = self.assertRaises(errors.UnknownSeries, nova_gate.check_series,
                              '2099.1')
        self.assertIn("'2099.1'", str(e))
        for series in registry.SUPPORTED_SERIES + ('debian-13',):
            self.assertIn(series, str(e))

    def test_debian_trees_are_known(self):
        self.assertEqual('debian-13', nova_gate.check_series('debian-13'))
        self.assertEqual('2022.2', nova_gate.check_series('2022.2'))
        self.assertEqual('trixie', nova_gate.DEBIAN['debian-13'])
        self.assertEqual('bookworm', nova_gate.DEBIAN['2022.2'])

    def test_a_series_without_constraints_is_refused(self):
        real = os.path.exists
        with mock.patch('os.path.exists', side_effect=lambda p: (
                False if p.endswith('constraints/2025.1.txt') else
                real(p))):
            e = self.assertRaises(nova_gate.GateError,
                                  nova_gate.check_series, '2025.1')
        self.assertIn('constraints/2025.1.txt', str(e))
        self.assertIn('2026.2', str(e))
        self.assertNotIn('2025.1,', str(e))
        self.assertEqual('2025.1', nova_gate.check_series('2025.1'))

    def test_debian_tree_needs_root_and_its_tools(self):
        args = nova_gate.argparse.Namespace(drop_ins=False)
        with mock.patch('shutil.which', return_value=None):
            e = self.assertRaises(nova_gate.GateError,
                                  nova_gate.debian_gate, 'debian-13', args)
        self.assertIn('debootstrap', str(e))
        self.assertIn('debian-13', str(e))

    def test_debian_tree_refuses_drop_ins(self):
        args = nova_gate.argparse.Namespace(drop_ins=True)
        with mock.patch('shutil.which', return_value='/usr/bin/x'), \
                mock.patch('os.geteuid', return_value=0):
            e = self.assertRaises(nova_gate.GateError,
                                  nova_gate.debian_gate, '2022.2', args)
        self.assertIn('--drop-ins', str(e))
        self.assertIn('debian-build', str(e))

    def test_version_of_a_debian_tree(self):
        tree = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(tree, 'debian'))
        with open(os.path.join(tree, 'debian', 'changelog'), 'w') as f:
            f.write('nova (2:31.0.0-6+deb13u2) trixie-security; '
                    'urgency=medium\n')
        self.assertEqual('31.0.0', nova_gate.version_of(tree))
        with open(os.path.join(tree, 'debian', 'changelog'), 'w') as f:
            f.write('garbage\n')
        e = self.assertRaises(nova_gate.GateError, nova_gate.version_of,
                              tree)
        self.assertIn('garbage', str(e))

    def test_trees_refuse_drop_ins(self):
        out, err = io.StringIO(), io.StringIO()
        with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err):
            out.reconfigure = mock.Mock()
            self.assertEqual(2, nova_gate.main(
                ['debian-13', '--trees', '/a', '/b', '--drop-ins']))
        self.assertIn('--drop-ins', err.getvalue())
        self.assertEqual('0 passed, 1 failed',
                         out.getvalue().splitlines()[-1])

    def test_main_unknown_series_fails_with_a_count(self):
        out, err = io.StringIO(), io.StringIO()
        with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err):
            out.reconfigure = mock.Mock()
            self.assertEqual(2, nova_gate.main(['2099.1']))
        self.assertIn('unknown nova series', err.getvalue())
        self.assertEqual('0 passed, 1 failed',
                         out.getvalue().splitlines()[-1])

    def test_main_bad_slice(self):
        out, err = io.StringIO(), io.StringIO()
        with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err):
            out.reconfigure = mock.Mock()
            self.assertEqual(2, nova_gate.main(['--slice', '9/8']))
        self.assertIn('--slice 9/8', err.getvalue())


BEFORE = '''import os


class BaseTest(object):
    def setUp(self):
        pass

    def test_a(self):
        self.assertEqual(1, 1)

    def test_b(self):
        pass


class SubTest(BaseTest):
    pass


class OtherTest(object):
    def test_c(self):
        pass

    def test_d(self):
        pass
'''


class EditedTest(testtools.TestCase):

    def test_a_test_method(self):
        after = BEFORE.replace('self.assertEqual(1, 1)',
                               'self.assertEqual(2, 2)')
        self.assertEqual({'BaseTest.test_a'},
                         nova_gate.edited_names(BEFORE, after))

    def test_a_helper_edits_the_class_and_its_subclasses(self):
        after = BEFORE.replace('    def setUp(self):\n        pass',
                               '    def setUp(self):\n        self.x = 1')
        self.assertEqual({'BaseTest', 'SubTest'},
                         nova_gate.edited_names(BEFORE, after))

    def test_module_level(self):
        after = BEFORE.replace('import os', 'import sys')
        self.assertEqual({''}, nova_gate.edited_names(BEFORE, after))

    def test_no_change(self):
        self.assertEqual(set(), nova_gate.edited_names(BEFORE, BEFORE))

    def test_matches(self):
        m = nova_gate.matches
        self.assertTrue(m('nova.tests.unit.a.T.test_x', 'nova.tests.unit.a'))
        self.assertTrue(m('nova.tests.unit.a.T.test_x',
                          'nova.tests.unit.a.T.test_x'))
        self.assertTrue(m('nova.tests.unit.a.T.test_x_1_foo',
                          'nova.tests.unit.a.T.test_x'))
        self.assertTrue(m('nova.tests.unit.a.T.test_x(scenario)',
                          'nova.tests.unit.a.T.test_x'))
        self.assertFalse(m('nova.tests.unit.a.T.test_x_y',
                           'nova.tests.unit.a.T.test_x'))
        self.assertFalse(m('nova.tests.unit.ab.T.test_x',
                           'nova.tests.unit.a'))

    def test_edited_tests(self):
        ids = ['m.BaseTest.test_a', 'm.BaseTest.test_b', 'm.SubTest.test_a',
               'm.OtherTest.test_c', 'n.T.test_e', 'new.T.test_f']
        changes = {'m': {'OtherTest.test_c', 'SubTest'}, 'new': {''}}
        self.assertEqual(
            ['m.OtherTest.test_c', 'm.SubTest.test_a', 'n.T.test_e',
             'new.T.test_f'],
            nova_gate.edited_tests(changes, ids, flips=['n.T.test_e']))
