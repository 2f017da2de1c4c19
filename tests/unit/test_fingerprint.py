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

import inspect

import testtools

from nova_fixes import activation
from nova_fixes import fingerprint
from nova_fixes import fixes
from nova_fixes import registry

SOURCE = '''
class Client(object):
    def move(self, a, b):
        """Move."""
        return a + b
'''


class FingerprintTestCase(testtools.TestCase):

    def test_formatting_and_comments_do_not_count(self):
        reformatted = '''
class Client(object):

    # a comment
    def move(self,
             a, b):
        """Move."""
        return (a +
                b)  # another
'''
        self.assertEqual(fingerprint.of_source(SOURCE, 'Client.move'),
                         fingerprint.of_source(reformatted, 'Client.move'))

    def test_code_change_counts(self):
        changed = SOURCE.replace('a + b', 'b + a')
        self.assertNotEqual(fingerprint.of_source(SOURCE, 'Client.move'),
                            fingerprint.of_source(changed, 'Client.move'))

    def test_absent(self):
        self.assertEqual(fingerprint.ABSENT,
                         fingerprint.of_source(SOURCE, 'Client.copy'))
        self.assertEqual(fingerprint.ABSENT,
                         fingerprint.of_source(SOURCE, 'Other.move'))

    def test_recorded_match_the_installed_release(self):
        """The fingerprints recorded for the installed nova's series are
        those of the installed nova (when it is the tested release).
        """
        version = activation.nova_version()
        series = activation.series_of(version)
        installed = {target.path: fingerprint.of_installed(target)
                     for fix in fixes.FIXES
                     for target in registry.targets_of(fix, series)}
        if registry.RELEASES[series][0] == version:
            self.assertEqual(fingerprint.recorded()[series], installed)
            return
        # A distribution's own nova of the series (Debian 13's 31.0.0):
        # one of the distribution trees recorded for it, whole.
        trees = fingerprint.originals(series)[1:]
        if not trees or '/dist-packages/' not in fingerprint.module_file(
                'nova'):
            self.skipTest('nova %s is not the release recorded for %s, nor '
                          "a distribution's package of it" % (version,
                                                              series))
        self.assertIn(installed, [fingerprint.recorded()[key]
                                  for key, _what in trees])

    def test_of_object_is_of_installed(self):
        """The live function's own lines give the value of its module."""
        series = activation.series_of(activation.nova_version())
        for fix in fixes.FIXES:
            for target in registry.targets_of(fix, series):
                if target.new or not set(target.services) & set(
                        registry.DEFAULT_SERVICES):
                    # nova-manage's module is not imported here (see
                    # registry.DEFAULT_SERVICES).
                    continue
                owner, name = activation._resolve(target.path)
                self.assertEqual(
                    fingerprint.of_installed(target),
                    fingerprint.of_object(
                        inspect.unwrap(getattr(owner, name))),
                    target.path)

    def test_every_target_is_recorded_for_every_series_of_its_fix(self):
        recorded = fingerprint.recorded()
        for fix in fixes.FIXES:
            for series in fix.series:
                for target in registry.targets_of(fix, series):
                    self.assertIn(target.path, recorded[series])
                    if target.new:
                        self.assertEqual(fingerprint.ABSENT,
                                         recorded[series][target.path])
