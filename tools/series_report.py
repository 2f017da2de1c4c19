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

"""The recreate report with a column per series.

Reads the --json files of tools/run_series.py and prints, per scenario,
what each series' vanilla nova does (R: recreates the bug, ok: passes, as
a no-regression case must, n/a: tests what a fix adds, leak: a window
out of reach whose test shows the leak) and whether the series' patched
nova passes (+) or not (!). This is a report: the counts
were made by the runs themselves.
"""

import json
import sys


def _cell(row):
    kind = row.get('kind')
    if row['vanilla'] == 'not run':
        # The series ran its patched side only (run_series --no-vanilla).
        text = '.'
    elif kind == 'fix itself':
        text = 'n/a'
    elif kind == 'out of reach':
        text = 'leak' if row['vanilla'] == 'leak shown' else row['vanilla']
    elif kind == 'predates the window':
        # The series' nova has not got the change that opened it.
        text = 'pre' if row['vanilla'] == 'passes' else row['vanilla']
    elif kind == 'fixed upstream':
        # What matters is the run without the fixing commit.
        text = 'R*' if row['without'] == 'RECREATED' else 'not R*'
    elif row['vanilla'] == 'RECREATED':
        text = 'R'
    elif row['vanilla'] == 'passes':
        text = 'ok'
    else:
        text = row['vanilla'].split(' ')[0]
    return text + ('!' if row['fixed'] == 'FAIL' else '+')


def main(paths):
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    runs.sort(key=lambda r: r['series'])
    scenarios = {}
    for run in runs:
        for row in run['rows']:
            scenarios.setdefault((str(row['bug']), row['scenario']), {})[
                run['series']] = _cell(row)
    headers = ['bug', 'scenario'] + ['%s (%s)' % (r['series'], r['nova'])
                                     for r in runs]
    cells = [[bug, scenario] + [by.get(r['series'], '-') for r in runs]
             for (bug, scenario), by in sorted(scenarios.items())]
    widths = [max([len(h)] + [len(c[i]) for c in cells])
              for i, h in enumerate(headers)]
    print('  '.join(h.ljust(w) for h, w in zip(headers, widths)))
    print('  '.join('-' * w for w in widths))
    for c in cells:
        print('  '.join(v.ljust(w) for v, w in zip(c, widths)))
    print('R: vanilla nova of the series recreates the bug; R*: a bug nova '
          'fixed upstream, recreated with the fixing commit taken out; ok: '
          'no-regression case passing on vanilla; n/a: tests what the fix '
          'adds; leak: out of reach, the test shows the leak; pre: passes on '
          'vanilla, whose nova predates the upstream change that opened '
          'the window; .: vanilla not '
          'run for the series in CI. +: passes '
          'on the series with its patches applied; !: fails there.')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
