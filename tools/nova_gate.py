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

"""nova's own unit and functional suites on a series' patched tree.

What nova's gate and a packager's build run: nova's whole unit suite
(nova/tests/unit) and functional suite (nova/tests/functional), with
stestr, on a copy of the series' released sdist with patches/<series>
applied, and the same suites with the same runner and workers on an
unpatched copy (vanilla); the results are compared test by test.

- A test that fails only on the patched tree fails the run.
- A test that fails on both trees must be listed, once, with its reason,
  in tools/nova_gate_shared_failures.txt; an unlisted one, and a listed
  one that passes on vanilla, count as failures too (the list is kept
  true).
- --drop-ins: the suites on vanilla nova with the drop-ins active in
  every test process instead of the patched tree; a test may then fail
  (and pass on vanilla) only if a change of the series edits it.
- --slice K/N: the Kth of N slices of each suite, by a stable hash of the
  test id, so that N runs (K = 1..N) cover each suite once.

Prints "nova-gate (SERIES, SUITE): N passed, N failed, N only on the
patched tree" per suite, then "N passed, N failed" alone.
"""

import argparse
import ast
import collections
import difflib
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TREE, os.path.join(TREE, 'tools')]

from nova_fixes import errors  # noqa: E402
from nova_fixes import registry  # noqa: E402

SUITES = ('unit', 'functional')

#: The list of the tests that fail on both trees, with their reasons.
SHARED_FAILURES = os.path.join(TREE, 'tools', 'nova_gate_shared_failures.txt')

#: The series whose trees are Debian's nova source packages, with their
#: Debian release (tools/debian_build.py's RELEASES): the vanilla tree is
#: the source with Debian's patches, the patched tree has the series'
#: patch set pushed on them with quilt; both suites run in a chroot of
#: the release, by its python3, with its packages (2022.2's nova does
#: not install from PyPI on this machine's Python, and Debian 13's tree
#: is not a released sdist).
DEBIAN = {
    '2022.2': 'bookworm',
    'debian-13': 'trixie',
}

#: nova's tox environment for each suite (nova's tox.ini, [testenv] and
#: [testenv:py3] / [testenv:functional]), less its locale.
NOVA_ENV = {
    'OS_STDOUT_CAPTURE': '1',
    'OS_STDERR_CAPTURE': '1',
    'OS_TEST_TIMEOUT': '160',
    'PYTHONDONTWRITEBYTECODE': '1',
    'NOVA_RAISE_ON_GREENLET_LEAK': 'True',
    'OS_NOVA_DISABLE_EVENTLET_PATCHING': 'False',
}

#: The script a test worker starts through with the drop-ins active.
DROPIN_BOOT = os.path.join(TREE, 'tests', 'recreate', 'dropin_boot.py')


class GateError(errors.NovaFixesError):
    """Bad input to nova-gate: one line for the user."""


def known_series():
    return registry.SUPPORTED_SERIES + tuple(
        sorted(set(DEBIAN) - set(registry.SUPPORTED_SERIES)))


def check_series(series):
    """The series, if nova-gate knows it; a clear error otherwise."""
    if series not in known_series():
        raise errors.UnknownSeries(series, known_series())
    if series in DEBIAN:
        return series
    if not os.path.exists(os.path.join(TREE, 'constraints',
                                       '%s.txt' % series)):
        raise GateError('nova-gate: %s has no constraints/%s.txt to '
                        'install its nova with; series with one: %s' % (
                            series, series, ', '.join(
                                s for s in registry.SUPPORTED_SERIES
                                if os.path.exists(os.path.join(
                                    TREE, 'constraints', '%s.txt' % s)))))
    return series


# -- slices -------------------------------------------------------------

def parse_slice(text):
    """(K, N) of "K/N", 1 <= K <= N."""
    match = re.match(r'^\s*(\d+)\s*/\s*(\d+)\s*$', text or '')
    if not match:
        raise GateError('--slice %r: expected K/N, e.g. 1/8' % text)
    k, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= k <= n:
        raise GateError('--slice %s: K must be between 1 and N (N >= 1)'
                        % text)
    return k, n


def slice_of(test_id, n):
    """The slice (1..n) a test id belongs to: a stable hash, the same on
    every machine and Python (not hash(), which is salted).
    """
    digest = hashlib.sha256(test_id.encode('utf-8')).hexdigest()
    return int(digest[:12], 16) % n + 1


def select(test_ids, piece):
    """The ids of slice ``piece`` ((K, N), or None: all), sorted."""
    if piece is None:
        return sorted(test_ids)
    k, n = piece
    return sorted(t for t in test_ids if slice_of(t, n) == k)


# -- comparison ---------------------------------------------------------

PASSED = ('success', 'xfail')
SKIPPED = ('skip',)


def verdict(status):
    """pass, skip or fail of a subunit status (None: the test did not
    run on that tree).
    """
    if status is None:
        return None
    if status in PASSED:
        return 'pass'
    if status in SKIPPED:
        return 'skip'
    return 'fail'


Comparison = collections.namedtuple(
    'Comparison', 'passed failed skipped only_patched both')


def compare(patched, vanilla):
    """Compare {test id: status} of the patched tree with vanilla's.

    ``only_patched``: the tests that fail on the patched tree and pass,
    are skipped or do not exist on vanilla; ``both``: those that fail on
    both. ``passed``, ``failed`` and ``skipped`` count the patched tree.
    """
    passed = failed = skipped = 0
    only, both = [], []
    for test_id in sorted(patched):
        mine = verdict(patched[test_id])
        if mine == 'pass':
            passed += 1
        elif mine == 'skip':
            skipped += 1
        else:
            failed += 1
            if verdict(vanilla.get(test_id)) == 'fail':
                both.append(test_id)
            else:
                only.append(test_id)
    return Comparison(passed, failed, skipped, only, both)


# -- the shared failures ------------------------------------------------

Shared = collections.namedtuple('Shared', 'series reason line')


def parse_shared(text, name=SHARED_FAILURES):
    """{test id: Shared} of the shared-failures list.

    One test a line, ``<test id> | <series> | <reason>``: series ``*``
    (every series) or a comma-separated list; ``#`` starts a comment
    line. A test listed twice, an unknown series, or a line without a
    reason is an error naming the line.
    """
    out = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        parts = [p.strip() for p in line.split(' | ', 2)]
        where = '%s:%d' % (os.path.basename(name), number)
        if len(parts) != 3 or not all(parts):
            raise GateError('%s: expected "<test id> | <series> | <reason>"'
                            % where)
        test_id, series, reason = parts
        # A scenario's name (in parentheses) may have spaces.
        if (' ' in test_id.split('(')[0] or
                not test_id.startswith('nova.tests.')):
            raise GateError('%s: %r is not a nova test id' % (where, test_id))
        if series == '*':
            names = ()
        else:
            names = tuple(s.strip() for s in series.split(','))
            unknown = [s for s in names if s not in known_series()]
            if unknown:
                raise GateError('%s: unknown series %s; known: %s' % (
                    where, ', '.join(unknown), ', '.join(known_series())))
        if test_id in out:
            raise GateError('%s: %s is listed already (line %d)' % (
                where, test_id, out[test_id].line))
        out[test_id] = Shared(names, reason, number)
    return out


def load_shared(path=SHARED_FAILURES):
    with open(path) as f:
        return parse_shared(f.read(), path)


def listed_for(shared, series):
    """The ids of the list that apply to ``series``."""
    return {t for t, s in shared.items() if not s.series or series in s.series}


def check_shared(both, vanilla, shared, series):
    """(unlisted, stale): the tests that fail on both trees and are not
    listed for the series, and the listed ones that ran and passed on
    vanilla (or were skipped there).
    """
    listed = listed_for(shared, series)
    unlisted = sorted(set(both) - listed)
    stale = sorted(t for t in listed
                   if verdict(vanilla.get(t)) in ('pass', 'skip'))
    return unlisted, stale


# -- the tests a series edits -------------------------------------------

def _changed_lines(before, after):
    """1-based lines of ``after`` that differ from ``before``."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(),
                                      after.splitlines(), autojunk=False)
    changed = set()
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag != 'equal':
            changed.update(range(j1 + 1, max(j2, j1 + 1) + 1))
    return changed


def edited_names(before, after):
    """What a change of a test module edits, as names under the module:
    ``Class.test_method`` for a changed test method, ``Class`` (with its
    subclasses in the module) for a change elsewhere in a class, ``''``
    (the whole module) for a change outside every class.
    """
    changed = _changed_lines(before, after)
    if not changed:
        return set()
    tree = ast.parse(after)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    names, whole = set(), set()
    for line in changed:
        owner = next((c for c in classes
                      if c.lineno - len(c.decorator_list) <= line <=
                      c.end_lineno), None)
        if owner is None:
            if line <= len(after.splitlines()):
                return {''}
            continue
        method = next((f for f in owner.body
                       if isinstance(f, (ast.FunctionDef,
                                         ast.AsyncFunctionDef)) and
                       f.lineno - len(f.decorator_list) <= line <=
                       f.end_lineno), None)
        if method is not None and method.name.startswith('test'):
            names.add('%s.%s' % (owner.name, method.name))
        else:
            whole.add(owner.name)
    grown = True
    while grown:
        subclasses = {c.name for c in classes
                      if any(getattr(b, 'id', None) in whole
                             for b in c.bases)}
        grown = not subclasses <= whole
        whole |= subclasses
    return names | whole


def matches(test_id, prefix):
    """Whether ``test_id`` is the test (or class, or module) ``prefix``,
    its ddt variants (test_x_1_...) and scenarios (test_x(...)) included.
    """
    if test_id == prefix:
        return True
    rest = test_id[len(prefix):] if test_id.startswith(prefix) else None
    if rest is None:
        return False
    return bool(re.match(r'^(\.|\(|_\d+(_|$))', rest))


def edited_tests(changes, test_ids, flips=()):
    """The ids among ``test_ids`` that the series edits: ``changes`` is
    {test module id: edited_names()}; ``flips``: test ids the series'
    fixes flip (Fix.nova_flips), which its changes edit too.
    """
    prefixes = set(flips)
    for module, names in changes.items():
        for name in names:
            prefixes.add('.'.join(filter(None, (module, name))))
    return sorted(t for t in test_ids
                  if any(matches(t, p) for p in prefixes))


def series_changes(series, original, patched):
    """{test module id: edited_names()} of every nova test module that
    patches/<series> changes (a new module: the whole of it).
    """
    import run_series
    out = {}
    for path, new in sorted(run_series.changed_paths(series).items()):
        if not (path.startswith('nova/tests/') and path.endswith('.py')):
            continue
        module = run_series._test_id(path)
        if new:
            out[module] = {''}
            continue
        with open(os.path.join(original, path)) as f:
            before = f.read()
        with open(os.path.join(patched, path)) as f:
            out[module] = edited_names(before, f.read())
    return out


def series_flips(series):
    from nova_fixes import fixes
    return sorted({t for fix in fixes.FIXES for t in fix.nova_flips})


# -- running ------------------------------------------------------------

def installed_series():
    from nova_fixes import activation
    return activation.series_of(activation.nova_version())


def install_requirements():
    """pip install the installed nova's test-requirements.txt and its
    extras (the drivers nova's unit tests import), within the series'
    constraints.
    """
    from nova_fixes.export import sdist
    series = installed_series()
    tree = sdist.released_tree(series)
    extras = []
    pyproject = os.path.join(tree, 'pyproject.toml')
    if os.path.exists(pyproject):
        import tomllib
        with open(pyproject, 'rb') as f:
            optional = tomllib.load(f).get('project', {}).get(
                'optional-dependencies', {})
        for name in ('zvm', 'vmware'):
            extras += optional.get(name, [])
    cmd = [sys.executable, '-m', 'pip', 'install', '--quiet',
           '-c', os.path.join(TREE, 'constraints', '%s.txt' % series),
           '-r', os.path.join(tree, 'test-requirements.txt')] + extras
    print('nova-gate: installing nova %s\'s test requirements' % series)
    return subprocess.call(cmd)


class Quiet(object):
    """run_suite's progress: a line every ``every`` tests, and each
    failure, on stderr.
    """

    def __init__(self, label, every=500):
        self.label = label
        self.every = every

    def __call__(self, mode, without, test_id, outcome, done, total):
        failed = verdict(outcome.status) == 'fail'
        if failed or done % self.every == 0 or done == total:
            sys.stderr.write('[%s %d/%d]%s\n' % (
                self.label, done, total,
                ' FAIL %s' % test_id if failed else ''))
            sys.stderr.flush()


def run_tree(label, tree, suite, piece, concurrency, extra_env=None,
             pattern=None):
    """{test id: status} of one suite of one tree (its slice; the ids
    that match the regex ``pattern`` only, if given).
    """
    from tests import recreate
    env = dict(NOVA_ENV, PYTHONPATH=tree, **(extra_env or {}))
    test_path = 'nova/tests/%s' % suite
    start = time.time()
    ids = select(recreate.list_suite(tree, test_path, extra_env=env), piece)
    if pattern:
        ids = [t for t in ids if re.search(pattern, t)]
    listed = time.time() - start
    results = recreate.run_suite(
        tree=tree, mode='vanilla', test_path=test_path,
        concurrency=concurrency, progress=Quiet(label), extra_env=env,
        test_ids=ids)
    print('%s: %d tests, listed in %d s, ran in %d s' % (
        label, len(ids), listed, time.time() - start - listed))
    return {t: o.status for t, o in results.items()}


def slice_name(piece):
    return ', slice %d/%d' % piece if piece else ''


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('series', nargs='?', default=registry.DEFAULT_SERIES,
                   help='the series (default %(default)s)')
    p.add_argument('--suite', action='append', choices=SUITES,
                   help='run only this suite (repeatable)')
    p.add_argument('--slice', help='K/N: the Kth of N slices of each suite')
    p.add_argument('--drop-ins', action='store_true',
                   help='vanilla nova with the drop-ins active instead of '
                        'the patched tree')
    p.add_argument('--concurrency', type=int, default=None,
                   help="stestr's workers, on both trees (default: "
                        "stestr's, one per CPU)")
    p.add_argument('--filter', default=None,
                   help='only the test ids matching this regex')
    p.add_argument('--install-requirements', action='store_true',
                   help="install nova's test requirements and exit")
    p.add_argument('--trees', nargs=2, metavar=('VANILLA', 'PATCHED'),
                   help='compare these two trees as they are (what the '
                        "chroot of a Debian tree runs); nova's imports "
                        'come from each tree')
    args = p.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)
    if args.install_requirements:
        return install_requirements()
    try:
        series = check_series(args.series)
        piece = parse_slice(args.slice) if args.slice else None
        shared = load_shared()
    except errors.NovaFixesError as e:
        print(str(e), file=sys.stderr)
        print('0 passed, 1 failed')
        return 2
    if args.trees:
        if args.drop_ins:
            print('nova-gate: --trees compares two trees; --drop-ins needs '
                  'a released sdist', file=sys.stderr)
            print('0 passed, 1 failed')
            return 2
        start = time.time()
        passed, failed = compare_trees(
            series, args.trees[0], args.trees[1], args.suite or SUITES,
            piece, args.concurrency, shared, args.filter)
        print('nova-gate (%s%s) took %d s' % (series, slice_name(piece),
                                              time.time() - start))
        print('%d passed, %d failed' % (passed, failed))
        return 1 if failed else 0
    if series in DEBIAN:
        try:
            return debian_gate(series, args)
        except errors.NovaFixesError as e:
            print(str(e), file=sys.stderr)
            print('0 passed, 1 failed')
            return 2
    here = installed_series()
    if series != here:
        if os.environ.get('NOVA_GATE_SWITCHED') or not shutil.which('tox'):
            print('nova-gate: nova of %s is installed, not of %s: run '
                  'NOVA_FIXES_SERIES=%s tox -e nova-gate -- %s' % (
                      here, series, series, series), file=sys.stderr)
            print('0 passed, 1 failed')
            return 2
        print('nova-gate: %s: tox -e nova-gate with NOVA_FIXES_SERIES=%s'
              % (series, series))
        return subprocess.call(
            ['tox', '-e', 'nova-gate', '--'] + (argv or sys.argv[1:]),
            cwd=TREE, env=dict(os.environ, NOVA_FIXES_SERIES=series,
                               NOVA_GATE_SWITCHED='1'))
    return gate(series, args.suite or SUITES, piece, args.drop_ins,
                args.concurrency, shared, args.filter)


def gate(series, suites, piece, drop_ins, concurrency, shared, pattern):
    from nova_fixes.export import patch
    from nova_fixes.export import sdist
    start = time.time()
    released = sdist.released_tree(series)
    work = tempfile.mkdtemp(prefix='nova-gate-%s-' % series)
    try:
        vanilla_tree = os.path.join(work, 'vanilla')
        shutil.copytree(released, vanilla_tree)
        patched_tree = os.path.join(work, 'patched')
        shutil.copytree(released, patched_tree)
        names = patch.verify(series, patched_tree, write_tree=True)
        print('nova-gate: %s: applied %d patches' % (series, len(names)))
        changes = series_changes(series, released, patched_tree)
        passed, failed = compare_trees(
            series, vanilla_tree, patched_tree, suites, piece, concurrency,
            shared, pattern, drop_ins=drop_ins, changes=changes,
            flips=series_flips(series) if drop_ins else ())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print('nova-gate (%s%s) took %d s' % (series, slice_name(piece),
                                          time.time() - start))
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


def compare_trees(series, vanilla_tree, patched_tree, suites, piece,
                  concurrency, shared, pattern, drop_ins=False, changes=(),
                  flips=()):
    """Run each suite on both trees (or on vanilla with the drop-ins) and
    compare them test by test, printing one line per suite: (passed,
    failed) summed over the suites.
    """
    total_passed = total_failed = 0
    side = 'with the drop-ins' if drop_ins else 'on the patched tree'
    for suite in suites:
        where = '%s%s' % (suite, slice_name(piece))
        label = 'nova-gate (%s, %s' % (series, where)
        vanilla = run_tree(label + ', vanilla)', vanilla_tree, suite,
                           piece, concurrency, pattern=pattern)
        if drop_ins:
            other = run_tree(
                label + ', drop-ins)', vanilla_tree, suite, piece,
                concurrency, pattern=pattern,
                extra_env={'NOVA_FIXES_WORKER_BOOT': DROPIN_BOOT})
        else:
            other = run_tree(label + ', patched)', patched_tree, suite,
                             piece, concurrency, pattern=pattern)
        result = compare(other, vanilla)
        unlisted, stale = check_shared(result.both, vanilla, shared, series)
        only = result.only_patched
        owned = []
        if drop_ins:
            edited = set(edited_tests(changes, list(vanilla), flips))
            owned = [t for t in only if t in edited]
            only = [t for t in only if t not in edited]
            print('%s, drop-ins): %d tests fail only with the drop-ins; '
                  'the series edits %d of the tests run'
                  % (label, len(result.only_patched), len(edited)))
            for t in result.only_patched:
                print('  %s %s' % ('edited by the series' if t in edited
                                   else 'NOT EDITED', t))
            for t in sorted(edited - set(result.only_patched)):
                print('  edited, passes unedited with the drop-ins: %s' % t)
        failed = len(only) + len(unlisted) + len(stale)
        print('%s): %d passed, %d failed, %d only %s' % (
            label, result.passed, result.failed, len(only), side))
        for t in only:
            print('  FAILED only %s: %s' % (side, t))
        for t in result.both:
            reason = shared[t].reason if t in shared else (
                'NOT LISTED in %s' % os.path.relpath(SHARED_FAILURES, TREE))
            print('  fails on both trees: %s (%s)' % (t, reason))
        for t in stale:
            print('  now passes on vanilla: remove it from the list: %s' % t)
        total_passed += result.passed + len(owned)
        total_failed += failed
    return total_passed, total_failed


# -- Debian's trees -----------------------------------------------------

#: What the chroot installs beside the source's build dependencies (which
#: carry nova's test libraries: Debian runs nova's unit tests in its
#: build): the runner, and placement for the functional suite.
DEBIAN_PACKAGES = ('python3-stestr', 'python3-subunit', 'python3-placement',
                   'python3-wsgi-intercept', 'python3-oslotest')


def debian_trees(series, work):
    """(vanilla tree, patched tree, codename, the release's suites, the
    archive's URIs): Debian's nova source of the series' release, once
    with Debian's patches pushed, once with the series' patch set pushed
    on them (quilt, no fuzz: tools/check_debian_quilt.py).
    """
    import check_debian_quilt
    codename = DEBIAN[series]
    label, suites, nova_series, patch_set = next(
        r for r in check_debian_quilt.RELEASES if r[1][0] == codename)
    uris = check_debian_quilt.archive_uris()
    apt = check_debian_quilt.Apt(os.path.join(work, 'apt'), uris)
    apt.update()
    source = os.path.join(work, 'source')
    os.makedirs(source)
    version, tree, not_served = apt.source(
        apt.source_versions(suites), source, nova_series)
    for line in not_served:
        print('nova-gate (%s): %s' % (series, line))
    vanilla = os.path.join(work, 'vanilla')
    shutil.copytree(tree, vanilla, symlinks=True)
    subprocess.run(['quilt', 'push', '-a', '-q'], cwd=vanilla, check=True,
                   capture_output=True,
                   env=dict(os.environ, QUILT_PATCHES='debian/patches',
                            QUILT_PC='.pc'))
    debian, added, _offsets = check_debian_quilt.quilt_on_debian(
        tree, nova_series, patch_set)
    print("nova-gate (%s): %s, Debian's nova source %s: %d of Debian's "
          'patches on both trees, %d of patches/%s on the patched one'
          % (series, label, version, len(debian), len(added), patch_set))
    return vanilla, tree, codename, suites, uris


def version_of(tree):
    """The upstream version of a Debian source tree's changelog."""
    with open(os.path.join(tree, 'debian', 'changelog')) as f:
        first = f.readline()
    found = re.search(r'\((?:\d+:)?([^-)~+]+)', first)
    if not found:
        raise GateError('nova-gate: no version in %s/debian/changelog: %r'
                        % (tree, first.strip()))
    return found.group(1)


def debian_gate(series, args):
    """Both suites on Debian's trees of the series, in a chroot of its
    release: the trees and this project are copied in, the source's build
    dependencies and DEBIAN_PACKAGES installed, and this script runs there
    again (--trees) by the release's python3.
    """
    import debian_build
    missing = [prog for prog in ('debootstrap', 'dpkg-source', 'quilt',
                                 'chroot', 'mount')
               if shutil.which(prog) is None]
    if missing or os.geteuid() != 0:
        raise GateError('nova-gate: %s is Debian\'s tree, built in a '
                        'chroot: needs root and %s (apt-get install '
                        'debootstrap dpkg-dev quilt)' % (
                            series, ', '.join(missing) or 'is not root'))
    if args.drop_ins:
        raise GateError('nova-gate: %s: --drop-ins runs on a released '
                        "sdist; the drop-ins on Debian's package are "
                        'tox -e debian-build\'s' % series)
    import check_debian_quilt
    start = time.time()
    work = tempfile.mkdtemp(prefix='nova-gate-%s-' % series)
    root = None
    status, out = None, ''
    try:
        vanilla, patched, codename, suites, uris = debian_trees(series,
                                                               work)
        base, made = debian_build.base_chroot(codename, suites, uris)
        print('nova-gate (%s): base chroot %s (%s)' % (
            series, base, 'made' if made else 'reused'))
        root = debian_build.Chroot(base, os.path.join(work, 'root'))
        for name, tree in (('vanilla', vanilla), ('patched', patched)):
            shutil.copytree(tree, os.path.join(root.root, 'gate', name),
                            symlinks=True)
        debian_build.project_copy(os.path.join(root.root, 'nova-fixes'))
        root.run('apt-get update -q && apt-get build-dep -y -q '
                 '--no-install-recommends /gate/patched && apt-get install '
                 '-y -q --no-install-recommends %s'
                 % ' '.join(DEBIAN_PACKAGES),
                 debian_build.TIMEOUTS['apt'])
        # nova's entry points (stevedore's plugins) are read from its
        # egg-info, which a source package's tree may lack.
        root.run('for t in /gate/vanilla /gate/patched; do cd $t; '
                 'ls -d *.egg-info >/dev/null 2>&1 || PBR_VERSION=%s '
                 'python3 setup.py -q egg_info >/dev/null; done'
                 % version_of(vanilla))
        print('nova-gate (%s): the chroot is ready (%d s)' % (
            series, time.time() - start))
        inner = ['python3', '/nova-fixes/tools/nova_gate.py', series,
                 '--trees', '/gate/vanilla', '/gate/patched']
        for suite in args.suite or ():
            inner += ['--suite', suite]
        for option, value in (('--slice', args.slice),
                              ('--concurrency', args.concurrency),
                              ('--filter', args.filter)):
            if value is not None:
                inner += [option, str(value)]
        status, out = root.run(
            ' '.join(shlex.quote(str(a)) for a in inner),
            timeout=6 * 3600, echo=True)
    except (debian_build.BuildFailed, check_debian_quilt.CheckFailed,
            subprocess.CalledProcessError) as e:
        print('nova-gate (%s): FAILED: %s' % (series, e))
    finally:
        if root is not None:
            root.close()
        shutil.rmtree(work, ignore_errors=True)
    counts = re.findall(r'^(\d+) passed, (\d+) failed$', out, re.M)
    passed, failed = (int(c) for c in counts[-1]) if counts else (0, 1)
    if not counts:
        print('nova-gate (%s): the chroot ended without its count (exit '
              '%s)' % (series, status))
    print('nova-gate (%s%s) took %d s' % (series, slice_name(
        parse_slice(args.slice) if args.slice else None),
        time.time() - start))
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
