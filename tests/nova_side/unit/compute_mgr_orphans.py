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

from unittest import mock

from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import manager
from nova.compute import power_state
from nova.compute import task_states
from nova import context
from nova import exception
from nova import objects
from nova import test


class _OrphanInstancesTestBase(test.NoDBTestCase):
    """A compute manager whose hypervisor lists guests, and the records,
    migrations, instance mappings and allocations its lookups find.
    """

    def setUp(self):
        super(_OrphanInstancesTestBase, self).setUp()
        self.manager = mock.Mock(spec=['host', 'driver', 'reportclient'],
                                 host='host1')
        self.manager.reportclient.get_allocs_for_consumer.side_effect = (
            lambda ctxt, uuid: {'allocations': dict(
                self.allocations.get(uuid, {}))})
        self.context = context.get_admin_context()
        self.own = []
        self.records = []
        self.migrations = []
        #: Every migration record of the cell, by instance (the fallback
        #: without the API database reads them, deleted ones included).
        self.cell_migrations = []
        self.allocations = {}
        self.mapped = []
        for target, source in (
                ('nova.objects.InstanceList.get_uuids_by_host',
                 lambda *a, **k: self.own),
                ('nova.objects.MigrationList.get_by_filters',
                 self._migrations),
                ('nova.objects.InstanceList.get_by_filters',
                 self._records),
                ('nova.objects.InstanceMappingList.get_by_instance_uuids',
                 lambda ctxt, wanted: [
                     mock.Mock(instance_uuid=u) for u in self.mapped
                     if u in wanted]),
                ('nova.objects.Instance.get_by_uuid', self._reread)):
            patcher = mock.patch(target, side_effect=source)
            mocked = patcher.start()
            self.addCleanup(patcher.stop)
            setattr(self, target.rsplit('.', 1)[1], mocked)

    @staticmethod
    def _record(uuid, host, deleted=False, task_state=None, hidden=False):
        return mock.Mock(uuid=uuid, host=host, deleted=deleted,
                         task_state=task_state, hidden=hidden)

    def _migrations(self, ctxt, filters, **kwargs):
        if 'instance_uuid' in filters:
            return [m for m in self.cell_migrations
                    if m.instance_uuid == filters['instance_uuid']]
        return self.migrations

    def _records(self, ctxt, filters, **kwargs):
        return [r for r in self.records if r.uuid in filters['uuid'] and
                bool(r.hidden) == filters.get('hidden', False)]

    def _reread(self, ctxt, uuid, **kwargs):
        for record in self.records:
            if record.uuid == uuid:
                return record
        raise exception.InstanceNotFound(instance_id=uuid)

    def guests(self, *uuids):
        self.manager.driver.list_instance_uuids.return_value = list(uuids)


class OrphanInstancesClassificationTestCase(_OrphanInstancesTestBase):
    """Tests for find_orphan_instances and hidden_records (the orphan
    instances periodic task).
    """

    def _find(self):
        return {o.uuid: (o.reason, o.host)
                for o in manager.find_orphan_instances(self.manager,
                                                       self.context)}

    def test_no_guests_no_lookup(self):
        self.guests()
        self.assertEqual({}, self._find())
        self.get_uuids_by_host.assert_not_called()
        self.get_by_filters.assert_not_called()

    def test_only_own_guests_one_lookup(self):
        self.guests(uuids.a, uuids.b)
        self.own = [uuids.a, uuids.b, uuids.c]
        self.assertEqual({}, self._find())
        self.get_by_filters.assert_not_called()
        self.get_by_instance_uuids.assert_not_called()

    def test_classification(self):
        self.guests(uuids.mine, uuids.unknown, uuids.foreign,
                    uuids.deleted, uuids.moving, uuids.busy, uuids.hidden,
                    uuids.shelved, uuids.mapped, uuids.moving_unknown)
        self.own = [uuids.mine]
        self.records = [
            self._record(uuids.foreign, 'host2'),
            self._record(uuids.deleted, 'host2', deleted=True),
            self._record(uuids.moving, 'host2'),
            self._record(uuids.busy, 'host2',
                    task_state=task_states.REBOOTING),
            self._record(uuids.hidden, 'host2', hidden=True),
            self._record(uuids.shelved, None),
        ]
        self.mapped = [uuids.mapped]
        self.migrations = [mock.Mock(instance_uuid=uuids.moving),
                           mock.Mock(instance_uuid=uuids.moving_unknown)]
        # The guest whose only record is hidden has no mapping here (a
        # cross-cell resize keeps one): unknown, until the task checks its
        # hidden records before acting (TaskTestCase).
        self.assertEqual({uuids.unknown: ('unknown', None),
                          uuids.hidden: ('unknown', None),
                          uuids.foreign: ('foreign', 'host2')},
                         self._find())
        self.get_by_instance_uuids.assert_called_once_with(
            self.context, sorted([uuids.mapped, uuids.unknown,
                                  uuids.hidden]))

    def test_hidden_records_are_not_read_to_classify(self):
        self.guests(uuids.a, uuids.b)
        self.records = [self._record(uuids.a, 'host2', hidden=True)]
        self.assertEqual({uuids.a: ('unknown', None),
                          uuids.b: ('unknown', None)}, self._find())
        self.assertEqual(
            [None], [c[0][1].get('hidden') for c in
                     self.get_by_filters.call_args_list])

    def test_hidden_records(self):
        self.records = [self._record(uuids.a, 'host2', hidden=True),
                        self._record(uuids.b, 'host2')]
        self.assertEqual({uuids.a}, manager.hidden_records(
            self.context, [uuids.a, uuids.b, uuids.c]))
        filters = self.get_by_filters.call_args[0][1]
        self.assertIs(True, filters['hidden'])
        self.assertEqual('no', self.context.read_deleted)
        self.get_by_filters.reset_mock()
        self.assertEqual(set(), manager.hidden_records(self.context, []))
        self.get_by_filters.assert_not_called()

    def test_no_candidate_no_more_lookups(self):
        self.guests(uuids.a, uuids.b)
        self.records = [self._record(uuids.a, 'host2', deleted=True),
                        self._record(uuids.b, None)]
        self.assertEqual({}, self._find())
        self.assertEqual(1, self.get_by_filters.call_count)
        objects.MigrationList.get_by_filters.assert_not_called()
        self.get_by_instance_uuids.assert_not_called()

    def test_migrations_of_this_host_in_progress(self):
        self.guests(uuids.a)
        self._find()
        filters = self.get_by_filters.call_args[0][1]
        migration_filters = (
            objects.MigrationList.get_by_filters.call_args[0][1])
        self.assertEqual('host1', migration_filters['host'])
        done = ('confirmed', 'reverted', 'error', 'failed', 'completed',
                'cancelled', 'done')
        for status in ('finished', 'reverting', 'running', 'accepted'):
            self.assertIn(status, migration_filters['status'])
        self.assertEqual(set(), set(done) & set(migration_filters['status']))
        self.assertEqual([uuids.a], filters['uuid'])

    def test_constant_round_trips(self):
        self.guests(*['%032x' % i for i in range(500)])
        self.own = ['%032x' % i for i in range(250)]
        self.assertEqual(250, len(self._find()))
        self.assertEqual(1, self.get_uuids_by_host.call_count)
        self.assertEqual(1, self.get_by_filters.call_count)
        self.assertEqual(1, objects.MigrationList.get_by_filters.call_count)
        self.assertEqual(1, self.get_by_instance_uuids.call_count)
        filters = self.get_by_filters.call_args[0][1]
        self.assertEqual(250, len(filters['uuid']))

    def test_deleted_records_are_read(self):
        self.guests(uuids.a)

        def read(ctxt, filters, **kwargs):
            self.assertEqual('yes', ctxt.read_deleted)
            self.assertEqual([], kwargs['expected_attrs'])
            return []

        self.get_by_filters.side_effect = read
        self._find()
        self.assertEqual('no', self.context.read_deleted)

    def test_without_api_database_the_cell_and_placement_decide(self):
        """A compute whose cell conductor has no API database: an unknown
        guest is one with no migration in the cell, deleted ones included,
        and no allocations in placement.
        """
        self.guests(uuids.unknown, uuids.migrated, uuids.allocated,
                    uuids.foreign)
        self.records = [self._record(uuids.foreign, 'host2')]
        self.cell_migrations = [mock.Mock(instance_uuid=uuids.migrated)]
        self.allocations = {uuids.allocated: {uuids.rp: {}}}
        self.get_by_instance_uuids.side_effect = Exception('no API DB')

        def read(ctxt, filters, **kwargs):
            if 'instance_uuid' in filters:
                self.assertEqual('yes', ctxt.read_deleted)
            return self._migrations(ctxt, filters, **kwargs)

        objects.MigrationList.get_by_filters.side_effect = read
        found = manager.find_orphan_instances(self.manager, self.context)
        self.assertEqual([(uuids.unknown, 'unknown', False),
                          (uuids.foreign, 'foreign', True)],
                         [(o.uuid, o.reason, o.mapped) for o in
                          sorted(found, key=lambda o: o.reason,
                                 reverse=True)])
        unknown = [o for o in found if o.reason == 'unknown'][0]
        self.assertIn('no allocations in placement', unknown.describe())
        self.assertIn('cannot be read', unknown.describe())
        # Placement is asked only for the guests with no migration.
        self.assertEqual(
            sorted([uuids.unknown, uuids.allocated]),
            sorted(c[0][1] for c in self.manager.reportclient.
                   get_allocs_for_consumer.call_args_list))
        self.assertEqual('no', self.context.read_deleted)

    def test_without_api_database_and_placement_no_unknown(self):
        self.guests(uuids.unknown1, uuids.unknown2, uuids.foreign)
        self.records = [self._record(uuids.foreign, 'host2')]
        self.get_by_instance_uuids.side_effect = Exception('no API DB')
        self.manager.reportclient.get_allocs_for_consumer.side_effect = (
            Exception('placement down'))
        with mock.patch.object(manager, 'LOG') as log:
            self.assertEqual({uuids.foreign: ('foreign', 'host2')},
                             self._find())
        warning = log.warning
        # Said once for the scan, naming how many.
        self.assertEqual(1, warning.call_count)
        self.assertIn('cannot decide', warning.call_args[0][0])
        self.assertEqual(2, warning.call_args[0][1])

    def test_mapped_unknown_describes_the_api_database(self):
        self.guests(uuids.unknown)
        found = manager.find_orphan_instances(self.manager, self.context)
        self.assertEqual([True], [o.mapped for o in found])
        self.assertIn('no instance mapping in the API database',
                      found[0].describe())
        self.manager.reportclient.get_allocs_for_consumer.assert_not_called()

    def test_ignored(self):
        self.flags(ignore_uuids=[uuids.a.upper()],
                         group='orphan_instances')
        self.guests(uuids.a, uuids.b)
        self.assertEqual([uuids.b], list(self._find()))

    def test_lookup_errors_propagate(self):
        self.guests(uuids.a)
        self.get_by_filters.side_effect = RuntimeError('DB down')
        self.assertRaises(RuntimeError, self._find)


class OrphanInstancesTaskTestCase(_OrphanInstancesTestBase):
    """Tests for ComputeManager._cleanup_orphan_instances."""

    def _run(self):
        manager.ComputeManager._cleanup_orphan_instances(self.manager,
                                                         self.context)

    def test_log_changes_nothing(self):
        self.guests(uuids.a)
        with mock.patch.object(manager, 'LOG') as log:
            self._run()
        self.manager.driver.destroy.assert_not_called()
        self.manager.driver.power_off.assert_not_called()
        self.assertIn(uuids.a, log.warning.call_args[0])

    def test_log_reads_no_hidden_record(self):
        self.guests(uuids.a)
        self.records = [self._record(uuids.a, 'host2', hidden=True)]
        with mock.patch.object(manager, 'LOG') as log:
            self._run()
        self.assertEqual(
            [None], [c[0][1].get('hidden') for c in
                     self.get_by_filters.call_args_list])
        self.manager.driver.destroy.assert_not_called()
        self.assertIn(uuids.a, log.warning.call_args[0])

    def test_hidden_record_spares_a_guest_due_for_action(self):
        self.flags(action='reap', grace_period=0,
                         group='orphan_instances')
        self.guests(uuids.a, uuids.b)
        self.records = [self._record(uuids.a, 'host2', hidden=True)]
        self._run()
        destroyed = [c[0][1].uuid for c in
                     self.manager.driver.destroy.call_args_list]
        self.assertEqual([uuids.b], destroyed)
        hidden = [c for c in self.get_by_filters.call_args_list
                  if c[0][1].get('hidden')]
        self.assertEqual(1, len(hidden))
        self.assertEqual(sorted([uuids.a, uuids.b]),
                         sorted(hidden[0][0][1]['uuid']))

    def test_no_hidden_lookup_within_the_grace_period(self):
        self.flags(action='reap', grace_period=60,
                         group='orphan_instances')
        self.guests(uuids.a)
        self._run()
        self.assertEqual(
            [None], [c[0][1].get('hidden') for c in
                     self.get_by_filters.call_args_list])
        self.manager.driver.destroy.assert_not_called()

    def test_hidden_lookup_failure_decides_nothing(self):
        self.flags(action='reap', grace_period=0,
                         group='orphan_instances')
        self.guests(uuids.a)

        def records(ctxt, filters, **kwargs):
            if filters.get('hidden'):
                raise Exception('timeout')
            return []

        self.get_by_filters.side_effect = records
        with mock.patch.object(manager, 'LOG') as log:
            self._run()
        self.manager.driver.destroy.assert_not_called()
        log.exception.assert_called_once()

    def test_stop_only_powers_off(self):
        self.flags(action='stop', grace_period=0,
                         group='orphan_instances')
        self.guests(uuids.a)
        self.manager.driver.get_info.return_value = mock.Mock(
            state=power_state.RUNNING)
        self._run()
        self.manager.driver.power_off.assert_called_once()
        self.manager.driver.destroy.assert_not_called()

    def test_reap_keeps_disks_volumes_and_ports(self):
        self.flags(action='reap', grace_period=0,
                         group='orphan_instances')
        self.guests(uuids.a)
        self.records = [self._record(uuids.a, 'host2')]
        self._run()
        self.manager.driver.destroy.assert_called_once_with(
            self.context, self.records[0], network_info=[],
            block_device_info=None, destroy_disks=False)
        # The full record (with its flavor) is read for this guest alone.
        self.get_by_uuid.assert_called_once_with(
            self.context, uuids.a, expected_attrs=['flavor'])

    def test_record_changed_before_the_action(self):
        self.flags(action='reap', grace_period=0,
                         group='orphan_instances')
        self.guests(uuids.a, uuids.b)
        self.records = [self._record(uuids.a, 'host2'),
                        self._record(uuids.b, 'host2')]
        moved = self._record(uuids.a, 'host1')
        self.get_by_uuid.side_effect = [
            moved, exception.InstanceNotFound(instance_id=uuids.b)]
        with mock.patch.object(manager, 'LOG') as log:
            self._run()
        self.manager.driver.destroy.assert_not_called()
        outcomes = [c[0][-1] for c in log.warning.call_args_list]
        self.assertIn('none (its record changed meanwhile: not an orphan)',
                      outcomes)
        self.assertIn('none (its record was deleted meanwhile)', outcomes)

    def test_lookup_failure_decides_nothing(self):
        self.flags(action='reap', grace_period=0,
                         group='orphan_instances')
        self.guests(uuids.a)
        self.get_by_filters.side_effect = Exception('timeout')
        with mock.patch.object(manager, 'LOG') as log:
            self._run()
        self.manager.driver.destroy.assert_not_called()
        log.exception.assert_called_once()

    def test_driver_without_uuid_listing(self):
        self.manager.driver.list_instance_uuids.side_effect = (
            NotImplementedError())
        with mock.patch.object(manager, 'LOG') as log:
            self._run()
        log.exception.assert_not_called()
        self.get_by_filters.assert_not_called()

    def test_a_failed_action_does_not_stop_the_run(self):
        self.flags(action='reap', grace_period=0,
                         group='orphan_instances')
        self.guests(uuids.a, uuids.b)
        self.manager.driver.destroy.side_effect = [Exception('busy'), None]
        self._run()
        self.assertEqual(2, self.manager.driver.destroy.call_count)

    def test_grace_is_tracked_per_guest(self):
        self.flags(action='reap', grace_period=10,
                         group='orphan_instances')
        self.guests(uuids.a)
        with mock.patch('time.monotonic', return_value=100.0):
            self._run()
        self.guests(uuids.a, uuids.b)
        with mock.patch('time.monotonic', return_value=110.0):
            self._run()
        destroyed = [c[0][1].uuid for c in
                     self.manager.driver.destroy.call_args_list]
        self.assertEqual([uuids.a], destroyed)
        # A guest that stopped being an orphan is forgotten.
        self.guests(uuids.b)
        with mock.patch('time.monotonic', return_value=111.0):
            self._run()
        self.assertEqual({uuids.b: 110.0},
                         self.manager._orphan_instances_first_seen)


class OrphanInstancesOptionsTestCase(test.NoDBTestCase):
    """Tests for the [orphan_instances] options the task reads."""

    def test_defaults_only_log(self):
        conf = manager.CONF.orphan_instances
        self.assertEqual(
            ('log', 600, 1800, 5, []),
            (conf.action, conf.poll_interval, conf.grace_period,
             conf.max_actions_per_run, conf.ignore_uuids))

    @mock.patch.object(manager, 'LOG')
    @mock.patch.object(objects.InstanceMappingList, 'get_by_instance_uuids',
                       return_value=[])
    @mock.patch.object(objects.MigrationList, 'get_by_filters',
                       return_value=[])
    @mock.patch.object(objects.InstanceList, 'get_by_filters',
                       return_value=[])
    @mock.patch.object(objects.InstanceList, 'get_uuids_by_host',
                       return_value=[])
    def test_default_run_changes_nothing(self, _own, _records, _migrations,
                                         _mappings, log):
        """With the defaults, an unknown guest is only logged."""
        compute = mock.Mock(spec=['host', 'driver', 'reportclient'],
                            host='host1')
        compute.driver.list_instance_uuids.return_value = [uuids.a]
        manager.ComputeManager._cleanup_orphan_instances(
            compute, context.get_admin_context())
        compute.driver.destroy.assert_not_called()
        compute.driver.power_off.assert_not_called()
        self.assertIn(uuids.a, log.warning.call_args[0])

    def test_malformed_values_are_refused(self):
        for name, value in (('action', 'delete'), ('poll_interval', -1),
                            ('grace_period', -1),
                            ('max_actions_per_run', 0),
                            ('ignore_uuids', ['not-a-uuid'])):
            self.assertRaises(ValueError, self.flags,
                              group='orphan_instances', **{name: value})

    def test_the_task_is_registered_with_the_poll_interval(self):
        task = manager.ComputeManager._cleanup_orphan_instances
        self.assertTrue(task._periodic_task)
        self.assertFalse(task._periodic_immediate)
