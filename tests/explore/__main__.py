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

"""The race explorer: a delete injected at every step of every server
operation, on vanilla nova and on the fixed one.

    python -m tests.explore [options] [OPERATION-PATTERN...]
    tox -e explore -- [options] [OPERATION-PATTERN...]

Runs one worker process per (side, operation), --jobs at a time, prints
the matrix operation x step (each side in each variant: delete, down,
outage, timeout, restart), the details of what is not OK, an "explored (<side>,
<variant>): S steps, L leaks, W wrong, E errors, K stuck" line per side
and variant, a "N passed, N failed" line, and ends with one such
"explored (<side>): ..." total per side.
Exits non-zero if a fixed-side run is not OK, a known bug of vanilla
nova (KNOWN_VANILLA_LEAKS) is not found, or a worker fails: exits
non-zero, is killed at the run's deadline (--deadline) or leaves a run it
was given without a record (that run is then an ERROR, with the reason).
"""

import argparse
import collections
import fnmatch
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

from tests.explore import operations
from tests.explore import variants as variants_mod

VARIANTS = variants_mod.FAULTS
RESULTS = ('OK', 'LEAK', 'WRONG', 'STUCK', 'ERROR', 'N/A')

#: The CI subset, every variant: a boot, bug 1848343's revert paths, a
#: live migration (its scheduler's claim after the delete) and one rolled
#: back. About 7 minutes on 2 cores, both sides (see the README).
CI_OPERATIONS = ('boot', 'cold-migrate-revert', 'live-migrate',
                 'live-migrate-pre-fails')

#: What the explorer must find on vanilla nova, unaided: (operation, step,
#: variant) that must be LEAK there. Bug 1848343's revert paths: the
#: server deleted while the revert of a cold migration is on its way to
#: the destination or back to the source; finish_revert_resize fails on
#: the deleted server and the migration keeps the source's allocations.
#: And its live migration rollback: the server deleted while the
#: destination's pre_live_migration fails, in the source's
#: _rollback_live_migration or its _revert_allocation, which moves the
#: migration's allocations back to the deleted server
#: (test_bug_1848343's DeletedServerRevertPathsTest, by hand).
KNOWN_VANILLA_LEAKS = {
    ('live-migrate-pre-fails', 'rpc compute-alt.pre_live_migration',
     'delete'): '1848343 pre_live_migration failure',
    ('live-migrate-pre-fails', 'ComputeManager._rollback_live_migration',
     'delete'): '1848343 _rollback_live_migration',
    ('live-migrate-pre-fails', 'ComputeManager._revert_allocation',
     'delete'): '1848343 _revert_allocation of a live migration',
    ('cold-migrate-revert', 'rpc compute.revert_resize', 'delete'):
        '1848343 revert_resize',
    ('cold-migrate-revert', 'rpc compute-alt.finish_revert_resize',
     'delete'): '1848343 finish_revert_resize',
    ('cold-migrate-revert', 'ComputeManager._finish_revert_resize',
     'delete'): '1848343 finish_revert_resize',
    ('cold-migrate-revert', 'rpc compute.prep_resize', 'delete'):
        '1848343 prep_resize failure',
    ('cold-migrate-revert', 'ComputeManager._revert_allocation', 'delete'):
        '1848343 finish_revert_resize (its regression test\'s race)',
    # The scheduler's claim lands after the delete and creates the
    # instance consumer again (test_bug_1848343_deleted_moves'
    # LiveMigrationClaimAfterDeleteTest and
    # CrossCellResizeClaimAfterDeleteTest).
    ('live-migrate', 'rpc scheduler.select_destinations', 'delete'):
        '1848343 a live migration\'s claim after the delete',
    ('cross-cell-resize-confirm', 'ComputeTaskManager._cold_migrate',
     'delete'): '1848343 a cross-cell resize\'s claim after the delete',
    # The source's call of post_live_migration_at_destination gets no
    # reply: the server goes to ERROR and the migration to 'error' with
    # the source's allocations, which nova's delete leaves (the fixes'
    # delete removes those of a migration that may still hold them).
    ('live-migrate', 'rpc compute-alt.post_live_migration_at_destination',
     'timeout'): '1848343 a live migration whose last call got no reply',
    # The source restarts after it recorded the live migration completed,
    # before it removed the migration's allocations on the source node.
    ('live-migrate', 'ComputeManager._delete_allocation_after_move',
     'restart'): '1848343 a live migration\'s source restarted before its '
                 'release',
}


def _operations(patterns):
    names = [op.name for op in operations.OPERATIONS]
    if not patterns:
        return names
    chosen = []
    for pattern in patterns:
        matched = fnmatch.filter(names, pattern)
        if not matched:
            raise SystemExit('explore: no operation matches %r (known: %s)'
                             % (pattern, ', '.join(names)))
        chosen += [n for n in matched if n not in chosen]
    return chosen


#: How a worker ended: its exit code (None: it was killed at the deadline
#: or never started) and, in words, why its missing runs have no record.
Worker = collections.namedtuple('Worker', 'code why')

#: The default deadline of a run: this much per (side, operation, variant)
#: over the jobs that can run at once, plus DEADLINE_BASE. An operation
#: has up to about 30 steps of 8 to 12 s each on a 2-core machine.
DEADLINE_PER_UNIT = 480
DEADLINE_BASE = 300


def default_deadline(units, variants, jobs):
    """Seconds the whole run may take before its workers are killed."""
    parallel = max(1, min(jobs, os.cpu_count() or 1))
    return DEADLINE_BASE + (DEADLINE_PER_UNIT * len(units) *
                            len(variants) // parallel)


def _paths(outdir, side, op):
    base = os.path.join(outdir, '%s-%s' % (side, op))
    return base + '.jsonl', base + '.log'


def _worker_command(args, out, op):
    cmd = [sys.executable, '-m', 'tests.explore.worker',
           '--out', out, '--variants', ','.join(args.variants)]
    if args.steps:
        cmd += ['--steps', str(args.steps)]
    if args.all_entries:
        cmd += ['--all-entries']
    if args.fresh:
        cmd += ['--fresh']
    return cmd + [op]


def _exit_why(code):
    if code < 0:
        return 'worker killed by signal %d' % -code
    return 'worker exit %d' % code


def _wait(proc, ended):
    proc.wait()
    ended.put(proc)


def _kill(proc):
    """Kill a worker and everything it started (its process group);
    False if it had ended already.
    """
    if proc.returncode is not None:
        return False
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return True


def _run_workers(units, args, outdir, deadline, command=None):
    """Run a worker per (side, operation), args.jobs at a time, until they
    are done or `deadline` seconds have passed; then the workers still
    running are killed and those not started are not. Returns
    {(side, operation): Worker}. `command(args, out, op)` is a worker's
    command line (default _worker_command).
    """
    command = command or _worker_command
    env_of = {
        'vanilla': dict(os.environ, NOVA_FIXES_MODE='vanilla'),
        'fixed': dict(os.environ, NOVA_FIXES_MODE=args.fixed),
    }
    if args.fixed_path:
        env_of['fixed']['PYTHONPATH'] = os.pathsep.join(
            [args.fixed_path] + os.environ.get(
                'PYTHONPATH', os.getcwd()).split(os.pathsep))
    # Every run starts with fresh files: nothing of an earlier run in the
    # same --out directory can stand in for a record this one lacks.
    for side, op in units:
        for path in _paths(outdir, side, op):
            if os.path.exists(path):
                os.unlink(path)
    workers = {}
    pending = list(units)
    running = {}
    ended = queue.Queue()
    start = time.monotonic()
    why_left = 'the run was interrupted'
    try:
        while pending or running:
            while pending and len(running) < args.jobs:
                side, op = pending.pop(0)
                out, log_path = _paths(outdir, side, op)
                log = open(log_path, 'w')
                # A process group of its own: killed whole at the deadline.
                proc = subprocess.Popen(
                    command(args, out, op), env=env_of[side], stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True)
                running[proc] = (side, op, log, time.monotonic())
                threading.Thread(target=_wait, args=(proc, ended),
                                 daemon=True).start()
            left = start + deadline - time.monotonic()
            try:
                proc = ended.get(timeout=max(left, 0))
            except queue.Empty:
                why_left = ("the run's deadline of %d s passed" % deadline)
                break
            side, op, log, began = running.pop(proc)
            log.close()
            workers[(side, op)] = Worker(proc.returncode,
                                         _exit_why(proc.returncode))
            print('[%d/%d] %s %s: %s, %.0fs (%.0fs in all)' % (
                len(workers), len(units), side, op,
                _exit_why(proc.returncode), time.monotonic() - began,
                time.monotonic() - start), flush=True)
    finally:
        for proc, (side, op, log, began) in running.items():
            if _kill(proc):
                workers[(side, op)] = Worker(None, 'worker killed: ' +
                                             why_left)
            else:
                workers[(side, op)] = Worker(proc.returncode,
                                             _exit_why(proc.returncode))
            log.close()
            print('%s %s: %s' % (side, op, workers[(side, op)].why),
                  flush=True)
        for side, op in pending:
            workers[(side, op)] = Worker(None, 'worker not started: ' +
                                         why_left)
    return workers


def _load(outdir, units):
    """The workers' records: ({(side, op): steps}, {(side, op, step,
    variant): (result, details)}). A line a killed worker left half
    written is no record.
    """
    steps = {}
    cells = {}
    for side, op in units:
        path = _paths(outdir, side, op)[0]
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if 'steps' in record:
                    steps[(side, op)] = list(record['steps'])
                else:
                    cells[(side, op, record['step'], record['variant'])] = (
                        record['result'], record['details'])
    return steps, cells


def _rows(op, sides, steps):
    """The matrix' rows of an operation: 'after', then the steps of every
    side, in the order they were recorded.
    """
    rows = ['after']
    for side in sides:
        rows += [s for s in steps.get((side, op), []) if s not in rows]
    return rows


def expected_cells(ops, steps, variants, sides):
    """Every (side, op, step, variant) a run must have a result for: the
    'after' control (delete) and each step the side recorded, in each
    variant; a side with no recording is expected to have the steps the
    other side recorded.
    """
    expected = []
    for op in ops:
        rows = _rows(op, sides, steps)
        for side in sides:
            own = steps.get((side, op))
            if own is None:
                own = rows[1:]
            expected.append((side, op, 'after', 'delete'))
            expected += [(side, op, step, variant)
                         for step in own for variant in variants
                         if variants_mod.fault(variant) != 'timeout' or
                         step.startswith('rpc ')]
    return expected


def _fill_missing(ops, steps, cells, variants, sides, workers):
    """The cells with an ERROR for each expected run without a result,
    and how many each (side, op) lacks.
    """
    cells = dict(cells)
    missing_of = collections.Counter()
    for side, op, step, variant in expected_cells(ops, steps, variants,
                                                  sides):
        if (side, op, step, variant) in cells:
            continue
        worker = workers.get((side, op))
        why = worker.why if worker else 'no worker ran'
        if (side, op) not in steps:
            why = 'no steps recorded; ' + why
        cells[(side, op, step, variant)] = ('ERROR', ['no record (%s)'
                                                      % why])
        missing_of[(side, op)] += 1
    return cells, missing_of


def _print_matrix(ops, steps, cells, variants, sides, out):
    columns = [(side, v) for side in sides for v in variants]
    rows = {op: _rows(op, sides, steps) for op in ops}
    width = max([len(s) for op in ops for s in rows[op]] + [20])
    head = ' '.join('%-7s' % ('%s/%s' % (s[0], variants_mod.short(v)))
                    for s, v in columns)
    for op in ops:
        print('\n%s\n  %-*s %s' % (op, width, 'step', head), file=out)
        for step in rows[op]:
            row = []
            for side, variant in columns:
                if (step == 'after' and variant != 'delete') or (
                        variants_mod.fault(variant) == 'timeout' and
                        not step.startswith('rpc ')):
                    # Not run: the control is a delete; only an RPC
                    # message can lose its reply.
                    row.append('%-7s' % '')
                    continue
                # '-': not a step of that side's recording.
                result = cells.get((side, op, step, variant), ('-',))[0]
                row.append('%-7s' % result)
            print('  %-*s %s' % (width, step, ' '.join(row)), file=out)


def report(ops, steps, cells, variants, sides, out=None, workers=None):
    """Print the matrix and the summary; returns (passed, failed).

    `steps` and `cells` are what _load returns, `workers` what
    _run_workers does. Every expected run (expected_cells) without a
    result is an ERROR, with the reason its worker gives; each worker
    that did not exit 0 or left such a run fails.
    """
    out = out or sys.stdout
    workers = workers or {}
    cells, missing_of = _fill_missing(ops, steps, cells, variants, sides,
                                      workers)
    _print_matrix(ops, steps, cells, variants, sides, out)
    print('\nnot OK (fixed side), vanilla LEAKs and what vanilla\'s '
          'survivors hold:', file=out)
    for (side, op, step, variant), (result, details) in sorted(
            cells.items()):
        if result in ('OK', 'N/A') or (
                side == 'vanilla' and result != 'LEAK' and
                variants_mod.mode(variant) == 'delete'):
            continue
        print('  %s %s | %s | %s: %s: %s' % (
            side, op, step, variant, result, '; '.join(details)[:400]),
            file=out)
    passed = failed = 0
    for (side, op, step, variant), (result, _) in cells.items():
        if side == 'fixed':
            if result in ('OK', 'N/A'):
                passed += 1
            else:
                failed += 1
    missing = []
    for (op, step, variant), bug in sorted(KNOWN_VANILLA_LEAKS.items()):
        if op not in ops or 'vanilla' not in sides or variant not in variants:
            continue
        if cells.get(('vanilla', op, step, variant), ('-',))[0] == 'LEAK':
            passed += 1
        else:
            failed += 1
            missing.append('%s | %s | %s (%s)' % (op, step, variant, bug))
    for line in missing:
        print('vanilla did not show the known leak: ' + line, file=out)
    for (side, op), worker in sorted(workers.items()):
        if worker.code == 0 and not missing_of[(side, op)]:
            passed += 1
            continue
        failed += 1
        print('worker %s %s failed: %s; %d runs without a record' % (
            side, op, worker.why, missing_of[(side, op)]), file=out)
    line = '%d steps, %d leaks, %d wrong, %d errors, %d stuck'
    print('', file=out)
    for side in sides:
        for variant in variants:
            counts = collections.Counter(
                result for (s, _, _, v), (result, _) in cells.items()
                if s == side and v == variant and result != 'N/A')
            name = ('%s, %s' % (side, variant)
                    if variants_mod.mode(variant) == 'delete' else
                    '%s, %s, %s' % (side, variants_mod.fault(variant),
                                    variants_mod.mode(variant)))
            print('explored (%s): ' % name + line % (
                sum(counts.values()), counts['LEAK'], counts['WRONG'],
                counts['ERROR'], counts['STUCK']), file=out)
    print('\n%d passed, %d failed' % (passed, failed), file=out)
    for side in sides:
        counts = collections.Counter(
            result for (s, _, _, _), (result, _) in cells.items()
            if s == side and result != 'N/A')
        print('explored (%s): ' % side + line % (
            sum(counts.values()), counts['LEAK'], counts['WRONG'],
            counts['ERROR'], counts['STUCK']), file=out)
    return passed, failed


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m tests.explore',
        description='Delete the server at every step of nova server '
        'operations, on vanilla nova and with the fixes.')
    parser.add_argument('operations', nargs='*', metavar='OPERATION',
                        help='operation names or shell patterns (default: '
                        'all): %s' % ', '.join(
                            op.name for op in operations.OPERATIONS))
    parser.add_argument('--ci', action='store_true',
                        help='the CI subset: %s'
                        % ', '.join(CI_OPERATIONS))
    parser.add_argument('--sides', default='vanilla,fixed',
                        help='vanilla, fixed or both (default)')
    parser.add_argument('--fixed', default='dropin',
                        choices=('dropin', 'patched', 'vanilla'),
                        help='NOVA_FIXES_MODE of the fixed side (default '
                        'dropin; vanilla with --fixed-path: a nova tree '
                        'of your own, as it is)')
    parser.add_argument('--fixed-path', metavar='DIR',
                        help='a nova tree the fixed side imports ahead of '
                        'the installed nova (PYTHONPATH)')
    parser.add_argument('--variants',
                        default=','.join(variants_mod.DEFAULT_FAULTS),
                        help='comma-separated, all by default: delete '
                        '(the API deletes through the compute), down (the '
                        'compute is down: the API deletes locally), outage '
                        '(placement unreachable from the step until nova '
                        'settles, then the DELETE retried), timeout (the '
                        'RPC call of the step gets no reply, then the '
                        'servers deleted), restart (the service running '
                        'the step restarts there, then the servers '
                        'deleted); dbfail (survive mode only, opt-in: '
                        'the first database write the step\'s thread '
                        'makes fails with DBConnectionError)')
    parser.add_argument('--modes', default='delete',
                        help='comma-separated, delete by default (the '
                        'survive mode is opt-in while the fixed side '
                        'still fails it: see the guide): delete '
                        '(each fault, then the servers deleted and '
                        'nothing left of them), survive (each fault but '
                        'the delete, the operation let end and the '
                        'survivor property checked on the servers, then '
                        'they are deleted and the delete mode\'s checks '
                        'made), audit (no fault: nova-fixes audit --heal '
                        'at the held step, which must change nothing, '
                        'then the survive mode\'s checks)')
    parser.add_argument('--steps', type=int, default=0,
                        help='explore only the first N steps of each')
    parser.add_argument('--all-entries', action='store_true',
                        help='every manager method is a step (see '
                        'tracker.NOT_STEPS)')
    parser.add_argument('--fresh', action='store_true',
                        help='start nova\'s services afresh for every run '
                        '(about twice as slow) instead of forking each run '
                        'from the operation\'s prepared state')
    parser.add_argument('-j', '--jobs', type=int, default=2)
    parser.add_argument('--out', help='keep the workers\' records and '
                        'logs in this directory (the files of the '
                        'operations run are started afresh)')
    parser.add_argument('--deadline', type=int, metavar='SECONDS',
                        help='kill the workers still running after this '
                        'long (default: %d s per operation, side and '
                        'variant over the jobs, plus %d s)'
                        % (DEADLINE_PER_UNIT, DEADLINE_BASE))
    args = parser.parse_args(argv)
    args.variants = args.variants.split(',')
    modes = args.modes.split(',')
    sides = args.sides.split(',')
    if set(args.variants) - set(VARIANTS) or not args.variants:
        parser.error('--variants: one or more of %s' % ', '.join(VARIANTS))
    if set(modes) - set(variants_mod.MODES) or not modes:
        parser.error('--modes: one or more of %s'
                     % ', '.join(variants_mod.MODES))
    faults = args.variants
    args.variants = variants_mod.of_modes(faults, modes)
    if 'survive' in modes and not set(faults) & set(
            variants_mod.SURVIVE_FAULTS):
        parser.error('--variants %s has no fault of the survive mode (%s)'
                     % (','.join(faults),
                        ', '.join(variants_mod.SURVIVE_FAULTS)))
    if 'delete' in modes and not set(faults) & set(
            variants_mod.DELETE_FAULTS):
        parser.error('--variants %s has no fault of the delete mode (%s)'
                     % (','.join(faults),
                        ', '.join(variants_mod.DELETE_FAULTS)))
    if set(sides) - {'vanilla', 'fixed'} or not sides:
        parser.error('--sides: one or both of vanilla, fixed')
    if args.jobs < 1:
        parser.error('--jobs must be at least 1')
    if args.deadline is not None and args.deadline < 1:
        parser.error('--deadline must be at least 1 s')
    if args.fixed_path and not os.path.isdir(
            os.path.join(args.fixed_path, 'nova')):
        parser.error('--fixed-path %s has no nova package' % args.fixed_path)
    if args.ci:
        if args.operations:
            parser.error('--ci chooses the operations itself')
        args.operations = list(CI_OPERATIONS)
    ops = _operations(args.operations)
    outdir = args.out or tempfile.mkdtemp(prefix='nova-fixes-explore-')
    os.makedirs(outdir, exist_ok=True)
    # The longest operations first, alternating sides.
    units = [(side, op) for op in ops for side in sides]
    deadline = args.deadline or default_deadline(units, args.variants,
                                                 args.jobs)
    start = time.monotonic()
    workers = _run_workers(units, args, outdir, deadline)
    steps, cells = _load(outdir, units)
    print('\nexplored %d operations in %.0fs (deadline %d s; records and '
          'logs in %s)' % (len(ops), time.monotonic() - start, deadline,
                           outdir))
    passed, failed = report(ops, steps, cells, args.variants, sides,
                            workers=workers)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
