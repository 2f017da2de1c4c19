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
            "'instance', None)))\n" % ((indent,) * 2)))
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

FIX = registry.Fix(
    bug='manage_audit',
    title='nova-manage placement audit --delete deletes the claims of '
          'builds and moves in flight',
    open_upstream=True,
    upstream='open; the audit only knows instances on the node and '
             'migrations in progress there (related to bug 1793569)',
    targets=TARGETS,
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
    ),
    notes=NOTES,
    unit_tests=(registry.NovaUnitTests(MANAGE_UNIT, 'manage_audit.py'),),
    patch=registry.Patch(
        slug=FIX_SLUG,
        subject='Leave live claims alone in the placement audit',
        body=FIX_MESSAGE,
        trailers=TRAILERS,
        test_edits=(orphan_is_looked_up,),
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
        ),
    ),
)
