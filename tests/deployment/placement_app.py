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

"""Placement's own WSGI application with the deployment test's claim gate.

Served instead of ``placement.wsgi.api:application``: placement itself is
unchanged. When the file $NOVA_FIXES_DEPLOY_GATES/placement.claims.arm
holds a number N, the Nth successful claim (PUT /allocations/<consumer>)
made from then on is answered only after the test has created
placement.claims.release: the scheduler has claimed, and the test does
what it needs (stop the message bus, lower a quota) before the scheduler
goes on. placement.claims.reached is created when the gate closes. A file
placement.down makes every request get 503, as from a proxy whose
placement is down.
"""

import os
import re
import threading
import time

from placement.wsgi import api

GATE_TIMEOUT = 180
_CLAIM = re.compile(r'^/allocations/[0-9a-f-]{36}$')
_lock = threading.Lock()
_counted = [0]


def _path(name):
    return os.path.join(os.environ['NOVA_FIXES_DEPLOY_GATES'],
                        'placement.' + name)


def _hold():
    with open(_path('reached'), 'w'):
        pass
    deadline = time.monotonic() + GATE_TIMEOUT
    while (not os.path.exists(_path('release')) and
           time.monotonic() < deadline):
        time.sleep(0.1)
    for name in ('claims.arm', 'reached', 'release'):
        try:
            os.unlink(_path(name))
        except FileNotFoundError:
            pass


def application(environ, start_response):
    if os.path.exists(_path('down')):
        start_response('503 Service Unavailable',
                       [('Content-Type', 'text/plain')])
        return [b'placement is down (deployment test)']
    claim = (environ['REQUEST_METHOD'] == 'PUT' and
             _CLAIM.match(environ.get('PATH_INFO', '')))
    status = []

    def start(s, headers, exc_info=None):
        status.append(s)
        return start_response(s, headers, exc_info)

    body = list(api.application(environ, start))
    if claim and status and status[0].startswith('204'):
        with _lock:
            try:
                with open(_path('claims.arm')) as f:
                    wanted = int(f.read().strip())
            except (FileNotFoundError, ValueError):
                wanted = None
                _counted[0] = 0
            hold = False
            if wanted:
                _counted[0] += 1
                hold = _counted[0] >= wanted
        if hold:
            _counted[0] = 0
            _hold()
    return body
