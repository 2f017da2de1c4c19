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

import io
import os
import sys
import tempfile
from unittest import mock

import testtools

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'tools')
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

import debian_build  # noqa: E402
from nova_fixes.export import patch  # noqa: E402

CHANGELOG = '''nova (2:31.0.0-6+deb13u2) trixie-security; urgency=high

  * A security fix.

 -- Someone <someone@example.org>  Fri, 06 Feb 2026 10:34:57 +0100
'''


class DebianBuildTestCase(testtools.TestCase):

    def test_every_exported_patch_has_its_dep3_fields(self):
        for release, (_label, _suites, series, patch_set) in \
                debian_build.RELEASES.items():
            name = None if patch_set == series else patch_set
            for n, text in patch.series_patches(series, name=name):
                self.assertEqual([], debian_build.dep3_problems(text),
                                 '%s: %s' % (release, n))

    def test_dep3_problems_name_the_missing_fields(self):
        text = ('From 1 Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\n'
                'Subject: [PATCH] Fix it\n\nWhy.\n---\n'
                ' nova/x.py | 1 +\n')
        self.assertEqual(['Bug/Forwarded', 'Last-Update'],
                         debian_build.dep3_problems(text))
        # Fields below the header (in the diff) do not count.
        self.assertEqual(['Bug/Forwarded', 'Last-Update'],
                         debian_build.dep3_problems(
                             text + 'Bug: x\nLast-Update: y\n'))

    def test_changelog_entry(self):
        with tempfile.TemporaryDirectory() as tree:
            os.makedirs(os.path.join(tree, 'debian'))
            path = os.path.join(tree, 'debian', 'changelog')
            with open(path, 'w') as f:
                f.write(CHANGELOG)
            new = debian_build.add_changelog_entry(
                tree, '2:31.0.0-6+deb13u2', 'trixie',
                [('0001-a.patch', 'Do not leak A'),
                 ('0002-b.patch', 'Do not leak B')])
            with open(path) as f:
                text = f.read()
        self.assertEqual('2:31.0.0-6+deb13u2+novafixes1', new)
        self.assertTrue(text.startswith(
            'nova (2:31.0.0-6+deb13u2+novafixes1) trixie; urgency=medium'
            '\n'), text)
        self.assertIn('    - 0001-a.patch: Do not leak A\n', text)
        self.assertIn('    - 0002-b.patch: Do not leak B\n', text)
        self.assertRegex(text, r'\n -- nova-fixes <nova-fixes@invalid>  '
                               r'\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d '
                               r'[+-]\d{4}\n\n' + r'nova \(2:31')
        self.assertTrue(text.endswith(CHANGELOG))

    def test_changelog_of_another_version_is_refused(self):
        with tempfile.TemporaryDirectory() as tree:
            os.makedirs(os.path.join(tree, 'debian'))
            path = os.path.join(tree, 'debian', 'changelog')
            with open(path, 'w') as f:
                f.write(CHANGELOG)
            self.assertRaises(debian_build.BuildFailed,
                              debian_build.add_changelog_entry, tree,
                              '2:31.0.0-6+deb13u1', 'trixie', [])
            with open(path) as f:
                self.assertEqual(CHANGELOG, f.read())

    def test_unknown_release_is_refused(self):
        out = io.StringIO()
        with mock.patch.object(sys, 'argv', ['debian_build', 'sid']), \
                mock.patch.object(sys, 'stdout', out), \
                mock.patch.object(out, 'reconfigure', create=True):
            self.assertEqual(2, debian_build.main())
        self.assertEqual(
            "debian-build: unknown release 'sid'; one of: bookworm, "
            'trixie\n0 passed, 1 failed\n', out.getvalue())
