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

"""The recreate report: python -m tests.recreate [--wide] [--json F] [filter]

Run from the nova-fixes source tree (tox -e recreate does).
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from tests import recreate

TREE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PROG = 'python -m tests.recreate'


def parser():
    p = argparse.ArgumentParser(
        prog=PROG,
        description='Run the regression tests on vanilla nova and with the '
                    'fixes, and print which scenarios recreate their bug.')
    p.add_argument('--tree', default=TREE,
                   help='the nova-fixes source tree (default: the one '
                        'holding this runner)')
    p.add_argument('--concurrency', type=int, default=None,
                   help='test worker processes (default: one per CPU)')
    p.add_argument('--wide', action='store_true',
                   help='one line per scenario with its full test id, '
                        'however wide')
    p.add_argument('--json', help='also write the rows to this file')
    p.add_argument('--audit-after', action='store_true',
                   help='end every test of the vanilla run with nova-fixes '
                        'audit --heal and check it found and healed each '
                        'leak the test left (tests.functional.base)')
    p.add_argument('filter', nargs='*',
                   help='test id regular expressions (default: all)')
    return p


def check_tree(tree):
    """One line saying what is wrong with --tree, or None."""
    if not os.path.isdir(tree):
        return '--tree %s: no such directory' % tree
    markers = (os.path.join(tree, '.stestr.conf'),
               os.path.join(tree, 'tests', 'functional'))
    if not all(os.path.exists(m) for m in markers):
        return ('--tree %s is not a nova-fixes source tree (no .stestr.conf '
                'and tests/functional/ there): give the directory that '
                'holds tox.ini' % tree)
    return None


def run(args):
    tree = os.path.abspath(args.tree)
    problem = check_tree(tree)
    if problem:
        raise recreate.HarnessError(problem)
    test_ids = recreate.list_suite(tree, filters=args.filter)
    if not test_ids:
        raise recreate.HarnessError(
            'no regression test matches %s' % ' '.join(args.filter))
    kinds = recreate.scenario_kinds(tree, test_ids)
    progress = recreate.Progress(kinds=kinds)
    audit_dir = tempfile.mkdtemp(prefix='nova-fixes-audit-after-') \
        if args.audit_after else None
    try:
        vanilla = recreate.run_suite(
            tree, 'vanilla', concurrency=args.concurrency,
            test_ids=test_ids, progress=progress,
            extra_env={recreate.AUDIT_AFTER: audit_dir} if audit_dir
            else None)
        records = recreate.audit_records(audit_dir) if audit_dir else None
    finally:
        if audit_dir:
            shutil.rmtree(audit_dir, ignore_errors=True)
    fixed = recreate.run_suite(
        tree, recreate.FIXED_MODE, concurrency=args.concurrency,
        test_ids=test_ids, progress=progress)
    without = recreate.run_without_upstream_fixes(
        tree, fixed, concurrency=args.concurrency, progress=progress)
    rows = recreate.build_rows(tree, vanilla, fixed, without, kinds=kinds)
    print(recreate.format_table(rows, wide=args.wide))
    print()
    bad = recreate.summarize('recreate report', rows)
    audit_failed = 0
    if records is not None:
        audit_failed = recreate.audit_summary(records, vanilla)[1]
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'rows': rows, 'passed': len(rows) - len(bad),
                       'failed': len(bad)}, f, indent=2)
    return 1 if bad or audit_failed else 0


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        return run(args)
    except recreate.HarnessError as e:
        sys.stderr.write('%s: %s\n' % (PROG, e))
        return 2


if __name__ == '__main__':
    sys.exit(main())
