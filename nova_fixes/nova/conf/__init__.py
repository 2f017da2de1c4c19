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

"""oslo.config options of the nova-fixes drop-ins, as nova/conf keeps its own.

Each options module here is the one the patches add to nova/conf (as
nova/conf/orphan_instances.py); the drop-ins register them on nova's own
configuration object, so that they are read from nova.conf like nova's
options. The oslo-config-generator namespace stays ``nova_fixes.conf``.
"""

from nova_fixes.nova.conf import orphan_instances


def register_opts(conf):
    orphan_instances.register_opts(conf)


def list_opts():
    """For oslo-config-generator --namespace nova_fixes.conf."""
    return [(group, opts) for mod in (orphan_instances,)
            for group, opts in mod.list_opts().items()]
