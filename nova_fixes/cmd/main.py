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

"""The nova-fixes command line."""

import argparse
import os
import sys
import time
import warnings

from nova_fixes import errors
from nova_fixes import fixes
from nova_fixes import registry


def _list(args):
    from nova_fixes import activation
    version = activation.nova_version()
    series = activation.series_of(version)
    print('nova %s (series %s)' % (version, series))
    for fix in fixes.FIXES:
        print('bug %s: %s [upstream: %s]' % (fix.bug, fix.title,
                                             fix.upstream))
        for target in registry.targets_of(fix, series):
            print('  %s %s' % ('adds' if target.new else 'replaces',
                               target.path))
    return 0


def _check(args):
    """Dry run of activation: every guard, nothing patched."""
    from nova_fixes import activation
    from nova_fixes import fingerprint
    series = activation.series_of(activation.nova_version())
    if activation.active_fixes():
        print('nova-fixes is active in this process: bugs %s' % ', '.join(
            str(bug) for bug in activation.active_fixes()))
        return 0
    recorded = fingerprint.recorded()
    for fix in fixes.FIXES:
        for target in registry.targets_of(fix, series):
            if set(target.services) & set(registry.DEFAULT_SERVICES):
                activation._check(target, series, recorded)
            else:
                # nova-manage's: its module is not imported here.
                activation.check_source(target, series, recorded)
    print('nova-fixes can activate every fix on this nova (%s)' % series)
    return 0


def _tree(args):
    """The nova tree to work on: --tree, or the series' released sdist."""
    from nova_fixes.export import sdist
    if args.series == registry.UPSTREAM and getattr(args, 'set', None) is None:
        registry.records_of(args.series)
        if not args.tree:
            raise errors.NovaFixesError(
                '--series %s needs --tree: a git checkout of nova\'s '
                'master branch (patches/master/BASE names the commit it '
                'was made against)' % registry.UPSTREAM)
        return args.tree
    registry.check_series(args.series)
    if args.tree:
        return args.tree
    return sdist.released_tree(args.series)


def _fingerprints(args):
    from nova_fixes.export import patch
    from nova_fixes import fingerprint
    # The originals of released series only (master has no drop-ins).
    registry.check_series(args.series)
    if args.set:
        # A distribution's own tree of the series: named, never guessed.
        registry.check_set(args.set, args.series)
        if not args.tree:
            raise errors.NovaFixesError(
                '--set %s needs --tree: the distribution\'s own nova '
                'tree (%s)' % (args.set,
                               registry.DISTRIBUTION_SETS[args.set][1]))
    tree = _tree(args)
    patch.check_tree(tree)
    patch.check_tree_series(tree, args.series)
    found = fingerprint.record(args.series, tree, name=args.set)
    print('recorded %d fingerprints of nova %s%s from %s in %s' % (
        len(found), args.series, ' (%s)' % args.set if args.set else '',
        tree, fingerprint._DATA))
    for path, value in sorted(found.items()):
        print('  %s %s' % (value, path))
    return 0


def _export(args):
    from nova_fixes.export import patch
    series_list = (registry.SUPPORTED_SERIES if args.series == 'all'
                   else [args.series])
    if args.series == 'all' and args.tree:
        raise errors.ExportError('--tree names one nova tree; give one '
                                 '--series with it')
    if args.set is not None:
        registry.check_series(args.series)
        registry.check_set(args.set, args.series)
        if not args.tree:
            raise errors.ExportError(
                '--set %s is made from %s: give it with --tree'
                % (args.set, registry.DISTRIBUTION_SETS[args.set][1]))
    for series in series_list:
        args.series = series
        tree = _tree(args)
        where = 'patches/%s' % (args.set or series)
        if args.check:
            patch.check(series, tree, root=args.root, name=args.set)
            print('%s is up to date with the drop-ins' % where)
        else:
            names = patch.write(series, tree, root=args.root, name=args.set)
            print('%s: %s' % (where, ', '.join(names)))
    return 0


def _verify(args):
    from nova_fixes.export import patch
    tree = _tree(args)
    names = patch.verify(args.series, tree, root=args.root,
                         write_tree=args.apply)
    print('%s: the %d patches of %s %s cleanly: %s' % (
        tree, len(names), args.series,
        'were applied' if args.apply else 'apply', ', '.join(names)))
    return 0


#: nova-fixes audit's exit code when it found something wrong and left it
#: (not healed, or undecided because a cell could not be read).
AUDIT_FOUND = 3


def _load_nova_config(args):
    """nova's configuration, as nova-manage loads it."""
    from nova import config
    from nova import objects
    argv = ['nova-fixes']
    for path in args.config_file or []:
        argv += ['--config-file', path]
    if args.config_dir:
        argv += ['--config-dir', args.config_dir]
    config.parse_args(argv, init_rpc=False)
    objects.register_all()


def audit_text(report):
    """The text form: one line per consumer not right, per provider and
    total lines.
    """
    lines = []
    for v in report.verdicts:
        if v.verdict in ('right',):
            continue
        lines.append('%s %s (%s of %s): %s%s' % (
            v.verdict, v.consumer, v.kind or 'unknown consumer',
            v.server or '-', v.evidence,
            '; %s' % v.healed if v.healed else ''))
    for cell, why in sorted(report.unreadable.items()):
        lines.append('cell %s cannot be read: %s' % (cell, why))
    totals = report.totals(getattr(report, 'names', {}))
    for where in sorted(totals, key=lambda k: (k == 'total', k)):
        lines.append('%s: %s' % (where, '; '.join(
            '%s %s' % (verdict, ', '.join('%s=%d' % (rc, n) for rc, n
                                          in sorted(res.items())))
            for verdict, res in sorted(totals[where].items()))))
    counts = report.counts()
    lines.append('consumers: %s; placement requests: %d' % (
        ', '.join('%d %s' % (counts[k], k) for k in counts),
        report.requests))
    return '\n'.join(lines)


def audit_json(report):
    import json
    return json.dumps({
        'verdicts': [v.as_dict() for v in report.verdicts],
        'counts': report.counts(),
        'totals': report.totals(getattr(report, 'names', {})),
        'unreadable_cells': report.unreadable,
        'placement_requests': report.requests}, indent=2, sort_keys=True)


def _audit(args):
    from nova import context as nova_context
    from nova_fixes import audit
    if args.runs is not None and args.every is None:
        args.subparser.error('--runs needs --every')
    _load_nova_config(args)
    if args.every is None:
        report = audit.audit(nova_context.get_admin_context(),
                             heal=args.heal, cell=args.cell,
                             grace=args.grace)
        print(audit_json(report) if args.json else audit_text(report))
        return AUDIT_FOUND if report.wrong() else 0
    return _audit_every(args, audit, nova_context)


def _audit_every(args, audit, nova_context):
    """The periodic form: a full audit every ``args.every`` seconds (from
    the start of one run to the start of the next), ``args.runs`` times
    or until stopped. The first run's error stops it (bad input shows at
    once); a later run that cannot read placement is reported and the
    next run goes on. Each run decides and heals from what it reads
    then. The exit code is the last run's.
    """
    code = 0
    run = 0
    while args.runs is None or run < args.runs:
        run += 1
        started = time.monotonic()
        print('audit run %d at %s' % (run, time.strftime(
            '%Y-%m-%dT%H:%M:%SZ', time.gmtime())), flush=True)
        try:
            report = audit.audit(nova_context.get_admin_context(),
                                 heal=args.heal, cell=args.cell,
                                 grace=args.grace)
        except audit.AuditError as e:
            if run == 1:
                # Bad input (an unknown cell) or a placement that cannot
                # be read at all: the operator is there to see it.
                raise
            print('audit run %d: %s' % (run, e), flush=True)
            code = 2
        else:
            print(audit_json(report) if args.json else audit_text(report),
                  flush=True)
            code = AUDIT_FOUND if report.wrong() else 0
        if args.runs is not None and run >= args.runs:
            break
        time.sleep(max(0.0, args.every - (time.monotonic() - started)))
    return code


def _positive_seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not value >= 1 or value != value or value == float('inf'):
        raise argparse.ArgumentTypeError(
            '%r is not a number of seconds of at least 1' % text)
    return value


def _seconds(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError('%r is not a whole number of '
                                         'seconds (0 or more)' % text)
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError('%r is not a whole number of at '
                                         'least 1' % text)
    return value


def parser():
    p = argparse.ArgumentParser(
        prog='nova-fixes',
        description='Resource-leak fixes for OpenStack Nova.',
        epilog='The recreate report runs from a source checkout: '
               'python -m tests.recreate (tox -e recreate).')
    sub = p.add_subparsers(dest='command', required=True)
    lp = sub.add_parser('list', help='the fixes and what they replace')
    lp.set_defaults(func=_list, subparser=lp)
    cp = sub.add_parser('check', help='check that every fix can be '
                        'activated on the installed nova, patching nothing')
    cp.set_defaults(func=_check, subparser=cp)
    f = sub.add_parser(
        'fingerprints', help='record the fingerprints of the nova code the '
        'fixes replace')
    fsub = f.add_subparsers(dest='action', required=True)
    r = fsub.add_parser(
        'record', help="record them from a series' nova tree into "
        'nova_fixes/fingerprints.json')
    r.add_argument('--series', required=True,
                   help='one of %s' % ', '.join(registry.SUPPORTED_SERIES))
    r.add_argument('--tree', help="a nova source tree of that series "
                   "(default: its released sdist, downloaded with pip)")
    r.add_argument('--set', help="a distribution's own tree of the "
                   'series (%s), recorded beside the release\'s: needs '
                   '--tree' % ', '.join(sorted(registry.DISTRIBUTION_SETS)))
    r.set_defaults(func=_fingerprints, subparser=r)

    e = sub.add_parser(
        'export', help='write patches/<series> from the drop-ins (or, with '
        '--check, fail if it is stale)')
    e.add_argument('--series', required=True,
                   help='a supported series (%s), "all" of them, or "%s" '
                   "(nova's master branch: needs --tree, a git checkout)"
                   % (', '.join(registry.SUPPORTED_SERIES),
                      registry.UPSTREAM))
    e.add_argument('--tree', help='a nova source tree of that series '
                   '(default: its released sdist, downloaded with pip)')
    e.add_argument('--check', action='store_true',
                   help='compare instead of writing; exit 2 if stale')
    e.add_argument('--set', default=None, metavar='NAME',
                   help='write patches/NAME instead: a distribution\'s '
                   'own set, made from its tree (--tree); one of %s'
                   % ', '.join('%s (series %s)' % (n, s) for n, (s, _)
                               in sorted(registry.DISTRIBUTION_SETS.items())))
    e.add_argument('--root', default=None,
                   help='the nova-fixes source tree holding patches/ '
                   '(default: the one nova_fixes is imported from)')
    e.set_defaults(func=_export, subparser=e)

    v = sub.add_parser(
        'verify', help="check that patches/<series> applies to a nova tree "
        "(a packager's own, for example), changing nothing")
    v.add_argument('--series', required=True,
                   help='one of %s, or %s (with --tree)' % (
                       ', '.join(registry.SUPPORTED_SERIES),
                       registry.UPSTREAM))
    v.add_argument('--tree', help='the nova source tree (default: the '
                   "series' released sdist, downloaded with pip)")
    v.add_argument('--apply', action='store_true',
                   help='write the patched files into the tree once every '
                   'patch is known to apply')
    v.add_argument('--root', default=None,
                   help='the nova-fixes source tree holding patches/')
    v.set_defaults(func=_verify, subparser=v)

    a = sub.add_parser(
        'audit', help='one verdict for every consumer in placement (right, '
        'in flight, misplaced, leaked, missing); with --heal, correct '
        'what is wrong with the consumer generations read. Exit 0: '
        'nothing wrong; 3: something wrong left; 2: bad input')
    a.add_argument('--heal', action='store_true',
                   help='remove the leaked, move the misplaced, create '
                   'the missing; without it nothing is changed')
    a.add_argument('--json', action='store_true',
                   help='print a JSON document instead of text')
    a.add_argument('--cell', metavar='NAME_OR_UUID',
                   help='decide only the consumers of this cell')
    a.add_argument('--grace', type=_seconds, metavar='SECONDS',
                   default=300,  # nova_fixes.audit.GRACE
                   help='leave to nova what a migration holds for this '
                   'long after the migration last changed (default 300): '
                   'a move that has just ended is still giving its '
                   'allocations back')
    a.add_argument('--every', type=_positive_seconds, metavar='SECONDS',
                   help='the periodic form: run again every SECONDS (at '
                   'least 1), until stopped or --runs runs; off unless '
                   'given')
    a.add_argument('--runs', type=_positive_int, metavar='N',
                   help='with --every: stop after N runs')
    a.add_argument('--config-file', action='append', metavar='PATH',
                   help="nova's configuration (repeatable; default: "
                   "nova's own, /etc/nova/nova.conf)")
    a.add_argument('--config-dir', metavar='DIR',
                   help="a directory of nova's configuration files")
    a.set_defaults(func=_audit, subparser=a)
    return p


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    top = parser()
    args, unknown = top.parse_known_args(argv)
    if unknown:
        # argparse lets the top-level parser report what a subcommand does
        # not know, with the top-level usage: name the subcommand's.
        after_command = argv.index(unknown[0]) > argv.index(args.command)
        (args.subparser if after_command else top).error(
            'unrecognized arguments: %s' % ' '.join(unknown))
    # Importing nova warns that eventlet is deprecated (9 lines): nova's
    # own concern, and nothing a nova-fixes command can act on.
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    try:
        return args.func(args)
    except errors.NovaFixesError as e:
        sys.stderr.write('nova-fixes: %s\n' % e)
        return 2
    except BrokenPipeError:
        # The reader went away (nova-fixes list | head): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == '__main__':
    sys.exit(main())
