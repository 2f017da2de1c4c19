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

"""nova's services and compute API with the fixes active.

Each entry point runs nova's own starter of the installed series, so the
monkey patching, the configuration files read and the WSGI app factory are
nova's, whatever the series does:

- a service imports nova's starter module (``nova.cmd.<service>``), whose
  import does nova's monkey patching, then activates the fixes and calls
  the starter's main();
- the compute API imports nova's WSGI module (``nova.wsgi.osapi_compute``,
  or ``nova.api.openstack.compute.wsgi`` on nova 29, which has no
  ``nova.wsgi`` package), activating the fixes once that module has done
  its monkey patching and imported nova's app factory module, before it
  calls the factory.

Activation is all or nothing. On an unsupported or unexpected nova the
entry point writes one line naming the target and exits with status 2
before nova's starter does anything else: no configuration read, no
service record, nothing patched.

Activation logs which fixes it activated; as that happens before nova sets
up logging, the record is held and handed to nova's logging once nova has
set it up (see HeldLogs).
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import threading

import nova_fixes

EXIT_REFUSED = 2
#: The module of nova's compute API app factory, in every series.
WSGI_APP_MODULE = 'nova.api.openstack.wsgi_app'
#: nova's WSGI module, whose import builds ``application`` (nova >= 30).
WSGI_MODULE = 'nova.wsgi.osapi_compute'
#: The module of nova's nova-api-wsgi script, ``init_application()``
#: (nova <= 32; the only one in nova 29).
WSGI_SCRIPT_MODULE = 'nova.api.openstack.compute.wsgi'


class HeldLogs(logging.Handler):
    """Holds nova_fixes' log records until the service has set up logging.

    While held, the ``nova_fixes`` logger keeps every record (at any level)
    to itself. replay() restores the logger and hands the held records,
    as their own loggers now filter them, to the handlers logging has then.
    """

    def __init__(self, name='nova_fixes'):
        super().__init__(logging.DEBUG)
        self.records = []
        self._logger = logging.getLogger(name)
        self._saved = (self._logger.level, self._logger.propagate)
        self._release_lock = threading.Lock()
        self._logger.addHandler(self)
        self._logger.setLevel(logging.DEBUG)
        self._logger.propagate = False

    def emit(self, record):
        self.records.append(record)

    def _restore(self):
        with self._release_lock:
            logger, self._logger = self._logger, None
            if logger is None:
                return False
            logger.removeHandler(self)
            logger.setLevel(self._saved[0])
            logger.propagate = self._saved[1]
            return True

    def drop(self):
        """Restore the logger, dropping the held records."""
        self._restore()
        self.records = []

    def replay(self):
        """Restore the logger and log the held records now."""
        if not self._restore():
            return
        records, self.records = self.records, []
        for record in records:
            logger = logging.getLogger(record.name)
            if logger.isEnabledFor(record.levelno):
                logger.handle(record)

    def replay_after_setup(self):
        """replay() once nova has set up logging with oslo.log.

        Every nova starter's main() calls oslo.log's setup() before it
        creates its service; the next call of it, and only that one, is
        followed by replay() (the original is put back on that call).
        """
        from oslo_log import log as oslo_logging
        setup = oslo_logging.setup

        def setup_then_replay(*args, **kwargs):
            oslo_logging.setup = setup
            try:
                return setup(*args, **kwargs)
            finally:
                self.replay()

        oslo_logging.setup = setup_then_replay


class _CallAfterExec(importlib.abc.Loader):
    """Wraps a module's loader to call ``callback`` once it has run."""

    def __init__(self, loader, callback):
        self._loader = loader
        self._callback = callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._callback()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class AfterImport(importlib.abc.MetaPathFinder):
    """Within the block, calls ``callback`` right after ``name`` is imported.

    The callback runs after the module's own code and before the code that
    imported it goes on; if it raises, so does that import. If the module
    is imported already, the callback runs on entering the block. Leaving
    the block raises RuntimeError if the callback did not run.
    """

    def __init__(self, name, callback):
        self.name = name
        self.called = False

        def call():
            self.called = True
            callback()

        self._call = call

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        self._remove()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _CallAfterExec(spec.loader, self._call)
        return spec

    def _remove(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def __enter__(self):
        if self.name in sys.modules:
            self._call()
        else:
            sys.meta_path.insert(0, self)
        return self

    def __exit__(self, *exc):
        self._remove()
        if exc[0] is None and not self.called:
            raise RuntimeError('%s was not imported; cannot tell where to '
                               'activate the fixes' % self.name)


def refuse(error):
    """The one line and the exit status of an entry point that refuses."""
    sys.stderr.write('nova-fixes: %s\n' % error)
    sys.stderr.flush()
    return EXIT_REFUSED


def run_service(starter, activate):
    """Run nova's ``starter`` module's main() with the fixes active."""
    held = HeldLogs()
    # nova's starter module does nova's monkey patching when imported.
    module = importlib.import_module(starter)
    try:
        activate()
    except nova_fixes.NovaFixesError as e:
        held.drop()
        return refuse(e)
    held.replay_after_setup()
    return module.main()


def _has_module(name):
    """Whether the module's file exists, importing none of its packages."""
    top, *parts = name.split('.')
    spec = importlib.util.find_spec(top)
    return spec is not None and any(
        os.path.isfile(os.path.join(location, *parts) + '.py')
        for location in spec.submodule_search_locations or ())


def wsgi_application(activate):
    """nova's compute API WSGI application, with the fixes active.

    Refuses (one line, SystemExit with status 2) when activation does.
    """
    held = HeldLogs()
    try:
        with AfterImport(WSGI_APP_MODULE, activate):
            if _has_module(WSGI_MODULE):
                # nova 30 and later: the module builds the application
                # when imported.
                app = importlib.import_module(WSGI_MODULE).application
            else:
                # nova 29: the module of its nova-api-wsgi script.
                app = importlib.import_module(
                    WSGI_SCRIPT_MODULE).init_application()
    except nova_fixes.NovaFixesError as e:
        held.drop()
        raise SystemExit(refuse(e))
    except BaseException:
        held.replay()
        raise
    # nova's factory has set up logging.
    held.replay()
    return app


def compute():
    return run_service('nova.cmd.compute', lambda: nova_fixes.activate())


def conductor():
    return run_service('nova.cmd.conductor', lambda: nova_fixes.activate())


def scheduler():
    return run_service('nova.cmd.scheduler', lambda: nova_fixes.activate())
