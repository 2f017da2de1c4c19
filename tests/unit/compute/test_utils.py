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

import os
import re
from unittest import mock

from nova.compute import task_states
from nova.compute import vm_states
from nova import exception
from nova import objects
import testtools

from nova_fixes.nova.compute import utils


class IsInstanceDeletedTestCase(testtools.TestCase):

    def setUp(self):
        super(IsInstanceDeletedTestCase, self).setUp()
        self.context = mock.Mock()
        patcher = mock.patch('nova.objects.Instance.get_by_uuid')
        self.get = patcher.start()
        self.addCleanup(patcher.stop)

    def _deleted(self):
        return utils.is_instance_deleted(self.context, 'uuid')

    def test_not_found(self):
        self.get.side_effect = exception.InstanceNotFound(instance_id='uuid')
        self.assertTrue(self._deleted())
        self.context.elevated.assert_called_once_with(read_deleted='no')

    def test_deleting(self):
        self.get.return_value = mock.Mock(vm_state=vm_states.ACTIVE,
                                          task_state=task_states.DELETING)
        self.assertTrue(self._deleted())

    def test_deleted_state(self):
        self.get.return_value = mock.Mock(vm_state=vm_states.DELETED,
                                          task_state=None)
        self.assertTrue(self._deleted())

    def test_live(self):
        for vm_state, task_state in ((vm_states.ACTIVE, None),
                                     (vm_states.ACTIVE,
                                      task_states.MIGRATING),
                                     (vm_states.SOFT_DELETED, None),
                                     (vm_states.ACTIVE,
                                      task_states.SOFT_DELETING)):
            self.get.return_value = mock.Mock(vm_state=vm_state,
                                              task_state=task_state)
            self.assertFalse(self._deleted(), (vm_state, task_state))

    def test_lookup_error_means_not_known_deleted(self):
        self.get.side_effect = exception.DBNotAllowed(binary='x')
        self.assertFalse(self._deleted())


class DeleteAllocationsOfMigrationsTestCase(testtools.TestCase):

    def setUp(self):
        super(DeleteAllocationsOfMigrationsTestCase, self).setUp()
        objects.register_all()
        self.context = mock.NonCallableMock(spec=['read_deleted'],
                                            read_deleted='no')
        self.client = mock.Mock()
        patcher = mock.patch('nova.objects.MigrationList.get_by_filters')
        self.list = patcher.start()
        self.addCleanup(patcher.stop)

    def test_the_migrations_that_may_hold_allocations(self):
        seen = []
        self.list.side_effect = lambda ctxt, filters: (
            seen.append(ctxt.read_deleted) or
            [mock.Mock(uuid='m1', status='reverting'),
             mock.Mock(uuid='m2', status='confirmed')])
        utils.delete_allocations_of_migrations(self.context, self.client,
                                               'uuid')
        self.list.assert_called_once_with(self.context, {
            'instance_uuid': 'uuid',
            'status': list(utils.MIGRATION_STATUSES_HOLDING)})
        # The rows are deleted with the instance.
        self.assertEqual(['yes'], seen)
        self.assertEqual('no', self.context.read_deleted)
        self.assertEqual([
            mock.call(self.context, 'm1', consumer_type='migration',
                      force=True),
            mock.call(self.context, 'm2', consumer_type='migration',
                      force=True)],
            self.client.delete_allocation_for_instance.mock_calls)

    def test_migrations_of_instance_reads_deleted_rows(self):
        seen = []
        self.list.side_effect = lambda ctxt, filters: (
            seen.append(ctxt.read_deleted) or ['m'])
        self.assertEqual(['m'], utils.migrations_of_instance(self.context,
                                                             'uuid'))
        self.list.assert_called_once_with(self.context, {
            'instance_uuid': 'uuid',
            'status': list(utils.MIGRATION_STATUSES_HOLDING)})
        self.assertEqual(['yes'], seen)
        self.assertEqual('no', self.context.read_deleted)

    def test_released_statuses_are_not_read(self):
        self.assertEqual(set(), set(utils.MIGRATION_STATUSES_RELEASED) &
                         set(utils.MIGRATION_STATUSES_HOLDING))
        for status in ('confirmed', 'completed', 'done'):
            self.assertNotIn(status, utils.MIGRATION_STATUSES_HOLDING)
        for status in ('reverting', 'reverted', 'error', 'failed',
                       'finished', 'cancelled'):
            self.assertIn(status, utils.MIGRATION_STATUSES_HOLDING)

    def test_every_status_nova_sets_is_classified(self):
        """A status that a nova series adds is read by the delete until
        someone shows that it releases the migration's allocations.
        """
        import nova
        root = os.path.dirname(nova.__file__)
        pattern = re.compile(
            r"migration[a-z_.]*\.status = '([a-z-]+)'"
            r"|_set_migration_status\([a-z_.]+, '([a-z-]+)'\)"
            r"|migration_status='([a-z-]+)'"
            r"|Migration\([^)]*status='([a-z-]+)'")
        seen = set()
        for package in ('compute', 'conductor', 'api'):
            for top, dirs, files in os.walk(os.path.join(root, package)):
                dirs[:] = [d for d in dirs if d != 'tests']
                for name in files:
                    if not name.endswith('.py'):
                        continue
                    with open(os.path.join(top, name),
                              encoding='utf-8') as f:
                        for match in pattern.finditer(f.read()):
                            seen.update(g for g in match.groups() if g)
        # The scan finds what nova sets on every series.
        self.assertTrue({'confirmed', 'reverting', 'error', 'queued'} <=
                        seen, seen)
        known = (set(utils.MIGRATION_STATUSES_RELEASED) |
                 set(utils.MIGRATION_STATUSES_HOLDING))
        self.assertEqual(set(), seen - known)

    def test_failures_are_logged_not_raised(self):
        self.list.return_value = [mock.Mock(uuid='m1'), mock.Mock(uuid='m2')]
        self.client.delete_allocation_for_instance.side_effect = (
            exception.AllocationDeleteFailed(consumer_uuid='m1', error='x'))
        with mock.patch.object(utils, 'LOG') as log:
            utils.delete_allocations_of_migrations(self.context, self.client,
                                                   'uuid')
        self.assertEqual(2, log.exception.call_count)
        self.list.side_effect = exception.DBNotAllowed(binary='x')
        with mock.patch.object(utils, 'LOG') as log:
            utils.delete_allocations_of_migrations(self.context, self.client,
                                                   'uuid')
        log.exception.assert_called_once()


class StrictDeleteAllocationsTestCase(testtools.TestCase):

    def setUp(self):
        super(StrictDeleteAllocationsTestCase, self).setUp()
        objects.register_all()
        self.context = mock.NonCallableMock(spec=['read_deleted'],
                                            read_deleted='no')
        self.client = mock.Mock()
        self.delete = self.client.delete_allocation_for_instance
        patcher = mock.patch('nova.objects.MigrationList.get_by_filters')
        self.list = patcher.start()
        self.addCleanup(patcher.stop)

    def test_or_raise(self):
        for answer in (True, False):
            self.delete.return_value = answer
            self.assertIs(answer, utils.delete_allocations_or_raise(
                self.context, self.client, 'uuid', 'migration', force=False))
        self.delete.assert_called_with(self.context, 'uuid',
                                       consumer_type='migration',
                                       force=False)
        # safe_connect: placement could not be reached.
        self.delete.return_value = None
        self.assertRaises(exception.AllocationDeleteFailed,
                          utils.delete_allocations_or_raise,
                          self.context, self.client, 'uuid')
        self.delete.assert_called_with(self.context, 'uuid',
                                       consumer_type='instance', force=True)

    def test_strict_raises_the_first_failure(self):
        self.list.return_value = [mock.Mock(uuid='m1'), mock.Mock(uuid='m2')]
        self.delete.return_value = None
        self.assertRaises(exception.AllocationDeleteFailed,
                          utils.delete_allocations_of_migrations,
                          self.context, self.client, 'uuid', strict=True)
        self.delete.assert_called_once_with(
            self.context, 'm1', consumer_type='migration', force=True)
        self.delete.reset_mock()
        self.delete.return_value = True
        utils.delete_allocations_of_migrations(self.context, self.client,
                                               'uuid', strict=True)
        self.assertEqual(2, self.delete.call_count)

    def test_strict_raises_a_listing_failure(self):
        self.list.side_effect = exception.DBNotAllowed(binary='x')
        self.assertRaises(exception.DBNotAllowed,
                          utils.delete_allocations_of_migrations,
                          self.context, self.client, 'uuid', strict=True)
        self.delete.assert_not_called()


@mock.patch.object(utils, 'is_instance_deleted')
class DeleteAllocationsIfDeletedTestCase(testtools.TestCase):

    def setUp(self):
        super(DeleteAllocationsIfDeletedTestCase, self).setUp()
        self.context = mock.sentinel.context
        self.client = mock.Mock()

    def test_live_instance_keeps_everything(self, deleted):
        deleted.return_value = False
        self.assertFalse(utils.delete_allocations_if_deleted(
            self.context, self.client, 'uuid', 'mig'))
        deleted.assert_called_once_with(self.context, 'uuid')
        self.client.delete_allocation_for_instance.assert_not_called()

    def test_deleted_instance_and_its_migration(self, deleted):
        deleted.return_value = True
        self.assertTrue(utils.delete_allocations_if_deleted(
            self.context, self.client, 'uuid', 'mig'))
        self.assertEqual([
            mock.call(self.context, 'uuid', consumer_type='instance',
                      force=True),
            mock.call(self.context, 'mig', consumer_type='migration',
                      force=True)],
            self.client.delete_allocation_for_instance.mock_calls)

    def test_deleted_instance_without_migration(self, deleted):
        deleted.return_value = True
        self.assertTrue(utils.delete_allocations_if_deleted(
            self.context, self.client, 'uuid'))
        self.client.delete_allocation_for_instance.assert_called_once_with(
            self.context, 'uuid', consumer_type='instance', force=True)


class MayHavePortsOrVolumesTestCase(testtools.TestCase):
    """The drop-in answers as nova did for an instance on no host, and
    True for one that has a host (it was scheduled).
    """

    def _instance(self, host, vm_state):
        return objects.Instance(host=host, vm_state=vm_state)

    def test_no_host(self):
        for vm_state, expected in ((vm_states.BUILDING, False),
                                   (vm_states.ACTIVE, False),
                                   (vm_states.SHELVED_OFFLOADED, True),
                                   (vm_states.ERROR, True)):
            self.assertEqual(expected, utils.may_have_ports_or_volumes(
                self._instance(None, vm_state)), vm_state)

    def test_a_host(self):
        for vm_state in (vm_states.BUILDING, vm_states.ACTIVE,
                         vm_states.ERROR):
            self.assertTrue(utils.may_have_ports_or_volumes(
                self._instance('host1', vm_state)), vm_state)

    def test_host_not_loaded(self):
        # nova's own unit test asks it of an Instance with no host field.
        for vm_state, expected in ((vm_states.BUILDING, False),
                                   (vm_states.ERROR, True)):
            self.assertEqual(expected, utils.may_have_ports_or_volumes(
                objects.Instance(vm_state=vm_state)), vm_state)

    def test_as_nova_where_it_has_no_host(self):
        # nova's callers act on the answer only for an instance with no
        # host: there the drop-in answers as nova's function does, for
        # every vm_state.
        from nova.compute import utils as nova_utils
        for vm_state in (vm_states.ACTIVE, vm_states.BUILDING,
                         vm_states.STOPPED, vm_states.PAUSED,
                         vm_states.SUSPENDED, vm_states.RESCUED,
                         vm_states.RESIZED, vm_states.SOFT_DELETED,
                         vm_states.DELETED, vm_states.ERROR,
                         vm_states.SHELVED, vm_states.SHELVED_OFFLOADED):
            instance = self._instance(None, vm_state)
            self.assertEqual(
                nova_utils.may_have_ports_or_volumes(instance),
                utils.may_have_ports_or_volumes(instance), vm_state)
