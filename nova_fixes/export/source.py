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

"""Place the drop-ins of a fix in nova's own source files.

A drop-in is written as its code reads in nova, so its text is moved into
nova's module as it is, re-indented for where it goes. Nothing is
imported to read it (exporting needs no nova installed):

* a ``new`` target is inserted: a module-level function or class at the
  end of its nova module, a method at the end of its class;
* a replaced target replaces nova's function;
* a delegating drop-in (Target.original_as) calls nova's original by the
  name the patch gives it: nova's function is renamed to that (only its
  ``def`` line changes) and the drop-in goes before it;
* a ``periodic`` target is the function its drop-in factory decorates,
  under the decorator the factory applies, as written there;
* module-level helpers of the drop-in module that exported code uses are
  inserted before the first class the fix changes in that module (or at
  its end), and imports nova's module lacks are added in their group.

The provenance paragraph that opens a drop-in's docstring ("Replaces ...",
"Added to ...") is left out: in nova the code is simply nova's.
"""

import ast
import os
import re
import sys
import textwrap

from nova_fixes import errors
from nova_fixes import registry

#: Names of a drop-in module that only serve the drop-in itself.
NOT_EXPORTED = frozenset(('LOG', 'CONF'))
PROVENANCE = ('Replaces ', 'Added to ')
#: Where drop-in modules are read from, without importing them (or their
#: packages), so that exporting needs no nova and none of their imports.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nova_path(module):
    """nova.compute.manager -> nova/compute/manager.py"""
    return module.replace('.', '/') + '.py'


def dropin_source(module):
    """The text of a nova_fixes module."""
    base = os.path.join(PACKAGE_DIR, *module.split('.')[1:])
    for path in (base + '.py', os.path.join(base, '__init__.py')):
        if os.path.isfile(path):
            with open(path, encoding='utf-8') as f:
                return f.read()
    raise errors.ExportError('drop-in module %s not found' % module)


def _defines(node, name):
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name == name
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in node.targets)


def find(body, dotted):
    """The def, class or assignment of ``Class.attr`` or ``attr`` in a
    module body (top-level ``if`` blocks included); or None.
    """
    node = None
    for part in dotted.split('.'):
        candidates = []
        for stmt in body:
            candidates.extend(stmt.body + stmt.orelse
                              if isinstance(stmt, ast.If) else [stmt])
        node = next((n for n in candidates if _defines(n, part)), None)
        if node is None:
            return None
        body = getattr(node, 'body', [])
    return node


def _first_line(node):
    return min([node.lineno] + [d.lineno for d in
                                getattr(node, 'decorator_list', [])])


def _imports(tree):
    """{bound name: (module, attribute or None)} of module-level imports."""
    bound = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split('.')[0]
                bound[name] = (alias.name if alias.asname else name, None)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                bound[alias.asname or alias.name] = (node.module, alias.name)
    return bound


def _dotted(binding):
    module, attribute = binding
    return module if attribute is None else '%s.%s' % (module, attribute)


def _import_line(binding, name):
    module, attribute = binding
    if attribute is None:
        return ('import %s\n' % module if name == module.split('.')[0]
                else 'import %s as %s\n' % (module, name))
    return 'from %s import %s%s\n' % (
        module, attribute, '' if name == attribute else ' as %s' % name)


def _import_group(module):
    if module == 'nova' or module.startswith('nova.'):
        return 2
    return 0 if module.split('.')[0] in sys.stdlib_module_names else 1


def _import_key(text):
    """The key OpenStack's hacking sorts an import statement by."""
    text = text.strip()
    for prefix in ('from ', 'import '):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text.replace(' import ', '.').lower()


def _names_in(node):
    """The names a node's code mentions: bare names and attributes."""
    return {n.id if isinstance(n, ast.Name) else n.attr
            for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))}


def staged(dropin, node, leave_out):
    """What to leave out of a function so that it reads as it does before
    the changes that bring in the names ``leave_out`` (one function whose
    concerns are separate changes, see registry.Change.grows).

    Each statement that mentions one of those names is left out whole,
    with the comment lines just above it, except a ``try``: its body is
    walked the same way, and each of its handlers that mentions one is
    left out; a ``try`` left with no handler (and no ``else`` or
    ``finally``) is unwrapped, its body dedented. A variable that only
    left out statements assign is left out in turn. A paragraph of the
    docstring naming one of the names is left out too.

    :returns: (the line numbers to leave out, {line number: columns to
        dedent it by})
    :raises ExportError: a name that nothing of the function mentions,
        or a summary line that mentions one
    """
    names = set(leave_out)
    drop = set()
    dedent = {}
    found = set()

    def leave(stmt):
        found.update(_names_in(stmt) & set(leave_out))
        start = _first_line(stmt)
        while dropin.lines[start - 2].strip().startswith('#'):
            start -= 1
        drop.update(range(start, stmt.end_lineno + 1))

    def walk(body):
        for stmt in body:
            if not isinstance(stmt, ast.Try):
                if _names_in(stmt) & names:
                    leave(stmt)
                continue
            walk(stmt.body)
            kept = [h for h in stmt.handlers if not _names_in(h) & names]
            for handler in stmt.handlers:
                if handler not in kept:
                    leave(handler)
            if stmt.handlers and not (kept or stmt.orelse or
                                      stmt.finalbody) and \
                    stmt.lineno not in drop:
                drop.add(stmt.lineno)
                for number in range(_first_line(stmt.body[0]),
                                    stmt.body[-1].end_lineno + 1):
                    dedent[number] = dedent.get(number, 0) + 4

    body = node.body
    doc = body[0]
    if (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and
            isinstance(doc.value.value, str)):
        body = body[1:]
        drop.update(_docstring_naming(dropin, node, doc, set(leave_out)))
    stores = [n for n in ast.walk(node)
              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    # Until no variable is left that only left out statements assign.
    while True:
        before = len(names), len(drop)
        walk(body)
        kept = {n.id for n in stores if n.lineno not in drop}
        names.update(n.id for n in stores
                     if n.lineno in drop and n.id not in kept)
        if (len(names), len(drop)) == before:
            break
    missing = set(leave_out) - found
    if missing:
        raise errors.ExportError(
            '%s.%s mentions no %s, which a change of its fix brings in'
            % (dropin.name, node.name, ', '.join(sorted(missing))))
    return drop, dedent


def _docstring_naming(dropin, node, doc, names):
    """The lines of the paragraphs of a docstring (``doc``) naming one of
    ``names``, each with the blank line before it.
    """
    # The summary may not go: the first paragraph, or the second after
    # the provenance sentence (which DropIn.code leaves out).
    summary = 2 if doc.value.value.startswith(PROVENANCE) else 1
    lines = set()
    paragraph = []
    for number in range(doc.lineno, doc.end_lineno + 1):
        line = dropin.lines[number - 1].strip()
        if line and line != '"""':
            paragraph.append(number)
        if line and number < doc.end_lineno:
            continue
        named = names & set(re.findall(r'\w+', ''.join(
            dropin.lines[n - 1] for n in paragraph)))
        if named and (summary or doc.end_lineno in paragraph):
            raise errors.ExportError(
                '%s.%s: the summary or the last line of its docstring '
                'names %s, which a later change brings in'
                % (dropin.name, node.name, ', '.join(sorted(named))))
        if named:
            lines.update(paragraph + [paragraph[0] - 1])
        if paragraph:
            summary = max(summary - 1, 0)
        paragraph = []
    return lines


class DropIn(object):
    """One drop-in module's text, read as nova will read it."""

    def __init__(self, module_name):
        self.name = module_name
        self.text = dropin_source(module_name)
        self.lines = self.text.splitlines(True)
        self.tree = ast.parse(self.text)
        self.bound = _imports(self.tree)

    def node(self, dotted):
        node = find(self.tree.body, dotted)
        if node is None:
            raise errors.ExportError('%s defines no %s' % (self.name, dotted))
        return node

    def code(self, node, leave_out=()):
        """The node's text, at indentation 0, without its provenance.

        ``leave_out``: names of the function's code that later changes of
        its fix bring in (registry.Change.grows); the statements using
        them are left out (see staged).
        """
        first = _first_line(node)
        drop, dedent = (staged(self, node, leave_out) if leave_out
                        else (set(), {}))
        lines = {}
        for number in range(first, node.end_lineno + 1):
            if number in drop:
                continue
            line = self.lines[number - 1]
            cut = dedent.get(number, 0)
            if cut and line.strip():
                if line[:cut].strip():
                    raise errors.ExportError(
                        '%s.%s: line %d cannot lose %d columns'
                        % (self.name, node.name, number, cut))
                line = line[cut:]
            lines[number] = line
        doc = node.body[0] if hasattr(node, 'body') else None
        if (isinstance(doc, ast.Expr) and
                isinstance(doc.value, ast.Constant) and
                isinstance(doc.value.value, str) and
                doc.value.value.startswith(PROVENANCE)):
            at = doc.lineno
            if lines.get(at + 1, '').strip() or at + 2 not in lines:
                raise errors.ExportError(
                    '%s.%s: the provenance sentence of its docstring must '
                    'be a paragraph of its own' % (self.name, node.name))
            lines[at] = (lines[at][:lines[at].index('"""') + 3] +
                         lines.pop(at + 2).lstrip())
            del lines[at + 1]
        text = ''.join(lines[number] for number in sorted(lines))
        if leave_out:
            # What was left out leaves one blank line, not two.
            text = re.sub(r'\n(?:[ \t]*\n){2,}', '\n\n', text)
        return textwrap.dedent(text)

    def periodic(self, factory_name):
        """(function node, decorator text) of a periodic task factory:
        ``return <decorator call>(<function>)``.
        """
        factory = self.node(factory_name)
        ret = factory.body[-1]
        if not (isinstance(ret, ast.Return) and
                isinstance(ret.value, ast.Call) and
                isinstance(ret.value.func, ast.Call) and
                len(ret.value.args) == 1 and
                isinstance(ret.value.args[0], ast.Name)):
            raise errors.ExportError(
                '%s.%s must end with "return <decorator>(<function>)"'
                % (self.name, factory_name))
        first, *rest = ast.get_source_segment(
            self.text, ret.value.func).split('\n')
        # Continuation lines keep their indentation relative to the return.
        rest = [line[ret.col_offset:] for line in rest]
        return (self.node(ret.value.args[0].id),
                '@%s\n' % '\n'.join([first] + rest))


class ModuleEdit(object):
    """What one fix does to one nova module."""

    def __init__(self, nova_module, text, fix):
        self.name = nova_module
        self.text = text
        # Names the fix puts in this module itself: its originals kept
        # under another name, and its new module-level targets (another
        # target of the fix using one is not a helper to add again).
        self.skip = NOT_EXPORTED | {t.original_as for t in fix.targets} | {
            t.attribute for t in fix.targets
            if t.new and t.module == nova_module and '.' not in t.attribute}
        # (DropIn, name), in order of first use; each target reads its
        # drop-in module anew, so a helper is known by the module's name.
        self.helpers = []
        self.classes = []  # the classes of nova's module that are changed
        #: module:attribute of every name of nova the exported code uses
        #: through a module or self (see names_used).
        self.uses = set()
        self._owner = None

    @property
    def tree(self):
        return ast.parse(self.text)

    def find(self, dotted):
        return find(self.tree.body, dotted)

    def replace_lines(self, start, end, new_text):
        """Replace lines start..end (1-based, inclusive) with new_text."""
        lines = self.text.splitlines(True)
        self.text = ''.join(lines[:start - 1]) + new_text + ''.join(
            lines[end:])

    def _uses(self, dropin, node):
        """Import or queue what the node's code uses from its module."""
        self.uses.update(names_used(dropin, node, self.name, self._owner))
        nova_bound = _imports(self.tree)
        for name in dict.fromkeys(n.id for n in ast.walk(node)
                                  if isinstance(n, ast.Name)):
            if name in dropin.bound:
                binding = dropin.bound[name]
                target = _dotted(binding)
                if target == '%s.%s' % (self.name, name):
                    continue  # a name of this very module
                if target == self.name or target.startswith('nova_fixes'):
                    raise errors.ExportError(
                        '%s: exported code uses %s (%s); in %s it must use '
                        'nova\'s own names' % (dropin.name, name, target,
                                               self.name))
                if name in nova_bound:
                    if _dotted(nova_bound[name]) != target:
                        raise errors.ExportError(
                            '%s binds %s to %s, the drop-in to %s'
                            % (self.name, name, _dotted(nova_bound[name]),
                               target))
                else:
                    self._add_import(binding, name)
            elif (name not in self.skip and
                  (dropin.name, name) not in {
                      (d.name, n) for d, n in self.helpers} and
                  find(dropin.tree.body, name) is not None):
                self.helpers.append((dropin, name))

    def _add_import(self, binding, name):
        line = _import_line(binding, name)
        group, key = _import_group(binding[0]), _import_key(line)
        before = after = None
        for node in self.tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                if after is not None or before is not None:
                    break
                continue
            mod = (node.module if isinstance(node, ast.ImportFrom)
                   else node.names[0].name)
            if node.col_offset or _import_group(mod) != group:
                if _import_group(mod) > group and after is None:
                    before = before or node
                continue
            text = ast.get_source_segment(self.text, node)
            if _import_key(text) > key:
                self.replace_lines(node.lineno, node.lineno - 1, line)
                return
            after = node
        if after is not None:
            self.replace_lines(after.end_lineno + 1, after.end_lineno, line)
        elif before is not None:
            self.replace_lines(before.lineno, before.lineno - 1,
                               line + '\n')
        else:
            raise errors.ExportError('no import block in %s' % self.name)

    def add(self, target, leave_out=(), grown=False):
        """Place one target's code. ``leave_out``: see DropIn.code.
        ``grown``: an earlier change of the fix placed the target; its
        code there is replaced (a delegating one is not renamed again).
        """
        dropin = DropIn(target.replacement.split(':')[0])
        dropin_attr = target.replacement.split(':')[1]
        owner_name, _, name = target.attribute.rpartition('.')
        decorator = ''
        if target.periodic:
            node, decorator = dropin.periodic(dropin_attr)
        else:
            node = dropin.node(dropin_attr)
        if node.name != name:
            raise errors.ExportError('drop-in %s must be named %s to be '
                                     'exported' % (target.replacement, name))
        owner = self.find(owner_name) if owner_name else None
        if owner_name and owner is None:
            raise errors.ExportError('%s has no class %s'
                                     % (self.name, owner_name))
        if owner is not None and owner_name not in self.classes:
            self.classes.append(owner_name)
        code = dropin.code(node, leave_out)
        if leave_out:
            node = ast.parse(code).body[0]
        code = decorator + code
        if owner is not None:
            code = textwrap.indent(code, '    ')
        self._owner = owner_name or None
        self._uses(dropin, node)
        self._owner = None
        existing = self.find(target.attribute)
        if grown:
            if existing is None:
                raise errors.ExportError(
                    '%s defines no %s for a later change of its fix to '
                    'grow' % (self.name, target.attribute))
            self.replace_lines(_first_line(existing), existing.end_lineno,
                               code)
        elif target.new:
            if existing is not None:
                raise errors.ExportError(
                    '%s already defines %s' % (self.name, target.attribute))
            if owner is None and target.after:
                kin = self.find(target.after)
                if kin is None:
                    raise errors.ExportError(
                        '%s defines no %s to put %s after'
                        % (self.name, target.after, target.attribute))
                self.replace_lines(kin.end_lineno + 1, kin.end_lineno,
                                   '\n\n' + code)
            elif owner is None:
                self.text = self.text.rstrip('\n') + '\n\n\n' + code
            else:
                end = self.find(owner_name).end_lineno
                self.replace_lines(end + 1, end, '\n' + code)
        elif existing is None:
            raise errors.ExportError(
                '%s defines no %s' % (self.name, target.attribute))
        elif target.original_as:
            alias = '.'.join(filter(None, (owner_name, target.original_as)))
            if self.find(alias) is not None:
                raise errors.ExportError('%s already defines %s'
                                         % (self.name, alias))
            start = _first_line(existing)
            self._rename_def(existing, target.original_as)
            self.replace_lines(start, start - 1,
                               code + ('\n' if owner else '\n\n'))
        else:
            self.replace_lines(_first_line(existing), existing.end_lineno,
                               code)

    def _rename_def(self, node, new_name):
        """Rename a def; its signature is re-wrapped at 79 columns."""
        lines = self.text.splitlines(True)
        body_line = node.body[0].lineno
        # Comments between the signature and the first statement stay.
        while body_line - 1 > node.lineno and lines[body_line - 2].strip()[
                :1] in ('', '#'):
            body_line -= 1
        header = ''.join(lines[node.lineno - 1:body_line - 1])
        indent = header[:len(header) - len(header.lstrip())]
        args = header[header.index('(') + 1:header.rindex(')')]
        args = [a.strip() for a in args.split(',') if a.strip()]
        opening = '%sdef %s(' % (indent, new_name)
        out, line = [], opening
        for i, arg in enumerate(args):
            piece = arg + ('):' if i == len(args) - 1 else ',')
            if len(line) + len(piece) + 1 > 79 and line != opening:
                out.append(line.rstrip() + '\n')
                line = ' ' * len(opening)
            line += piece + ' '
        out.append(line.rstrip() + '\n')
        self.replace_lines(node.lineno, body_line - 1, ''.join(out))

    def add_helpers(self):
        """Insert the helpers exported code uses, and theirs in turn."""
        texts = []
        for dropin, name in self.helpers:  # grows while it is walked
            node = find(dropin.tree.body, name)
            present = self.find(name)
            if present is not None:
                # An earlier fix's patch added the very same helper: this
                # fix uses it as it is.
                lines = self.text.splitlines(True)
                if textwrap.dedent(''.join(
                        lines[_first_line(present) - 1:present.end_lineno])
                ) == dropin.code(node):
                    continue
                raise errors.ExportError('%s already defines %s, which %s '
                                         'adds' % (self.name, name,
                                                   dropin.name))
            self._uses(dropin, node)
            texts.append((node.lineno, dropin.code(node)))
        if not texts:
            return
        # Keep the drop-in module's order: constants before their users.
        # Two blank lines around a def or a class, as pycodestyle wants
        # (E302, E305); none between constants.
        block = ''
        after_def = False
        for _lineno, text in sorted(texts):
            is_def = text.startswith(('def ', 'class ', '@'))
            sep = '\n\n' if is_def or after_def else ''
            block += sep + text
            after_def = is_def
        block = block.lstrip('\n')
        if self.classes:
            start = _first_line(self.find(self.classes[0]))
            self.replace_lines(start, start - 1, block + '\n\n')
        else:
            self.text = self.text.rstrip('\n') + '\n\n\n' + block


def names_used(dropin, node, module, owner=None):
    """module:attribute of the names a drop-in's code uses that could be
    another target's: a bare name (this module's), an attribute of an
    imported module, and an attribute of self (``owner``'s).
    """
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in dropin.bound:
            out.add('%s:%s' % (module, n.id))
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            if n.value.id == 'self' and owner:
                out.add('%s:%s.%s' % (module, owner, n.attr))
            elif n.value.id in dropin.bound:
                out.add('%s:%s' % (_dotted(dropin.bound[n.value.id]),
                                   n.attr))
    return out


def export_fix_code(fix, files, series, only=None, uses=None,
                    leave_out=None, grown=()):
    """Place the code of fix's drop-ins for a series in files
    ({path: text}). Returns {path: new text} for every file changed.

    ``only``: the Target.path of the targets to place (one change of the
    fix; default all). ``uses``: a set that gains what the placed code
    uses (see names_used). ``leave_out``: {Target.path: names later
    changes bring in} (see staged). ``grown``: the Target.path of those
    an earlier change placed, whose code is replaced.
    """
    leave_out = leave_out or {}
    edits = {}
    for target in registry.targets_of(fix, series):
        if only is not None and target.path not in only:
            continue
        path = nova_path(target.module)
        if path not in edits:
            if path not in files:
                raise errors.ExportError('the nova tree has no %s' % path)
            edits[path] = ModuleEdit(target.module, files[path], fix)
        edits[path].add(target, leave_out.get(target.path, ()),
                        target.path in grown)
    changed = {}
    for path, edit in edits.items():
        edit.add_helpers()
        if uses is not None:
            uses.update(edit.uses)
        compile(edit.text, path, 'exec')
        _check_line_length(path, files[path], edit.text)
        changed[path] = edit.text
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
    lines = files['nova/conf/__init__.py'].splitlines(True)
    imp = 'from nova.conf import %s\n' % short
    reg = '%s.register_opts(CONF)\n' % short
    imports = [i for i, line in enumerate(lines)
               if line.startswith('from nova.conf import ')]
    regs = [i for i, line in enumerate(lines)
            if line.endswith('.register_opts(CONF)\n') and
            line[0].isalpha() and ' ' not in line.strip()]
    if not imports or not regs:
        raise errors.ExportError('nova/conf/__init__.py does not import and '
                                 'register its option modules as expected')
    for positions, new in ((regs, reg), (imports, imp)):
        at = next((i for i in positions if lines[i] > new),
                  positions[-1] + 1)
        lines.insert(at, new)
    return {path: dropin_source(module_name),
            'nova/conf/__init__.py': ''.join(lines)}
