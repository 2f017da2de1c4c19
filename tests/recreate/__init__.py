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

"""The recreate report: each regression test on vanilla nova and fixed.

A regression test of a bug that is open upstream must fail on vanilla nova
with its leak assertion (it recreates the bug) and pass with the fix; a
no-regression case (a test class with recreates = False) must pass on
both. The report runs the functional suite once per mode, in parallel
worker processes through stestr, and prints one row per scenario.

Run from the source tree: ``python -m tests.recreate`` (``tox -e
recreate``); tools/run_all_tests.py and tools/run_series.py use the same
functions. This is test harness, not part of the installed nova_fixes.
"""

import importlib
import os
import re
import subprocess
import sys
import threading

import subunit
import testtools

from nova_fixes import registry
from tests import common

FIXED_MODE = 'dropin'


class Outcome(object):
    """One test's result in one mode."""

    def __init__(self, status, traceback=''):
        self.status = status
        self.traceback = traceback

    @property
    def passed(self):
        return self.status in ('success', 'xfail')

    @property
    def recreated(self):
        return self.status == 'fail' and common.LEAK in self.traceback


def run_suite(tree, mode, test_path='tests/functional', concurrency=None,
              filters=(), progress=None, without=(), extra_env=None):
    """Run one suite in one mode; {test id: Outcome}.

    ``without``: upstream nova commits the test processes take out of nova
    (NOVA_FIXES_WITHOUT).
    """
    cmd = [sys.executable, '-m', 'stestr', '--test-path', test_path,
           '--top-dir', './', 'run', '--subunit']
    if concurrency:
        cmd += ['--concurrency', str(concurrency)]
    cmd += list(filters)
    env = dict(os.environ, NOVA_FIXES_MODE=mode,
               NOVA_FIXES_WITHOUT=','.join(without), **(extra_env or {}))
    results = {}

    def on_test(test):
        status = test['status']
        if status in ('exists', 'inprogress', None):
            return
        details = test.get('details', {})
        tb = details['traceback'].as_text() if 'traceback' in details else ''
        results[test['id']] = Outcome(status, tb)
        if progress:
            progress(mode, test['id'], status, len(results))

    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    stderr = []
    reader = threading.Thread(target=lambda: stderr.append(
        proc.stderr.read()))
    reader.start()
    stream = testtools.StreamToDict(on_test)
    stream.startTestRun()
    subunit.ByteStreamToStreamResult(
        proc.stdout, non_subunit_name='stdout').run(stream)
    stream.stopTestRun()
    proc.wait()
    reader.join()
    if not results:
        raise RuntimeError('no test ran in mode %s (%s): %s' % (
            mode, ' '.join(cmd), b''.join(stderr).decode(errors='replace')))
    return results


def print_progress(mode, test_id, status, done):
    """run_suite's progress callback for the tools: one line on stderr."""
    sys.stderr.write('[%s %4d] %-8s %s\n' % (mode, done, status, test_id))
    sys.stderr.flush()


def count(name, results):
    """Print and return (passed, failed, skipped) of one suite's results;
    a skipped test is neither passed nor failed.
    """
    skipped = sorted(t for t, o in results.items() if o.status == 'skip')
    failed = sorted(t for t, o in results.items()
                    if not o.passed and o.status != 'skip')
    passed = len(results) - len(failed) - len(skipped)
    print('%s: %d passed, %d failed, %d skipped' % (
        name, passed, len(failed), len(skipped)))
    for test_id in failed:
        print('  FAILED %s' % test_id)
    for test_id in skipped:
        print('  skipped %s' % test_id)
    return passed, len(failed), len(skipped)


def _module_of(test_id):
    """The functional test module of a test id (tests.functional.<m>...)."""
    return test_id.split('.')[2] if test_id.count('.') >= 2 else ''


def fixed_upstream(test_id):
    """(commit, release) if the test's module is of a bug nova fixed."""
    return registry.FIXED_UPSTREAM.get(_module_of(test_id))


def fix_of_test(test_id):
    """The fix a functional test id belongs to, by its module name."""
    module = _module_of(test_id)
    for fix in registry.FIXES:
        if fix.test_module and module.startswith(fix.test_module):
            return fix
    return None


def bug_of_test(test_id):
    """The bug id a functional test id is about, by its module name."""
    fix = fix_of_test(test_id)
    if fix is not None:
        return fix.bug
    match = re.search(r'\.test_bug_(\d+)', test_id)
    return int(match.group(1)) if match else None


def _recreates(test_id, tree):
    """The test class's recreates attribute (default True)."""
    module_name, class_name = test_id.rsplit('.', 2)[:2]
    if tree not in sys.path:
        sys.path.insert(0, tree)
    cls = getattr(importlib.import_module(module_name), class_name)
    return getattr(cls, 'recreates', True)


def fixed_upstream_filters(test_ids):
    """{commit: [test id regex]} for the tests of bugs fixed upstream."""
    by_commit = {}
    for test_id in test_ids:
        upstream = fixed_upstream(test_id)
        if upstream:
            commit = upstream[0]
            by_commit.setdefault(commit, []).append(
                '^%s$' % re.escape(test_id))
    return by_commit


def run_without_upstream_fixes(tree, test_ids, concurrency=None,
                               progress=None):
    """The tests of bugs fixed upstream, on vanilla nova with the fixing
    commit taken out: {test id: Outcome}.
    """
    results = {}
    for commit, filters in fixed_upstream_filters(test_ids).items():
        results.update(run_suite(
            tree, 'vanilla', concurrency=concurrency, filters=filters,
            progress=progress, without=(commit,)))
    return results


def build_rows(tree, vanilla, fixed, without=None):
    """One row per scenario. ``without``: results of the tests of bugs
    fixed upstream on vanilla nova without the fixing commit.
    """
    without = without or {}
    rows = []
    for test_id in sorted(set(vanilla) | set(fixed)):
        fix = fix_of_test(test_id)
        bug = bug_of_test(test_id)
        recreates = _recreates(test_id, tree)
        van = vanilla.get(test_id)
        fxd = fixed.get(test_id)
        fixed_ok = fxd is not None and fxd.passed
        if recreates is None:
            # Tests of what the fix adds (a task vanilla nova has not got).
            vanilla_text = 'n/a (tests the fix itself)'
            vanilla_ok = True
        elif recreates and fixed_upstream(test_id):
            # nova has fixed it: the test must catch the bug on a nova with
            # the fixing commit taken out.
            commit, release = fixed_upstream(test_id)
            wo = without.get(test_id)
            vanilla_text = '%s (fixed by %s, %s); without %s: %s' % (
                'RECREATED' if van and van.recreated else 'not recreated',
                commit, release, commit,
                'RECREATED' if wo and wo.recreated else 'not recreated')
            vanilla_ok = wo is not None and wo.recreated
        elif recreates:
            vanilla_text = ('RECREATED' if van and van.recreated
                            else 'not recreated')
            must_recreate = bool(fix and fix.open_upstream)
            vanilla_ok = (van is not None and van.recreated
                          ) or not must_recreate
        else:
            vanilla_text = ('passes (no-regression case)'
                            if van and van.passed else 'FAILS')
            vanilla_ok = van is not None and van.passed
        rows.append({
            'bug': bug, 'test': test_id,
            'scenario': '.'.join(test_id.rsplit('.', 2)[-2:]),
            'recreates': recreates,
            'vanilla': vanilla_text,
            'fixed': 'PASS' if fixed_ok else 'FAIL',
            'ok': vanilla_ok and fixed_ok,
        })
    return rows


def format_table(rows):
    headers = ('bug', 'scenario', 'vanilla', 'fixed')
    cells = [(str(r['bug']), r['scenario'], r['vanilla'], r['fixed'])
             for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells))
              for i, h in enumerate(headers)]
    line = '  '.join('%-*s' % (w, h) for w, h in zip(widths, headers))
    out = [line, '  '.join('-' * w for w in widths)]
    for c in cells:
        out.append('  '.join('%-*s' % (w, v) for w, v in zip(widths, c)))
    return '\n'.join(out)


def summarize(title, rows, fixed_label='fixed'):
    """Print the count of the scenarios as expected, and each one that is
    not; returns the rows that are not.
    """
    bad = [r for r in rows if not r['ok']]
    print('%s: %d scenarios as expected, %d not'
          % (title, len(rows) - len(bad), len(bad)))
    for r in bad:
        print('  NOT AS EXPECTED %s (vanilla: %s, %s: %s)'
              % (r['test'], r['vanilla'], fixed_label, r['fixed']))
    return bad
