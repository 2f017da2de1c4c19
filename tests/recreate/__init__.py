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
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
import threading

try:
    import subunit
    import testtools
except ImportError as e:
    # Run by a python without the test requirements (outside tox): say
    # what is missing and where the runner works, in one line.
    sys.stderr.write('python -m tests.recreate: %s; run it with tox -e '
                     'recreate, or with the python of an environment with '
                     'nova and test-requirements.txt installed\n' % e)
    raise SystemExit(2)

from nova_fixes import activation
from nova_fixes import fixes
from tests import common
from tests.recreate import worker

FIXED_MODE = 'dropin'

#: What the progress lines call each phase (mode, or mode without the
#: upstream commits taken out of nova).
PHASE_NAMES = {'dropin': 'fixed', 'vanilla': 'vanilla', 'patched': 'patched'}

#: Kinds of scenario, from the test class's attributes (see
#: tests.functional.base.NovaFixesTestMixin).
RECREATES = 'recreates'
FIXED_UPSTREAM = 'fixed upstream'
NO_REGRESSION = 'no-regression'
FIX_ITSELF = 'fix itself'
OUT_OF_REACH = 'out of reach'
PREDATES = 'predates the window'


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


EXCEPTION_LINE = re.compile(r'^[\w.]+(Error|Exception|Exit|NotFound)\b')


class HarnessError(Exception):
    """A suite that could not run at all: one line for the user."""


def _last_line(*outputs):
    """The line of a failed command's output that says why: the last
    exception line of a traceback, or the last line.
    """
    for text in outputs:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        errors = [line for line in lines if EXCEPTION_LINE.match(line)]
        if errors or lines:
            return (errors or lines)[-1]
    return 'no output'


def _stestr(tree, test_path, *args):
    return [sys.executable, '-m', 'stestr', '--test-path', test_path,
            '--top-dir', './'] + list(args)


def list_suite(tree, test_path='tests/functional', filters=(),
               extra_env=None):
    """The test ids of a suite that match ``filters`` (stestr list)."""
    env = dict(os.environ, **(extra_env or {}))
    if not os.path.isdir(os.path.join(tree, '.stestr')):
        # stestr list needs the results repository that stestr run would
        # create (a fresh clone has none).
        subprocess.run(_stestr(tree, test_path, 'init'), cwd=tree, env=env,
                       capture_output=True)
    proc = subprocess.run(_stestr(tree, test_path, 'list', *filters),
                          cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise HarnessError('could not list the tests of %s in %s: %s' % (
            test_path, tree, _last_line(proc.stderr, proc.stdout)))
    return [line for line in proc.stdout.splitlines()
            if line and ' ' not in line and '.' in line]


def run_suite(tree, mode, test_path='tests/functional', concurrency=None,
              filters=(), progress=None, without=(), extra_env=None,
              test_ids=None):
    """Run one suite in one mode; {test id: Outcome}.

    ``without``: upstream nova commits the test processes take out of nova
    (NOVA_FIXES_WITHOUT). ``test_ids``: the ids to run (listed first when
    not given, so that progress can count N/total). ``progress`` is called
    as progress(mode, without, test_id, outcome, done, total).
    """
    env = dict(os.environ, NOVA_FIXES_MODE=mode,
               NOVA_FIXES_WITHOUT=','.join(without), **(extra_env or {}))
    # Python 3.12 and later warn on every test when testtools is older
    # than its addDuration (Debian 13's python3-testtools): noise on every
    # worker's stderr, which is shown to find what went wrong.
    env['PYTHONWARNINGS'] = ','.join(filter(None, (
        env.get('PYTHONWARNINGS'), 'ignore:TestResult has no addDuration '
        'method:RuntimeWarning')))
    if test_ids is None:
        test_ids = list_suite(tree, test_path, filters, extra_env)
    if not test_ids:
        raise HarnessError('no test of %s in %s matches %s' % (
            test_path, tree, ' '.join(filters) or 'any name'))
    total = len(test_ids)
    results = {}

    def on_test(test):
        status = test['status']
        if status in ('exists', 'inprogress', None):
            return
        details = test.get('details', {})
        tb = details['traceback'].as_text() if 'traceback' in details else ''
        outcome = results[test['id']] = Outcome(status, tb)
        if progress:
            progress(mode, without, test['id'], outcome, len(results),
                     total)

    with tempfile.NamedTemporaryFile('w', prefix='nova-fixes-ids-',
                                     suffix='.txt') as id_file, \
            tempfile.TemporaryDirectory(
                prefix='nova-fixes-workers-') as worker_dir:
        id_file.write('\n'.join(test_ids) + '\n')
        id_file.flush()
        cmd = _stestr(tree, test_path, 'run', '--subunit', '--load-list',
                      id_file.name)
        if concurrency:
            cmd += ['--concurrency', str(concurrency)]
        # stestr starts each worker as $PYTHON -m stestr.subunit_runner.run
        # and ignores its exit status: worker.py runs it and records its
        # stderr and its status.
        env.update(PYTHON='%s %s' % (shlex.quote(sys.executable),
                                     shlex.quote(WORKER_SCRIPT)))
        env[worker.WORKER_DIR] = worker_dir
        proc = subprocess.Popen(cmd, cwd=tree, env=env,
                                stdout=subprocess.PIPE,
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
        reports = worker_reports(worker_dir)
    own = b''.join(stderr).decode(errors='replace')
    if proc.returncode or own.strip():
        reports.append(('stestr', proc.returncode, own))
    if not results:
        raise HarnessError('no test ran in mode %s (%s): %s' % (
            mode, ' '.join(cmd),
            _last_line(*[text for _, _, text in reports])))
    show_worker_reports(reports, phase_name(mode, without))
    return results


#: The script stestr runs each test worker with (PYTHON).
WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             'worker.py')


def worker_reports(directory):
    """[(name, exit status or None, stderr)] of the test workers that
    exited non-zero (None: no status was recorded, the worker's wrapper
    itself was killed) or left anything on stderr.
    """
    reports = []
    names = sorted(n[:-len(worker.STDERR)] for n in os.listdir(directory)
                   if n.endswith(worker.STDERR))
    for number, name in enumerate(names, 1):
        path = os.path.join(directory, name)
        with open(path + worker.STDERR, 'rb') as f:
            text = f.read().decode(errors='replace')
        try:
            with open(path + worker.STATUS) as f:
                status = int(f.read())
        except (OSError, ValueError):
            status = None
        if status != 0 or text.strip():
            reports.append(('test worker %d' % number, status, text))
    return reports


def _exit_text(status):
    if status is None:
        return 'exit status unknown'
    if status < 0:
        return 'killed by signal %d' % -status
    return 'exit status %d' % status


#: How many of the last lines of a worker's stderr show_worker_reports
#: shows (nova's own tests can leave thousands of warnings there).
REPORT_LINES = 40


def show_worker_reports(reports, phase, stream=None, limit=REPORT_LINES):
    """Write each report's stderr under a line naming the process, the
    phase and how it exited (nothing when there is no report): its last
    ``limit`` lines, after a line saying how many were left out.
    """
    stream = stream or sys.stderr
    for name, status, text in reports:
        lines = text.rstrip('\n').splitlines() if text.strip() else []
        stream.write('--- %s of the %s phase (%s): %s\n' % (
            name, phase, _exit_text(status),
            'its stderr:' if lines else 'nothing on stderr'))
        if not lines:
            continue
        if len(lines) > limit:
            stream.write('... (its first %d lines left out)\n'
                         % (len(lines) - limit))
            lines = lines[-limit:]
        stream.write('\n'.join(lines) + '\n')
        stream.write('--- end of %s\'s stderr\n' % name)
    stream.flush()


def phase_name(mode, without=()):
    """unit / vanilla / fixed / without <commit> / nova in-tree ..."""
    if without:
        return 'without %s' % ','.join(without)
    return PHASE_NAMES.get(mode, mode)


def _status_text(outcome):
    if outcome.recreated:
        return 'RECREATED'
    return {'success': 'pass', 'fail': 'FAIL', 'skip': 'skip'}.get(
        outcome.status, outcome.status)


class Progress(object):
    """run_suite's progress callback: one line per test on stderr,
    "[phase N/total] status test", the status marked "(expected)" or
    "(NOT AS EXPECTED)" against the scenario's expectation when the
    phase is one of the recreate report's.

    ``label`` names the phase instead of the mode (unit, nova in-tree);
    ``kinds``: {test id: kind} of the recreate report's scenarios.
    """

    def __init__(self, label=None, kinds=None, stream=None):
        self.label = label
        self.kinds = kinds or {}
        self.stream = stream

    def __call__(self, mode, without, test_id, outcome, done, total):
        text = _status_text(outcome)
        kind = self.kinds.get(test_id)
        if kind is not None:
            wanted = expectation(kind, mode, without, test_id)
            if wanted is not None:
                ok = meets(wanted, outcome)
                if not ok:
                    text += ' (NOT AS EXPECTED)'
                elif not outcome.passed:
                    text += ' (expected)'
        width = len(str(total))
        name = test_id
        for prefix in ('tests.functional.', 'tests.unit.'):
            if name.startswith(prefix):
                name = name[len(prefix):]
        stream = self.stream or sys.stderr
        stream.write('[%s %*d/%d] %s  %s\n' % (
            self.label or phase_name(mode, without), width, done, total,
            text, name))
        stream.flush()


def print_progress(mode, without, test_id, outcome, done, total):
    """A Progress without expectations, naming the phase by its mode."""
    Progress()(mode, without, test_id, outcome, done, total)


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
        # Why, in one line: CI keeps only the tail of a run's output.
        why = _last_line(results[test_id].traceback or '')
        print('  FAILED %s: %s' % (test_id, why[:300]))
    for test_id in skipped:
        print('  skipped %s' % test_id)
    return passed, len(failed), len(skipped)


def _module_of(test_id):
    """The functional test module of a test id (tests.functional.<m>...)."""
    return test_id.split('.')[2] if test_id.count('.') >= 2 else ''


def _upstream(test_id):
    """The FixedUpstream record of a test of a bug nova fixed, or None."""
    module = _module_of(test_id)
    for fix in fixes.FIXES:
        for record in fix.fixed_upstream:
            if record.module == module:
                return fix, record
    return None, None


def fixed_upstream(test_id):
    """(commit, release) if the test's module is of a bug nova fixed."""
    record = _upstream(test_id)[1]
    return (record.commit, record.release) if record else None


def fix_of_test(test_id):
    """The fix a functional test id belongs to, by its module's name."""
    module = _module_of(test_id)
    for fix in fixes.FIXES:
        if module in fix.tests:
            return fix
    return _upstream(test_id)[0]


def bug_of_test(test_id):
    """The bug a functional test id is about: its fix's, or the bug nova
    fixed that its module tests.
    """
    fix, record = _upstream(test_id)
    if record is not None:
        return record.bug
    fix = fix_of_test(test_id)
    return fix.bug if fix is not None else None


def _test_class(test_id, tree):
    module_name, class_name = test_id.rsplit('.', 2)[:2]
    if tree not in sys.path:
        sys.path.insert(0, tree)
    return getattr(importlib.import_module(module_name), class_name)


def scenario_kind(test_id, tree):
    """What the test's class says it does on vanilla nova (its
    ``recreates``, ``out_of_reach`` and ``window_opened_by`` attributes)
    and whether nova fixed its bug: one of RECREATES, FIXED_UPSTREAM,
    NO_REGRESSION, FIX_ITSELF, OUT_OF_REACH, PREDATES (the installed nova
    has not got the upstream change that opened the test's window).
    """
    cls = _test_class(test_id, tree)
    if getattr(cls, 'out_of_reach', False):
        return OUT_OF_REACH
    recreates = getattr(cls, 'recreates', True)
    if recreates is None:
        return FIX_ITSELF
    if not recreates:
        return NO_REGRESSION
    opened_by = getattr(cls, 'window_opened_by', None)
    if opened_by is not None and not opened_by.in_nova(
            activation.nova_version()):
        return PREDATES
    return FIXED_UPSTREAM if fixed_upstream(test_id) else RECREATES


def _opened_by(test_id, tree):
    """[short commit, title] of the change that opened the window."""
    change = _test_class(test_id, tree).window_opened_by
    return [change.commit[:10], change.title]


def scenario_kinds(tree, test_ids):
    return {test_id: scenario_kind(test_id, tree) for test_id in test_ids}


def expectation(kind, mode, without, test_id):
    """What the scenario must do in this run: 'recreated' (fail on its
    leak assertion), 'pass', or None (nothing is required).
    """
    if without:
        return 'recreated'
    if mode != 'vanilla':
        return 'pass'
    if kind == RECREATES:
        fix = fix_of_test(test_id)
        return 'recreated' if fix is not None and fix.open_upstream else None
    if kind in (NO_REGRESSION, OUT_OF_REACH, PREDATES):
        return 'pass'
    # FIX_ITSELF: vanilla nova has not got what it tests. FIXED_UPSTREAM:
    # the run without the fixing commit is what must recreate it.
    return None


def meets(wanted, outcome):
    if wanted is None:
        return True
    if outcome is None:
        return False
    return outcome.recreated if wanted == 'recreated' else outcome.passed


def _cell(outcome, wanted):
    if outcome is None:
        return 'did not run'
    if outcome.recreated:
        return 'RECREATED'
    if wanted == 'recreated':
        return 'not recreated'
    if outcome.passed:
        return 'passes'
    return 'skipped' if outcome.status == 'skip' else 'FAILS'


def fixed_upstream_filters(test_ids):
    """{commit: [test id]} for the tests of bugs fixed upstream."""
    by_commit = {}
    for test_id in test_ids:
        upstream = fixed_upstream(test_id)
        if upstream:
            by_commit.setdefault(upstream[0], []).append(test_id)
    return by_commit


def run_without_upstream_fixes(tree, test_ids, concurrency=None,
                               progress=None):
    """The tests of bugs fixed upstream, on vanilla nova with the fixing
    commit taken out: {test id: Outcome}.
    """
    results = {}
    for commit, ids in fixed_upstream_filters(test_ids).items():
        results.update(run_suite(
            tree, 'vanilla', concurrency=concurrency, test_ids=ids,
            progress=progress, without=(commit,)))
    return results


def build_rows(tree, vanilla, fixed, without=None, fixed_mode=FIXED_MODE,
               kinds=None, vanilla_ran=True):
    """One row per scenario. ``without``: results of the tests of bugs
    fixed upstream on vanilla nova without the fixing commit; ``kinds``:
    {test id: kind}, read from the test classes when not given;
    ``vanilla_ran``: False when only the fixed side ran (its rows say so
    and are judged on the fixed side alone).
    """
    without = without or {}
    kinds = kinds or {}
    rows = []
    for test_id in sorted(set(vanilla) | set(fixed)):
        kind = kinds.get(test_id) or scenario_kind(test_id, tree)
        van, fxd, wo = (vanilla.get(test_id), fixed.get(test_id),
                        without.get(test_id))
        want_van = expectation(kind, 'vanilla', (), test_id)
        want_fxd = expectation(kind, fixed_mode, (), test_id)
        ok = meets(want_fxd, fxd) and (not vanilla_ran or
                                       meets(want_van, van))
        upstream = fixed_upstream(test_id)
        if not vanilla_ran:
            without_text = ''
        elif kind == FIXED_UPSTREAM:
            ok = ok and meets('recreated', wo)
            without_text = _cell(wo, 'recreated')
        else:
            without_text = ''
        if not vanilla_ran:
            vanilla_text = 'not run'
        elif kind == FIX_ITSELF:
            vanilla_text = 'n/a'
        elif kind == OUT_OF_REACH:
            vanilla_text = 'leak shown' if meets('pass', van) else _cell(
                van, 'pass')
        else:
            vanilla_text = _cell(van, want_van)
        if kind == OUT_OF_REACH and meets('pass', fxd):
            fixed_text = 'leak shown'
        else:
            fixed_text = 'PASS' if meets('pass', fxd) else 'FAIL'
        rows.append({
            'bug': bug_of_test(test_id), 'test': test_id,
            'scenario': '.'.join(test_id.rsplit('.', 2)[-2:]),
            'kind': kind,
            'upstream_fix': list(upstream) if upstream else None,
            'opened_by': _opened_by(test_id, tree) if kind == PREDATES
            else None,
            'vanilla': vanilla_text, 'without': without_text,
            'fixed': fixed_text, 'ok': ok,
        })
    return rows


#: The heading of a test class's rows, by kind of scenario.
KIND_HEADINGS = {
    RECREATES: 'recreates the bug on vanilla nova',
    FIXED_UPSTREAM: 'fixed upstream (%s, %s): recreates the bug without it',
    NO_REGRESSION: 'no-regression case: passes on any nova',
    FIX_ITSELF: 'tests what the fix adds: n/a on vanilla nova',
    OUT_OF_REACH: 'out of reach of any fix: shows the leak on any nova, and '
                  'its remedy',
    PREDATES: 'this nova predates the upstream change that opened the '
              'window (%s, %s): passes on it',
}

WIDTH = 100


def _fit(text, width):
    if len(text) <= width:
        return text
    keep = width - 3
    return text[:keep - keep // 2] + '...' + text[len(text) - keep // 2:]


def format_table(rows, fixed_label='fixed', wide=False):
    """The report, at most WIDTH columns: the rows of each test class under
    a heading naming the bug, the class and what its scenarios must do,
    one line per test method (a name too long for the column is cut in
    the middle; ``wide`` prints the full test ids instead, one line per
    scenario).
    """
    with_without = any(r['without'] for r in rows)
    headers = ['vanilla'] + (['w/o fix'] if with_without else []) + [
        fixed_label]

    def values(r):
        return [r['vanilla']] + ([r['without']] if with_without else []) + [
            r['fixed']]

    widths = [max([len(h)] + [len(values(r)[i]) for r in rows])
              for i, h in enumerate(headers)]
    if wide:
        bug_width = max(len(str(r['bug'])) for r in rows + [{'bug': 'bug'}])
        names = ['%-*s  %s' % (bug_width, r['bug'], r['test']) for r in rows]
        head = '%-*s  test' % (bug_width, 'bug')
        name_width = max(len(n) for n in names + [head])
    else:
        names = ['  ' + r['test'].rsplit('.', 1)[1] for r in rows]
        name_width = min(max(len(n) for n in names + ['scenario']),
                         WIDTH - sum(w + 2 for w in widths))
        head = 'scenario'

    def line(name, cells):
        return '  '.join(['%-*s' % (name_width, _fit(name, name_width))] + [
            '%-*s' % (w, c) for w, c in zip(widths, cells)]).rstrip()

    out = [line(head, headers), line('-' * name_width,
                                     ['-' * w for w in widths])]
    heading = None
    for name, r in zip(names, rows):
        if not wide:
            cls = r['test'].rsplit('.', 2)[1]
            text = KIND_HEADINGS[r['kind']]
            if r['kind'] == FIXED_UPSTREAM:
                text = text % tuple(r['upstream_fix'])
            elif r['kind'] == PREDATES:
                text = text % tuple(r['opened_by'])
            this = '%s, %s: %s' % (r['bug'], cls, text)
            if this != heading:
                heading = this
                out.extend(textwrap.wrap(
                    this, WIDTH, subsequent_indent='    ',
                    break_on_hyphens=False))
        out.append(line(name, values(r)))
    if with_without:
        out.append('')
        out.extend(textwrap.wrap(
            'w/o fix: on vanilla nova with the commit that fixed the bug '
            'upstream taken out (NOVA_FIXES_WITHOUT).', WIDTH))
    return '\n'.join(out)


def summarize(title, rows, fixed_label='fixed'):
    """Print the count of the scenarios as expected, and each one that is
    not; returns the rows that are not.
    """
    bad = [r for r in rows if not r['ok']]
    print('%s: %d scenario%s, %d as expected, %d not'
          % (title, len(rows), '' if len(rows) == 1 else 's',
             len(rows) - len(bad), len(bad)))
    for r in bad:
        print('  NOT AS EXPECTED %s (vanilla: %s%s, %s: %s)'
              % (r['test'], r['vanilla'],
                 ', w/o fix: %s' % r['without'] if r['without'] else '',
                 fixed_label, r['fixed']))
    return bad


# -- the audit after each test (tests.functional.base.AUDIT_AFTER) --------

#: The environment variable naming the directory of the audit's records.
AUDIT_AFTER = 'NOVA_FIXES_AUDIT_AFTER'


def audit_records(directory):
    """{test id: record} written by the tests' tearDown."""
    records = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith('.json'):
            with open(os.path.join(directory, name)) as f:
                record = json.load(f)
            records[record['test']] = record
    return records


def audit_summary(records, results, label='vanilla'):
    """Print what ``nova-fixes audit --heal`` made of the end of every
    test of a run: each leaking sequence (a test that recreated its bug)
    whose end the test's own view of nova calls wrong in placement must be
    found (every wrong consumer or server has a wrong verdict) and healed
    right (nothing wrong after the heal); no test may see the audit call
    wrong what that view calls right (a false positive), nor the audit
    fail. Returns (passed, failed): one per test audited.
    """
    from nova_fixes import audit
    totals = dict.fromkeys(audit.VERDICTS, 0)
    leaking = found = healed = elsewhere = 0
    problems = []
    bad_tests = set()
    for test_id, outcome in sorted(results.items()):
        count_before = len(problems)
        record = records.get(test_id)
        if record is None:
            if outcome.status != 'skip':
                problems.append('NOT AUDITED %s (its tearDown did not run)'
                                % test_id)
                bad_tests.add(test_id)
            continue
        if record.get('error'):
            problems.append('AUDIT ERROR %s: %s' % (test_id,
                                                    record['error']))
            bad_tests.add(test_id)
            continue
        for name, n in record['counts'].items():
            totals[name] = totals.get(name, 0) + n
        before, after = record['before'], record['after']
        for wrong in record['false_positives']:
            problems.append('FALSE POSITIVE %s: %s' % (test_id, wrong))
            bad_tests.add(test_id)
        if not outcome.recreated:
            continue
        if not before:
            elsewhere += 1
            continue
        leaking += 1
        missed = sorted(set(before) - set(record['found']))
        if missed:
            problems.append('MISSED %s: %s' % (test_id, ', '.join(
                '%s (%s)' % (k, before[k]) for k in missed)))
        else:
            found += 1
        if after:
            problems.append('NOT HEALED %s: still %s' % (test_id, ', '.join(
                '%s (%s)' % item for item in sorted(after.items()))))
        else:
            healed += 1
        if len(problems) > count_before:
            bad_tests.add(test_id)
    audited = len([t for t in results if t in records])
    print('audit after each test (%s): %d tests audited; %d leaking '
          'sequences left placement wrong: %d found, %d healed right; %d '
          'left it right (what they recreate is not in placement: an '
          'answer, a task state, the quota); %d problems'
          % (label, audited, leaking, found, healed, elsewhere,
             len(problems)))
    print('audit verdicts over the run (%s): %s' % (label, ', '.join(
        '%s %d' % (name, totals[name]) for name in audit.VERDICTS)))
    for line in problems:
        print('  ' + line)
    return audited - len(bad_tests & set(records)), len(bad_tests)
