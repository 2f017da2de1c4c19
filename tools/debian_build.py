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

"""Build Debian's nova packages with the patches, install them, prove them.

``tox -e debian-build -- RELEASE`` (bookworm or trixie), as root, with
debootstrap, dpkg-dev and quilt on the machine:

1. source: Debian's nova source package of the release, as
   tools/check_debian_quilt.py takes it (apt-get source with an apt
   configuration of its own, dpkg-source -x);
2. patches: the release's patch set (patches/2022.2 for bookworm,
   patches/debian-13 for trixie), each checked for its DEP-3 headers,
   copied into debian/patches and appended to Debian's series file, then
   the whole stack pushed with quilt, no fuzz;
3. changelog: an entry whose version is Debian's with +novafixes1
   appended (2:31.0.0-6+deb13u2+novafixes1), naming every patch added;
4. chroot: a debootstrap --variant=minbase chroot of the release, made
   once and reused from ~/.cache/nova-fixes/chroots/RELEASE (it is never
   changed: each build and each test runs in a fresh copy of it);
5. build: in a copy of that chroot, apt-get build-dep of the tree, then
   dpkg-buildpackage -b -us -uc with DEB_BUILD_OPTIONS and
   DEB_BUILD_PROFILES "nocheck nodoc": Debian's build-time unit tests
   and the HTML and man page docs are skipped (nova's unit tests of the
   patched modules run in 7 instead, and the docs are not touched by the
   patches);
6. install: in another fresh copy, apt-get install of the built
   python3-nova and the test libraries (dependencies from Debian's
   archive); dpkg -s python3-nova must show the new version;
7. built package: tools/run_debian_package.py --phase built in the
   chroot, by the release's python3: the regression suite with nothing
   activated, nova's own tests of the patched modules, nova's scripts;
8. Debian's package: python3-nova downgraded to the archive's version in
   the same chroot, dpkg -s checked, then --phase archive: the suite on
   it (RECREATED), with the drop-ins, the entry points, the reports.

Prints each step's time, the versions built and the patches added, and
as its last line "N passed, N failed" (the sum of every check).
"""

import argparse
import email.utils
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TREE, os.path.join(TREE, 'tools')]

import check_debian_quilt  # noqa: E402
from nova_fixes.export import patch  # noqa: E402
from nova_fixes.export import sdist  # noqa: E402

#: codename -> (label, suites, series, patch set), from the quilt check.
RELEASES = {suites[0]: (label, suites, series, patch_set)
            for label, suites, series, patch_set
            in check_debian_quilt.RELEASES}
#: The test libraries installed beside python3-nova (those of tox -e
#: debian; python3-distutils is gone from Debian 13), and pip, its build
#: tools and git: the entry point check pip-installs a copy of nova-fixes,
#: which pbr builds from the git checkout with Debian's setuptools and
#: wheel, reaching no index (tools/check_entry_points.py, install_copy).
TEST_PACKAGES = (
    'python3-placement python3-oslotest python3-stestr python3-testtools '
    'python3-fixtures python3-ddt python3-requests-mock '
    'python3-wsgi-intercept python3-testscenarios python3-osprofiler '
    'python3-subunit python3-ironicclient python3-pycodestyle '
    'python3-hacking python3-venv python3-pip python3-wheel '
    'python3-setuptools python3-pbr git').split()
#: What a changelog entry's version appends to Debian's.
SUFFIX = '+novafixes1'
#: DEP-3 fields every added patch must have (either name of a pair).
DEP3 = (('Description', 'Subject'), ('Origin', 'From', 'Author'),
        ('Bug', 'Forwarded'), ('Last-Update',))
BUILD_OPTIONS = 'nocheck nodoc'
#: Bounds of the steps that run in the chroot (seconds).
TIMEOUTS = {'apt': 1800, 'build': 1800, 'suite': 3600}
MAINTAINER = 'nova-fixes <nova-fixes@invalid>'


class BuildFailed(Exception):
    pass


def run(cmd, cwd=None, env=None, timeout=1800, echo=False):
    """Run cmd; its output (printed as it comes when ``echo``)."""
    full_env = dict(os.environ, **(env or {}))
    if not echo:
        try:
            result = subprocess.run(cmd, cwd=cwd, env=full_env,
                                    capture_output=True, text=True,
                                    timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BuildFailed('%s: not done in %d s' % (' '.join(cmd),
                                                        timeout))
        if result.returncode:
            raise BuildFailed('%s (exit %d): %s' % (
                ' '.join(cmd), result.returncode,
                (result.stdout + result.stderr).strip()[-2000:]))
        return result.stdout + result.stderr
    # A session of its own: at the deadline the whole process group
    # (the runner and its test workers in the chroot) is killed, even
    # while it prints nothing.
    proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    killed = []

    def kill():
        killed.append(True)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.start()
    lines = []
    try:
        for line in proc.stdout:
            print(line, end='')
            lines.append(line)
        status = proc.wait()
    finally:
        timer.cancel()
    if killed:
        lines.append('%s: killed after %d s\n' % (' '.join(cmd[:3]),
                                                   timeout))
        print(lines[-1], end='')
    return status, ''.join(lines)


def dep3_problems(text):
    """The DEP-3 fields a patch's header lacks."""
    header = text.split('\n---\n', 1)[0]
    fields = set(re.findall(r'^([A-Za-z][A-Za-z-]*):', header, re.M))
    return ['/'.join(names) for names in DEP3
            if not fields.intersection(names)]


def add_changelog_entry(tree, version, codename, patches):
    """Prepend the entry of the patched build; its version."""
    path = os.path.join(tree, 'debian', 'changelog')
    with open(path, encoding='utf-8') as f:
        old = f.read()
    first = old.splitlines()[0]
    match = re.match(r'^nova \(([^)]+)\) ', first)
    if not match or match.group(1) != version:
        raise BuildFailed('debian/changelog starts with %r, not nova %s'
                          % (first, version))
    new = version + SUFFIX
    items = ''.join(
        textwrap.fill('%s: %s' % (name, subject), width=76,
                      initial_indent='    - ', subsequent_indent='      ') +
        '\n' for name, subject in patches)
    entry = ('nova (%s) %s; urgency=medium\n\n'
             '  * Add the patches of nova-fixes for this release, each\n'
             '    with its DEP-3 header (debian/patches):\n'
             '%s\n -- %s  %s\n\n'
             % (new, codename, items, MAINTAINER,
                email.utils.formatdate(localtime=True)))
    with open(path, 'w', encoding='utf-8') as f:
        f.write(entry + old)
    return new


class Chroot(object):
    """A fresh copy of the release's base chroot, with /proc mounted."""

    def __init__(self, base, where):
        self.root = where
        shutil.rmtree(where, ignore_errors=True)
        run(['cp', '-a', base, where])
        self.mounts = []
        try:
            for path, args in (('proc', ['-t', 'proc', 'proc']),
                               ('dev/shm', ['-t', 'tmpfs', 'shm'])):
                target = os.path.join(where, path)
                os.makedirs(target, exist_ok=True)
                run(['mount'] + args + [target])
                self.mounts.append(target)
        except BaseException:
            self.close()
            raise

    def run(self, script, timeout=600, echo=False, env=None):
        env = dict({'DEBIAN_FRONTEND': 'noninteractive', 'LC_ALL': 'C.UTF-8',
                    'HOME': '/root', 'PATH': '/usr/sbin:/usr/bin:/sbin:/bin'},
                   **(env or {}))
        cmd = ['chroot', self.root, 'env', '-i'] + [
            '%s=%s' % item for item in sorted(env.items())] + [
            'sh', '-ec', script]
        return run(cmd, timeout=timeout, echo=echo)

    def close(self, keep=False):
        for target in reversed(self.mounts):
            subprocess.run(['umount', '-l', target], capture_output=True)
        self.mounts = []
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)


def base_chroot(codename, suites, uris):
    """The release's base chroot, made once with debootstrap."""
    where = os.path.join(sdist.cache_dir(), 'chroots', codename)
    done = os.path.join(where, '.nova-fixes-base')
    if os.path.isfile(done):
        return where, False
    shutil.rmtree(where, ignore_errors=True)
    os.makedirs(os.path.dirname(where), exist_ok=True)
    run(['debootstrap', '--variant=minbase', codename, where,
         uris['debian']], timeout=TIMEOUTS['apt'])
    with open(os.path.join(where, 'etc', 'apt', 'sources.list'), 'w') as f:
        for suite in suites:
            f.write('deb %s %s main\n' % (
                uris['debian-security' if suite.endswith('-security')
                     else 'debian'], suite))
    with open(done, 'w') as f:
        f.write('%s\n' % time.strftime('%Y-%m-%d %H:%M:%S'))
    return where, True


def project_copy(target):
    """This tree, without its environments, caches and results (its git
    directory is kept: pbr builds nova-fixes from it).
    """
    top = {'.tox', 'build', '.stestr', '.ci'}

    def ignore(directory, names):
        return [n for n in names if n == '__pycache__' or
                n.endswith('.egg-info') or
                (os.path.samefile(directory, TREE) and n in top)]
    shutil.copytree(TREE, target, ignore=ignore)


class Build(object):
    """One release's build and proof; each step a method, timed."""

    def __init__(self, release, work, no_nova_unit):
        self.release = release
        self.label, self.suites, self.series, self.patch_set = (
            RELEASES[release])
        self.name = None if self.patch_set == self.series else \
            self.patch_set
        self.tag = 'debian-build (%s)' % release
        self.work = work
        self.no_nova_unit = no_nova_unit
        self.passed = self.failed = self.skipped = 0
        self.times = []
        self.step_start = time.time()

    def say(self, text):
        print('%s: %s' % (self.tag, text))

    def timed(self, name):
        self.times.append((name, time.time() - self.step_start))
        self.say('%s took %d s' % (name, self.times[-1][1]))
        self.step_start = time.time()

    def source(self):
        """1. Debian's source package: (version, tree)."""
        self.uris = check_debian_quilt.archive_uris()
        apt = check_debian_quilt.Apt(os.path.join(self.work, 'apt'),
                                     self.uris)
        apt.update()
        where = os.path.join(self.work, 'source')
        shutil.rmtree(where, ignore_errors=True)
        os.makedirs(where)
        version, tree, not_served = apt.source(
            apt.source_versions(self.suites), where, self.series)
        for line in not_served:
            self.say(line)
        self.say("%s, Debian's nova source %s (series %s, patches/%s)"
                 % (self.label, version, self.series, self.patch_set))
        self.timed('source')
        return version, tree

    def patches(self, version, tree):
        """2, 3. The patches on Debian's stack, the changelog entry: (the
        new version, the tree with Debian's patches only).
        """
        ours = patch.series_patches(self.series, name=self.name)
        problems = ['%s lacks %s' % (n, ', '.join(dep3_problems(text)))
                    for n, text in ours if dep3_problems(text)]
        if problems:
            raise BuildFailed('not DEP-3: ' + '; '.join(problems))
        original = os.path.join(self.work, 'original')
        shutil.rmtree(original, ignore_errors=True)
        shutil.copytree(tree, original, symlinks=True)
        run(['quilt', 'push', '-a', '-q'], cwd=original,
            env={'QUILT_PATCHES': 'debian/patches', 'QUILT_PC': '.pc'})
        debian, _added, offsets = check_debian_quilt.quilt_on_debian(
            tree, self.series, self.patch_set)
        subjects = []
        for n, text in ours:
            found = re.search(r'^Subject: (?:\[PATCH[^]]*\] )?(.*)$', text,
                              re.M)
            subjects.append((n, found.group(1) if found else n))
        self.say("patches added after Debian's %d (quilt push -a, no "
                 'fuzz%s):' % (len(debian), '; offsets in ' + ', '.join(
                     sorted(offsets)) if offsets else ''))
        for n, _subject in subjects:
            self.say('  ' + n)
        new_version = add_changelog_entry(tree, version, self.release,
                                          subjects)
        self.say('changelog entry %s' % new_version)
        self.passed += 1
        self.timed('patches')
        return new_version, original

    def build(self, base, tree, new_version):
        """5. dpkg-buildpackage in a fresh chroot: the .debs' directory
        and the two this proof installs.
        """
        build = Chroot(base, os.path.join(self.work, 'build-root'))
        try:
            shutil.copytree(tree, os.path.join(build.root, 'build', 'nova'),
                            symlinks=True)
            build.run('apt-get update -q && apt-get build-dep -y -q '
                      '--no-install-recommends /build/nova',
                      TIMEOUTS['apt'])
            self.timed('build-dep')
            build.run('cd /build/nova && dpkg-buildpackage -b -us -uc',
                      TIMEOUTS['build'], env={
                          'DEB_BUILD_OPTIONS': BUILD_OPTIONS,
                          'DEB_BUILD_PROFILES': BUILD_OPTIONS})
            debs = os.path.join(self.work, 'debs')
            shutil.rmtree(debs, ignore_errors=True)
            os.makedirs(debs)
            for deb in glob.glob(os.path.join(build.root, 'build',
                                              '*.deb')):
                shutil.copy(deb, debs)
        finally:
            build.close(keep=False)
        built = sorted(os.listdir(debs))
        plain = new_version.split(':')[-1]
        wanted = ['python3-nova_%s_all.deb' % plain,
                  'nova-common_%s_all.deb' % plain]
        if not set(wanted) <= set(built):
            raise BuildFailed('dpkg-buildpackage built %s, not %s'
                              % (', '.join(built) or 'nothing',
                                 ', '.join(wanted)))
        self.say('built %s: %s' % (new_version, ', '.join(
            d.split('_')[0] for d in built)))
        self.passed += 1
        self.timed('build')
        return debs, wanted

    def install(self, test, debs, wanted, original, new_version):
        """6. The built python3-nova in a clean chroot."""
        for deb in wanted:
            shutil.copy(os.path.join(debs, deb),
                        os.path.join(test.root, 'tmp'))
        project_copy(os.path.join(test.root, 'nova-fixes'))
        shutil.copytree(os.path.join(original, 'nova'),
                        os.path.join(test.root, 'original', 'nova'))
        run(['dpkg-deb', '-x', os.path.join(debs, wanted[1]),
             os.path.join(test.root, 'built-nova-common')])
        test.run('apt-get update -q && apt-get install -y -q '
                 '--no-install-recommends /tmp/%s %s'
                 % (wanted[0], ' '.join(TEST_PACKAGES)), TIMEOUTS['apt'])
        self.check_version(test, new_version, 'installed in a clean %s '
                           'chroot' % self.label)
        self.timed('install')

    def check_version(self, test, version, what):
        shown = test.run('dpkg -s python3-nova')
        if 'Version: %s\n' % version not in shown:
            raise BuildFailed('%s, but dpkg -s python3-nova says: %s'
                              % (what, shown[-600:]))
        self.say('%s; dpkg -s python3-nova: Version: %s' % (what, version))
        self.passed += 1

    def prove(self, test, version):
        """7, 8. The suites on the built package, then on Debian's."""
        runner = ('cd /nova-fixes && python3 tools/run_debian_package.py '
                  '--series %s --label %s --state /tmp/built.json %s'
                  % (self.series, self.name or 'debian-12',
                     '--set %s' % self.name if self.name else ''))
        test.run(runner + ' --phase built --original /original %s'
                 % ('--no-nova-unit' if self.no_nova_unit else ''),
                 TIMEOUTS['suite'], echo=True, env={
                     'NOVA_FIXES_API_PASTE':
                         '/built-nova-common/usr/share/nova-common/'
                         'api-paste.ini'})
        self.timed('built package')
        # Debian's binary of the source version built, or, where the
        # archive no longer serves it, the release's newest.
        served = re.findall(r'^\s*python3-nova \|\s*(\S+)\s*\|',
                            test.run('apt-cache madison python3-nova'),
                            re.M)
        if not served:
            raise BuildFailed("the archive serves no python3-nova for %s"
                              % self.release)
        archive = version if version in served else served[0]
        if archive != version:
            self.say("the archive no longer serves python3-nova %s: "
                     "Debian's %s stands in for it" % (version, archive))
        test.run('apt-get install -y -q --no-install-recommends '
                 '--allow-downgrades python3-nova=%s' % archive,
                 TIMEOUTS['apt'])
        self.check_version(test, archive, "python3-nova replaced by "
                           "Debian's own")
        status, out = test.run(runner + ' --phase archive --json '
                               '/tmp/report.json', TIMEOUTS['suite'],
                               echo=True)
        counts = re.findall(r'^(\d+) passed, (\d+) failed, (\d+) '
                            r'skipped$', out, re.M)
        if not counts:
            raise BuildFailed('the suites in the chroot ended without '
                              'their count (exit %s)' % status)
        self.passed += int(counts[-1][0])
        self.failed += int(counts[-1][1])
        self.skipped += int(counts[-1][2])
        self.timed("Debian's package")

    def run(self, report=None):
        test = None
        try:
            version, tree = self.source()
            new_version, original = self.patches(version, tree)
            base, made = base_chroot(self.release, self.suites, self.uris)
            self.say('base chroot %s (%s)' % (base, 'made with debootstrap'
                                              if made else 'reused'))
            self.timed('chroot')
            debs, wanted = self.build(base, tree, new_version)
            test = Chroot(base, os.path.join(self.work, 'test-root'))
            self.install(test, debs, wanted, original, new_version)
            self.prove(test, version)
            found = os.path.join(test.root, 'tmp', 'report.json')
            if report and os.path.isfile(found):
                shutil.copy(found, report)
        except (BuildFailed, check_debian_quilt.CheckFailed) as e:
            self.failed += 1
            self.say('FAILED: %s' % e)
        finally:
            if test is not None:
                test.close()
        return self.failed == 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('release', help='the Debian release: %s' % ', '.join(
        '%s (%s)' % (name, RELEASES[name][0]) for name in RELEASES))
    p.add_argument('--work', help='keep the sources and the packages here '
                                  '(default: a temporary directory, '
                                  'removed after)')
    p.add_argument('--no-nova-unit', action='store_true',
                   help="leave out nova's unit tests of the patched "
                        'modules on the built package')
    p.add_argument('--json', help='write the recreate report rows here')
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    if args.release not in RELEASES:
        print('debian-build: unknown release %r; one of: %s'
              % (args.release, ', '.join(sorted(RELEASES))))
        print('0 passed, 1 failed')
        return 2
    missing = [prog for prog in ('debootstrap', 'dpkg-source', 'quilt',
                                 'chroot', 'mount')
               if shutil.which(prog) is None]
    if missing or os.geteuid() != 0:
        print('debian-build: needs root and %s (apt-get install '
              'debootstrap dpkg-dev quilt)'
              % (', '.join(missing) or 'is not root'))
        print('0 passed, 1 failed')
        return 1
    started = time.time()
    work = args.work or tempfile.mkdtemp(prefix='nova-fixes-debian-build-')
    os.makedirs(work, exist_ok=True)
    build = Build(args.release, work, args.no_nova_unit)
    try:
        build.run(args.json)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    for step, seconds in build.times:
        build.say('%-16s %5d s' % (step, seconds))
    build.say('%d s in all' % (time.time() - started))
    print('%d passed, %d failed, %d skipped' % (build.passed, build.failed,
                                                build.skipped))
    return 1 if build.failed else 0


if __name__ == '__main__':
    sys.exit(main())
