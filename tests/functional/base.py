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

"""What every nova-fixes functional test shares.

The nova under test is chosen per process by NOVA_FIXES_MODE:

- dropin (default): vanilla nova with nova_fixes activated per test;
- vanilla: vanilla nova, nothing activated (regression tests of bugs
  open upstream must fail here: they recreate the bug);
- patched: a nova with patches/<series> applied, nothing activated.
"""

import io
import json
import os
import threading
import time
import traceback
from unittest import mock

import fixtures
from keystoneauth1 import exceptions as ks_exc

from nova.cmd import manage
import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova.tests.functional.api import client as api_client

from nova_fixes import activation as nova_fixes_activation
from nova_fixes import audit as nova_fixes_audit
from nova_fixes import fixture as nova_fixes_fixture
from nova_fixes.nova import conf as fixes_conf
from nova_fixes import registry
import tests
from tests import common

CONF = nova.conf.CONF
# The options exist in every mode, so that a test can set them on vanilla
# nova too (where nothing reads them).
fixes_conf.register_opts(CONF)
common.install_api_paste_config()
#: The leak assertions' marker (see tests.common.LEAK).
LEAK = common.LEAK
#: A server left where no request moves it counts as a leak too.
STUCK = LEAK + 'STUCK: '
# A request answered 500 where a user needs an answer to act on: nova
# fails the request it should have completed or refused.
SERVER_ERROR = LEAK + 'SERVER ERROR: '

# Migration statuses after which a migration holds no allocations (nova's
# migration_get_in_progress_by_host_and_node leaves out the same ones).
DONE_MIGRATION_STATUSES = frozenset((
    'confirmed', 'reverted', 'error', 'failed', 'completed', 'cancelled',
    'done'))


def _noop(*args, **kwargs):
    return None


def _connect_failure():
    raise ks_exc.ConnectFailure(
        'Unable to establish connection to the placement API')


#: Upstream nova commits a test process can take out of nova for the run,
#: NOVA_FIXES_WITHOUT=<commit>[,<commit>], to show that the regression
#: test of a bug nova has fixed catches it: {commit: fixture factory}.
UNDO_UPSTREAM = {
    # Bug 1859496: f35930eef8 added API._local_delete_cleanup, which
    # deletes a server's allocations when the API deletes it itself, and
    # its calls from API._delete (123f6262f6 later made it take the
    # instance UUID). Nothing else calls it.
    'f35930eef8': lambda: fixtures.MonkeyPatch(
        'nova.compute.api.API._local_delete_cleanup', _noop),
}


def undone_upstream_commits():
    """The commits NOVA_FIXES_WITHOUT names; an unknown one is an error."""
    commits = os.environ.get('NOVA_FIXES_WITHOUT', '').replace(
        ',', ' ').split()
    unknown = [c for c in commits if c not in UNDO_UPSTREAM]
    if unknown:
        raise ValueError('NOVA_FIXES_WITHOUT names %s; nova-fixes can take '
                         'out: %s' % (', '.join(unknown),
                                      ', '.join(sorted(UNDO_UPSTREAM))))
    return commits


#: A directory: every test then ends with nova-fixes audit --heal and
#: writes there what it found (tests.recreate --audit-after reads it).
AUDIT_AFTER = 'NOVA_FIXES_AUDIT_AFTER'
#: vm states that are not settled: what they hold is nova's to decide
#: while they last (resized: VERIFY_RESIZE holds both sides as nova
#: defines it).
UNSETTLED_VM_STATES = ('building', 'resized')


class NovaFixesTestMixin(object):
    """Mode selection and the leak invariants.

    Mix in before nova's test base class. ``recreates`` tells the recreate
    report what the class's tests do on vanilla nova: True for scenarios
    that must fail there (they recreate the bug), False for no-regression
    cases that must pass on every nova, None for tests of what a fix adds
    (an option, a task) that vanilla nova has not got. ``out_of_reach``
    True marks a window no fix reaches: its tests assert the leak itself
    (and its remedy), so they pass on vanilla nova and with the fixes
    alike, and the report says the leak is not fixed.
    ``window_opened_by``: for a scenario whose window an upstream change
    opened (a nova_fixes.registry.OpenedUpstream), vanilla nova without
    that change must pass it, as a no-regression case.
    """

    recreates = True
    out_of_reach = False
    window_opened_by = None

    def setUp(self):
        tests.quiet_outside_tests()
        if common.mode() == 'dropin':
            # nova-manage's drop-ins too: the test process has imported
            # nova.cmd.manage (placement_audit) and is monkey patched.
            self.useFixture(nova_fixes_fixture.NovaFixes(
                services=registry.SERVICES))
        elif common.mode() == 'patched':
            missing = nova_fixes_activation.missing_patches()
            if missing:
                raise RuntimeError(
                    'NOVA_FIXES_MODE=patched, but the installed nova (%s) '
                    'does not carry the patches of nova-fixes: it lacks %s'
                    % (os.path.dirname(nova.__file__), ', '.join(missing)))
        for commit in undone_upstream_commits():
            self.useFixture(UNDO_UPSTREAM[commit]())
        super(NovaFixesTestMixin, self).setUp()

    def tearDown(self):
        # Before any cleanup: a compute service's fixture destroys its
        # service record, and with it its compute nodes.
        where = os.environ.get(AUDIT_AFTER)
        if where:
            self._audit_after(where)
        super(NovaFixesTestMixin, self).tearDown()

    def delete_server_and_wait(self, server, timeout=20):
        """Delete a server through the API and wait until it is gone,
        whatever state a failing operation puts it in meanwhile.
        """
        self.api.delete_server(server['id'])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.api.get_server(server['id'])
            except api_client.OpenStackApiNotFoundException:
                return
            time.sleep(0.1)
        self.fail('Server %s was not deleted within %s s'
                  % (server['id'], timeout))

    def live_migrate_to(self, server, host,
                         migration_expected_state='completed',
                         server_expected_state='ACTIVE'):
        """nova's _live_migrate to a given host: its host argument is
        only in nova 33 (2026.1) and later.
        """
        self.api.post_server_action(server['id'], {
            'os-migrateLive': {'host': host, 'block_migration': 'auto'}})
        self._wait_for_migration_status(server, [migration_expected_state])
        return self._wait_for_state_change(server, server_expected_state)

    def watch(self, owner, name, before=None):
        """Stub ``owner.name`` with a wrapper that calls ``before`` first,
        if given; returns an event set once the call has returned (or
        raised): a point a test can wait for.
        """
        done = threading.Event()
        self.addCleanup(done.set)
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            try:
                if before is not None:
                    before()
                return original(*args, **kwargs)
            finally:
                done.set()

        self.stub_out('%s.%s.%s' % (owner.__module__, owner.__qualname__,
                                    name), wrapper)
        return done

    def placement_down(self, failure=None):
        """Make placement fail for nova's services: every call of their
        report clients gets ``failure()`` (by default it fails to connect,
        as safe_connect sees it when placement is down). The test's own
        placement client is untouched.

        :param failure: what a call gets instead: a function that raises,
            or returns the response the call gets
        :returns: (failed, down): the (verb, url) of every call that
            failed, and an event, set now: clear it to bring placement
            back, set it again for another outage
        """
        down = threading.Event()
        failed = []
        for name in ('get', 'post', 'put', 'delete'):
            original = getattr(report.SchedulerReportClient, name)

            def call(client, url, *args, _original=original, _name=name,
                     **kwargs):
                if down.is_set():
                    failed.append((_name, url))
                    return (failure or _connect_failure)()
                return _original(client, url, *args, **kwargs)

            self.stub_out('nova.scheduler.client.report.'
                          'SchedulerReportClient.%s' % name, call)
        down.set()
        self.addCleanup(down.clear)
        return failed, down

    def wait_for(self, event, what, timeout=30):
        self.assertTrue(event.wait(timeout), 'Timed out waiting for %s'
                        % what)

    # -- what nova knows ---------------------------------------------------

    def _cell_contexts(self):
        ctxt = nova_context.get_admin_context()
        for name, cell in self.cell_mappings.items():
            if name == 'cell0':
                continue
            with nova_context.target_cell(ctxt, cell) as cctxt:
                yield cctxt

    def _live_servers(self):
        servers = self.admin_api.get_servers(
            detail=True, search_opts={'all_tenants': 1})
        return {s['id']: s for s in servers if s['status'] != 'DELETED'}

    def _in_progress_migrations(self, live_servers):
        migrations = {}
        for cctxt in self._cell_contexts():
            for mig in objects.MigrationList.get_by_filters(cctxt, {}):
                if (mig.status not in DONE_MIGRATION_STATUSES and
                        mig.instance_uuid in live_servers):
                    migrations[mig.uuid] = mig
        return migrations

    def _all_allocations(self):
        """{consumer uuid: {provider uuid: resources}} across placement."""
        consumers = {}
        for rp in self._get_all_providers():
            allocs = self._get_allocations_by_provider_uuid(rp['uuid'])
            for consumer, alloc in allocs.items():
                consumers.setdefault(consumer, {})[rp['uuid']] = (
                    alloc['resources'])
        return consumers

    # -- the invariants ----------------------------------------------------

    def assert_no_leaked_allocations(self):
        """Every consumer in placement is a live server or a migration in
        progress for a live server.
        """
        live = self._live_servers()
        migrations = self._in_progress_migrations(live)
        leaked = {consumer: allocs
                  for consumer, allocs in self._all_allocations().items()
                  if consumer not in live and consumer not in migrations}
        self.assertEqual({}, leaked, LEAK + 'allocations of consumers that '
                         'are neither a live server nor a migration in '
                         'progress ({consumer: {provider: resources}})')

    def assert_server_left_nothing(self, server):
        """Nothing of a deleted server is left in placement.

        Checked right after the race, then again once the deleted rows are
        archived and every resource tracker has run its periodic task: nova
        heals some leaks itself, but not once the row is archived.
        """
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']), LEAK + 'allocations left for the deleted server')
        self.assert_no_leaked_allocations()
        self.archive_and_run_periodics()
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']), LEAK + 'allocations left for the deleted server '
            'after archive_deleted_rows and the resource tracker periodic')
        self.assert_no_leaked_allocations()

    def _flavor_resources(self, flavor):
        """What nova allocates for ``flavor`` (the API's flavor of a
        server): its ephemeral and swap disks count in DISK_GB, as in
        nova.scheduler.utils.resources_from_flavor.
        """
        resources = {rc: n for rc, n in self._resources_from_flavor(
            flavor).items() if n}
        disk = (flavor['disk'] + (flavor.get('ephemeral') or 0) +
                -(-(flavor.get('swap') or 0) // 1024))
        if disk:
            resources['DISK_GB'] = disk
        return resources

    def assert_survivor(self, server, host, right_away=True):
        """The survivor property: a server that lived through a fault,
        once the services are back (init_host has run), holds exactly its
        flavor on ``host``, where its guest runs, and nothing anywhere
        else (the instance consumer; no migration consumer of it holds
        anything); no migration of it is left in progress; it has no task
        state; the quota counts it once in both counting modes (it is the
        only server of its project). Checked
        right away, then again after one pass of every compute's
        periodics. ``host`` None is a server with no host to run on (a
        build that failed, a shelved offloaded server): it holds nothing,
        and the quota counted from placement counts none of its cores and
        RAM. ``right_away`` False checks only after the periodics: for a
        fault that outlasted init_host (placement down when the service
        started), where nothing could be written before.
        """
        for settled in ((False, True) if right_away else (True,)):
            when = ' (after the periodics)' if settled else ''
            if settled:
                self._run_periodics()
            server = self.api.get_server(server['id'])
            if host or server['status'] != 'SHELVED_OFFLOADED':
                # A shelve offload that failed after the guest was gone
                # may leave the host set.
                self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
            self.assertIsNone(server['OS-EXT-STS:task_state'],
                              STUCK + 'a task state nothing clears' + when)
            ctxt = nova_context.get_admin_context()
            migrations = objects.MigrationList.get_by_filters(
                ctxt, {'instance_uuid': server['id']})
            moving = ['%s (%s)' % (m.uuid, m.status) for m in migrations
                      if m.status not in DONE_MIGRATION_STATUSES]
            self.assertEqual([], moving, STUCK + 'migrations of a move '
                             'that is over still in progress' + when)
            mine = {server['id']} | {m.uuid for m in migrations}
            held = {consumer: allocs for consumer, allocs
                    in self._all_allocations().items() if consumer in mine}
            resources = self._flavor_resources(server['flavor'])
            self.assertEqual(
                {server['id']: {self._get_provider_uuid_by_host(host):
                                resources}} if host else {},
                held, LEAK + 'what the server and its migrations hold '
                '({consumer: {provider: resources}}), not its flavor on '
                'the host where its guest runs' + when)
            self.assert_no_leaked_allocations()
            for from_placement in (False, True):
                self.flags(count_usage_from_placement=from_placement,
                           group='quota')
                quota = self.api.api_get(
                    '/os-quota-sets/%s/detail' % server['tenant_id']
                ).body['quota_set']
                counted = host or not from_placement
                self.assertEqual(
                    {'instances': 1,
                     'cores': resources['VCPU'] if counted else 0,
                     'ram': resources['MEMORY_MB'] if counted else 0},
                    {res: quota[res]['in_use']
                     for res in ('instances', 'cores', 'ram')},
                    LEAK + 'quota usage (count_usage_from_placement=%s)%s'
                    % (from_placement, when))
            self.flags(count_usage_from_placement=False, group='quota')

    # -- the audit after a test ---------------------------------------------

    def audit_truth(self):
        """What is wrong in placement, from the test's own reading of the
        cells (cell0 included), not the audit's: {consumer or server uuid:
        'leaked' | 'misplaced' | 'missing'}. Leaked: a consumer that is no
        instance of a cell that is not deleted, and no migration of one.
        Misplaced or missing: a settled server (no task state, not
        building, not resized) whose own and migrations' allocations are
        not exactly its flavor on its node (nothing when it has no host or
        is shelved offloaded; nothing either, or leaked, when its vm state
        is deleted and its record not destroyed: a delete that stopped
        half way). A migration still recorded in progress of a settled
        server is one its sequence abandoned: every sequence has ended
        when this runs.
        """
        ctxt = nova_context.get_admin_context()
        instances, migrations = {}, {}
        for name, cell in self.cell_mappings.items():
            with nova_context.target_cell(ctxt, cell) as cctxt:
                for inst in objects.InstanceList.get_by_filters(
                        cctxt, {'deleted': False},
                        expected_attrs=['flavor']):
                    instances[inst.uuid] = inst
                for mig in objects.MigrationList.get_by_filters(cctxt, {}):
                    migrations.setdefault(mig.instance_uuid, set()).add(
                        mig.uuid)
        held = self._all_allocations()
        owner = {m: i for i, ms in migrations.items() for m in ms}
        # A migration of a server that exists is its server's business:
        # judged with it when it is settled, not at all while it is not.
        wrong = {c: 'leaked' for c in held
                 if c not in instances and owner.get(c) not in instances}
        for uuid, inst in instances.items():
            if (inst.task_state is not None or
                    inst.vm_state in UNSETTLED_VM_STATES):
                continue
            expected = {}
            # Deleted, not destroyed, no task state: a delete that stopped
            # half way; it must hold nothing.
            if inst.host and inst.vm_state not in ('shelved_offloaded',
                                                   'deleted'):
                flavor = inst.flavor
                expected = {uuid: {self._node_uuid(inst.host, inst.node):
                                   self._flavor_resources({
                                       'vcpus': flavor.vcpus,
                                       'ram': flavor.memory_mb,
                                       'disk': flavor.root_gb,
                                       'ephemeral': flavor.ephemeral_gb,
                                       'swap': flavor.swap,
                                       'extra_specs': flavor.extra_specs})}}
            mine = {c: a for c, a in held.items()
                    if c == uuid or c in migrations.get(uuid, ())}
            if mine != expected:
                wrong[uuid] = ('leaked' if inst.vm_state == 'deleted' else
                               'misplaced' if mine else 'missing')
        return wrong

    def _node_uuid(self, host, node):
        """The compute node's uuid (its resource provider's), read in the
        cells (the os-hypervisors API misses a restarted service's node).
        """
        for cctxt in self._cell_contexts():
            try:
                return objects.ComputeNode.get_by_host_and_nodename(
                    cctxt, host, node).uuid
            except exception.ComputeHostNotFound:
                continue
        return 'no compute node %s (%s)' % (host, node)

    def _settle(self, interval=0.5, limit=10):
        """Wait until placement's allocations stay the same for one
        interval (a test may end while nova still finishes what it
        started: a delete giving its allocations back), ``limit`` seconds
        at most: the seconds waited.
        """
        start = time.time()
        last = self._all_allocations()
        while time.time() - start < limit:
            time.sleep(interval)
            now = self._all_allocations()
            if now == last:
                break
            last = now
        return round(time.time() - start, 1)

    def _audit_after(self, where):
        """nova-fixes audit --heal once the test is over (grace 0: every
        sequence has ended), checked against audit_truth() before and
        after; one JSON file in ``where`` per test. Never raises: the
        test's outcome stays its own.
        """
        record = {'test': self.id(), 'mode': common.mode()}
        try:
            record['settled_in'] = self._settle()
            before = self.audit_truth()
            if before:
                # Something is wrong: give nova's own retries (a
                # conductor or a delete waiting on placement) the time
                # to finish before calling it the sequence's end state.
                record['settled_in'] = round(
                    record['settled_in'] + self._settle(interval=2.5), 1)
                before = self.audit_truth()
            rep = nova_fixes_audit.audit(nova_context.get_admin_context(),
                                         heal=True, grace=0)
            after = self.audit_truth()
            flagged = [v for v in rep.verdicts
                       if v.verdict in nova_fixes_audit.WRONG]
            found = {key for key in before
                     if any(key in (v.consumer, v.server) for v in flagged)}
            record.update(
                before=before, after=after,
                counts=rep.counts(),
                found=sorted(found),
                false_positives=sorted(
                    '%s (%s)' % (v.consumer, v.verdict) for v in flagged
                    if v.consumer not in before and
                    v.server not in before),
                healed=[v.as_dict() for v in flagged],
                verdicts=[v.as_dict() for v in rep.verdicts
                          if v.verdict not in nova_fixes_audit.WRONG])
        except Exception as e:  # noqa: a report, not the test's failure
            record['error'] = '%s: %s' % (type(e).__name__, e)
            record['traceback'] = traceback.format_exc()
        with open(os.path.join(where, self.id() + '.json'), 'w') as f:
            json.dump(record, f, indent=1, sort_keys=True, default=str)

    def archive_and_run_periodics(self):
        """nova-manage db archive_deleted_rows --all-cells, then every
        compute's update_available_resource periodic.
        """
        manage.DbCommands().archive_deleted_rows(
            max_rows=1000, until_complete=True, all_cells=True)
        self._run_periodics()

    def placement_audit(self, delete, heal=False):
        """nova-manage placement audit --verbose [--delete] [--heal]: (its
        exit code, what it printed). ``--heal`` is the drop-ins' (vanilla
        nova has not got it).
        """
        out = io.StringIO()
        kwargs = {'heal': True} if heal else {}
        with mock.patch('sys.stdout', out):
            result = manage.PlacementCommands().audit(
                verbose=True, delete=delete, **kwargs)
        return result, out.getvalue()
