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

"""The released nova of a series, as a source tree.

Patches are built and verified against the sdist of the nova release
each series is tested with (registry.RELEASES), downloaded once with pip
from the package index and unpacked in a cache directory
($NOVA_FIXES_CACHE, default ~/.cache/nova-fixes).
"""

import os
import subprocess
import sys
import tarfile
import tempfile

from nova_fixes import errors
from nova_fixes import registry


def cache_dir():
    return os.environ.get('NOVA_FIXES_CACHE') or os.path.join(
        os.path.expanduser('~'), '.cache', 'nova-fixes')


def released_tree(series):
    """The unpacked sdist of the series' nova release; downloaded once."""
    registry.check_series(series)
    version = registry.RELEASES[series][0]
    root = cache_dir()
    tree = os.path.join(root, 'nova-%s' % version)
    if os.path.isfile(os.path.join(tree, 'PKG-INFO')):
        return tree
    os.makedirs(root, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        cmd = [sys.executable, '-m', 'pip', 'download', '--no-deps',
               '--no-binary', ':all:', '--no-build-isolation', '-q',
               '-d', tmp, 'nova==%s' % version]
        result = subprocess.run(cmd, capture_output=True, text=True,
                                env=dict(os.environ, PIP_CONSTRAINT=''))
        tarballs = [n for n in os.listdir(tmp) if n.endswith('.tar.gz')]
        if result.returncode or not tarballs:
            raise errors.ExportError(
                'could not download the nova %s sdist for %s: %s'
                % (version, series, result.stderr.strip()[-500:]))
        with tarfile.open(os.path.join(tmp, tarballs[0])) as tar:
            tar.extractall(tmp, filter='data')
        os.rename(os.path.join(tmp, 'nova-%s' % version), tree)
    return tree
