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

"""The recreate report: python -m tests.recreate [--json F] [filter ...]

Run from the nova-fixes source tree (tox -e recreate does).
"""

import argparse
import json
import os
import sys

from tests import recreate

TREE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def parser():
    p = argparse.ArgumentParser(
        prog='python -m tests.recreate',
        description='Run the regression tests on vanilla nova and with the '
                    'fixes, and print which scenarios recreate their bug.')
    p.add_argument('--tree', default=TREE,
                   help='the nova-fixes source tree (default: the one '
                        'holding this runner)')
    p.add_argument('--concurrency', type=int, default=None,
                   help='test worker processes (default: one per CPU)')
    p.add_argument('--json', help='also write the rows to this file')
    p.add_argument('filter', nargs='*',
                   help='test id regular expressions (default: all)')
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    tree = os.path.abspath(args.tree)
    vanilla = recreate.run_suite(
        tree, 'vanilla', concurrency=args.concurrency, filters=args.filter,
        progress=recreate.print_progress)
    fixed = recreate.run_suite(
        tree, recreate.FIXED_MODE, concurrency=args.concurrency,
        filters=args.filter, progress=recreate.print_progress)
    without = recreate.run_without_upstream_fixes(
        tree, fixed, concurrency=args.concurrency,
        progress=recreate.print_progress)
    rows = recreate.build_rows(tree, vanilla, fixed, without)
    print(recreate.format_table(rows))
    bad = recreate.summarize('recreate report', rows)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'rows': rows, 'passed': len(rows) - len(bad),
                       'failed': len(bad)}, f, indent=2)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
