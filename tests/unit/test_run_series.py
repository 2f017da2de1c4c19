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

import os
import shutil
import sys
import tempfile
from unittest import mock

import testtools

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'tools')
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

import run_series  # noqa: E402

MODULE = '''import os


class BaseTest(object):
    def test_a(self):
        self.assertEqual(1, len(x))


class OtherTest(object):
    def test_b(self):
        pass


class SubTest(BaseTest):
    pass
'''


class ChangedClassesTestCase(testtools.TestCase):
    """Which of a changed functional test module's classes to run."""

    def test_changed_class_and_its_subclasses(self):
        patched = MODULE.replace('assertEqual(1,', 'assertEqual(0,')
        self.assertEqual(['BaseTest', 'SubTest'],
                         run_series.changed_classes(MODULE, patched))

    def test_a_class_alone(self):
        patched = MODULE.replace('        pass\n\n\nclass Sub',
                                 '        self.skip()\n\n\nclass Sub')
        self.assertEqual(['OtherTest'],
                         run_series.changed_classes(MODULE, patched))

    def test_a_line_deleted(self):
        patched = MODULE.replace('    def test_b(self):\n        pass\n',
                                 '    pass\n')
        self.assertEqual(['OtherTest'],
                         run_series.changed_classes(MODULE, patched))

    def test_change_outside_every_class_means_the_module(self):
        patched = MODULE.replace('import os', 'import sys')
        self.assertIsNone(run_series.changed_classes(MODULE, patched))

    def test_nothing_changed(self):
        self.assertEqual([], run_series.changed_classes(MODULE, MODULE))


class TouchedTestsTestCase(testtools.TestCase):
    """Which of nova's tests run on a patched tree."""

    CROSS_CELL = 'nova/conductor/tasks/cross_cell_migrate.py'
    UNIT = 'nova/tests/unit/conductor/tasks/test_cross_cell_migrate.py'
    FUNCTIONAL = 'nova/tests/functional/test_cross_cell_migrate.py'

    def _touched(self, files):
        tree = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tree)
        for path in files:
            os.makedirs(os.path.dirname(os.path.join(tree, path)),
                        exist_ok=True)
            open(os.path.join(tree, path), 'w').close()
        with mock.patch.object(run_series, 'changed_paths',
                               return_value={self.CROSS_CELL: False}):
            return run_series.touched_tests('2026.2', tree)

    def test_functional_tests_of_a_touched_module(self):
        self.assertEqual(
            (['nova.tests.unit.conductor.tasks.test_cross_cell_migrate'],
             ['nova.tests.functional.test_cross_cell_migrate']),
            self._touched([self.CROSS_CELL, self.UNIT, self.FUNCTIONAL]))

    def test_functional_tests_the_tree_has_not(self):
        self.assertEqual(
            (['nova.tests.unit.conductor.tasks.test_cross_cell_migrate'],
             []), self._touched([self.CROSS_CELL, self.UNIT]))
