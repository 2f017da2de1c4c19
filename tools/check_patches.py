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

"""Check patches/ for every series against its released nova.

For each series (all by default): patches/<series> is what the drop-ins
export today (not stale); it applies, all or nothing, with nova-fixes
verify; and the tools packagers use take it on a copy of the released
sdist: ``patch -p1`` patch after patch, ``git am`` on a git repository of
the tree, ``quilt push -a`` from a debian/patches directory. A tool that is
not installed is reported as such and not counted. The series are
checked in parallel (``--jobs``, one per CPU by default). Prints one
"N passed, N failed" line.
"""

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile

from nova_fixes import errors
from nova_fixes.export import patch
from nova_fixes.export import sdist
from nova_fixes import registry


def _run(cmd, cwd, stdin=None, env=None):
    result = subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True,
                            text=True, env=dict(os.environ, **(env or {})))
    if result.returncode:
        raise errors.NovaFixesError('%s: %s' % (' '.join(cmd), (
            result.stdout + result.stderr).strip()[-800:]))
    return result.stdout


def _patch_p1(tree, patches):
    for name, text in patches:
        _run(['patch', '-p1', '--forward', '--batch', '-s'], tree,
             stdin=text)


def _git_am(tree, patches_dir, names):
    git = ['git', '-c', 'user.name=nova-fixes', '-c',
           'user.email=nova-fixes@example.org']
    _run(git + ['init', '-q'], tree)
    _run(git + ['add', '-A'], tree)
    _run(git + ['commit', '-q', '-m', 'released nova'], tree)
    _run(git + ['am', '-q'] + [os.path.join(patches_dir, n) for n in names],
         tree)


def _quilt(tree, patches_dir):
    shutil.copytree(patches_dir, os.path.join(tree, 'debian', 'patches'))
    _run(['quilt', 'push', '-a', '-q'], tree,
         env={'QUILT_PATCHES': 'debian/patches'})


def check_series(series):
    """Every check of one series: ([line], passed, failed)."""
    lines = []
    counts = [0, 0]

    def check(what, func, *fargs):
        try:
            func(*fargs)
        except errors.NovaFixesError as e:
            counts[1] += 1
            lines.append('%s: %s: FAILED: %s' % (series, what, e))
        else:
            counts[0] += 1
            lines.append('%s: %s: ok' % (series, what))

    try:
        tree = sdist.released_tree(series)
    except errors.NovaFixesError as e:
        return (['%s: the released nova: FAILED: %s' % (series, e)], 0, 1)
    check('patches/%s up to date with the drop-ins' % series,
          patch.check, series, tree)
    check('nova-fixes verify', patch.verify, series, tree)
    check('each patch applies with only the patches it requires',
          patch.verify_alone, series, tree)
    patches = patch.series_patches(series)
    names = [n for n, _t in patches]
    directory = patch.patches_dir(series)
    tools = (('patch -p1', 'patch', _patch_p1, (patches,)),
             ('git am', 'git', _git_am, (directory, names)),
             ('quilt push -a', 'quilt', _quilt, (directory,)))
    for what, program, func, fargs in tools:
        if shutil.which(program) is None:
            lines.append('%s: %s: not checked (%s is not installed)'
                         % (series, what, program))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, 'nova')
            shutil.copytree(tree, copy)
            check(what, func, copy, *fargs)
    return lines, counts[0], counts[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('series', nargs='*', default=registry.SUPPORTED_SERIES)
    p.add_argument('--jobs', type=int, default=os.cpu_count() or 1,
                   help='series checked at once (default: one per CPU)')
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    try:
        for series in args.series:
            registry.check_series(series)
        if args.jobs < 1:
            raise errors.NovaFixesError(
                '--jobs %d: at least one job is needed' % args.jobs)
    except errors.NovaFixesError as e:
        print('check_patches: %s' % e)
        print('0 passed, 1 failed')
        return 1
    passed = failed = 0
    # Each series is checked in its own process (the export is CPU-bound);
    # its lines are printed together, in the order the series were named.
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for lines, p_, f_ in pool.map(check_series, args.series):
            print('\n'.join(lines))
            passed, failed = passed + p_, failed + f_
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
