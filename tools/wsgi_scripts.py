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

"""Put pbr's wsgi_scripts of nova-fixes into an editable environment.

pip creates the console_scripts of an editable install, but pbr writes
its wsgi_scripts (nova-fixes-api-wsgi) only into a wheel, so the tox
environments, which install nova-fixes editable, had none. For each
wsgi_scripts entry point of the installed nova-fixes whose script is
missing or names another function, this builds a wheel of the source
tree (once) and installs the script from it the way pip installs a
wheel's scripts: next to this python, its "#!python" line naming this
interpreter. A script already up to date costs nothing, and so does an
env that does not install nova-fixes.
"""

import glob
import importlib.metadata
import os
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _up_to_date(path, entry_point):
    module, _, attr = entry_point.value.partition(':')
    try:
        with open(path) as f:
            return 'from %s import %s\n' % (module, attr) in f.read()
    except FileNotFoundError:
        return False


def main():
    try:
        dist = importlib.metadata.distribution('nova-fixes')
    except importlib.metadata.PackageNotFoundError:
        # An env that does not install nova-fixes (skip_install).
        return 0
    bindir = sysconfig.get_path('scripts')
    wanted = [ep for ep in dist.entry_points if ep.group == 'wsgi_scripts']
    missing = [ep.name for ep in wanted
               if not _up_to_date(os.path.join(bindir, ep.name), ep)]
    if not missing:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--quiet',
                        '--no-deps', '--wheel-dir', tmp, TREE], check=True)
        with zipfile.ZipFile(glob.glob(os.path.join(tmp, '*.whl'))[0]) as z:
            scripts = {os.path.basename(n): n for n in z.namelist()
                       if '.data/scripts/' in n}
            for name in missing:
                text = z.read(scripts[name]).decode()
                if text.startswith('#!python'):
                    text = '#!%s%s' % (sys.executable, text[len('#!python'):])
                path = os.path.join(bindir, name)
                with open(path, 'w') as f:
                    f.write(text)
                os.chmod(path, 0o755)
                print('installed %s' % path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
