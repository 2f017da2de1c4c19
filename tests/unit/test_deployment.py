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

"""Unit tests of the deployment test's rig: its layouts' configurations,
the image and network stub, the gated driver's guests and the report.
"""

import configparser
import contextlib
import io
import os
from unittest import mock

import fixtures
import requests
import testtools

from tests.deployment import deploy
from tests.deployment import run
from tests.deployment import stubs


class _FakeStubs(object):
    url = 'http://127.0.0.1:9'


def _conf(path):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(path)
    return parser


class LayoutConfigTest(testtools.TestCase):

    def _deployment(self, layout):
        workdir = self.useFixture(fixtures.TempDir()).path
        # nova's api-paste.ini as a pip-installed nova has it under
        # sys.prefix; a distribution's nova has it elsewhere (Debian:
        # /etc/nova), and these tests need none of it.
        etc = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(etc, 'api-paste.ini'), 'w') as f:
            f.write('[composite:osapi_compute]\n'
                    'keystone = cors request_id authtoken keystonecontext '
                    'osapi_compute_app_v21\n')
        self.useFixture(fixtures.MockPatchObject(
            deploy.Deployment, '_nova_etc', return_value=etc))
        d = deploy.Deployment('fixed', workdir=workdir, layout=layout)
        d.stubs = _FakeStubs()
        d.write_configs()
        return d

    def _files(self, argv):
        return [os.path.basename(argv[i + 1]) for i, a in enumerate(argv)
                if a == '--config-file']

    def test_superconductor_cell_conductors_have_no_api_database(self):
        d = self._deployment('superconductor')
        for cell in ('cell1', 'cell2'):
            argv = d.service_argv('conductor', cell=cell)
            files = self._files(argv)
            self.assertEqual(['%s.conf' % cell, 'conductor-%s.conf' % cell],
                             files)
            merged = configparser.ConfigParser(strict=False,
                                               interpolation=None)
            merged.read([os.path.join(d.dir, f) for f in files])
            self.assertFalse(merged.has_section('api_database'))
            self.assertIn('/nova_%s?' % cell,
                          merged.get('database', 'connection'))
            self.assertTrue(merged.get('DEFAULT', 'transport_url')
                            .endswith('/%s' % cell))
            self.assertEqual('conductor-%s' % cell,
                             merged.get('DEFAULT', 'host'))

    def test_superconductor_computes_have_no_database(self):
        d = self._deployment('superconductor')
        for host, cell in (('compute1', 'cell1'), ('compute2', 'cell2')):
            files = self._files(d.service_argv('compute', host=host))
            self.assertEqual(['%s.conf' % cell, '%s.conf' % host], files)
            merged = configparser.ConfigParser(strict=False,
                                               interpolation=None)
            merged.read([os.path.join(d.dir, f) for f in files])
            self.assertFalse(merged.has_section('api_database'))
            self.assertFalse(merged.has_section('database'))
            self.assertEqual('reap', merged.get('orphan_instances',
                                                'action'))

    def test_superconductor_top(self):
        d = self._deployment('superconductor')
        files = self._files(d.service_argv('conductor'))
        self.assertEqual(['nova.conf', 'superconductor.conf'], files)
        top = _conf(d.nova_conf)
        self.assertIn('/nova_api?', top.get('api_database', 'connection'))
        self.assertIn('/nova_cell0?', top.get('database', 'connection'))
        self.assertTrue(top.get('DEFAULT', 'transport_url').endswith(':%s/'
                        % os.environ.get('NOVA_FIXES_AMQP_PORT', '5672')))
        with open(top.get('oslo_policy', 'policy_file')) as f:
            self.assertIn(deploy.CROSS_CELL_RULE, f.read())
        self.assertEqual(['nova.conf'],
                         self._files(d.service_argv('scheduler')))
        self.assertEqual(
            [('nova-conductor', 'superconductor'),
             ('nova-conductor', 'conductor-cell1'),
             ('nova-conductor', 'conductor-cell2')],
            d.all_services()[:3])

    def test_single_cell_is_one_conductor_with_every_database(self):
        d = self._deployment('single-cell')
        self.assertEqual(('nova_api', 'nova_cell0', 'nova', 'placement'),
                         d.layout.databases)
        top = _conf(d.nova_conf)
        self.assertIn('/nova?', top.get('database', 'connection'))
        self.assertFalse(top.has_section('oslo_policy'))
        self.assertEqual(['nova.conf', 'compute2.conf'],
                         self._files(d.service_argv('compute',
                                                    host='compute2')))
        self.assertEqual(['nova.conf'],
                         self._files(d.service_argv('conductor')))
        self.assertNotIn('NOVA_FIXES_DEPLOY_KEEP_STOPPED', d._env())

    def test_unknown_layout(self):
        self.assertRaises(KeyError, deploy.Deployment, 'fixed',
                          workdir='/nonexistent', layout='cells-v1')


class StubImagesTest(testtools.TestCase):

    def setUp(self):
        super(StubImagesTest, self).setUp()
        self.server = stubs.StubServer(('binding-extended',))
        self.server.start()
        self.addCleanup(self.server.stop)
        self.url = self.server.url

    def test_snapshot_image_lifecycle(self):
        resp = requests.post(self.url + '/v2/images', json={
            'name': 'snap', 'instance_uuid': 'u1', 'min_ram': 64,
            'odd': {'not': 'a string'}}, timeout=5)
        self.assertEqual(201, resp.status_code)
        image = resp.json()
        self.assertEqual('snap', image['name'])
        self.assertEqual('u1', image['instance_uuid'])
        self.assertEqual(64, image['min_ram'])
        self.assertNotIn('odd', image)
        self.assertEqual('queued', image['status'])
        path = self.url + '/v2/images/' + image['id']
        self.assertEqual(image, requests.get(path, timeout=5).json())
        resp = requests.patch(path, json=[
            {'op': 'add', 'path': '/image_type', 'value': 'snapshot'}],
            timeout=5)
        self.assertEqual('snapshot', resp.json()['image_type'])
        self.assertEqual(204, requests.delete(path, timeout=5).status_code)
        self.assertEqual(404, requests.delete(path, timeout=5).status_code)
        self.assertEqual(404, requests.get(path, timeout=5).status_code)
        self.assertEqual([image['id']], self.server.created)
        self.assertEqual([image['id']], self.server.deleted)
        self.assertEqual([], self.server.unexpected)

    def test_unknown_calls_are_recorded(self):
        path = '/v2/images/00000000-0000-0000-0000-000000000000'
        self.assertEqual(404, requests.delete(self.url + path,
                                              timeout=5).status_code)
        self.assertEqual(404, requests.post(self.url + '/v2.0/ports',
                                            json={}, timeout=5).status_code)
        self.assertEqual(['DELETE ' + path, 'POST /v2.0/ports'],
                         self.server.unexpected)

    def test_the_base_image_and_extensions(self):
        image = requests.get(self.url + '/v2/images/' + stubs.IMAGE_ID,
                             timeout=5).json()
        self.assertEqual(stubs.IMAGE_ID, image['id'])
        ext = requests.get(self.url + '/v2.0/extensions', timeout=5).json()
        self.assertEqual(['binding-extended'],
                         [e['alias'] for e in ext['extensions']])
        plain = stubs.StubServer()
        plain.start()
        self.addCleanup(plain.stop)
        self.assertEqual({'extensions': []}, requests.get(
            plain.url + '/v2.0/extensions', timeout=5).json())


class _Flavor(object):
    vcpus = 1
    memory_mb = 64
    root_gb = 1


class _Instance(object):

    def __init__(self, uuid):
        self.uuid = uuid
        self.name = 'instance-' + uuid
        self.flavor = _Flavor()


class GatedDriverGuestsTest(testtools.TestCase):

    def _driver(self, keep):
        from tests.deployment import virt
        gates = self.useFixture(fixtures.TempDir()).path
        env = {'NOVA_FIXES_DEPLOY_GATES': gates}
        if keep:
            env['NOVA_FIXES_DEPLOY_KEEP_STOPPED'] = '1'
        self.useFixture(fixtures.EnvironmentVariable(
            'NOVA_FIXES_DEPLOY_KEEP_STOPPED'))
        for name, value in env.items():
            self.useFixture(fixtures.EnvironmentVariable(name, value))
        driver = virt.GatedFakeDriver(mock.Mock())
        driver.init_host('h1')
        return driver, os.path.join(gates, 'h1.running')

    def _running(self, path):
        with open(path) as f:
            return f.read().split()

    def test_kept_guest_listed_stopped_until_its_disks_go(self):
        from nova.compute import power_state
        driver, running = self._driver(keep=True)
        self.assertEqual([], self._running(running))
        inst = _Instance('u1')
        driver.spawn(None, inst, None, None, None, None)
        self.assertEqual(['u1'], self._running(running))
        driver.destroy(None, inst, None, destroy_disks=False)
        self.assertEqual(['u1'], driver.list_instance_uuids())
        self.assertEqual(['u1'], self._running(running))
        self.assertEqual(power_state.SHUTDOWN,
                         driver.get_info(inst).state)
        self.assertTrue(driver.instance_exists(inst))
        driver.cleanup(None, inst, None, destroy_disks=True)
        self.assertEqual([], driver.list_instance_uuids())
        self.assertEqual([], self._running(running))

    def test_revert_brings_a_kept_guest_back(self):
        from nova.compute import power_state
        driver, running = self._driver(keep=True)
        inst = _Instance('u1')
        driver.spawn(None, inst, None, None, None, None)
        driver.destroy(None, inst, None, destroy_disks=False)
        driver.finish_revert_migration(None, inst, None, None)
        self.assertEqual(power_state.RUNNING, driver.get_info(inst).state)
        driver.destroy(None, inst, None)
        self.assertEqual([], driver.list_instance_uuids())
        self.assertEqual([], self._running(running))

    def test_without_keep_a_destroy_removes_the_guest(self):
        driver, running = self._driver(keep=False)
        inst = _Instance('u1')
        driver.spawn(None, inst, None, None, None, None)
        driver.destroy(None, inst, None, destroy_disks=False)
        self.assertEqual([], driver.list_instance_uuids())
        self.assertEqual([], self._running(running))


class ReportTest(testtools.TestCase):

    def test_superconductor_rows(self):
        names = {row: kind for _bug, _s, rows in run.SUPERCONDUCTOR
                 for row, kind in rows.items()}
        vanilla = ({n: ('LEAK: x' if kind else None)
                    for n, kind in names.items()}, {})
        fixed = ({n: None for n in names}, {})
        rows = run.rows_of(vanilla, fixed, layout='superconductor')
        self.assertEqual(len(names), len(rows))
        self.assertTrue(all(r[4] for r in rows))
        self.assertNotIn('a service on an unexpected nova refuses to start',
                         [r[1] for r in rows])

    def test_vanilla_without_the_leak_fails_an_open_bug_row(self):
        name = "deleted while the target cell's compute finishes"
        names = [row for _bug, _s, rows in run.SUPERCONDUCTOR
                 for row in rows]
        rows = run.rows_of(({n: None for n in names}, {}),
                           ({n: None for n in names}, {}),
                           layout='superconductor')
        row = [r for r in rows if r[1] == name][0]
        self.assertEqual(('not recreated', 'PASS', False), row[2:])

    def test_a_line_per_layout_then_the_sum(self):
        def run_mode(mode, keep, layout):
            rows = (run.SUPERCONDUCTOR if layout == 'superconductor'
                    else run.SCENARIOS)
            names = {row: kind for _b, _s, r in rows
                     for row, kind in r.items()}
            if mode == 'vanilla':
                return ({n: ('LEAK: x' if k else None)
                         for n, k in names.items()}, {})
            results = {n: None for n in names}
            if layout == 'superconductor':
                # One fixed row fails.
                results[sorted(names)[0]] = 'LEAK: y'
            else:
                results['a service on an unexpected nova refuses to '
                        'start'] = None
            return results, {}

        out = io.StringIO()
        with mock.patch.object(run, 'run_mode', run_mode), \
                mock.patch.object(deploy, 'services', return_value=True), \
                contextlib.redirect_stdout(out):
            rc = run.main([])
        lines = out.getvalue().strip().splitlines()
        single = sum(len(r) for _b, _s, r in run.SCENARIOS) + 1
        sc = sum(len(r) for _b, _s, r in run.SUPERCONDUCTOR)
        self.assertEqual(1, rc)
        self.assertIn('deployment (single-cell): %d passed, 0 failed'
                      % single, lines)
        self.assertIn('deployment (superconductor): %d passed, 1 failed'
                      % (sc - 1), lines)
        self.assertEqual('%d passed, 1 failed' % (single + sc - 1),
                         lines[-1])
