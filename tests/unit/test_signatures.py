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

"""Every drop-in keeps the signature of the nova code it replaces."""

import inspect

import testtools

from nova_fixes import activation
from nova_fixes import fixes
from nova_fixes import registry

#: Parameters a drop-in adds, keyword with a default, after nova's own.
ADDED = {
    'nova.scheduler.client.report:SchedulerReportClient.move_allocations':
        {'target_consumer_generation_required': False},
    # nova-manage placement audit --heal.
    'nova.cmd.manage:PlacementCommands.audit': {'heal': False},
}


class SignatureTestCase(testtools.TestCase):

    def test_replacements_keep_nova_signatures(self):
        series = activation.series_of(activation.nova_version())
        for fix in fixes.FIXES:
            for target in registry.targets_of(fix, series):
                if target.new:
                    continue
                if not set(target.services) & set(
                        registry.DEFAULT_SERVICES):
                    # nova-manage's: its module is not imported here
                    # (see registry.DEFAULT_SERVICES).
                    self._check_from_source(target)
                    continue
                owner, name = activation._resolve(target.path)
                original = inspect.signature(
                    inspect.unwrap(getattr(owner, name)))
                new = inspect.signature(
                    inspect.unwrap(activation._replacement(target)))
                added = ADDED.get(target.path, {})
                params = list(new.parameters.values())
                kept = params[:len(params) - len(added)]
                self.assertEqual(list(original.parameters.values()), kept,
                                 target.path)
                for param in params[len(kept):]:
                    self.assertIn(param.name, added, target.path)
                    self.assertEqual(added[param.name], param.default)

    def _check_from_source(self, target):
        """The original's parameters, read from nova's source, are the
        replacement's (nova-manage's targets add none).
        """
        import ast
        from nova_fixes import fingerprint
        with open(fingerprint.module_file(target.module)) as f:
            tree = ast.parse(f.read())
        owner, name = target.attribute.split('.')
        original = [node for cls in tree.body
                    if isinstance(cls, ast.ClassDef) and cls.name == owner
                    for node in cls.body
                    if isinstance(node, ast.FunctionDef) and
                    node.name == name]
        self.assertEqual(1, len(original), target.path)
        new = inspect.signature(
            inspect.unwrap(activation._replacement(target)))
        added = ADDED.get(target.path, {})
        params = list(new.parameters.values())
        kept = params[:len(params) - len(added)]
        self.assertEqual([a.arg for a in original[0].args.args],
                         [p.name for p in kept], target.path)
        for param in params[len(kept):]:
            self.assertIn(param.name, added, target.path)
            self.assertEqual(added[param.name], param.default)
