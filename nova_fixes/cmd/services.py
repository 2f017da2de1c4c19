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

"""nova-compute and nova-conductor with the fixes active.

Each entry point imports nova's own starter module first, so that nova's
monkey patching runs before any other nova import exactly as it does for
nova's own console scripts, then activates the fixes and hands over to
nova's main(). Activation is all or nothing: on an unsupported or
unexpected nova the service refuses to start with an error naming the
target, rather than running half fixed.
"""

import sys


def _run(starter):
    import nova_fixes
    try:
        nova_fixes.activate()
    except nova_fixes.NovaFixesError as e:
        sys.stderr.write('nova-fixes: %s\n' % e)
        return 2
    return starter.main()


def compute():
    from nova.cmd import compute as nova_compute
    return _run(nova_compute)


def conductor():
    from nova.cmd import conductor as nova_conductor
    return _run(nova_conductor)
