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

"""Sphinx configuration of the nova-fixes guide (tox -e docs).

Built from the repository's root with
``sphinx-build -W --keep-going -b html doc/source doc/build/html``:
reno's directive reads releasenotes/notes/ from the git history, the
option pages import nova-fixes' options (namespace nova_fixes.conf) and
the command reference imports nova_fixes.cmd.main's parser.
"""

import os

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    'reno.sphinxext',
    'sphinxarg.ext',
]

project = 'nova-fixes'
copyright = 'nova-fixes developers'
master_doc = 'index'
exclude_patterns = []
templates_path = []
pygments_style = 'native'
# Literal blocks (::) are command output and tables, not Python: no
# highlighting unless a code-block names its language.
highlight_language = 'none'
# Keep "--" as two hyphens in option names (the argparse help), quotes
# and ellipses only.
smartquotes_action = 'qe'

# The sample nova.conf section: oslo-config-generator with
# doc/config-generator.conf, written to
# doc/source/_generated/nova-fixes.conf.sample at each build (not
# committed) and shown by admin/orphan-instances.rst.
config_generator_config_file = [
    (os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                  'config-generator.conf'),
     '_generated/nova-fixes'),
]

html_theme = 'openstackdocs'
html_theme_options = {
    'display_badge': False,
}

# openstackdocstheme: the repository, for its links and page dates.
openstackdocs_repo_name = 'nova-fixes'
openstackdocs_auto_name = False
openstackdocs_use_storyboard = False
openstackdocs_bug_project = 'nova'
openstackdocs_bug_tag = 'nova-fixes'
