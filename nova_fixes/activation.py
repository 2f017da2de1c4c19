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

"""All-or-nothing activation of the drop-ins, guarded by fingerprints.

activate() first resolves and checks every target of every selected fix
against the fingerprints recorded for the running nova's series; only when
all of them match does it patch, so an unknown original leaves nova exactly
as it was. deactivate() puts back the very objects it took out.
"""

import importlib
import inspect
import logging
import sys
import threading

from nova_fixes import errors
from nova_fixes import fingerprint
from nova_fixes import fixes
from nova_fixes import registry

LOG = logging.getLogger(__name__)

_lock = threading.Lock()
#: bug -> {registry.Target: [(owner, name, original __dict__ entry or
#: _MISSING)], in the order they were set}, the targets in the order they
#: were activated
_applied = {}
_MISSING = object()


class Activation(list):
    """The bug ids one activate() call activated (a list, as it always was),
    and the targets it activated, so that exactly those can be undone:
    ``deactivate(activation)`` leaves alone whatever another call activated,
    other targets of the same fixes included.
    """

    def __init__(self, bugs=(), targets=()):
        super().__init__(bugs)
        #: [(bug, registry.Target)] this call activated
        self.targets = list(targets)


def nova_version():
    """The installed nova's version string, or NovaNotInstalled."""
    try:
        from nova import version
    except ImportError as e:
        if getattr(e, 'name', None) == 'nova':
            reason = 'nova is not installed'
        else:
            reason = 'nova cannot be imported (%s)' % e
        raise errors.NovaNotInstalled(
            sys.executable, reason, registry.SUPPORTED_SERIES) from e
    return version.version_string()


def series_of(version):
    """The series name of a nova version string, or UnsupportedNova."""
    try:
        major = int(str(version).split('.')[0])
    except ValueError:
        major = None
    if major not in registry.SERIES_BY_MAJOR:
        raise errors.UnsupportedNova(version, registry.SUPPORTED_SERIES)
    return registry.SERIES_BY_MAJOR[major]


def _resolve(path):
    """(owner object, attribute name) of a ``module:a.b`` path."""
    module_name, attribute = path.split(':')
    owner = importlib.import_module(module_name)
    *parents, name = attribute.split('.')
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


def _expected(target, series, recorded):
    """[(fingerprint, what it is)] recorded for the target: the series'
    release, and a distribution's own tree of the series (Debian 13's
    31.0.0 with its patches for 2025.1) where it differs. Raises
    TargetMismatch when none is.
    """
    expected = [(recorded[key][target.path], what) for key, what
                in fingerprint.originals(series, recorded)
                if target.path in recorded[key]]
    if not expected:
        raise errors.TargetMismatch(
            target.path, series,
            'no original is recorded for this series')
    return expected


def _check(target, series, recorded):
    """Raise TargetMismatch unless the live target is the recorded one."""
    expected = _expected(target, series, recorded)
    owner, name = _resolve(target.path)
    present = name in vars(owner)
    if target.new:
        if present:
            raise errors.TargetMismatch(
                target.path, series,
                'nova already defines it; the fix may be merged already')
        return owner, name
    live = inspect.unwrap(getattr(owner, name, None))
    source = getattr(sys.modules.get(target.module), '__file__', None)
    code = getattr(live, '__code__', None)
    if not present or code is None or code.co_filename != source:
        raise errors.TargetMismatch(
            target.path, series,
            'the live object is not the one defined in %s; something else '
            'has replaced it' % source)
    # The live function's own source lines, as its module's file has them.
    actual = fingerprint.of_object(live)
    if actual not in [value for value, _what in expected]:
        raise errors.TargetMismatch(
            target.path, series,
            'fingerprint %s, expected %s%s' % (
                actual, ' or '.join('%s (%s)' % item for item in expected),
                '; nova is imported from %s: a distribution\'s own '
                'patches may have changed it' % source
                if '/dist-packages/' in (source or '') else ''))
    return owner, name


def check_source(target, series, recorded):
    """Raise TargetMismatch unless the installed nova's source of the
    target is the recorded one (a new target: absent), without importing
    its module: for nova-manage's targets outside nova-manage, whose
    module would monkey patch the process (registry.DEFAULT_SERVICES).
    """
    expected = _expected(target, series, recorded)
    actual = fingerprint.of_installed(target)
    if target.new:
        if actual != fingerprint.ABSENT:
            raise errors.TargetMismatch(
                target.path, series,
                'nova already defines it; the fix may be merged already')
        return
    if actual not in [value for value, _what in expected]:
        raise errors.TargetMismatch(
            target.path, series, 'fingerprint %s, expected %s' % (
                actual, ' or '.join('%s (%s)' % item for item in expected)))


def _replacement(target):
    owner, name = _resolve(target.replacement)
    return vars(owner)[name] if name in vars(owner) else getattr(owner, name)


def _aliases(target, owner, name):
    """[(owner, name)] where a delegating drop-in finds nova's original.

    A drop-in calls nova's original by the name the patch gives it
    (Target.original_as): a method through ``self``, so the alias goes on
    nova's class; a module-level function by its bare name, so the alias
    goes in nova's module (as in the patch) and in the drop-in's module,
    whose globals the drop-in's code reads.
    """
    if not target.original_as:
        return []
    aliases = [(owner, target.original_as)]
    if '.' not in target.attribute:
        dropin_module = importlib.import_module(
            target.replacement.split(':')[0])
        aliases.append((dropin_module, target.original_as))
    return aliases


def _select(bugs):
    if bugs is None:
        return list(fixes.FIXES)
    return [fixes.get_fix(bug) for bug in bugs]


def _set(changes, owner, name, new):
    changes.append((owner, name, vars(owner).get(name, _MISSING)))
    setattr(owner, name, new)


def _services(services):
    if services is None:
        return set(registry.DEFAULT_SERVICES)
    unknown = sorted(set(services) - set(registry.SERVICES))
    if unknown:
        raise errors.NovaFixesError(
            'unknown nova service %s; the services are %s'
            % (', '.join(map(repr, unknown)), ', '.join(registry.SERVICES)))
    return set(services)


def activate(bugs=None, services=None):
    """Activate the drop-ins of the given fixes (default: all of them).

    ``services`` (default: every service, registry.DEFAULT_SERVICES:
    nova-manage's targets only when "manage" is named) limits activation
    to the targets whose code runs in those nova services
    (registry.SERVICES), so that for
    example nova-compute imports none of the API's modules for fixes it
    does not run. Idempotent: targets already active are left as they
    are. Returns the bug ids with a target this call activated.

    :raises NovaNotInstalled: nova cannot be imported
    :raises UnsupportedNova: the running nova is not of a supported series
    :raises TargetMismatch: a target's original is not the recorded one;
        nothing is patched then
    :raises NovaFixesError: an unknown service
    """
    with _lock:
        wanted = _services(services)
        series = series_of(nova_version())
        selected = [(fix, target) for fix in _select(bugs)
                    for target in registry.targets_of(fix, series)
                    if target not in _applied.get(fix.bug, {}) and
                    wanted.intersection(target.services)]
        if not selected:
            if services is not None and not any(
                    wanted.intersection(target.services)
                    for fix in _select(bugs)
                    for target in registry.targets_of(fix, series)):
                LOG.info('nova-fixes: no fix has code that runs in %s on '
                         'nova %s; nothing to activate',
                         ', '.join(sorted(wanted)), series)
            return Activation()
        recorded = fingerprint.recorded()
        plan = []
        for fix, target in selected:
            owner, name = _check(target, series, recorded)
            aliases = _aliases(target, owner, name)
            if target.original_as and hasattr(owner, target.original_as):
                raise errors.TargetMismatch(
                    target.path, series, 'nova already has %s; the fix '
                    'may be merged already' % target.original_as)
            plan.append((fix, target, owner, name, aliases,
                         _replacement(target)))
        done = Activation()
        for fix, target, owner, name, aliases, new in plan:
            changes = _applied.setdefault(fix.bug, {}).setdefault(target, [])
            for alias_owner, alias in aliases:
                _set(changes, alias_owner, alias, vars(owner)[name])
            if target.periodic:
                new = new()
                owner._add_periodic_task(new)
            _set(changes, owner, name, new)
            done.targets.append((fix.bug, target))
            if fix.bug not in done:
                done.append(fix.bug)
        LOG.info('nova-fixes: activated fixes for bugs %s on nova %s',
                 ', '.join(str(bug) for bug in done), series)
        return done


def deactivate(bugs=None):
    """Undo the activation of the given fixes (default: every active one).

    ``bugs`` may be what activate() returned (an Activation): then only
    the targets that call activated are undone. The original objects are
    put back; fixes not active are ignored. Returns the bug ids with a
    target this call deactivated.
    """
    with _lock:
        if isinstance(bugs, Activation):
            chosen = set(bugs.targets)
        else:
            selected = [fix.bug for fix in _select(bugs)]
            chosen = {(bug, target) for bug, targets in _applied.items()
                      if bug in selected for target in targets}
        done = []
        for bug in reversed(list(_applied)):
            targets = _applied[bug]
            undone = False
            for target in reversed(list(targets)):
                if (bug, target) not in chosen:
                    continue
                for owner, name, original in reversed(targets.pop(target)):
                    _remove_periodic_task(owner, name)
                    if original is _MISSING:
                        delattr(owner, name)
                    else:
                        setattr(owner, name, original)
                undone = True
            if not targets:
                del _applied[bug]
            if undone:
                done.insert(0, bug)
        return done


def _remove_periodic_task(owner, name):
    tasks = getattr(owner, '_periodic_tasks', None)
    if tasks is None or name not in dict(tasks):
        return
    owner._periodic_tasks = [(n, t) for n, t in tasks if n != name]
    owner._periodic_spacing.pop(name, None)


def active_fixes():
    """The bug ids whose drop-ins are active in this process."""
    return list(_applied)


def missing_patches(bugs=None):
    """What the installed nova lacks of the patches of the fixes.

    A nova built from a tree with patches/<series> applied defines every
    ``new`` target, and keeps the original of every delegating drop-in
    under its ``original_as`` name. Returns the missing names (empty when
    nova carries every patch); activated drop-ins do not count.
    """
    if _applied:
        raise errors.NovaFixesError('drop-ins are active in this process; '
                                    'cannot tell whether nova is patched')
    missing = []
    series = series_of(nova_version())
    for fix in _select(bugs):
        for target in registry.targets_of(fix, series):
            names = []
            if target.new:
                names.append(target.path)
            if target.original_as:
                names.append(target.path.rsplit('.', 1)[0] + '.' +
                             target.original_as
                             if '.' in target.attribute else
                             target.module + ':' + target.original_as)
            for path in names:
                try:
                    owner, name = _resolve(path)
                except (ImportError, AttributeError):
                    missing.append(path)
                    continue
                if not hasattr(owner, name):
                    missing.append(path)
    return missing
