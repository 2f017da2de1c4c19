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

"""The placement audit's live claims: ``nova-manage placement audit
--delete`` deletes the claims of builds and moves in flight, and the
allocations a live server holds away from its host, because it calls a
consumer an orphan unless it is an instance recorded on the node or a
migration in progress there. The audit came with Launchpad bug 1793569;
no bug names this.
"""

import ast

from nova_fixes import errors
from nova_fixes.export import edits
from nova_fixes import registry

PC = 'nova.cmd.manage:PlacementCommands.'
DROPIN = 'nova_fixes.nova.cmd.manage:'

RECREATE_SLUG = 'Recreate-the-placement-audit-deleting-live-claims'
FIX_SLUG = 'Leave-live-claims-alone-in-the-placement-audit'
NOVA_TEST = 'nova/tests/functional/test_placement_audit_live_claims.py'
NOTES = ('placement-audit-live-claims-5c0e7a9d3f1b2846.yaml',)
MANAGE_UNIT = 'nova/tests/unit/cmd/test_manage.py'
TRAILERS = ('Related-Bug: #1793569',)

TARGETS = (
    registry.Target(PC + '_check_orphaned_allocations_for_provider',
                    DROPIN + '_check_orphaned_allocations_for_provider',
                    services=('manage',)),
    registry.Target(PC + '_orphaned_consumer', DROPIN + '_orphaned_consumer',
                    new=True, services=('manage',)),
    registry.Target(PC + '_orphaned_migration',
                    DROPIN + '_orphaned_migration', new=True,
                    services=('manage',)),
    registry.Target(PC + '_live_instance', DROPIN + '_live_instance',
                    new=True, services=('manage',)),
)

#: The audit's heal (a feature: its blueprint and spec,
#: patches/master/specs/placement-audit-heal.rst).
HEAL_SLUG = 'Heal-misplaced-allocations-in-the-placement-audit'
HEAL_TEST = 'nova/tests/functional/test_placement_audit_heal.py'
HEAL_NOTES = ('placement-audit-heal-3e9a6c1d7b2f5048.yaml',)
HEAL_TRAILERS = ('Implements: blueprint placement-audit-heal',
                 'Related-Bug: #1793569')
MANAGE_DOC = 'doc/source/cli/nova-manage.rst'
HEAL_TARGETS = (
    registry.Target(PC + 'audit', DROPIN + 'audit',
                    original_as='_audit_as_nova_does',
                    services=('manage',)),
    registry.Target(PC + '_heal_misplaced_allocations',
                    DROPIN + '_heal_misplaced_allocations', new=True,
                    services=('manage',)),
    registry.Target(PC + '_heal_misplaced', DROPIN + '_heal_misplaced',
                    new=True, services=('manage',)),
    registry.Target(PC + '_heal_misplaced_server',
                    DROPIN + '_heal_misplaced_server', new=True,
                    services=('manage',)),
    registry.Target(PC + '_heal_ended_move', DROPIN + '_heal_ended_move',
                    new=True, services=('manage',)),
    registry.Target(PC + '_replaces_a_claim', DROPIN + '_replaces_a_claim',
                    new=True, services=('manage',)),
)

#: The nova-manage documentation of the audit, and what --heal adds to it.
MANAGE_DOC_EDITS = (
    ('    nova-manage placement audit [--verbose] [--delete]\n'
     '      [--resource_provider <uuid>]\n',
     '    nova-manage placement audit [--verbose] [--delete] [--heal]\n'
     '      [--resource_provider <uuid>]\n'),
    ('.. option:: --delete\n\n'
     '    Deletes orphaned allocations that were found.\n',
     '.. option:: --delete\n\n'
     '    Deletes orphaned allocations that were found.\n\n'
     '.. option:: --heal\n\n'
     '    Moves misplaced allocations to where their server runs: a live\n'
     '    server\'s allocations on a node its guest is not on are removed\n'
     '    and, if it holds nothing on its own node, its flavor is put\n'
     '    there; a migration\'s of a move that is over, on the node its\n'
     '    server runs on, are given to the server (or removed if it holds\n'
     '    that node already). Every write requires the consumer\n'
     '    generations read, so that an allocation written meanwhile (a\n'
     '    build\'s or a move\'s claim) is never overwritten: the consumer\n'
     '    is read again. Claims of builds and moves in flight are left\n'
     '    alone. A server whose flavor needs resources of nested\n'
     '    providers is left to :program:`nova-manage placement\n'
     '    heal_allocations`, and one holding such resources (a port\'s\n'
     '    bandwidth) on the other node and nothing on its own is left\n'
     '    alone: its flavor would not put them back.\n'),
    ('   * - 3\n'
     '     - Orphaned allocations were found\n'
     '   * - 4\n'
     '     - All found orphaned allocations were deleted\n',
     '   * - 3\n'
     '     - Orphaned (or, with ``--heal``, misplaced) allocations were '
     'found\n'
     '   * - 4\n'
     '     - All found orphaned allocations were deleted, or misplaced '
     'ones healed\n'),
)


def document_heal(files):
    """nova-manage's documentation of the placement audit: the --heal
    option and its return codes. Refuses a page that does not read as
    expected.
    """
    if MANAGE_DOC not in files:
        raise errors.ExportError('the nova tree has no %s' % MANAGE_DOC)
    text = files[MANAGE_DOC]
    for old, new in MANAGE_DOC_EDITS:
        if text.count(old) != 1:
            raise errors.ExportError(
                '%s: the placement audit is not documented as expected: %s'
                % (MANAGE_DOC, old.splitlines()[0].strip()))
        text = text.replace(old, new)
    return {MANAGE_DOC: text}


#: nova's unit test of _check_orphaned_allocations_for_provider, which
#: runs with no database: its orphan is now looked up first.
CHECK_TEST = 'test_check_orphaned_allocations_for_provider'


def orphan_is_looked_up(files):
    """nova's unit test of the audit of one provider runs with no
    database: the consumer it expects deleted is now looked up before it
    is called an orphan, so the test says the lookup finds nothing that
    may use it. What it asserts is unchanged.
    """
    def edit(text):
        func = edits.function(ast.parse(text), CHECK_TEST)
        if func is None or not func.decorator_list:
            raise errors.ExportError('%s has no %s to update'
                                     % (MANAGE_UNIT, CHECK_TEST))
        lines = text.splitlines(True)
        at = func.decorator_list[0].lineno
        indent = ' ' * func.col_offset
        lines.insert(at - 1, (
            "%s@mock.patch.object(manage.PlacementCommands, "
            "'_orphaned_consumer',\n"
            "%s                   new=mock.Mock(return_value=("
            "'instance', None, None)))\n" % ((indent,) * 2)))
        return ''.join(lines)

    return edits.edit_python(files, MANAGE_UNIT, edit)


RECREATE_MESSAGE = """\
nova-manage placement audit calls a consumer's allocations on a resource
provider orphaned unless the consumer is an instance recorded on the
provider's compute node or a migration in progress there, and --delete
deletes them. That test is wrong for every build and move in flight:
the scheduler claims the destination under the instance consumer before
the instance is recorded there (a build has no host yet; a cold
migration's instance stays on the source until resize_instance). Run on
a busy cloud, the audit deletes live claims, the server ends up holding
nothing, and the scheduler overcommits its host. It also deletes what a
live server holds away from its host, and the allocations a migration of
a move that is over holds on the node its server runs on (what a move
whose rollback could not reach placement leaves): the server is left
holding less than its guest uses.

This adds functional regression tests of the four cases. They assert
the deletions under a FIXME; the change that fixes it flips them."""

FIX_MESSAGE = """\
PlacementCommands._check_orphaned_allocations_for_provider deleted the
allocations of any consumer that is neither an instance recorded on the
node nor a migration in progress there, which includes the claims of
builds and moves in flight (see the previous change).

Such a consumer is now looked up before it is called an orphan
(_orphaned_consumer), and its allocations are left alone, with the
reason printed in verbose mode, when something may still use them: a
build request, an instance with a task state or building with no host
yet, a live server on another host (its allocations are misplaced, not
orphaned: deleting them leaves it holding less than its guest uses), a
migration in progress anywhere, the migration of a move that is over
whose server runs on this node, or records in a cell that cannot be
read. Orphaned are still a deleted or archived server's allocations, a
server's that runs nowhere (no host and not building), and a migration's
whose move is over and whose server runs elsewhere or is gone. The
lookups are made only for the consumers the node does not account for:
an audit of a cloud with nothing orphaned costs what it did.

The audit does not correct misplaced allocations: it says why it left
them. The resource tracker's periodic corrects those a move that is over
left, when it has positive evidence of where the guest runs (see the
change correcting them periodically); moving them from the audit is a
follow-up.

nova's unit test of the audit of one provider runs with no database: it
now says the lookup finds nothing that may use the consumer it expects
deleted; what it asserts is unchanged."""

HEAL_MESSAGE = """\
nova-manage placement audit finds allocations that are misplaced, not
orphaned: a live server's on a node its guest is not on (what a move
interrupted by a compute that stopped leaves: the server holds the
destination, its migration the source), and the allocations a migration
of a move that is over holds on the node its server runs on. It leaves
them alone (see the previous change): deleting them leaves the server
holding less than its guest uses. Nothing in nova moves them, and the
operator is left to write allocations by hand.

This adds --heal. After the audit's pass, a second pass over the same
providers heals each misplaced consumer of a compute node: a live
server's allocations on the node are removed and, if it then holds
nothing on its own node, its flavor is put there; a migration's are
given to its server in one request for both consumers, or removed if the
server holds that node already; but if the migration holds there exactly
the flavor the server uses and the server something else, on one
provider (a resize on the same host that failed before its finish: the
server holds the new flavor's claim), the migration's replace the
server's, as the resource tracker's periodic correction decides. The
consumers' allocations and their generations are read first and the
verdict is made again on records read after them; every write requires
those generations, so that a claim written meanwhile (a build's, a
move's) makes placement refuse the write and the consumer is read again,
up to three times: nothing is overwritten. Claims in flight stay left
alone, as without --heal. A server whose flavor needs resources of
nested providers is left to heal_allocations, and so is one holding such
resources (a port's bandwidth on a child provider) on the other node and
nothing on its own, which its flavor alone would not put back; a sharing
provider's consumers are not looked at. It costs nothing without --heal;
with it, the providers' allocations are read again, plus a few requests
per misplaced consumer.

Return codes: 4 when something was healed, 1 when a write failed."""

FIX = registry.Fix(
    bug='manage_audit',
    title='nova-manage placement audit --delete deletes the claims of '
          'builds and moves in flight',
    open_upstream=True,
    upstream='open; the audit only knows instances on the node and '
             'migrations in progress there (related to bug 1793569)',
    targets=TARGETS + HEAL_TARGETS,
    tests=('test_manage_audit',),
    nova_tests=(
        registry.NovaTest(
            NOVA_TEST, 'test_placement_audit_live_claims.py',
            pairs=tuple(
                (name, 'test_manage_audit.LiveClaimsTest.' + name)
                for name in ('test_build_in_flight',
                             'test_cold_migration_in_flight',
                             'test_misplaced_server',
                             'test_ended_move_holding_the_servers_node'))),
        registry.NovaTest(
            HEAL_TEST, 'test_placement_audit_heal.py',
            pairs=tuple(
                (name, 'test_manage_audit.HealTest.' + name)
                for name in ('test_heal_misplaced_server',
                             'test_heal_ended_move_holding_the_servers_node',
                             'test_heal_move_rolled_back_on_its_source',
                             'test_heal_leaves_claims_in_flight'))),
    ),
    notes=NOTES + HEAL_NOTES,
    unit_tests=(registry.NovaUnitTests(MANAGE_UNIT, 'manage_audit.py'),
                registry.NovaUnitTests(MANAGE_UNIT,
                                       'manage_audit_heal.py')),
    patch=registry.Patch(
        slug=FIX_SLUG,
        subject='Leave live claims alone in the placement audit',
        body=FIX_MESSAGE,
        trailers=TRAILERS,
        test_edits=(orphan_is_looked_up, document_heal),
        changes=(
            registry.Change(
                slug=RECREATE_SLUG,
                subject='Recreate the placement audit deleting live claims',
                body=RECREATE_MESSAGE,
                trailers=TRAILERS,
                recreates=(NOVA_TEST,),
                needs=()),
            registry.Change(
                slug=FIX_SLUG,
                subject='Leave live claims alone in the placement audit',
                body=FIX_MESSAGE,
                trailers=TRAILERS,
                targets=tuple(target.path for target in TARGETS),
                nova_tests=(NOVA_TEST,),
                notes=NOTES,
                test_edits=('orphan_is_looked_up',),
                unit_tests=('manage_audit.py',),
                needs=(RECREATE_SLUG,)),
            registry.Change(
                slug=HEAL_SLUG,
                subject='Heal misplaced allocations in the placement audit',
                body=HEAL_MESSAGE,
                trailers=HEAL_TRAILERS,
                targets=tuple(target.path for target in HEAL_TARGETS),
                nova_tests=(HEAL_TEST,),
                notes=HEAL_NOTES,
                test_edits=('document_heal',),
                unit_tests=('manage_audit_heal.py',),
                needs=(FIX_SLUG,)),
        ),
    ),
)
