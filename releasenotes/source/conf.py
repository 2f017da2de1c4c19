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

"""Sphinx configuration of the nova-fixes release notes (tox -e
releasenotes): reno's directive renders releasenotes/notes/ from the git
history, with Sphinx's own default theme.
"""

extensions = ['reno.sphinxext']
project = 'nova-fixes Release Notes'
copyright = 'nova-fixes developers'
master_doc = 'index'
exclude_patterns = []
