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

"""The steps of a server operation, and a hold at one of them.

A Tracker sees, once armed:

- every RPC message a nova service takes from the fake transport, at the
  point its RPC server is about to dispatch it: an ``rpc`` step named
  after the topic and the method (the sender has gone on);
- the entry of every method of nova's compute, conductor and scheduler
  managers: an ``entry`` step named after the class and the method (the
  entry of the method an RPC message calls is that message's step);
- what is still in flight: messages queued for a running listener or
  being processed, and tasks nova spawned (thread_pool_factory.spawn_on),
  so that ``settle`` can wait until nothing is left to run.

A step is (kind, owner, method, occurrence): the occurrence counts the
calls of that owner's method since the tracker was armed, which keeps a
step's name stable when threads interleave differently.
"""

import collections
import contextlib
import functools
import inspect
import threading


class Killed(BaseException):
    """The service running the held step restarts there (the explorer's
    variant ``restart``): the step's thread ends at the hold, and nothing
    nova would have done after it runs. A BaseException, so that nova's
    ``except Exception`` handlers (reverting task states, faults) do not
    run either, as they would not in a process that died.
    """


#: Managers whose method entries are steps (module, class).
MANAGERS = (
    ('nova.compute.manager', 'ComputeManager'),
    ('nova.conductor.manager', 'ComputeTaskManager'),
    ('nova.conductor.manager', 'ConductorManager'),
    ('nova.scheduler.manager', 'SchedulerManager'),
)

#: Methods whose entry is no step (names, or prefixes ending in '_'): they
#: read, validate, notify or convert, or handle what the explored servers
#: have not got (volumes, accelerators, ports), so that a delete racing
#: with their entry is the race of the step before or after them. The
#: tracker's ``all_entries`` makes every method a step.
NOT_STEPS = (
    # periodic and per-request chatter
    'reset', 'update_available_resource', 'object_class_action_versions',
    'object_action', '_update_scheduler_instance_info',
    '_delete_scheduler_instance_info', 'update_instance_info',
    'delete_instance_info', 'sync_instance_info',
    # reads, checks, notifications, conversions
    '_get_', '_is_', '_check_', '_validate_', '_send_', '_notify_',
    '_default_', '_decode_files', '_add_missing_dev_names',
    '_error_out_instance_on_exception', '_start_recorded_task',
    '_fill_provider_mapping_based_on_allocs', '_ensure_sufficient_hosts',
    '_build_cold_migrate_task', '_build_live_migrate_task',
    '_live_migration_cleanup_flags', '_source_can_numa_live_migrate',
    '_dest_can_numa_live_migrate', '_consoles_enabled',
    '_clean_instance_console_tokens', '_update_resource_tracker',
    '_update_available_resource_for_node', '_unshelve_instance_key_',
    # the scheduler: its RPC step is the one before its claim
    '_select_destinations', '_schedule', '_get_all_host_states',
    '_get_sorted_hosts', '_get_alternate_hosts',
    # volumes, accelerators, ports: the explored servers have none
    '_update_bdm_', '_complete_volume_attachments',
    '_delete_volume_attachments',
    '_update_volume_attachments', '_terminate_volume_connections',
    '_create_arqs_for_ports', '_create_and_bind_arqs',
    '_create_and_bind_arq_for_instance', '_delete_arqs_for_instance',
    '_prep_block_device', '_allocate_network_async', '_allocate_network',
    '_build_networks_for_instance', '_rollback_volume_bdms',
    '_remove_remote_volume_connections',
    '_post_live_migration_remove_source_vol_connections',
    '_update_migrate_vifs_profile_with_pci', '_flavor_based_pci_claim',
    '_claim_pci_for_instance_vifs', '_delete_snapshot_of_shelved_instance',
)


def is_step(name, all_entries=False):
    if all_entries:
        return True
    return not any(name == n or (n.endswith('_') and name.startswith(n))
                   for n in NOT_STEPS)


class Step(collections.namedtuple('Step', 'kind owner method occurrence')):

    @property
    def label(self):
        if self.kind == 'rpc':
            name = 'rpc %s.%s' % (self.owner, self.method)
        else:
            name = '%s.%s' % (self.owner, self.method)
        return name if self.occurrence == 1 else '%s#%d' % (
            name, self.occurrence)


class Tracker(object):
    """Records steps, holds one, and knows when nova has settled."""

    def __init__(self, cell_lock=None, all_entries=False):
        self.all_entries = all_entries
        self._cond = threading.Condition()
        self._cell_lock = cell_lock
        self.armed = False
        self.recording = False
        self.steps = []
        #: Steps recorded where a hold would deadlock the cell DB fixture.
        self.unholdable = []
        #: The recorded RPC steps that were casts: a cast has no reply to
        #: lose, so the timeout variant need not run them.
        self.casts = []
        self._counts = collections.Counter()
        self._local = threading.local()
        # The hold, or the fault made at the target instead (``fault``
        # 'timeout': the RPC call's reply is lost, see _lose_reply).
        self.target = None
        self.fault = None
        #: What the fault found at the target: 'call' (its reply was
        #: lost), 'cast' (no reply to lose) or 'entry' (no RPC message).
        self.fault_applied = None
        self.reached = threading.Event()
        #: Set when the target is reached (or the operation has ended).
        self.wake = threading.Event()
        self.release = threading.Event()
        #: Set before ``release``: the held step ends there (Killed).
        self.kill = False
        #: Set once the killed step's thread has unwound.
        self.killed = threading.Event()
        self.held_owner = None
        self.hold_error = None
        # What is in flight.
        self._polled = 0
        self._tasks = 0
        #: terminate_instance messages sent, and processed.
        self.deletes_sent = 0
        self.deletes_done = 0
        self._listeners = set()
        self._exchanges = []
        #: Threads waiting for the internal lock of each name (nova's
        #: utils.synchronized(instance.uuid)), while another thread has it.
        self.lock_waits = collections.Counter()

    # -- arming --------------------------------------------------------

    def arm(self, record=False, target=None, fault=None):
        with self._cond:
            self.armed = True
            self.recording = record
            self.target = target
            self.fault = fault
            self.fault_applied = None
            self._counts.clear()

    def disarm(self):
        with self._cond:
            self.armed = False
            self.recording = False

    # -- steps ---------------------------------------------------------

    def _in_target_cell(self):
        lock = self._cell_lock
        return lock is not None and (lock.is_reader() or lock.is_writer())

    def step(self, kind, owner, method, who=None, cast=False):
        """A nova thread is at a step: record it, hold it if it is the
        target.

        :param cast: the step is an RPC message with no reply to wait for
        """
        with self._cond:
            if not self.armed:
                return
            self._counts[(kind, owner, method)] += 1
            step = Step(kind, owner, method,
                        self._counts[(kind, owner, method)])
            in_cell = self._in_target_cell()
            if self.recording:
                (self.unholdable if in_cell else self.steps).append(step)
                if cast:
                    self.casts.append(step)
            hit = step == self.target and not self.reached.is_set()
            if hit:
                self.held_owner = who
                if in_cell:
                    self.hold_error = ('the step runs inside target_cell '
                                       'this time: holding it would '
                                       'deadlock the cell DB fixture')
        if not hit:
            return
        if self.fault == 'dbfail':
            # No hold: the first database write this thread makes from
            # here on fails (db_fault).
            self._local.dbfail = True
            self.reached.set()
            self.wake.set()
            return
        if self.fault is not None:
            # No hold: the RPC server that took the message makes the
            # fault (process_incoming), in this thread.
            if kind == 'rpc':
                self._local.fault = self.fault
            else:
                self.fault_applied = 'entry'
            self.reached.set()
            self.wake.set()
            return
        self.reached.set()
        self.wake.set()
        if self.hold_error:
            return
        if not self.release.wait(HOLD_TIMEOUT):
            self.hold_error = 'the hold was never released'
        elif self.kill:
            # Whatever nova's finally blocks make of it on the way up
            # (one may raise another exception), the thread is marked.
            self._local.killed = True
            raise Killed()

    def _killable(self, func, message, *args, **kwargs):
        """Run ``func`` at the top of a thread of nova's: a killed step's
        thread ends there (_unwound).
        """
        try:
            return func(*args, **kwargs)
        except BaseException:
            if not self._unwound(message):
                raise

    def _step_and_process(self, process, server, incoming, method):
        if is_step(method, self.all_entries):
            self.step('rpc', server._target.topic, method,
                      who=server._target.server,
                      cast=getattr(incoming[0], '_reply_q', None) is None)
        return self._process(process, server, incoming)

    def _unwound(self, message=None):
        """The top of a thread of nova's caught BaseException: True if
        the thread is a killed step's, which has unwound (_killed).
        """
        if not getattr(self._local, 'killed', False):
            return False
        self._local.killed = False
        self._killed(message)
        return True

    def _killed(self, message=None):
        """A killed step's thread has unwound. If it ran an RPC call, its
        caller gets no reply: its timeout fires (at once, as in
        _lose_reply).
        """
        reply_q = getattr(message, '_reply_q', None)
        if reply_q is not None:
            import oslo_messaging
            message._reply_q = None
            reply_q.put((None, oslo_messaging.MessagingTimeout(
                'Timed out waiting for a reply to %s (its service '
                'restarted: the explorer)' % message.message.get(
                    'method'))))
        self.killed.set()

    # -- in flight -------------------------------------------------------

    def _queued(self):
        count = 0
        for exchange in self._exchanges:
            with exchange._queues_lock:
                for key, queue in exchange._server_queues.items():
                    if key in self._listeners:
                        count += len(queue)
                for (topic, pool), queue in exchange._topic_queues.items():
                    if (topic, None) in self._listeners:
                        count += len(queue)
        return count

    def wait_deletes(self, count, timeout):
        """Wait until ``count`` terminate_instance messages have been
        processed by their compute.
        """
        with self._cond:
            return self._cond.wait_for(
                lambda: self.deletes_done >= count, timeout)

    def wait_for(self, predicate, timeout):
        """Wait until ``predicate()`` holds (checked whenever the tracker
        is notified: a message, a task or a lock wait changed).
        """
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def busy(self):
        return self._polled + self._tasks + self._queued()

    def notify(self):
        with self._cond:
            self._cond.notify_all()

    def settle(self, timeout):
        """Wait until nothing nova started is queued or running.

        :returns: True once settled, False if ``timeout`` passed first
        """
        with self._cond:
            return self._cond.wait_for(lambda: self.busy() == 0, timeout)

    # -- the hooks -------------------------------------------------------

    def hooks(self):
        """(dotted name, replacement) for every hook of the tracker."""
        from oslo_messaging._drivers import impl_fake
        from oslo_messaging.rpc import server as rpc_server

        from nova import thread_pool_factory

        tracker = self
        hooks = []

        listener_init = impl_fake.FakeListener.__init__
        listener_stop = impl_fake.FakeListener.stop
        exchange_poll = impl_fake.FakeExchange.poll

        def _keys(listener):
            return [(t.topic, t.server) for t in listener._targets]

        def init(listener, exchange_manager, targets, pool=None):
            listener_init(listener, exchange_manager, targets, pool)
            with tracker._cond:
                tracker._listeners.update(_keys(listener))
                for target in listener._targets:
                    exchange = exchange_manager.get_exchange(target.exchange)
                    if exchange not in tracker._exchanges:
                        tracker._exchanges.append(exchange)

        def stop(listener):
            with tracker._cond:
                tracker._listeners.difference_update(_keys(listener))
                tracker._cond.notify_all()
            return listener_stop(listener)

        def poll(exchange, target, pool):
            # Taken from its queue and counted at once: the message is
            # never out of sight of settle().
            with tracker._cond:
                message = exchange_poll(exchange, target, pool)
                if message[1] is not None:
                    tracker._polled += 1
            return message

        deliver = impl_fake.FakeExchange.deliver_message

        def deliver_message(exchange, topic, ctxt, message, *args,
                            **kwargs):
            try:
                return deliver(exchange, topic, ctxt, message, *args,
                               **kwargs)
            finally:
                with tracker._cond:
                    if message.get('method') == DELETE_METHOD:
                        tracker.deletes_sent += 1
                    tracker._cond.notify_all()

        process = rpc_server.RPCServer._process_incoming

        def process_incoming(server, incoming):
            try:
                method = incoming[0].message.get('method')
                tracker._local.rpc = method
                return tracker._killable(
                    tracker._step_and_process, incoming[0], process, server,
                    incoming, method)
            finally:
                tracker._local.rpc = None
                tracker._local.dbfail = False
                with tracker._cond:
                    tracker._polled -= len(incoming)
                    if method == DELETE_METHOD:
                        tracker.deletes_done += 1
                    tracker._cond.notify_all()

        spawn_on = thread_pool_factory.spawn_on

        def tracked_spawn_on(executor_type, func, *args, **kwargs):
            @functools.wraps(func)
            def task(*a, **kw):
                try:
                    return tracker._killable(func, None, *a, **kw)
                finally:
                    tracker._local.dbfail = False
                    with tracker._cond:
                        tracker._tasks -= 1
                        tracker._cond.notify_all()

            with tracker._cond:
                tracker._tasks += 1
            try:
                return spawn_on(executor_type, task, *args, **kwargs)
            except BaseException:
                with tracker._cond:
                    tracker._tasks -= 1
                raise

        fake = 'oslo_messaging._drivers.impl_fake.'
        hooks += [
            (fake + 'FakeListener.__init__', init),
            (fake + 'FakeListener.stop', stop),
            (fake + 'FakeExchange.poll', poll),
            (fake + 'FakeExchange.deliver_message', deliver_message),
            ('oslo_messaging.rpc.server.RPCServer._process_incoming',
             process_incoming),
            ('nova.thread_pool_factory.spawn_on', tracked_spawn_on),
            ('oslo_concurrency.lockutils.lock', self._lock_hook()),
        ]
        for module, name in MANAGERS:
            hooks += self._manager_hooks(module, name)
        return hooks

    def db_fault(self, conn, cursor, statement, parameters, context,
                 executemany):
        """SQLAlchemy's before_cursor_execute, for every engine: the fault
        ``dbfail`` makes the first write (INSERT, UPDATE, DELETE) of the
        target step's thread to one of nova's databases (the API
        database, a cell's) fail as a database that went away does.
        """
        if not getattr(self._local, 'dbfail', False):
            return
        verb = statement.lstrip().split(None, 1)[0].upper()
        if verb not in ('INSERT', 'UPDATE', 'DELETE'):
            return
        from placement import db_api as placement_db
        if conn.engine is placement_db.get_placement_engine():
            # Placement runs in process, in the caller's thread: its
            # database is not nova's.
            return
        self._local.dbfail = False
        self.fault_applied = ' '.join(statement.split()[:3])
        from oslo_db import exception as db_exc
        raise db_exc.DBConnectionError(RuntimeError(
            'the explorer failed this write: %s' % self.fault_applied))

    def _process(self, process, server, incoming):
        """The RPC server processes the message, with the fault the
        target step makes, if it is this one.
        """
        if getattr(self._local, 'fault', None) == 'timeout':
            self._local.fault = None
            return self._lose_reply(process, server, incoming)
        return process(server, incoming)

    def _lose_reply(self, process, server, incoming):
        """The ``timeout`` fault: the callee runs the RPC call, its reply
        is lost, and the caller's timeout fires (at once, rather than
        after rpc_response_timeout: the same for the caller, and every
        run takes one interleaving, the callee done first). A cast has
        no reply to lose: it runs as it is.
        """
        message = incoming[0]
        reply_q = getattr(message, '_reply_q', None)
        if reply_q is None:
            self.fault_applied = 'cast'
            return process(server, incoming)
        self.fault_applied = 'call'
        message._reply_q = None
        try:
            return process(server, incoming)
        finally:
            import oslo_messaging
            reply_q.put((None, oslo_messaging.MessagingTimeout(
                'Timed out waiting for a reply to %s (the explorer lost '
                'it)' % message.message.get('method'))))

    def _lock_hook(self):
        """oslo.concurrency's lock(), counting the threads that wait for a
        lock another thread has (lock_waits): the explorer learns that a
        request waits on the held step.
        """
        from oslo_concurrency import lockutils
        lock = lockutils.lock
        tracker = self

        @contextlib.contextmanager
        def tracked_lock(name, *args, **kwargs):
            waiting = [is_locked(name)]
            if waiting[0]:
                with tracker._cond:
                    tracker.lock_waits[name] += 1
                    tracker._cond.notify_all()
            try:
                with lock(name, *args, **kwargs) as taken:
                    if waiting[0]:
                        waiting[0] = False
                        with tracker._cond:
                            tracker.lock_waits[name] -= 1
                    yield taken
            finally:
                if waiting[0]:
                    with tracker._cond:
                        tracker.lock_waits[name] -= 1

        return tracked_lock

    def _manager_hooks(self, module_name, class_name):
        import importlib
        cls = getattr(importlib.import_module(module_name), class_name)
        hooks = []
        for name, attr in sorted(vars(cls).items()):
            if not inspect.isfunction(attr) or name.startswith('__'):
                continue
            hooks.append(('%s.%s.%s' % (module_name, class_name, name),
                          self._entry_hook(class_name, name, attr)))
        return hooks

    def _entry_hook(self, class_name, name, original):
        tracker = self

        @functools.wraps(original)
        def entry(manager, *args, **kwargs):
            if tracker.armed:
                if getattr(tracker._local, 'rpc', None) == name:
                    # The method the RPC message calls: its step is the
                    # message's.
                    tracker._local.rpc = None
                elif is_step(name, tracker.all_entries):
                    tracker.step('entry', class_name, name,
                                 who=getattr(manager, 'host', None))
            return original(manager, *args, **kwargs)

        return entry


def is_locked(name):
    """Whether a thread has the internal lock ``name`` of oslo.concurrency
    (nova's utils.synchronized(instance.uuid) takes one).
    """
    from oslo_concurrency import lockutils
    semaphore = lockutils._semaphores._semaphores.get(name)
    if semaphore is None:
        return False
    if hasattr(semaphore, 'locked'):
        return semaphore.locked()
    return semaphore._value <= 0


#: The RPC method through which the API has a compute delete a server.
DELETE_METHOD = 'terminate_instance'

#: How long a held step waits for the explorer to release it.
HOLD_TIMEOUT = 120
