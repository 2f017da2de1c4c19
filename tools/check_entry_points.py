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

"""Start every nova-fixes entry point on the installed nova, as operators do.

Run with the python of an environment where one series' nova is installed
(tox -e entry-points, or tox -e series which runs it as its last step).
Each entry point runs in a fresh process on a real, minimal configuration:
SQLite databases synced by nova-manage (API, cell0, cell1), cell_v2
map_cell0 and create_cell, noauth2 where the series has it, the fake
(one-process) RPC transport and the fake virt driver.

- the compute API answers GET / with its versions document and has the
  fixes active (the log line; in the process, the drop-in behind the
  servers controller's delete), served both from the module
  nova_fixes.wsgi.osapi_compute (wsgiref) and by the nova-fixes-api-wsgi
  script that pbr writes (when the environment has none, as an editable
  install has no wsgi_scripts, from nova-fixes pip-installed for the
  check into its directory);
- nova-fixes-conductor and nova-fixes-scheduler log the fixes, register
  their service record, and stop on SIGTERM with status 0;
- nova-fixes-manage runs nova-manage's cell_v2 list_cells with the fixes
  active (logged), and lists the cell;
- nova-fixes-compute logs the fixes and goes on to wait for nova-conductor
  (over the one-process transport no conductor can answer, so its service
  record cannot be written: tests/deployment runs it with a real broker);
- each of them, on a nova that does not match a recorded fingerprint
  (simulated: one fingerprint changed in the process), exits with status 2
  and one line naming the target, nothing patched and no service record
  written.

Prints one line per check and "N passed, N failed, N skipped".
"""

import argparse
import collections
import http.server
import importlib.util
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TREE)

import nova_fixes  # noqa: E402
from nova_fixes import activation  # noqa: E402
from nova_fixes import registry  # noqa: E402

HOST = 'entry-check'
ACTIVATED = 'nova-fixes: activated fixes for bugs'
NOTHING_TO_ACTIVATE = 'nova-fixes: no fix has code that runs in %s'
START_TIMEOUT = 180
STOP_TIMEOUT = 60
SERVICES = ('conductor', 'scheduler', 'compute')

NOVA_CONF = """\
[DEFAULT]
host = {host}
# nova 33's services wait for their manager's shutdown, up to 160 s
# (manager_shutdown_timeout), within this bound of oslo.service's.
graceful_shutdown_timeout = 10
transport_url = fake:/
compute_driver = fake.FakeDriver
state_path = {work}/state
instances_path = {work}/instances
[api]
auth_strategy = noauth2
[api_database]
connection = sqlite:///{work}/api.sqlite
[database]
connection = sqlite:///{work}/cell1.sqlite
[conductor]
workers = 1
[scheduler]
workers = 1
[oslo_concurrency]
lock_path = {work}/lock
[placement]
# No placement runs: the services only build their client at start,
# which reads placement's version document (PlacementVersions).
auth_type = none
endpoint_override = http://127.0.0.1:{placement_port}/placement
"""

# Run in the fresh process: the entry point, then what it left patched.
# argv: service ('api' for the WSGI module), series, and a target whose
# recorded fingerprint is changed first ('' for none).
HARNESS = """\
import json, sys
service, series, tamper = sys.argv[1:4]
del sys.argv[1:4]
from nova_fixes import fingerprint
if tamper:
    path = tamper
    recorded = fingerprint.recorded
    def changed():
        data = recorded()
        for key, _what in fingerprint.originals(series, data):
            data[key][path] = '0' * 20
        return data
    fingerprint.recorded = changed
from nova_fixes.cmd import services
try:
    if service == 'api':
        from nova_fixes.wsgi import osapi_compute
        status = 0
    else:
        status = getattr(services, service)()
except SystemExit as e:
    status = e.code
import nova_fixes
from nova_fixes import activation, registry
patched = []
for fix in nova_fixes.FIXES:
    for target in registry.targets_of(fix, series):
        if service not in target.services:
            # Not this process's code, and its module may not import
            # here (nova 34's nova.cmd.manage in a native-threading
            # service).
            continue
        owner, name = activation._resolve(target.path)
        live = vars(owner).get(name)
        if target.new and live is not None:
            patched.append(target.path)
        elif getattr(live, '__module__', '').startswith('nova_fixes'):
            patched.append(target.path)
        if target.original_as and hasattr(owner, target.original_as):
            patched.append(target.original_as)
print('HARNESS ' + json.dumps({'active': nova_fixes.active_fixes(),
                                'patched': patched}))
sys.exit(status)
"""

# Serves the application in a fresh process and GETs / once.
# The entry point first: nova's monkey patching (eventlet on nova <= 33)
# must come before socket users are imported.
API = """\
from nova_fixes.wsgi import osapi_compute
import json, threading, urllib.request, wsgiref.simple_server
app = osapi_compute.application
import nova_fixes
from nova.api.openstack.compute import servers
server = wsgiref.simple_server.make_server('127.0.0.1', 0, app)
server.timeout = 60
thread = threading.Thread(target=server.handle_request)
thread.start()
url = 'http://127.0.0.1:%d/' % server.server_port
with urllib.request.urlopen(url, timeout=60) as response:
    status, body = response.status, json.loads(response.read())
thread.join(60)
server.server_close()
print('HARNESS ' + json.dumps({
    'status': status,
    'versions': [v['id'] for v in body['versions']],
    'active': nova_fixes.active_fixes(),
    'same_app': osapi_compute.init_application() is app,
    'delete': servers.ServersController.delete.__module__}))
"""


class SetupError(Exception):
    pass


class Check(object):
    def __init__(self, work, env, progress):
        self.work = work
        self.env = env
        self.progress = progress
        self.passed = self.failed = self.skipped = 0
        self.results = []

    def record(self, name, ok, detail):
        outcome = {True: 'ok', False: 'FAIL', None: 'skip'}[ok]
        if ok:
            self.passed += 1
        elif ok is None:
            self.skipped += 1
        else:
            self.failed += 1
        self.results.append({'check': name, 'outcome': outcome,
                             'detail': detail})
        self.progress('entry points: %-38s %s  %s' % (name, outcome, detail))

    def log(self, name):
        return open(os.path.join(self.work, name + '.log'), 'w+')


def script(name):
    path = os.path.join(os.path.dirname(sys.executable), name)
    return path if os.path.exists(path) else None


def service_rows(work, binary):
    rows = []
    for db in ('cell0', 'cell1', 'api'):
        path = os.path.join(work, db + '.sqlite')
        with sqlite3.connect(path) as conn:
            try:
                rows += conn.execute(
                    'SELECT binary FROM services WHERE host = ? AND '
                    'binary = ? AND deleted = 0', (HOST, binary)).fetchall()
            except sqlite3.OperationalError:
                pass  # the API database has no services table
    return len(rows)


class PlacementVersions(object):
    """Placement's version document on loopback, and nothing else.

    The scheduler builds its placement client when it starts; with the
    keystoneauth1 and openstacksdk of 2023.1 and 2023.2 that reads the
    version document at the endpoint and the service dies when nothing
    answers there. Every other request gets a 404: no service is meant
    to use placement during these checks.
    """

    DOCUMENT = json.dumps({'versions': [{
        'id': 'v1.0', 'min_version': '1.0', 'max_version': '1.39',
        'status': 'CURRENT', 'links': [{'rel': 'self', 'href': ''}]}]})

    def __init__(self):
        document = self.DOCUMENT.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                found = self.path.rstrip('/') == '/placement'
                body = document if found else b'{}'
                self.send_response(200 if found else 404)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                      Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def prepare(work, placement_port):
    """nova.conf, api-paste.ini and databases, as an operator makes them."""
    with open(os.path.join(work, 'nova.conf'), 'w') as f:
        f.write(NOVA_CONF.format(host=HOST, work=work,
                                 placement_port=placement_port))
    paste = os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')
    if not os.path.exists(paste):
        # Debian's python3-nova installs none: NOVA_FIXES_API_PASTE names
        # the one nova-common ships (tools/run_debian.py sets it).
        paste = os.environ.get('NOVA_FIXES_API_PASTE') or paste
    if not os.path.exists(paste):
        raise SetupError('%s is missing; nova is not installed in this '
                         'environment' % paste)
    shutil.copy(paste, os.path.join(work, 'api-paste.ini'))
    manage = script('nova-manage')
    # Debian ships nova-manage in nova-common, not python3-nova: the same
    # main() that script runs.
    manage = [manage] if manage else python(
        'import sys; from nova.cmd.manage import main; sys.exit(main())')
    conf = ['--config-file', os.path.join(work, 'nova.conf')]
    cell0 = 'sqlite:///%s/cell0.sqlite' % work
    for args in (['api_db', 'sync'],
                 ['cell_v2', 'map_cell0', '--database_connection', cell0],
                 ['db', 'sync'],
                 ['cell_v2', 'create_cell', '--name', 'cell1']):
        with open(os.path.join(work, 'nova-manage.log'), 'a') as log:
            rc = subprocess.call(manage + conf + args, stdout=log,
                                 stderr=subprocess.STDOUT, timeout=300)
        if rc != 0:
            raise SetupError('nova-manage %s exited %d; see '
                             '%s/nova-manage.log' % (' '.join(args), rc, work))


def harness_output(text):
    for line in text.splitlines():
        if line.startswith('HARNESS '):
            return json.loads(line[len('HARNESS '):])
    return None


def run_fresh(command, env, log):
    """Runs a fresh process to its end (bounded); (status, stdout, log)."""
    try:
        proc = subprocess.run(command, env=env, stdout=subprocess.PIPE,
                              stderr=log, timeout=START_TIMEOUT,
                              universal_newlines=True)
        status, stdout = proc.returncode, proc.stdout
    except Exception as e:
        # nova's eventlet monkey patching may have put its own subprocess
        # in place, with a TimeoutExpired of its own.
        if type(e).__name__ != 'TimeoutExpired':
            raise
        status, stdout = 'timeout (%d s)' % START_TIMEOUT, e.stdout or ''
        if isinstance(stdout, bytes):
            stdout = stdout.decode('utf-8', 'replace')
    log.seek(0)
    return status, stdout, log.read()


def python(code, *args):
    return [sys.executable, '-c', code] + list(args)


def check_refusal(check, service, series, target):
    """A changed fingerprint: status 2, one line, nothing patched."""
    name = '%s refuses a mismatch' % service
    binary = 'nova-osapi_compute' if service == 'api' else 'nova-' + service
    conf = ['--config-file', os.path.join(check.work, 'nova.conf')]
    if service == 'manage':
        conf += MANAGE_COMMAND
    with check.log(service + '-mismatch') as log:
        status, stdout, stderr = run_fresh(
            python(HARNESS, service, series, target) + conf,
            check.env, log)
    lines = [line for line in stderr.splitlines()
             if line.startswith('nova-fixes:')]
    state = harness_output(stdout) or {}
    problems = []
    if status != 2:
        problems.append('exit status %s, not 2' % status)
    if len(lines) != 1 or target not in lines[0]:
        problems.append('%d nova-fixes lines naming %s' % (len(lines),
                                                            target))
    if state.get('active') != [] or state.get('patched') != []:
        problems.append('patched: %s' % state)
    if service_rows(check.work, binary):
        problems.append('a %s service record was written' % binary)
    check.record(name, not problems,
                 '; '.join(problems) or 'exit 2: %s' % lines[0][:90])


def check_api(check):
    with check.log('api') as log:
        status, stdout, stderr = run_fresh(python(API), check.env, log)
    # oslo.log writes to stdout unless use_stderr is set.
    logged = ACTIVATED in stderr + stdout
    state = harness_output(stdout)
    if state is None:
        check.record('api module GET /', False, 'exit %s, no result; see %s'
                     % (status, log.name))
        return
    problems = []
    if status != 0 or state.get('status') != 200:
        problems.append('exit %s, GET / %s' % (status, state.get('status')))
    if not state.get('versions'):
        problems.append('no versions document (see %s)' % log.name)
    if not logged:
        problems.append('no "%s" log line' % ACTIVATED)
    series = activation.series_of(activation.nova_version())
    # The API activates the fixes with code that runs in it.
    if sorted(map(str, state.get('active', []))) != sorted(
            str(fix.bug) for fix in nova_fixes.FIXES
            if any('api' in target.services
                   for target in registry.targets_of(fix, series))):
        problems.append('active: %s' % state.get('active'))
    if not state.get('delete', '').startswith('nova_fixes'):
        problems.append('ServersController.delete is %s'
                        % state.get('delete'))
    if not state.get('same_app'):
        problems.append('init_application() built a second application')
    if not service_rows(check.work, 'nova-osapi_compute'):
        problems.append('no nova-osapi_compute service record')
    check.record('api module GET /', not problems, '; '.join(problems) or
                 'versions %s, fixes logged and active'
                 % ', '.join(state['versions']))


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def install_copy(work, log):
    """nova-fixes installed (not editable) in work/installed, or None.

    An editable install (tox's usedevelop) has no wsgi_scripts: pbr writes
    them when it builds the package. Built from the tree, whose git files
    pbr packages (fingerprints.json among them), in pip's isolated build
    environment (the series' environments lack wheel); the build leaves
    only what .gitignore lists (build/, AUTHORS, ChangeLog, egg-info).
    """
    target = os.path.join(work, 'installed')
    # Where this Python has the build tools (Debian's python3-pbr,
    # -setuptools and -wheel in the chroots of tools/debian_build.py), the
    # build uses them: no index is reached.
    offline = all(importlib.util.find_spec(name) is not None
                  for name in ('pbr', 'setuptools', 'wheel'))
    rc = subprocess.call(
        [sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps',
         '--target', target, TREE] +
        (['--no-build-isolation'] if offline else []),
        stdout=log, stderr=subprocess.STDOUT, timeout=300)
    return target if rc == 0 else None


def check_api_script(check):
    """The nova-fixes-api-wsgi script pbr writes, serving on loopback."""
    name = 'nova-fixes-api-wsgi GET /'
    path, env = script('nova-fixes-api-wsgi'), check.env
    with check.log('api-script') as log:
        if path is None:
            installed = install_copy(check.work, log)
            if installed is None:
                check.record(name, False, 'pip could not install a copy; '
                             'see %s' % log.name)
                return
            path = os.path.join(installed, 'bin', 'nova-fixes-api-wsgi')
            env = dict(env, PYTHONPATH=installed)
        port = free_port()
        proc = subprocess.Popen([path, '--host', '127.0.0.1', '--port',
                                 str(port)], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            versions = _get_versions(proc, port)
        finally:
            stop(proc)
        log.seek(0)
        logged = ACTIVATED in log.read()
    ok = bool(versions) and logged
    check.record(name, ok, 'versions %s, fixes logged: %s%s'
                 % (', '.join(versions or ['none']), logged,
                    '' if ok else ' (see %s)' % log.name))


def _get_versions(proc, port):
    deadline = time.time() + START_TIMEOUT
    while time.time() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen('http://127.0.0.1:%d/' % port,
                                        timeout=10) as response:
                body = json.loads(response.read())
            return [v['id'] for v in body['versions']]
        except OSError:
            time.sleep(1)
    return None


def stop(proc):
    """SIGTERM, then SIGKILL; the seconds it took and the exit status."""
    start = time.time()
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None, proc.returncode
    return time.time() - start, proc.returncode


def wait_for(proc, log, condition):
    deadline = time.time() + START_TIMEOUT
    while time.time() < deadline and proc.poll() is None:
        log.seek(0)
        if condition(log.read()):
            return True
        time.sleep(0.5)
    log.seek(0)
    return condition(log.read())


def check_service(check, service, runs_fixes=True):
    conf = ['--config-file', os.path.join(check.work, 'nova.conf')]
    path = script('nova-fixes-' + service)
    command = [path] if path else python(
        'import sys; from nova_fixes.cmd import services; '
        'sys.exit(services.%s())' % service)
    binary = 'nova-' + service
    if service == 'compute':
        # Over the one-process transport nobody answers its conductor
        # ping: the evidence is that it got that far.
        def ready(text):
            return (ACTIVATED in text and
                    'Timed out waiting for nova-conductor' in text)
        evidence = 'waits for nova-conductor'
    elif runs_fixes:
        def ready(text):
            return (ACTIVATED in text and
                    service_rows(check.work, binary) == 1)
        evidence = 'service record registered'
    else:
        # A service that runs no drop-in (the scheduler) activates
        # nothing, and logs that it has nothing to activate.
        def ready(text):
            return (NOTHING_TO_ACTIVATE % service in text and
                    service_rows(check.work, binary) == 1)
        evidence = 'logs it runs no drop-in; service record registered'
    with check.log(service) as log:
        proc = subprocess.Popen(command + conf, env=check.env, stdout=log,
                                stderr=subprocess.STDOUT)
        started = time.time()
        try:
            up = wait_for(proc, log, ready)
            took = time.time() - started
        finally:
            seconds, status = stop(proc)
    problems = []
    if not up:
        problems.append('not started in %d s (exit %s; see %s)'
                        % (START_TIMEOUT, proc.returncode, log.name))
    # compute is still in its service's constructor, before nova's
    # launcher installs its signal handlers: SIGTERM ends it.
    expected = -signal.SIGTERM if service == 'compute' else 0
    if seconds is None or status != expected:
        problems.append('stop: exit %s after SIGTERM, expected %s within '
                        '%d s' % (status, expected, STOP_TIMEOUT))
    check.record('nova-fixes-%s' % service, not problems,
                 '; '.join(problems) or
                 '%s%s in %.0f s, stopped in %.1f s (exit %s)'
                 % ('fixes logged, ' if runs_fixes else '', evidence, took,
                    seconds, status))


#: The nova-manage command nova-fixes-manage runs in the check: one that
#: reads the API database and sets up logging, so that the fixes are
#: activated first.
MANAGE_COMMAND = ['cell_v2', 'list_cells']


def check_manage(check):
    """nova-fixes-manage runs a nova-manage command with the fixes
    active: exit 0, the activation logged, the command's output.
    """
    conf = ['--config-file', os.path.join(check.work, 'nova.conf')]
    path = script('nova-fixes-manage')
    command = [path] if path else python(
        'import sys; from nova_fixes.cmd import services; '
        'sys.exit(services.manage())')
    with check.log('manage') as log:
        status, stdout, output = run_fresh(
            command + conf + MANAGE_COMMAND, check.env, log)
    problems = []
    if status != 0:
        problems.append('exit %s (see %s)' % (status, log.name))
    if ACTIVATED not in output + stdout:
        problems.append('no "%s" log line' % ACTIVATED)
    if 'cell1' not in stdout:
        problems.append('no cell1 in the output of %s'
                        % ' '.join(MANAGE_COMMAND))
    check.record('nova-fixes-manage', not problems, '; '.join(problems) or
                 'fixes logged, %s listed cell1' % ' '.join(MANAGE_COMMAND))


def mismatch_target(series, service):
    """A replaced (not new) target of the series that ``service`` runs,
    to change its print; None if the service runs none (the scheduler:
    it activates nothing, so there is nothing for it to refuse).
    """
    for fix in nova_fixes.FIXES:
        for target in registry.targets_of(fix, series):
            if not target.new and service in target.services:
                return target.path
    return None


def run(progress=print, keep=False):
    """Every check; returns the Check (counts and results)."""
    series = activation.series_of(activation.nova_version())
    work = tempfile.mkdtemp(prefix='nova-fixes-entry-%s-' % series)
    env = dict(os.environ, OS_NOVA_CONFIG_DIR=work,
               PYTHONPATH=os.pathsep.join(
                   [TREE] + [p for p in [os.environ.get('PYTHONPATH')]
                             if p]))
    env.pop('NOVA_FIXES_MODE', None)
    check = Check(work, env, progress)
    placement = PlacementVersions()
    try:
        prepare(work, placement.port)
        targets = {service: mismatch_target(series, service)
                   for service in ('api',) + SERVICES + ('manage',)}
        if not any(targets.values()):
            raise SetupError('no replaced target for %s' % series)
    except (SetupError, subprocess.TimeoutExpired) as e:
        placement.close()
        check.record('setup', False, str(e))
        return check
    try:
        # Refusals first: they must leave no service record behind.
        for service in ('api',) + SERVICES + ('manage',):
            if targets[service] is None:
                progress('entry points: %s runs no drop-in, so it has no '
                         'fingerprint to refuse' % service)
                continue
            check_refusal(check, service, series, targets[service])
        check_api(check)
        check_api_script(check)
        for service in SERVICES:
            check_service(check, service, targets[service] is not None)
        check_manage(check)
    finally:
        placement.close()
        if keep or check.failed:
            progress('entry points: logs and databases kept in %s' % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return check


#: How long run_fresh_checker lets the whole check take.
CHECK_TIMEOUT = 900


class FreshCheck(object):
    """What run_fresh_checker returns: the counts and results of a check
    run in a process of its own.
    """

    def __init__(self, passed, failed, skipped, results):
        self.passed, self.failed, self.skipped = passed, failed, skipped
        self.results = results


def run_fresh_checker(progress=print, timeout=CHECK_TIMEOUT):
    """Run this check in a fresh process of this Python; a FreshCheck.

    The runners of the series (tools/run_series.py, tools/run_debian.py)
    call this, not run(): they have imported nova by then, and nova 31
    and later monkey patch eventlet when imported, so the threads run()
    starts (the placement version document it serves) would be
    greenthreads blocked by the real poll() of socketserver, and the
    check would never end. A check that does not end within ``timeout``
    seconds, or writes no results, counts as one failure.
    """
    with tempfile.TemporaryDirectory(prefix='nova-fixes-entry-') as tmp:
        out = os.path.join(tmp, 'results.json')
        cmd = [sys.executable, os.path.abspath(__file__), '--json', out]
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  timeout=timeout)
            text, status = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as e:
            text = e.stdout or ''
            if isinstance(text, bytes):
                text = text.decode('utf-8', 'replace')
            status = 'timeout (%d s)' % timeout
        for line in text.splitlines():
            if line.startswith('entry points'):
                progress(line)
        try:
            with open(out) as f:
                results = json.load(f)
        except (OSError, ValueError):
            progress('entry points: the check (%s) ended with status %s '
                     'and no results; its last lines:\n%s'
                     % (' '.join(cmd), status,
                        '\n'.join(text.splitlines()[-20:])))
            return FreshCheck(0, 1, 0, [])
    counts = collections.Counter(r['outcome'] for r in results)
    return FreshCheck(counts['ok'], counts['FAIL'], counts['skip'],
                      results)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--keep', action='store_true',
                   help='keep the configuration, databases and logs')
    p.add_argument('--json', help='write the results to this file')
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    start = time.time()
    check = run(keep=args.keep)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(check.results, f, indent=2)
    print('entry points took %d s' % (time.time() - start))
    print('%d passed, %d failed, %d skipped'
          % (check.passed, check.failed, check.skipped))
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
