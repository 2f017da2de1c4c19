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

"""The regression suite on Debian 12's packaged nova (series 2022.2).

Run by Debian's /usr/bin/python3 with Debian's packages installed
(python3-nova, python3-placement and the test libraries, see README.rst,
Debian packagers) and nova-fixes beside them (this tree on PYTHONPATH):

0. nova-fixes' unit tests on the packaged nova (among them: the recorded
   fingerprints are those of the installed originals);
1. the functional regression suite on the packaged nova with nothing
   activated (vanilla) and with the drop-ins (dropin): the recreate
   report's 2022.2 column, every open-upstream scenario RECREATED on its
   leak assertion on vanilla and passing with the drop-ins;
2. patches/2022.2 applied with ``patch -p1 --fuzz=0`` to a copy of the
   package's tree (/usr/lib/python3/dist-packages/nova): the patched
   nova, imported ahead of the package by the test processes of 3 and 4;
3. the regression suite on the patched copy, nothing activated;
4. nova's own unit tests of every module the patches touch, and the
   nova functional tests they add, on the patched copy;
5. every nova-fixes entry point started in a fresh process on the
   packaged nova, with the drop-ins (tools/check_entry_points.py: nova's
   nova-manage is run as ``python3 -c`` of its main(), which Debian
   ships in nova-common).

nova's API test fixtures read api-paste.ini, which python3-nova does not
ship: it is taken from Debian's nova-common (installed, or downloaded with
``apt-get download`` and unpacked, never installed), unless
$NOVA_FIXES_API_PASTE names one, and put where nova's own tests look for
it in the patched copy (<tree>/etc/nova). Prints one "N passed, N failed" line.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# tools/run_series.py imports its neighbours as top-level modules.
sys.path[:0] = [TREE, os.path.join(TREE, 'tools')]

from nova_fixes import activation  # noqa: E402
from nova_fixes.export import patch  # noqa: E402
from nova_fixes.export import sdist  # noqa: E402
from tests import recreate  # noqa: E402
from tools import run_series  # noqa: E402

SERIES = '2022.2'
#: Debian 12's nova: the release and where python3-nova installs it.
DEBIAN_NOVA = ('26.2.2', '/usr/lib/python3/dist-packages/nova')
NOVA_COMMON_PASTE = '/usr/share/nova-common/api-paste.ini'
#: nova's own test runs use eventlet, as nova's tox py3 env does.


class Refused(Exception):
    pass


def check_debian_nova():
    """Refuse anything but Debian 12's packaged nova on /usr/bin/python3."""
    import nova
    version = activation.nova_version()
    where = os.path.dirname(os.path.abspath(nova.__file__))
    if (version, where) != DEBIAN_NOVA:
        raise Refused('nova %s from %s is imported, not Debian 12\'s '
                      'python3-nova (nova %s in %s); run this with '
                      '/usr/bin/python3 and no virtualenv nova'
                      % ((version, where) + DEBIAN_NOVA))
    return version, where


def api_paste():
    """Debian's api-paste.ini (nova-common), downloaded if not installed."""
    if os.environ.get('NOVA_FIXES_API_PASTE'):
        return os.environ['NOVA_FIXES_API_PASTE']
    if os.path.isfile(NOVA_COMMON_PASTE):
        return NOVA_COMMON_PASTE
    where = os.path.join(sdist.cache_dir(), 'debian-nova-common')
    found = os.path.join(where, NOVA_COMMON_PASTE.lstrip('/'))
    if os.path.isfile(found):
        return found
    os.makedirs(where, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        # _apt cannot write into root's directories: let apt say nothing
        # about downloading unsandboxed.
        result = subprocess.run(
            ['apt-get', '-q', '-o', 'APT::Sandbox::User=root', 'download',
             'nova-common'], cwd=tmp, capture_output=True, text=True)
        debs = glob.glob(os.path.join(tmp, 'nova-common_*.deb'))
        if result.returncode or len(debs) != 1:
            raise Refused('could not download Debian\'s nova-common for '
                          'its api-paste.ini: %s' % (result.stdout +
                                                     result.stderr).strip())
        subprocess.run(['dpkg-deb', '-x', debs[0], where], check=True)
    return found


def stestr_repository(tree):
    """Debian's stestr (3.2.1) lists tests only in a tree that has a
    repository (newer ones do without): create an empty one if missing.
    """
    if not os.path.isdir(os.path.join(tree, '.stestr')):
        subprocess.run([sys.executable, '-m', 'stestr', 'init'], cwd=tree,
                       check=True, capture_output=True)


def package_part(text):
    """A patch's diffs of the files of the nova package (nova/...): the
    package's tree has no doc/ nor releasenotes/, which a change's diffs
    of nova's guide (an existing page's toctree) cannot find.
    """
    head, sep, rest = text.partition('\ndiff --git ')
    if not sep:
        return text
    kept = [head + '\n']
    for part in ('diff --git ' + rest).split('\ndiff --git '):
        if not part.startswith('diff --git '):
            part = 'diff --git ' + part
        if part.startswith('diff --git a/nova/'):
            kept.append(part.rstrip('\n') + '\n')
    return ''.join(kept)


def apply_patches(nova_tree):
    """patches/2022.2 on the copy, as a packager would: no fuzz. Only
    their diffs of the nova package (package_part).
    """
    names = [name for name, _text in patch.series_patches(SERIES)]
    for name in names:
        with open(os.path.join(patch.patches_dir(SERIES), name),
                  encoding='utf-8') as f:
            part = package_part(f.read())
        if '\ndiff --git ' not in part:
            continue  # nothing of the package (a documentation change)
        result = subprocess.run(
            ['patch', '-p1', '--fuzz=0', '--forward', '--batch'],
            cwd=nova_tree, input=part, capture_output=True, text=True)
        if result.returncode:
            raise Refused('%s does not apply to the package\'s tree: %s'
                          % (name, result.stdout + result.stderr))
    return names


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--no-nova-unit', action='store_true',
                   help="leave out nova's unit tests (step 4)")
    p.add_argument('--filter', action='append', default=[],
                   help='regular expression of the regression tests to '
                        'run (stestr filter; repeatable)')
    p.add_argument('--concurrency', type=int, default=None)
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    start = time.time()
    try:
        version, package = check_debian_nova()
        paste = api_paste()
    except Refused as e:
        print('run_debian: %s' % e)
        print('0 passed, 1 failed')
        return 1
    os.environ['NOVA_FIXES_API_PASTE'] = paste
    os.environ['PYTHONPATH'] = os.pathsep.join(
        filter(None, (TREE, os.environ.get('PYTHONPATH'))))
    print('Debian 12 nova %s (%s), api-paste.ini from %s'
          % (version, package, paste))
    passed = failed = skipped = 0

    def add(counts):
        nonlocal passed, failed, skipped
        passed, failed, skipped = (passed + counts[0], failed + counts[1],
                                   skipped + counts[2])

    def suite(progress=recreate.print_progress, **kwargs):
        return recreate.run_suite(concurrency=args.concurrency,
                                  progress=progress, **kwargs)

    def report(label, vanilla, fixed, without, fixed_mode):
        rows = recreate.build_rows(TREE, vanilla, fixed, without,
                                   fixed_mode=fixed_mode, kinds=kinds)
        print(recreate.format_table(rows, fixed_label=label))
        print()
        bad = recreate.summarize('%s recreate report, %s' % (SERIES, label),
                                 rows, fixed_label=label)
        add((len(rows) - len(bad), len(bad), 0))

    stestr_repository(TREE)

    # 0. nova-fixes' unit tests on the packaged nova.
    add(recreate.count("nova-fixes' unit tests on Debian's nova",
                       suite(tree=TREE, mode='dropin', test_path='tests/unit',
                             progress=recreate.Progress(label='unit'))))

    # 1. vanilla and the drop-ins on the packaged nova.
    test_ids = recreate.list_suite(TREE, filters=args.filter)
    kinds = recreate.scenario_kinds(TREE, test_ids)
    progress = recreate.Progress(kinds=kinds)
    vanilla = suite(tree=TREE, mode='vanilla', test_ids=test_ids,
                    progress=progress)
    without = recreate.run_without_upstream_fixes(
        TREE, vanilla, concurrency=args.concurrency, progress=progress)
    dropin = suite(tree=TREE, mode='dropin', test_ids=test_ids,
                   progress=progress)
    report('drop-ins', vanilla, dropin, without, 'dropin')

    # 2. the patched copy of the package's tree.
    work = tempfile.mkdtemp(prefix='nova-fixes-debian12-')
    nova_tree = os.path.join(work, 'nova-%s' % version)
    try:
        shutil.copytree(package, os.path.join(nova_tree, 'nova'),
                        ignore=shutil.ignore_patterns('__pycache__'))
        # Where nova's own test configuration looks: <tree>/etc/nova.
        os.makedirs(os.path.join(nova_tree, 'etc', 'nova'))
        shutil.copy(paste, os.path.join(nova_tree, 'etc', 'nova',
                                        'api-paste.ini'))
        stestr_repository(nova_tree)
        try:
            names = apply_patches(nova_tree)
        except Refused as e:
            print('run_debian: %s' % e)
            failed += 1
        else:
            print('%s: applied %s to a copy of %s, no fuzz'
                  % (SERIES, ', '.join(names), package))
            passed += 1
            patched_env = {'PYTHONPATH': os.pathsep.join(
                (nova_tree, os.environ['PYTHONPATH']))}
            # 3. the regression suite on the patched nova.
            patched = suite(tree=TREE, mode='patched', test_ids=test_ids,
                            extra_env=patched_env, progress=progress)
            report('patched', vanilla, patched, without, 'patched')
            # 4. nova's own tests on the patched tree.
            for _kind, name, results in run_series.nova_tests(
                    SERIES, nova_tree, patched_env, not args.no_nova_unit,
                    suite, original=os.path.dirname(package)):
                add(recreate.count(name, results))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # 5. every entry point in a fresh process, on the packaged nova with
    # the drop-ins.
    entry = run_series.check_entry_points.run_fresh_checker(progress=print)
    add((entry.passed, entry.failed, entry.skipped))
    print('Debian 12 (%s) took %d s' % (SERIES, time.time() - start))
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
