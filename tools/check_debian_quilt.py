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

"""Check patches/<series> on top of Debian's own nova source packages.

What a Debian packager does, for each Debian release that ships nova:

1. ``apt-get source nova`` (the newest version that release's suites
   list and the archive serves: a listed version whose source is missing
   is named, and the next one down is used) and unpack it with
   ``dpkg-source -x``: upstream's nova plus Debian's ``debian/patches``;
2. ``quilt push -a``: Debian's own patch stack;
3. copy ``patches/<series>/*.patch`` into ``debian/patches``, append
   their names to Debian's ``series`` file, and ``quilt push -a`` again
   with ``--fuzz=0``: every patch must apply without fuzz (offsets are
   reported, not refused).

apt runs with a configuration of its own in the work directory (deb-src
lines for the same archives as the machine's binary sources, lists of its
own), so the machine's apt setup is left as it is. Needs apt-get,
dpkg-source (dpkg-dev) and quilt. Prints one "N passed, N failed" line.
"""

import argparse
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

from nova_fixes import errors
from nova_fixes.export import patch
from nova_fixes.export import sdist
from nova_fixes import fingerprint
from nova_fixes import fixes
from nova_fixes import registry

#: (Debian release, its suites, the nova-fixes series of the nova it
#: ships, the patch set a packager of it takes: patches/<set>). Debian 12
#: ships nova 26.2.2, the release patches/2022.2 is made for; Debian 13
#: ships 31.0.0, not the 31.3.1 of patches/2025.1, whose unit tests differ
#: where the patches adjust them: patches/debian-13 is made from Debian's
#: own tree (registry.DISTRIBUTION_SETS), and checked to be up to date
#: with the drop-ins on it here.
RELEASES = (
    ('Debian 12', ('bookworm', 'bookworm-updates', 'bookworm-security'),
     '2022.2', '2022.2'),
    ('Debian 13', ('trixie', 'trixie-updates', 'trixie-security'),
     '2025.1', 'debian-13'),
)
SOURCES = ('/etc/apt/sources.list', '/etc/apt/sources.list.d')
KEYRING = '/usr/share/keyrings/debian-archive-keyring.gpg'


class CheckFailed(Exception):
    pass


def _run(cmd, cwd=None, env=None):
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                            env=dict(os.environ, **(env or {})))
    if result.returncode:
        raise CheckFailed('%s: %s' % (' '.join(cmd), (
            result.stdout + result.stderr).strip()[-1200:]))
    return result.stdout + result.stderr


def archive_uris():
    """{'debian': uri, 'debian-security': uri} of the machine's sources."""
    lines = []
    for path in [SOURCES[0]] + sorted(glob.glob(SOURCES[1] + '/*')):
        if path.endswith(('.list', '.sources')) or path == SOURCES[0]:
            if os.path.isfile(path):
                with open(path, encoding='utf-8') as f:
                    lines += f.read().splitlines()
    uris = {}
    for line in lines:
        line = line.split('#')[0]
        found = re.findall(r'(?:^URIs:\s*|^deb(?:-src)?\s+(?:\[[^]]*\]\s+)?)'
                           r'(\S+)', line)
        for uri in found:
            key = ('debian-security' if uri.rstrip('/').endswith(
                'debian-security') else 'debian')
            uris.setdefault(key, uri.rstrip('/'))
    if 'debian' not in uris:
        raise CheckFailed('no Debian archive in the apt sources (%s)'
                          % ', '.join(SOURCES))
    uris.setdefault('debian-security', uris['debian'] + '-security')
    return uris


class Apt(object):
    """apt-get with deb-src lines and lists of its own under ``root``."""

    def __init__(self, root, uris):
        self.root = root
        lists = os.path.join(root, 'lists')
        os.makedirs(os.path.join(lists, 'partial'), exist_ok=True)
        sources = os.path.join(root, 'sources.list')
        with open(sources, 'w', encoding='utf-8') as f:
            for _label, suites, _series, _set in RELEASES:
                for suite in suites:
                    uri = uris['debian-security' if suite.endswith(
                        '-security') else 'debian']
                    f.write('deb-src [signed-by=%s] %s %s main\n'
                            % (KEYRING, uri, suite))
        self.options = [
            '-o', 'Dir::Etc::SourceList=%s' % sources,
            '-o', 'Dir::Etc::SourceParts=%s' % os.path.join(root, 'parts'),
            '-o', 'Dir::State::Lists=%s' % lists,
            '-o', 'Dir::Cache=%s' % os.path.join(root, 'cache'),
            '-o', 'Debug::NoLocking=1',
        ]
        os.makedirs(os.path.join(root, 'parts'), exist_ok=True)
        os.makedirs(os.path.join(root, 'cache', 'archives', 'partial'),
                    exist_ok=True)

    def update(self):
        _run(['apt-get', '-q'] + self.options + ['update'])

    def source_versions(self, suites):
        """The versions of source nova the suites list, newest first."""
        out = _run(['apt-cache'] + self.options + ['showsrc', 'nova'])
        versions = set()
        for record in out.split('\n\n'):
            fields = dict(re.findall(r'^(Package|Version):\s*(\S+)', record,
                                     re.M))
            if fields.get('Package') == 'nova' and 'Version' in fields:
                versions.add(fields['Version'])
        mine = [v for v in versions if self._in_suites(v, suites[0])]
        if not mine:
            raise CheckFailed('no nova source in %s' % ', '.join(suites))
        return sorted(mine, key=functools.cmp_to_key(_compare),
                      reverse=True)

    @staticmethod
    def _in_suites(version, codename):
        # Debian's stable updates carry ~debNNuM; the release's own
        # version has none. Tell the releases apart by the upstream major
        # (nova 26 in bookworm, 31 in trixie).
        major = int(version.split(':')[-1].split('.')[0])
        return {'bookworm': 26, 'trixie': 31}[codename] == major

    def source(self, versions, where, series):
        """Download and unpack the newest of ``versions`` that the archive
        serves: (version, tree, [what of the newer ones is not served]).

        When only the upstream tarball of a version is missing (its .dsc
        and debian tarball are served), upstream's release sdist of the
        series (from PyPI, what nova-fixes exports against) stands in for
        it, if it is the same upstream version.
        """
        not_served = []
        for version in versions:
            try:
                _run(['apt-get', '-q', '--download-only', '-o',
                      'APT::Sandbox::User=root'] + self.options +
                     ['source', 'nova=%s' % version], cwd=where)
            except CheckFailed as e:
                if '404' not in str(e):
                    raise
                tree = self._without_orig(version, where, series)
                if tree is None:
                    not_served.append('nova %s is listed but its source '
                                      'is not served' % version)
                    continue
                not_served.append(
                    'nova %s: its upstream tarball is not served; '
                    'upstream\'s nova %s sdist stands in for it'
                    % (version, registry.RELEASES[series][0]))
                return version, tree, not_served
            dsc = glob.glob(os.path.join(where, 'nova_*.dsc'))
            if len(dsc) != 1:
                raise CheckFailed('apt-get source nova=%s gave %s'
                                  % (version, dsc))
            tree = os.path.join(where, 'nova')
            _run(['dpkg-source', '--skip-patches', '-x', dsc[0], tree])
            return version, tree, not_served
        raise CheckFailed('the archive serves none of the nova sources it '
                          'lists (%s)' % ', '.join(versions))

    @staticmethod
    def _without_orig(version, where, series):
        upstream = version.split(':')[-1].rsplit('-', 1)[0]
        plain = version.split(':')[-1]
        dsc = os.path.join(where, 'nova_%s.dsc' % plain)
        debian = glob.glob(os.path.join(where, 'nova_%s.debian.tar.*'
                                        % plain))
        if (not os.path.isfile(dsc) or len(debian) != 1 or
                upstream != registry.RELEASES[series][0]):
            return None
        tree = os.path.join(where, 'nova')
        shutil.copytree(sdist.released_tree(series), tree)
        _run(['tar', '-xf', debian[0], '-C', tree])
        return tree


def _compare(a, b):
    """Debian's version order (dpkg --compare-versions)."""
    for op, result in (('lt', -1), ('gt', 1)):
        if subprocess.run(['dpkg', '--compare-versions', a, op,
                           b]).returncode == 0:
            return result
    return 0


def stale_fingerprints(series, tree, name):
    """The targets whose fingerprint in ``tree`` (Debian's, its own
    patches applied) is not the one recorded for the distribution set
    ``name``, which the fingerprint guard accepts on that nova.
    """
    recorded = fingerprint.recorded().get(name, {})
    return sorted(target.path for fix in fixes.FIXES
                  for target in registry.targets_of(fix, series)
                  if recorded.get(target.path) !=
                  fingerprint.of_tree(tree, target))


def quilt_on_debian(tree, series, patch_set):
    """Debian's stack, then patches/<patch_set> appended (a distribution
    set is checked to be up to date on Debian's tree first): (Debian's
    patches, ours, {name: offsets}).
    """
    env = {'QUILT_PATCHES': 'debian/patches', 'QUILT_PC': '.pc'}
    debian_series = os.path.join(tree, 'debian', 'patches', 'series')
    with open(debian_series, encoding='utf-8') as f:
        debian = [line.split()[0] for line in f.read().splitlines()
                  if line.strip() and not line.startswith('#')]
    _run(['quilt', 'push', '-a', '-q'], cwd=tree, env=env)
    name = None if patch_set == series else patch_set
    if name is not None:
        try:
            patch.check(series, tree, name=name)
        except errors.NovaFixesError as e:
            raise CheckFailed(str(e))
        stale = stale_fingerprints(series, tree, name)
        if stale:
            raise CheckFailed(
                'the fingerprints recorded for %s are not those of its '
                'tree: %s (nova-fixes fingerprints record --series %s '
                '--set %s --tree TREE)' % (name, ', '.join(stale), series,
                                           name))
    ours = [n for n, _text in patch.series_patches(series, name=name)]
    for n in ours:
        shutil.copy(os.path.join(patch.patches_dir(series, name=name), n),
                    os.path.join(tree, 'debian', 'patches', n))
    with open(debian_series, 'a', encoding='utf-8') as f:
        f.write(''.join(n + '\n' for n in ours))
    out = _run(['quilt', 'push', '-a', '--fuzz=0'], cwd=tree, env=env)
    if 'fuzz' in out.lower():
        raise CheckFailed('quilt applied with fuzz:\n' + out)
    applied = _run(['quilt', 'applied'], cwd=tree, env=env).split()
    applied = [os.path.basename(name) for name in applied]
    if applied != debian + ours:
        raise CheckFailed('quilt applied %s, expected %s'
                          % (applied, debian + ours))
    offsets = {}
    current = None
    for line in out.splitlines():
        match = re.match(r'Applying patch \S*?([^/\s]+\.patch)', line)
        if match:
            current = match.group(1)
        elif 'offset' in line and current:
            offsets[current] = offsets.get(current, 0) + 1
    return debian, ours, offsets


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--work', help='keep the sources here (default: a '
                                  'temporary directory, removed after)')
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    for program in ('apt-get', 'dpkg-source', 'quilt'):
        if shutil.which(program) is None:
            print('check_debian_quilt: %s is not installed (apt-get '
                  'install dpkg-dev quilt)' % program)
            print('0 passed, 1 failed')
            return 1
    work = args.work or tempfile.mkdtemp(prefix='nova-fixes-debian-')
    passed = failed = 0
    try:
        apt = Apt(os.path.join(work, 'apt'), archive_uris())
        apt.update()
        for label, suites, series, patch_set in RELEASES:
            what = '%s: patches/%s on Debian\'s nova' % (label, patch_set)
            try:
                versions = apt.source_versions(suites)
                where = os.path.join(work, suites[0])
                shutil.rmtree(where, ignore_errors=True)
                os.makedirs(where)
                version, tree, not_served = apt.source(versions, where,
                                                       series)
                debian, ours, offsets = quilt_on_debian(tree, series,
                                                        patch_set)
            except CheckFailed as e:
                failed += 1
                print('%s: FAILED: %s' % (what, e))
                continue
            passed += 1
            for line in not_served:
                print('%s: %s' % (label, line))
            print('%s %s (%d Debian patches, then %d of nova-fixes): '
                  'quilt push -a, no fuzz%s'
                  % (what, version, len(debian), len(ours),
                     '; offsets in ' + ', '.join(
                         '%s (%d hunks)' % item
                         for item in sorted(offsets.items()))
                     if offsets else ', no offset'))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
