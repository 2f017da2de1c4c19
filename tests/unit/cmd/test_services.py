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
import subprocess
import sys
from unittest import mock

import fixtures
from oslo_log import log as oslo_logging
import testtools

import nova_fixes
from nova_fixes import activation
from nova_fixes.cmd import services
from nova_fixes import registry

#: What activate() activates by default on the installed nova's series
#: (not nova-manage's fixes alone, see registry.DEFAULT_SERVICES).
ALL = [fix.bug for fix in nova_fixes.FIXES
       if any(set(target.services) & set(registry.DEFAULT_SERVICES)
              for target in registry.targets_of(
                  fix, activation.series_of(activation.nova_version())))]
ACTIVATED = 'nova-fixes: activated fixes for bugs'


class _Base(testtools.TestCase):

    def setUp(self):
        super(_Base, self).setUp()
        self.addCleanup(nova_fixes.deactivate)
        self.stderr = io.StringIO()
        self.useFixture(fixtures.MockPatch('sys.stderr', self.stderr))
        self.log = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        # nova's oslo.log setup(); the entry points wrap it once.
        self.setup = self.useFixture(fixtures.MockPatchObject(
            oslo_logging, 'setup')).mock


class RunServiceTestCase(_Base):

    def setUp(self):
        super(RunServiceTestCase, self).setUp()
        # nova's starter modules monkey patch at import: a stand-in here.
        self.starter = mock.Mock()
        sys.modules['nova.cmd.fake'] = self.starter
        self.addCleanup(sys.modules.pop, 'nova.cmd.fake')

    def test_activates_after_nova_sets_up_logging(self):
        seen = {}

        def main():
            # nova's main(): configuration, logging, then its service.
            seen['before'] = nova_fixes.active_fixes()
            oslo_logging.setup('conf', 'nova')
            seen['after'] = nova_fixes.active_fixes()
            return 'status'

        self.starter.main.side_effect = main
        self.assertEqual('status', services.run_service(
            'nova.cmd.fake', lambda: nova_fixes.activate()))
        self.assertEqual([], seen['before'])
        self.assertEqual(ALL, seen['after'])
        self.assertIn(ACTIVATED, self.log.output)
        self.setup.assert_called_once_with('conf', 'nova')
        # The one-shot wrapper put oslo.log's setup back.
        self.assertIs(self.setup, oslo_logging.setup)

    def test_refuses_to_start_on_an_unsupported_nova(self):
        created = []

        def main():
            oslo_logging.setup('conf', 'nova')
            created.append('service')

        self.starter.main.side_effect = main
        with mock.patch('nova_fixes.activation.nova_version',
                        return_value='35.0.0'):
            e = self.assertRaises(SystemExit, services.run_service,
                                  'nova.cmd.fake',
                                  lambda: nova_fixes.activate())
        self.assertEqual(2, e.code)
        self.assertEqual([], created)
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines))
        self.assertIn('nova 35.0.0 is not supported', lines[0])
        self.assertEqual([], nova_fixes.active_fixes())
        self.assertIs(self.setup, oslo_logging.setup)

    def test_serves_only_with_the_fixes_active(self):
        from nova import service as nova_service
        serve = self.useFixture(fixtures.MockPatchObject(
            nova_service, 'serve')).mock

        def main():
            oslo_logging.setup('conf', 'nova')
            nova_service.serve('server', workers=1)

        self.starter.main.side_effect = main
        services.run_service('nova.cmd.fake', lambda: nova_fixes.activate())
        serve.assert_called_once_with('server', workers=1)
        self.assertEqual(ALL, nova_fixes.active_fixes())
        # nova's serve() is back once main() has returned.
        self.assertIs(serve, nova_service.serve)

    def test_refuses_to_serve_when_logging_was_never_set_up(self):
        from nova import service as nova_service
        serve = self.useFixture(fixtures.MockPatchObject(
            nova_service, 'serve')).mock

        def main():
            # A starter that would create its service before (or without)
            # oslo.log's setup(): the fixes would never be activated.
            nova_service.serve('server')

        self.starter.main.side_effect = main
        e = self.assertRaises(SystemExit, services.run_service,
                              'nova.cmd.fake', lambda: nova_fixes.activate())
        self.assertEqual(2, e.code)
        serve.assert_not_called()
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines))
        self.assertIn('nova.cmd.fake started its service without setting '
                      'up logging', lines[0])
        self.assertEqual([], nova_fixes.active_fixes())
        self.assertIs(serve, nova_service.serve)

    @mock.patch.object(services, 'run_service')
    def test_each_service_runs_its_nova_starter(self, run):
        services.compute()
        services.conductor()
        services.scheduler()
        self.assertEqual(['nova.cmd.compute', 'nova.cmd.conductor',
                          'nova.cmd.scheduler'],
                         [c[0][0] for c in run.call_args_list])
        # Each activates what its service runs: the conductor's drop-ins
        # of 1859496, none in the scheduler.
        expected = ([1848343, 'orphans', 'interrupted_moves',
                     'stale_moves'], [1859496, 1848343], [])
        for c, active in zip(run.call_args_list, expected):
            self.assertEqual([], nova_fixes.active_fixes())
            c[0][1]()
            self.assertEqual(active, nova_fixes.active_fixes())
            nova_fixes.deactivate()


class _FakeNova(fixtures.Fixture):
    """A package standing for nova, with its WSGI module of one series."""

    def __init__(self, modern, sets_up_logging=True):
        self.modern = modern
        self.setup = 'log.setup' if sets_up_logging else 'len'

    def _setUp(self):
        root = self.useFixture(fixtures.TempDir()).path
        files = {
            'fakenova/__init__.py': 'EVENTS = []\n',
            'fakenova/wsgi_app.py': (
                'import fakenova\n'
                'fakenova.EVENTS.append("factory module imported")\n'
                'from oslo_log import log\n'
                'def init_application():\n'
                '    %s("conf")\n'
                '    fakenova.EVENTS.append("factory")\n'
                '    return "app"\n' % self.setup),
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
        self.assertIs(self.setup, oslo_logging.setup)

    def test_activates_between_monkey_patching_and_factory(self):
        self._activates_between_monkey_patching_and_factory(modern=True)

    def test_nova_29_activates_between_monkey_patching_and_factory(self):
        self._activates_between_monkey_patching_and_factory(modern=False)

    def test_refuses_before_the_factory(self):
        nova = self.useFixture(_FakeNova(True))
        with mock.patch('nova_fixes.activation.nova_version',
                        return_value='35.0.0'):
            e = self.assertRaises(SystemExit, services.wsgi_application,
                                  self.activate)
        self.assertEqual(2, e.code)
        self.assertNotIn('factory', nova.events)
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(1, len(lines))
        self.assertIn('nova 35.0.0 is not supported', lines[0])
        self.assertEqual([], nova_fixes.active_fixes())
        self.assertNotIn(ACTIVATED, self.log.output)

    def test_factory_module_imported_already(self):
        nova = self.useFixture(_FakeNova(True))
        __import__('fakenova.wsgi_app')
        self.assertEqual('app', services.wsgi_application(self.activate))
        self.assertEqual(['factory module imported', 'monkey patching',
                          'activate', 'factory'], nova.events)

    def test_factory_module_never_imported(self):
        self.useFixture(_FakeNova(True))
        with mock.patch.object(services, 'WSGI_APP_MODULE', 'fakenova.no'):
            self.assertRaises(RuntimeError, services.wsgi_application,
                              self.activate)
        self.assertNotIn(services.AfterImport, map(type, sys.meta_path))

    def test_factory_that_does_not_set_up_logging(self):
        self.useFixture(_FakeNova(True, sets_up_logging=False))
        self.assertRaises(RuntimeError, services.wsgi_application,
                          self.activate)
        self.assertEqual([], nova_fixes.active_fixes())

    def test_script_builds_the_application_when_called(self):
        module = mock.Mock()
        with mock.patch.dict(sys.modules,
                             {'nova_fixes.wsgi.osapi_compute': module}):
            with mock.patch('nova_fixes.wsgi.osapi_compute', module,
                            create=True):
                app = services.api_wsgi_script()
        self.assertIs(module.init_application.return_value, app)


class ServiceSelectionTestCase(testtools.TestCase):

    def test_compute_activates_no_api_module(self):
        """In a process where nova-compute's modules are imported,
        activation for the compute imports nothing of the API's, and
        activates only what the compute runs.
        """
        script = (
            'import sys; import nova.cmd.compute; '
            'import nova.compute.manager; '
            'before = set(sys.modules); import nova_fixes; '
            'print(nova_fixes.activate(services=["compute"])); '
            'print(" ".join(sorted(m for m in set(sys.modules) - before '
            'if m.startswith("nova.api") or m == "nova.compute.api")))')
        out = subprocess.run([sys.executable, '-c', script],
                             capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                 sys.path)))
        activated, api_modules = (out.stdout.splitlines() + [''])[:2]
        self.assertEqual("[1848343, 'orphans', 'interrupted_moves', "
                         "'stale_moves']", activated)
        self.assertEqual('', api_modules.strip())

    def test_unknown_service_is_refused(self):
        self.addCleanup(nova_fixes.deactivate)
        exc = self.assertRaises(nova_fixes.NovaFixesError,
                                nova_fixes.activate, services=['cells'])
        self.assertIn("unknown nova service 'cells'", str(exc))
        self.assertEqual([], nova_fixes.active_fixes())
