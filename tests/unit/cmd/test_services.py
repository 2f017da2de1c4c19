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
import sys
from unittest import mock

import fixtures
import testtools

import nova_fixes
from nova_fixes.cmd import services


class ServicesTestCase(testtools.TestCase):

    def setUp(self):
        super(ServicesTestCase, self).setUp()
        self.addCleanup(nova_fixes.deactivate)
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MockPatch('sys.stderr', self.stderr))

    def test_activates_then_hands_over_to_nova(self):
        starter = mock.Mock()
        starter.main.side_effect = lambda: nova_fixes.active_fixes()
        active = services._run(starter)
        self.assertEqual([fix.bug for fix in nova_fixes.FIXES], active)

    def test_refuses_to_start_on_an_unsupported_nova(self):
        starter = mock.Mock()
        with mock.patch('nova_fixes.activation.nova_version',
                        return_value='28.0.0'):
            self.assertEqual(2, services._run(starter))
        starter.main.assert_not_called()
        self.assertIn('nova 28.0.0 is not supported', self.stderr.getvalue())
        self.assertEqual([], nova_fixes.active_fixes())

    @mock.patch.object(services, '_run')
    def test_compute_and_conductor(self, run):
        # nova's starter modules monkey patch at import: stand-ins here.
        compute, conductor = mock.Mock(), mock.Mock()
        with mock.patch.dict(sys.modules, {
                'nova.cmd.compute': compute,
                'nova.cmd.conductor': conductor}):
            services.compute()
            services.conductor()
        self.assertEqual([mock.call(compute), mock.call(conductor)],
                         run.call_args_list)
