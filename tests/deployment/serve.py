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

"""gunicorn, for WSGI applications that read sys.argv themselves.

nova's compute API application parses sys.argv for its options (uWSGI
passes it --pyargv): under gunicorn it would find gunicorn's own options
there. ``python -m tests.deployment.serve [gunicorn options] MODULE:APP``
runs gunicorn with them and hands the application an empty command line.
"""

import sys

from gunicorn.app import wsgiapp


class Application(wsgiapp.WSGIApplication):

    def load_wsgiapp(self):
        sys.argv = sys.argv[:1]
        return super(Application, self).load_wsgiapp()


if __name__ == '__main__':
    Application('%(prog)s [OPTIONS] [APP_MODULE]', prog='gunicorn').run()
