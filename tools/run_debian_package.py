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

"""The regression suite on an installed Debian python3-nova package.

tools/debian_build.py runs this inside a chroot of the Debian release,
by that release's /usr/bin/python3, with Debian's test libraries and this
tree at /nova-fixes, in two phases:

--phase built
    python3-nova is the package built with the patches (its version
    carries +novafixes): the regression suite with nothing activated
    (every open-upstream scenario must pass there, the no-regression
    cases too); nova's own tests of the modules the patches touch, on the
    installed tree (Debian's build-time tests were skipped by the build's
    nocheck option); every console script of the installed nova loads,
    and nova-fixes refuses to activate drop-ins on a nova that carries
    the patches. The results are kept in --state for the next phase.
--phase archive
    python3-nova is the release's own package from Debian's archive
    (the same chroot, downgraded): nova-fixes' unit tests on it, the
    regression suite on it with nothing activated (the scenarios must be
    RECREATED: the difference is the patches) and with the drop-ins,
    every nova-fixes entry point started on it; then the recreate report
    of both packages and of the drop-ins. Prints the sum of both phases:
    "N passed, N failed, N skipped".
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TREE, os.path.join(TREE, 'tools')]

from nova_fixes import activation  # noqa: E402
from tests import recreate  # noqa: E402
from tools import run_debian  # noqa: E402
from tools import run_series  # noqa: E402

PACKAGE = '/usr/lib/python3/dist-packages/nova'
#: What marks the version of a package built by tools/debian_build.py.
MARK = '+novafixes'


class Refused(Exception):
    pass


def package_version():
    result = subprocess.run(['dpkg-query', '-W', '-f', '${Version}',
                             'python3-nova'], capture_output=True, text=True)
    if result.returncode:
        raise Refused('python3-nova is not installed: %s'
                      % result.stderr.strip())
    return result.stdout.strip()


def check_nova(phase, series):
    """(package version, nova version): refuse a nova that is not the
    package of the phase, of the series.
    """
    version = package_version()
    built = MARK in version
    if built != (phase == 'built'):
        raise Refused('phase %s, but python3-nova %s is installed (%s)'
                      % (phase, version, 'built with the patches' if built
                         else "Debian's own"))
    import nova
    where = os.path.dirname(os.path.abspath(nova.__file__))
    nova_version = activation.nova_version()
    if where != PACKAGE or activation.series_of(nova_version) != series:
        raise Refused('nova %s is imported from %s, not python3-nova\'s '
                      '%s of series %s' % (nova_version, where, PACKAGE,
                                          series))
    return version, nova_version


def dump(results):
    return {test_id: [o.status, o.traceback] for test_id, o in
            results.items()}


def load(data):
    return {test_id: recreate.Outcome(status, tb)
            for test_id, (status, tb) in data.items()}


def check_console_scripts(version):
    """Every console and WSGI script of the installed nova loads, in a
    fresh process; nova-manage says the package's nova version.
    (passed, failed) with one line per check.
    """
    code = (
        'import importlib.metadata as m, sys\n'
        'eps = [e for e in m.distribution("nova").entry_points\n'
        '       if e.group in ("console_scripts", "wsgi_scripts")]\n'
        'for e in eps:\n'
        '    e.load()\n'
        'print(len(eps), " ".join(sorted(e.name for e in eps)))\n')
    passed = failed = 0
    result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                            text=True, timeout=300)
    if result.returncode == 0 and int(result.stdout.split()[0]) > 0:
        passed += 1
        print('built package: nova\'s %s scripts load (%s)'
              % tuple(result.stdout.strip().split(' ', 1)))
    else:
        failed += 1
        print('built package: FAILED: nova\'s scripts do not load: %s'
              % (result.stdout + result.stderr).strip()[-1500:])
    result = subprocess.run(
        [sys.executable, '-c', 'import sys; from nova.cmd import manage; '
         'sys.argv[0] = "nova-manage"; sys.exit(manage.main())',
         '--version'], capture_output=True, text=True, timeout=300)
    said = (result.stdout + result.stderr).strip()
    # What nova imports may warn on stderr (eventlet's monkey patching,
    # on Debian 12): the version is what stdout says.
    if result.returncode == 0 and result.stdout.split() == [version]:
        passed += 1
        print('built package: nova-manage --version says %s' % version)
    else:
        failed += 1
        print('built package: FAILED: nova-manage --version (exit %s) said '
              '%r, expected %s' % (result.returncode, said[-500:], version))
    return passed, failed


def check_refuses_drop_ins():
    """nova-fixes check refuses the drop-ins on the patched package (the
    fixes are in nova already), patching nothing; (passed, failed).
    """
    result = subprocess.run(
        [sys.executable, '-m', 'nova_fixes.cmd.main', 'check'],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=TREE))
    said = (result.stdout + result.stderr).strip()
    if result.returncode != 0 and 'Nothing was patched' in said:
        print('built package: nova-fixes check refuses the drop-ins on it: '
              '%s' % said.splitlines()[-1][:300])
        return 1, 0
    print('built package: FAILED: nova-fixes check (exit %s) did not refuse '
          'the drop-ins on a nova with the patches: %s'
          % (result.returncode, said[-800:]))
    return 0, 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--phase', choices=('built', 'archive'), required=True)
    p.add_argument('--series', required=True)
    p.add_argument('--set', default=None,
                   help='the distribution patch set the package carries '
                        '(patches/<set>), if not patches/<series>')
    p.add_argument('--label', required=True,
                   help='the column of the recreate report (debian-13)')
    p.add_argument('--state', required=True,
                   help='where the built phase leaves its results')
    p.add_argument('--original', help="the nova tree with Debian's own "
                   'patches only (for the nova functional tests the '
                   'patches change)')
    p.add_argument('--no-nova-unit', action='store_true',
                   help="leave out nova's unit tests of the patched "
                        'modules')
    p.add_argument('--json', help='write the report rows to this file')
    p.add_argument('--concurrency', type=int, default=None)
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    start = time.time()
    try:
        version, nova_version = check_nova(args.phase, args.series)
        paste = run_debian.api_paste()
    except Refused as e:
        print('run_debian_package: %s' % e)
        print('0 passed, 1 failed')
        return 1
    os.environ['NOVA_FIXES_API_PASTE'] = paste
    os.environ['PYTHONPATH'] = TREE
    print('%s: python3-nova %s (nova %s, %s), Python %s'
          % (args.label, version, nova_version, args.phase,
             sys.version.split()[0]))
    passed = failed = skipped = 0

    def add(counts):
        nonlocal passed, failed, skipped
        passed, failed, skipped = (passed + counts[0], failed + counts[1],
                                   skipped + counts[2])

    def suite(progress=recreate.print_progress, **kwargs):
        return recreate.run_suite(concurrency=args.concurrency,
                                  progress=progress, **kwargs)

    run_debian.stestr_repository(TREE)
    test_ids = recreate.list_suite(TREE)
    kinds = recreate.scenario_kinds(TREE, test_ids)
    progress = recreate.Progress(kinds=kinds)

    if args.phase == 'built':
        patched = suite(tree=TREE, mode='patched', test_ids=test_ids,
                        progress=progress)
        add(check_console_scripts(nova_version) + (0,))
        add(check_refuses_drop_ins() + (0,))
        # nova's own tests of the patched modules, on a copy of the
        # installed tree (nova's test configuration reads
        # <tree>/etc/nova/api-paste.ini).
        work = tempfile.mkdtemp(prefix='nova-fixes-package-')
        nova_tree = os.path.join(work, 'nova-%s' % nova_version)
        try:
            shutil.copytree(PACKAGE, os.path.join(nova_tree, 'nova'),
                            ignore=shutil.ignore_patterns('__pycache__'))
            os.makedirs(os.path.join(nova_tree, 'etc', 'nova'))
            shutil.copy(paste, os.path.join(nova_tree, 'etc', 'nova',
                                            'api-paste.ini'))
            run_debian.stestr_repository(nova_tree)
            for _kind, name, results in run_series.nova_tests(
                    args.series, nova_tree, {'PYTHONPATH': os.pathsep.join(
                        (nova_tree, TREE))},
                    not args.no_nova_unit, suite, original=args.original,
                    name=args.set):
                add(recreate.count(name, results))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        with open(args.state, 'w') as f:
            json.dump({'version': version, 'patched': dump(patched),
                       'counts': [passed, failed, skipped]}, f)
        print('%s: the built package\'s phase took %d s'
              % (args.label, time.time() - start))
        print('%d passed, %d failed, %d skipped' % (passed, failed,
                                                    skipped))
        return 1 if failed else 0

    try:
        with open(args.state) as f:
            built = json.load(f)
    except (OSError, ValueError) as e:
        print('run_debian_package: no results of the built package\'s '
              'phase in %s (%s)' % (args.state, e))
        print('0 passed, 1 failed')
        return 1

    add(recreate.count("nova-fixes' unit tests on Debian's nova",
                       suite(tree=TREE, mode='dropin', test_path='tests/unit',
                             progress=recreate.Progress(label='unit'))))
    vanilla = suite(tree=TREE, mode='vanilla', test_ids=test_ids,
                    progress=progress)
    without = recreate.run_without_upstream_fixes(
        TREE, vanilla, concurrency=args.concurrency, progress=progress)
    dropin = suite(tree=TREE, mode='dropin', test_ids=test_ids,
                   progress=progress)
    reports = {}
    for label, mode, fixed in (
            ('drop-ins', 'dropin', dropin),
            ('package %s' % built['version'], 'patched',
             load(built['patched']))):
        rows = recreate.build_rows(TREE, vanilla, fixed, without,
                                   fixed_mode=mode, kinds=kinds)
        print(recreate.format_table(rows, fixed_label=label))
        print()
        bad = recreate.summarize('%s recreate report, %s' % (args.label,
                                                             label),
                                 rows, fixed_label=label)
        add((len(rows) - len(bad), len(bad), 0))
        reports[mode] = rows
    entry = run_series.check_entry_points.run_fresh_checker(progress=print)
    add((entry.passed, entry.failed, entry.skipped))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'series': args.label, 'nova': nova_version,
                       'package': version, 'built': built['version'],
                       'rows': reports['patched'],
                       'dropin_rows': reports['dropin'],
                       'entry_points': entry.results}, f, indent=2)
    print('%s: Debian\'s own package\'s phase took %d s'
          % (args.label, time.time() - start))
    # Both phases: the built package's counts were kept in its state.
    add(built['counts'])
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
