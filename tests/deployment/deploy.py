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

"""Nova on real services, as operators run it: the deployment test's rig.

MariaDB (tools/deploy/services.sh) holds the API, cell0, cell1 and
placement databases; RabbitMQ carries RPC; gunicorn serves placement and
the compute API; nova-conductor, nova-scheduler and two nova-compute
services run as processes of their own, through the nova-fixes entry
points (mode ``fixed``) or nova's own (mode ``vanilla``). Everything
listens on 127.0.0.1. Every wait is bounded.
"""

import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import requests

from tests.deployment import stubs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SERVICES = os.path.join(ROOT, 'tools', 'deploy', 'services.sh')
BIN = os.path.dirname(sys.executable)
DB_USER = 'novafixes'
DB_PASSWORD = 'deploy-test'
DATABASES = ('nova_api', 'nova_cell0', 'nova', 'placement')
COMPUTES = ('compute1', 'compute2')
# [orphan_instances]action of each compute.
ORPHAN_ACTION = {'compute1': 'log', 'compute2': 'reap'}
MICROVERSION = '2.96'
TIMEOUT = 120

# The fixed services: the nova-fixes entry points, as their console
# scripts call them.
_FIXED_MAIN = ('import sys; from nova_fixes.cmd import services; '
               'sys.exit(services.%s())')
# The services nova-fixes has an entry point for (fixed mode starts them
# through it; the others through nova's own).
FIXED_SERVICES = tuple(
    name for name in ('compute', 'conductor', 'scheduler')
    if hasattr(importlib.import_module('nova_fixes.cmd.services'), name))
# nova's own, as its console scripts call them.
_VANILLA_MAIN = ('import sys; from nova.cmd import %s as service; '
                 'sys.exit(service.main())')
# The compute services load the test's virt driver (see driver_alias).
_ALIAS = 'import tests.deployment.driver_alias; '


class DeployError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_until(what, check, timeout=TIMEOUT, interval=0.5):
    """Call check() until it returns something true; returns that."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise DeployError('timed out after %ss waiting for %s'
                              % (timeout, what))
        time.sleep(interval)


def services(action, which=''):
    """tools/deploy/services.sh ACTION [WHICH]."""
    out = subprocess.run(['bash', SERVICES, action] + ([which] if which
                                                        else []),
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0 and action != 'status':
        raise DeployError('services.sh %s %s: %s' % (
            action, which, (out.stderr or out.stdout).strip()))
    return out.returncode == 0


def sql(statement, database=None):
    state = os.environ.get('NOVA_FIXES_DEPLOY_STATE',
                           '/var/tmp/nova-fixes-deploy')
    cmd = ['mariadb', '--no-defaults', '-uroot', '-N', '-B',
           '--socket=%s/mariadb-run/mysqld.sock' % state, '-e', statement]
    if database:
        cmd.append(database)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise DeployError('SQL %r: %s' % (statement, out.stderr.strip()))
    return [line.split('\t') for line in out.stdout.splitlines()]


class Deployment(object):

    def __init__(self, mode, workdir=None):
        assert mode in ('vanilla', 'fixed')
        self.mode = mode
        self.dir = workdir or tempfile.mkdtemp(prefix='nova-fixes-deploy-')
        self.gates = os.path.join(self.dir, 'gates')
        self.logs = os.path.join(self.dir, 'logs')
        self.procs = {}
        self.stubs = None
        self.placement_port = free_port()
        self.api_port = free_port()
        self.api_url = 'http://127.0.0.1:%d' % self.api_port
        self.placement_url = 'http://127.0.0.1:%d' % self.placement_port
        self.session = requests.Session()
        self.session.headers.update({
            'X-Auth-Token': 'admin:admin',
            'X-User-Id': 'admin', 'X-Project-Id': 'admin',
            'X-Roles': 'admin,member,reader',
            'X-OpenStack-Nova-API-Version': MICROVERSION,
            'OpenStack-API-Version': 'compute %s' % MICROVERSION,
        })
        self.placement = requests.Session()
        self.placement.headers.update({
            'X-Auth-Token': 'admin',
            'OpenStack-API-Version': 'placement 1.39'})

    # -- databases and configuration -----------------------------------

    def db_url(self, name):
        return 'mysql+pymysql://%s:%s@127.0.0.1/%s?charset=utf8' % (
            DB_USER, DB_PASSWORD, name)

    def create_databases(self):
        statements = []
        for name in DATABASES:
            statements.append('DROP DATABASE IF EXISTS %s; '
                              'CREATE DATABASE %s CHARACTER SET utf8;'
                              % (name, name))
        statements.append(
            "CREATE USER IF NOT EXISTS '{u}'@'127.0.0.1' IDENTIFIED BY '{p}';"
            "CREATE USER IF NOT EXISTS '{u}'@'localhost' IDENTIFIED BY '{p}';"
            .format(u=DB_USER, p=DB_PASSWORD))
        for name in DATABASES:
            statements.append(
                "GRANT ALL ON {d}.* TO '{u}'@'127.0.0.1';"
                "GRANT ALL ON {d}.* TO '{u}'@'localhost';".format(
                    d=name, u=DB_USER))
        sql(' '.join(statements))

    def write_configs(self):
        os.makedirs(self.gates, exist_ok=True)
        os.makedirs(self.logs, exist_ok=True)
        transport = 'rabbit://guest:guest@127.0.0.1:%s/' % os.environ.get(
            'NOVA_FIXES_AMQP_PORT', '5672')
        self.transport_url = transport
        stub = self.stubs.url
        nova = """[DEFAULT]
transport_url = {transport}
state_path = {dir}/state
my_ip = 127.0.0.1
debug = False
rpc_response_timeout = 20
long_rpc_timeout = 40
heal_instance_info_cache_interval = -1
instance_usage_audit = False
periodic_fuzzy_delay = 0
[oslo_messaging_rabbit]
heartbeat_timeout_threshold = 20
kombu_reconnect_delay = 1
rabbit_retry_interval = 1
rabbit_retry_backoff = 1
rabbit_interval_max = 2
[api_database]
connection = {api}
[database]
connection = {cell1}
[wsgi]
api_paste_config = {dir}/api-paste.ini
[placement]
auth_type = admin_token
endpoint = {placement}
token = admin
region_name = RegionOne
[neutron]
auth_type = admin_token
endpoint = {stub}
token = admin
endpoint_override = {stub}
[glance]
endpoint_override = {stub}
num_retries = 0
[scheduler]
discover_hosts_in_cells_interval = -1
[quota]
instances = 100
cores = 400
ram = 1000000
[oslo_concurrency]
lock_path = {dir}/locks
[os_vif_linux_bridge]
use_ipv6 = False
""".format(transport=transport, dir=self.dir, api=self.db_url('nova_api'),
           cell1=self.db_url('nova'), placement=self.placement_url,
           stub=stub)
        self.nova_conf = os.path.join(self.dir, 'nova.conf')
        with open(self.nova_conf, 'w') as f:
            f.write(nova)
        for host in COMPUTES:
            with open(os.path.join(self.dir, '%s.conf' % host), 'w') as f:
                f.write("""[DEFAULT]
host = {host}
compute_driver = deploy_gated.GatedFakeDriver
state_path = {dir}/state-{host}
instances_path = {dir}/state-{host}/instances
[orphan_instances]
action = {action}
poll_interval = 2
grace_period = 0
""".format(host=host, dir=self.dir, action=ORPHAN_ACTION[host]))
        os.makedirs(os.path.join(self.dir, 'placement'), exist_ok=True)
        with open(os.path.join(self.dir, 'placement', 'placement.conf'),
                  'w') as f:
            f.write("""[DEFAULT]
debug = False
[api]
auth_strategy = noauth2
[placement_database]
connection = {db}
""".format(db=self.db_url('placement')))
        # nova no longer has noauth2: its own paste pipeline without the
        # keystone token check, the request context made from the
        # X-User-Id / X-Project-Id / X-Roles headers the test sends (as
        # behind a trusted proxy).
        with open(os.path.join(self._nova_etc(), 'api-paste.ini')) as src:
            paste = src.read()
        if ' authtoken keystonecontext ' not in paste:
            raise DeployError("nova's api-paste.ini has no authtoken filter "
                              "before keystonecontext")
        with open(os.path.join(self.dir, 'api-paste.ini'), 'w') as f:
            f.write(paste.replace(' authtoken keystonecontext ',
                                  ' keystonecontext '))

    @staticmethod
    def _nova_etc():
        return os.path.join(sys.prefix, 'etc', 'nova')

    def _env(self):
        env = dict(os.environ)
        env['PYTHONPATH'] = ROOT
        env['NOVA_FIXES_DEPLOY_GATES'] = self.gates
        env['OS_NOVA_CONFIG_DIR'] = self.dir
        env['OS_NOVA_CONFIG_FILES'] = 'api-paste.ini;nova.conf'
        env['OS_PLACEMENT_CONFIG_DIR'] = os.path.join(self.dir, 'placement')
        env.pop('NOVA_FIXES_MODE', None)
        return env

    def run(self, *argv, check=True, timeout=TIMEOUT):
        out = subprocess.run(argv, capture_output=True, text=True,
                             env=self._env(), cwd=self.dir, timeout=timeout)
        if check and out.returncode != 0:
            raise DeployError('%s exited %s: %s' % (
                ' '.join(argv), out.returncode,
                (out.stderr or out.stdout).strip()[-2000:]))
        return out

    def manage(self, *args, **kwargs):
        return self.run(os.path.join(BIN, 'nova-manage'), '--config-file',
                        self.nova_conf, *args, **kwargs)

    def sync(self):
        self.run(os.path.join(BIN, 'placement-manage'), '--config-dir',
                 os.path.join(self.dir, 'placement'), 'db', 'sync')
        self.manage('api_db', 'sync')
        self.manage('cell_v2', 'map_cell0', '--database_connection',
                    self.db_url('nova_cell0'))
        self.manage('cell_v2', 'create_cell', '--name', 'cell1',
                    '--database_connection', self.db_url('nova'),
                    '--transport-url', self.transport_url)
        self.manage('db', 'sync')

    # -- processes --------------------------------------------------------

    def _spawn(self, name, argv):
        log = open(os.path.join(self.logs, name + '.log'), 'a')
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=self._env(),
                                cwd=self.dir, start_new_session=True)
        log.close()
        self.procs[name] = proc
        return proc

    def log(self, name):
        with open(os.path.join(self.logs, name + '.log'),
                  errors='replace') as f:
            return f.read()

    def service_argv(self, service, host=None):
        conf = ['--config-file', self.nova_conf]
        if host:
            conf += ['--config-file', os.path.join(self.dir, host + '.conf')]
        alias = _ALIAS if service == 'compute' else ''
        if self.mode == 'fixed' and service in FIXED_SERVICES:
            return [sys.executable, '-c', alias + _FIXED_MAIN % service] + conf
        if alias:
            return [sys.executable, '-c', alias + _VANILLA_MAIN % service
                    ] + conf
        return [os.path.join(BIN, 'nova-' + service)] + conf

    def gunicorn(self, name, app, port):
        return self._spawn(name, [
            sys.executable, '-m', 'tests.deployment.serve',
            '--bind', '127.0.0.1:%d' % port, '--no-control-socket',
            '--workers', '1', '--threads', '8', '--timeout', '300',
            '--graceful-timeout', '5', '--access-logfile', '-', app])

    def api_app(self):
        if self.mode == 'fixed':
            return 'nova_fixes.wsgi.osapi_compute:application'
        return 'nova.wsgi.osapi_compute:application'

    def start_placement(self):
        self.gunicorn('placement', 'tests.deployment.placement_app:'
                      'application', self.placement_port)
        wait_until('placement', lambda: self._answers(self.placement_url))

    def start_api(self):
        self.gunicorn('api', self.api_app(), self.api_port)
        wait_until('the compute API', lambda: self._answers(self.api_url))

    def _answers(self, url):
        try:
            return requests.get(url + '/', timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def start_service(self, service, host=None):
        name = host or service
        proc = self._spawn(name, self.service_argv(service, host))
        return proc

    def services_up(self, names):
        def up():
            body = self.get('/os-services')['services']
            state = {(s['binary'], s['host']): s['state'] for s in body}
            return all(state.get(n) == 'up' for n in names)
        return up

    @staticmethod
    def all_services():
        return ([('nova-conductor', socket.gethostname()),
                 ('nova-scheduler', socket.gethostname())] +
                [('nova-compute', h) for h in COMPUTES])

    def start(self):
        self.stubs = stubs.StubServer()
        self.stubs.start()
        self.create_databases()
        self.write_configs()
        self.sync()
        # Placement first (the computes report to it as they start), then
        # everything else at once.
        self.start_placement()
        self.gunicorn('api', self.api_app(), self.api_port)
        self.start_service('conductor')
        self.start_service('scheduler')
        for host in COMPUTES:
            self.start_service('compute', host)
        wait_until('the compute API', lambda: self._answers(self.api_url))
        wait_until('the computes to register with placement',
                   lambda: len(self.placement.get(
                       self.placement_url + '/resource_providers'
                   ).json()['resource_providers']) == len(COMPUTES))
        self.manage('cell_v2', 'discover_hosts')
        wait_until('every service up', self.services_up(
            self.all_services()))
        self.flavor = self.post('/flavors', {'flavor': {
            'name': 'tiny', 'ram': 64, 'vcpus': 1, 'disk': 1}})['flavor']
        # A first server, built and deleted: the deployment works, and the
        # compute API worker has made its placement client (whose version
        # discovery, on a worker's first call, fails outside any of
        # nova's error handling while placement is down).
        uuid = self.boot(1, name='smoke', host=COMPUTES[0])[0]
        self.wait_status(uuid, ('ACTIVE',))
        self.delete(uuid)
        self.wait_gone(uuid)

    def stop_process(self, name, timeout=20):
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout)

    def stop(self):
        for name in list(self.procs):
            self.stop_process(name)
        if self.stubs:
            self.stubs.stop()
            self.stubs = None

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the compute API and placement -------------------------------------

    def request(self, method, path, body=None, ok=(200, 201, 202, 204)):
        resp = self.session.request(method, self.api_url + '/v2.1' + path,
                                    json=body, timeout=60)
        if resp.status_code not in ok:
            raise DeployError('%s %s: %s %s' % (method, path,
                                                resp.status_code, resp.text))
        return resp

    def get(self, path):
        return self.request('GET', path).json()

    def post(self, path, body):
        resp = self.request('POST', path, body)
        return resp.json() if resp.content else None

    def boot(self, count, name='server', host=None):
        """Servers of one request (on ``host`` if given); returns their
        ids.
        """
        body = {'server': {
            'name': name, 'imageRef': stubs.IMAGE_ID,
            'flavorRef': self.flavor['id'], 'networks': 'none',
            'min_count': count, 'max_count': count,
            'return_reservation_id': True}}
        if host:
            body['server']['availability_zone'] = 'nova:%s' % host
        rid = self.post('/servers', body)['reservation_id']

        def listed():
            found = self.get('/servers?reservation_id=%s' % rid)['servers']
            return [s['id'] for s in found] if len(found) == count else None
        ids = wait_until('%d servers of %s' % (count, rid), listed)
        return ids

    def server(self, uuid):
        resp = self.request('GET', '/servers/%s' % uuid, ok=(200, 404))
        return resp.json()['server'] if resp.status_code == 200 else None

    def wait_status(self, uuid, statuses, timeout=TIMEOUT):
        def check():
            s = self.server(uuid)
            return s if s and s['status'] in statuses else None
        return wait_until('server %s in %s' % (uuid, statuses), check,
                          timeout)

    def delete(self, uuid, ok=(204,)):
        return self.request('DELETE', '/servers/%s' % uuid, ok=ok)

    def wait_gone(self, uuid, timeout=TIMEOUT):
        wait_until('server %s deleted' % uuid,
                   lambda: self.server(uuid) is None, timeout)

    def allocations(self, consumer):
        return self.placement.get(
            '%s/allocations/%s' % (self.placement_url, consumer),
            timeout=30).json()['allocations']

    def usages(self):
        """{provider uuid: {resource class: used}} with nonzero usage."""
        out = {}
        rps = self.placement.get(self.placement_url + '/resource_providers',
                                 timeout=30).json()['resource_providers']
        for rp in rps:
            used = self.placement.get(
                '%s/resource_providers/%s/usages' % (
                    self.placement_url, rp['uuid']),
                timeout=30).json()['usages']
            used = {rc: n for rc, n in used.items() if n}
            if used:
                out[rp['uuid']] = used
        return out

    def consumers_with_allocations(self):
        """Every consumer holding allocations, by the placement DB."""
        rows = sql('SELECT DISTINCT consumer_id FROM allocations',
                   'placement')
        return sorted(r[0] for r in rows)

    def mapping_queued_for_delete(self, uuid):
        rows = sql("SELECT queued_for_delete FROM instance_mappings "
                   "WHERE instance_uuid = '%s'" % uuid, 'nova_api')
        return rows[0][0] == '1' if rows else None

    def gate(self, name):
        return os.path.join(self.gates, name)

    def touch(self, name, content=''):
        with open(self.gate(name), 'w') as f:
            f.write(content)

    def wait_file(self, name, timeout=TIMEOUT):
        wait_until(name, lambda: os.path.exists(self.gate(name)), timeout,
                   interval=0.1)


def dump(obj):
    return json.dumps(obj, sort_keys=True)
