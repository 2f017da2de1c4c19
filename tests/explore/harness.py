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

"""Runs of an operation on nova's functional fixtures.

ExploreCase is a test case of the functional suite's own kind (the
NovaFixesTestMixin on ProviderUsageBaseTestCase). It starts nova's
services and prepares the operation (its server booted, its faults
stubbed) once; then each run, a ``plan``, starts from that prepared state
in a child process of its own (tests.explore.forked):

- ``record``: the operation runs undisturbed while the tracker records
  its steps; then the server is deleted and the invariants checked (the
  ``after`` point: the harness' own control);
- ``inject`` in variant ``timeout``: the operation runs, and the RPC
  call of the target step gets no reply (its callee runs it; the caller's
  timeout fires); once nova has settled, the user deletes each server
  still there, and one not gone is STUCK; the invariants are checked as
  below. A step that is no RPC call is N/A.
- ``inject``: the operation runs until the target step, which is held;
  the server is deleted through the API (variant ``down``: with its
  compute down, so the API deletes it locally; variant ``outage``:
  placement unreachable for nova's services from then until the
  operation has settled, after which the user deletes again each server
  still there, and one that is not gone is STUCK) and the compute has
  deleted it (see _wait_for_the_compute); the step is released;
  everything settles and the invariants are checked, then again after
  archive_deleted_rows and the periodics.

Every run starts from the same databases, queues and services. With
``fork`` off (the worker's ``--fresh``), a case runs one plan in its own
process, on services started for it.

Every wait is bounded; only the retried DELETE of the ``outage`` variant
polls the API (a user's view), every other wait is on the tracker.
"""

import collections
import datetime
import threading
import time
import traceback
from unittest import mock

import fixtures
from oslo_utils import timeutils

from nova.cmd import manage
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import utils as scheduler_utils
from nova.tests.functional.api import client as api_client
from nova.tests.functional import integrated_helpers

from tests.explore import forked
from tests.explore import tracker as tracker_mod
from tests.explore import variants as variants_mod
from tests.functional import base

#: Bounds of the waits (seconds). They are only reached when something is
#: wrong; a run that works never waits for a timeout.
SETTLE_TIMEOUT = 60
DELETE_TIMEOUT = 15
OP_TIMEOUT = 90
#: A gate of the operation is polled this often; in variant timeout the
#: wait ends once nova has had nothing in flight for GATE_IDLE seconds.
GATE_POLL = 0.2
GATE_IDLE = 2
#: Every manager method is a step (tracker.NOT_STEPS is ignored).
ALL_ENTRIES = False
#: How much later than the fault the survive mode runs nova's periodics:
#: a server lives on after a fault, and the resource tracker takes a move
#: that nothing will end for one after a grace of five minutes.
LATER = datetime.timedelta(hours=1)


class Stop(Exception):
    """The operation's driver stops: its server was deleted."""


#: What one run found.
Outcome = forked.Outcome


class ExploreCase(base.NovaFixesTestMixin,
                  integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = 'fake.MediumFakeDriver'

    def __init__(self, operation, session, fork=True):
        """``session(case)`` runs the plans, each with
        ``case.run_plan(plan)``; without ``fork``, one plan only.
        """
        super(ExploreCase, self).__init__('test_explore')
        self.operation = operation
        self.session = session
        self.fork = fork
        #: ('record',) or ('inject', step, variant)
        self.plan = None
        self._outcome_ = None
        self.prepare_error = None
        self._runs = 0

    def setUp(self):
        self._cells = []
        self.tracker = tracker_mod.Tracker(all_entries=ALL_ENTRIES)
        cells_setup = nova_fixtures_module().CellDatabases.setUp
        cells = self._cells

        def capture(fixture):
            cells.append(fixture)
            return cells_setup(fixture)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.CellDatabases.setUp', capture))
        self._hooked = False
        self._services = {}
        if self.operation.cells:
            self.NUMBER_OF_CELLS = 1 + len(
                set(self.operation.cells.values()) - {'cell1'})
        super(ExploreCase, self).setUp()
        # The periodics of the second check include the orphan instances
        # task of nova-fixes where it exists.
        self.flags(action='reap', grace_period=0, group='orphan_instances')
        self.ctxt = nova_context.get_admin_context()
        self.servers = []
        self.servers_known = threading.Event()
        self.deleted = threading.Event()
        self.down_hosts = set()
        self._down_host = None
        self.gates = {}
        self._stuck = []
        self._outage = None

    def start_service(self, name, host=None, cell_name=None, **kwargs):
        # Hooked before the first service starts: from its first call of
        # an RPC method on, nova's service._TrackingEndpointWrapper keeps
        # the method it found, and the drop-ins are active by now.
        if not self._hooked:
            self._hooked = True
            self.tracker._cell_lock = self._cells[0]._cell_lock
            for name_, hook in self.tracker.hooks():
                self.useFixture(fixtures.MonkeyPatch(name_, hook))
            from sqlalchemy.engine import Engine
            from sqlalchemy import event
            event.listen(Engine, 'before_cursor_execute',
                         self.tracker.db_fault)
            self.addCleanup(event.remove, Engine, 'before_cursor_execute',
                            self.tracker.db_fault)
        service = super(ExploreCase, self).start_service(
            name, host=host, cell_name=cell_name, **kwargs)
        if name in ('conductor', 'scheduler'):
            # What variant restart starts again.
            self._services[name] = (service, (), dict(
                host=host, cell_name=cell_name, **kwargs))
        return service

    # -- what operations use ---------------------------------------------

    def settle(self, timeout=SETTLE_TIMEOUT):
        if not self.tracker.settle(timeout):
            raise RuntimeError('nova did not settle within %ss (%d in '
                               'flight)' % (timeout, self.tracker.busy()))

    def act(self, server, body, **kwargs):
        """A server action, unless the server is deleted."""
        if self.deleted.is_set():
            raise Stop()
        try:
            return self.api.post_server_action(server['id'], body, **kwargs)
        except api_client.OpenStackApiException:
            if self.deleted.is_set():
                raise Stop()
            raise

    def show(self, server):
        if self.deleted.is_set():
            raise Stop()
        try:
            return self.admin_api.get_server(server['id'])
        except api_client.OpenStackApiNotFoundException:
            raise Stop()

    def expect(self, server, status, host=None):
        """The server is in ``status`` (one of them, if a tuple), on
        ``host``, unless deleted.
        """
        shown = self.show(server)
        statuses = status if isinstance(status, tuple) else (status,)
        if shown['status'] not in statuses or (
                host and shown['OS-EXT-SRV-ATTR:host'] != host):
            if self.deleted.is_set():
                raise Stop()
            raise AssertionError(
                'server %s is %s on %s, expected %s on %s' % (
                    server['id'], shown['status'],
                    shown['OS-EXT-SRV-ATTR:host'], status, host or 'any'))
        return shown

    def boot(self, count=1, host=None):
        """Create ``count`` servers in one request (publishes them)."""
        request = self._build_server(flavor_id=self.flavor_id,
                                     networks='none')
        if host:
            request['host'] = host
        if count > 1:
            request.update(min_count=count, max_count=count,
                           return_reservation_id=True)
            reservation = self.api.post_server({'server': request})
            servers = self.api.get_servers(search_opts={
                'reservation_id': reservation['reservation_id']})
        else:
            servers = [self.api.post_server({'server': request})]
        self.servers.extend(servers)
        self.servers_known.set()
        return servers

    def migration(self, server):
        """The server's latest migration, as the API shows it."""
        if self.deleted.is_set():
            raise Stop()
        migrations = self.api.api_get(
            '/os-migrations?instance_uuid=%s' % server['id']
        ).body['migrations']
        return max(migrations, key=lambda m: m['id'])

    def migration_status(self, server):
        return self.migration(server)['status']

    def api_call(self, method, url, **kwargs):
        """Another API request about the server, unless it is deleted."""
        if self.deleted.is_set():
            raise Stop()
        try:
            return getattr(self.api, 'api_' + method)(url, **kwargs)
        except api_client.OpenStackApiException:
            if self.deleted.is_set():
                raise Stop()
            raise

    def gate(self, what):
        """An event an operation's stub waits for; the explorer's delete
        opens every gate (a deleted guest ends what its driver did).
        """
        event = threading.Event()
        self.gates[what] = event
        self.addCleanup(event.set)
        return event

    def wait_gate(self, event):
        deadline = time.monotonic() + OP_TIMEOUT
        idle = 0
        while not event.wait(GATE_POLL):
            if time.monotonic() > deadline:
                raise RuntimeError('a gate of the operation was never '
                                   'opened')
            if self.plan is None or self.plan[0] != 'inject':
                continue
            variant = self.plan[2]
            if (variants_mod.fault(variant) not in ('timeout', 'restart') and
                    not variants_mod.is_survive(variant)):
                continue
            # A lost reply, or a step killed by a restart, can end the
            # operation before the point that opens the gate: nova then
            # has nothing left to run.
            idle = 0 if self.tracker.busy() else idle + 1
            if idle * GATE_POLL >= GATE_IDLE:
                raise RuntimeError('nova has nothing left to run and the '
                                   'gate is still closed: the operation '
                                   'ended before it')

    def compute_down(self, host):
        """The API sees the compute of ``host`` down from now on."""
        service = self.computes[host].service_ref
        self.api.put_service(service.uuid, {'forced_down': True})
        self.down_hosts.add(host)

    def bring_up(self, host):
        """A compute that was down comes back: restarted, its guests as
        they were.
        """
        if host not in self.down_hosts:
            return
        self.down_hosts.discard(host)
        # Restarted first: nova refuses to force up a source whose
        # evacuations its init_host has not cleaned up yet.
        self.computes[host] = self.restart_compute_service(
            self.computes[host])
        service = self.computes[host].service_ref
        self.api.put_service(service.uuid, {'forced_down': False})

    # -- the run -----------------------------------------------------------

    def test_explore(self):
        try:
            self._prepare()
        except Exception:
            self.prepare_error = 'harness: ' + _last_frames()
        self.session(self)

    def _prepare(self):
        """What every run starts from: the computes, the quota usage
        before the operation, what the operation prepares; settled.
        """
        op = self.operation
        self.flavor_id = self._create_flavor(**op.flavor)
        for host in op.hosts:
            self._start_compute(host, cell_name=op.cells.get(host))
        self.baseline = self._quota_usage()
        op.prepare(self)
        self.settle()
        if not op.boots:
            self.servers_known.set()
        if self.fork:
            self.useFixture(forked.ReflectOnce(self._cell_engines()))
            forked.warm_inspect()
            self._runner = forked.Runner()
            self.addCleanup(self._runner.close)

    def _cell_engines(self):
        from nova.db.main import api as main_db
        engines = []
        for cell in self.cell_mappings.values():
            with nova_context.target_cell(self.ctxt, cell) as cctxt:
                engines.append(main_db.get_engine(use_slave=True,
                                                  context=cctxt))
        return engines

    def run_plan(self, plan):
        """One run of the operation from the prepared state: an Outcome."""
        self._runs += 1
        if self.prepare_error:
            outcome = Outcome()
            outcome.error(self.prepare_error)
            return outcome
        if self.fork:
            return self._runner.run(lambda: self._run_here(plan))
        if self._runs > 1:
            raise RuntimeError('a case without fork runs one plan')
        return self._run_here(plan)

    def _run_here(self, plan):
        self.plan = plan
        self._survivor_findings = ([], [], [])
        self._outcome_ = outcome = Outcome()
        try:
            self._explore()
        except Exception:
            outcome.error('harness: ' + _last_frames())
        finally:
            self.tracker.release.set()
        if outcome.result is None:
            outcome.error('no result')
        return outcome

    def _explore(self):
        op = self.operation
        if self.plan[0] == 'record':
            self.tracker.arm(record=True)
            error = self._drive(OP_TIMEOUT, wait=True)
            self.tracker.disarm()
            self._outcome_.steps = list(self.tracker.steps)
            self._outcome_.unholdable = list(self.tracker.unholdable)
            self._outcome_.casts = list(self.tracker.casts)
            if error:
                self._outcome_.error(
                    'the operation failed undisturbed: ' + error)
                return
            # The survivor property holds once every service is back (the
            # evacuated source restarted, its init_host run).
            op.restore(self)
            self.settle()
            self._survive()
            self._delete_all(down=False)
        elif variants_mod.is_audit(self.plan[2]):
            if not self._audit_and_survive(self.plan[1]):
                return
        elif variants_mod.is_survive(self.plan[2]):
            if not self._fault_and_survive(self.plan[1],
                                           variants_mod.fault(self.plan[2])):
                return
        elif self.plan[2] == 'timeout':
            if not self._timeout(self.plan[1]):
                return
        elif self.plan[2] == 'restart':
            if not self._restart(self.plan[1]):
                return
        else:
            _, step, variant = self.plan
            self.tracker.arm(target=step)
            if variant == 'outage':
                _, self._outage = self.placement_down()
                self._outage.clear()
            if not self._inject(variant):
                return
            if variant == 'outage' and not self._retry_after_outage():
                return
        op.restore(self)
        self.settle()
        self._check()

    def _timeout(self, step, survive=False):
        """Variant ``timeout``: the RPC call at ``step`` gets no reply (its
        callee runs it, the reply is lost and the caller's timeout fires,
        see tracker._lose_reply). The operation goes on as nova makes it;
        once it has settled, the user deletes each server still there,
        which must go (_retry_delete).

        :returns: whether the run goes on to the checks
        """
        tracker = self.tracker
        reached, error = self._drive_with_fault(step, 'timeout')
        if not reached:
            return False
        if tracker.fault_applied != 'call':
            self._outcome_.result = 'N/A'
            self._outcome_.details = [
                'not an RPC call (%s): no reply to lose'
                % tracker.fault_applied]
            return False
        if error:
            # What the user saw: the operation failed, or went elsewhere.
            self._outcome_.details.append('operation: ' + error)
        self.settle()
        if survive:
            return True
        self.deleted.set()
        return self._retry_delete()

    def _drive_with_fault(self, step, fault):
        """The operation runs to its end with ``fault`` made at ``step``
        (no hold): (whether the step was reached, the operation's error).
        An unreached step is the outcome's error.
        """
        tracker = self.tracker
        tracker.arm(target=step, fault=fault)
        error = self._drive(OP_TIMEOUT, wait=True)
        tracker.disarm()
        if not tracker.reached.is_set():
            self._outcome_.error('step not reached: the operation %s '
                                 'without it' % ('ended (%s)' % error
                                                 if error else 'ended'))
            return False, error
        return True, error

    def _dbfail(self, step):
        """Variant ``dbfail`` (survive mode): the first database write
        the thread of ``step`` makes from the step on (the API
        database's or a cell's) fails with DBConnectionError
        (tracker.db_fault). The operation goes on as nova makes it; once
        it has settled the survivor property is checked.

        :returns: whether the run goes on to the checks
        """
        tracker = self.tracker
        reached, error = self._drive_with_fault(step, 'dbfail')
        if not reached:
            return False
        if tracker.fault_applied is None:
            self._outcome_.result = 'N/A'
            self._outcome_.details = ['no database write in the step\'s '
                                      'thread']
            return False
        self._outcome_.details.append('failed: ' + tracker.fault_applied)
        if error:
            self._outcome_.details.append('operation: ' + error)
        self.settle()
        return True

    def _restart(self, step, survive=False):
        """Variant ``restart``: the service running ``step`` restarts
        there. The step is held, then its thread ends at the hold
        (tracker.Killed: nothing nova would have done after it runs, the
        caller of an RPC call gets no reply) and the service is restarted
        (a compute's init_host recovery runs, its guests as they were).
        Once nova has settled, the user deletes each server still there,
        which must go (_retry_delete).

        :returns: whether the run goes on to the checks
        """
        tracker = self.tracker
        tracker.arm(target=step)
        if not self._drive_to_held_step():
            return False
        restart = self._restarter(step, tracker.held_owner)
        tracker.kill = True
        tracker.release.set()
        if not tracker.killed.wait(DELETE_TIMEOUT):
            self._outcome_.error('the killed step did not end within %ss'
                                 % DELETE_TIMEOUT)
            return False
        restart()
        self.settle()
        if not self._driver_done.wait(OP_TIMEOUT):
            self._outcome_.error('the operation did not finish once its '
                                 'service restarted')
            return False
        if self._driver_error:
            self._outcome_.details.append(
                'operation: ' + self._driver_error[0])
        if survive:
            return True
        self.deleted.set()
        return self._retry_delete()

    def _fault_and_survive(self, step, variant):
        """Mode ``survive``: the fault of ``variant`` at ``step``, and no
        delete. Once the fault has cleared and nova has settled, the
        survivor property is checked (_survive); then the user deletes
        each server, which must go (_retry_delete), and the checks of the
        delete mode follow (_check).

        ``timeout`` and ``restart`` are the delete mode's faults. ``down``:
        the API sees the compute of the server down from the held step on;
        once the operation has settled, that compute restarts and is up
        again. ``outage``: placement is unreachable for nova's services
        from the held step until the operation has settled.

        :returns: whether the run goes on to the checks
        """
        if variant == 'timeout':
            if not self._timeout(step, survive=True):
                return False
        elif variant == 'restart':
            if not self._restart(step, survive=True):
                return False
        elif variant == 'dbfail':
            if not self._dbfail(step):
                return False
        elif not self._hold_and_fault(step, variant):
            return False
        self.operation.restore(self)
        self.settle()
        self._survive(later=True)
        self.deleted.set()
        return self._retry_delete()

    def _operation_ends(self):
        """The held step released: the operation runs to its end (its
        error noted) and nova settles; False (an ERROR) if it does not
        end within OP_TIMEOUT.
        """
        if not self._driver_done.wait(OP_TIMEOUT):
            self._outcome_.error('the operation did not finish once the '
                                 'step was released')
            return False
        if self._driver_error:
            self._outcome_.details.append(
                'operation: ' + self._driver_error[0])
        self.settle()
        return True

    def _audit_and_survive(self, step):
        """Mode ``audit``: the operation runs to ``step`` and is held
        there while nova-fixes audit runs with heal; released, it runs to
        its end. Nothing is wrong at a step of an undisturbed operation,
        so whatever the audit changed is a false positive (WRONG, with
        its verdict and evidence), as is an audit that fails. Then the
        survivor property, the delete and the delete mode's checks, as
        in the survive mode: the audit must have left nova able to finish.

        :returns: whether the run goes on to the checks
        """
        from nova_fixes import audit
        tracker = self.tracker
        tracker.arm(target=step)
        if not self._drive_to_held_step():
            return False
        healed = []
        try:
            report = audit.audit(nova_context.get_admin_context(), heal=True)
        except audit.AuditError as e:
            healed.append('audit: failed at the held step: %s' % e)
        else:
            for v in report.verdicts:
                if v.verdict in audit.WRONG and v.healed and (
                        v.healed.startswith('healed')):
                    healed.append('audit: healed %s %s (%s of %s): %s'
                                  % (v.verdict, v.consumer, v.kind,
                                     v.server, v.evidence))
        tracker.release.set()
        if not self._operation_ends():
            return False
        self.operation.restore(self)
        self.settle()
        self._survive()
        self._survivor_findings[1].extend(healed)
        self.deleted.set()
        return self._retry_delete()

    def _hold_and_fault(self, step, variant):
        """The operation runs to ``step``, held there while the fault of
        ``variant`` (down, outage) starts; released, it runs to its end;
        then the fault clears.
        """
        tracker = self.tracker
        tracker.arm(target=step)
        if variant == 'outage':
            _, self._outage = self.placement_down()
            self._outage.clear()
        if not self._drive_to_held_step():
            return False
        self._down_host = None
        if variant == 'down':
            if not self.servers_known.wait(DELETE_TIMEOUT):
                self._outcome_.error('the API had not returned the '
                                     'servers when the step was reached')
                tracker.release.set()
                return False
            host = self.admin_api.get_server(
                self.servers[0]['id'])['OS-EXT-SRV-ATTR:host']
            if host is None:
                self._outcome_.result = 'N/A'
                self._outcome_.details = ['no compute holds the server']
                tracker.release.set()
                return False
            self._down_host = host
            self.compute_down(host)
        else:
            self._outage.set()
        tracker.release.set()
        if not self._operation_ends():
            return False
        if self._outage is not None:
            self._outage.clear()
            self.settle()
        if self._down_host:
            self.bring_up(self._down_host)
            self.settle()
        return True

    def _restarter(self, step, who):
        """What restarts the service that runs ``step`` (on host ``who``):
        a compute (ComputeManager, topics compute and compute-alt), the
        conductor or the scheduler.
        """
        if step.owner == 'ComputeManager' or step.owner.startswith(
                'compute'):
            if who not in self.computes:
                raise RuntimeError('step %s runs on %r, which is no compute'
                                   % (step.label, who))

            def restart():
                self.computes[who] = self.restart_compute_service(
                    self.computes[who])
            return restart
        for name, owners in (('conductor', ('ComputeTaskManager',
                                            'ConductorManager')),
                             ('scheduler', ('SchedulerManager',))):
            if step.owner in owners or step.owner.startswith(name):
                break
        else:
            raise RuntimeError('no service known to run step %s'
                               % step.label)

        def restart():
            service, args, kwargs = self._services[name]
            service.stop()
            self.start_service(name, *args, **kwargs)
        return restart

    def _drive(self, timeout, wait):
        """Run the operation in a thread of its own."""
        self._driver_done = threading.Event()
        self._driver_error = []

        def driver():
            try:
                self.operation.run(self)
                self.settle()
            except Stop:
                pass
            except Exception as e:
                self._driver_error.append('%s: %s' % (type(e).__name__, e))
            finally:
                self._driver_done.set()
                self.tracker.wake.set()
                self.tracker.notify()

        thread = threading.Thread(target=driver, daemon=True)
        thread.start()
        if wait:
            if not self._driver_done.wait(timeout):
                return 'the operation did not finish within %ss' % timeout
            return self._driver_error[0] if self._driver_error else None

    def _drive_to_held_step(self):
        """Start the operation (the tracker armed at its step) and wait
        until the step is held: whichever comes first, the step is reached
        or the operation ends without reaching it.

        :returns: whether the step is held (otherwise the outcome says why)
        """
        tracker = self.tracker
        self._drive(OP_TIMEOUT, wait=False)
        reached = tracker.wake.wait(OP_TIMEOUT)
        if not tracker.reached.is_set():
            self._outcome_.error(
                'step not reached: the operation %s without it' % (
                    'ended (%s)' % self._driver_error[0]
                    if self._driver_error else 'ended'
                    if reached else 'timed out'))
            return False
        if tracker.hold_error:
            self._outcome_.error(tracker.hold_error)
            tracker.release.set()
            return False
        self._outcome_.held_owner = tracker.held_owner
        return True

    def _inject(self, variant):
        down = variant == 'down'
        tracker = self.tracker
        if not self._drive_to_held_step():
            return False
        if not self.servers_known.wait(DELETE_TIMEOUT):
            self._outcome_.error('the API had not returned the servers '
                               'when the step was reached (it waits on '
                               'the held step)')
            tracker.release.set()
            return False
        if variant == 'outage':
            # Placement is unreachable for nova's services from the held
            # step until the operation has settled.
            self._outage.set()
        before = (tracker.deletes_sent, tracker.deletes_done)
        waited = self._delete_all(down=down)
        if not waited and not self.delete_waits:
            waited = self._wait_for_the_compute(*before)
        tracker.release.set()
        for event in self._open_gates_after:
            event.set()
        if waited:
            self._outcome_.error(waited)
            self._wait_deletes()
            return False
        if self.delete_waits:
            if not self._wait_deletes(DELETE_TIMEOUT):
                self._outcome_.error(
                    'the API\'s DELETE waited for the lock of the held '
                    'step and did not return within %ss once the step was '
                    'released' % DELETE_TIMEOUT)
                return False
            self._delete_errors()
        if not self._operation_ends():
            return False
        if self._down_host:
            self.bring_up(self._down_host)
            self.settle()
        return True

    def _retry_after_outage(self):
        """Placement is back: the user deletes again each server still
        there (_retry_delete).
        """
        self._outage.clear()
        self.settle()
        return self._retry_delete()

    def _retry_delete(self):
        """The fault has cleared: the user deletes each server still
        there, and it must go. One that does not within DELETE_TIMEOUT is
        STUCK.

        :returns: whether the run goes on to the checks
        """
        self._stuck = []
        for server in self.servers:
            try:
                self.api.delete_server(server['id'])
            except api_client.OpenStackApiNotFoundException:
                continue
            except Exception as e:
                self._outcome_.details.append(
                    'DELETE after the fault: %s: %s' % (type(e).__name__,
                                                        e))
        for server in self.servers:
            deadline = time.monotonic() + DELETE_TIMEOUT
            while (not self._gone(server['id']) and
                   time.monotonic() < deadline):
                # The API is polled, as a user would: the last step of a
                # delete (the record destroyed) sends no message.
                time.sleep(0.1)
            if not self._gone(server['id']):
                current = self.admin_api.get_server(server['id'])
                self._stuck.append('server %s still there %ss after the '
                                   'DELETE retried once the fault cleared: '
                                   '%s, task_state %s' % (
                                       server['id'][:8], DELETE_TIMEOUT,
                                       current['status'],
                                       current['OS-EXT-STS:task_state']))
        self.settle()
        return True

    def _gone(self, uuid):
        try:
            self.api.get_server(uuid)
        except api_client.OpenStackApiNotFoundException:
            return True
        return False

    def _delete_all(self, down):
        """Delete every server of the operation through the API, each
        request in a thread of its own; with ``down``, the compute of the
        first server is forced down first.

        If the held step has the lock nova takes on a server, and a
        request of the DELETE waits for that lock (the API confirms a
        resize before it deletes, and the compute's confirm_resize takes
        the lock), the DELETE can only return after the step: this returns
        as soon as the request waits, with ``self.delete_waits`` set, and
        the DELETE is waited for once the step is released (_inject).

        :returns: why the harness failed, if the DELETE did not return
        """
        self._down_host = None
        self.delete_waits = False
        if down:
            host = self.admin_api.get_server(
                self.servers[0]['id'])['OS-EXT-SRV-ATTR:host']
            if host is None:
                self._outcome_.result = 'N/A'
                self._outcome_.details = ['no compute holds the server']
            else:
                self._down_host = host
                self.compute_down(host)
        locked = [s['id'] for s in self.servers
                  if tracker_mod.is_locked(s['id'])]
        self.deleted.set()
        self._deletes = []
        self._open_gates_after = list(self.gates.values())
        for server in self.servers:
            done = threading.Event()
            errors = []

            def delete(server=server, done=done, errors=errors):
                try:
                    self.api.delete_server(server['id'])
                except api_client.OpenStackApiNotFoundException:
                    pass
                except Exception as e:
                    errors.append('%s: %s' % (type(e).__name__, e))
                finally:
                    done.set()
                    self.tracker.notify()

            threading.Thread(target=delete, daemon=True).start()
            self._deletes.append((server, done, errors))

        def returned():
            return all(done.is_set() for _, done, _ in self._deletes)

        def waits():
            return any(self.tracker.lock_waits[uuid] for uuid in locked)

        if not self.tracker.wait_for(lambda: returned() or waits(),
                                     DELETE_TIMEOUT):
            return ('the API\'s DELETE waits on the held step (no '
                    'response within %ss)' % DELETE_TIMEOUT)
        if not returned():
            self.delete_waits = True
            return None
        self._delete_errors()
        return None

    def _delete_errors(self):
        for server, done, errors in self._deletes:
            if errors:
                self._outcome_.details.append('DELETE: ' + errors[0])

    def _wait_for_the_compute(self, sent, done):
        """Wait until the compute has deleted the server as the API asked
        it to, unless the held step has the instance lock the compute's
        terminate_instance takes: then the delete can only run after the
        step, and it is released at once. Either way one interleaving,
        every time.

        :returns: why the harness failed, if the compute never finished
        """
        asked = self.tracker.deletes_sent - sent
        if not asked or any(tracker_mod.is_locked(s['id'])
                            for s in self.servers):
            return None
        if not self.tracker.wait_deletes(done + asked, DELETE_TIMEOUT):
            return ('the compute\'s terminate_instance waits on the held '
                    'step (not done within %ss)' % DELETE_TIMEOUT)
        return None

    def _wait_deletes(self, timeout=OP_TIMEOUT):
        """Wait for the DELETE requests: whether they all returned."""
        return self.tracker.wait_for(
            lambda: all(done.is_set() for _, done, _ in self._deletes),
            timeout)

    # -- the invariants ------------------------------------------------

    def _quota_usage(self):
        usage = {}
        for placement in (False, True):
            self.flags(count_usage_from_placement=placement, group='quota')
            absolute = self.api.get_limits()['absolute']
            usage[placement] = {k: absolute[k] for k in (
                'totalInstancesUsed', 'totalCoresUsed', 'totalRAMUsed')}
        self.flags(count_usage_from_placement=False, group='quota')
        return usage

    def _migrations(self, uuid):
        ctxt = nova_context.get_admin_context(read_deleted='yes')
        found = {}
        for cell in self.cell_mappings.values():
            with nova_context.target_cell(ctxt, cell) as cctxt:
                for mig in objects.MigrationList.get_by_filters(
                        cctxt, {'instance_uuid': uuid}):
                    found[mig.uuid] = mig.status
        return found

    # -- the survivor property ------------------------------------------

    def _survive(self, later=False):
        """The survivor property, once the fault has cleared: each
        service that died has run its init_host (it was restarted), and
        every compute runs one pass of its periodics (nova's
        update_available_resource, the reap of running deleted guests and,
        where it exists, the orphan instances task). ``later`` (the
        survive mode, after a fault): nova's update_available_resource
        runs as the services would see it an hour later (LATER), when a
        server has lived through the fault for a while; a move that
        nothing will end is taken for one only after a grace. Then every
        server that was not deleted:

        - holds exactly its flavor on the node where its guest runs, and
          nothing anywhere else; in VERIFY_RESIZE, the instance consumer
          its new flavor on the destination and the migration consumer its
          old flavor on the source, as nova defines it (LEAK: something
          held beyond that; WRONG: held elsewhere or missing);
        - has no migration consumer left of a move that is over, and no
          migration left in progress once nothing moves it (WRONG);
        - has no task state, which nothing would clear (STUCK);
        - is counted once by the quota, in both counting modes (WRONG).

        What it finds is kept for _check, which adds the delete's checks.
        """
        self._survivor_findings = ([], [], [])
        if self._outcome_.result in ('ERROR', 'N/A'):
            return
        if later:
            when = timeutils.utcnow() + LATER
            with mock.patch('oslo_utils.timeutils.utcnow',
                            return_value=when):
                self._run_periodics()
        else:
            self._run_periodics()
        self._run_cleanup_periodics()
        self.settle()
        leaks, wrong, stuck = self._survivor_findings
        names = {rp['uuid']: rp['name'] for rp in self._get_all_providers()}
        held = self._all_allocations()
        ours = set()
        expected_usage = {False: collections.Counter(),
                          True: collections.Counter()}
        for server in self.servers:
            uuid = server['id']
            try:
                shown = self.admin_api.get_server(uuid)
            except api_client.OpenStackApiNotFoundException:
                wrong.append('survive: server %s is gone, and nobody '
                             'deleted it' % uuid[:8])
                continue
            migrations = self._migration_objects(uuid)
            ours |= {uuid} | {m.uuid for m in migrations}
            expected, findings = self._survivor_expected(shown, migrations)
            wrong += findings[0]
            stuck += findings[1]
            for consumer in sorted({uuid} | {m.uuid for m in migrations}):
                has = held.get(consumer, {})
                wants = expected.get(consumer, {})
                if has == wants:
                    continue
                what = ('instance %s' % uuid[:8] if consumer == uuid else
                        'migration %s (%s)' % (consumer[:8], next(
                            m.status for m in migrations
                            if m.uuid == consumer)))
                line = 'survive: %s (server %s) holds %s, not %s' % (
                    what, shown['status'], _allocs(has, names),
                    _allocs(wants, names))
                extra = any(rp not in wants or any(
                    n > wants[rp].get(rc, 0) for rc, n in res.items())
                    for rp, res in has.items())
                (leaks if extra else wrong).append(line)
            instance = self._instance_of(uuid)
            if instance is None:
                continue
            expected_usage[False].update(
                instances=1, cores=instance.flavor.vcpus,
                ram=instance.flavor.memory_mb)
            expected_usage[True].update(instances=1)
            for allocs in expected.values():
                for res in allocs.values():
                    expected_usage[True].update(
                        cores=res.get('VCPU', 0),
                        ram=res.get('MEMORY_MB', 0))
        for consumer, allocs in sorted(held.items()):
            if consumer not in ours:
                leaks.append('survive: consumer %s, no server\'s, holds %s'
                             % (consumer[:8], _allocs(allocs, names)))
        usage = self._quota_usage()
        for placement, used in sorted(usage.items()):
            was = self.baseline[placement]
            want = expected_usage[placement]
            drift = ['%s %s, not %s' % (
                key[5:-4].lower(), used[key] - was[key],
                want[key[5:-4].lower()]) for key in sorted(used)
                if used[key] - was[key] != want[key[5:-4].lower()]]
            if drift:
                wrong.append('survive: quota usage counted from %s: %s' % (
                    'placement' if placement else 'the cells',
                    ', '.join(drift)))

    def _survivor_expected(self, shown, migrations):
        """What a server that survived holds, as nova defines it:
        ({consumer: {provider: resources}}, (wrong, stuck)).
        """
        uuid = shown['id']
        wrong, stuck = [], []
        status = shown['status']
        task_state = shown['OS-EXT-STS:task_state']
        host = shown['OS-EXT-SRV-ATTR:host']
        if task_state is not None:
            stuck.append('survive: server %s is %s in task state %s, '
                         'which nothing clears' % (uuid[:8], status,
                                                   task_state))
        elif status in ('BUILD', 'MIGRATING', 'RESIZE', 'REBUILD'):
            stuck.append('survive: server %s is %s with no task state'
                         % (uuid[:8], status))
        finished = [m for m in migrations if m.status == 'finished']
        resized = status == 'VERIFY_RESIZE' and len(finished) == 1
        for m in migrations:
            if m.status in base.DONE_MIGRATION_STATUSES:
                continue
            if resized and m is finished[0]:
                continue
            if task_state is None:
                wrong.append('survive: migration %s of server %s left %s, '
                             'and nothing moves it' % (
                                 m.uuid[:8], uuid[:8], m.status))
        instance = self._instance_of(uuid)
        if instance is None or not host or status == 'SHELVED_OFFLOADED':
            return {}, (wrong, stuck)
        guests = sorted(h for h, c in self.computes.items()
                        if uuid in c.manager.driver.instances)
        if host not in guests and status != 'ERROR':
            wrong.append('survive: server %s is %s on %s, its guest on %s'
                         % (uuid[:8], status, host,
                            ', '.join(guests) or 'no host'))
        expected = {uuid: {self._get_provider_uuid_by_host(
            instance.node): _resources(instance, instance.flavor)}}
        if resized:
            mig = finished[0]
            expected[mig.uuid] = {self._get_provider_uuid_by_host(
                mig.source_node): _resources(instance, instance.old_flavor)}
        return expected, (wrong, stuck)

    def _instance_of(self, uuid):
        """The server's instance in its cell (with its flavors), or None
        once it is deleted.
        """
        try:
            mapping = objects.InstanceMapping.get_by_instance_uuid(
                self.ctxt, uuid)
        except exception.InstanceMappingNotFound:
            return None
        if mapping.cell_mapping is None:
            return None
        with nova_context.target_cell(self.ctxt,
                                      mapping.cell_mapping) as cctxt:
            try:
                return objects.Instance.get_by_uuid(
                    cctxt, uuid,
                    expected_attrs=['flavor', 'old_flavor', 'new_flavor'])
            except exception.InstanceNotFound:
                return None

    def _migration_objects(self, uuid):
        found = []
        for cell in self.cell_mappings.values():
            with nova_context.target_cell(self.ctxt, cell) as cctxt:
                found += list(objects.MigrationList.get_by_filters(
                    cctxt, {'instance_uuid': uuid}))
        return found

    def _check(self):
        if self._outcome_.result in ('ERROR', 'N/A'):
            return
        self.settle()
        uuids = [s['id'] for s in self.servers]
        consumers = {uuid: 'instance' for uuid in uuids}
        for uuid in uuids:
            for mig, status in self._migrations(uuid).items():
                consumers[mig] = 'migration (%s)' % status
        leaks, wrong = self._invariants(uuids, consumers, '')
        self.archive_and_run_periodics()
        self._run_cleanup_periodics()
        self.settle()
        leaks2, wrong2 = self._invariants(
            uuids, consumers, ' after archive and periodics')
        leaks += [leak for leak in leaks2
                  if leak.split(' after')[0] not in leaks]
        wrong += wrong2
        survived = getattr(self, '_survivor_findings', ([], [], []))
        leaks = survived[0] + leaks
        wrong = survived[1] + wrong
        self._stuck = survived[2] + self._stuck
        failed = [d for d in self._outcome_.details
                  if d.startswith('DELETE: ')]
        if failed and any(w.startswith('instance %s not deleted' % u[:8])
                          for w in wrong for u in uuids):
            # The DELETE failed and left the server: what it still holds
            # is a live server's, no leak; the failed DELETE is what is
            # wrong.
            self._outcome_.result = 'WRONG'
            self._outcome_.details += [
                'the DELETE failed and the server is not deleted'
            ] + wrong + ['(left with the server) ' + leak for leak in leaks]
        elif leaks:
            self._outcome_.result = 'LEAK'
            self._outcome_.details += leaks + wrong + self._stuck
        elif self._stuck:
            self._outcome_.result = 'STUCK'
            self._outcome_.details += self._stuck + wrong
        elif wrong:
            self._outcome_.result = 'WRONG'
            self._outcome_.details += wrong
        else:
            self._outcome_.result = 'OK'

    def archive_and_run_periodics(self):
        """The functional base's, with one pass of archive_deleted_rows:
        a run leaves far fewer than max_rows deleted rows, and the pass
        that until_complete adds to find nothing left costs a second a
        run.
        """
        manage.DbCommands().archive_deleted_rows(
            max_rows=1000, until_complete=False, all_cells=True)
        self._run_periodics()

    def _run_cleanup_periodics(self):
        """nova's running-deleted reap and, where it exists, the orphan
        instances task of nova-fixes, on every compute.
        """
        for host, compute in self.computes.items():
            manager = compute.manager
            with nova_context.target_cell(
                    self.ctxt, self.host_mappings[host].cell_mapping) as cc:
                manager._cleanup_running_deleted_instances(cc)
                tasks = dict(manager._periodic_tasks)
                if '_cleanup_orphan_instances' in tasks:
                    tasks['_cleanup_orphan_instances'](manager, cc)

    def _invariants(self, uuids, consumers, when):
        names = {rp['uuid']: rp['name'] for rp in self._get_all_providers()}
        leaks = []
        notes = self._outcome_.notes
        for consumer, allocs in sorted(self._all_allocations().items()):
            for rp, resources in sorted(allocs.items()):
                leaks.append('%s %s on %s: %s%s' % (
                    consumers.get(consumer, 'consumer'), consumer[:8],
                    names.get(rp, rp[:8]), ','.join(
                        '%s=%s' % kv for kv in sorted(resources.items())),
                    when))
        wrong = []
        usage = self._quota_usage()
        for placement, used in sorted(usage.items()):
            was = self.baseline[placement]
            drift = ['%s %s (was %s)' % (key[5:-4].lower(), used[key],
                                         was[key])
                     for key in sorted(used) if used[key] != was[key]]
            if drift:
                wrong.append('quota usage counted from %s: %s%s' % (
                    'placement' if placement else 'the cells',
                    ', '.join(drift), when))
        for uuid in uuids:
            try:
                mapping = objects.InstanceMapping.get_by_instance_uuid(
                    self.ctxt, uuid)
                if not mapping.queued_for_delete:
                    wrong.append('instance mapping of %s not queued for '
                                 'delete%s' % (uuid[:8], when))
            except exception.InstanceMappingNotFound:
                pass
            for host, compute in sorted(self.computes.items()):
                if uuid in compute.manager.driver.instances:
                    # A guest the delete could not reach (its compute was
                    # down, or it is the other end of a move) is nova's
                    # periodics' to reap: noted until they have run.
                    (wrong if when else notes).append(
                        'guest of %s left on %s%s' % (uuid[:8], host, when))
            for name, cell in sorted(self.cell_mappings.items()):
                with nova_context.target_cell(self.ctxt, cell) as cctxt:
                    try:
                        objects.Instance.get_by_uuid(cctxt, uuid)
                    except exception.InstanceNotFound:
                        continue
                wrong.append('instance %s not deleted in %s%s' % (
                    uuid[:8], name, when))
        return leaks, wrong


def _resources(instance, flavor):
    """What nova allocates for ``flavor`` (nonzero resource classes)."""
    return {rc: n for rc, n in scheduler_utils.resources_from_flavor(
        instance, flavor).items() if n}


def _allocs(allocs, names):
    if not allocs:
        return 'nothing'
    return '; '.join('%s on %s' % (','.join(
        '%s=%s' % kv for kv in sorted(res.items())), names.get(rp, rp[:8]))
        for rp, res in sorted(allocs.items()))


def _last_frames():
    return traceback.format_exc(limit=-3).strip().replace('\n', ' | ')


def nova_fixtures_module():
    from nova.tests import fixtures as nova_fixtures
    return nova_fixtures
