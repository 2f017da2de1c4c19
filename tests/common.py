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

"""What every test suite of nova-fixes shares; imports no nova at import
time, so that a suite can import it before nova's own test package.
"""

import functools
import os
import sys

#: Starts the message of every leak assertion, so that the recreate report
#: tells a test that recreated its bug from one that broke another way.
LEAK = 'LEAK: '

#: NOVA_FIXES_MODE: the nova under test in a test process.
MODES = ('dropin', 'vanilla', 'patched')


def mode():
    value = os.environ.get('NOVA_FIXES_MODE', 'dropin')
    if value not in MODES:
        raise ValueError('NOVA_FIXES_MODE=%r is not one of %s'
                         % (value, ', '.join(MODES)))
    return value


def api_paste_config():
    """Where nova's api-paste.ini is for the installed nova.

    nova's test configuration looks under the parent of the nova package,
    but a wheel installs data files under the environment's prefix, and a
    distribution's package elsewhere again (Debian's nova-common has it in
    /usr/share/nova-common): $NOVA_FIXES_API_PASTE names the file then.
    """
    import nova
    if os.environ.get('NOVA_FIXES_API_PASTE'):
        return os.environ['NOVA_FIXES_API_PASTE']
    candidates = [
        os.path.join(os.path.dirname(os.path.dirname(nova.__file__)),
                     'etc', 'nova', 'api-paste.ini'),
        os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini'),
    ]
    for path in candidates:
        if os.path.exists(path):
            return path
    raise RuntimeError('nova api-paste.ini not found in %s' % candidates)


def install_api_paste_config():
    """Make every nova ConfFixture set [wsgi]api_paste_config to the file.

    An override set right after the fixture's setUp outlives the defaults
    it sets, and its conf.reset() at cleanup removes it, so each test sets
    it again. Installed once per process.
    """
    from nova.tests.fixtures import conf as conf_fixture
    cls = conf_fixture.ConfFixture
    if getattr(cls.setUp, '_nova_fixes_api_paste', None):
        return
    path = api_paste_config()
    original = cls.setUp

    @functools.wraps(original)
    def setUp(self):
        original(self)
        self.conf.set_override('api_paste_config', path, group='wsgi')

    setUp._nova_fixes_api_paste = path
    cls.setUp = setUp
