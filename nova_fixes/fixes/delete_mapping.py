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

"""A DELETE whose instance mapping write fails: nova answers 500 while
the compute deletes the server, and leaves the mapping not
queued_for_delete, counted by the quota from placement until an archive.
No Launchpad bug names it; it is the modern form of bug 1783613 (quota
usage a delete does not give back).
"""

from nova_fixes import registry

_REGRESSIONS = 'nova/tests/functional/regressions/'

RECREATE_SLUG = 'Recreate-a-DELETE-answering-500-when-its-mapping-write-fails'
FIX_SLUG = "Queue-a-deleted-server-s-mapping-before-its-delete"
NOVA_TEST = _REGRESSIONS + 'test_bug_1783613_delete_mapping_write.py'
NOTES = ('delete-mapping-write-fails-3b8e1f40c6d92a57.yaml',)
API_UNIT = 'nova/tests/unit/compute/test_api.py'

TARGETS = (
    registry.Target('nova.exception:DatabaseUnavailableForDelete',
                    'nova_fixes.nova.exception:'
                    'DatabaseUnavailableForDelete', new=True,
                    after='ConfirmNotAnsweredForDelete',
                    services=('api',)),
    registry.Target('nova.compute.api:API._do_delete',
                    'nova_fixes.nova.compute.api:_do_delete',
                    services=('api',)),
    registry.Target('nova.compute.api:API._do_soft_delete',
                    'nova_fixes.nova.compute.api:_do_soft_delete',
                    services=('api',)),
)

RECREATE_MESSAGE = """\
The API casts a server's delete to its compute and only then marks the
instance mapping queued_for_delete in the API database. When the API
database fails that write (DBConnectionError), the DELETE answers 500
while the compute deletes the server anyway, and the mapping is left
not queued_for_delete: with [quota]count_usage_from_placement the quota
counts the deleted server until its rows are archived.

This adds a functional regression test of it. It asserts the 500 and
the mapping left under a FIXME; the change that fixes it flips it."""

FIX_MESSAGE = """\
API._do_delete and API._do_soft_delete wrote the instance mapping after
the delete was cast to the compute (or done locally). A fault of the API
database on that write answered 500 for a server the compute deleted,
and left its mapping not queued_for_delete, counted by the quota from
placement until an archive; for a local delete the record was left
saved DELETED and not destroyed.

The mapping is now queued first. If that write fails, nothing is sent:
DatabaseUnavailableForDelete, a 503 in the same family as
PlacementUnavailableForDelete (API._delete puts the task state back, see
bug 1848343's change, so that the user can retry). If the delete then
fails before it reaches the compute, the mapping is put back."""

FIX = registry.Fix(
    bug='delete_mapping',
    title="A DELETE whose instance mapping write fails answers 500 and "
          "leaves the mapping counted",
    open_upstream=True,
    upstream='open; API._do_delete writes queued_for_delete after the '
             'cast (related to bug 1783613)',
    targets=TARGETS,
    tests=('test_delete_db_faults',),
    nova_tests=(
        registry.NovaTest(
            NOVA_TEST, 'test_bug_1783613_delete_mapping_write.py',
            pairs=(('test_delete',
                    'test_delete_db_faults.DeleteMappingWriteFailsTest.'
                    'test_delete'),)),
    ),
    notes=NOTES,
    unit_tests=(
        registry.NovaUnitTests(API_UNIT, 'compute_api_mapping_write.py'),
    ),
    patch=registry.Patch(
        slug=FIX_SLUG,
        subject="Queue a deleted server's mapping before its delete",
        body=FIX_MESSAGE,
        trailers=('Related-Bug: #1783613',),
        changes=(
            registry.Change(
                slug=RECREATE_SLUG,
                subject='Recreate a DELETE answering 500 when its mapping '
                        'write fails',
                body=RECREATE_MESSAGE,
                trailers=('Related-Bug: #1783613',),
                recreates=(NOVA_TEST,),
                needs=()),
            registry.Change(
                slug=FIX_SLUG,
                subject="Queue a deleted server's mapping before its "
                        'delete',
                body=FIX_MESSAGE,
                trailers=('Related-Bug: #1783613',),
                targets=tuple(target.path for target in TARGETS),
                nova_tests=(NOVA_TEST,),
                notes=NOTES,
                unit_tests=('compute_api_mapping_write.py',),
                needs=(RECREATE_SLUG,)),
        ),
    ),
)
