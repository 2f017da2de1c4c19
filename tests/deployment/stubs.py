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

"""What the deployment test serves in place of glance and neutron.

The deployment runs nova and placement for real; the image and network
services are not part of what it tests. One image, and a network service
that knows no port, network or extension, on loopback. Calls it does not
know get 404 and are recorded in ``unexpected``.

Images can also be created, read, updated and deleted: a cross-cell
resize snapshots the server's root disk into a new image, boots the
destination from it and deletes it. The stub keeps them in memory
(``created``, ``deleted``); nothing is uploaded.
"""

import copy
import http.server
import json
import threading
import uuid

IMAGE_ID = '155d900f-4e14-4e4c-a73d-069cbf4541e6'
IMAGE = {
    'id': IMAGE_ID, 'name': 'deploy-test', 'status': 'active',
    'visibility': 'public', 'protected': False, 'os_hidden': False,
    'container_format': 'bare', 'disk_format': 'raw', 'size': 25165824,
    'min_disk': 0, 'min_ram': 0, 'tags': [], 'owner': 'admin',
    'checksum': None, 'os_hash_algo': None, 'os_hash_value': None,
    'created_at': '2026-01-01T00:00:00Z', 'updated_at': '2026-01-01T00:00:00Z',
    'file': '/v2/images/%s/file' % IMAGE_ID, 'schema': '/v2/schemas/image',
    'self': '/v2/images/%s' % IMAGE_ID, 'architecture': 'x86_64',
}
# The image schema glanceclient builds its model from: every field a
# string, except those below.
_TYPES = {'size': ['null', 'integer'], 'min_disk': 'integer',
          'min_ram': 'integer', 'protected': 'boolean',
          'os_hidden': 'boolean', 'tags': 'array'}
SCHEMA = {
    'name': 'image',
    'properties': {k: {'type': _TYPES.get(k, ['null', 'string'])}
                   for k in IMAGE},
    'additionalProperties': {'type': 'string'},
    'links': [],
}
SCHEMA['properties']['tags']['items'] = {'type': 'string'}
ANSWERS = {
    '/v2/schemas/image': SCHEMA,
    '/v2/images/' + IMAGE_ID: IMAGE,
    '/v2/images': {'images': [IMAGE]},
    '/v2.0/ports': {'ports': []},
    '/v2.0/networks': {'networks': []},
    '/v2.0/floatingips': {'floatingips': []},
    '/v2.0/security-groups': {'security_groups': []},
    '/v2.0/subnets': {'subnets': []},
}


class StubServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, extensions=()):
        """:param extensions: aliases of the network API extensions it
            lists (none by default)
        """
        self.extensions = {'extensions': [
            {'alias': alias, 'name': alias, 'description': alias,
             'updated': '2026-01-01T00:00:00Z', 'links': []}
            for alias in extensions]}
        self.unexpected = []
        self.images = {}
        self.created = []
        self.deleted = []
        self.lock = threading.Lock()
        super(StubServer, self).__init__(('127.0.0.1', 0), _Handler)
        self.port = self.server_address[1]
        self.url = 'http://127.0.0.1:%d' % self.port
        self._thread = threading.Thread(target=self.serve_forever,
                                        daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):

    def log_message(self, *args):
        pass

    def _request_body(self):
        length = int(self.headers.get('Content-Length') or 0)
        raw = self.rfile.read(length) if length else b''
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _images(self, path):
        """(status, body) for the image calls a snapshot makes, or None."""
        server = self.server
        if path == '/v2/images' and self.command == 'POST':
            body = self._request_body() or {}
            image = copy.deepcopy(IMAGE)
            image.update({k: v for k, v in body.items()
                          if isinstance(v, str) or k in _TYPES})
            image.update({'id': str(uuid.uuid4()), 'status': 'queued',
                          'size': None, 'checksum': None})
            image['self'] = '/v2/images/%s' % image['id']
            image['file'] = image['self'] + '/file'
            with server.lock:
                server.images[image['id']] = image
                server.created.append(image['id'])
            return 201, image
        if not path.startswith('/v2/images/'):
            return None
        image_id = path.split('/')[3]
        with server.lock:
            image = server.images.get(image_id)
            if image is None and image_id in server.deleted:
                # As glance answers for an image deleted already.
                return 404, {'error': 'image %s deleted' % image_id}
            if image is None:
                return None
            if self.command == 'GET' and path == '/v2/images/' + image_id:
                return 200, image
            if self.command == 'PATCH':
                for change in self._request_body() or []:
                    name = change.get('path', '').lstrip('/')
                    if change.get('op') in ('add', 'replace'):
                        image[name] = change.get('value')
                    elif change.get('op') == 'remove':
                        image.pop(name, None)
                return 200, image
            if self.command == 'PUT' and path.endswith('/file'):
                image['status'] = 'active'
                return 204, None
            if self.command == 'DELETE':
                del server.images[image_id]
                server.deleted.append(image_id)
                return 204, None
        return None

    def _answer(self):
        path = self.path.split('?')[0].rstrip('/')
        if path.endswith('.json'):
            path = path[:-5]
        answer = self._images(path)
        if path == '/v2.0/extensions' and self.command == 'GET':
            answer = 200, self.server.extensions
        if answer is None and self.command == 'GET' and path in ANSWERS:
            answer = 200, ANSWERS[path]
        if answer is None:
            self.server.unexpected.append('%s %s' % (self.command, self.path))
            answer = 404, {'error': 'not served by the deployment test stub'}
        status, body = answer
        self.send_response(status)
        data = json.dumps(body).encode() if body is not None else b''
        if data:
            self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer
