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

"""What a fix record is, and the supported series.

The records themselves, one module per fix, are in nova_fixes/fixes/.
This module imports no nova code, so that entry points can import it
before nova's own monkey patching has run.
"""

import dataclasses

from nova_fixes import errors

#: nova major version -> series name, for every supported series.
SERIES_BY_MAJOR = {
    # Zed, as Debian 12 ships it (python3-nova 2:26.2.2-1~deb12u5).
    26: '2022.2',
    27: '2023.1',
    28: '2023.2',
    29: '2024.1',
    30: '2024.2',
    31: '2025.1',
    32: '2025.2',
    33: '2026.1',
    34: '2026.2',
}
SUPPORTED_SERIES = tuple(SERIES_BY_MAJOR.values())
DEFAULT_SERIES = '2026.2'

#: Patch sets made for a distribution's own nova tree rather than the
#: series' release, where the two differ in what the patches touch:
#: {name under patches/: (series, the tree it is made from)}. Debian 13
#: ships nova 31.0.0 with Debian's patches, while patches/2025.1 is made
#: for 31.3.1, whose unit tests the patches adjust differ (31.3.1 has a
#: test__complete_deletion, 31.0.0 has not). tools/check_debian_quilt.py
#: exports the set again on Debian's tree and fails if it is stale.
DISTRIBUTION_SETS = {
    'debian-13': ('2025.1', "Debian 13's nova source package, its "
                  'debian/patches applied'),
}


def check_set(name, series):
    """Refuse a distribution patch set name that is unknown, or is not
    one of ``series``.
    """
    if name not in DISTRIBUTION_SETS:
        raise errors.NovaFixesError(
            'unknown patch set %r; distribution patch sets: %s'
            % (name, ', '.join('%s (series %s)' % (n, s) for n, (s, _)
                               in sorted(DISTRIBUTION_SETS.items()))))
    if DISTRIBUTION_SETS[name][0] != series:
        raise errors.NovaFixesError(
            'patch set %s is made for series %s, not %s'
            % (name, DISTRIBUTION_SETS[name][0], series))
    return name


#: The nova services (and nova-manage) with an entry point:
#: activate(services=...) patches only the targets whose code runs in
#: them (none runs in the scheduler).
SERVICES = ('api', 'compute', 'conductor', 'scheduler', 'manage')
#: What activate() patches when not told which services: every service's
#: code, not nova-manage's. Importing nova.cmd.manage (to patch it)
#: monkey patches the importing process with eventlet (nova's cmd
#: modules do so on import), which a process that is not nova-manage
#: must not undergo by surprise: nova-manage's targets are activated
#: only when "manage" is asked for (nova-fixes-manage does).
DEFAULT_SERVICES = ('api', 'compute', 'conductor', 'scheduler')

#: The nova and openstack-placement release each series is tested with.
RELEASES = {
    '2022.2': ('26.2.2', '8.0.0'),
    '2023.1': ('27.5.1', '9.0.0'),
    '2023.2': ('28.3.1', '10.0.1'),
    '2024.1': ('29.4.0', '11.0.1'),
    '2024.2': ('30.3.0', '12.0.2'),
    '2025.1': ('31.3.1', '13.0.1'),
    '2025.2': ('32.2.1', '14.0.0'),
    '2026.1': ('33.0.2', '15.0.0'),
    '2026.2': ('34.0.0', '16.0.0'),
}


def check_series(series):
    if series not in SUPPORTED_SERIES:
        raise errors.UnknownSeries(series, SUPPORTED_SERIES)
    return series


#: The upstream series, patches/master: nova's master branch, for nova's
#: reviewers. It is made from the newest series' records, against a git
#: checkout of master (patches/master/BASE names its commit); no
#: released nova and no drop-in activation.
UPSTREAM = 'master'


def records_of(series):
    """The series whose records make the patches of ``series``: itself,
    or for the upstream series the newest supported one. Refuses any
    other name.
    """
    if series == UPSTREAM:
        return DEFAULT_SERIES
    if series not in SUPPORTED_SERIES:
        raise errors.UnknownSeries(series, SUPPORTED_SERIES + (UPSTREAM,))
    return series


@dataclasses.dataclass(frozen=True)
class Target:
    """One attribute of nova that a fix replaces or adds.

    ``path`` is ``module:attribute`` where attribute may be dotted
    (``Class.method``). ``replacement`` is the same form, in nova_fixes.
    ``new`` targets do not exist in nova: activation adds them and refuses
    if nova already has something by that name.
    """
    path: str
    replacement: str
    new: bool = False
    #: The replacement is a factory returning a periodic task (decorated
    #: with oslo.service's periodic_task), added to the owner's periodic
    #: tasks at activation and removed at deactivation.
    periodic: bool = False
    #: For a replaced target whose drop-in delegates to nova's original:
    #: the name the original keeps in nova once patched. The drop-in calls
    #: it by that name (``self.<name>(...)`` for a method, ``<name>(...)``
    #: for a module-level function); activation binds it while active.
    original_as: str = ''
    #: The series this target applies to, when nova's original differs
    #: between series so that each form has its own drop-in.
    series: tuple = SUPPORTED_SERIES
    #: The services whose processes run this code (see SERVICES).
    services: tuple = ('api', 'compute', 'conductor')
    #: For a new module-level target: the name of nova's module it is
    #: exported after, beside its kin (default: the end of the module,
    #: where two fixes' additions would be each other's context).
    after: str = ''

    @property
    def module(self):
        return self.path.split(':')[0]

    @property
    def attribute(self):
        return self.path.split(':')[1]


@dataclasses.dataclass(frozen=True)
class FixedUpstream:
    """A regression test module of a bug nova fixed itself.

    Vanilla nova passes it; a run with the fixing commit taken out
    (NOVA_FIXES_WITHOUT=<commit>, see tests/functional/base.py) shows that
    it catches the bug.
    """
    #: tests/functional/<module>.py
    module: str
    bug: int
    commit: str
    release: str


@dataclasses.dataclass(frozen=True)
class OpenedUpstream:
    """An upstream nova change that opened a window a test recreates.

    Before it, vanilla nova does not leak in that sequence, so the test
    passes there (the recreate report says the series predates the
    window). ``releases``: the first release carrying the change on each
    branch it landed on, master's first included; a nova of a later
    major version carries it, one of an earlier major version, or of a
    listed major version but older than that release, does not.
    """
    commit: str
    title: str
    releases: tuple

    def in_nova(self, version):
        """Whether nova ``version`` (a version string) carries it."""
        have = _version_tuple(version)
        firsts = sorted(_version_tuple(r) for r in self.releases)
        for first in firsts:
            if have[0] == first[0]:
                return have >= first
        return have[0] > firsts[-1][0]


def _version_tuple(version):
    """(major, minor, patch) of a version string; pre-release and dev
    suffixes ('30.2.1.dev4', '26.2.2-1~deb12u5') are left out.
    """
    parts = []
    for part in str(version).split('.')[:3]:
        digits = ''
        for char in part:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        parts.append(int(digits))
    if not parts:
        raise ValueError('not a nova version: %r' % (version,))
    return tuple(parts + [0] * (3 - len(parts)))


@dataclasses.dataclass(frozen=True)
class NovaTest:
    """A regression test the patch adds to nova's tree, written for it
    (tests/nova_side/<source>), each of its test methods paired with the
    functional test (``module.Class.method``) it mirrors.
    """
    path: str
    source: str
    pairs: tuple  # ((nova test method, functional test), ...)


@dataclasses.dataclass(frozen=True)
class NovaUnitTests:
    """Unit tests the patch adds to one of nova's unit test modules
    (``path``), beside nova's own tests of the code they test, written
    for it (tests/nova_side/unit/<source>): the source's classes are
    appended to the module. The source imports only what the module
    imports already, each import line as the module has it.
    """
    path: str
    source: str
    #: The source's classes it appends, when its classes are the tests of
    #: different changes (default: all of them).
    classes: tuple = ()

    @property
    def name(self):
        """How a Change names them: the source, or source:Class+Class."""
        if not self.classes:
            return self.source
        return '%s:%s' % (self.source, '+'.join(self.classes))


@dataclasses.dataclass(frozen=True)
class NovaDoc:
    """A page the patch adds to nova's documentation (``path``), written
    for it (doc/nova_side/<source>), and listed in the toctree of
    ``index`` (a page of nova's) after its entry ``after``.
    """
    path: str
    source: str
    index: str
    after: str


@dataclasses.dataclass(frozen=True)
class Change:
    """One upstream change of a fix whose patch is split (nova's reviewers
    take one concern per change, and a packager may take one change and
    what it requires): the parts of the fix it carries.

    Every target, options module, test edit, nova-side test and note of
    the fix is carried by exactly one of its changes. The exporter makes
    each change's patch on top of the changes before it in the series
    (see nova_fixes.fixes.ORDER), so a function the fix replaces is in
    the change that carries its target, as the drop-in has it.
    """
    #: File name of its patch, without the number; also the seed of its
    #: Change-Id (see nova_fixes.export.patch.change_id).
    slug: str
    subject: str
    body: str
    trailers: tuple = ()
    #: Target.path of the targets it carries (every series' form).
    targets: tuple = ()
    #: ((Target.path, (name, ...)), ...): functions an earlier change of
    #: its fix carries, whose concerns are separate changes: the names
    #: of the drop-in's code this change brings in. Each earlier change
    #: writes the function without the statements using them (see
    #: nova_fixes.export.source.staged); this one writes it with them.
    grows: tuple = ()
    #: Drop-in option modules (Patch.conf_modules) it adds to nova/conf.
    conf_modules: tuple = ()
    #: The test edit functions (Patch.test_edits) it carries.
    test_edits: tuple = ()
    #: NovaTest.path of the nova-side tests it adds or, if a recreate
    #: change before it added them, flips to assert the fix.
    nova_tests: tuple = ()
    #: NovaTest.path of the nova-side tests it adds in their recreate
    #: form: each block between "# recreate: begin" and "# recreate:
    #: else" (the bug asserted under a FIXME) is kept and each block
    #: between "# recreate: else" and "# recreate: end" (the fix
    #: asserted) is left out; the later change carrying it in nova_tests
    #: flips them. A recreate change carries its tests and nothing else.
    recreates: tuple = ()
    #: The fix's notes (Fix.notes) it adds.
    notes: tuple = ()
    #: NovaUnitTests.name of the unit tests it adds.
    unit_tests: tuple = ()
    #: NovaDoc.path of the documentation pages it adds.
    docs: tuple = ()
    #: Slugs of the changes it needs applied first besides what the
    #: exporter finds (the new names its code uses, the context its hunks
    #: need). None: every earlier change of its fix.
    needs: tuple = None


@dataclasses.dataclass(frozen=True)
class Patch:
    """What only the fix's patch has besides the drop-ins' code.

    The patch's date (its Date and DEP-3 Last-Update) is not set here: it
    is the last change of the fix's files in git (see
    nova_fixes.export.patch.fix_date).
    """
    #: File name of the patch, without its number: 0001-<slug>.patch
    slug: str
    subject: str
    body: str
    #: Commit message trailers, e.g. ('Closes-Bug: #1848343',)
    trailers: tuple = ()
    #: Drop-in option modules added to nova/conf.
    conf_modules: tuple = ()
    #: Functions (files) -> {path: text}, editing nova's existing tests.
    test_edits: tuple = ()
    #: DEP-3 Forwarded
    forwarded: str = 'no'
    #: Change: the upstream changes the patch is split into, in order
    #: (none: one patch, with the fields above).
    changes: tuple = ()


@dataclasses.dataclass(frozen=True)
class Fix:
    """Everything about one fix; see nova_fixes/fixes/."""
    #: The Launchpad bug number, or a name for a fix that has none.
    bug: object
    title: str
    #: True while the bug is open in nova master: its regression tests must
    #: fail (recreate the bug) on vanilla nova.
    open_upstream: bool
    upstream: str
    targets: tuple
    patch: Patch
    #: Its functional regression test modules: tests/functional/<name>.py
    tests: tuple = ()
    #: Regression test modules of bugs nova fixed (FixedUpstream) that
    #: this fix's tests complete.
    fixed_upstream: tuple = ()
    #: NovaTest: the nova-side regression tests its patch adds.
    nova_tests: tuple = ()
    #: NovaUnitTests: the unit tests its patch adds to nova's modules.
    unit_tests: tuple = ()
    #: NovaDoc: the pages its patch adds to nova's documentation.
    docs: tuple = ()
    #: nova's own tests (ids) that assert this bug under a FIXME: with the
    #: fix they must fail on that assertion (tests/nova_intree).
    nova_flips: tuple = ()
    #: Its reno notes (releasenotes/notes/), which become nova's.
    notes: tuple = ()
    #: The series whose originals are recorded (see fingerprints.json) and
    #: on which its tests have been seen to pass.
    series: tuple = SUPPORTED_SERIES

    @property
    def name(self):
        """Its module in nova_fixes/fixes/: bug_<id>, or its name."""
        return 'bug_%s' % self.bug if isinstance(self.bug, int) else self.bug


def targets_of(fix, series):
    """The targets of a fix that apply to a series."""
    return [target for target in fix.targets if series in target.series]
