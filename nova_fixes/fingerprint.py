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

"""Fingerprints of the nova code that drop-ins replace.

A fingerprint is a hash of the syntax tree of one function or class as
written in nova's source file: comments, blank lines and formatting do not
change it, any change to the code (a distro backport, a new release) does.
The same function computes it from an installed nova and from a nova git
tree, so fingerprints can be recorded for every series from nova's tags.

At activation the live function is fingerprinted from its own lines only
(of_object): parsing the whole of nova's compute/manager.py takes tenths
of a second, the function alone a millisecond. Positions are not part of
the hash, so both give the same value.
"""

import ast
import hashlib
import importlib.util
import inspect
import json
import os

from nova_fixes import fixes
from nova_fixes import registry

ABSENT = 'absent'
_DATA = os.path.join(os.path.dirname(__file__), 'fingerprints.json')


def _canonical(node):
    """A stable text form of an AST node.

    ast.dump() changes between Python versions (3.13 omits empty fields,
    3.12 added type_params), so fields that are None or empty are left out
    and positions are never included.
    """
    if isinstance(node, ast.AST):
        parts = []
        for name in node._fields:
            value = getattr(node, name, None)
            if value is None or value == []:
                continue
            parts.append('%s=%s' % (name, _canonical(value)))
        return '%s(%s)' % (type(node).__name__, ','.join(parts))
    if isinstance(node, list):
        return '[%s]' % ','.join(_canonical(item) for item in node)
    return repr(node)


def _find(tree, attribute):
    node = tree
    for name in attribute.split('.'):
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                   ast.ClassDef)) and child.name == name):
                node = child
                break
        else:
            return None
    return node


def _digest(node):
    digest = hashlib.sha256(_canonical(node).encode('utf-8'))
    return digest.hexdigest()[:20]


def of_source(source, attribute):
    """Fingerprint of ``attribute`` (dotted) in module source text.

    Returns ABSENT when the module does not define it.
    """
    node = _find(ast.parse(source), attribute)
    if node is None:
        return ABSENT
    return _digest(node)


def of_object(obj):
    """Fingerprint of a function or class from its own source lines.

    The same value as of_source() of the module it is defined in, for the
    definition ``obj`` comes from (decorators included): only its lines
    are read (inspect.getsourcelines, which unwraps decorated functions)
    and parsed, a method's as the body of an ``if`` so that its
    indentation stays as it is.
    """
    lines, _ = inspect.getsourcelines(obj)
    source = ''.join(lines)
    if source[:1].isspace():
        return _digest(ast.parse('if 1:\n' + source).body[0].body[0])
    return _digest(ast.parse(source).body[0])


def module_file(module):
    """The source file of ``module``, found from its top package's
    location without importing any of its packages: importing
    nova.cmd (to find nova.cmd.manage) would monkey patch this process
    with eventlet on nova 33 and earlier.
    """
    top, *parts = module.split('.')
    spec = importlib.util.find_spec(top)
    if spec is None:
        return None
    if not parts:
        return spec.origin
    for location in spec.submodule_search_locations or ():
        base = os.path.join(location, *parts)
        for path in (base + '.py', os.path.join(base, '__init__.py')):
            if os.path.isfile(path):
                return path
    return None


def of_installed(target):
    """Fingerprint of a registry Target in the nova that is importable."""
    path = module_file(target.module)
    if path is None:
        return ABSENT
    with open(path, encoding='utf-8') as f:
        return of_source(f.read(), target.attribute)


def of_tree(tree, target):
    """Fingerprint of a registry Target in a nova source tree."""
    path = os.path.join(tree, *target.module.split('.')) + '.py'
    if not os.path.exists(path):
        return ABSENT
    with open(path, encoding='utf-8') as f:
        return of_source(f.read(), target.attribute)


def recorded():
    """{series: {target path: fingerprint}} as recorded in the package."""
    with open(_DATA, encoding='utf-8') as f:
        return json.load(f)


def originals(series, data=None):
    """[(key, what it is)] of the originals recorded for ``series``: the
    series' release, then the distribution trees of that series
    (registry.DISTRIBUTION_SETS) that have fingerprints of their own.
    """
    data = recorded() if data is None else data
    keys = [(series, 'nova %s' % registry.RELEASES[series][0])]
    keys += [(name, '%s: %s' % (name, what)) for name, (of, what)
             in sorted(registry.DISTRIBUTION_SETS.items())
             if of == series and name in data]
    return [(key, what) for key, what in keys if key in data]


def record(series, tree, data=_DATA, name=None):
    """Record the fingerprints of every target of a series, as a nova
    source tree of that series has them; returns them. ``name``: a
    distribution set of the series (registry.DISTRIBUTION_SETS) whose
    own tree ``tree`` is, recorded beside the release's.
    """
    registry.check_series(series)
    if name is not None:
        registry.check_set(name, series)
    found = {target.path: of_tree(tree, target) for fix in fixes.FIXES
             for target in registry.targets_of(fix, series)}
    with open(data, encoding='utf-8') as f:
        everything = json.load(f)
    everything[name or series] = found
    with open(data, 'w', encoding='utf-8') as f:
        f.write(json.dumps(everything, indent=2, sort_keys=True) + '\n')
    return found
