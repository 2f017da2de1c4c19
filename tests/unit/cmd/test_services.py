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
import logging
import os
import sys
from unittest import mock

import fixtures
from oslo_log import log as oslo_logging
import testtools

import nova_fixes
from nova_fixes.cmd import services

ALL = [fix.bug for fix in nova_fixes.FIXES]
ACTIVATED = 'nova-fixes: activated fixes for bugs'


class _Base(testtools.TestCase):

    def setUp(self):
        super(_Base, self).setUp()
        self.addCleanup(nova_fixes.deactivate)
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MockPatch('sys.stderr', self.stderr))
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        self.logger = logging.getLogger('nova_fixes')
        self.assertNotIn('HeldLogs', repr(self.logger.handlers))

    def assertLoggerRestored(self):
        self.assertTrue(self.logger.propagate)
        self.assertEqual(logging.NOTSET, self.logger.level)
        self.assertFalse([h for h in self.logger.handlers
                          if isinstance(h, services.HeldLogs)])


class RunServiceTestCase(_Base):

    def setUp(self):
        super(RunServiceTestCase, self).setUp()
        # nova's starter modules monkey patch at import: a stand-in here.
        self.starter = mock.Mock()
        sys.modules['nova.cmd.fake'] = self.starter
        self.addCleanup(sys.modules.pop, 'nova.cmd.fake')
        self.setup = self.useFixture(fixtures.MockPatchObject(
            oslo_logging, 'setup')).mock

    def test_activates_then_hands_over_to_nova(self):
        seen = {}

        def main():
            seen['active'] = nova_fixes.active_fixes()
            # nova's main() sets up logging first: nothing logged before.
            seen['before'] = self.log.output
            oslo_logging.setup('conf', 'nova')
            seen['after'] = self.log.output
            return 'status'

        self.starter.main.side_effect = main
        self.assertEqual('status', services.run_service(
            'nova.cmd.fake', lambda: nova_fixes.activate()))
        self.assertEqual(ALL, seen['active'])
        self.assertNotIn(ACTIVATED, seen['before'])
        self.assertIn(ACTIVATED, seen['after'])
        self.setup.assert_called_once_with('conf', 'nova')
        # The one-shot wrapper put oslo.log's setup back.
        self.assertIs(self.setup, oslo_logging.setup)
        self.assertLoggerRestored()

    def test_refuses_to_start_on_an_unsupported_nova(self):
        with mock.patch('nova_fixes.activation.nova_version',
                        return_value='28.0.0'):
            self.assertEqual(2, services.run_service(
                'nova.cmd.fake', lambda: nova_fixes.activate()))
        self.starter.main.assert_not_called()
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines))
        self.assertIn('nova 28.0.0 is not supported', lines[0])
        self.assertEqual([], nova_fixes.active_fixes())
        self.assertIs(self.setup, oslo_logging.setup)
        self.assertLoggerRestored()

    @mock.patch.object(services, 'run_service')
    def test_each_service_runs_its_nova_starter(self, run):
        services.compute()
        services.conductor()
        services.scheduler()
        self.assertEqual(['nova.cmd.compute', 'nova.cmd.conductor',
                          'nova.cmd.scheduler'],
                         [c[0][0] for c in run.call_args_list])
        for c in run.call_args_list:
            self.assertEqual([], nova_fixes.active_fixes())
            c[0][1]()
            self.assertEqual(ALL, nova_fixes.active_fixes())
            nova_fixes.deactivate()


class HeldLogsTestCase(_Base):

    def test_replay_as_the_loggers_then_filter(self):
        held = services.HeldLogs()
        logging.getLogger('nova_fixes.x').info('info')
        logging.getLogger('nova_fixes.x').debug('debug')
        self.assertEqual('', self.log.output)
        self.assertEqual(2, len(held.records))
        held.replay()
        self.assertEqual('info\n', self.log.output)
        self.assertLoggerRestored()
        held.replay()  # once only
        self.assertEqual('info\n', self.log.output)

    def test_drop(self):
        held = services.HeldLogs()
        logging.getLogger('nova_fixes.x').warning('warning')
        held.drop()
        held.replay()
        self.assertEqual('', self.log.output)
        self.assertLoggerRestored()


class _FakeNova(fixtures.Fixture):
    """A package standing for nova, with its WSGI module of one series."""

    def __init__(self, modern):
        self.modern = modern

    def _setUp(self):
        root = self.useFixture(fixtures.TempDir()).path
        files = {
            'fakenova/__init__.py': 'EVENTS = []\n',
            'fakenova/wsgi_app.py': (
                'import fakenova\n'
                'fakenova.EVENTS.append("factory module imported")\n'
                'def init_application():\n'
                '    fakenova.EVENTS.append("factory")\n'
                '    return "app"\n'),
            'fakenova/script.py': (
                'import fakenova\n'
                'fakenova.EVENTS.append("monkey patching")\n'
                'from fakenova import wsgi_app\n'
                'def init_application():\n'
                '    return wsgi_app.init_application()\n'),
        }
        if self.modern:
            files['fakenova/wsgi/__init__.py'] = ''
            files['fakenova/wsgi/api.py'] = (
                'import fakenova\n'
                'fakenova.EVENTS.append("monkey patching")\n'
                'from fakenova import wsgi_app\n'
                'application = wsgi_app.init_application()\n')
        for name, text in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write(text)
        self.useFixture(fixtures.MonkeyPatch('sys.path', [root] + sys.path))
        self.addCleanup(self._forget)
        for name, value in (('WSGI_APP_MODULE', 'fakenova.wsgi_app'),
                            ('WSGI_MODULE', 'fakenova.wsgi.api'),
                            ('WSGI_SCRIPT_MODULE', 'fakenova.script')):
            self.useFixture(fixtures.MockPatchObject(services, name, value))

    def _forget(self):
        for name in list(sys.modules):
            if name.split('.')[0] == 'fakenova':
                del sys.modules[name]

    @property
    def events(self):
        return sys.modules['fakenova'].EVENTS


class WsgiApplicationTestCase(_Base):

    def activate(self):
        sys.modules['fakenova'].EVENTS.append('activate')
        nova_fixes.activate()

    def _activates_between_monkey_patching_and_factory(self, modern):
        nova = self.useFixture(_FakeNova(modern))
        self.assertEqual('app', services.wsgi_application(self.activate))
        self.assertEqual(['monkey patching', 'factory module imported',
                          'activate', 'factory'], nova.events)
        self.assertEqual(ALL, nova_fixes.active_fixes())
        self.assertIn(ACTIVATED, self.log.output)
        self.assertLoggerRestored()

    def test_activates_between_monkey_patching_and_factory(self):
        self._activates_between_monkey_patching_and_factory(modern=True)

    def test_nova_29_activates_between_monkey_patching_and_factory(self):
        self._activates_between_monkey_patching_and_factory(modern=False)

    def test_refuses_before_the_factory(self):
        nova = self.useFixture(_FakeNova(True))
        with mock.patch('nova_fixes.activation.nova_version',
                        return_value='28.0.0'):
            e = self.assertRaises(SystemExit, services.wsgi_application,
                                  self.activate)
        self.assertEqual(2, e.code)
        self.assertNotIn('factory', nova.events)
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines))
        self.assertIn('nova 28.0.0 is not supported', lines[0])
        self.assertEqual([], nova_fixes.active_fixes())
        self.assertNotIn(ACTIVATED, self.log.output)
        self.assertLoggerRestored()

    def test_factory_module_imported_already(self):
        nova = self.useFixture(_FakeNova(True))
        __import__('fakenova.wsgi_app')
        self.assertEqual('app', services.wsgi_application(self.activate))
        self.assertEqual(['factory module imported', 'activate',
                          'monkey patching', 'factory'], nova.events)

    def test_factory_module_never_imported(self):
        self.useFixture(_FakeNova(True))
        with mock.patch.object(services, 'WSGI_APP_MODULE', 'fakenova.no'):
            self.assertRaises(RuntimeError, services.wsgi_application,
                              self.activate)
        self.assertLoggerRestored()
        self.assertNotIn(services.AfterImport, map(type, sys.meta_path))
