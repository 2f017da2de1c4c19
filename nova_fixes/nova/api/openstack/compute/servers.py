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

"""Drop-ins for nova/api/openstack/compute/servers.py.

ServersController.delete lets only 404 and 409 through its
expected_errors decorator and turns any other exception into a 500
"Unexpected API Error", so PlacementUnavailableForDelete (bug 1859496,
raised by API._attempt_delete_of_buildrequest) would never reach the user
as the 503 it is. The drop-in is nova's method with 503 among its expected
errors and one more except clause.

nova 33.0.0 (2026.1) added a response schema to the method, so it has a
drop-in per form: ServersController for 2026.1 and later,
ServersControllerBefore2026 for 2022.2 to 2025.2 (the fix's targets say
which series take which). The first is defined only on a nova that has
that schema.
"""

from webob import exc

from nova.api.openstack import common
from nova.api.openstack.compute.schemas import servers as schema
from nova.api.openstack import wsgi
from nova.api import validation
from nova import exception
from nova.i18n import _


class ServersControllerBefore2026(object):
    """Replaces ServersController.delete of nova 26 to 32 (bug 1859496).

    The method's own docstring is nova's, as the patch keeps it.
    """

    @wsgi.response(204)
    @wsgi.expected_errors((404, 409, 503))
    def delete(self, req, id):
        """Destroys a server."""
        try:
            self._delete(req.environ['nova.context'], req, id)
        except exception.InstanceNotFound:
            msg = _("Instance could not be found")
            raise exc.HTTPNotFound(explanation=msg)
        except (exception.InstanceIsLocked,
                exception.AllocationDeleteFailed) as e:
            raise exc.HTTPConflict(explanation=e.format_message())
        except exception.InstanceInvalidState as state_error:
            common.raise_http_conflict_for_instance_invalid_state(state_error,
                    'delete', id)
        except exception.PlacementUnavailableForDelete as e:
            raise exc.HTTPServiceUnavailable(
                explanation=e.format_message())


if hasattr(schema, 'delete_response'):
    class ServersController(object):
        """Replaces ServersController.delete of nova 33 and later (bug
        1859496).
        """

        @wsgi.response(204)
        @wsgi.expected_errors((404, 409, 503))
        @validation.response_body_schema(schema.delete_response)
        def delete(self, req, id):
            """Destroys a server."""
            try:
                self._delete(req.environ['nova.context'], req, id)
            except exception.InstanceNotFound:
                msg = _("Instance could not be found")
                raise exc.HTTPNotFound(explanation=msg)
            except (
                exception.InstanceIsLocked, exception.AllocationDeleteFailed
            ) as e:
                raise exc.HTTPConflict(explanation=e.format_message())
            except exception.InstanceInvalidState as state_error:
                common.raise_http_conflict_for_instance_invalid_state(
                    state_error, 'delete', id)
            except exception.PlacementUnavailableForDelete as e:
                raise exc.HTTPServiceUnavailable(
                    explanation=e.format_message())
