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

"""Runs one stestr test worker and records its stderr and exit status.

stestr starts each worker as ``$PYTHON -m stestr.subunit_runner.run ...``
and never looks at its exit status; the recreate runner sets PYTHON to
``<python> <this file>``, so this script runs the worker (the rest of its
arguments, with the same Python), its stdout (the subunit stream) going
to stestr as before, its stderr into ``<dir>/<name>.stderr`` and then its
exit status into ``<dir>/<name>.status``, in the directory named by
WORKER_DIR. The runner shows what a worker left there when it exited
non-zero or wrote anything on stderr.

Run as a script, so that it imports nothing of the tests.
"""

import os
import subprocess
import sys
import tempfile

WORKER_DIR = 'NOVA_FIXES_WORKER_DIR'
#: A script that starts the worker in its place (tools/nova_gate.py
#: --drop-ins: dropin_boot.py), given the same arguments.
BOOT = 'NOVA_FIXES_WORKER_BOOT'
STDERR = '.stderr'
STATUS = '.status'


def main(argv):
    directory = os.environ[WORKER_DIR]
    fd, stderr_path = tempfile.mkstemp(prefix='worker-', suffix=STDERR,
                                       dir=directory)
    with os.fdopen(fd, 'wb') as stderr:
        boot = [os.environ[BOOT]] if os.environ.get(BOOT) else []
        status = subprocess.call([sys.executable] + boot + argv,
                                 stderr=stderr)
    name = stderr_path[:-len(STDERR)]
    with open(name + STATUS + '.tmp', 'w') as f:
        f.write('%d\n' % status)
    os.rename(name + STATUS + '.tmp', name + STATUS)
    return 0 if status == 0 else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
