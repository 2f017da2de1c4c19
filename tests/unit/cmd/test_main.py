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

import fixtures
import testtools

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
