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

"""Run every test suite of nova-fixes and print one real count.

1. the unit tests (tests/unit);
2. the recreate report (tests/functional on vanilla nova and fixed, and
   the tests of bugs nova fixed itself once more on vanilla nova without
   the fixing commit): one check per scenario, passed when vanilla behaves
   as the scenario says (recreates its bug, or passes for a no-regression
   case) and the fixed run passes;
3. nova's own in-tree functional tests for moves with the fixes active
   (tests/nova_intree), one check per nova test: its quick selection
   (204 tests) unless ``--nova-intree full`` asks for all 344 (tox -e
   nova-intree runs those alone);
4. the race explorer's CI subset (``python -m tests.explore --ci --modes
   delete,audit``), its own count: every fixed-side run OK (in the audit
   mode: nova-fixes audit --heal changed nothing at any step), every
   known vanilla leak found, every worker whole (``--explore none``
   leaves it out; tox -e explore runs the whole exploration).

The last line is "N passed, N failed, N skipped", computed from those
results (a test that its own suite skips is neither passed nor failed);
the exit status is non-zero when anything failed.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from tests import recreate  # noqa: E402


def _suite(name, run):
    """Run one suite and say how long it took; a suite that cannot run
    counts as one failure.
    """
    start = time.time()
    try:
        return run()
    except Exception as e:
        print('%s: did not run: %s' % (name, e))
        return None
    finally:
        print('%s took %d s' % (name, time.time() - start))


#: The explorer's modes in the CI subset: the delete mode, and the audit
#: mode (nova-fixes audit --heal at every step must change nothing).
EXPLORE_MODES = 'delete,audit'

#: The explorer's count line.
COUNT = re.compile(r'^(\d+) passed, (\d+) failed$')


def explore_ci(tree):
    """Run the explorer's CI subset, its output shown as it comes: its
    (passed, failed), one failure more if it exits non-zero without
    failures of its own, or an error if it printed no count.
    """
    print("\nthe race explorer's CI subset (python -m tests.explore --ci "
          "--modes %s)" % EXPLORE_MODES)
    proc = subprocess.Popen(
        [sys.executable, '-m', 'tests.explore', '--ci', '--modes',
         EXPLORE_MODES], cwd=tree,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    counts = None
    for line in proc.stdout:
        sys.stdout.write(line)
        match = COUNT.match(line.strip())
        if match:
            counts = (int(match.group(1)), int(match.group(2)))
    code = proc.wait()
    if counts is None:
        raise RuntimeError('it printed no count (exit %d)' % code)
    if code and not counts[1]:
        counts = (counts[0], counts[1] + 1)
    print("race explorer's CI subset: %d passed, %d failed" % counts)
    return counts


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--nova-intree', choices=('quick', 'full', 'none'),
                   default='quick',
                   help="how much of nova's own tests (suite 3) to run: "
                        "the quick selection (default), all of it, or "
                        "none")
    p.add_argument('--explore', choices=('ci', 'none'), default='ci',
                   help="the race explorer's CI subset (suite 4; "
                        "default) or none")
    p.add_argument('--no-audit-after', action='store_true',
                   help='leave out the audit at the end of every test of '
                        'the vanilla run (tests.recreate.audit_summary)')
    p.add_argument('--concurrency', type=int, default=None)
    args = p.parse_args()
    # The summaries interleave with the progress lines on stderr.
    sys.stdout.reconfigure(line_buffering=True)
    tree = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    passed = failed = skipped = 0
    start = time.time()

    def run(mode, test_path='tests/functional', progress=None,
            test_ids=None, extra_env=None):
        return lambda: recreate.run_suite(
            tree, mode, test_path=test_path, concurrency=args.concurrency,
            progress=progress, test_ids=test_ids, extra_env=extra_env)

    unit = _suite('unit tests', run('dropin', 'tests/unit',
                                    recreate.Progress(label='unit')))
    if unit is None:
        failed += 1
    else:
        p_, f_, s_ = recreate.count('unit tests', unit)
        passed, failed, skipped = passed + p_, failed + f_, skipped + s_

    def scenarios():
        test_ids = recreate.list_suite(tree)
        return test_ids, recreate.scenario_kinds(tree, test_ids)

    test_ids, kinds = _suite('functional tests', scenarios) or (None, {})
    progress = recreate.Progress(kinds=kinds)
    audit_dir = None if args.no_audit_after else tempfile.mkdtemp(
        prefix='nova-fixes-audit-after-')
    vanilla = _suite('functional tests on vanilla nova',
                     run('vanilla', progress=progress, test_ids=test_ids,
                         extra_env={recreate.AUDIT_AFTER: audit_dir}
                         if audit_dir else None))
    records = recreate.audit_records(audit_dir) if audit_dir else None
    if audit_dir:
        shutil.rmtree(audit_dir, ignore_errors=True)
    fixed = _suite('functional tests with the fixes',
                   run(recreate.FIXED_MODE, progress=progress,
                       test_ids=test_ids))
    if vanilla is None or fixed is None:
        vanilla, fixed = vanilla or {}, fixed or {}
        failed += 1
    without = _suite(
        'functional tests of bugs fixed upstream, without their fix',
        lambda: recreate.run_without_upstream_fixes(
            tree, fixed, concurrency=args.concurrency, progress=progress))
    if without is None:
        without = {}
        failed += 1
    rows = recreate.build_rows(tree, vanilla, fixed, without, kinds=kinds)
    print(recreate.format_table(rows))
    print()
    bad = recreate.summarize('recreate report', rows)
    passed, failed = passed + len(rows) - len(bad), failed + len(bad)
    if records is not None and vanilla:
        p_, f_ = recreate.audit_summary(records, vanilla)
        passed, failed = passed + p_, failed + f_

    if args.nova_intree != 'none':
        name = ("nova's in-tree tests with the fixes active (%s selection)"
                % args.nova_intree)
        intree = _suite(name, lambda: recreate.run_suite(
            tree, 'dropin', test_path='tests/nova_intree',
            concurrency=args.concurrency,
            progress=recreate.Progress(label='nova in-tree'),
            extra_env={'NOVA_FIXES_INTREE': args.nova_intree}))
        if intree is None:
            failed += 1
        else:
            p_, f_, s_ = recreate.count(name, intree)
            passed, failed, skipped = (passed + p_, failed + f_,
                                       skipped + s_)

    if args.explore == 'ci':
        counts = _suite("the race explorer's CI subset",
                        lambda: explore_ci(tree))
        if counts is None:
            failed += 1
        else:
            passed, failed = passed + counts[0], failed + counts[1]

    print('all suites took %d s' % (time.time() - start))
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
