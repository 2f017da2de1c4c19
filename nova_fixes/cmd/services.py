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
  import does nova's monkey patching, then calls the starter's main();
- the compute API imports nova's WSGI module (``nova.wsgi.osapi_compute``,
  or ``nova.api.openstack.compute.wsgi`` on nova 29 and earlier, which
  have no ``nova.wsgi`` package), whose import does nova's monkey
  patching, then imports nova's app factory module and (nova 30 and
  later) calls the factory.

Both nova's main() and its app factory parse nova's configuration and set
up logging (oslo.log's setup()) before anything else: the fixes are
activated right after that setup, before nova creates its service or its
application. So activation reads nova's configuration (the orphan task's
interval), and logs to nova's log.

Activation is all or nothing. On an unsupported or unexpected nova the
entry point writes one line naming the target and exits with status 2
(SystemExit) before nova creates anything: no service record, no
application, nothing patched.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

import nova_fixes

EXIT_REFUSED = 2
#: The module of nova's compute API app factory, in every series.
WSGI_APP_MODULE = 'nova.api.openstack.wsgi_app'
#: nova's WSGI module, whose import builds ``application`` (nova >= 30).
WSGI_MODULE = 'nova.wsgi.osapi_compute'
#: The module of nova's nova-api-wsgi script, ``init_application()``
#: (nova <= 32; the only one in nova 29 and earlier).
WSGI_SCRIPT_MODULE = 'nova.api.openstack.compute.wsgi'


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


class ActivateAfterLoggingSetup(object):
    """Activates the fixes right after the next oslo.log setup() call.

    oslo.log's module must be imported after nova's monkey patching, so
    this is created after it. The call puts oslo.log's setup() back.
    """

    def __init__(self, activate):
        from oslo_log import log as oslo_logging
        self.activated = False
        setup = oslo_logging.setup

        def setup_then_activate(*args, **kwargs):
            oslo_logging.setup = setup
            result = setup(*args, **kwargs)
            try:
                activate()
            except nova_fixes.NovaFixesError as e:
                raise SystemExit(refuse(e))
            self.activated = True
            return result

        oslo_logging.setup = setup_then_activate


def run_service(starter, activate):
    """Run nova's ``starter`` module's main() with the fixes active.

    Should nova's main() reach ``nova.service.serve`` (where its service
    starts: the service record, the RPC server) without having set up
    logging, so without the fixes active, the entry point refuses there
    (one line, SystemExit with status 2) rather than run nova unfixed.
    """
    # nova's starter module does nova's monkey patching when imported.
    module = importlib.import_module(starter)
    hook = ActivateAfterLoggingSetup(activate)
    from nova import service as nova_service
    serve = nova_service.serve

    def serve_if_activated(*args, **kwargs):
        if not hook.activated:
            raise SystemExit(refuse(
                "%s started its service without setting up logging first; "
                "the fixes were not activated, so the service does not "
                "start" % starter))
        return serve(*args, **kwargs)

    nova_service.serve = serve_if_activated
    try:
        return module.main()
    finally:
        nova_service.serve = serve


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
    hooks = []
    # Once nova's WSGI module has monkey patched and imported the app
    # factory's module, and before it calls the factory.
    with AfterImport(WSGI_APP_MODULE, lambda: hooks.append(
            ActivateAfterLoggingSetup(activate))):
        if _has_module(WSGI_MODULE):
            # nova 30 and later: the module builds the application when
            # imported.
            app = importlib.import_module(WSGI_MODULE).application
        else:
            # nova 29 and earlier: the module of its nova-api-wsgi
            # script.
            app = importlib.import_module(
                WSGI_SCRIPT_MODULE).init_application()
    if not hooks[0].activated:
        raise RuntimeError("nova's app factory did not set up logging; the "
                           "fixes were not activated")
    return app


def api_wsgi_script():
    """nova's compute API WSGI application, with the fixes active.

    The target of the nova-fixes-api-wsgi script. pbr's script imports its
    target's module before it takes its own arguments off sys.argv, which
    nova 33's app factory parses: the application is built only when this
    is called.
    """
    from nova_fixes.wsgi import osapi_compute
    return osapi_compute.init_application()


def compute():
    return run_service('nova.cmd.compute',
                       lambda: nova_fixes.activate(services=['compute']))


def conductor():
    return run_service('nova.cmd.conductor',
                       lambda: nova_fixes.activate(services=['conductor']))


def scheduler():
    return run_service('nova.cmd.scheduler',
                       lambda: nova_fixes.activate(services=['scheduler']))


def manage():
    """nova-manage, with the fixes whose code runs in it active (the
    placement audit's). nova-manage sets up logging before it runs any
    command, so the fixes are active before the command runs; a
    refusal exits with status 2 before it does.
    """
    module = importlib.import_module('nova.cmd.manage')
    ActivateAfterLoggingSetup(
        lambda: nova_fixes.activate(services=['manage']))
    return module.main()
