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

"""Turn the drop-ins of a fix into edits of nova's own source files.

The drop-ins are the one source of truth: what a patch adds to nova is
their code, read from nova_fixes' files (nothing is imported, so no nova
needs to be installed), rewritten the way it reads inside nova:

* a ``new`` target is inserted: a module-level function or class at the
  end of its nova module, a method at the end of its class;
* a replaced target whose drop-in delegates to nova's original
  (``activation.original(PATH)(...)``) keeps nova's original under the
  target's ``original_as`` name, and the drop-in becomes the function of
  the target's name, calling it;
* a replaced target that does not delegate replaces nova's function;
* a ``periodic`` target is the function its drop-in factory decorates,
  with the factory's decorator;
* module-level helpers of the drop-in module that exported code uses are
  inserted before the first class the fix changes in that module (or at
  its end), and imports nova's module lacks are added in their group.

The provenance sentence that opens a drop-in's docstring ("Replaces ...",
"Added to ...") is dropped: in nova the code is simply nova's.
"""

import ast
import importlib.util
import os
import re
import sys
import textwrap

from nova_fixes import errors

#: Names of a drop-in module that only serve the drop-in itself.
NOT_EXPORTED = frozenset(('LOG', 'CONF'))

_PROVENANCE = re.compile(
    r'(?P<quotes>""")(?:Replaces|Added to) [^\n]*\n[ \t]*\n[ \t]*')
_ORIGINAL_METHOD = re.compile(
    r'activation\.original\((?P<const>\w+)\)\((?P<ws>\s*)self,\s*')
_ORIGINAL = re.compile(r'activation\.original\((?P<const>\w+)\)\(')


def nova_path(module):
    """nova.compute.manager -> nova/compute/manager.py"""
    return module.replace('.', '/') + '.py'


#: Where the nova_fixes package is: drop-in modules are read from there
#: without importing them (or their packages), so that exporting needs no
#: nova and none of the drop-ins' dependencies.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def dropin_source(module):
    """The text of a nova_fixes module, found without importing it."""
    parts = module.split('.')
    if parts[0] == 'nova_fixes':
        root = PACKAGE_DIR
    else:
        # Another top-level package (the unit tests' own): finding a
        # top-level package imports nothing.
        spec = importlib.util.find_spec(parts[0])
        if spec is None or not spec.origin:
            raise errors.ExportError('drop-in module %s not found' % module)
        root = os.path.dirname(spec.origin)
    base = os.path.join(root, *parts[1:])
    for path in (base + '.py', os.path.join(base, '__init__.py')):
        if os.path.isfile(path):
            with open(path, encoding='utf-8') as f:
                return f.read()
    raise errors.ExportError('drop-in module %s not found' % module)


class Module(object):
    """A Python module's text with the bookkeeping the edits need."""

    def __init__(self, name, text):
        self.name = name
        self.text = text

    @property
    def lines(self):
        return self.text.splitlines(True)

    @property
    def tree(self):
        return ast.parse(self.text)

    def find(self, dotted):
        """The def/class node of ``Class.attr`` or ``attr``; or None."""
        body = self.tree.body
        node = None
        for part in dotted.split('.'):
            node = _named(body, part)
            if node is None:
                return None
            body = getattr(node, 'body', [])
        return node

    def imports(self):
        """{bound name: (imported module, attribute or None, node)}"""
        bound = {}
        for node in self.tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.split('.')[0]
                    target = alias.name if alias.asname else name
                    bound[name] = (target, None, node)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                for alias in node.names:
                    bound[alias.asname or alias.name] = (
                        node.module, alias.name, node)
        return bound

    def replace_lines(self, start, end, new_text):
        """Replace lines start..end (1-based, inclusive) with new_text."""
        lines = self.lines
        self.text = ''.join(lines[:start - 1]) + new_text + ''.join(
            lines[end:])

    def insert_before(self, lineno, new_text):
        self.replace_lines(lineno, lineno - 1, new_text)


def _named(body, name):
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)) and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name
                for t in node.targets):
            return node
    return None


def _first_line(node):
    decorators = getattr(node, 'decorator_list', [])
    return min([node.lineno] + [d.lineno for d in decorators])


def _segment(module, node):
    lines = module.lines[_first_line(node) - 1:node.end_lineno]
    return ''.join(lines)


def _resolves_to(binding):
    module, attribute, _node = binding
    return module if attribute is None else '%s.%s' % (module, attribute)


def _is_stdlib(module):
    return module.split('.')[0] in sys.stdlib_module_names


def _import_group(module):
    if module == 'nova' or module.startswith('nova.'):
        return 2
    return 0 if _is_stdlib(module) else 1


def _import_key(text):
    """The key OpenStack's hacking sorts an import statement by."""
    text = text.strip()
    for prefix in ('from ', 'import '):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text.replace(' import ', '.').lower()


def _import_line(binding, name):
    module, attribute, _node = binding
    if attribute is None:
        if name == module.split('.')[0]:
            return 'import %s\n' % module
        return 'import %s as %s\n' % (module, name)
    if name == attribute:
        return 'from %s import %s\n' % (module, attribute)
    return 'from %s import %s as %s\n' % (module, attribute, name)


class DropIn(object):
    """One drop-in module, and what of it a nova module receives."""

    def __init__(self, module_name):
        self.name = module_name
        self.module = Module(module_name, dropin_source(module_name))
        self.top = {}
        for node in self.module.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.top[node.name] = node
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.top[t.id] = node
        self.bound = self.module.imports()

    def node(self, name):
        try:
            return self.top[name]
        except KeyError:
            raise errors.ExportError('%s defines no %s' % (self.name, name))

    def names_used(self, node):
        """Top-level names of this module that node's code uses.

        The argument of activation.original() names a registry path, not
        code: it is not counted.
        """
        skip = set()
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Call) and
                    isinstance(sub.func, ast.Attribute) and
                    sub.func.attr == 'original' and
                    isinstance(sub.func.value, ast.Name) and
                    sub.func.value.id == 'activation'):
                skip.update(id(a) for a in sub.args)
                skip.add(id(sub.func.value))
        used = []
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Name) and id(sub) not in skip and
                    sub.id not in used):
                used.append(sub.id)
        return used

    def periodic_parts(self, factory_name):
        """(decorated function name, decorator text) of a task factory."""
        factory = self.node(factory_name)
        assigned = {}
        for stmt in factory.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                assigned[stmt.targets[0].id] = ast.get_source_segment(
                    self.module.text, stmt.value)
        for sub in ast.walk(factory):
            if (isinstance(sub, ast.Call) and
                    isinstance(sub.func, ast.Call) and sub.args and
                    isinstance(sub.args[0], ast.Name)):
                decorator = sub.func
                func = ast.get_source_segment(self.module.text,
                                              decorator.func)
                kwargs = []
                for kw in decorator.keywords:
                    value = ast.get_source_segment(self.module.text,
                                                   kw.value)
                    kwargs.append('%s=%s' % (kw.arg,
                                             assigned.get(value, value)))
                one_line = '@%s(%s)' % (func, ', '.join(kwargs))
                if len(one_line) <= 70:
                    return sub.args[0].id, one_line
                return sub.args[0].id, '@%s(\n%s)' % (
                    func, ',\n'.join('    ' + kw for kw in kwargs))
        raise errors.ExportError('%s.%s decorates no function'
                                 % (self.name, factory_name))


class ModuleEdit(object):
    """What one fix does to one nova module."""

    def __init__(self, nova_module, text):
        self.nova = Module(nova_module, text)
        self.dropins = {}
        self.helpers = []  # (DropIn, name), in order of first use
        self.classes = []  # the classes of nova's module that are changed

    def dropin(self, name):
        if name not in self.dropins:
            self.dropins[name] = DropIn(name)
        return self.dropins[name]

    def _code(self, dropin, node_text, names_used, renames, indent):
        """Drop-in code as it reads in this nova module."""
        text = _PROVENANCE.sub(r'\g<quotes>', node_text, count=1)
        for const, new_name in renames.items():
            text = _ORIGINAL_METHOD.sub(
                lambda m: ('self.%s(%s' % (new_name, m.group('ws'))
                           if m.group('const') == const else m.group(0)),
                text)
            text = _ORIGINAL.sub(
                lambda m: ('%s(' % new_name
                           if m.group('const') == const else m.group(0)),
                text)
        if 'activation.' in text:
            raise errors.ExportError(
                'drop-in code of %s still calls activation after export'
                % dropin.name)
        nova_bound = self.nova.imports()
        for name in names_used:
            if name in dropin.bound:
                binding = dropin.bound[name]
                target = _resolves_to(binding)
                if target == self.nova.name:
                    # The drop-in's name for this very module.
                    text = re.sub(r'\b%s\.' % re.escape(name), '', text)
                elif target == '%s.%s' % (self.nova.name, name):
                    # A name of this very module: nothing to import.
                    pass
                elif name in nova_bound:
                    if _resolves_to(nova_bound[name]) != target:
                        raise errors.ExportError(
                            '%s binds %s to %s, the drop-in to %s'
                            % (self.nova.name, name,
                               _resolves_to(nova_bound[name]), target))
                elif target.startswith('nova_fixes'):
                    raise errors.ExportError(
                        'exported code of %s uses %s from nova_fixes'
                        % (dropin.name, name))
                else:
                    self._add_import(binding, name)
            elif name in dropin.top and name not in NOT_EXPORTED:
                if (dropin, name) not in self.helpers:
                    self.helpers.append((dropin, name))
        if indent:
            text = textwrap.indent(text, ' ' * indent)
        return text

    def _add_import(self, binding, name):
        line = _import_line(binding, name)
        group = _import_group(binding[0])
        key = _import_key(line)
        after = None
        for node in self.nova.tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                if after is not None:
                    break
                continue
            mod = (node.module if isinstance(node, ast.ImportFrom)
                   else node.names[0].name)
            if node.col_offset or _import_group(mod) != group:
                if _import_group(mod) > group and after is None:
                    after = ('before', node)
                continue
            other = _import_key(ast.get_source_segment(self.nova.text, node))
            if other > key:
                self.nova.insert_before(_first_line(node), line)
                return
            after = ('after', node)
        if after is None:
            raise errors.ExportError('no import block in %s' % self.nova.name)
        where, node = after
        if where == 'before':
            self.nova.insert_before(_first_line(node), line + '\n')
        else:
            self.nova.insert_before(node.end_lineno + 1, line)

    def add(self, target, dropin_name, dropin_attr, renames):
        dropin = self.dropin(dropin_name)
        attribute = target.attribute
        owner_name, _, name = attribute.rpartition('.')
        decorator = None
        if target.periodic:
            dropin_attr, decorator = dropin.periodic_parts(dropin_attr)
        node = dropin.node(dropin_attr)
        if dropin_attr != name:
            raise errors.ExportError(
                'drop-in %s:%s must be named %s to be exported'
                % (dropin_name, dropin_attr, name))
        owner = self.nova.find(owner_name) if owner_name else None
        if owner_name and owner is None:
            raise errors.ExportError('%s has no class %s'
                                     % (self.nova.name, owner_name))
        if owner is not None and owner_name not in self.classes:
            self.classes.append(owner_name)
        indent = 4 if owner is not None else 0
        text = _segment(dropin.module, node)
        if decorator:
            text = decorator + '\n' + text
        code = self._code(dropin, text, dropin.names_used(node), renames,
                          indent)
        existing = self.nova.find(attribute)
        if target.new:
            if existing is not None:
                raise errors.ExportError(
                    '%s already defines %s' % (self.nova.name, attribute))
            self._append(owner, code)
        elif existing is None:
            raise errors.ExportError(
                '%s defines no %s' % (self.nova.name, attribute))
        elif target.original_as:
            if self.nova.find(
                    '.'.join(filter(None, (owner_name,
                                           target.original_as)))):
                raise errors.ExportError('%s already defines %s' % (
                    self.nova.name, target.original_as))
            start = _first_line(existing)
            self._rename_def(existing, target.original_as)
            self.nova.insert_before(start, code + '\n' +
                                    ('\n' if indent == 0 else ''))
        else:
            self.nova.replace_lines(_first_line(existing),
                                    existing.end_lineno, code)

    def _rename_def(self, node, new_name):
        """Rename a def, re-wrapping its signature if it gets too long."""
        body_line = node.body[0].lineno
        if (isinstance(node.body[0], ast.Expr) and
                isinstance(node.body[0].value, ast.Constant)):
            body_line = node.body[0].lineno
        lines = self.nova.lines
        header = ''.join(lines[node.lineno - 1:body_line - 1])
        match = re.match(r'(?s)(\s*)def \w+\((.*)\):\s*$', header)
        if not match:
            raise errors.ExportError('cannot read the signature of %s in %s'
                                     % (node.name, self.nova.name))
        indent, args = match.groups()
        args = [a.strip() for a in args.replace('\n', ' ').split(',')]
        args = [a for a in args if a]
        opening = '%sdef %s(' % (indent, new_name)
        out, line = [], opening
        for i, arg in enumerate(args):
            piece = arg + ('):' if i == len(args) - 1 else ',')
            if len(line) + len(piece) + 1 > 79 and line != opening:
                out.append(line.rstrip() + '\n')
                line = ' ' * len(opening)
            line += piece + ' '
        out.append(line.rstrip() + '\n')
        self.nova.replace_lines(node.lineno, body_line - 1, ''.join(out))

    def _append(self, owner, code):
        if owner is None:
            self.nova.text = self.nova.text.rstrip('\n') + '\n\n\n' + code
        else:
            owner = self.nova.find(owner.name)
            self.nova.insert_before(owner.end_lineno + 1, '\n' + code)

    def add_helpers(self):
        """Insert the helpers exported code uses, and theirs in turn."""
        done = set()
        texts = []
        while len(done) < len(self.helpers):
            dropin, name = [h for h in self.helpers if h not in done][0]
            done.add((dropin, name))
            if self.nova.find(name) is not None:
                raise errors.ExportError('%s already defines %s, which %s '
                                         'adds' % (self.nova.name, name,
                                                   dropin.name))
            node = dropin.node(name)
            texts.append((node.lineno, self._code(
                dropin, _segment(dropin.module, node),
                dropin.names_used(node), {}, 0)))
        if not texts:
            return
        # Keep the drop-in module's order: constants before their users.
        texts.sort()
        block = ''
        for _lineno, text in texts:
            sep = '\n\n' if text.startswith(('def ', 'class ', '@')) else ''
            block += sep + text
        block = block.lstrip('\n')
        if self.classes:
            cls = self.nova.find(self.classes[0])
            self.nova.insert_before(_first_line(cls), block + '\n\n')
        else:
            self.nova.text = self.nova.text.rstrip('\n') + '\n\n\n' + block


def export_fix_code(fix, files):
    """Apply the code of fix's drop-ins to files ({path: text}).

    Returns {path: new text} for every file changed.
    """
    edits = {}
    renames = {}
    for target in fix.targets:
        if target.original_as:
            dropin_name = target.replacement.split(':')[0]
            dropin = DropIn(dropin_name)
            for const, node in dropin.top.items():
                if (isinstance(node, ast.Assign) and
                        isinstance(node.value, (ast.Constant, ast.BinOp))):
                    value = _literal(node.value)
                    if value == target.path:
                        renames[const] = target.original_as
    for target in fix.targets:
        if target.exported_by_plan:
            continue
        path = nova_path(target.module)
        if path not in edits:
            if path not in files:
                raise errors.ExportError('the nova tree has no %s' % path)
            edits[path] = ModuleEdit(target.module, files[path])
        dropin_name, dropin_attr = target.replacement.split(':')
        edits[path].add(target, dropin_name, dropin_attr, renames)
    changed = {}
    for path, edit in edits.items():
        edit.add_helpers()
        compile(edit.nova.text, path, 'exec')
        _check_line_length(path, files[path], edit.nova.text)
        changed[path] = edit.nova.text
    return changed


def _check_line_length(path, before, after, limit=79):
    """nova's pep8 job allows 79 columns: refuse longer new lines."""
    old = set(before.splitlines())
    for number, line in enumerate(after.splitlines(), 1):
        if len(line) > limit and line not in old:
            raise errors.ExportError(
                'line %d of %s would be %d columns long (the drop-in must '
                'leave room for the indentation it gets in nova): %s'
                % (number, path, len(line), line.strip()))


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def export_conf_module(module_name, files):
    """Add a drop-in options module to nova/conf and register it there.

    The module's text is taken as it is; nova/conf/__init__.py gains its
    import and its register_opts call, each in sorted place. nova's
    nova.conf.opts finds the module's list_opts by itself.
    """
    short = module_name.rsplit('.', 1)[1]
    path = 'nova/conf/%s.py' % short
    if path in files:
        raise errors.ExportError('the nova tree already has %s' % path)
    init = files['nova/conf/__init__.py']
    lines = init.splitlines(True)
    imp = 'from nova.conf import %s\n' % short
    reg = '%s.register_opts(CONF)\n' % short
    imports = [i for i, line in enumerate(lines)
               if line.startswith('from nova.conf import ')]
    regs = [i for i, line in enumerate(lines)
            if re.match(r'\w+\.register_opts\(CONF\)$', line.strip()) and
            not line.startswith(' ')]
    if not imports or not regs:
        raise errors.ExportError('nova/conf/__init__.py does not import and '
                                 'register its option modules as expected')
    for positions, new in ((regs, reg), (imports, imp)):
        at = next((i for i in positions if lines[i] > new),
                  positions[-1] + 1)
        lines.insert(at, new)
    return {path: dropin_source(module_name),
            'nova/conf/__init__.py': ''.join(lines)}
