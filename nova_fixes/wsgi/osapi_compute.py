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
attribute ``application``) instead of ``nova.wsgi.osapi_compute``, or use
the ``nova-fixes-api-wsgi`` script.
"""

from nova import monkey_patch; monkey_patch.patch(backend='threading')  # noqa

import nova_fixes  # noqa: E402


def init_application():
    nova_fixes.activate()
    from nova.wsgi import osapi_compute
    return osapi_compute.application


application = init_application()
