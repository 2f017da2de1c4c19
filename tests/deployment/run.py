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

"""The deployment test: the seeds on real services, vanilla against fixed.

    python -m tests.deployment.run [--mode vanilla|fixed|both]
        [--layout single-cell|superconductor]... [--keep]

For each layout (deploy.LAYOUTS; both by default, single-cell first)
and each mode it deploys nova (tests/deployment/deploy.py) on MariaDB and
RabbitMQ, which tools/deploy/services.sh must have started, runs the
layout's scenarios below against the running services, tears everything
down and prints one row per scenario in the recreate report's format.
Then a line "deployment (LAYOUT): N passed, N failed" per layout and
last the line "N passed, N failed" of them all: a scenario passes when
vanilla nova shows the bug (an open bug: the leak is there; a bug nova
fixed, or a scenario of what must not change: no leak) and nova with
the fixes shows none. Each scenario's failures are printed with the
service logs' directory (kept with --keep, or when a scenario failed).
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
import traceback

from tests.deployment import deploy

LEAK = 'LEAK: '
BATCH = 20


class Leak(AssertionError):
    """The scenario found what the bug leaves behind."""


def check(condition, message):
    if not condition:
        raise Leak(message)


def require(condition, message):
    """Not the leak: the scenario did not go as it must for its verdict to
    mean anything.
    """
    if not condition:
        raise deploy.DeployError(message)


# -- scenarios ------------------------------------------------------------
#
# Each takes the running Deployment and returns {row name: None (clean) or
# the leak found}; anything else it raises is an error of the run.


def outage_after_claims(d, results):
    """Bug 1859496 as its reporter saw it, and window 2 of its fix.

    1. One request for BATCH servers; the scheduler claims all of them,
       and placement holds its answer to the last claim.
    2. While the servers are in BUILD, with their build requests, placement
       goes down (503) and the user deletes the first server: vanilla nova
       accepts the delete and forgets the claim; with the fixes the API
       answers 503 and the delete is retried once placement is back.
    3. RabbitMQ is stopped (a real broker outage), then the scheduler goes
       on: its reply is lost, the conductor times out and buries the
       servers in cell0 (ERROR). The broker comes back.
    4. The user deletes every server left: no allocation, no usage, every
       instance mapping queued for delete.
    """
    d.touch('placement.claims.arm', str(BATCH))
    ids = d.boot(BATCH, name='outage')
    d.wait_file('placement.reached')
    require(all(d.server(i)['status'] == 'BUILD' for i in ids),
            'servers not in BUILD while the scheduler is held')
    require(all(d.allocations(i) for i in ids),
            'the scheduler did not claim every server')
    first, rest = ids[0], ids[1:]

    # Window 2: placement down during the delete of a server in BUILD.
    # The API worker has called placement before (Deployment.start).
    d.touch('placement.down')
    resp = d.delete(first, ok=(204, 503))
    os.unlink(d.gate('placement.down'))
    refused = resp.status_code == 503
    # With the fixes the API must refuse the delete while placement is
    # down: a 204 there would mean the claim was forgotten or the delete
    # went on without placement, whatever the allocations show later.
    require(refused or d.mode != 'fixed',
            'with the fixes the API answered %d, not 503, to a delete '
            'while placement was down' % resp.status_code)
    if refused:
        require('Placement could not be reached' in resp.text,
                'the 503 does not name placement: %s' % resp.text)
        d.delete(first)
    d.wait_gone(first)

    # The broker outage, with the scheduler's claims made.
    deploy.services('stop', 'rabbitmq')
    try:
        d.touch('placement.release')
        for i in rest:
            s = d.wait_status(i, ('ERROR', 'ACTIVE'), timeout=180)
            require(s['status'] == 'ERROR' and
                    not s.get('OS-EXT-SRV-ATTR:host'),
                    'server %s was built during the outage' % i)
    finally:
        deploy.services('start', 'rabbitmq')
    deploy.wait_until('every service back after the broker restart',
                      d.services_up(d.all_services()), timeout=180)
    # (The claims were made before the outage: checked at the gate. The
    # conductor may drop them when it buries the servers; nova 34 keeps
    # them until the delete.)
    for i in rest:
        d.delete(i)
    for i in rest:
        d.wait_gone(i)

    try:
        first_allocs = d.allocations(first)
        check(not first_allocs, LEAK + 'allocations of a server deleted '
              'in BUILD while placement was down (API answered 204): %s'
              % deploy.dump(first_allocs))
        check(d.mapping_queued_for_delete(first),
              LEAK + 'mapping of %s not queued for delete' % first)
        results['placement down during a delete (503, retry)'] = None
    except Leak as e:
        results['placement down during a delete (503, retry)'] = str(e)

    try:
        leaked = {i: d.allocations(i) for i in rest}
        leaked = {i: a for i, a in leaked.items() if a}
        check(not leaked, LEAK + 'allocations of %d of %d servers deleted '
              'after the outage' % (len(leaked), len(rest)))
        queued = [i for i in rest if not d.mapping_queued_for_delete(i)]
        check(not queued, LEAK + '%d mappings not queued for delete'
              % len(queued))
        consumers = set(d.consumers_with_allocations()) - {first}
        check(not consumers, LEAK + 'usage left by consumers %s'
              % sorted(consumers))
        results['%d servers lose the bus after the claims, deleted'
                % BATCH] = None
    except Leak as e:
        results['%d servers lose the bus after the claims, deleted'
                % BATCH] = str(e)


def build_cleanup(d, results):
    """Window 1 of bug 1859496's fix: the conductor gives the build up
    after the scheduler's claim (its quota recheck fails: the quota was
    lowered while the scheduler claimed). The servers are in ERROR on no
    host and may hold nothing in placement; deleting them leaves nothing.
    """
    name = "the conductor's build cleanup (quota recheck)"
    d.touch('placement.claims.arm', '2')
    ids = d.boot(2, name='recheck')
    d.wait_file('placement.reached')
    # The default quota class (the project's own quota would need
    # keystone to check the project).
    d.request('PUT', '/os-quota-class-sets/default',
              {'quota_class_set': {'instances': 1}})
    try:
        d.touch('placement.release')
        for i in ids:
            s = d.wait_status(i, ('ERROR', 'ACTIVE'))
            require(s['status'] == 'ERROR' and
                    'Quota exceeded' in s.get('fault', {}).get('message', ''),
                    'server %s did not fail its quota recheck: %s'
                    % (i, s.get('fault')))
        held = {i: d.allocations(i) for i in ids}
        held = {i: a for i, a in held.items() if a}
    finally:
        d.request('PUT', '/os-quota-class-sets/default',
                  {'quota_class_set': {'instances': 100}})
    for i in ids:
        d.delete(i)
    for i in ids:
        d.wait_gone(i)
    left = [i for i in ids if d.allocations(i)]
    results[name] = (
        LEAK + 'allocations held by %d servers in ERROR that never reached '
        'a compute' % len(held) if held else
        LEAK + 'allocations left after the delete' if left else None)


def resize_after_delete(d, results):
    """Bug 1848343: a resize fails after the server was deleted.

    The source compute's test driver stops in migrate_disk_and_power_off
    (the gate), the server is deleted meanwhile, then the step fails
    (InstanceNotFound): resize_instance reverts the migration's
    allocations to the server, which no longer exists.
    """
    before = set(d.consumers_with_allocations())
    uuid = d.boot(1, name='resize')[0]
    server = d.wait_status(uuid, ('ACTIVE',))
    source = server['OS-EXT-SRV-ATTR:host']
    step = '%s.migrate_disk_and_power_off' % source
    d.touch(step + '.arm')
    d.post('/servers/%s/action' % uuid, {'migrate': None})
    d.wait_file(step + '.reached')
    d.delete(uuid)
    d.wait_gone(uuid)
    # nova's terminate destroys the record before it deletes the
    # allocations: the gate opens once the whole terminate is done, or the
    # revert can run first and be undone by that delete.
    deploy.wait_until(
        'the terminate_instance of the delete to finish',
        lambda: _event_finished(d, uuid, 'delete',
                                'compute_terminate_instance'))
    d.touch(step + '.release', 'fail')

    deploy.wait_until(
        'the failed resize_instance to finish',
        lambda: _event_finished(d, uuid, 'migrate', 'compute_resize_instance'))
    leaked = {c: d.allocations(c)
              for c in set(d.consumers_with_allocations()) - before}
    results['resize fails after the server was deleted'] = (
        LEAK + 'allocations left: %s' % deploy.dump(leaked)
        if leaked else None)


def _event_finished(d, uuid, action_name, event_name):
    """The result of ``event_name`` of the server's ``action_name``
    action once it finished (Success, Error), else None.
    """
    for action in d.get('/servers/%s/os-instance-actions' % uuid)[
            'instanceActions']:
        if action['action'] != action_name:
            continue
        detail = d.get('/servers/%s/os-instance-actions/%s' % (
            uuid, action['request_id']))['instanceAction']
        for event in detail.get('events', []):
            if event['event'] == event_name and event.get('finish_time'):
                return event.get('result') or 'finished'
    return None


def revert_after_delete(d, results):
    """Bug 1848343 at the destination: the server is deleted while the
    destination reverts its resize.

    A cold migration reaches VERIFY_RESIZE; the user reverts, and the
    destination's test driver stops in the destroy() of revert_resize
    (the gate). The user deletes the server: the destination's
    terminate_instance runs meanwhile (revert_resize holds no instance
    lock) and the server is gone. The gate opens: revert_resize goes on
    and casts finish_revert_resize to the source, on the deleted server.
    """
    before = set(d.consumers_with_allocations())
    uuid = d.boot(1, name='revert')[0]
    d.wait_status(uuid, ('ACTIVE',))
    d.post('/servers/%s/action' % uuid, {'migrate': None})
    server = d.wait_status(uuid, ('VERIFY_RESIZE',))
    target = server['OS-EXT-SRV-ATTR:host']
    step = '%s.destroy' % target
    d.touch(step + '.arm')
    d.post('/servers/%s/action' % uuid, {'revertResize': None})
    d.wait_file(step + '.reached')
    d.delete(uuid)
    d.wait_gone(uuid)
    d.touch(step + '.release')
    deploy.wait_until(
        "the destination's revert_resize to finish",
        lambda: _event_finished(d, uuid, 'revertResize',
                                'compute_revert_resize'))
    if _event_finished(d, uuid, 'revertResize',
                       'compute_revert_resize') != 'Error':
        # It cast finish_revert_resize to the source: wait for it there.
        deploy.wait_until(
            "the source's finish_revert_resize to finish",
            lambda: _event_finished(d, uuid, 'revertResize',
                                    'compute_finish_revert_resize'))
    leaked = {c: d.allocations(c)
              for c in set(d.consumers_with_allocations()) - before}
    results['server deleted while the destination reverts a resize'] = (
        LEAK + 'allocations left: %s' % deploy.dump(leaked)
        if leaked else None)


def orphans(d, results):
    """The orphan instances task: a guest added out of band to compute1
    (action=log) is logged and left running; one added to compute2
    (action=reap) is destroyed; a server nova knows on compute2 is left
    alone.
    """
    known = d.boot(1, name='known', host='compute2')[0]
    d.wait_status(known, ('ACTIVE',))
    logged, reaped = ('0badc0de-0000-4000-8000-00000000000%d' % n
                      for n in (1, 2))
    d.touch('compute1.guests', logged + '\n')
    d.touch('compute2.guests', reaped + '\n')

    def reaped_yet():
        with open(d.gate('compute2.guests')) as f:
            return reaped not in f.read()

    def logged_yet():
        return ('Orphan instance %s' % logged) in d.log('compute1')

    if d.mode == 'fixed':
        # poll_interval is 2 s: 15 runs.
        try:
            deploy.wait_until('the orphans to be reaped and logged',
                              lambda: reaped_yet() and logged_yet(), 30)
        except deploy.DeployError:
            pass  # what is missing is told below
    else:
        # No task to wait for: give it the time the fixed services take
        # (a few 2 s poll intervals).
        time.sleep(12)
    with open(d.gate('compute1.guests')) as f:
        still_running = logged in f.read()
    server = d.server(known)
    require(server['status'] == 'ACTIVE' and
            server['OS-EXT-STS:power_state'] == 1,
            'the known server was touched: %s, power state %s' % (
                server['status'], server['OS-EXT-STS:power_state']))
    problems = []
    if not reaped_yet():
        problems.append('the orphan on compute2 (action=reap) still runs')
    if not logged_yet():
        problems.append('the orphan on compute1 (action=log) was not '
                        'logged')
    if not still_running:
        problems.append('the orphan on compute1 was touched')
    results['orphan guests: logged, reaped'] = (
        LEAK + '; '.join(problems) if problems else None)
    d.delete(known)
    d.wait_gone(known)


def database_restart(d, results):
    """A database restart during the test: the services go on (a server
    boots on each compute and is deleted) and nothing is left in
    placement.
    """
    before = set(d.consumers_with_allocations())
    deploy.services('restart', 'mariadb')
    deploy.wait_until('every service back after the database restart',
                      d.services_up(d.all_services()), timeout=180)
    ids = [d.boot(1, name='after-db', host=h)[0] for h in d.computes]
    for i in ids:
        d.wait_status(i, ('ACTIVE',))
    for i in ids:
        d.delete(i)
    for i in ids:
        d.wait_gone(i)
    left = sorted(set(d.consumers_with_allocations()) - before)
    results['database and broker restarts: no leak, no wedged '
            'service'] = (LEAK + 'consumers %s' % left if left else None)


# -- the superconductor layout --------------------------------------------
#
# compute1 is in cell1, compute2 in cell2; each cell's conductor has no
# API database, so the orphan task (action=reap on both, grace_period 4 s,
# a scan every 2 s) decides on the evidence of the cell and placement.
# A server moved with the migrate action goes to the other cell (the only
# other host).

SCAN_WAIT = 14  # the grace period and five scans


def _cross_cell(d, name, wait=True):
    """A server on compute1 migrated to compute2 in cell2; returns its
    uuid (in VERIFY_RESIZE if ``wait``).
    """
    uuid = d.boot(1, name=name, host='compute1')[0]
    d.wait_status(uuid, ('ACTIVE',))
    d.post('/servers/%s/action' % uuid, {'migrate': None})
    if wait:
        server = d.wait_status(uuid, ('VERIFY_RESIZE',))
        require(server['OS-EXT-SRV-ATTR:host'] == 'compute2',
                'the server went to %s, not compute2 in cell2'
                % server['OS-EXT-SRV-ATTR:host'])
        require(set(d.copies(uuid)) == {'cell1', 'cell2'},
                'not a cross-cell resize: copies %s' % d.copies(uuid))
    return uuid


def _settle(d, uuid, before, what, quiet=5, timeout=90):
    """Wait, bounded, until what is left of ``uuid`` (its copies, its
    guests, the consumers with allocations) stops changing for ``quiet``
    seconds with no copy in a task; returns that state.
    """
    def state():
        copies = d.copies(uuid)
        return (deploy.dump(copies),
                tuple(sorted(h for h in d.computes
                             if uuid in d.guests(h))),
                tuple(sorted(set(d.consumers_with_allocations()) - before)))

    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while True:
        now = state()
        busy = any(c[1] for c in d.copies(uuid).values())
        if now != last or busy:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
        if time.monotonic() > deadline:
            raise deploy.DeployError('%s: still changing after %ss: %s'
                                     % (what, timeout, now))
        time.sleep(0.5)


def _left_of(d, uuid, before):
    """What a deleted server left: live copies, guests, allocations."""
    left = []
    copies = d.copies(uuid)
    if copies:
        left.append('live copies %s' % deploy.dump(copies))
    hosts = [h for h in d.computes if uuid in d.guests(h)]
    if hosts:
        left.append('guests on %s' % ', '.join(hosts))
    consumers = sorted(set(d.consumers_with_allocations()) - before)
    if consumers:
        left.append('allocations of %s' % ', '.join(
            '%s %s' % (c, deploy.dump(d.allocations(c))) for c in consumers))
    return LEAK + '; '.join(left) if left else None


def reaped_after_archive(d, results):
    """A guest whose server was deleted (its destroy left it running:
    the hypervisor lists it out of band) and then archived with
    ``nova-manage db archive_deleted_rows --all-cells``: nothing in nova
    knows it any more. compute2's cell conductor cannot read the API
    database; the orphan task reaps it on the evidence of cell2 and
    placement.
    """
    name = 'an unknown guest after archive_deleted_rows is reaped'
    uuid = d.boot(1, name='archived', host='compute2')[0]
    d.wait_status(uuid, ('ACTIVE',))
    d.add_guest('compute2', uuid)
    d.delete(uuid)
    d.wait_gone(uuid)
    require(uuid in d.guests('compute2'),
            'the guest did not outlive its server')
    d.archive()
    require(d.records(uuid) == (0, 0),
            'archive_deleted_rows left records, mappings: %s'
            % (d.records(uuid),))
    line = 'Orphan instance %s (unknown: ' % uuid
    if d.mode == 'fixed':
        try:
            deploy.wait_until('the guest to be reaped',
                              lambda: uuid not in d.guests('compute2'), 30)
        except deploy.DeployError:
            pass  # told below
    else:
        time.sleep(SCAN_WAIT)
    if uuid in d.guests('compute2'):
        results[name] = LEAK + 'the unknown guest still runs on compute2'
        return
    log = d.log('compute2')
    require(line in log and 'cannot be read here' in log,
            'compute2 did not decide on the cell and placement evidence: '
            '%s' % [entry for entry in log.splitlines()
                    if 'Orphan' in entry][-3:])
    results[name] = None


def verify_resize_left_alone(d, results):
    """Two servers moved across cells wait in VERIFY_RESIZE: each has a
    stopped guest on compute1 (disks kept, its record hidden in cell1)
    and a running one on compute2. Both computes reap orphans; several
    scans past the grace period, all four guests are there. Then one
    resize is confirmed and the other reverted, and each server has one
    guest and its allocations on the host it ended on.
    """
    name = 'cross-cell VERIFY_RESIZE guests kept past the grace period'
    before = set(d.consumers_with_allocations())
    confirmed = _cross_cell(d, 'confirmed')
    reverted = _cross_cell(d, 'reverted')
    pair = (confirmed, reverted)
    on = {h: d.guests(h) for h in d.computes}
    require(all(u in on[h] for u in pair for h in d.computes),
            'not a guest on each side: %s' % on)
    time.sleep(SCAN_WAIT)
    problems = ['the %s guest of %s was removed while in VERIFY_RESIZE'
                % (h, u) for h in d.computes for u in pair
                if u not in d.guests(h)]
    d.post('/servers/%s/action' % confirmed, {'confirmResize': None})
    d.post('/servers/%s/action' % reverted, {'revertResize': None})
    for uuid, host in ((confirmed, 'compute2'), (reverted, 'compute1')):
        server = d.wait_status(uuid, ('ACTIVE', 'ERROR'))
        require(server['status'] == 'ACTIVE',
                '%s went to ERROR: %s' % (uuid, server.get('fault')))
        require(server['OS-EXT-SRV-ATTR:host'] == host,
                '%s is on %s, not %s' % (
                    uuid, server['OS-EXT-SRV-ATTR:host'], host))
        _settle(d, uuid, before, 'the end of %s' % uuid)
        hosts = sorted(h for h in d.computes if uuid in d.guests(h))
        if hosts != [host]:
            problems.append('%s has guests on %s' % (uuid, hosts))
        allocs = d.allocations(uuid)
        if list(allocs) != [d.provider(host)]:
            problems.append('%s has allocations %s' % (
                uuid, deploy.dump(allocs)))
        if list(d.copies(uuid)) != [d.layout.computes[host]]:
            problems.append('%s has copies %s' % (uuid, d.copies(uuid)))
    extra = set(d.consumers_with_allocations()) - before - set(pair)
    if extra:
        problems.append('other consumers hold allocations: %s'
                        % sorted(extra))
    results[name] = LEAK + '; '.join(problems) if problems else None
    for uuid in pair:
        d.delete(uuid)
    for uuid in pair:
        d.wait_gone(uuid)


def delete_during_finish(d, results):
    """Bug 1848343 across cells: the server is deleted while compute2
    (the target cell's) spawns its guest for the resize. The API deletes
    the copy its mapping names (cell1's); then the conductor points the
    mapping at cell2.
    """
    name = "deleted while the target cell's compute finishes"
    before = set(d.consumers_with_allocations())
    d.touch('compute2.spawn.arm')
    uuid = _cross_cell(d, 'finish', wait=False)
    d.wait_file('compute2.spawn.reached')
    d.delete(uuid)
    d.wait_gone(uuid)
    d.touch('compute2.spawn.release')
    _settle(d, uuid, before, 'the resize after the delete')
    results[name] = _left_of(d, uuid, before)


def delete_at_verify_resize(d, results):
    """A server deleted in VERIFY_RESIZE after a cross-cell resize."""
    name = 'deleted in VERIFY_RESIZE after a cross-cell resize'
    before = set(d.consumers_with_allocations())
    uuid = _cross_cell(d, 'verify')
    d.delete(uuid)
    d.wait_gone(uuid)
    _settle(d, uuid, before, 'the delete')
    results[name] = _left_of(d, uuid, before)


def revert_across_cells(d, results):
    """Bug 1848343's revert across cells: the user reverts; while
    compute2 destroys its guest for the revert (the conductor has pointed
    the mapping back at cell1), the user deletes the server, on compute1.
    Then the conductor has compute1 finish the revert of the deleted
    server, with its migration's allocations.
    """
    name = 'deleted while a cross-cell resize is reverted'
    before = set(d.consumers_with_allocations())
    uuid = _cross_cell(d, 'revert')
    d.touch('compute2.destroy.arm')
    d.post('/servers/%s/action' % uuid, {'revertResize': None})
    d.wait_file('compute2.destroy.reached')
    d.delete(uuid)
    d.wait_gone(uuid)
    d.touch('compute2.destroy.release')
    _settle(d, uuid, before, 'the revert after the delete')
    results[name] = _left_of(d, uuid, before)


SUPERCONDUCTOR = (
    ('orphans', reaped_after_archive, {
        'an unknown guest after archive_deleted_rows is reaped': True}),
    ('orphans', verify_resize_left_alone, {
        'cross-cell VERIFY_RESIZE guests kept past the grace period':
            False}),
    (1848343, delete_during_finish, {
        "deleted while the target cell's compute finishes": True}),
    (1848343, delete_at_verify_resize, {
        'deleted in VERIFY_RESIZE after a cross-cell resize': False}),
    (1848343, revert_across_cells, {
        'deleted while a cross-cell resize is reverted': True}),
)


SCENARIOS = (
    (1859496, build_cleanup, {
        "the conductor's build cleanup (quota recheck)": True}),
    (1859496, outage_after_claims, {
        '%d servers lose the bus after the claims, deleted' % BATCH: False,
        'placement down during a delete (503, retry)': True}),
    (1848343, resize_after_delete, {
        'resize fails after the server was deleted': True}),
    (1848343, revert_after_delete, {
        'server deleted while the destination reverts a resize': True}),
    ('orphans', orphans, {'orphan guests: logged, reaped': True}),
    ('faults', database_restart, {
        'database and broker restarts: no leak, no wedged service': False}),
)


def fingerprint_mismatch(workdir, nova_conf):
    """A fixed service on a nova that does not match its fingerprints
    refuses to start: one line, non-zero exit, nothing patched or started.
    Returns None or what went wrong.
    """
    import json
    import nova_fixes
    from nova_fixes import activation
    series = activation.series_of(activation.nova_version())
    src = os.path.dirname(nova_fixes.__file__)
    tree = os.path.join(workdir, 'mismatch')
    shutil.copytree(src, os.path.join(tree, 'nova_fixes'))
    path = os.path.join(tree, 'nova_fixes', 'fingerprints.json')
    with open(path) as f:
        recorded = json.load(f)
    changed = _alter_one(recorded, series)
    with open(path, 'w') as f:
        json.dump(recorded, f)
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run(
        [sys.executable, '-c', 'import sys; from nova_fixes.cmd import '
         'services; sys.exit(services.conductor())',
         '--config-file', nova_conf],
        capture_output=True, text=True, env=env, cwd=tree, timeout=120)
    lines = out.stderr.strip().splitlines()
    if out.returncode == 0:
        return 'exit status 0'
    if len(lines) != 1 or changed not in lines[0]:
        return 'not one line naming %s: %r' % (changed, out.stderr[-500:])
    return None


def _alter_one(recorded, series):
    """Change one recorded fingerprint of a conductor target of the
    installed nova's series; returns the target's path.
    """
    prints = recorded.get(series)
    if not isinstance(prints, dict):
        raise deploy.DeployError('fingerprints.json has no series %s'
                                 % series)
    # A target of the conductor's: the conductor checks its own.
    for target, value in sorted(prints.items()):
        if (target.startswith('nova.conductor.') and
                isinstance(value, str) and value != 'absent'):
            prints[target] = '0' * len(value)
            return target
    raise deploy.DeployError('no fingerprint of %s to alter' % series)


LAYOUT_SCENARIOS = {'single-cell': SCENARIOS,
                    'superconductor': SUPERCONDUCTOR}


# -- the run ------------------------------------------------------------------


def reset(d):
    """After a scenario, whatever became of it: placement up, every gate
    disarmed and any gate still holding a step released, the broker
    running.
    """
    if os.path.exists(d.gate('placement.down')):
        os.unlink(d.gate('placement.down'))
    for name in os.listdir(d.gates):
        if name.endswith('.arm'):
            os.unlink(d.gate(name))
        elif name.endswith('.reached'):
            d.touch(name[:-len('reached')] + 'release')
    deploy.services('start', 'rabbitmq')


def run_mode(mode, keep, layout='single-cell'):
    d = deploy.Deployment(mode, layout=layout)
    results, errors = {}, {}
    started = time.monotonic()
    scenarios = LAYOUT_SCENARIOS[layout]
    tag = '%s %s' % (layout, mode)
    try:
        d.start()
        sys.stderr.write('[%s] deployed in %.0f s (%s)\n' % (
            tag, time.monotonic() - started, d.dir))
        for bug, scenario, rows in scenarios:
            t = time.monotonic()
            try:
                scenario(d, results)
            except Exception:
                for row in rows:
                    results.setdefault(row, None)
                    errors[row] = traceback.format_exc(limit=4)
            finally:
                reset(d)
            sys.stderr.write('[%s] %s: %.0f s\n' % (
                tag, scenario.__name__, time.monotonic() - t))
        if d.stubs.unexpected:
            sys.stderr.write('[%s] calls the stub did not serve: %s\n'
                             % (tag, sorted(set(d.stubs.unexpected))))
    except Exception:
        for _bug, _scenario, rows in scenarios:
            for row in rows:
                results.setdefault(row, None)
                errors.setdefault(row, traceback.format_exc(limit=6))
    finally:
        d.stop()
    if mode == 'fixed' and layout == 'single-cell':
        row = 'a service on an unexpected nova refuses to start'
        try:
            results[row] = fingerprint_mismatch(d.dir, d.nova_conf)
            if results[row]:
                errors[row] = results[row]
        except Exception:
            results[row] = None
            errors[row] = traceback.format_exc(limit=4)
    failed = bool(errors)
    if keep or failed:
        sys.stderr.write('[%s] service logs kept in %s\n' % (tag, d.logs))
    else:
        d.cleanup()
    return results, errors


def rows_of(vanilla, fixed, modes=('vanilla', 'fixed'),
            layout='single-cell'):
    """(bug, scenario, vanilla text, fixed text, as expected); a mode not
    in ``modes`` was not run and decides nothing.
    """
    rows = []
    extra = ((('faults', None, {
        'a service on an unexpected nova refuses to start': None}),)
        if layout == 'single-cell' else ())
    for bug, _scenario, expected in LAYOUT_SCENARIOS[layout] + extra:
        for name, open_bug in expected.items():
            v_res, v_err = vanilla
            f_res, f_err = fixed
            if name in f_err:
                fixed_text, fixed_ok = 'ERROR', False
            elif name not in f_res:
                fixed_text, fixed_ok = 'not run', False
            else:
                fixed_ok = f_res[name] is None
                fixed_text = 'PASS' if fixed_ok else 'FAIL'
            if open_bug is None:
                vanilla_text, vanilla_ok = 'n/a (tests the fix itself)', True
            elif name in v_err:
                vanilla_text, vanilla_ok = 'ERROR', False
            elif name not in v_res:
                vanilla_text, vanilla_ok = 'not run', False
            elif open_bug:
                vanilla_ok = v_res[name] is not None
                vanilla_text = 'RECREATED' if vanilla_ok else 'not recreated'
            else:
                vanilla_ok = v_res[name] is None
                vanilla_text = ('passes (no leak on nova)' if vanilla_ok
                                else 'FAILS')
            if 'vanilla' not in modes:
                vanilla_text, vanilla_ok = 'not run', True
            if 'fixed' not in modes:
                fixed_text, fixed_ok = 'not run', True
            rows.append((str(bug), name, vanilla_text, fixed_text,
                         vanilla_ok and fixed_ok))
    return rows


def format_table(rows):
    headers = ('bug', 'scenario', 'vanilla', 'fixed')
    widths = [max(len(h), *(len(r[i]) for r in rows))
              for i, h in enumerate(headers)]
    out = ['  '.join('%-*s' % (w, h) for w, h in zip(widths, headers)),
           '  '.join('-' * w for w in widths)]
    for r in rows:
        out.append('  '.join('%-*s' % (w, v) for w, v in zip(widths, r)))
    return '\n'.join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    parser.add_argument('--mode', choices=('vanilla', 'fixed', 'both'),
                        default='both')
    parser.add_argument('--layout', action='append',
                        choices=sorted(LAYOUT_SCENARIOS),
                        help='the layouts to deploy (repeatable; default: '
                        'single-cell, then superconductor)')
    parser.add_argument('--keep', action='store_true',
                        help='keep the service logs and configs')
    args = parser.parse_args(argv)
    layouts = args.layout or ['single-cell', 'superconductor']
    if not deploy.services('status'):
        print('deployment: MariaDB and RabbitMQ are not running; start '
              'them with tools/deploy/services.sh start', file=sys.stderr)
        print('0 passed, 1 failed')
        return 1
    started = time.monotonic()
    empty = ({}, {})
    modes = ('vanilla', 'fixed') if args.mode == 'both' else (args.mode,)
    lines, passed, total = [], 0, 0
    for layout in layouts:
        t = time.monotonic()
        vanilla = (run_mode('vanilla', args.keep, layout)
                   if 'vanilla' in modes else empty)
        fixed = (run_mode('fixed', args.keep, layout)
                 if 'fixed' in modes else empty)
        rows = rows_of(vanilla, fixed, modes, layout)
        print('layout %s:\n' % layout)
        print(format_table(rows))
        for label, (res, err) in (('vanilla', vanilla), ('fixed', fixed)):
            for name in sorted(res):
                if res[name] or name in err:
                    print('\n[%s %s] %s:\n  %s' % (
                        layout, label, name,
                        (err.get(name) or res[name]).strip()
                        .replace('\n', '\n  ')))
        ok = sum(1 for r in rows if r[4])
        passed += ok
        total += len(rows)
        lines.append('deployment (%s): %d passed, %d failed' % (
            layout, ok, len(rows) - ok))
        print('\nlayout %s: %.0f s\n' % (layout, time.monotonic() - t))
    print('deployment test: %.0f s' % (time.monotonic() - started))
    for line in lines:
        print(line)
    print('%d passed, %d failed' % (passed, total - passed))
    return 0 if passed == total else 1


if __name__ == '__main__':
    sys.exit(main())
