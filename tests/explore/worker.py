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

"""Explore operations on the nova of this process (NOVA_FIXES_MODE).

    python -m tests.explore.worker --out FILE
        [--variants delete,down,outage,timeout]
        [--steps N] OPERATION...

Writes one JSON object a line to FILE: for each operation its recorded
steps, then one result per (step, variant). The explorer's command line
(``python -m tests.explore``) runs one worker per mode and prints the
matrix.
"""

# nova's functional test package monkey patches when it is imported: it
# comes first.
import nova.tests.functional  # noqa: F401  isort:skip

import argparse
import json
import sys
import time

import testtools

from tests.explore import forked
from tests.explore import harness
from tests.explore import operations
from tests.explore import variants as variants_mod

VARIANTS = variants_mod.ALL


def _case_error(result):
    problems = result.errors + result.failures
    if not problems:
        return None
    test, text = problems[0]
    return 'test case: ' + text.strip().splitlines()[-1]


def run_case(operation, plan):
    """One plan on services started for it (``--fresh``)."""
    outcomes = []
    case = harness.ExploreCase(
        operation, lambda case: outcomes.append(case.run_plan(plan)),
        fork=False)
    result = testtools.TestResult()
    case.run(result)
    outcome = outcomes[0] if outcomes else harness.Outcome()
    error = _case_error(result)
    if error and outcome.result in (None, 'OK'):
        outcome.error(error)
    if outcome.result is None:
        outcome.error('no result')
    return outcome


def explore(operation, variants, limit, write, progress, fresh=False):
    """Record the operation's steps, then a run per (step, variant)."""
    if fresh:
        return _explore_plans(operation, lambda plan: run_case(operation,
                                                              plan),
                              variants, limit, write, progress)
    sessions = []

    def session(case):
        sessions.append(case)
        _explore_plans(operation, case.run_plan, variants, limit, write,
                       progress)

    case = harness.ExploreCase(operation, session)
    result = testtools.TestResult()
    case.run(result)
    if not sessions:
        # The services never started: the record run has the reason.
        outcome = harness.Outcome()
        outcome.error(_case_error(result) or 'the case did not run')
        write({'op': operation.name, 'steps': [], 'unholdable': [],
               'seconds': 0})
        write(dict(op=operation.name, step='after', variant='delete',
                   **outcome.to_dict()))
        progress('%s: %s' % (operation.name, outcome.details[0]))


def _explore_plans(operation, run, variants, limit, write, progress):
    start = time.monotonic()
    recorded = run(('record',))
    steps = recorded.steps[:limit] if limit else recorded.steps
    casts = set(recorded.casts)
    write({'op': operation.name, 'steps': [s.label for s in steps],
           'unholdable': [s.label for s in recorded.unholdable],
           'seconds': round(time.monotonic() - start, 1)})
    write(dict(op=operation.name, step='after', variant='delete',
               **recorded.to_dict()))
    progress('%s: %d steps (%d inside target_cell, not held); after: %s'
             % (operation.name, len(steps), len(recorded.unholdable),
                recorded.result))
    if recorded.result == 'ERROR' and not steps:
        return
    for step in steps:
        for variant in variants:
            fault = variants_mod.fault(variant)
            if fault == 'timeout' and step.kind != 'rpc':
                # Only an RPC message can lose its reply.
                continue
            began = time.monotonic()
            if fault == 'timeout' and step in casts:
                # Recorded as a cast: no reply to lose, no run to make.
                outcome = forked.Outcome()
                outcome.result = 'N/A'
                outcome.details = ['not an RPC call (cast, as recorded): '
                                   'no reply to lose']
            else:
                outcome = run(('inject', step, variant))
            seconds = round(time.monotonic() - began, 1)
            write(dict(op=operation.name, step=step.label,
                       variant=variant, seconds=seconds,
                       **outcome.to_dict()))
            progress('  %-50s %-6s %5.1fs %s %s' % (
                step.label[:50], variant, seconds, outcome.result,
                '; '.join(outcome.details)[:300]))


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m tests.explore.worker')
    parser.add_argument('--out', required=True)
    parser.add_argument('--variants', default=','.join(VARIANTS))
    parser.add_argument('--steps', type=int, default=0,
                        help='explore only the first N steps')
    parser.add_argument('--all-entries', action='store_true',
                        help='every manager method is a step')
    parser.add_argument('--fresh', action='store_true',
                        help='start the services afresh for every run, '
                        'in this process (no fork)')
    parser.add_argument('operations', nargs='+')
    args = parser.parse_args(argv)
    known = {op.name: op for op in operations.OPERATIONS}
    unknown = [name for name in args.operations if name not in known]
    variants = args.variants.split(',')
    if unknown or set(variants) - set(VARIANTS):
        parser.error('unknown operation or variant: %s'
                     % ', '.join(unknown + sorted(set(variants) -
                                                  set(VARIANTS))))
    harness.ALL_ENTRIES = args.all_entries
    with open(args.out, 'w') as out:
        def write(record):
            out.write(json.dumps(record) + '\n')
            out.flush()

        def progress(line):
            sys.stderr.write(line + '\n')
            sys.stderr.flush()

        for name in args.operations:
            explore(known[name], variants, args.steps, write, progress,
                    fresh=args.fresh)
    return 0


if __name__ == '__main__':
    sys.exit(main())
