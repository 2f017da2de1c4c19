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
import types
from unittest import mock

import fixtures
import testtools

import nova_fixes
from nova_fixes.cmd import main


class MainTestCase(testtools.TestCase):

    def setUp(self):
        super(MainTestCase, self).setUp()
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MockPatch('sys.stderr', self.stderr))

    def test_check(self):
        self.assertEqual(0, main.main(['check']), self.stderr.getvalue())

    def test_check_refuses_an_unsupported_nova(self):
        with mock.patch('nova_fixes.activation.nova_version',
                        return_value='25.0.0'):
            self.assertEqual(2, main.main(['check']))
        self.assertIn('nova-fixes: nova 25.0.0 is not supported',
                      self.stderr.getvalue())

    def test_list(self):
        self.assertEqual(0, main.main(['list']))

    def test_list_refuses_an_unsupported_nova(self):
        stdout = self.useFixture(fixtures.MockPatch(
            'sys.stdout', io.StringIO())).mock
        with mock.patch('nova_fixes.activation.nova_version',
                        return_value='25.0.0'):
            self.assertEqual(2, main.main(['list']))
        self.assertEqual('', stdout.getvalue())
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('nova-fixes: nova 25.0.0 is not supported', lines[0])

    def _without(self, module, command):
        """Exit status, stdout of command when importing module fails."""
        stdout = self.useFixture(fixtures.MockPatch(
            'sys.stdout', io.StringIO())).mock
        # None in sys.modules: importing the module raises
        # ModuleNotFoundError, as when it is not installed.
        with mock.patch.dict(sys.modules, {module: None}):
            status = main.main([command])
        return status, stdout.getvalue()

    def test_commands_that_need_nova_refuse_a_missing_one(self):
        for command in ('list', 'check'):
            self.stderr.seek(0)
            self.stderr.truncate()
            status, out = self._without('nova', command)
            self.assertEqual(2, status, command)
            self.assertEqual('', out, command)
            err = self.stderr.getvalue()
            lines = err.splitlines()
            self.assertEqual(1, len(lines), err)
            self.assertTrue(lines[0].startswith(
                'nova-fixes: nova is not installed; install nova of a '
                'supported series (2022.2, '), err)
            self.assertIn('(%s)' % sys.executable, lines[0])
            self.assertIn('Nothing was patched.', lines[0])
            self.assertEqual([], nova_fixes.active_fixes())

    def test_check_names_why_nova_cannot_be_imported(self):
        # A nova package whose version module needs a missing dependency.
        root = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(root, 'version.py'), 'w') as f:
            f.write('import nova_fixes_no_such_dependency\n')
        broken = types.ModuleType('nova')
        broken.__path__ = [root]
        stdout = self.useFixture(fixtures.MockPatch(
            'sys.stdout', io.StringIO())).mock
        with mock.patch.dict(sys.modules, {'nova': broken}):
            sys.modules.pop('nova.version', None)
            self.assertEqual(2, main.main(['check']))
        self.assertEqual('', stdout.getvalue())
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn("nova-fixes: nova cannot be imported (No module named "
                      "'nova_fixes_no_such_dependency'); install nova",
                      lines[0])
        self.assertEqual([], nova_fixes.active_fixes())

    def test_activate_without_nova_is_a_nova_fixes_error(self):
        with mock.patch.dict(sys.modules, {'nova': None}):
            exc = self.assertRaises(nova_fixes.NovaNotInstalled,
                                    nova_fixes.activate)
        # Both: callers catching NovaFixesError or ImportError see it.
        self.assertIsInstance(exc, nova_fixes.NovaFixesError)
        self.assertIsInstance(exc, ImportError)
        self.assertEqual([], nova_fixes.active_fixes())

    def test_unknown_flag_gets_the_subcommands_usage(self):
        exc = self.assertRaises(SystemExit, main.main,
                                ['verify', '--series', '2026.2', '--bogus'])
        self.assertEqual(2, exc.code)
        err = self.stderr.getvalue()
        self.assertTrue(err.startswith('usage: nova-fixes verify '), err)
        self.assertIn('nova-fixes verify: error: unrecognized arguments: '
                      '--bogus', err)

    def test_unknown_flag_before_the_subcommand(self):
        exc = self.assertRaises(SystemExit, main.main, ['--bogus', 'list'])
        self.assertEqual(2, exc.code)
        self.assertIn('nova-fixes: error: unrecognized arguments: --bogus',
                      self.stderr.getvalue())


class ExportSetTestCase(testtools.TestCase):
    """export --set: a distribution's own patch set, or a clear error and
    nothing written.
    """

    def setUp(self):
        super(ExportSetTestCase, self).setUp()
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MockPatch('sys.stderr', self.stderr))
        self.root = self.useFixture(fixtures.TempDir()).path
        self.write = self.useFixture(fixtures.MockPatch(
            'nova_fixes.export.patch.write')).mock

    def _export(self, *args):
        return main.main(['export', '--root', self.root] + list(args))

    def test_unknown_set(self):
        self.assertEqual(2, self._export('--series', '2025.1', '--set',
                                         'debian-12', '--tree', self.root))
        self.assertIn("unknown patch set 'debian-12'; distribution patch "
                      "sets: debian-13 (series 2025.1)",
                      self.stderr.getvalue())
        self.write.assert_not_called()

    def test_set_of_another_series(self):
        self.assertEqual(2, self._export('--series', '2024.2', '--set',
                                         'debian-13', '--tree', self.root))
        self.assertIn('patch set debian-13 is made for series 2025.1, not '
                      '2024.2', self.stderr.getvalue())
        self.write.assert_not_called()

    def test_set_needs_its_tree(self):
        self.assertEqual(2, self._export('--series', '2025.1', '--set',
                                         'debian-13'))
        self.assertIn("--set debian-13 is made from Debian 13's nova",
                      self.stderr.getvalue())
        self.write.assert_not_called()

    def test_set_is_written_under_its_name(self):
        self.write.return_value = ['0001-x.patch', 'series']
        stdout = self.useFixture(fixtures.MockPatch(
            'sys.stdout', io.StringIO())).mock
        self.assertEqual(0, self._export('--series', '2025.1', '--set',
                                         'debian-13', '--tree', self.root))
        self.write.assert_called_once_with('2025.1', self.root,
                                           root=self.root, name='debian-13')
        self.assertEqual('patches/debian-13: 0001-x.patch, series\n',
                         stdout.getvalue())
