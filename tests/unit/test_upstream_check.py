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

"""Unit tests of tools/upstream_check.py: what it takes from a patch,
which of nova's tests it runs for it, and its checks' verdicts.
"""

import contextlib
import io
import os
import shutil
import subprocess
import sys

import fixtures
import testtools

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'tools')
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

import upstream_check  # noqa: E402

PATCH = '''\
From 0 Mon Sep 17 00:00:00 2001
Subject: [PATCH 1/1] Fix it

---
diff --git a/nova/compute/manager.py b/nova/compute/manager.py
index 1..2 100644
--- a/nova/compute/manager.py
+++ b/nova/compute/manager.py
@@ -1,1 +1,2 @@ def f():
 a
+b
diff --git a/{servers} b/{servers}
index 1..2 100644
--- a/nova/tests/functional/test_servers.py
+++ b/nova/tests/functional/test_servers.py
@@ -10,1 +10,2 @@ class T(object):
     def test_resize_revert(self):
+        pass
@@ -90,0 +91,3 @@ class T(object):
+
+    def test_new_one(self):
+        pass
diff --git a/{bug} b/{bug}
new file mode 100644
index 0..1
--- /dev/null
+++ b/nova/tests/functional/regressions/test_bug_1.py
@@ -0,0 +1,2 @@
+def test_x():
+    pass
'''.format(servers='nova/tests/functional/test_servers.py',
           bug='nova/tests/functional/regressions/test_bug_1.py')


class ChangedTestCase(testtools.TestCase):

    def test_files_added_and_tests_touched(self):
        self.assertEqual({
            'nova/compute/manager.py': (False, []),
            'nova/tests/functional/test_servers.py':
                (False, ['test_new_one', 'test_resize_revert']),
            'nova/tests/functional/regressions/test_bug_1.py':
                (True, ['test_x']),
        }, upstream_check.changed(PATCH))

    def test_touched_tests_under_a_directory(self):
        files = {
            'nova/compute/utils.py': (False, []),
            'nova/tests/unit/compute/test_utils.py':
                (False, ['test_a', 'test_b']),
            'nova/tests/unit/compute/test_new.py': (True, ['test_c']),
            'nova/tests/functional/test_servers.py': (False, ['test_d']),
        }
        self.assertEqual(
            [r'nova\.tests\.unit\.compute\.test_new\b',
             r'nova\.tests\.unit\.compute\.test_utils\..*\.'
             r'(test_a|test_b)$'],
            upstream_check.touched_tests(files, 'nova/tests/unit/'))
        self.assertEqual(
            [r'nova\.tests\.functional\.test_servers\..*\.(test_d)$'],
            upstream_check.touched_tests(files, 'nova/tests/functional/'))

    def test_discovery_in_the_deepest_directory_of_the_modules(self):
        files = {
            'nova/compute/utils.py': (False, []),
            'nova/tests/unit/compute/test_utils.py': (False, ['test_a']),
            'nova/tests/unit/compute/test_api.py': (False, []),
            'nova/tests/unit/conductor/tasks/test_migrate.py':
                (True, []),
            'nova/tests/functional/regressions/test_bug_1.py':
                (True, ['test_x']),
        }
        unit = upstream_check.touched_modules(files, 'nova/tests/unit/')
        self.assertEqual(['nova.tests.unit.compute.test_utils',
                          'nova.tests.unit.conductor.tasks.test_migrate'],
                         unit)
        self.assertEqual('./nova/tests/unit', upstream_check.test_dir(unit))
        self.assertEqual('./nova/tests/unit/compute', upstream_check.test_dir(
            ['nova.tests.unit.compute.test_utils']))
        self.assertEqual(
            './nova/tests/functional/regressions',
            upstream_check.test_dir(upstream_check.touched_modules(
                files, 'nova/tests/functional/')))

    def test_tests_whose_body_a_hunk_changes(self):
        # A hunk with no def in it or its header: the tree tells which
        # test's body its lines are in.
        tree = self.useFixture(fixtures.TempDir()).path
        path = 'nova/tests/functional/regressions/test_bug_2.py'
        os.makedirs(os.path.join(tree, os.path.dirname(path)))
        with open(os.path.join(tree, path), 'w') as f:
            f.write('class T(object):\n\n'
                    '    def test_one(self):\n'
                    '        a = 1\n        b = 2\n        c = 3\n'
                    '        d = 5\n\n'
                    '    def test_two(self):\n        pass\n')
        text = (
            'diff --git a/{0} b/{0}\n--- a/{0}\n+++ b/{0}\n'
            '@@ -4,5 +4,4 @@\n         a = 1\n         b = 2\n'
            '-        # FIXME\n-        c = 4\n+        c = 3\n'
            '         d = 5\n'.format(path))
        self.assertEqual({path: (False, ['test_one'])},
                         upstream_check.changed(text, tree))
        self.assertEqual({path: (False, [])}, upstream_check.changed(text))

    def test_a_helper_changed_runs_its_class(self):
        tree = self.useFixture(fixtures.TempDir()).path
        path = 'nova/tests/functional/regressions/test_bug_3.py'
        os.makedirs(os.path.join(tree, os.path.dirname(path)))
        with open(os.path.join(tree, path), 'w') as f:
            f.write('class T(object):\n\n'
                    '    def _assert_none_left(self):\n'
                    '        self.assertEqual({}, self.left())\n\n'
                    '    def test_one(self):\n        pass\n\n'
                    '    def test_two(self):\n        pass\n\n\n'
                    'class U(object):\n\n'
                    '    def test_other(self):\n        pass\n')
        text = ('diff --git a/{0} b/{0}\n--- a/{0}\n+++ b/{0}\n'
                '@@ -3,2 +3,2 @@\n     def _assert_none_left(self):\n'
                '-        self.assertEqual(1, len(self.left()))\n'
                '+        self.assertEqual({{}}, self.left())\n'.format(path))
        self.assertEqual({path: (False, ['test_one', 'test_two'])},
                         upstream_check.changed(text, tree))


class UnitModulesTestCase(testtools.TestCase):

    def test_mapping(self):
        tree = self.useFixture(fixtures.TempDir()).path
        for path in ('nova/tests/unit/scheduler/client/test_report.py',
                     'nova/tests/unit/test_exception.py'):
            os.makedirs(os.path.dirname(os.path.join(tree, path)),
                        exist_ok=True)
            open(os.path.join(tree, path), 'w').close()
        self.assertEqual(
            ['nova.tests.unit.compute.test_compute',
             'nova.tests.unit.compute.test_compute_mgr',
             'nova.tests.unit.conductor.test_conductor',
             'nova.tests.unit.scheduler.client.test_report',
             'nova.tests.unit.test_exception'],
            upstream_check.unit_modules(tree, [
                'nova/compute/manager.py', 'nova/conductor/manager.py',
                'nova/scheduler/client/report.py', 'nova/exception.py',
                # no unit test module beside it: none
                'nova/conductor/tasks/migrate.py',
                # functional tests and notes are not unit tests
                'nova/tests/functional/test_servers.py',
                'releasenotes/notes/a.yaml']))

    def test_changed_unit_test_modules_run(self):
        self.assertEqual(
            ['nova.tests.unit.compute.test_api'],
            upstream_check.unit_modules('/nonexistent', [
                'nova/tests/unit/compute/test_api.py']))


class StyleTestCase(testtools.TestCase):
    """The whitespace hooks, and flake8 under nova's configuration."""

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(fixtures.TempDir()).path
        subprocess.run(['git', 'init', '-q', self.tree], check=True)
        with open(os.path.join(self.tree, 'tox.ini'), 'w') as f:
            f.write('[flake8]\nmax-line-length = 79\n')
        # autopep8 and codespell come with tox -e upstream only.
        self.useFixture(fixtures.MonkeyPatch('upstream_check.STYLE',
                                             ('whitespace', 'flake8')))

    def _style(self, text, path='nova/x.py'):
        full = os.path.join(self.tree, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'w') as f:
            f.write(text)
        subprocess.run(['git', '-C', self.tree, 'add', '-A'], check=True)
        subprocess.run(['git', '-C', self.tree, '-c', 'user.name=t', '-c',
                        'user.email=t@t', 'commit', '-q', '-m', 'x'],
                       check=True)
        result = upstream_check.Result()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            upstream_check.style(self.tree, [path], result, 'p')
        return result, out.getvalue()

    def test_clean(self):
        result, out = self._style('"""Doc."""\n\nX = 1\n')
        self.assertEqual((2, 0), (result.passed, result.failed), out)

    def test_a_missing_tool_fails_and_says_so(self):
        self.assertEqual(
            (127, 'no-such-tool is not installed (tox -e upstream installs '
             'it)'), upstream_check.run(['no-such-tool'], self.tree))

    def test_whitespace(self):
        result, out = self._style('a \nb\tc\nend', 'nova/y.txt')
        self.assertEqual(1, result.failed)
        for finding in ('nova/y.txt:1: trailing whitespace',
                        'nova/y.txt:2: a tab',
                        'nova/y.txt: no newline at the end'):
            self.assertIn(finding, out)

    def test_flake8_finds_what_nova_would(self):
        if shutil.which('flake8') is None:
            self.skipTest('flake8 is not installed here')
        result, out = self._style('def f():\n    pass\nX = 1\n')
        self.assertIn('p: flake8 with hacking (1 files): FAILED: ', out)
        self.assertIn('E305', out)
