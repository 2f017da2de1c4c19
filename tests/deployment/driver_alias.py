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

"""nova.virt.deploy_gated: the deployment test's driver where nova looks.

nova loads ``compute_driver`` from the nova.virt package only. Imported
before nova's main() (no nova import here, so nova's monkey patching
still runs first), this adds the module ``nova.virt.deploy_gated``, which
is tests.deployment.virt, so that ``compute_driver =
deploy_gated.GatedFakeDriver`` selects it. The compute service is
otherwise started exactly as its console script starts it.
"""

import importlib
import importlib.abc
import importlib.util
import sys

NAME = 'nova.virt.deploy_gated'


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):

    def find_spec(self, fullname, path, target=None):
        if fullname == NAME:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module('tests.deployment.virt')

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
