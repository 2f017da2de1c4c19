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

"""A placement audit that never takes a live claim (issue 41).

Every consumer with allocations gets one verdict, with its evidence:

- ``right``: a live server's allocation where its guest runs (in
  VERIFY_RESIZE the instance on the destination, the migration on the
  source, as nova defines it);
- ``in flight``: a build or a move still going, left alone;
- ``misplaced``: a live server holding a node its guest is not on, or the
  migration consumer of a move that is over holding what its server needs
  (over: its migration ended, or is ``abandoned()``: still recorded in
  progress, its server settled, unchanged for the grace);
- ``leaked``: a deleted or archived server, a migration of one, a migration
  of a move that is over holding nothing its server needs, an unknown
  consumer;
- ``missing``: a live server with a host holding nothing;
- ``unknown``: its verdict needs a cell that could not be read.

``heal`` writes only with the consumer generations it has just read and
re-decides a consumer from fresh records before each write; a 409 makes
it read and decide again, never overwrite.
"""

import collections

import os_resource_classes as orc
import os_traits
from oslo_utils import timeutils

from nova.compute import vm_states
from nova import context as nova_context
from nova import objects
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils

from nova_fixes import errors

RIGHT = 'right'
IN_FLIGHT = 'in flight'
MISPLACED = 'misplaced'
LEAKED = 'leaked'
MISSING = 'missing'
UNKNOWN = 'unknown'
VERDICTS = (RIGHT, IN_FLIGHT, MISPLACED, LEAKED, MISSING, UNKNOWN)
#: The verdicts heal acts on.
WRONG = (MISPLACED, LEAKED, MISSING)

#: Migration statuses of a move that is over.
FINAL_MIGRATION_STATUSES = frozenset((
    'done', 'confirmed', 'reverted', 'error', 'failed', 'cancelled',
    'completed'))
#: The statuses of nova's migrations of a move still going.
MOVING_STATUSES = (
    'pre-migrating', 'migrating', 'post-migrating', 'finished',
    'confirming', 'reverting', 'accepted', 'queued', 'preparing',
    'running', 'pre-migrated', 'migrated')
#: Placement's microversion with consumer generations.
VERSION = report.CONSUMER_GENERATION_VERSION
#: What a sharing provider (trait MISC_SHARES_VIA_AGGREGATE: shared
#: storage, for example) stands for in the map of roots: it is in no
#: compute node's tree, and holding it says nothing of where a server's
#: guest runs.
SHARED = None
#: The resource classes heal puts on a compute node's root provider for a
#: server holding nothing there. What needs others (a port's bandwidth, a
#: vGPU: nested providers) is not created, nor removed where heal would
#: have to create it again.
ROOT_RESOURCE_CLASSES = frozenset((orc.VCPU, orc.PCPU, orc.MEMORY_MB,
                                   orc.DISK_GB))
#: How heal's outcome reads when nothing is wrong any more.
RESOLVED = ('healed', 'nothing left', 'left alone: now right',
            'left alone: now in flight')
#: How many times heal reads and decides again after a 409.
RETRIES = 3
#: Seconds after a migration's last update during which the audit leaves
#: what it holds to nova: a move that has just ended is still giving its
#: allocations back (the source compute records the migration confirmed
#: or completed, then deletes them), and the explorer's audit mode caught
#: the audit emptying them in that window. A compute that stopped in it
#: leaves them for longer: healed once the grace has passed (or by the
#: compute's init_host, with the fixes).
GRACE = 300


class AuditError(errors.NovaFixesError):
    """Bad input or a placement that cannot be read: nothing unchecked
    was changed.
    """


class Verdict(object):
    def __init__(self, consumer, verdict, evidence, held=None, kind=None,
                 target=None, server=None):
        self.consumer = consumer
        self.verdict = verdict
        self.evidence = evidence
        #: {provider uuid: {resource class: amount}} held now
        self.held = held or {}
        #: 'instance', 'migration' or None (unknown consumer)
        self.kind = kind
        #: what the consumer must hold: {provider uuid: resources}
        self.target = target
        #: the instance uuid this consumer belongs to
        self.server = server
        self.healed = None
        #: the flavor's resources a missing or misplaced server needs
        self.need = None

    def as_dict(self):
        return {'consumer': self.consumer, 'verdict': self.verdict,
                'kind': self.kind, 'server': self.server,
                'evidence': self.evidence, 'held': self.held,
                'target': self.target, 'healed': self.healed}


class Placement(object):
    """Reads and writes placement through nova's report client, counting
    the requests.
    """

    def __init__(self, client=None):
        self.client = client or report.SchedulerReportClient()
        self.requests = 0

    def _call(self, verb, url, *args, ok=(200, 204), missing=None):
        self.requests += 1
        resp = getattr(self.client, verb)(url, *args, version=VERSION)
        if resp.status_code in ok:
            return resp.json() if resp.status_code == 200 else None
        if resp.status_code == 404 and missing:
            raise AuditError(missing)
        if resp.status_code == 409:
            return resp
        raise AuditError('placement answered %s to %s %s: %s' % (
            resp.status_code, verb.upper(), url, resp.text[:200]))

    def providers(self):
        return self._call('get', '/resource_providers')['resource_providers']

    def provider_allocations(self, rp):
        return self._call(
            'get', '/resource_providers/%s/allocations' % rp['uuid'],
            missing='resource provider %s (%s) vanished during the audit; '
            'nothing was changed: run it again' % (rp['uuid'], rp['name'])
        )['allocations']

    def sharing(self):
        """The uuids of the sharing providers."""
        return {rp['uuid'] for rp in self._call(
            'get', '/resource_providers?required=%s'
            % os_traits.MISC_SHARES_VIA_AGGREGATE)['resource_providers']}

    def consumer(self, uuid):
        return self._call('get', '/allocations/%s' % uuid)

    def put(self, uuid, body):
        """True once written, False on a generation conflict (409)."""
        return self._call('put', '/allocations/%s' % uuid, body) is None

    def post(self, body):
        return self._call('post', '/allocations', body) is None


class Facts(object):
    """What nova knows about the consumers, read in bulk."""

    def __init__(self):
        self.build_requests = set()
        self.mappings = {}           # instance uuid -> cell uuid or None
        self.instances = {}          # uuid -> Instance (deleted ones too)
        self.migrations = {}         # uuid -> Migration
        self.moving = {}             # instance uuid -> [non-final Migration]
        self.nodes = {}              # (host, node) -> compute node uuid
        self.cells = {}              # cell uuid -> CellMapping
        self.unreadable = {}         # cell uuid -> why
        self.now = None              # when the records were read
        self.grace = GRACE           # see GRACE


def _cells(ctxt, only=None):
    cells = objects.CellMappingList.get_all(ctxt)
    if only is None:
        return list(cells)
    chosen = [c for c in cells if only in (c.uuid, c.name)]
    if not chosen:
        raise AuditError('no cell named %s (cells: %s)' % (
            only, ', '.join(sorted(c.name or c.uuid for c in cells))))
    return chosen


def read_facts(ctxt, consumers, cells, server=None, all_mappings=False,
               grace=GRACE):
    """The API DB's build requests first (see ``decide``), then each
    cell's instances, migrations and compute nodes, in bulk, then the
    instance mappings of the consumers no cell has a record of (all of
    them with ``all_mappings``): a mapping only tells a build deleted
    from an unknown consumer, and reading 10,000 of them costs more than
    the rest of the audit's database reads.
    """
    facts = Facts()
    facts.grace = grace
    facts.now = timeutils.utcnow()
    facts.build_requests = {br.instance_uuid for br in
                            objects.BuildRequestList.get_all(ctxt)}
    for cell in cells:
        facts.cells[cell.uuid] = cell
        try:
            _read_cell(ctxt, cell, consumers, facts, server)
        except Exception as e:
            facts.unreadable[cell.uuid] = '%s: %s' % (type(e).__name__, e)
    wanted = [u for u in consumers if all_mappings or not (
        u in facts.instances or u in facts.migrations)]
    if wanted:
        for im in objects.InstanceMappingList.get_by_instance_uuids(
                ctxt, wanted):
            facts.mappings[im.instance_uuid] = (
                im.cell_mapping.uuid if im.cell_mapping else None)
    return facts


def _read_cell(ctxt, cell, consumers, facts, server=None):
    """One cell's records: every live instance (for ``missing``), or
    only ``server``'s when heal re-checks one server.
    """
    live_filters = {'deleted': False}
    moving_filters = {}
    if server is not None:
        live_filters['uuid'] = list(consumers)
        moving_filters['instance_uuid'] = server
    with nova_context.target_cell(ctxt, cell) as cctxt:
        # Sorted by the primary key: the API's default order (created_at)
        # makes the database sort every live instance of the cell.
        live = objects.InstanceList.get_by_filters(
            cctxt, live_filters, sort_key='id', sort_dir='asc',
            expected_attrs=[])
        found = {i.uuid for i in live}
        rest = [u for u in consumers if u not in found]
        # A live instance's consumer is no deleted instance and no
        # migration: only the others are looked up as such.
        gone = objects.InstanceList.get_by_filters(
            cctxt.elevated(read_deleted='yes'),
            {'uuid': rest, 'deleted': True},
            expected_attrs=[]) if rest else []
        migs = objects.MigrationList.get_by_filters(
            cctxt.elevated(read_deleted='yes'),
            {'uuid': rest}) if rest else []
        active = objects.MigrationList.get_by_filters(cctxt, dict(
            moving_filters, status=list(MOVING_STATUSES)))
        nodes = objects.ComputeNodeList.get_all(cctxt)
        for inst in list(live) + list(gone):
            if inst.uuid in facts.instances and inst.deleted:
                continue
            facts.instances[inst.uuid] = inst
        for mig in migs:
            facts.migrations[mig.uuid] = mig
        for mig in active:
            facts.moving.setdefault(mig.instance_uuid, []).append(mig)
        for cn in nodes:
            facts.nodes[(cn.host, cn.hypervisor_hostname)] = cn.uuid


def _node_of(facts, host, node):
    return facts.nodes.get((host, node))


def _roots(held, roots):
    """The compute node trees (their roots) ``held`` is in; a sharing
    provider is in none.
    """
    return {root for root in (roots.get(rp, rp) for rp in held)
            if root is not SHARED}


def _tree(held, roots, root):
    """What ``held`` holds in the tree of ``root``."""
    return {rp: res for rp, res in held.items()
            if root is not None and roots.get(rp, rp) == root}


def decide(uuid, held, facts, roots):
    """One verdict for consumer ``uuid`` holding ``held``."""
    def v(verdict, evidence, **kw):
        return Verdict(uuid, verdict, evidence, held=held, **kw)

    mig = facts.migrations.get(uuid)
    if mig is not None:
        return _decide_migration(uuid, held, mig, facts, roots, v)
    if uuid in facts.build_requests:
        return v(IN_FLIGHT, 'a build request: the build is going',
                 kind='instance', server=uuid)
    inst = facts.instances.get(uuid)
    cell = facts.mappings.get(uuid, False)
    if inst is None:
        if cell and cell in facts.unreadable:
            return v(UNKNOWN, 'its cell %s cannot be read' % cell,
                     kind='instance', server=uuid)
        if facts.unreadable:
            return v(UNKNOWN, 'no record in the cells read; cells %s cannot '
                     'be read' % ', '.join(sorted(facts.unreadable)))
        if cell is not False:
            return v(LEAKED, 'an instance mapping and no build request '
                     'nor instance: a build deleted', kind='instance',
                     server=uuid)
        return v(LEAKED, 'no instance, no instance mapping, no build '
                 'request, no migration: deleted and archived, or unknown')
    if inst.deleted:
        return v(LEAKED, 'instance deleted in its cell', kind='instance',
                 server=uuid, target={})
    return _decide_instance(uuid, held, inst, facts, roots, v)


def abandoned(mig, inst, facts):
    """Whether a migration nova still records in progress belongs to a
    move that is over: its server has no task state and is not resized
    (every move sets a task state before its migration exists and keeps
    one until its end, but for VERIFY_RESIZE and the confirm the API casts
    from it), and the record has not changed for the grace. What a
    compute that died in the move and rolled it back at its restart
    leaves: nova never ends that migration.
    """
    if inst.task_state is not None or inst.vm_state == vm_states.RESIZED:
        return False
    quiet = _seconds_since_update(mig, facts)
    return quiet is not None and quiet >= facts.grace


def _decide_instance(uuid, held, inst, facts, roots, v):
    kw = dict(kind='instance', server=uuid)
    if inst.task_state is not None:
        return v(IN_FLIGHT, 'task state %s' % inst.task_state, **kw)
    moving = [m for m in facts.moving.get(uuid, [])
              if not abandoned(m, inst, facts)]
    resized = (inst.vm_state == vm_states.RESIZED and
               [m for m in moving if m.status == 'finished'])
    if moving and not resized:
        return v(IN_FLIGHT, 'migration %s is %s' % (
            moving[0].uuid, moving[0].status), **kw)
    if inst.vm_state == vm_states.DELETED:
        # Deleted but not destroyed: a delete going on (a local delete
        # saves the state, gives the allocations back, then destroys),
        # or one that stopped half way. It must never get allocations.
        if not held:
            return v(RIGHT, 'being deleted, holds nothing', **kw)
        quiet = _seconds_since_update(inst, facts)
        if quiet is None or quiet < facts.grace:
            return v(IN_FLIGHT, 'being deleted (vm state deleted)', **kw)
        return v(LEAKED, 'vm state deleted for %d s, not destroyed: a '
                 'delete that stopped half way' % quiet, target={}, **kw)
    if inst.vm_state == vm_states.SHELVED_OFFLOADED:
        # Its guest runs nowhere, whatever its host: the shelve offload
        # gives the allocations back, records SHELVED_OFFLOADED with no
        # task state and only then clears the host (the explorer's audit
        # mode caught the audit creating its allocations in between).
        if not held:
            return v(RIGHT, 'shelved offloaded, holds nothing', **kw)
        return v(MISPLACED, 'shelved offloaded: its guest runs nowhere',
                 target={}, **kw)
    if not inst.host:
        if inst.vm_state == vm_states.BUILDING:
            return v(IN_FLIGHT, 'no host yet (building)', **kw)
        return v(MISPLACED, 'no host (%s): its guest runs nowhere'
                 % inst.vm_state, target={}, **kw)
    rp = _node_of(facts, inst.host, inst.node)
    if not held:
        return v(MISSING, 'live on %s (%s), holds nothing'
                 % (inst.host, inst.node), target=rp, **kw)
    if rp is not None and _roots(held, roots) == {rp}:
        return v(RIGHT, 'on %s, where its guest runs' % inst.node, **kw)
    return v(MISPLACED, 'its guest runs on %s (%s) but it holds %s'
             % (inst.host, inst.node, ', '.join(sorted(held))),
             target=rp, **kw)


def _decide_migration(uuid, held, mig, facts, roots, v):
    kw = dict(kind='migration', server=mig.instance_uuid)
    inst = facts.instances.get(mig.instance_uuid)
    if inst is None or inst.deleted:
        if inst is None and facts.unreadable:
            return v(UNKNOWN, 'cells %s cannot be read' % ', '.join(
                sorted(facts.unreadable)), **kw)
        return v(LEAKED, 'migration of a deleted server', target={}, **kw)
    if inst.task_state is not None:
        return v(IN_FLIGHT, 'its server has task state %s'
                 % inst.task_state, **kw)
    if mig.status not in FINAL_MIGRATION_STATUSES:
        if mig.status == 'finished' and inst.vm_state == vm_states.RESIZED:
            rp = _node_of(facts, mig.source_compute, mig.source_node)
            if rp is not None and _roots(held, roots) == {rp}:
                return v(RIGHT, 'VERIFY_RESIZE: the source %s'
                         % mig.source_node, **kw)
        if not abandoned(mig, inst, facts):
            return v(IN_FLIGHT, 'migration %s' % mig.status, **kw)
        over = ('abandoned: still %s, not updated for %d s, its server %s '
                'with no task state' % (
                    mig.status, _seconds_since_update(mig, facts),
                    inst.vm_state))
    else:
        ended = _seconds_since_update(mig, facts)
        if ended is not None and ended < facts.grace:
            return v(IN_FLIGHT, 'the move ended %d s ago (%s), under the '
                     'grace of %d s: nova may still be giving its '
                     'allocations back' % (ended, mig.status, facts.grace),
                     **kw)
        over = mig.status
    guest = _node_of(facts, inst.host, inst.node)
    if guest is not None and guest in _roots(held, roots):
        return v(MISPLACED, 'the move is over (%s) and it holds %s, where '
                 'its server runs' % (over, inst.node), target={}, **kw)
    return v(LEAKED, 'the move is over (%s); it holds nothing its server '
             'needs' % over, target={}, **kw)


def _seconds_since_update(mig, facts):
    """Seconds since the record (a migration, an instance) last changed,
    or None when unknown (no timestamp, or no time of reading).
    """
    when = getattr(mig, 'updated_at', None) or getattr(
        mig, 'created_at', None)
    if when is None or facts.now is None:
        return None
    when = when.replace(tzinfo=None)
    return max(0, int((facts.now.replace(tzinfo=None) - when
                       ).total_seconds()))


def _flavor_resources(inst):
    """What the server's flavor needs. The live instances are read
    without their flavors (most of them are right and need none): the
    flavor is loaded here, for a missing or misplaced server only.
    """
    return scheduler_utils.resources_from_flavor(inst, inst.flavor)


class Report(object):
    def __init__(self):
        self.verdicts = []
        self.unreadable = {}
        self.requests = 0

    def wrong(self):
        """The verdicts still wrong: not healed, undecided, or left
        because their consumer became wrong in another way.
        """
        return [v for v in self.verdicts
                if v.verdict in WRONG + (UNKNOWN,) and
                not (v.healed or '').startswith(RESOLVED)]

    def counts(self):
        c = collections.Counter(v.verdict for v in self.verdicts)
        return {name: c.get(name, 0) for name in VERDICTS}

    def totals(self, names):
        """{provider (name): {verdict: {rc: amount}}} and 'total'."""
        per = {}
        for v in self.verdicts:
            if v.verdict not in (LEAKED, MISPLACED, MISSING):
                continue
            items = v.held.items()
            if v.verdict == MISSING:
                items = [(v.target, v.need or {})]
            for rp, res in items:
                for key in (names.get(rp, rp), 'total'):
                    slot = per.setdefault(key, {}).setdefault(v.verdict, {})
                    for rc, n in res.items():
                        slot[rc] = slot.get(rc, 0) + n
        return per


def audit(ctxt, heal=False, cell=None, placement=None, grace=GRACE):
    """Read placement, the API DB and the cells; decide; heal if asked.

    :returns: a Report
    :raises: AuditError on bad input or placement errors (before any
        write: nothing was changed)
    """
    placement = placement or Placement()
    cells = _cells(ctxt, cell)
    rps = placement.providers()
    names = {rp['uuid']: rp['name'] for rp in rps}
    roots = {rp['uuid']: rp.get('root_provider_uuid') or rp['uuid']
             for rp in rps}
    for rp in placement.sharing():
        roots[rp] = SHARED
    consumers = {}
    for rp in rps:
        for c, alloc in placement.provider_allocations(rp).items():
            consumers.setdefault(c, {})[rp['uuid']] = alloc['resources']
    facts = read_facts(ctxt, consumers, cells,
                       all_mappings=cell is not None, grace=grace)
    rep = Report()
    rep.names = names
    rep.unreadable = {facts.cells[c].name or c: why
                      for c, why in facts.unreadable.items()}
    for uuid, held in sorted(consumers.items()):
        mapped = facts.mappings.get(uuid)
        if cell is not None and not (mapped in facts.cells or
                                     uuid in facts.migrations):
            # --cell: the consumers of other cells are not decided.
            continue
        rep.verdicts.append(decide(uuid, held, facts, roots))
    for uuid, inst in sorted(facts.instances.items()):
        if uuid in consumers or inst.deleted:
            continue
        verdict = decide(uuid, {}, facts, roots)
        if verdict.verdict == MISSING:
            rep.verdicts.append(verdict)
    for v in rep.verdicts:
        if v.verdict in (MISPLACED, MISSING) and v.kind == 'instance' and \
                v.target is not None and v.target != {}:
            v.need = _flavor_resources(facts.instances[v.server])
    if heal:
        for v in rep.verdicts:
            if v.verdict in WRONG:
                _heal(ctxt, v, placement, roots, cells, grace)
    rep.requests = placement.requests
    return rep


def _fresh(ctxt, v, cells, roots, placement, grace=GRACE):
    """Re-read the records of ``v``'s server and its consumer."""
    uuids = {v.consumer}
    if v.server:
        uuids.add(v.server)
    facts = read_facts(ctxt, uuids, cells, server=v.server or v.consumer,
                       grace=grace)
    body = placement.consumer(v.consumer)
    held = {rp: a['resources'] for rp, a in body['allocations'].items()}
    return decide(v.consumer, held, facts, roots), body, facts


def _heal(ctxt, v, placement, roots, cells, grace=GRACE):
    for attempt in range(RETRIES):
        now, body, facts = _fresh(ctxt, v, cells, roots, placement, grace)
        if now.verdict != v.verdict:
            v.healed = 'left alone: now %s (%s)' % (now.verdict,
                                                     now.evidence)
            return
        gen = body.get('consumer_generation')
        if now.verdict in (LEAKED, MISPLACED) and not now.held:
            v.healed = 'nothing left to heal'
            return
        if now.verdict == MISSING:
            inst = facts.instances[v.server]
            if now.target is None:
                v.healed = 'left alone: its node is not in placement'
                return
            need = _flavor_resources(inst)
            if not set(need) <= ROOT_RESOURCE_CLASSES:
                v.healed = ('left alone: its flavor needs resources of '
                            'nested providers; run nova-manage placement '
                            'heal_allocations')
                return
            ok = placement.put(v.consumer, {
                'allocations': {now.target: {'resources': need}},
                'consumer_generation': gen,
                'project_id': inst.project_id, 'user_id': inst.user_id})
        elif now.kind == 'migration' and now.verdict == MISPLACED:
            ok = _heal_ended_move(now, body, facts, placement, roots)
        elif now.verdict == MISPLACED and now.target:
            allocations, why = _placed(now, facts, roots)
            if why:
                v.healed = 'left alone: ' + why
                return
            ok = placement.put(v.consumer, {
                'allocations': allocations, 'consumer_generation': gen,
                'project_id': body.get('project_id'),
                'user_id': body.get('user_id')})
        else:
            # Leaked: emptied with the generation read (a DELETE would
            # ignore it). Misplaced instance whose guest runs nowhere:
            # emptied too.
            if now.verdict == MISPLACED and now.target is None:
                v.healed = 'left alone: its node is not in placement'
                return
            ok = placement.put(v.consumer, {
                'allocations': {}, 'consumer_generation': gen,
                'project_id': body.get('project_id'),
                'user_id': body.get('user_id')})
        if ok:
            v.healed = 'healed' + (' (after %d conflict%s)' % (
                attempt, 's' if attempt > 1 else '') if attempt else '')
            return
        v.conflicts = attempt + 1
    v.healed = 'left alone: %d generation conflicts in a row' % RETRIES


def _placed(now, facts, roots):
    """What a misplaced live server must hold: what it holds in the tree
    of its node and on sharing providers, the other nodes' trees removed;
    if it holds nothing in its node's tree, its flavor on the node's root
    provider, but only where nothing else would be lost.

    :returns: (the allocations to write, None) or (None, why not)
    """
    own = _tree(now.held, roots, now.target)
    kept = {rp: res for rp, res in now.held.items()
            if rp in own or roots.get(rp, rp) is SHARED}
    if not own:
        need = _flavor_resources(facts.instances[now.server])
        removed = {rc for rp, res in now.held.items() if rp not in kept
                   for rc in res}
        if kept:
            return None, ('it holds sharing providers (%s) but nothing on '
                          'its node: heal it by hand'
                          % ', '.join(sorted(kept)))
        if not set(need) <= ROOT_RESOURCE_CLASSES:
            return None, ('its flavor needs resources of nested providers; '
                          'run nova-manage placement heal_allocations once '
                          'it holds nothing')
        if not removed <= ROOT_RESOURCE_CLASSES:
            return None, ('it holds %s elsewhere, which its flavor alone '
                          'would not put back: move them by hand'
                          % ', '.join(sorted(removed -
                                             ROOT_RESOURCE_CLASSES)))
        kept = {now.target: need}
    return {rp: {'resources': res} for rp, res in kept.items()}, None


def _heal_ended_move(now, body, facts, placement, roots):
    """The migration of a move that is over holds what its server uses on
    the node its guest runs on: given to the server in one request, with
    both consumers' generations, if the server holds nothing in that
    node's tree, or if the migration holds there exactly the flavor the
    server uses and the server something else, on the node's root
    provider only (a resize on the same host that failed before its
    finish: the server holds the new flavor's claim, its guest the old
    flavor, as the resource tracker's correction decides too); else only
    removed from the migration. The
    rest of what either holds stays, for its own verdict.

    :returns: True once written, False on a generation conflict
    """
    inst = facts.instances[now.server]
    target = _node_of(facts, inst.host, inst.node)
    here = _tree(now.held, roots, target)
    rest = {rp: {'resources': res} for rp, res in now.held.items()
            if rp not in here}
    mine = placement.consumer(now.server)
    theirs = {rp: a['resources']
              for rp, a in mine.get('allocations', {}).items()}
    remainder = {
        'allocations': rest, 'consumer_generation':
        body.get('consumer_generation'),
        'project_id': body['project_id'], 'user_id': body['user_id']}
    server_here = _tree(theirs, roots, target)
    if server_here:
        used = {rc: n for rc, n in _flavor_resources(inst).items() if n}
        if (here != {target: used} or set(server_here) != {target} or
                server_here == here):
            return placement.put(now.consumer, remainder)
        theirs = {rp: res for rp, res in theirs.items()
                  if rp not in server_here}
    theirs.update(here)
    return placement.post({
        now.consumer: remainder,
        now.server: {
            'allocations': {rp: {'resources': res}
                            for rp, res in theirs.items()},
            'consumer_generation': mine.get('consumer_generation'),
            'project_id': inst.project_id, 'user_id': inst.user_id}})
