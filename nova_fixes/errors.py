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

"""Errors raised by nova-fixes itself (never by a drop-in at run time)."""


class NovaFixesError(Exception):
    """Base class: every error of nova-fixes names what is wrong."""


class UnsupportedNova(NovaFixesError):
    """The installed nova is not a release nova-fixes supports."""

    def __init__(self, version, supported):
        self.version = version
        self.supported = supported
        super().__init__(
            'nova %s is not supported by nova-fixes; supported series: %s. '
            'Nothing was patched.' % (version, ', '.join(supported)))


class NovaNotInstalled(NovaFixesError, ImportError):
    """nova cannot be imported by the Python running nova-fixes.

    An ImportError too, so code that guarded the import of nova keeps
    working.
    """

    def __init__(self, python, reason, supported):
        self.python = python
        self.reason = reason
        self.supported = supported
        super().__init__(
            '%s; install nova of a supported series (%s) in this Python '
            '(%s), or run nova-fixes with the Python nova runs on. Nothing '
            'was patched.' % (reason, ', '.join(supported), python))


class UnknownSeries(NovaFixesError):
    """A series name that nova-fixes does not know."""

    def __init__(self, series, supported):
        self.series = series
        self.supported = supported
        super().__init__(
            'unknown nova series %r; supported series: %s'
            % (series, ', '.join(supported)))


class TargetMismatch(NovaFixesError):
    """The original code of a target is not the one nova-fixes expects.

    Raised before anything is patched: a distro's own patched nova or a
    release that nova-fixes has not seen must not get a drop-in written for
    different code.
    """

    def __init__(self, target, series, reason):
        self.target = target
        self.series = series
        self.reason = reason
        super().__init__(
            'refusing to activate: %s does not match the nova %s original '
            'recorded by nova-fixes (%s). Nothing was patched.'
            % (target, series, reason))


class UnknownFix(NovaFixesError):
    """A bug id that no fix of nova-fixes closes."""

    def __init__(self, bug, known):
        self.bug = bug
        super().__init__(
            'no fix for bug %s; known fixes: %s'
            % (bug, ', '.join(str(b) for b in known)))


class ExportError(NovaFixesError):
    """A fix cannot be exported as a patch for the given nova tree."""


class NotANovaTree(NovaFixesError):
    """A directory given as a nova source tree is not one."""

    def __init__(self, tree, reason):
        self.tree = tree
        super().__init__('%s is not a nova source tree: %s' % (tree, reason))


class PatchDoesNotApply(NovaFixesError):
    """A hunk of a patch does not apply to a nova tree."""

    def __init__(self, patch, path, hunk, header, reason):
        self.patch = patch
        self.path = path
        self.hunk = hunk
        super().__init__(
            '%s does not apply: hunk #%d of %s (%s) %s. Nothing was '
            'changed.' % (patch, hunk, path, header, reason))


class StalePatches(NovaFixesError):
    """patches/<series> differs from what the drop-ins export."""
