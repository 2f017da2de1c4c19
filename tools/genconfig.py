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

"""Write the sample of the options nova-fixes adds to nova.conf.

oslo-config-generator for the namespace nova_fixes.conf (the
oslo.config.opts entry point of setup.cfg), written to a file whose
directory is created if need be. nova-fixes has no option in [DEFAULT],
so the empty [DEFAULT] header the generator always starts with is left
out.
"""

import argparse
import io
import os
import sys

from oslo_config import cfg
from oslo_config import generator

NAMESPACE = 'nova_fixes.conf'
DEFAULT = '[DEFAULT]\n'


def sample():
    conf = cfg.ConfigOpts()
    generator.register_cli_opts(conf)
    conf(['--namespace', NAMESPACE], project='nova-fixes')
    out = io.StringIO()
    generator.generate(conf, output_file=out)
    text = out.getvalue()
    if text.startswith(DEFAULT):
        rest = text[len(DEFAULT):].lstrip('\n')
        if not rest or rest.startswith('['):
            # [DEFAULT] has no option of nova-fixes.
            text = rest
    if not text.strip():
        raise SystemExit(
            'genconfig: no option found in the namespace %s: install '
            'nova-fixes in this environment first (pip install --no-deps '
            '-e .)' % NAMESPACE)
    return text


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('output_file')
    args = p.parse_args()
    text = sample()
    directory = os.path.dirname(os.path.abspath(args.output_file))
    os.makedirs(directory, exist_ok=True)
    with open(args.output_file, 'w') as f:
        f.write(text)
    print('wrote %s' % args.output_file)
    return 0


if __name__ == '__main__':
    sys.exit(main())
