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

"""Starts a test worker of nova's own suites with the drop-ins active.

worker.py runs ``<python> <this file> -m stestr.subunit_runner.run ...``
when NOVA_FIXES_WORKER_BOOT names this file (tools/nova_gate.py
--drop-ins): nova's tests package is imported first (it monkey patches
eventlet before anything imports the rest of nova, as in
tests/nova_intree), then every fix is activated, then the worker runs
nova's unedited tests in this process.
"""

import importlib
import runpy
import sys


def main(argv):
    if argv[:1] != ['-m'] or len(argv) < 2:
        sys.stderr.write('dropin_boot.py: expected -m MODULE ARGS...\n')
        return 2
    module = argv[1]
    importlib.import_module('nova.tests')
    import nova_fixes
    from nova_fixes import registry
    # nova-manage's drop-ins too: nova's tests run it in this process,
    # which nova's test packages have monkey patched already.
    nova_fixes.activate(services=registry.SERVICES)
    sys.argv = [module] + argv[2:]
    runpy.run_module(module, run_name='__main__', alter_sys=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
