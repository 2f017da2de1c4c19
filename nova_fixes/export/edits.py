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

"""Helpers for the edits a fix's patch makes to nova's own tests."""

import ast

from nova_fixes import errors


def edit_python(files, path, edit):
    if path not in files:
        raise errors.ExportError('the nova tree has no %s' % path)
    text = edit(files[path])
    compile(text, path, 'exec')
    return {path: text}


def function(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def calls(node, attr):
    return any(isinstance(sub, ast.Call) and
               isinstance(sub.func, ast.Attribute) and sub.func.attr == attr
               for sub in ast.walk(node))
