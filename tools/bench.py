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

"""Benchmark: what the fixes cost, side by side with vanilla nova.

Prints one table. Each row is measured twice in the same process, on
nova's functional fixtures (cell databases in SQLite, placement in
process, the fake virt driver):

* scan rows: one run of the orphan instances task (nova-fixes column)
  against nova's own _cleanup_running_deleted_instances with
  running_deleted_instance_action=log (vanilla column), on the same host
  holding N guests: N - 15 with a live record of this host (a real row
  with its flavor, metadata and system metadata), 5 whose record is
  deleted, 5 whose record names another host, 5 with no record at all.
  Each task must report exactly its own guests (the deleted ones; the
  foreign and unknown ones), or the benchmark fails. With --nodes N > 1
  (default: 1 and 100) host1's own records are spread over N nodes of
  host1, each with its compute node record, as on an Ironic host. CPU
  seconds of the scanning thread (time.thread_time(): a scan makes its
  database reads and driver calls in the thread that runs it, while the
  process's other threads serve the other nova services meanwhile),
  median of --repeat runs, the two tasks alternating which one runs
  first.
* operation rows: one server operation through the API, on vanilla nova
  and with every drop-in activated: placement requests and database
  statements from the API call until the operation has settled (the
  test's own polling of the API is not counted). "migrate rolled back"
  is a live server's cold migration that finds no host after the
  conductor moved the server's allocations to the migration: the
  conductor's rollback moves them back (checked).
* activation rows: nova_fixes.activate() for the code of one service
  (compute, conductor, api) or of all, in this process where the
  fixtures have imported every service's nova modules already; vanilla
  has nothing to do (n/a). CPU milliseconds of the activating thread,
  median of --repeat runs, each followed by deactivate(); every run
  checks that each target of those services was patched, and put back
  after. Wall milliseconds are printed below the table.

* restart rows: host1's compute service restarted with N guests of the
  scans' population on its hypervisor (--restart-guests, default 1,000):
  vanilla's init_host against the drop-ins' (the interrupted moves'
  _init_instance, the finished moves' clean-up): placement requests and
  statements from the stop until the new service has started. Each side
  must have initialized every instance of host1's own records (the
  driver's plug_vifs, counted). The first row has nothing interrupted;
  in the second, M of the guests (--restart-interrupted, default 10)
  are seeded before each restart as cold migrations to host2 that the
  stop interrupted in resize_instance (task state RESIZE_MIGRATING, the
  migration consumer holding host1's node, the instance consumer
  host2's), and each side is checked after its restart: both rolled
  them back (no task state); the drop-ins gave host1's allocations back
  to the instance and vanilla left them with the migration.

Statements are the SELECT/INSERT/UPDATE/DELETE sent to the databases
(SQLite's BEGIN, SAVEPOINT and the like are not): nova's and, as
placement runs in process, placement's; the "nova DB" column counts
nova's databases only (API, cells). The services' heartbeats are never
counted. Placement requests are those of nova's report client.

Usage: python tools/bench.py [--repeat N] [--op-repeat N]
    [--guests N [N ...]] [--nodes N [N ...]] [--restart-guests N [N ...]]
    [--restart-interrupted M]
    [--only scans|operations|activation ...]
    [--operation NAME ...]
"""

import argparse
import collections
import datetime
import importlib
import logging
import os
import statistics
import sys
import threading
import time
import unittest

os.environ['NOVA_FIXES_MODE'] = 'vanilla'  # the benchmark activates itself
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

# First: its import filters the warnings nova's own imports print.
import tests as _filters  # noqa: E402,F401

import fixtures  # noqa: E402
from nova.cmd import manage  # noqa: E402
from nova.compute import power_state  # noqa: E402
from nova.compute import task_states  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova.db.api import api as api_db_api  # noqa: E402
from nova.db.api import models as api_models  # noqa: E402
from nova.db.main import api as db_api  # noqa: E402
from nova.db.main import models  # noqa: E402
from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler.client import report  # noqa: E402
from nova.servicegroup.drivers import db as db_servicegroup  # noqa: E402
from nova.virt import fake  # noqa: E402
from oslo_utils import uuidutils  # noqa: E402
from placement import db_api as placement_db  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from sqlalchemy import event  # noqa: E402

import nova_fixes  # noqa: E402
from nova_fixes import activation  # noqa: E402
from nova_fixes import audit  # noqa: E402
from nova_fixes.nova.compute import manager as fixes_manager  # noqa: E402
from nova_fixes import registry  # noqa: E402
from tests.functional import test_orphan_instances  # noqa: E402

ARGS = None
ROWS = []
CALLS = []
WALL_MS = {}  # activation set -> median wall ms
AUDIT = []  # what each audit found, below the table
SPECIAL = 5  # deleted, foreign and unknown guests of each scan
TIMEOUT = 120  # seconds an operation may take on a busy machine
_VERBS = ('SELECT', 'INSERT', 'UPDATE', 'DELETE')


class Counter(object):
    """Database statements and placement requests in a window.

    Work done by the test's own thread is counted only until mute() (the
    API call that starts an operation); after it, that thread only polls.
    A scan counts its own thread only. The services' heartbeats (the
    servicegroup's _report_state, on a timer of their own) are never
    counted: whether one falls in an operation's window is chance.
    """

    def __init__(self):
        self.statements = 0
        self.requests = 0
        self.on = False
        self.main = threading.get_ident()
        self.main_counts = True
        # Set in the thread of a service heartbeat while it runs.
        self.heartbeat = threading.local()
        # Statements sent to nova's own databases, not placement's.
        self.nova_statements = 0
        self.placement_engine = None

    def counts(self):
        if not self.on or getattr(self.heartbeat, 'on', False):
            return False
        if threading.get_ident() == self.main:
            return self.main_counts
        return not self.only_main

    def statement(self, conn, cursor, statement, *args):
        if self.counts() and statement.lstrip()[:6].upper() in _VERBS:
            self.statements += 1
            if conn.engine is not self.placement_engine:
                self.nova_statements += 1

    def start(self, only_main=False):
        self.statements = self.requests = self.nova_statements = 0
        self.calls = []
        self.main_counts = True
        self.only_main = only_main
        self.on = True

    def mute(self):
        self.main_counts = False

    def stop(self):
        self.on = False
        return self.requests, self.statements


class _Records(logging.Handler):
    """The guests each task reported, from its log lines."""

    def __init__(self):
        super(_Records, self).__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        instance = getattr(record, 'instance', None)
        uuid = (instance.get('uuid') if isinstance(instance, dict) else
                getattr(instance, 'uuid', None))
        self.lines.append('%s %s' % (record.getMessage(), uuid))


class _Lines(object):
    """A stdout that keeps the lines printed."""

    def __init__(self, lines):
        self.lines = lines

    def write(self, text):
        self.lines.extend(text.splitlines())

    def flush(self):
        pass


class Benchmark(test_orphan_instances._OrphanTestBase):

    def setUp(self):
        super(Benchmark, self).setUp()
        self.counter = Counter()
        event.listen(sa.engine.Engine, 'before_cursor_execute',
                     self.counter.statement)
        self.addCleanup(event.remove, sa.engine.Engine,
                        'before_cursor_execute', self.counter.statement)
        # Placement runs in process: its statements are counted too, and
        # told apart from nova's by their engine.
        self.counter.placement_engine = placement_db.get_placement_engine()
        report_state = db_servicegroup.DbDriver._report_state
        heartbeat = self.counter.heartbeat

        def uncounted_report_state(driver, service):
            heartbeat.on = True
            try:
                return report_state(driver, service)
            finally:
                heartbeat.on = False
        self.useFixture(fixtures.MonkeyPatch(
            'nova.servicegroup.drivers.db.DbDriver._report_state',
            uncounted_report_state))
        for verb in ('get', 'put', 'post', 'delete'):
            self.useFixture(fixtures.MonkeyPatch(
                'nova.scheduler.client.report.SchedulerReportClient.' + verb,
                self._counted(getattr(report.SchedulerReportClient, verb))))
        self.addCleanup(nova_fixes.deactivate)

    def _counted(self, method):
        counter = self.counter

        def request(client, url, *args, **kwargs):
            if counter.counts():
                counter.requests += 1
                counter.calls.append('%s %s' % (method.__name__.upper(),
                                                url.split('?')[0]))
            return method(client, url, *args, **kwargs)
        return request

    # -- scans ---------------------------------------------------------

    def _cell_context(self, host='host1'):
        ctxt = nova_context.get_admin_context()
        return nova_context.target_cell(
            ctxt, self.host_mappings[host].cell_mapping)

    def _rows_of(self, cctxt, uuid):
        rows = {}
        with db_api.get_context_manager(cctxt).reader.using(cctxt):
            for model in (models.Instance, models.InstanceExtra,
                          models.InstanceMetadata,
                          models.InstanceSystemMetadata):
                table = model.__table__
                key = (table.c.uuid if model is models.Instance
                       else table.c.instance_uuid)
                rows[table] = [dict(row._mapping) for row in
                               cctxt.session.execute(
                                   sa.select(table).where(key == uuid))]
        return rows

    def _nodes(self, cctxt, count):
        """The names of ``count`` nodes of host1, its compute node records
        created (copies of host1's own) where missing.
        """
        if count == 1:
            return ['host1']
        names = ['host1-node-%04d' % n for n in range(count)]
        table = models.ComputeNode.__table__
        rows = [dict(row._mapping) for row in cctxt.session.execute(
            sa.select(table).where(table.c.host == 'host1'))]
        have = set(row['hypervisor_hostname'] for row in rows)
        template = [row for row in rows
                    if row['hypervisor_hostname'] == 'host1'][0]
        new = []
        for name in names:
            if name in have:
                continue
            row = dict(template, uuid=uuidutils.generate_uuid(),
                       hypervisor_hostname=name)
            row.pop('id')
            new.append(row)
        if new:
            cctxt.session.execute(sa.insert(table), new)
        return names

    def _populate(self, size, nodes=1):
        """N guests on host1's hypervisor and their rows in cell1; the
        guests of host1's own records spread over ``nodes`` nodes.
        """
        retired = getattr(self, '_populated', [])
        if retired:
            # The rows of the previous size go to a host of their own: a
            # scan is of this size's guests and host1's records of them.
            with self._cell_context() as cctxt:
                with db_api.get_context_manager(cctxt).writer.using(cctxt):
                    table = models.Instance.__table__
                    cctxt.session.execute(
                        sa.update(table).where(table.c.uuid.in_(retired))
                        .values(host='retired', node='retired'))
        server = self._create_server(host='host1', networks='none')
        self.api.post_server_metadata(server['id'], {'owner': 'bench',
                                                     'tier': 'web'})
        driver = self._driver('host1')
        driver.instances.clear()
        guests = collections.defaultdict(list)
        with self._cell_context() as cctxt:
            template = self._rows_of(cctxt, server['id'])
            with db_api.get_context_manager(cctxt).writer.using(cctxt):
                next_id = cctxt.session.execute(
                    sa.select(sa.func.max(models.Instance.id))).scalar()
                node_names = self._nodes(cctxt, nodes)
                batch = collections.defaultdict(list)
                old = datetime.datetime(2026, 1, 1)
                for i in range(size):
                    kind = ('unknown' if i < SPECIAL else
                            'deleted' if i < 2 * SPECIAL else
                            'foreign' if i < 3 * SPECIAL else 'own')
                    uuid = uuidutils.generate_uuid()
                    guests[kind].append(uuid)
                    driver.instances[uuid] = fake.FakeInstance(
                        'guest-%d' % i, power_state.RUNNING, uuid)
                    if kind == 'unknown':
                        continue
                    next_id += 1
                    for table, rows in template.items():
                        for row in rows:
                            row = dict(row)
                            row.pop('id', None)
                            if table is models.Instance.__table__:
                                row.update(id=next_id, uuid=uuid,
                                           display_name='guest-%d' % i)
                                if kind == 'deleted':
                                    row.update(deleted=next_id,
                                               deleted_at=old,
                                               vm_state='deleted')
                                elif kind == 'foreign':
                                    row.update(host='host2', node='host2')
                                else:
                                    row.update(node=node_names[
                                        i % len(node_names)])
                            else:
                                row['instance_uuid'] = uuid
                            batch[table].append(row)
                for table, rows in batch.items():
                    for start in range(0, len(rows), 2000):
                        cctxt.session.execute(sa.insert(table),
                                              rows[start:start + 2000])
        self._populated = [uuid for kind in ('own', 'deleted')
                           for uuid in guests[kind]] + [server['id']]
        # Their instance mappings in the API database, as nova keeps them.
        cell_id = self.host_mappings['host1'].cell_mapping.id
        mappings = [dict(instance_uuid=uuid, cell_id=cell_id,
                         project_id=server['tenant_id'],
                         user_id=server['user_id'],
                         queued_for_delete=(kind == 'deleted'))
                    for kind in ('own', 'deleted', 'foreign')
                    for uuid in guests[kind]]
        ctxt = nova_context.get_admin_context()
        with api_db_api.context_manager.writer.using(ctxt):
            table = api_models.InstanceMapping.__table__
            for start in range(0, len(mappings), 2000):
                ctxt.session.execute(sa.insert(table),
                                     mappings[start:start + 2000])
        return guests

    def _scan(self, run):
        manager = self.computes['host1'].manager
        records = _Records()
        logging.getLogger().addHandler(records)
        try:
            with self._cell_context() as cctxt:
                # A scan runs in the calling thread: what other threads do
                # meanwhile (service heartbeats) is not the scan's.
                self.counter.start(only_main=True)
                # This thread's CPU only (the scan makes its database
                # reads and virt driver calls here), not the other
                # service threads' of the process.
                start = time.thread_time()
                run(manager, cctxt)
                cpu = time.thread_time() - start
                requests, statements = self.counter.stop()
        finally:
            logging.getLogger().removeHandler(records)
        return cpu, requests, statements, records.lines

    @staticmethod
    def _nova_task(manager, context):
        manager._cleanup_running_deleted_instances(context)

    @staticmethod
    def _orphan_task(manager, context):
        fixes_manager._cleanup_orphan_instances(manager, context)

    def _reported(self, lines, guests, kinds):
        found = set(uuid for kind in guests for uuid in guests[kind]
                    if any(uuid in line for line in lines))
        expected = set(uuid for kind in kinds for uuid in guests[kind])
        self.assertEqual(expected, found, 'the task reported %s'
                         % sorted(kind for kind in guests
                                  if found & set(guests[kind])))

    def _bench_scan(self, size, nodes=1):
        guests = self._populate(size, nodes)
        results = {'nova': [], 'orphan': []}
        for i in range(ARGS.repeat):
            order = ('nova', 'orphan') if i % 2 == 0 else ('orphan', 'nova')
            for name in order:
                run = self._nova_task if name == 'nova' else self._orphan_task
                cpu, requests, statements, lines = self._scan(run)
                self._reported(lines, guests,
                               ['deleted'] if name == 'nova'
                               else ['foreign', 'unknown'])
                results[name].append((cpu, requests, statements))
        nova = results['nova']
        orphan = results['orphan']
        ROWS.append((
            'scan, %d guests%s (CPU s)' % (
                size, ', %d nodes' % nodes if nodes > 1 else ''),
            statistics.median(r[0] for r in nova),
            statistics.median(r[0] for r in orphan),
            (nova[0][1], orphan[0][1]),
            (sorted(set(r[2] for r in nova)),
             sorted(set(r[2] for r in orphan)))))

    def test_scans(self):
        # Each size clones a server of its own into its rows.
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        self.flags(action='log', group='orphan_instances')
        self.flags(running_deleted_instance_action='log',
                   running_deleted_instance_timeout=0)
        for size in ARGS.guests:
            for nodes in ARGS.nodes:
                self._bench_scan(size, nodes)

    # -- restart -------------------------------------------------------

    def _restart_counted(self):
        """host1's compute service restarted (init_host runs for every
        instance of its records): (placement requests, statements, nova
        DB statements, instances init_host initialized).
        """
        initialized = []
        plug_vifs = fake.FakeDriver.plug_vifs

        def counted_plug_vifs(driver, instance, network_info):
            initialized.append(instance.uuid)
            return plug_vifs(driver, instance, network_info)

        with fixtures.MonkeyPatch('nova.virt.fake.FakeDriver.plug_vifs',
                                  counted_plug_vifs):
            self.counter.start()
            self.computes['host1'] = self.restart_compute_service(
                self.computes['host1'])
            requests, statements = self.counter.stop()
        CALLS.append(list(self.counter.calls))
        return (requests, statements, self.counter.nova_statements,
                len(set(initialized)))

    def _interrupt_moves(self, uuids, migrations):
        """Each server of ``uuids`` (host1's records, guests on its
        hypervisor) as a cold migration to host2 that host1's compute
        service stopped in (inside resize_instance's
        migrate_disk_and_power_off) leaves it: task state
        RESIZE_MIGRATING, a migration context naming its migration
        'migrating', the migration consumer holding the flavor on host1's
        node and the instance consumer the destination's claim on
        host2's, as the conductor and prep_resize wrote them. Done before
        each restart (a restart rolls them back); ``migrations`` keeps
        each server's migration from one call to the next.
        """
        source = self._get_provider_uuid_by_host('host1')
        dest = self._get_provider_uuid_by_host('host2')
        resources = self._flavor_resources()
        with self._cell_context() as cctxt:
            for uuid in uuids:
                instance = objects.Instance.get_by_uuid(
                    cctxt, uuid, expected_attrs=['flavor',
                                                 'migration_context'])
                migration = migrations.get(uuid)
                if migration is None:
                    migration = objects.Migration(
                        cctxt, instance_uuid=uuid, source_compute='host1',
                        dest_compute='host2', source_node=instance.node,
                        dest_node='host2', dest_host='127.0.0.1',
                        migration_type='migration', status='migrating',
                        old_instance_type_id=instance.flavor.id,
                        new_instance_type_id=instance.flavor.id)
                    if 'dest_compute_id' in migration.fields:
                        migration.dest_compute_id = (
                            objects.ComputeNode.get_by_host_and_nodename(
                                cctxt, 'host2', 'host2').id)
                    migration.create()
                    migrations[uuid] = migration
                else:
                    migration.status = 'migrating'
                    migration.save()
                instance.migration_context = objects.MigrationContext(
                    instance_uuid=uuid, migration_id=migration.id,
                    new_numa_topology=None, old_numa_topology=None,
                    new_pci_devices=None, old_pci_devices=None,
                    new_pci_requests=None, old_pci_requests=None,
                    new_resources=None, old_resources=None)
                instance.task_state = task_states.RESIZE_MIGRATING
                instance.vm_state = 'active'
                instance.save()
                for consumer, rp in ((migration.uuid, source),
                                     (uuid, dest)):
                    # Microversion 1.12: no consumer generation to name.
                    self.placement.put(
                        '/allocations/%s' % consumer,
                        {'allocations': {rp: {'resources': resources}},
                         'project_id': instance.project_id,
                         'user_id': instance.user_id},
                        version='1.12')

    def _flavor_resources(self):
        """What the benchmark's real server holds on host1's node."""
        held = self.placement.get(
            '/allocations/%s' % self._populated[-1],
            version='1.12').body['allocations']
        return list(held.values())[0]['resources']

    def _held(self, consumer):
        """{provider: resources} a consumer holds."""
        held = self.placement.get('/allocations/%s' % consumer,
                                  version='1.12').body['allocations']
        return {rp: a['resources'] for rp, a in held.items()}

    def _check_interrupted(self, fixed, uuids, migrations):
        """What each side's restart did with the interrupted moves:
        both rolled the servers back (no task state); with the drop-ins
        the instance holds its flavor on host1 and the migration
        nothing, on vanilla they hold what they held (the leak).
        """
        source = self._get_provider_uuid_by_host('host1')
        dest = self._get_provider_uuid_by_host('host2')
        with self._cell_context() as cctxt:
            for uuid in uuids:
                instance = objects.Instance.get_by_uuid(cctxt, uuid)
                self.assertIsNone(instance.task_state, uuid)
                held = (self._held(uuid),
                        self._held(migrations[uuid].uuid))
                if fixed:
                    self.assertEqual(([source], []),
                                     tuple(list(h) for h in held), uuid)
                else:
                    self.assertEqual(([dest], [source]),
                                     tuple(list(h) for h in held), uuid)

    def test_restart(self):
        """A compute's restart with N guests of its own records (the
        scans' population): vanilla's init_host against the drop-ins'
        (interrupted moves, finished moves left), first with nothing
        interrupted, then with --restart-interrupted of the guests in a
        cold migration that the stop interrupted on host1.
        """
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        self.flags(action='log', group='orphan_instances')
        for size in ARGS.restart_guests:
            guests = self._populate(size)
            interrupted = guests['own'][:ARGS.restart_interrupted]
            migrations = {}
            for label, moves in (('', ()), (', %d moves interrupted'
                                             % len(interrupted),
                                             interrupted)):
                if label and not moves:
                    continue
                counts = {False: [], True: []}
                for i in range(ARGS.op_repeat):
                    for fixed in ((False, True) if i % 2 == 0
                                  else (True, False)):
                        self._mode(fixed)
                        if moves:
                            self._interrupt_moves(moves, migrations)
                        counts[fixed].append(self._restart_counted())
                        if moves:
                            self._check_interrupted(fixed, moves,
                                                    migrations)
                nova_fixes.deactivate()
                # Both sides initialized every instance of host1's
                # records.
                own = len(guests['own'])
                for fixed, runs in counts.items():
                    for run in runs:
                        self.assertGreaterEqual(run[3], own,
                                                'fixed=%s' % fixed)
                median = {fixed: tuple(statistics.median(c[k] for c in runs)
                                       for k in range(3))
                          for fixed, runs in counts.items()}
                ROWS.append(('restart, %d guests%s (requests)'
                             % (size, label),
                             median[False][0], median[True][0],
                             (median[False][0], median[True][0]),
                             (median[False][1], median[True][1]),
                             (median[False][2], median[True][2])))

    # -- audit -------------------------------------------------------

    #: How many of each seeded kind the audit's cloud has besides the
    #: scans' population (deleted, foreign, unknown): builds in flight
    #: (no host, building) and moves in flight (a task state, holding
    #: another node than their record's).
    IN_FLIGHT = 5

    def _audit_cloud(self, consumers, providers):
        """``consumers`` allocations on ``providers`` resource providers
        (host1's nodes, each with its compute node record), each of a
        real instance row but for the unknown ones: {kind: [uuid]}, the
        kinds of the scans' population plus 'building', 'moving' and
        'shared' (live servers whose disk is on a provider of shared
        storage, one more provider: right where they are).
        """
        guests = self._populate(consumers, providers)
        own = guests.pop('own')
        guests['building'] = own[:self.IN_FLIGHT]
        guests['moving'] = own[self.IN_FLIGHT:2 * self.IN_FLIGHT]
        guests['shared'] = own[2 * self.IN_FLIGHT:3 * self.IN_FLIGHT]
        guests['own'] = own[3 * self.IN_FLIGHT:]
        with self._cell_context() as cctxt:
            with db_api.get_context_manager(cctxt).writer.using(cctxt):
                table = models.Instance.__table__
                cctxt.session.execute(
                    sa.update(table).where(
                        table.c.uuid.in_(guests['building']))
                    .values(host=None, node=None, vm_state='building'))
                cctxt.session.execute(
                    sa.update(table).where(
                        table.c.uuid.in_(guests['moving']))
                    .values(task_state='resize_prep'))
                nodes = {row.hypervisor_hostname: row.uuid
                         for row in cctxt.session.execute(sa.select(
                             models.ComputeNode.__table__).where(
                                 models.ComputeNode.host == 'host1'))}
                where = {row.uuid: row.node
                         for row in cctxt.session.execute(sa.select(
                             table.c.uuid, table.c.node).where(
                                 table.c.uuid.in_(
                                     guests['own'] + guests['moving'] +
                                     guests['shared'])))}
        names = sorted(nodes)
        have = {rp['uuid'] for rp in self.placement.get(
            '/resource_providers').body['resource_providers']}
        for name in names:
            uuid = nodes[name]
            if uuid not in have:
                self.assertEqual(200, self.placement.post(
                    '/resource_providers', {'uuid': uuid, 'name': name},
                    version='1.20').status)
            self.assertEqual(200, self.placement.put(
                '/resource_providers/%s/inventories' % uuid, {
                    'resource_provider_generation': self.placement.get(
                        '/resource_providers/%s' % uuid).body['generation'],
                    'inventories': {
                        'VCPU': {'total': 100000},
                        'MEMORY_MB': {'total': 100000000},
                        'DISK_GB': {'total': 1000000}}}).status)
        shared = self._sharing_provider()
        server = self.api.get_server(self._populated[-1])
        body = {}
        for kind, uuids in guests.items():
            for i, uuid in enumerate(uuids):
                node = where.get(uuid) or names[i % len(names)]
                if kind == 'moving':
                    # Its destination's claim: another node than its own.
                    node = names[(names.index(node) + 1) % len(names)]
                allocations = {nodes[node]: {'resources': {
                    'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}}}
                if kind == 'shared':
                    allocations = {
                        nodes[node]: {'resources': {'VCPU': 1,
                                                    'MEMORY_MB': 512}},
                        shared: {'resources': {'DISK_GB': 1}}}
                body[uuid] = {
                    'allocations': allocations,
                    'consumer_generation': None,
                    'project_id': server['tenant_id'],
                    'user_id': server['user_id']}
        items = sorted(body.items())
        for start in range(0, len(items), 1000):
            self.assertEqual(204, self.placement.post(
                '/allocations', dict(items[start:start + 1000]),
                version='1.28').status)
        return guests

    def _sharing_provider(self):
        """A provider of shared storage (DISK_GB, trait
        MISC_SHARES_VIA_AGGREGATE), in no compute node's tree.
        """
        uuid = uuidutils.generate_uuid()
        self.assertEqual(200, self.placement.post(
            '/resource_providers', {'uuid': uuid, 'name': 'shared-storage'},
            version='1.20').status)
        self.assertEqual(200, self.placement.put(
            '/resource_providers/%s/inventories' % uuid, {
                'resource_provider_generation': 0,
                'inventories': {'DISK_GB': {'total': 1000000}}}).status)
        self.assertEqual(200, self.placement.put(
            '/resource_providers/%s/traits' % uuid, {
                'resource_provider_generation': 1,
                'traits': ['MISC_SHARES_VIA_AGGREGATE']},
            version='1.6').status)
        return uuid

    def _audit_run(self, tool):
        """One full audit by ``tool``, nothing deleted or healed: (CPU s,
        placement requests, statements, the consumers it called wrong).
        """
        ctxt = nova_context.get_admin_context()
        lines = []
        self.counter.start(only_main=True)
        start = time.thread_time()
        if tool == 'nova-fixes audit':
            report_ = audit.audit(ctxt)
        else:
            with fixtures.MonkeyPatch('sys.stdout', _Lines(lines)):
                code = manage.PlacementCommands().audit(verbose=True)
        cpu = time.thread_time() - start
        requests, statements = self.counter.stop()
        nova_statements = self.counter.nova_statements
        if tool == 'nova-fixes audit':
            wrong = {v.consumer for v in report_.verdicts
                     if v.verdict in audit.WRONG}
        else:
            self.assertIn(code, (0, 3))
            wrong = {line.split('consumer UUID ')[1].split()[0]
                     for line in lines if 'can be deleted' in line}
        return cpu, requests, statements, wrong, nova_statements

    def test_audit(self):
        """One full audit of a seeded cloud (ARGS.audit_consumers on
        ARGS.audit_providers): nova-manage's vanilla audit against its
        fixed one (the manage_audit drop-ins) and against nova-fixes
        audit, each run without --delete or --heal. Each tool must find
        exactly what it is expected to: every leak (deleted, unknown),
        and for vanilla nova-manage the misplaced and in-flight claims
        too (its false positives), counted below the table.
        """
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        guests = self._audit_cloud(ARGS.audit_consumers,
                                   ARGS.audit_providers)
        leaks = set(guests['deleted']) | set(guests['unknown'])
        live = (set(guests['foreign']) | set(guests['building']) |
                set(guests['moving']) | set(guests['shared']))
        expected = {
            'nova-manage': leaks | live,
            'nova-manage, fixed': leaks,
            'nova-fixes audit': leaks | set(guests['foreign']),
        }
        runs = collections.defaultdict(list)
        tools = list(expected)
        for i in range(ARGS.op_repeat):
            for tool in (tools if i % 2 == 0 else tools[::-1]):
                nova_fixes.deactivate()
                if tool == 'nova-manage, fixed':
                    nova_fixes.activate(services=['manage'])
                run = self._audit_run(tool)
                nova_fixes.deactivate()
                self.assertEqual(expected[tool], run[3], tool)
                runs[tool].append(run)
        median = {tool: (statistics.median(r[0] for r in rs), rs[0][1],
                         rs[0][2], rs[0][4]) for tool, rs in runs.items()}
        size = '%d consumers, %d providers' % (
            sum(len(u) for u in guests.values()) + 1,
            ARGS.audit_providers + 1)
        for tool in tools[1:]:
            ROWS.append(('audit, %s: %s (CPU s)' % (size, tool),
                         median['nova-manage'][0], median[tool][0],
                         (median['nova-manage'][1], median[tool][1]),
                         (median['nova-manage'][2], median[tool][2]),
                         (median['nova-manage'][3], median[tool][3])))
        healed = self._audit_writes(guests, tools)
        for tool in tools:
            found = runs[tool][0][3]
            right, destroyed = healed[tool]
            AUDIT.append('%s: %d leaks found of %d, %d false positives '
                         '(claims nova still uses called orphaned); with '
                         '%s: %d of %d healed right, %d live claims '
                         'destroyed' % (
                             tool, len(found & leaks), len(leaks),
                             len(found & live) if tool != 'nova-fixes '
                             'audit' else len(found - leaks -
                                              set(guests['foreign'])),
                             WRITES[tool], right,
                             len(leaks) + len(guests['foreign']),
                             destroyed))

    def _allocations(self, uuids):
        """{consumer: GET /allocations/{consumer}}, each allocation's
        provider generation left out (another consumer's write changes
        it).
        """
        out = {}
        for u in uuids:
            body = self.placement.get('/allocations/%s' % u,
                                      version='1.28').body
            body['allocations'] = {rp: {'resources': a['resources']}
                                   for rp, a in body['allocations'].items()}
            out[u] = body
        return out

    def _audit_writes(self, guests, tools):
        """Each tool once more, writing (nova-manage --delete, nova-fixes
        audit --heal), from the same seeded allocations: {tool: (seeded
        problems healed right, live claims destroyed)}. Healed right: a
        leak (deleted, unknown) holds nothing, a misplaced server
        (foreign) holds its flavor on its own node and nothing else. A
        live claim (building, moving) destroyed: its allocations changed.
        What a tool changed is put back before the next one.
        """
        ctxt = nova_context.get_admin_context()
        watched = [u for kind in ('deleted', 'unknown', 'foreign',
                                  'building', 'moving', 'shared')
                   for u in guests[kind]]
        seeded = self._allocations(watched)
        with self._cell_context() as cctxt:
            nodes = {(cn.host, cn.hypervisor_hostname): cn.uuid
                     for cn in objects.ComputeNodeList.get_all(cctxt)}
            own = {i.uuid: nodes.get((i.host, i.node))
                   for i in objects.InstanceList.get_by_filters(
                       cctxt, {'uuid': guests['foreign']})}
        out = {}
        for tool in tools:
            nova_fixes.deactivate()
            if tool == 'nova-manage, fixed':
                nova_fixes.activate(services=['manage'])
            if tool == 'nova-fixes audit':
                audit.audit(ctxt, heal=True)
            else:
                with fixtures.MonkeyPatch('sys.stdout', _Lines([])):
                    manage.PlacementCommands().audit(
                        delete=True, **({'heal': True}
                                        if tool == 'nova-manage, fixed'
                                        else {}))
            nova_fixes.deactivate()
            now = self._allocations(watched)
            right = sum(1 for u in guests['deleted'] + guests['unknown']
                        if not now[u]['allocations'])
            right += sum(1 for u in guests['foreign']
                         if set(now[u]['allocations']) == {own[u]} and
                         now[u]['allocations'][own[u]]['resources'] ==
                         seeded[u]['allocations'][
                             next(iter(seeded[u]['allocations']))][
                                 'resources'])
            destroyed = sum(
                1 for u in guests['building'] + guests['moving'] +
                guests['shared']
                if now[u]['allocations'] != seeded[u]['allocations'])
            out[tool] = (right, destroyed)
            self._put_back(seeded, now)
        problems = len(guests['deleted'] + guests['unknown'] +
                       guests['foreign'])
        self.assertEqual((problems, 0), out['nova-fixes audit'],
                         'nova-fixes audit --heal: every seeded problem '
                         'healed right, no live claim touched')
        self.assertEqual((problems, 0), out['nova-manage, fixed'],
                         'the fixed nova-manage --delete --heal: every '
                         'seeded problem healed right, no live claim '
                         'touched')
        return out

    def _put_back(self, seeded, now):
        """The seeded allocations of the consumers a tool changed."""
        body = {}
        for u, before in seeded.items():
            if now[u]['allocations'] == before['allocations']:
                continue
            body[u] = {
                'allocations': before['allocations'],
                'consumer_generation': now[u].get('consumer_generation'),
                'project_id': before['project_id'],
                'user_id': before['user_id']}
        if body:
            self.assertEqual(204, self.placement.post(
                '/allocations', body, version='1.28').status)
        for u, after in self._allocations(list(seeded)).items():
            self.assertEqual(seeded[u]['allocations'], after['allocations'],
                             'the seeded allocations of %s put back' % u)

    # -- operations ----------------------------------------------------

    def _measured(self, action, settled):
        self.notifier.reset()
        self.counter.start()
        action()
        self.counter.mute()
        settled()
        requests, statements = self.counter.stop()
        CALLS.append(list(self.counter.calls))
        return requests, statements, self.counter.nova_statements

    def _mode(self, fixed):
        nova_fixes.deactivate()
        if fixed:
            nova_fixes.activate()

    def _op_migrate(self, flavor=None):
        server = self._create_server(host='host1', networks='none')
        body = ({'resize': {'flavorRef': flavor}} if flavor
                else {'migrate': None})
        result = self._measured(
            lambda: self.api.post_server_action(server['id'], body),
            lambda: self.notifier.wait_for_versioned_notifications(
                'instance.resize_finish.end', timeout=TIMEOUT))
        self._wait_for_state_change(server, 'VERIFY_RESIZE')
        return self._done(server, result)

    def _op_resize(self):
        return self._op_migrate(flavor=self.api.get_flavors()[1]['id'])

    def _op_revert(self):
        server = self._create_server(host='host1', networks='none')
        server = self._resize_server(server,
                                     self.api.get_flavors()[1]['id'])
        result = self._measured(
            lambda: self.api.post_server_action(server['id'],
                                                {'revertResize': None}),
            lambda: self.notifier.wait_for_versioned_notifications(
                'instance.resize_revert.end', timeout=TIMEOUT))
        self._wait_for_state_change(server, 'ACTIVE')
        return self._done(server, result)

    def _op_live_migration(self):
        server = self._create_server(host='host1', networks='none')

        def settled():
            self._wait_for_migration_status(server, ['completed'])
            self.notifier.wait_for_versioned_notifications(
                'instance.live_migration_post.end', timeout=TIMEOUT)
        return self._done(server, self._measured(
            lambda: self.api.post_server_action(server['id'], {
                'os-migrateLive': {'host': 'host2',
                                   'block_migration': 'auto'}}),
            settled))

    def _done(self, server, result):
        """Delete the server, so that the next run finds the hosts and
        providers as this one did.
        """
        self.delete_server_and_wait(server)
        self.notifier.wait_for_versioned_notifications(
                'instance.delete.end', timeout=TIMEOUT)
        return result

    def _op_delete(self):
        server = self._create_server(host='host1', networks='none')
        return self._measured(
            lambda: self.api.delete_server(server['id']),
            lambda: self.notifier.wait_for_versioned_notifications(
                'instance.delete.end', timeout=TIMEOUT))

    def _op_local_delete(self):
        """Delete a server whose compute is down: the API deletes it
        itself. The compute is back for the next run.
        """
        server = self._create_server(host='host1', networks='none')
        compute = self.computes['host1']
        compute.stop()
        self.api.put_service(compute.service_ref.uuid,
                             {'forced_down': 'true'})
        result = self._measured(
            lambda: self.api.delete_server(server['id']), lambda: None)
        self._wait_until_deleted(server)
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']))
        self.computes['host1'] = self.restart_compute_service(compute)
        self.api.put_service(compute.service_ref.uuid,
                             {'forced_down': 'false'})
        return result

    def _wait_until_deleted(self, server):
        """The server's record is gone (the delete did its work)."""
        from nova.tests.functional.api import client as api_client
        self.assertRaises(api_client.OpenStackApiNotFoundException,
                          self.api.get_server, server['id'])

    def _op_delete_after_migrations(self, past, made=None):
        """Delete a server with ``past`` migrations: real migration rows.
        With ``made``, nova makes that many (cold migrations, each
        confirmed, and as many live migrations, alternately) and the rest
        are copies of its rows (with their own UUIDs), as a server's
        history is; else nova makes them all (cold migrations).
        """
        server = self._create_server(host='host1', networks='none')
        made = past if made is None else made
        for i in range(made):
            if made < past and i % 2:
                host = self.api.get_server(server['id'])[
                    'OS-EXT-SRV-ATTR:host']
                self._live_migrate(
                    server, host='host2' if host == 'host1' else 'host1')
            else:
                self._migrate_server(server)
                self._confirm_resize(server)
        if made < past:
            self._copy_migrations(server, past - made)
        migrations = [m['uuid'] for m in self.api.get_migrations()
                      if m['instance_uuid'] == server['id']]
        self.assertEqual(past, len(migrations))
        result = self._measured(
            lambda: self.api.delete_server(server['id']),
            lambda: self.notifier.wait_for_versioned_notifications(
                'instance.delete.end', timeout=TIMEOUT))
        self._wait_until_deleted(server)
        for uuid in [server['id']] + migrations:
            self.assertEqual({}, self._get_allocations_by_server_uuid(uuid))
        return result

    def _copy_migrations(self, server, count):
        """``count`` more migration rows of the server, copies of those
        nova made, in turn.
        """
        with self._cell_context() as cctxt:
            with db_api.get_context_manager(cctxt).writer.using(cctxt):
                table = models.Migration.__table__
                rows = [dict(row._mapping) for row in cctxt.session.execute(
                    sa.select(table).where(
                        table.c.instance_uuid == server['id']))]
                copies = []
                for i in range(count):
                    row = dict(rows[i % len(rows)],
                               uuid=uuidutils.generate_uuid())
                    row.pop('id')
                    copies.append(row)
                cctxt.session.execute(sa.insert(table), copies)

    def _op_build_delete(self):
        """Delete a server whose build holds a claim but has not reached
        a cell (the conductor is held right after the scheduler's claim).
        """
        from nova.conductor import manager as conductor_manager
        held, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)
        original = conductor_manager.ComputeTaskManager._schedule_instances

        def schedule(*args, **kwargs):
            result = original(*args, **kwargs)
            held.set()
            release.wait()
            return result

        patch = fixtures.MonkeyPatch(
            'nova.conductor.manager.ComputeTaskManager._schedule_instances',
            schedule)
        with patch:
            server = self._create_server(host='host1', networks='none',
                                         expected_state='BUILD')
            self.assertTrue(held.wait(30))
            result = self._measured(
                lambda: self.api.delete_server(server['id']), lambda: None)
            release.set()
        return result

    def _op_migrate_rollback(self):
        """A live server's cold migration that fails in the conductor
        after it moved the server's allocations to the migration (no
        host found): the conductor's rollback moves them back.
        """
        from nova.conductor import manager as conductor_manager
        server = self._create_server(host='host1', networks='none')
        done = threading.Event()
        cold_migrate = conductor_manager.ComputeTaskManager._cold_migrate

        def settled_cold_migrate(*args, **kwargs):
            try:
                return cold_migrate(*args, **kwargs)
            finally:
                done.set()

        def no_host(task):
            raise exception.NoValidHost(reason='benchmark: no host')

        with fixtures.MonkeyPatch(
                'nova.conductor.manager.ComputeTaskManager._cold_migrate',
                settled_cold_migrate), fixtures.MonkeyPatch(
                'nova.conductor.tasks.migrate.MigrationTask._schedule',
                no_host):
            result = self._measured(
                lambda: self.api.post_server_action(server['id'],
                                                    {'migrate': None}),
                lambda: self.assertTrue(done.wait(TIMEOUT)))
        migration, = [m for m in self.api.get_migrations()
                      if m['instance_uuid'] == server['id']]
        self.assertEqual('error', migration['status'])
        # The server's allocations are back on it, none left on the
        # migration.
        self.assertFlavorMatchesAllocation(
            server['flavor'], server['id'],
            self._get_provider_uuid_by_host('host1'))
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            migration['uuid']))
        return self._done(server, result)

    OPERATIONS = (('migrate', '_op_migrate'),
                  ('resize', '_op_resize'),
                  ('revert resize', '_op_revert'),
                  ('live migration', '_op_live_migration'),
                  ('migrate rolled back', '_op_migrate_rollback'),
                  ('delete', '_op_delete'),
                  ('delete in BUILD', '_op_build_delete'),
                  ('local delete', '_op_local_delete'),
                  ('delete after 1 migration',
                   '_op_delete_after_1_migration'),
                  ('delete after 8 migrations',
                   '_op_delete_after_8_migrations'),
                  ('delete after 50 migrations',
                   '_op_delete_after_50_migrations'))

    def _op_delete_after_1_migration(self):
        return self._op_delete_after_migrations(1)

    def _op_delete_after_8_migrations(self):
        return self._op_delete_after_migrations(8)

    def _op_delete_after_50_migrations(self):
        return self._op_delete_after_migrations(50, made=4)

    def test_operations(self):
        operations = [(name, getattr(self, method))
                      for name, method in self.OPERATIONS
                      if not ARGS.operation or name in ARGS.operation]
        for name, op in operations:
            counts = {False: [], True: []}
            for i in range(ARGS.op_repeat):
                for fixed in ((False, True) if i % 2 == 0
                              else (True, False)):
                    self._mode(fixed)
                    counts[fixed].append(op())
            nova_fixes.deactivate()
            median = {fixed: (statistics.median(c[0] for c in runs),
                              statistics.median(c[1] for c in runs))
                      for fixed, runs in counts.items()}
            ROWS.append(('%s (statements)' % name,
                         median[False][1], median[True][1],
                         (median[False][0], median[True][0]),
                         (sorted(set(c[1] for c in counts[False])),
                          sorted(set(c[1] for c in counts[True]))),
                         (sorted(set(c[2] for c in counts[False])),
                          sorted(set(c[2] for c in counts[True])))))

    # -- activation ----------------------------------------------------

    def _patched(self, services):
        """{target path: whether it is what an activation must make it}
        of the targets of these services: the drop-in (or, for a periodic
        task, registered on its class).
        """
        series = activation.series_of(activation.nova_version())
        patched = {}
        for fix in nova_fixes.FIXES:
            for target in registry.targets_of(fix, series):
                if not services.intersection(target.services):
                    continue
                owner, name = activation._resolve(target.path)
                if target.periodic:
                    ok = name in dict(getattr(owner, '_periodic_tasks', ()))
                else:
                    ok = (vars(owner).get(name, None) is
                          activation._replacement(target))
                patched[target.path] = ok
        return patched

    def _untouched(self):
        """[target path] of the targets that are not nova's own."""
        series = activation.series_of(activation.nova_version())
        wrong = []
        for fix in nova_fixes.FIXES:
            for target in registry.targets_of(fix, series):
                owner, name = activation._resolve(target.path)
                present = name in vars(owner)
                if target.new:
                    if present or name in dict(
                            getattr(owner, '_periodic_tasks', ())):
                        wrong.append(target.path)
                elif (not present or vars(owner)[name] is
                        activation._replacement(target)):
                    wrong.append(target.path)
        return wrong

    def test_activation(self):
        """nova_fixes.activate() per service, in this process where the
        services' nova modules are imported already (the fixtures started
        every service): CPU of this thread, where activation does all its
        work (and wall time, for the footnote), each run followed by
        deactivate(), every target checked patched and then put back.
        """
        series = activation.series_of(activation.nova_version())
        for fix in nova_fixes.FIXES:
            for target in registry.targets_of(fix, series):
                importlib.import_module(target.module)
        self.assertEqual([], nova_fixes.active_fixes())
        self.assertEqual([], self._untouched())
        for label, services in ACTIVATION_SETS:
            wanted = set(services or registry.DEFAULT_SERVICES)
            expected = [fix.bug for fix in nova_fixes.FIXES if any(
                wanted.intersection(target.services)
                for target in registry.targets_of(fix, series))]
            times, walls = [], []
            for _ in range(ARGS.repeat):
                self.counter.start()
                start, wall = time.thread_time(), time.perf_counter()
                bugs = nova_fixes.activate(services=services)
                elapsed = time.thread_time() - start
                walls.append((time.perf_counter() - wall) * 1000)
                counts = self.counter.stop()
                self.assertEqual(expected, bugs)
                patched = self._patched(wanted)
                self.assertNotEqual({}, patched)
                self.assertEqual([], [path for path, ok in patched.items()
                                      if not ok],
                                 'activate(services=%s) left these targets '
                                 'unpatched' % (services,))
                self.assertEqual((0, 0), counts)
                times.append(elapsed * 1000)
                nova_fixes.deactivate()
                self.assertEqual([], nova_fixes.active_fixes())
                self.assertEqual([], self._untouched(),
                                 'deactivate() left these targets patched')
            ROWS.append(('activate %s (CPU ms)' % label, None,
                         statistics.median(times), ('-', counts[0]),
                         ('-', counts[1])))
            WALL_MS[label] = statistics.median(walls)


#: (label, services argument of activate()) of the activation rows.
ACTIVATION_SETS = (('compute', ['compute']), ('conductor', ['conductor']),
                   ('api', ['api']), ('all', None))


def _figure(value):
    if value is None:
        return 'n/a'
    return '%.3f' % value if isinstance(value, float) else '%g' % value


def _pair(values):
    return '%s / %s' % tuple(
        ','.join(str(v) for v in value) if isinstance(value, list)
        else str(value) for value in values)


def print_table(rows):
    """One line a row; a row's nova DB statements (its sixth item) are
    its statements when it has none of its own (scans and activation
    touch no placement database).
    """
    header = ('operation or scan', 'vanilla', 'nova-fixes', 'ratio',
              'requests', 'statements', 'nova DB')
    lines = [header]
    for row in rows:
        name, vanilla, fixed, requests, statements = row[:5]
        nova_db = row[5] if len(row) > 5 else statements
        ratio = '%.2f' % (fixed / vanilla) if vanilla else '-'
        lines.append((name, _figure(vanilla), _figure(fixed), ratio,
                      _pair(requests), _pair(statements), _pair(nova_db)))
    widths = [max(len(line[i]) for line in lines) for i in range(7)]
    for line in lines:
        print('  '.join(cell.ljust(width) if i == 0 else cell.rjust(width)
                        for i, (cell, width) in
                        enumerate(zip(line, widths))).rstrip())


#: What each audit tool runs with when it writes (test_audit).
WRITES = {'nova-manage': '--delete',
          'nova-manage, fixed': '--delete --heal',
          'nova-fixes audit': '--heal'}

#: The parts of the benchmark, in the order they run (--only).
PARTS = ('scans', 'operations', 'activation', 'restart', 'audit')


def main(argv=None):
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--repeat', type=int, default=21,
                        help='scans per task and size (median)')
    parser.add_argument('--op-repeat', type=int, default=3,
                        help='runs per operation and nova (median)')
    parser.add_argument('--guests', type=int, nargs='+',
                        default=[1000, 10000], help='guests per scan')
    parser.add_argument('--restart-guests', type=int, nargs='+',
                        default=[1000], help="guests of the restarted "
                        "compute's records, for each restart row")
    parser.add_argument('--restart-interrupted', type=int, default=10,
                        help='guests of the restarted compute whose cold '
                             'migration the stop interrupted, for the '
                             'second restart row (0: no such row)')
    parser.add_argument('--audit-consumers', type=int, default=10000,
                        help='consumers with allocations in the audit '
                             'row\'s cloud')
    parser.add_argument('--audit-providers', type=int, default=100,
                        help='resource providers (compute nodes) they '
                             'are spread over')
    parser.add_argument('--nodes', type=int, nargs='+', default=[1, 100],
                        help="nodes of the scanning host (as an Ironic "
                             "host has many) over which its guests' "
                             "records are spread, for each --guests")
    parser.add_argument('--only', choices=PARTS, action='append',
                        help='only this part of the benchmark (repeat for '
                             'several)')
    parser.add_argument('--operation', action='append',
                        choices=[name for name, _ in Benchmark.OPERATIONS],
                        help='with the operations, only this one (repeat '
                             'for several)')
    ARGS = parser.parse_args(argv)
    if min(ARGS.repeat, ARGS.op_repeat) < 1:
        parser.error('--repeat and --op-repeat must be at least 1')
    if min(ARGS.nodes) < 1:
        parser.error('--nodes must be at least 1')
    if ARGS.restart_interrupted < 0:
        parser.error('--restart-interrupted must be 0 or more')
    if min(ARGS.restart_guests) < (3 * SPECIAL + 1 +
                                   ARGS.restart_interrupted):
        parser.error('--restart-guests must be at least %d (with '
                     '--restart-interrupted %d)'
                     % (3 * SPECIAL + 1 + ARGS.restart_interrupted,
                        ARGS.restart_interrupted))
    if min(ARGS.restart_guests) < 3 * SPECIAL + 1:
        parser.error('--restart-guests must be at least %d'
                     % (3 * SPECIAL + 1))
    if ARGS.audit_consumers < 3 * SPECIAL + 2 * Benchmark.IN_FLIGHT + 1:
        parser.error('--audit-consumers must be at least %d'
                     % (3 * SPECIAL + 2 * Benchmark.IN_FLIGHT + 1))
    if ARGS.audit_providers < 2:
        parser.error('--audit-providers must be at least 2')
    if min(ARGS.guests) < 3 * SPECIAL + 1:
        parser.error('--guests must be at least %d' % (3 * SPECIAL + 1))
    tests = ['test_' + part for part in PARTS
             if not ARGS.only or part in ARGS.only]
    suite = unittest.TestSuite([Benchmark(name) for name in tests])
    result = unittest.TextTestRunner(stream=open(os.devnull, 'w')).run(
        suite)
    if not result.wasSuccessful():
        for _, tb in result.errors + result.failures:
            print(tb)
        return 1
    print_table(ROWS)
    if os.environ.get('BENCH_CALLS'):
        for calls in CALLS:
            print(calls)
    print('vanilla: nova %s; scans: nova\'s running-deleted task, CPU s '
          'of the scanning thread (median of %d); operations: DB '
          'statements (median of %d); activate: CPU ms of the activating '
          'thread (median of %d, each deactivated after). requests and '
          'statements: vanilla / nova-fixes.'
          % (activation.nova_version(), ARGS.repeat, ARGS.op_repeat,
             ARGS.repeat))
    for line in AUDIT:
        print('audit, %s.' % line)
    if WALL_MS:
        print('activate, wall ms (median): %s.' % ', '.join(
            '%s %.1f' % item for item in WALL_MS.items()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
