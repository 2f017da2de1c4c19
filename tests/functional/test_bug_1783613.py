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

"""Regression tests for bug 1783613.

Quota usage not decremented during boot/delete races:
https://bugs.launchpad.net/nova/+bug/1783613

nova counts quota usage instead of reserving it: the instances, cores and
RAM a project uses are counted either in the cells' instance records
([quota]count_usage_from_placement = False) or from the instance mappings
that are not queued_for_delete and the project's allocations in placement
(count_usage_from_placement = True). A server deleted while it boots is
therefore still counted if its delete leaves any of these behind: an
allocation in placement, an instance mapping not queued_for_delete, or an
undeleted instance record in a cell. With counting from placement the
first two are the usage itself.

A server being built is handled by two services at once. The API creates a
build request and an instance mapping and casts to the conductor; the
conductor's schedule_and_build_instances has the scheduler claim the
resources in placement, checks that the build request is still there,
creates the instance record in the chosen cell, maps the instance to that
cell, then deletes the build request. A delete of a server not yet on a
host is the API's _delete_while_booting path: it deletes the build request
(that stops the conductor's build), destroys the instance record if it finds
one, and since nova 21.0.0 (commit f35930eef8, bug 1859496) deletes the
allocations and queues the instance mapping for delete
(API._local_delete_cleanup). Each test here forces one interleaving of the
two, deterministically: the racing nova method is wrapped and stopped at a
gate until the test has run the other side through the window.

(a) The API deletes while the conductor has not created the instance record
    yet: the scheduler has claimed, the build request is still there. The
    conductor then finds the build request gone and stops.
(b) The delete arrives between the conductor's check that the build request
    is there and its creation of the instance record: the API finds no
    instance to destroy, the conductor creates the record, finds the build
    request gone when it deletes it and destroys the record itself
    (ComputeTaskManager._delete_build_request).
(c) The conductor destroys the record after the API has looked it up: the
    API's instance.destroy() in _delete_while_booting raises
    InstanceNotFound.
(d) Two delete requests for the same booting server are both in
    _delete_while_booting at once: both have read the build request, one
    deletes it, the other finds it gone.

After each race nothing of the server may be left: the API returns 404 for
it, placement has no allocation for it (nor any consumer that is not a live
server), its instance mapping is queued_for_delete (or gone), no cell has an
undeleted instance record of it, and the usage the API reports (GET /limits)
is what it was before the boot. Where the race leaves the conductor held,
this is checked right after the API's delete too: a conductor that never
comes back to the server (restarted meanwhile) must not leave it counted.
Every race runs with both counting methods.
"""

import contextlib
import inspect
import threading

from nova.compute import api as compute_api
from nova.conductor import manager as conductor_manager
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.tests.functional.api import client as api_client
from nova.tests.functional import integrated_helpers

from tests.functional import base

# 2 VCPU, 256 MB of RAM, 1 GB of disk: the racing server; the bystander
# (a live server booted before every race) has the same flavor.
FLAVOR = dict(vcpu=2, memory_mb=256, disk=1, ephemeral=0)
# How long a test waits for a nova thread, or a nova thread for the test.
TIMEOUT = 30
# The usage the API reports, in GET /limits.
USAGE_KEYS = ('totalInstancesUsed', 'totalCoresUsed', 'totalRAMUsed')

# The role of the current thread in a race ('conductor', 'api', 'api-1',
# ...), so that a wrapper can tell whose call it sees.
_ROLE = threading.local()


def _role():
    return getattr(_ROLE, 'name', None)


@contextlib.contextmanager
def _acting_as(role):
    previous = _role()
    _ROLE.name = role
    try:
        yield
    finally:
        _ROLE.name = previous


class _Call(object):
    """One call of a spied nova method: who made it and how it ended."""

    def __init__(self, role, args):
        self.role = role
        self.args = args
        self.result = None
        self.error = None
        #: Set once the call has returned (or raised).
        self.done = threading.Event()


class _Spy(object):
    """The calls of one spied nova method."""

    def __init__(self):
        self.calls = []
        #: Set each time a call has returned (or raised).
        self.done = threading.Event()

    def by(self, role):
        return [call for call in self.calls if call.role == role]


class _Gate(object):
    """A point where the first nova thread to get there stops until the
    test opens the gate; later threads go through.
    """

    def __init__(self, what):
        self.what = what
        self.reached = threading.Event()
        self.opened = threading.Event()
        self._lock = threading.Lock()
        self._used = False

    def stop(self):
        with self._lock:
            if self._used:
                return
            self._used = True
        self.reached.set()
        if not self.opened.wait(TIMEOUT):
            raise RuntimeError('The test never opened the gate: %s'
                               % self.what)

    def open(self):
        self.opened.set()


class BootDeleteRaceTest(base.NovaFixesTestMixin,
                         integrated_helpers.ProviderUsageBaseTestCase):
    """Regression tests for bug 1783613: the four boot/delete races, usage
    counted from the cells' instance records.

    One compute host, a live bystander server on it, then a server deleted
    while the conductor builds it. The bystander makes the usage before the
    boot non-zero and must keep its allocations.
    """

    compute_driver = 'fake.MediumFakeDriver'

    def setUp(self):
        super(BootDeleteRaceTest, self).setUp()
        self.ctxt = nova_context.get_admin_context()
        self._gates = []
        self._threads = []
        # The conductor's build runs as 'conductor'. Spied before the first
        # boot: from its first call of an RPC method on, nova's
        # service._TrackingEndpointWrapper keeps the method it found, and a
        # later stub of it would never be called.
        self.conductor = self._spy(
            conductor_manager.ComputeTaskManager,
            'schedule_and_build_instances', role='conductor')
        # Registered after the services started, so run before they stop.
        self.addCleanup(self._let_nova_finish)
        self._start_compute('host1')
        self.flavor_id = self._create_flavor(**FLAVOR)
        self.bystander = self._create_server(flavor_id=self.flavor_id,
                                             networks='none')
        self.bystander_allocations = self._resources_of(self.bystander)
        self.assertNotEqual({}, self.bystander_allocations)
        self.assertEqual(1, len(self.conductor.calls))
        self.wait_for(self.conductor.calls[0].done, 'the conductor\'s '
                      'build of the bystander', timeout=TIMEOUT)

    # -- forcing the races -----------------------------------------------

    def _spy(self, owner, name, before=None, after=None, role=None):
        """Wrap ``owner.name`` (a method or a classmethod) and record each
        call with the role of its thread, its result or its exception.

        ``before(call)`` runs before nova's code, ``after(call)`` once it
        has returned or raised; while in the call its thread plays
        ``role``, if given.
        """
        spy = _Spy()
        original = getattr(owner, name)
        is_classmethod = isinstance(inspect.getattr_static(owner, name),
                                    classmethod)

        def wrapper(*args, **kwargs):
            if is_classmethod:
                # stub_out keeps the classmethod: drop the class, the
                # original is bound already.
                args = args[1:]
            previous = _role()
            if role is not None:
                _ROLE.name = role
            call = _Call(_role(), args)
            spy.calls.append(call)
            try:
                if before is not None:
                    before(call)
                try:
                    call.result = original(*args, **kwargs)
                except Exception as exc:
                    call.error = exc
                    raise
                finally:
                    if after is not None:
                        after(call)
                return call.result
            finally:
                _ROLE.name = previous
                call.done.set()
                spy.done.set()

        self.stub_out('%s.%s.%s' % (owner.__module__, owner.__qualname__,
                                    name), wrapper)
        return spy

    def _gate(self, what):
        gate = _Gate(what)
        self._gates.append(gate)
        return gate

    def _delete_in_thread(self, server, role):
        """DELETE the server through the API in a thread playing ``role``.

        :returns: (thread, outcome): outcome gets 'status' (the HTTP status)
            or 'error' (what the API client raised).
        """
        outcome = {}

        def run():
            with _acting_as(role):
                try:
                    outcome['status'] = self.api.delete_server(
                        server['id']).status
                except Exception as exc:
                    outcome['error'] = exc

        thread = threading.Thread(target=run, name=role)
        thread.daemon = True
        self._threads.append(thread)
        thread.start()
        return thread, outcome

    def _join(self, thread, outcome):
        thread.join(TIMEOUT)
        self.assertFalse(thread.is_alive(),
                         'Timed out waiting for the delete in %s'
                         % thread.name)
        return outcome

    def _let_nova_finish(self):
        """Whatever happened in the test, let the held nova threads go and
        finish before the services stop.
        """
        for gate in self._gates:
            gate.open()
        for thread in self._threads:
            thread.join(TIMEOUT)
        for call in self.conductor.calls:
            call.done.wait(TIMEOUT)

    def _boot(self):
        """Record the usage before the boot, then boot the racing server;
        returns the API's answer, with the conductor's build under way.
        """
        self.usage_before = self._usage()
        server = self.api.post_server({'server': self._build_server(
            flavor_id=self.flavor_id, networks='none')})
        return server

    def _wait_for_conductor(self):
        """Wait for the conductor's build of the racing server to end."""
        # The bystander's, then the racing server's.
        self.assertEqual(2, len(self.conductor.calls))
        call = self.conductor.calls[1]
        self.wait_for(call.done, 'the conductor\'s '
                      'schedule_and_build_instances', timeout=TIMEOUT)
        self.assertIsNone(call.error, 'schedule_and_build_instances raised')

    # -- what nova knows ---------------------------------------------------

    def _resources_of(self, server):
        """{provider: resources} of the server's allocations."""
        return {rp: alloc['resources'] for rp, alloc in
                self._get_allocations_by_server_uuid(server['id']).items()}

    def _usage(self):
        absolute = self.api.get_limits()['absolute']
        return {key: absolute[key] for key in USAGE_KEYS}

    def _instance_records(self, uuid, read_deleted='no'):
        """{cell name: instance} of every cell, cell0 included, that has a
        record of the instance (deleted ones too with read_deleted='yes').
        """
        ctxt = nova_context.get_admin_context(read_deleted=read_deleted)
        records = {}
        for name, cell in self.cell_mappings.items():
            with nova_context.target_cell(ctxt, cell) as cctxt:
                try:
                    records[name] = objects.Instance.get_by_uuid(cctxt, uuid)
                except exception.InstanceNotFound:
                    pass
        return records

    def _build_request_exists(self, uuid):
        try:
            objects.BuildRequest.get_by_instance_uuid(self.ctxt, uuid)
        except exception.BuildRequestNotFound:
            return False
        return True

    def _assert_booting(self, server, instance_in_cell):
        """The race's starting point: the scheduler has claimed for the
        server, its build request is there, and its instance record is in
        cell1 or in no cell at all.
        """
        uuid = server['id']
        self.assertNotEqual({}, self._get_allocations_by_server_uuid(uuid),
                            'the scheduler has not claimed for the server')
        self.assertTrue(self._build_request_exists(uuid),
                        'the build request is gone before the delete')
        records = self._instance_records(uuid, read_deleted='yes')
        self.assertEqual(['cell1'] if instance_in_cell else [],
                         sorted(records))

    # -- the invariants ----------------------------------------------------

    def _assert_gone(self, server, when):
        """Nothing of the deleted server is left or counted."""
        uuid = server['id']
        try:
            shown = self.api.get_server(uuid)
        except api_client.OpenStackApiNotFoundException:
            pass
        else:
            self.fail(base.LEAK + 'the API still shows the deleted server '
                      '(status %s) %s' % (shown['status'], when))
        self.assertEqual({}, self._get_allocations_by_server_uuid(uuid),
                         base.LEAK + 'allocations left for the deleted '
                         'server %s' % when)
        self.assert_no_leaked_allocations()
        self.assertEqual(
            [self.bystander['id']], sorted(self._all_allocations()),
            base.LEAK + 'consumers in placement other than the live '
            'bystander %s' % when)
        try:
            mapping = objects.InstanceMapping.get_by_instance_uuid(
                self.ctxt, uuid)
        except exception.InstanceMappingNotFound:
            mapping = None
        self.assertTrue(
            mapping is None or mapping.queued_for_delete,
            base.LEAK + 'the instance mapping of the deleted server is not '
            'queued_for_delete %s' % when)
        self.assertEqual(
            {}, self._instance_records(uuid),
            base.LEAK + 'undeleted instance records of the deleted server '
            '{cell: instance} %s' % when)
        self.assertFalse(
            self._build_request_exists(uuid),
            base.LEAK + 'the build request of the deleted server is left %s'
            % when)
        self._assert_usage_back(when)

    def _assert_usage_back(self, when):
        # The bystander first: a race that took its allocations would show
        # as usage below the one before the boot, which is not a leak.
        self.assertEqual(
            self.bystander_allocations, self._resources_of(self.bystander),
            'the allocations of the live bystander server changed %s'
            % when)
        self.assertEqual(self.usage_before, self._usage(),
                         base.LEAK + 'quota usage (GET /limits) is not what '
                         'it was before the boot %s' % when)

    def _assert_left_nothing(self, server, when):
        self._assert_gone(server, when)
        self.assert_server_left_nothing(server)
        self._assert_usage_back(
            'after archive_deleted_rows and the resource tracker periodic')

    # -- the races ---------------------------------------------------------

    def test_delete_before_instance_created(self):
        """(a) The delete comes after the claim, before the instance record.

        1. The conductor's scheduler call returns: the resources are claimed
           in placement; the conductor is held there.
        2. The user deletes the server: the API deletes the build request
           and finds no instance record. Nothing may be left already.
        3. The conductor goes on, finds the build request gone, deletes the
           instance mapping and the allocations, and creates no record.
        """
        held = self._gate('the conductor after the scheduler claimed')
        self._spy(conductor_manager.ComputeTaskManager,
                  '_schedule_instances', after=lambda call: held.stop())
        lookups = self._spy(objects.BuildRequest, 'get_by_instance_uuid')

        server = self._boot()
        self.wait_for(held.reached, 'the scheduler\'s claim')
        self._assert_booting(server, instance_in_cell=False)

        with _acting_as('api'):
            self.api.delete_server(server['id'])
        self._assert_gone(server, 'right after the delete, with the '
                          'conductor held after the claim')

        held.open()
        self._wait_for_conductor()
        # The race happened: the conductor found the build request gone.
        conductor_lookups = lookups.by('conductor')
        self.assertEqual(1, len(conductor_lookups))
        self.assertIsInstance(conductor_lookups[0].error,
                              exception.BuildRequestNotFound)
        self.assertEqual({}, self._instance_records(server['id'],
                                                    read_deleted='yes'),
                         'the conductor created an instance record')
        self._assert_left_nothing(server, 'once the conductor went on')

    def test_conductor_destroys_instance_created_after_delete(self):
        """(b) The delete comes between the conductor's check of the build
        request and its creation of the instance record.

        1. The conductor has found the build request and is held right
           after its lookup, before it creates the instance record in cell1.
        2. The user deletes the server: the API deletes the build request,
           finds no instance record, and cleans up. Nothing may be left
           already.
        3. The conductor goes on: it creates the record, maps the instance
           to cell1, finds the build request gone when it deletes it and
           destroys the record itself.
        """
        # Held outside any target_cell block: nova's CellDatabases fixture
        # keeps a thread inside one from letting other threads target
        # another cell (cell0, for the usage count).
        held = self._gate('the conductor after its build request lookup')
        lookups = self._spy(
            objects.BuildRequest, 'get_by_instance_uuid',
            after=lambda call: held.stop() if _role() == 'conductor'
            else None)
        creates = self._spy(objects.Instance, 'create')
        destroys = self._spy(objects.Instance, 'destroy')
        api_lookups = self._spy(compute_api.API, '_lookup_instance')
        delete_build_request = self._spy(
            conductor_manager.ComputeTaskManager, '_delete_build_request')

        server = self._boot()
        self.wait_for(held.reached, 'the conductor\'s build request lookup')
        self.assertEqual(
            [None], [call.error for call in lookups.by('conductor')],
            'the conductor has not found the build request')
        self.assertEqual([], creates.by('conductor'))
        self._assert_booting(server, instance_in_cell=False)

        with _acting_as('api'):
            self.api.delete_server(server['id'])
        self.assertEqual([(None, None)],
                         [call.result for call in api_lookups.by('api')],
                         'the API found an instance record to destroy')
        self.assertEqual([], destroys.by('api'))
        self._assert_gone(server, 'right after the delete, with the '
                          'conductor held after its build request lookup')

        held.open()
        self._wait_for_conductor()
        # The race happened: the conductor created the record after the
        # delete, found the build request gone and destroyed the record.
        self.assertEqual([None], [call.error
                                  for call in creates.by('conductor')])
        self.assertEqual(1, len(delete_build_request.calls))
        self.assertIs(False, delete_build_request.calls[0].result,
                      'the conductor did not find the build request gone')
        self.assertEqual([None], [call.error
                                  for call in destroys.by('conductor')],
                         'the conductor did not destroy the record')
        self.assertEqual(['cell1'], sorted(self._instance_records(
            server['id'], read_deleted='yes')))
        self._assert_left_nothing(server, 'once the conductor went on')

    def test_api_destroy_finds_instance_gone(self):
        """(c) The conductor destroys the record the API has just looked up.

        1. The conductor has created the instance record in cell1 and mapped
           it, and is held before it deletes the build request.
        2. The user deletes the server: the API deletes the build request,
           looks the instance record up and is held there.
        3. The conductor goes on, finds the build request gone and destroys
           the record.
        4. The API goes on: its instance.destroy() raises InstanceNotFound.
        """
        conductor_held = self._gate('the conductor before it deletes the '
                                    'build request')
        api_held = self._gate('the API after its instance lookup')
        delete_build_request = self._spy(
            conductor_manager.ComputeTaskManager, '_delete_build_request',
            before=lambda call: conductor_held.stop())
        lookups = self._spy(
            compute_api.API, '_lookup_instance',
            after=lambda call: api_held.stop() if _role() == 'api-1'
            else None)
        destroys = self._spy(objects.Instance, 'destroy')

        server = self._boot()
        self.wait_for(conductor_held.reached, 'the conductor\'s build '
                      'request delete')
        self._assert_booting(server, instance_in_cell=True)

        thread, outcome = self._delete_in_thread(server, 'api-1')
        self.wait_for(api_held.reached, 'the API\'s instance lookup')
        self.assertEqual(1, len(lookups.by('api-1')))
        cell, instance = lookups.by('api-1')[0].result
        self.assertIsNotNone(instance, 'the API did not find the record')
        self.assertEqual('cell1', cell.name)

        conductor_held.open()
        self.wait_for(delete_build_request.done, 'the conductor\'s build '
                      'request delete')
        self.assertIs(False, delete_build_request.calls[0].result,
                      'the conductor did not find the build request gone')
        self.assertEqual([None], [call.error
                                  for call in destroys.by('conductor')],
                         'the conductor did not destroy the record')

        api_held.open()
        self.assertEqual({'status': 204}, self._join(thread, outcome))
        # The race happened: the API's destroy found the record gone.
        api_destroys = destroys.by('api-1')
        self.assertEqual(1, len(api_destroys))
        self.assertIsInstance(api_destroys[0].error,
                              exception.InstanceNotFound)

        self._wait_for_conductor()
        self._assert_left_nothing(server, 'after the race')

    def test_concurrent_deletes_while_booting(self):
        """(d) Two deletes of the same booting server at once.

        1. The conductor has created the instance record in cell1 and mapped
           it, and is held before it deletes the build request.
        2. Two delete requests both read the build request in
           _delete_while_booting and meet before deleting it: one deletes
           it, the other finds it gone and takes the normal delete path.
           Nothing may be left once both returned.
        3. The conductor goes on and finds the build request gone.
        """
        conductor_held = self._gate('the conductor before it deletes the '
                                    'build request')
        delete_build_request = self._spy(
            conductor_manager.ComputeTaskManager, '_delete_build_request',
            before=lambda call: conductor_held.stop())
        both_read = threading.Barrier(2, timeout=TIMEOUT)
        roles = ('api-1', 'api-2')
        build_request_destroys = self._spy(
            objects.BuildRequest, 'destroy',
            before=lambda call: both_read.wait() if _role() in roles
            else None)
        while_booting = self._spy(compute_api.API, '_delete_while_booting')

        server = self._boot()
        self.wait_for(conductor_held.reached, 'the conductor\'s build '
                      'request delete')
        self._assert_booting(server, instance_in_cell=True)

        deletes = [self._delete_in_thread(server, role) for role in roles]
        outcomes = [self._join(thread, outcome)
                    for thread, outcome in deletes]
        self.assertEqual([{'status': 204}] * 2, outcomes)
        # The race happened: both deletes were in _delete_while_booting at
        # once; one deleted the build request, the other found it gone.
        api_destroys = [call for call in build_request_destroys.calls
                        if call.role in roles]
        self.assertEqual(2, len(api_destroys))
        self.assertEqual(
            {None, exception.BuildRequestNotFound},
            {type(call.error) if call.error else None
             for call in api_destroys})
        self.assertEqual(
            [False, True],
            sorted(call.result for call in while_booting.calls
                   if call.role in roles))
        self._assert_gone(server, 'right after both deletes, with the '
                          'conductor held before its build request delete')

        conductor_held.open()
        self._wait_for_conductor()
        self.assertIs(False, delete_build_request.calls[0].result,
                      'the conductor did not find the build request gone')
        self._assert_left_nothing(server, 'once the conductor went on')

    def test_claim_lands_between_the_api_deletes(self):
        """(e) The scheduler's claim lands after the API's delete of the
        server's allocations and before its delete of the build request.

        1. The conductor is held before it asks the scheduler for a host:
           there is no claim yet.
        2. The user deletes the server: the API (which, with the fixes,
           deletes the allocations first: there are none) is held right
           before it deletes the build request.
        3. The conductor goes on: the scheduler claims, the conductor finds
           the build request, creates the instance record in cell1, maps
           it, and is held before it deletes the build request.
        4. The API goes on: it deletes the build request, destroys the
           instance record and returns.
        5. The conductor goes on and finds the build request gone.
        Nothing may be left, the claim of step 3 included, whichever of
        the API and the conductor deletes it.
        """
        scheduling = self._gate('the conductor before it schedules')
        self._spy(conductor_manager.ComputeTaskManager, '_schedule_instances',
                  before=lambda call: scheduling.stop()
                  if _role() == 'conductor' else None)
        api_held = self._gate('the API before it deletes the build request')
        self._spy(objects.BuildRequest, 'destroy',
                  before=lambda call: api_held.stop()
                  if _role() == 'api-1' else None)
        conductor_held = self._gate('the conductor before it deletes the '
                                    'build request')
        delete_build_request = self._spy(
            conductor_manager.ComputeTaskManager, '_delete_build_request',
            before=lambda call: conductor_held.stop())

        server = self._boot()
        self.wait_for(scheduling.reached, 'the conductor\'s scheduling')
        self.assertEqual({}, self._get_allocations_by_server_uuid(
            server['id']))
        thread, outcome = self._delete_in_thread(server, 'api-1')
        self.wait_for(api_held.reached, 'the API\'s build request delete')

        scheduling.open()
        self.wait_for(conductor_held.reached, 'the conductor\'s build '
                      'request delete')
        self._assert_booting(server, instance_in_cell=True)

        api_held.open()
        self.assertEqual({'status': 204}, self._join(thread, outcome))
        conductor_held.open()
        self._wait_for_conductor()
        self.assertIs(False, delete_build_request.calls[0].result,
                      'the conductor did not find the build request gone')
        self._assert_left_nothing(server, 'once the conductor went on')


class BootDeleteRacePlacementQuotaTest(BootDeleteRaceTest):
    """Regression tests for bug 1783613, usage counted from placement.

    With [quota]count_usage_from_placement the instances are counted from
    the instance mappings not queued_for_delete and the cores and RAM from
    the allocations: a leaked allocation or an unqueued mapping is usage
    the project never gets back.
    """

    def setUp(self):
        super(BootDeleteRacePlacementQuotaTest, self).setUp()
        self.flags(count_usage_from_placement=True, group='quota')
