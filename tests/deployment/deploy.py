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

MariaDB (tools/deploy/services.sh) holds the databases; RabbitMQ carries
RPC; gunicorn serves placement and the compute API; nova-conductor,
nova-scheduler and two nova-compute services run as processes of their
own, through the nova-fixes entry points (mode ``fixed``) or nova's own
(mode ``vanilla``). Everything listens on 127.0.0.1. Every wait is
bounded. Two layouts:

``single-cell``
    one cell: the API, cell0, cell1 and placement databases, one
    conductor with all of them, both computes in cell1.
``superconductor``
    nova's recommended multi-cell layout: a superconductor with the API
    database and cell0 on RabbitMQ's ``/`` virtual host (with the
    scheduler and the compute API); two cells, each with its own
    database, its own virtual host and its own conductor configured
    without ``[api_database]``; one compute in each cell, whose
    configuration has no database at all (nova-compute forbids database
    access anyway); cross-cell resize allowed by policy.
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
MICROVERSION = '2.96'
TIMEOUT = 120


class Layout(object):
    """Where the databases, virtual hosts and services of a deployment
    go.

    :param cells: {cell name: its database}
    :param computes: {host: its cell}
    :param orphans: {host: ([orphan_instances]action, grace_period)}
    :param separate: a conductor per cell, without the API database, and
        a superconductor; else one conductor with every database
    """

    def __init__(self, name, cells, computes, orphans, separate):
        self.name = name
        self.cells = cells
        self.computes = computes
        self.orphans = orphans
        self.separate = separate
        self.databases = (('nova_api', 'nova_cell0') +
                          tuple(cells.values()) + ('placement',))


LAYOUTS = {
    'single-cell': Layout(
        'single-cell', {'cell1': 'nova'},
        {'compute1': 'cell1', 'compute2': 'cell1'},
        {'compute1': ('log', 0), 'compute2': ('reap', 0)}, False),
    'superconductor': Layout(
        'superconductor', {'cell1': 'nova_cell1', 'cell2': 'nova_cell2'},
        {'compute1': 'cell1', 'compute2': 'cell2'},
        {'compute1': ('reap', 4), 'compute2': ('reap', 4)}, True),
}
# The policy rule that lets the admin resize across cells.
CROSS_CELL_RULE = 'compute:servers:resize:cross_cell'

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


def services(action, *which):
    """tools/deploy/services.sh ACTION [WHICH...]."""
    out = subprocess.run(['bash', SERVICES, action] + list(which),
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0 and action != 'status':
        raise DeployError('services.sh %s %s: %s' % (
            action, ' '.join(which), (out.stderr or out.stdout).strip()))
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

    def __init__(self, mode, workdir=None, layout='single-cell'):
        assert mode in ('vanilla', 'fixed')
        self.mode = mode
        self.layout = LAYOUTS[layout]
        self.computes = tuple(sorted(self.layout.computes))
        self.dir = workdir or tempfile.mkdtemp(prefix='nova-fixes-deploy-')
        self.gates = os.path.join(self.dir, 'gates')
        self.logs = os.path.join(self.dir, 'logs')
        self.procs = {}
        self.stubs = None
        self.placement_port = free_port()
        self.api_port = free_port()
        self.api_url = 'http://127.0.0.1:%d' % self.api_port
        self.placement_url = 'http://127.0.0.1:%d' % self.placement_port
        # A connection for each request: gunicorn closes an idle
        # keep-alive connection after a few seconds, and a request sent
        # on one it is closing meanwhile fails with "Connection reset by
        # peer" (it did once, after a scenario's 30 s wait).
        self.session = requests.Session()
        self.session.headers.update({
            'Connection': 'close',
            'X-Auth-Token': 'admin:admin',
            'X-User-Id': 'admin', 'X-Project-Id': 'admin',
            'X-Roles': 'admin,member,reader',
            'X-OpenStack-Nova-API-Version': MICROVERSION,
            'OpenStack-API-Version': 'compute %s' % MICROVERSION,
        })
        self.placement = requests.Session()
        self.placement.headers.update({
            'Connection': 'close',
            'X-Auth-Token': 'admin',
            'OpenStack-API-Version': 'placement 1.39'})

    # -- databases and configuration -----------------------------------

    def db_url(self, name):
        return 'mysql+pymysql://%s:%s@127.0.0.1/%s?charset=utf8' % (
            DB_USER, DB_PASSWORD, name)

    def create_databases(self):
        statements = []
        for name in self.layout.databases:
            statements.append('DROP DATABASE IF EXISTS %s; '
                              'CREATE DATABASE %s CHARACTER SET utf8;'
                              % (name, name))
        statements.append(
            "CREATE USER IF NOT EXISTS '{u}'@'127.0.0.1' IDENTIFIED BY '{p}';"
            "CREATE USER IF NOT EXISTS '{u}'@'localhost' IDENTIFIED BY '{p}';"
            .format(u=DB_USER, p=DB_PASSWORD))
        for name in self.layout.databases:
            statements.append(
                "GRANT ALL ON {d}.* TO '{u}'@'127.0.0.1';"
                "GRANT ALL ON {d}.* TO '{u}'@'localhost';".format(
                    d=name, u=DB_USER))
        sql(' '.join(statements))

    def transport(self, vhost=''):
        return 'rabbit://guest:guest@127.0.0.1:%s/%s' % (
            os.environ.get('NOVA_FIXES_AMQP_PORT', '5672'), vhost)

    def write_configs(self):
        os.makedirs(self.gates, exist_ok=True)
        os.makedirs(self.logs, exist_ok=True)
        self.transport_url = self.transport()
        layout = self.layout
        # What every service shares; the transport and the databases come
        # per service below.
        common = """[DEFAULT]
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
""".format(dir=self.dir, placement=self.placement_url,
           stub=self.stubs.url)
        # The top: the API, the scheduler, nova-manage and the (super)
        # conductor. In the superconductor layout its [database] is cell0,
        # as nova's documentation configures it.
        top = """{common}[DEFAULT]
transport_url = {transport}
[api_database]
connection = {api}
[database]
connection = {db}
""".format(common=common, transport=self.transport_url,
           api=self.db_url('nova_api'),
           db=self.db_url('nova_cell0' if layout.separate else
                          layout.cells['cell1']))
        if layout.separate:
            policy = os.path.join(self.dir, 'policy.yaml')
            with open(policy, 'w') as f:
                f.write('"%s": "rule:admin_api"\n' % CROSS_CELL_RULE)
            top += '[oslo_policy]\npolicy_file = %s\n' % policy
        self.nova_conf = self._write('nova.conf', top)
        self.cell_confs = {}
        if layout.separate:
            self._write('superconductor.conf',
                        '[DEFAULT]\nhost = superconductor\n')
            for cell, db in sorted(layout.cells.items()):
                # What the cell's services share: its own virtual host and
                # no database; the cell conductor adds its cell database.
                self.cell_confs[cell] = self._write(
                    '%s.conf' % cell, '%s[DEFAULT]\ntransport_url = %s\n'
                    % (common, self.transport(cell)))
                self._write('conductor-%s.conf' % cell,
                            '[DEFAULT]\nhost = conductor-%s\n'
                            '[database]\nconnection = %s\n'
                            % (cell, self.db_url(db)))
        for host in self.computes:
            action, grace = layout.orphans[host]
            self._write('%s.conf' % host, """[DEFAULT]
host = {host}
compute_driver = deploy_gated.GatedFakeDriver
state_path = {dir}/state-{host}
instances_path = {dir}/state-{host}/instances
[orphan_instances]
action = {action}
poll_interval = 2
grace_period = {grace}
""".format(host=host, dir=self.dir, action=action, grace=grace))
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

    def _write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

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
        if self.layout.separate:
            env['NOVA_FIXES_DEPLOY_KEEP_STOPPED'] = '1'
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
        for cell, db in sorted(self.layout.cells.items()):
            transport = (self.transport(cell) if self.layout.separate
                         else self.transport_url)
            self.manage('cell_v2', 'create_cell', '--name', cell,
                        '--database_connection', self.db_url(db),
                        '--transport-url', transport)
        # The top's [database] and cell0; then each cell's own database,
        # from the configuration of its conductor (which has no API
        # database: --local_cell).
        self.manage('db', 'sync')
        for cell in sorted(self.cell_confs):
            self.run(os.path.join(BIN, 'nova-manage'), '--config-file',
                     self.cell_confs[cell], '--config-file',
                     os.path.join(self.dir, 'conductor-%s.conf' % cell),
                     'db', 'sync', '--local_cell')

    def archive(self):
        """nova-manage db archive_deleted_rows --all-cells, until nothing
        is left to archive (exit 1: rows were archived; 0: none were).
        """
        out = self.manage('db', 'archive_deleted_rows', '--all-cells',
                          '--until-complete', check=False)
        if out.returncode not in (0, 1):
            raise DeployError('archive_deleted_rows exited %s: %s' % (
                out.returncode, (out.stderr or out.stdout)[-2000:]))
        return out.stdout

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

    def service_argv(self, service, host=None, cell=None):
        """The command line of a service; ``host`` for a compute, ``cell``
        for a cell conductor (superconductor layout).
        """
        def conf_of(name):
            return ['--config-file', os.path.join(self.dir, name + '.conf')]
        if cell:
            conf = conf_of(cell) + conf_of('conductor-' + cell)
        elif host and self.layout.separate:
            conf = conf_of(self.layout.computes[host]) + conf_of(host)
        elif host:
            conf = conf_of('nova') + conf_of(host)
        elif service == 'conductor' and self.layout.separate:
            conf = conf_of('nova') + conf_of('superconductor')
        else:
            conf = conf_of('nova')
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

    def start_service(self, service, host=None, cell=None):
        name = host or ('%s-%s' % (service, cell) if cell else service)
        proc = self._spawn(name, self.service_argv(service, host, cell))
        return proc

    def services_up(self, names):
        def up():
            body = self.get('/os-services')['services']
            state = {(s['binary'], s['host']): s['state'] for s in body}
            return all(state.get(n) == 'up' for n in names)
        return up

    def all_services(self):
        conductors = ([('nova-conductor', 'superconductor')] +
                      [('nova-conductor', 'conductor-%s' % cell)
                       for cell in sorted(self.layout.cells)]
                      if self.layout.separate else
                      [('nova-conductor', socket.gethostname())])
        return (conductors +
                [('nova-scheduler', socket.gethostname())] +
                [('nova-compute', h) for h in self.computes])

    def start(self):
        # A cross-cell move needs the network API's extended port
        # bindings (the servers have no port to bind).
        self.stubs = stubs.StubServer(
            ('binding-extended',) if self.layout.separate else ())
        self.stubs.start()
        self.create_databases()
        if self.layout.separate:
            services('vhosts', *sorted(self.layout.cells))
        self.write_configs()
        self.sync()
        # Placement first (the computes report to it as they start), then
        # everything else at once.
        self.start_placement()
        self.gunicorn('api', self.api_app(), self.api_port)
        self.start_service('conductor')
        if self.layout.separate:
            for cell in sorted(self.layout.cells):
                self.start_service('conductor', cell=cell)
        self.start_service('scheduler')
        for host in self.computes:
            self.start_service('compute', host)
        wait_until('the compute API', lambda: self._answers(self.api_url))
        wait_until('the computes to register with placement',
                   lambda: len(self.placement.get(
                       self.placement_url + '/resource_providers'
                   ).json()['resource_providers']) == len(self.computes))
        self.manage('cell_v2', 'discover_hosts')
        wait_until('every service up', self.services_up(
            self.all_services()))
        self.flavor = self.post('/flavors', {'flavor': {
            'name': 'tiny', 'ram': 64, 'vcpus': 1, 'disk': 1}})['flavor']
        # A first server, built and deleted: the deployment works, and the
        # compute API worker has made its placement client (whose version
        # discovery, on a worker's first call, fails outside any of
        # nova's error handling while placement is down).
        for host in (self.computes if self.layout.separate else
                     self.computes[:1]):
            uuid = self.boot(1, name='smoke', host=host)[0]
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

    def provider(self, host):
        """The uuid of the resource provider of ``host``."""
        rps = self.placement.get(
            self.placement_url + '/resource_providers?name=' + host,
            timeout=30).json()['resource_providers']
        if len(rps) != 1:
            raise DeployError('%d resource providers named %s'
                              % (len(rps), host))
        return rps[0]['uuid']

    def copies(self, uuid):
        """{cell: (vm_state, task_state, hidden, host)} of the live (not
        deleted) instance records of ``uuid``, read from each cell's
        database.
        """
        out = {}
        for cell, db in sorted(self.layout.cells.items()):
            rows = sql("SELECT vm_state, IFNULL(task_state, ''), hidden, "
                       "IFNULL(host, '') FROM instances WHERE uuid = '%s' "
                       "AND deleted = 0" % uuid, db)
            if rows:
                out[cell] = tuple(rows[0])
        return out

    def records(self, uuid):
        """How many instance records (deleted or not) and instance
        mappings of ``uuid`` the databases still hold.
        """
        n = sum(int(sql("SELECT COUNT(*) FROM instances WHERE uuid = '%s'"
                        % uuid, db)[0][0])
                for db in self.layout.cells.values())
        m = int(sql("SELECT COUNT(*) FROM instance_mappings WHERE "
                    "instance_uuid = '%s'" % uuid, 'nova_api')[0][0])
        return n, m

    def guests(self, host):
        """The UUIDs of the guests ``host``'s hypervisor lists: those the
        driver holds (running or stopped) and those added out of band.
        """
        found = set()
        for name in ('running', 'guests'):
            try:
                with open(self.gate('%s.%s' % (host, name))) as f:
                    found.update(line.strip() for line in f
                                 if line.strip())
            except FileNotFoundError:
                pass
        return found

    def add_guest(self, host, uuid):
        """A guest of ``uuid`` that ``host``'s hypervisor lists whatever
        nova does (out of band).
        """
        with open(self.gate('%s.guests' % host), 'a') as f:
            f.write(uuid + '\n')

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
