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

"""The sample config keeps the help texts' lines as they are written."""

import io

import fixtures
from oslo_config import cfg
from oslo_config import generator
import testtools

from nova_fixes.nova import conf


def _formatter():
    """The generator's formatter, with the settings tox -e genconfig uses.

    Its wrap width is the generator's own default (--wrap-width), not a
    number of ours.
    """
    generator_conf = cfg.ConfigOpts()
    generator.register_cli_opts(generator_conf)
    generator_conf(['--namespace', 'nova_fixes.conf'], project='nova-fixes')
    out = io.StringIO()
    return generator._OptFormatter(generator_conf, output_file=out), out


class SampleWrappingTestCase(testtools.TestCase):

    def setUp(self):
        super(SampleWrappingTestCase, self).setUp()
        # tox -e genconfig installs oslo.config alone: no rst2txt, so the
        # generator wraps each line of a help text on its own (textwrap),
        # leaving a short remainder alone on a line when one is too long.
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_config.generator.rst2txt', None))

    def assertKept(self, help_text, rendered, what):
        """Each line of help_text is a whole '# ' line of rendered."""
        expected = ['# ' + line if line else '#'
                    for line in help_text.splitlines()]
        lines = rendered.splitlines()
        for start in range(len(lines) - len(expected) + 1):
            if lines[start:start + len(expected)] == expected:
                return
        too_long = [line for line in expected
                    if line not in lines]
        self.fail('the sample re-wraps the help of %s; rewrap these lines '
                  'of it to fit the generator\'s width:\n%s\nsample:\n%s'
                  % (what, '\n'.join(too_long), rendered))

    def test_every_help_line_fits_the_generators_width(self):
        groups = conf.list_opts()
        self.assertNotEqual([], groups)
        for group, opts in groups:
            formatter, out = _formatter()
            formatter.format_group(group)
            self.assertKept(group.help, out.getvalue(), '[%s]' % group.name)
            self.assertNotEqual([], opts)
            for opt in opts:
                formatter, out = _formatter()
                formatter.format(opt, group.name)
                self.assertKept(opt.help, out.getvalue(),
                                '[%s]%s' % (group.name, opt.name))

    def test_a_line_too_long_is_caught(self):
        # The check itself: a line that fills the generator's width with
        # its '# ' passes, one character more fails.
        formatter, out = _formatter()
        fits = 'x' * (formatter.wrap_width - len('# ') - len(' word'))
        group = cfg.OptGroup('g', help='\nfirst\n%s word\nlast\n' % fits)
        formatter.format_group(group)
        self.assertKept(group.help, out.getvalue(), '[g]')
        formatter, out = _formatter()
        group = cfg.OptGroup('g', help='\nfirst\n%s word!\nlast\n' % fits)
        formatter.format_group(group)
        self.assertRaises(self.failureException, self.assertKept,
                          group.help, out.getvalue(), '[g]')
