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

"""A fixture that activates nova-fixes for one test."""

import fixtures

from nova_fixes import activation


class NovaFixes(fixtures.Fixture):
    """Activate the drop-ins of ``bugs`` (default: all) for one test, in
    ``services`` (default: every service; see activation.activate).

    Only what this fixture activated is undone at cleanup, so it composes
    with a process that activated nova-fixes itself.
    """

    def __init__(self, bugs=None, services=None):
        super().__init__()
        self.bugs = bugs
        self.services = services

    def _setUp(self):
        activated = activation.activate(self.bugs, services=self.services)
        if activated:
            self.addCleanup(activation.deactivate, activated)
        self.activated = activated
