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

"""WSGI entry point of the compute API with the fixes active.

Point the WSGI server at this module (``nova_fixes.wsgi.osapi_compute``,
attribute ``application``) instead of nova's, or use the
``nova-fixes-api-wsgi`` script. Importing it builds the application, as
nova's own WSGI module of the installed series does (same monkey patching,
configuration from ``OS_NOVA_CONFIG_DIR``, app factory); see
nova_fixes.cmd.services.
"""

import nova_fixes
from nova_fixes.cmd import services

application = None


def init_application():
    """The application; built once (the module builds it when imported)."""
    global application
    if application is None:
        application = services.wsgi_application(
            lambda: nova_fixes.activate(services=['api']))
    return application


init_application()
