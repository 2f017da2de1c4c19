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

"""Every fix's record against the tree: its drop-ins, tests, nova-side
tests, notes, fingerprints (every series) and patches.
"""

import ast
import importlib
import json
import os

import testtools

from nova_fixes.export import patch
from nova_fixes.export import source
from nova_fixes import fingerprint
from nova_fixes import fixes
from nova_fixes.fixes import bug_1848343
from nova_fixes import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))


def _tree(*path):
    with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
        return ast.parse(f.read())


#: Functional test modules of nova-fixes' own tools, which belong to no
#: fix: the placement audit (nova-fixes audit).
TOOL_TESTS = ('test_audit',)


def _files(*path):
    return sorted(os.listdir(os.path.join(ROOT, *path)))


class FixRecordsTestCase(testtools.TestCase):

    def test_a_module_per_fix_named_after_it(self):
        for fix in fixes.FIXES:
            module = importlib.import_module('nova_fixes.fixes.' + fix.name)
            self.assertIs(fix, module.FIX)
        self.assertEqual(
            sorted(fix.name + '.py' for fix in fixes.FIXES),
            [n for n in _files('nova_fixes', 'fixes')
             if n != '__init__.py' and n.endswith('.py')])

    def test_drop_ins_mirror_nova_paths_and_exist(self):
        for fix in fixes.FIXES:
            for target in fix.targets:
                module, attribute = target.replacement.split(':')
                self.assertEqual('nova_fixes.' + target.module, module,
                                 target.path)
                tree = ast.parse(source.dropin_source(module))
                self.assertIsNotNone(source.find(tree.body, attribute),
                                     target.replacement)
                self.assertEqual(set(), set(target.series) -
                                 set(registry.SUPPORTED_SERIES))
            for series in registry.SUPPORTED_SERIES:
                paths = [t.path for t in registry.targets_of(fix, series)]
                self.assertEqual(len(paths), len(set(paths)),
                                 '%s: one drop-in per target in %s'
                                 % (fix.bug, series))

    def test_options_modules_mirror_nova_conf(self):
        for fix in fixes.FIXES:
            for module in fix.patch.conf_modules:
                package, short = module.rsplit('.', 1)
                self.assertEqual('nova_fixes.nova.conf', package, module)
                self.assertTrue(os.path.isfile(os.path.join(
                    ROOT, 'nova_fixes', 'nova', 'conf', short + '.py')),
                    module)
                self.assertTrue(hasattr(importlib.import_module(module),
                                        'list_opts'), module)

    def test_every_functional_test_module_belongs_to_one_fix(self):
        owned = []
        for fix in fixes.FIXES:
            owned += list(fix.tests) + [r.module for r in fix.fixed_upstream]
        self.assertEqual(sorted(owned), sorted(set(owned)))
        modules = [n[:-3] for n in _files('tests', 'functional')
                   if n.startswith('test_') and n.endswith('.py')]
        self.assertEqual(sorted(modules),
                         sorted(owned + list(TOOL_TESTS)))

    def test_every_note_belongs_to_one_fix(self):
        notes = [n for fix in fixes.FIXES for n in fix.notes]
        self.assertEqual(sorted(notes), sorted(set(notes)))
        # Notes about nova-fixes itself, not about a fix, start so.
        self.assertEqual(
            sorted(notes),
            [n for n in _files('releasenotes', 'notes')
             if not n.startswith('nova-fixes-')])

    def test_fingerprints_of_every_series(self):
        recorded = fingerprint.recorded()
        # Every series' release, and the distribution trees recorded
        # beside their series' (debian-13).
        self.assertEqual(sorted(registry.SUPPORTED_SERIES + ('debian-13',)),
                         sorted(recorded))
        for key, prints in recorded.items():
            series = registry.DISTRIBUTION_SETS.get(key, (key,))[0]
            paths = {t.path for fix in fixes.FIXES if series in fix.series
                     for t in registry.targets_of(fix, series)}
            self.assertEqual(paths, set(prints), series)
            for fix in fixes.FIXES:
                for target in registry.targets_of(fix, series):
                    self.assertEqual(target.new, prints[target.path] ==
                                     fingerprint.ABSENT, target.path)
        with open(fingerprint._DATA, encoding='utf-8') as f:
            self.assertEqual(json.dumps(recorded, indent=2, sort_keys=True) +
                             '\n', f.read())

    def test_patches_of_every_series_one_per_change_in_order(self):
        for series in registry.SUPPORTED_SERIES:
            with open(os.path.join(ROOT, 'patches', series, 'series')) as f:
                names = f.read().split()
            slugs = [plan.slug for _fix, plan, _change
                     in patch.series_order(series)]
            # The revert paths of 1848343 come first, alone.
            self.assertEqual(bug_1848343.REVERT_SLUG, slugs[0])
            self.assertEqual(
                sum(len(fix.patch.changes) or 1 for fix in fixes.FIXES
                    if series in fix.series), len(slugs))
            wanted = ['%04d-%s.patch' % (number, slug)
                      for number, slug in enumerate(slugs, 1)]
            self.assertEqual(wanted, names, series)
            self.assertEqual(sorted(wanted + ['series']),
                             _files('patches', series))

    def test_nova_side_tests_are_paired_with_functional_tests(self):
        sources = []
        for fix in fixes.FIXES:
            for test in fix.nova_tests:
                sources.append(test.source)
                methods = [n.name for n in ast.walk(
                    _tree('tests', 'nova_side', test.source))
                    if isinstance(n, ast.FunctionDef) and
                    n.name.startswith('test_')]
                self.assertEqual(sorted(methods),
                                 sorted(m for m, _f in test.pairs),
                                 test.source)
                for _method, functional in test.pairs:
                    module, cls, method = functional.split('.')
                    self.assertIn(module, fix.tests, functional)
                    self.assertTrue(self._defines(module, cls, method),
                                    functional)
        self.assertEqual(sorted(sources), [
            n for n in _files('tests', 'nova_side') if n.endswith('.py')])

    def _defines(self, module, cls, method):
        """Whether cls (or a base class in the module) defines method."""
        classes = {n.name: n for n in _tree('tests', 'functional',
                                            module + '.py').body
                   if isinstance(n, ast.ClassDef)}
        while cls in classes:
            node = classes[cls]
            if any(isinstance(n, ast.FunctionDef) and n.name == method
                   for n in node.body):
                return True
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            cls = bases[0] if bases else None
        return False

    def test_nova_flips_are_nova_test_ids(self):
        for fix in fixes.FIXES:
            for test in fix.nova_flips:
                self.assertTrue(test.startswith('nova.tests.functional.'),
                                test)


class OpenedUpstreamTestCase(testtools.TestCase):

    def test_in_nova(self):
        change = registry.OpenedUpstream('a87b80fb39', 'Fix bug 2000069',
                                         ('31.0.0', '30.2.1'))
        for version, carries in (('26.2.2', False), ('29.4.0', False),
                                 ('30.2.0', False), ('30.2.1', True),
                                 ('30.2.1.dev4', True), ('31.0.0', True),
                                 ('34.0.0', True)):
            self.assertEqual(carries, change.in_nova(version), version)

    def test_not_a_version(self):
        change = registry.OpenedUpstream('a87b80fb39', 'x', ('31.0.0',))
        self.assertRaises(ValueError, change.in_nova, 'master')
