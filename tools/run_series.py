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

"""Verify the patches of one series on that series' released nova.

Run in an environment where the series' nova release is installed (tox
-e series, with NOVA_FIXES_SERIES):

1. the functional regression suite on vanilla nova: the series' column
   of the recreate report (which bugs this series has);
2. patches/<series> applied, all or nothing, to a copy of the released
   sdist: the patched nova, imported ahead of the installed release
   (PYTHONPATH) by the test processes of steps 3 and 4;
3. the functional regression suite on the patched nova, with nothing
   activated (NOVA_FIXES_MODE=patched);
4. nova's own unit tests of every module a patch touches, and nova's
   functional tests that the patches change or add, on the patched tree;
5. every nova-fixes entry point started in a fresh process on the
   released nova, with the drop-ins (tools/check_entry_points.py).

The patched tree is not pip-installed over the release: building older
nova sdists with the series' setuptools is its own source of failures,
and the installed release keeps everything else (dependencies, entry
points) the tests need, identical to vanilla's.

Prints one "N passed, N failed" line; --json writes the rows for
tools/series_report.py.
"""

import argparse
import ast
import difflib
import json
import os
import shutil
import sys
import tempfile
import time

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TREE)

from nova_fixes import activation  # noqa: E402
from nova_fixes import errors  # noqa: E402
from nova_fixes.export import patch  # noqa: E402
from nova_fixes.export import sdist  # noqa: E402
from nova_fixes import registry  # noqa: E402
from tests import recreate  # noqa: E402

# tools/, next to this script:
import check_entry_points  # noqa: E402

#: nova's own test runs use eventlet, as nova's tox py3 env does.
NOVA_TEST_ENV = {'OS_NOVA_DISABLE_EVENTLET_PATCHING': 'False'}


#: nova modules whose unit tests are not (only) in test_<module>.py.
UNIT_TESTS_OF = {
    'nova/compute/manager.py': ('nova/tests/unit/compute/test_compute_mgr.py',
                                'nova/tests/unit/compute/test_compute.py'),
    'nova/compute/utils.py': ('nova/tests/unit/compute/test_utils.py',),
    'nova/conductor/manager.py': (
        'nova/tests/unit/conductor/test_conductor.py',),
    'nova/conf/__init__.py': ('nova/tests/unit/conf',),
}


#: nova modules whose own functional tests are run on the patched tree
#: although no patch changes them: the only functional coverage nova has
#: of the code a patch changes there (the cross-cell resize tasks are
#: only exercised, with two cells, by test_cross_cell_migrate).
FUNCTIONAL_TESTS_OF = {
    'nova/conductor/tasks/cross_cell_migrate.py': (
        'nova/tests/functional/test_cross_cell_migrate.py',),
}


def changed_paths(series, root=None, name=None):
    """{path: is new} of every file the series' patches change (those of
    the distribution set ``name`` of the series, if given).
    """
    out = {}
    for _name, text in patch.series_patches(series, root, name=name):
        for path, new_file, _hunks in patch.parse(text):
            # New if the first patch that touches it creates it.
            out.setdefault(path, new_file)
    return out


def _test_id(path):
    return path[:-3].replace('/', '.') if path.endswith('.py') else \
        path.replace('/', '.')


def changed_classes(original, patched):
    """The top-level classes of ``patched`` (a module's source) that differ
    from ``original``, with their subclasses in the module; None when a
    change is outside every class.
    """
    new_lines = patched.splitlines()
    matcher = difflib.SequenceMatcher(None, original.splitlines(), new_lines,
                                      autojunk=False)
    changed = set()
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag != 'equal':
            # 1-based lines of the patched text (a deletion: the line after).
            changed.update(range(j1 + 1, max(j2, j1 + 1) + 1))
    classes = [node for node in ast.parse(patched).body
               if isinstance(node, ast.ClassDef)]
    names = set()
    for line in changed:
        owner = next((c.name for c in classes
                      if c.lineno - len(c.decorator_list) <= line <=
                      c.end_lineno), None)
        if owner is None and line <= len(new_lines):
            return None
        if owner:
            names.add(owner)
    grown = True
    while grown:
        subclasses = {c.name for c in classes
                      if any(getattr(b, 'id', None) in names
                             for b in c.bases)}
        grown = not subclasses <= names
        names |= subclasses
    return sorted(names)


def touched_tests(series, tree, root=None, original=None, name=None):
    """(unit, functional): nova test ids for a patched tree, as stestr
    filters (modules, or module.Class).

    The unit tests of every nova module a patch touches (a packager's
    build runs them), every nova test module a patch adds, and of a
    functional test module a patch changes, the classes it changes when
    ``original`` (the tree before the patches) is given: nova's
    test_servers is too large to run whole for four changed tests. The
    functional tests FUNCTIONAL_TESTS_OF names for a touched module. A
    touched module that existed before with no unit tests found is an
    error: the map above must learn where they are.
    """
    unit, functional = set(), set()
    for path, new in sorted(changed_paths(series, root, name).items()):
        if not path.startswith('nova/') or not path.endswith('.py'):
            continue
        if path.startswith('nova/tests/unit/'):
            unit.add(_test_id(path))
            continue
        if path.startswith('nova/tests/functional/'):
            classes = None
            if original and not new:
                with open(os.path.join(original, path)) as f:
                    before = f.read()
                with open(os.path.join(tree, path)) as f:
                    classes = changed_classes(before, f.read())
            if classes:
                functional.update('%s.%s' % (_test_id(path), c)
                                  for c in classes)
            else:
                functional.add(_test_id(path))
            continue
        functional.update(_test_id(c) for c in FUNCTIONAL_TESTS_OF.get(
            path, ()) if os.path.exists(os.path.join(tree, c)))
        package, module = os.path.split(path[len('nova/'):-3])
        unit_dir = '/'.join(filter(None, ('nova/tests/unit', package)))
        candidates = UNIT_TESTS_OF.get(path) or (
            '%s/test_%s.py' % (unit_dir, module),
            '%s/test_%s_%s.py' % (unit_dir, os.path.basename(package),
                                  module))
        found = [c for c in candidates
                 if os.path.exists(os.path.join(tree, c))]
        if found:
            unit.update(_test_id(c) for c in found)
        elif not new:
            raise errors.ExportError(
                'no unit tests found for %s (looked for %s)'
                % (path, ', '.join(candidates)))
    return sorted(unit), sorted(functional)


def nova_tests(series, nova_tree, patched_env, with_unit, suite,
               original=None, name=None):
    """Run nova's own tests of the modules the series' patches touch, on
    the patched tree (the unit tests only ``with_unit``); yields (kind,
    name, results) per suite that has tests. ``original``: the tree before
    the patches (see touched_tests).
    """
    unit, functional = touched_tests(series, nova_tree, original=original,
                                     name=name)
    runs = [('unit', unit)] if with_unit else []
    for kind, modules in runs + [('functional', functional)]:
        if not modules:
            continue
        results = suite(
            tree=nova_tree, mode='patched',
            test_path='nova/tests/%s' % kind,
            progress=recreate.Progress(label='nova %s' % kind),
            extra_env=dict(NOVA_TEST_ENV, **patched_env),
            filters=['^(%s)\\.' % '|'.join(m.replace('.', '\\.')
                                           for m in modules)])
        yield kind, ("nova's %s tests of the patched modules (%s)"
                     % (kind, ', '.join(modules))), results


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--series',
                   default=os.environ.get('NOVA_FIXES_SERIES',
                                          registry.DEFAULT_SERIES))
    p.add_argument('--no-nova-unit', action='store_true',
                   help="leave out nova's unit tests (step 4)")
    p.add_argument('--no-vanilla', action='store_true',
                   help="leave out the regression suite on vanilla nova "
                        "(step 1): the patched side is judged alone")
    p.add_argument('--concurrency', type=int, default=None)
    p.add_argument('--json', help='write the results to this file')
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    start = time.time()
    series = registry.check_series(args.series)
    version = activation.nova_version()
    if activation.series_of(version) != series:
        raise SystemExit('run_series: nova %s is installed, not the %s '
                         'release %s' % (version, series,
                                         registry.RELEASES[series][0]))
    passed = failed = skipped = 0

    def add(counts):
        nonlocal passed, failed, skipped
        passed, failed, skipped = (passed + counts[0], failed + counts[1],
                                   skipped + counts[2])

    def suite(progress=recreate.print_progress, **kwargs):
        return recreate.run_suite(concurrency=args.concurrency,
                                  progress=progress, **kwargs)

    # 1. vanilla: the series' column of the recreate report.
    test_ids = recreate.list_suite(TREE)
    kinds = recreate.scenario_kinds(TREE, test_ids)
    progress = recreate.Progress(kinds=kinds)
    vanilla = without = {}
    if not args.no_vanilla:
        vanilla = suite(tree=TREE, mode='vanilla', test_ids=test_ids,
                        progress=progress)
        without = recreate.run_without_upstream_fixes(
            TREE, vanilla, concurrency=args.concurrency, progress=progress)

    # 2. the patched tree.
    work = tempfile.mkdtemp(prefix='nova-fixes-%s-' % series)
    nova_tree = os.path.join(work, 'nova-%s' % version)
    shutil.copytree(sdist.released_tree(series), nova_tree)
    names = patch.verify(series, nova_tree, write_tree=True)
    print('%s: applied %s' % (series, ', '.join(names)))
    passed += 1
    patched_env = {'PYTHONPATH': nova_tree}
    try:
        # 3. the regression suite on the patched nova.
        patched = suite(tree=TREE, mode='patched', extra_env=patched_env,
                        test_ids=test_ids, progress=progress)
        rows = recreate.build_rows(TREE, vanilla, patched, without,
                                   fixed_mode='patched', kinds=kinds,
                                   vanilla_ran=not args.no_vanilla)
        print(recreate.format_table(rows, fixed_label='patched'))
        print()
        bad = recreate.summarize('%s recreate report' % series, rows,
                                 fixed_label='patched')
        add((len(rows) - len(bad), len(bad), 0))

        # 4. nova's own tests on the patched tree.
        nova_results = {}
        for kind, name, results in nova_tests(
                series, nova_tree, patched_env, not args.no_nova_unit,
                suite, original=sdist.released_tree(series)):
            add(recreate.count(name, results))
            nova_results[kind] = {t: o.status for t, o in results.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    # 5. the entry points, on the released nova with the drop-ins, checked
    # from a fresh process (see run_fresh_checker).
    entry = check_entry_points.run_fresh_checker(progress=print)
    add((entry.passed, entry.failed, entry.skipped))

    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'series': series, 'nova': version, 'rows': rows,
                       'nova_tests': nova_results,
                       'entry_points': entry.results, 'passed': passed,
                       'failed': failed, 'skipped': skipped}, f, indent=2)
    print('%s took %d s' % (series, time.time() - start))
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
