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

"""Each change of a patch series, applied in order to nova, checked as
nova's gate checks what it touches.

    python tools/upstream_check.py --nova-src DIR [--series S]
        [--changes N[-M]] [--no-unit] [--no-functional] [--no-mypy]

DIR (default: the released sdist of the newest series) is a nova
tree: a git checkout of nova's master (series ``master``,
patches/master, checked out at patches/master/BASE in a clone) or a
release's tree (its sdist unpacked: the series of its PKG-INFO, in a
copy made a git repository). DIR itself is never changed. The patches
are applied one at a time with ``git am``; after each, for the files of
that change:

* style, as nova's pre-commit hooks run it: flake8 with hacking and
  nova's local checks under nova's own [flake8] configuration, autopep8
  (nothing to change), codespell with nova's dictionary, and the
  whitespace hooks (no trailing whitespace, no tab, a newline at the
  end);
* mypy with nova's configuration, when the change touches a file it
  covers;
* the unit test modules of the files it changes (UNIT_TESTS, else
  nova/tests/unit/<package>/test_<module>.py) and the unit test modules
  it changes;
* the functional tests it adds (whole modules) and changes (the test
  methods its hunks touch);
* for a recreate change (registry.Change.recreates), its regression
  test once more with its FIXME assertion flipped to what the fix
  asserts: that run must fail, on the code before the fix.

Every check is one line, ``<patch>: <check>: ok`` or ``FAILED`` with
what failed; the last line is ``N passed, N failed``. nova's tests run
from the patched tree on the interpreter running this (a venv with the
series' nova and its test requirements, as tox -e upstream makes it).
"""

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from nova_fixes import errors  # noqa: E402
from nova_fixes.export import patch as patches  # noqa: E402
from nova_fixes import registry  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, 'tools'))
import run_series  # noqa: E402


def module(path):
    """nova/a/b.py (or nova/a) -> nova.a.b (nova.a)."""
    return (path[:-3] if path.endswith('.py') else path).replace('/', '.')


#: nova's source files whose unit tests are not test_<module>.py beside
#: them under nova/tests/unit (tox -e series uses the same), and the
#: environment nova's unit and functional tests run in (eventlet, as
#: nova's tox py3 env has it).
UNIT_TESTS = {source: tuple(module(path) for path in tests)
              for source, tests in run_series.UNIT_TESTS_OF.items()}
NOVA_TEST_ENV = run_series.NOVA_TEST_ENV
TIMEOUT = 3600
#: The style checks, as nova's pre-commit hooks run them.
STYLE = ('whitespace', 'flake8', 'autopep8', 'codespell')


class Result(object):

    def __init__(self):
        self.passed = self.failed = 0

    def line(self, name, what, problem=None):
        if problem:
            self.failed += 1
            print('%s: %s: FAILED: %s' % (name, what, problem.strip()))
        else:
            self.passed += 1
            print('%s: %s: ok' % (name, what))
        sys.stdout.flush()


def run(cmd, cwd, timeout=TIMEOUT, env=None):
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                             timeout=timeout, env=env)
    except FileNotFoundError:
        return 127, '%s is not installed (tox -e upstream installs it)' % (
            cmd[0])
    except subprocess.TimeoutExpired:
        return 124, 'killed after %d s: %s' % (timeout, ' '.join(cmd))
    return out.returncode, (out.stdout + out.stderr)


def tree_series(tree):
    if os.path.isfile(os.path.join(tree, 'PKG-INFO')):
        version = patches.tree_version(tree)
        series = registry.SERIES_BY_MAJOR.get(int(version.split('.')[0]))
        if series is None:
            raise errors.NotANovaTree(tree, 'nova %s is of no supported '
                                      'series' % version)
        return series
    if os.path.isdir(os.path.join(tree, '.git')):
        return registry.UPSTREAM
    raise errors.NotANovaTree(tree, 'neither a release (PKG-INFO) nor a '
                              'git checkout of master')


def workspace(tree, series, where):
    """A copy of the tree, as a git repository at the series' base."""
    copy = os.path.join(where, 'nova')
    git = ['git', '-c', 'user.name=nova-fixes',
           '-c', 'user.email=nova-fixes@invalid']
    if series == registry.UPSTREAM:
        with open(os.path.join(patches.patches_dir(series), 'BASE')) as f:
            base = f.read().split()[0]
        subprocess.run(['git', 'clone', '-q', '--shared', '--no-checkout',
                        tree, copy], check=True)
        rc, out = run(['git', 'checkout', '-q', base], copy)
        if rc:
            raise errors.NotANovaTree(tree, 'the checkout has no commit %s '
                                      '(patches/master/BASE): %s'
                                      % (base, out.strip()))
    else:
        patches.check_tree(tree)
        patches.check_tree_series(tree, series)
        shutil.copytree(tree, copy, symlinks=True)
        for cmd in (['init', '-q'], ['add', '-A', '-f'],
                    ['commit', '-q', '-m', 'nova as released']):
            subprocess.run(git + cmd, cwd=copy, check=True,
                           capture_output=True)
    return copy, git


def changed(text, tree=None):
    """{path: (added?, [added or changed test names])} of a patch.

    A test is changed when a hunk defines it (added or as context), names
    it in its header, or, with ``tree`` (the tree the patch was applied
    to), when one of the lines the hunk adds or removes is in its body
    there.
    """
    out = {}
    for path, new_file, hunks in patches.parse(text):
        tests = set()
        touched = set()
        for header, _start, body in hunks:
            m = re.match(r'^@@ .* @@.*\bdef (test_\w+)', header)
            if m:
                tests.add(m.group(1))
            m = patches._HUNK.match(header)
            line = int(m.group(3))
            for row in body:
                # Defined in the hunk, added or as context: a test it
                # changes (or one beside the change: run too, which
                # costs little).
                m = re.match(r'^[ +]\s*def (test_\w+)', row)
                if m:
                    tests.add(m.group(1))
                if row[:1] in ('+', '-'):
                    touched.add(line)
                if row[:1] in (' ', '+'):
                    line += 1
        full = os.path.join(tree, path) if tree else None
        if full and path.endswith('.py') and os.path.isfile(full):
            with open(full, encoding='utf-8') as f:
                module_tree = ast.parse(f.read())
            tests.update(_tests_touched(module_tree, touched))
        out[path] = (new_file, sorted(tests))
    return out


def _tests_touched(module_tree, touched):
    """Names of the tests whose lines include one of ``touched``: a test
    method or function itself, or every test of the class (of the
    module, for a module-level function) whose helper it is.
    """
    def tests_in(node):
        return {n.name for n in ast.walk(node)
                if isinstance(n, ast.FunctionDef) and
                n.name.startswith('test_')}

    def hit(node):
        return any(node.lineno <= n <= node.end_lineno for n in touched)

    out = set()
    for top in module_tree.body:
        if isinstance(top, ast.FunctionDef) and hit(top):
            out.update({top.name} if top.name.startswith('test_')
                       else tests_in(module_tree))
        elif isinstance(top, ast.ClassDef) and hit(top):
            for node in top.body:
                if isinstance(node, ast.FunctionDef) and hit(node):
                    out.update({node.name} if node.name.startswith('test_')
                               else tests_in(top))
    return out


def unit_modules(tree, paths):
    found = []
    for path in paths:
        if not path.endswith('.py'):
            continue
        if path.startswith('nova/tests/unit/'):
            found.append(module(path))
        elif path.startswith('nova/tests/'):
            continue
        elif path in UNIT_TESTS:
            found.extend(UNIT_TESTS[path])
        else:
            package, name = os.path.split(path[len('nova/'):])
            candidate = os.path.join('nova/tests/unit', package,
                                     'test_' + name)
            if os.path.isfile(os.path.join(tree, candidate)):
                found.append(module(candidate))
    return sorted(set(found))


def recreates(series):
    """{patch name: [(nova path, fixed text)]}: the nova-side tests each
    recreate change of the series adds, with the text its fix gives them
    (the FIXME assertion flipped); see registry.Change.recreates.
    """
    out = {}
    order = patches.series_order(registry.records_of(series))
    for number, (fix, plan, change) in enumerate(order, 1):
        if change is None or not change.recreates:
            continue
        name = '%04d-%s.patch' % (number, plan.slug)
        for test in fix.nova_tests:
            if test.path in change.recreates:
                origin = os.path.join(patches.NOVA_SIDE_TESTS, test.source)
                with open(origin, encoding='utf-8') as f:
                    out.setdefault(name, []).append((test.path, (
                        patches.recreate_form(f.read(), False, origin))))
    return out


def flipped_fails(tree, path, fixed, result, name):
    """A recreate change's test, its FIXME assertion flipped to what the
    fix asserts, must fail on the code before the fix: it catches the
    bug. The recreate form is put back after.
    """
    full = os.path.join(tree, path)
    with open(full, encoding='utf-8') as f:
        recreate = f.read()
    try:
        with open(full, 'w', encoding='utf-8') as f:
            f.write(fixed)
        stestr(tree, test_dir([module(path)]),
               [re.escape(module(path)) + r'\b'],
               'recreate: %s fails with its FIXME assertion flipped'
               % os.path.basename(path), result, name, expect_failure=True)
    finally:
        with open(full, 'w', encoding='utf-8') as f:
            f.write(recreate)


def stestr(tree, test_path, ids, what, result, name, expect_failure=False):
    """Run the tests matching ``ids`` (regexes) under test_path; with
    ``expect_failure``, a run where one ran and none failed fails.
    """
    if os.path.isdir(os.path.join(tree, '.stestr')):
        shutil.rmtree(os.path.join(tree, '.stestr'))
    pattern = '^(%s)' % '|'.join(ids)
    env = dict(os.environ, PYTHONPATH=tree, **NOVA_TEST_ENV)
    env.pop('NOVA_FIXES_MODE', None)
    started = time.monotonic()
    rc, out = run([sys.executable, '-m', 'stestr', '--top-dir', './',
                   '--test-path', test_path, 'run', '--concurrency',
                   str(os.cpu_count() or 1), pattern], tree, env=env)
    counts = re.findall(r'^ - (Passed|Failed|Skipped): (\d+)$', out, re.M)
    summary = ', '.join('%s %s' % (n, k.lower()) for k, n in counts)
    took = time.monotonic() - started
    label = '%s (%s; %.0f s)' % (what, summary or 'nothing ran', took)
    passed = dict(counts).get('Passed', '0')
    failed = dict(counts).get('Failed', '0')
    if expect_failure:
        if failed == '0' or rc == 0:
            result.line(name, label, 'exit %d: no test failed' % rc)
        else:
            result.line(name, label)
    elif rc != 0 or passed == '0':
        failures = re.findall(r'^FAIL: (\S+)', out, re.M)
        result.line(name, label, 'exit %d%s: %s' % (
            rc, ' (no test passed)' if passed == '0' else '',
            ', '.join(failures[:10]) or out.strip()[-1500:]))
    else:
        result.line(name, label)


def _bin(name):
    """A console script of the environment running this."""
    return os.path.join(os.path.dirname(sys.executable), name)


def style(tree, files, result, name):
    py = [f for f in files if f.endswith('.py') and
          os.path.isfile(os.path.join(tree, f))]
    present = [f for f in files if os.path.isfile(os.path.join(tree, f))]
    problems = []
    for path in present:
        with open(os.path.join(tree, path), encoding='utf-8') as f:
            text = f.read()
        for n, line in enumerate(text.splitlines(), 1):
            if line != line.rstrip():
                problems.append('%s:%d: trailing whitespace' % (path, n))
            if '\t' in line and not path.endswith('.svg'):
                problems.append('%s:%d: a tab' % (path, n))
        if text and not text.endswith('\n'):
            problems.append('%s: no newline at the end' % path)
    if 'whitespace' in STYLE:
        result.line(name, 'whitespace (%d files)' % len(present),
                    '; '.join(problems[:10]) if problems else None)
    hacked = [f for f in py
              if not re.match(r'^(doc|releasenotes|tools)/', f)]
    if hacked and 'flake8' in STYLE:
        rc, out = run([sys.executable, '-m', 'flake8'] + hacked, tree)
        result.line(name, 'flake8 with hacking (%d files)' % len(hacked),
                    out if rc else None)
    if py and 'autopep8' in STYLE:
        # As the pre-commit hook runs it: in place, with nova's own
        # [tool.autopep8] configuration; then whatever it changed is the
        # finding, and the files are put back.
        rc, out = run([_bin('autopep8')] + py, tree)
        rc_diff, diff = run(['git', 'diff', '--exit-code', '--'] + py, tree)
        run(['git', 'checkout', '--'] + py, tree)
        result.line(name, 'autopep8 (%d files)' % len(py),
                    (out if rc else 'it would change:\n' + diff[:1500])
                    if rc or rc_diff else None)
    if present and 'codespell' in STYLE:
        rc, out = run([_bin('codespell'),
                       '--ignore-words=doc/dictionary.txt'] + present, tree)
        result.line(name, 'codespell (%d files)' % len(present),
                    out if rc else None)


def mypy_files(tree):
    """The files nova's mypy configuration covers (pyproject.toml)."""
    import tomllib
    path = os.path.join(tree, 'pyproject.toml')
    if not os.path.isfile(path):
        return []
    with open(path, 'rb') as f:
        conf = tomllib.load(f)
    return conf.get('tool', {}).get('mypy', {}).get('files', [])


def typed(tree, files, result, name):
    import fnmatch
    covered = mypy_files(tree)
    hit = [f for f in files
           if any(fnmatch.fnmatchcase(f, p) for p in covered)]
    if not hit:
        return
    rc, out = run([sys.executable, '-m', 'mypy'], tree)
    result.line(name, 'mypy, nova\'s configuration (covers %s)'
                % ', '.join(hit), out[-2000:] if rc else None)


def touched_modules(files, under):
    """The test modules under ``under`` that ``files`` adds or whose
    tests it touches (see touched_tests).
    """
    return [module(path) for path, (added, tests) in sorted(files.items())
            if path.startswith(under) and path.endswith('.py') and
            (added or tests)]


def touched_tests(files, under):
    """stestr regexes of the tests under ``under`` that ``files`` (see
    changed) adds or changes: a module it adds whole, else the tests it
    touches.
    """
    ids = []
    for path, (added, tests) in sorted(files.items()):
        if not (path.startswith(under) and path.endswith('.py')):
            continue
        if added:
            ids.append(re.escape(module(path)) + r'\b')
        elif tests:
            ids.append(r'%s\..*\.(%s)$' % (
                re.escape(module(path)), '|'.join(tests)))
    return ids


def test_dir(modules):
    """The directory stestr discovers in for ``modules`` (dotted names of
    test modules): the deepest one holding them all.

    Discovery imports every test module under its directory, and nova's
    unit tests take about 10 s more from nova/tests/unit than from
    nova/tests/unit/compute: a second or so a test, on the one or two
    modules a change touches.
    """
    dirs = [os.path.dirname(m.replace('.', '/')) for m in modules]
    return './' + os.path.commonpath(dirs)


def check_change(copy, name, text, args, result, recreated):
    """The checks of one change, applied to the tree ``copy``."""
    files = changed(text, copy)
    style(copy, sorted(files), result, name)
    if not args.no_mypy:
        typed(copy, sorted(files), result, name)
    if not args.no_unit:
        mods = unit_modules(copy, sorted(files))
        if mods:
            stestr(copy, test_dir(mods),
                   [re.escape(m) + r'\b' for m in mods],
                   'unit tests of %s' % ', '.join(
                       m.rsplit('.', 1)[-1] for m in mods),
                   result, name)
    else:
        # The unit tests the change adds or changes: a few seconds, where
        # the modules of its files take minutes.
        ids = touched_tests(files, 'nova/tests/unit/')
        if ids:
            stestr(copy, test_dir(touched_modules(files, 'nova/tests/unit/')),
                   ids,
                   'unit tests it adds or changes', result, name)
    if not args.no_functional:
        ids = touched_tests(files, 'nova/tests/functional/')
        if ids:
            stestr(copy, test_dir(
                touched_modules(files, 'nova/tests/functional/')), ids,
                'functional tests it adds or changes', result, name)
        for path, fixed in recreated:
            flipped_fails(copy, path, fixed, result, name)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--nova-src',
                   help='a nova tree: a git checkout of master, or a '
                   "release's unpacked sdist (default: %s's released "
                   'sdist, downloaded with pip)' % registry.DEFAULT_SERIES)
    p.add_argument('--series', help='the patches/ set to apply (default: '
                   "the tree's: master for a git checkout, else its "
                   'release\'s series)')
    p.add_argument('--changes', help='only the changes numbered N or N-M '
                   '(the others are applied, not checked)')
    p.add_argument('--no-unit', action='store_true')
    p.add_argument('--no-functional', action='store_true')
    p.add_argument('--no-mypy', action='store_true')
    args = p.parse_args(argv)
    result = Result()
    try:
        if args.nova_src:
            tree = os.path.abspath(args.nova_src)
        else:
            from nova_fixes.export import sdist
            tree = sdist.released_tree(registry.DEFAULT_SERIES)
        if not os.path.isdir(tree):
            raise errors.NotANovaTree(tree, 'no such directory')
        series = args.series or tree_series(tree)
        registry.records_of(series)
        listed = patches.series_patches(series)
        recreated = recreates(series)
        first, last = 1, len(listed)
        if args.changes:
            m = re.match(r'^(\d+)(?:-(\d+))?$', args.changes)
            if not m or not 1 <= int(m.group(1)) <= int(
                    m.group(2) or m.group(1)) <= len(listed):
                raise errors.NovaFixesError(
                    '--changes %s: give N or N-M within 1-%d'
                    % (args.changes, len(listed)))
            first, last = int(m.group(1)), int(m.group(2) or m.group(1))
    except errors.NovaFixesError as e:
        print('upstream_check: %s' % e)
        print('0 passed, 1 failed')
        return 1
    print('nova %s, patches/%s: %d changes' % (tree, series, len(listed)))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix='nova-fixes-upstream-') as tmp:
        copy, git = workspace(tree, series, tmp)
        directory = patches.patches_dir(series)
        for number, (name, text) in enumerate(listed, 1):
            rc, out = run(git + ['am', '-q', os.path.join(directory, name)],
                          copy)
            check = first <= number <= last
            if rc:
                result.line(name, 'git am', out)
                break
            if not check:
                continue
            t = time.monotonic()
            result.line(name, 'git am')
            check_change(copy, name, text, args, result,
                         recreated.get(name, ()))
            print('%s: %.0f s' % (name, time.monotonic() - t))
    print('upstream check: %.0f s' % (time.monotonic() - started))
    print('%d passed, %d failed' % (result.passed, result.failed))
    return 1 if result.failed else 0


if __name__ == '__main__':
    sys.exit(main())
