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
the matrix operation x step (vanilla delete/down, fixed delete/down),
the details of what is not OK, a "N passed, N failed" line, and ends with
one "explored (<side>): S steps, L leaks, W wrong, E errors" line per side.
Exits non-zero if a fixed-side run is not OK or a known bug of vanilla
nova (KNOWN_VANILLA_LEAKS) is not found.
"""

import argparse
import collections
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time

from tests.explore import operations

VARIANTS = ('delete', 'down')
RESULTS = ('OK', 'LEAK', 'WRONG', 'ERROR', 'N/A')

#: The CI subset: the operations of bug 1848343's revert paths and a boot.
CI_OPERATIONS = ('cold-migrate-revert', 'live-migrate-pre-fails')

#: What the explorer must find on vanilla nova, unaided: (operation, step,
#: variant) that must be LEAK there. Bug 1848343's revert paths: the
#: server deleted while the revert of a cold migration is on its way to
#: the destination or back to the source; finish_revert_resize fails on
#: the deleted server and the migration keeps the source's allocations.
KNOWN_VANILLA_LEAKS = {
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


def _run_workers(units, args, outdir):
    """Run a worker per (side, operation), args.jobs at a time."""
    env_of = {
        'vanilla': dict(os.environ, NOVA_FIXES_MODE='vanilla'),
        'fixed': dict(os.environ, NOVA_FIXES_MODE=args.fixed),
    }
    if args.fixed_path:
        env_of['fixed']['PYTHONPATH'] = os.pathsep.join(
            [args.fixed_path] + os.environ.get(
                'PYTHONPATH', os.getcwd()).split(os.pathsep))
    pending = list(units)
    running = {}
    done = 0
    start = time.monotonic()
    while pending or running:
        while pending and len(running) < args.jobs:
            side, op = pending.pop(0)
            out = os.path.join(outdir, '%s-%s.jsonl' % (side, op))
            log = open(os.path.join(outdir, '%s-%s.log' % (side, op)), 'w')
            cmd = [sys.executable, '-m', 'tests.explore.worker',
                   '--out', out, '--variants', ','.join(args.variants)]
            if args.steps:
                cmd += ['--steps', str(args.steps)]
            if args.all_entries:
                cmd += ['--all-entries']
            proc = subprocess.Popen(cmd + [op], env=env_of[side],
                                    stdout=log, stderr=subprocess.STDOUT)
            running[proc] = (side, op, log, time.monotonic())
        proc = _wait_one(running)
        side, op, log, began = running.pop(proc)
        log.close()
        done += 1
        print('[%d/%d] %s %s: exit %s, %.0fs (%.0fs in all)' % (
            done, len(units), side, op, proc.returncode,
            time.monotonic() - began, time.monotonic() - start),
            flush=True)


def _wait_one(running):
    while True:
        pid, status = os.wait()
        for proc in running:
            if proc.pid == pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                return proc


def _load(outdir, units):
    steps = {}
    cells = {}
    for side, op in units:
        path = os.path.join(outdir, '%s-%s.jsonl' % (side, op))
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                if 'steps' in record:
                    known = steps.setdefault(op, ['after'])
                    known += [s for s in record['steps'] if s not in known]
                else:
                    cells[(side, op, record['step'], record['variant'])] = (
                        record['result'], record['details'])
    return steps, cells


def report(ops, steps, cells, variants, sides, out=sys.stdout):
    """Print the matrix and the summary; returns (passed, failed)."""
    columns = [(side, v) for side in sides for v in variants]
    width = max([len(s) for op in ops for s in steps.get(op, [])] + [20])
    head = ' '.join('%-7s' % ('%s/%s' % (s[0], v[:3])) for s, v in columns)
    for op in ops:
        print('\n%s\n  %-*s %s' % (op, width, 'step', head), file=out)
        for step in steps.get(op, ['after']):
            row = []
            for side, variant in columns:
                if step == 'after' and variant != 'delete':
                    row.append('%-7s' % '')
                    continue
                result = cells.get((side, op, step, variant), ('-',))[0]
                row.append('%-7s' % result)
            print('  %-*s %s' % (width, step, ' '.join(row)), file=out)
    print('\nnot OK (fixed side), and vanilla LEAKs:', file=out)
    for (side, op, step, variant), (result, details) in sorted(
            cells.items()):
        if result in ('OK', 'N/A') or (side == 'vanilla' and
                                       result != 'LEAK'):
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
    print('\n%d passed, %d failed' % (passed, failed), file=out)
    for side in sides:
        counts = collections.Counter(
            result for (s, _, _, _), (result, _) in cells.items()
            if s == side and result != 'N/A')
        print('explored (%s): %d steps, %d leaks, %d wrong, %d errors' % (
            side, sum(counts.values()), counts['LEAK'], counts['WRONG'],
            counts['ERROR']), file=out)
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
                        help='the CI subset: %s, delete variant'
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
    parser.add_argument('--variants', default=','.join(VARIANTS),
                        help='delete (the API deletes through the '
                        'compute), down (the compute is down: the API '
                        'deletes locally), or both (default)')
    parser.add_argument('--steps', type=int, default=0,
                        help='explore only the first N steps of each')
    parser.add_argument('--all-entries', action='store_true',
                        help='every manager method is a step (see '
                        'tracker.NOT_STEPS)')
    parser.add_argument('-j', '--jobs', type=int, default=2)
    parser.add_argument('--out', help='keep the workers\' records and '
                        'logs in this directory')
    args = parser.parse_args(argv)
    args.variants = args.variants.split(',')
    sides = args.sides.split(',')
    if set(args.variants) - set(VARIANTS) or not args.variants:
        parser.error('--variants: one or both of %s' % ', '.join(VARIANTS))
    if set(sides) - {'vanilla', 'fixed'} or not sides:
        parser.error('--sides: one or both of vanilla, fixed')
    if args.jobs < 1:
        parser.error('--jobs must be at least 1')
    if args.fixed_path and not os.path.isdir(
            os.path.join(args.fixed_path, 'nova')):
        parser.error('--fixed-path %s has no nova package' % args.fixed_path)
    if args.ci:
        if args.operations:
            parser.error('--ci chooses the operations itself')
        args.operations = list(CI_OPERATIONS)
        args.variants = ['delete']
    ops = _operations(args.operations)
    outdir = args.out or tempfile.mkdtemp(prefix='nova-fixes-explore-')
    os.makedirs(outdir, exist_ok=True)
    # The longest operations first, alternating sides.
    units = [(side, op) for op in ops for side in sides]
    start = time.monotonic()
    _run_workers(units, args, outdir)
    steps, cells = _load(outdir, units)
    print('\nexplored %d operations in %.0fs (records and logs in %s)'
          % (len(ops), time.monotonic() - start, outdir))
    passed, failed = report(ops, steps, cells, args.variants, sides)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
