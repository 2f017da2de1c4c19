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

import ddt
from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import manager
from nova.compute import power_state
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import context
from nova import exception
from nova import objects
from nova import test
from nova.tests import fixtures
from nova.tests.unit import fake_instance


@ddt.ddt
class ConfirmResizeCompletedElsewhereTestCase(test.NoDBTestCase):
    """Tests for ComputeManager._confirm_resize skipping, under the lock of
    confirm_resize, a confirm another has completed on the source
    (bug 1848343).
    """

    def setUp(self):
        super(ConfirmResizeCompletedElsewhereTestCase, self).setUp()
        self.useFixture(fixtures.EventReporterStub())
        self.compute = manager.ComputeManager()
        self.context = context.RequestContext('fake-user', 'fake-project')
        self.instance = fake_instance.fake_instance_obj(
            self.context, vm_state=vm_states.RESIZED, task_state=None,
            power_state=power_state.RUNNING,
            expected_attrs=['metadata', 'system_metadata', 'info_cache'])
        self.instance.migration_context = objects.MigrationContext(
            new_pci_devices=None, old_pci_devices=None)
        # The migration as the API read it before the lock was taken.
        self.migration = objects.Migration(
            context=self.context.elevated(), id=42, uuid=uuids.migration,
            instance_uuid=self.instance.uuid, status='confirming',
            source_compute=self.instance.host,
            source_node=self.instance.node, dest_compute='dest',
            dest_node='dest')
        self.migration.save = mock.Mock()
        self.mock_get_migration = self._patch(
            objects.Migration, 'get_by_id',
            return_value=objects.Migration(id=42, status='confirming'))
        self._patch(objects.Instance, 'get_by_uuid',
                    return_value=self.instance)
        self.mock_save = self._patch(self.instance, 'save')
        self.mock_notify = self._patch(self.compute,
                                       '_notify_about_instance_usage')
        self.mock_notify_action = self._patch(
            compute_utils, 'notify_about_instance_action')
        self.mock_network = self._patch(self.compute, 'network_api')
        self.mock_driver_confirm = self._patch(self.compute.driver,
                                               'confirm_migration')
        self.mock_rt = self._patch(self.compute, 'rt')
        # nova 34 unmounts the shares on the source; older releases have
        # no share manager.
        self._patch(self.compute, 'share_manager', create=True)
        # What confirm_resize does after _confirm_resize, whatever it did.
        self.mock_delete_alloc = self._patch(self.compute,
                                             '_delete_allocation_after_move')
        self.mock_delete_info = self._patch(self.compute,
                                            '_delete_scheduler_instance_info')
        self.mock_delete_flavor = self._patch(self.compute,
                                              '_delete_stashed_flavor_info')

    def _patch(self, target, name, **kwargs):
        patcher = mock.patch.object(target, name, **kwargs)
        self.addCleanup(patcher.stop)
        return patcher.start()

    def _confirm(self):
        return self.compute.confirm_resize(self.context, self.instance,
                                           self.migration)

    def _assert_cleaned_up(self):
        """What confirm_resize does after _confirm_resize in any case."""
        self.mock_delete_alloc.assert_called_once_with(
            self.context, self.instance, self.migration)
        self.mock_delete_info.assert_called_once_with(
            self.context, self.instance.uuid)
        self.mock_delete_flavor.assert_called_once_with(self.instance)

    def _assert_skipped(self):
        self.mock_notify.assert_not_called()
        self.mock_notify_action.assert_not_called()
        self.mock_network.setup_networks_on_host.assert_not_called()
        self.mock_driver_confirm.assert_not_called()
        self.mock_rt.drop_move_claim_at_source.assert_not_called()
        self.mock_save.assert_not_called()
        self.assertEqual(vm_states.RESIZED, self.instance.vm_state)
        self.assertEqual('confirming', self.migration.status)
        self.migration.save.assert_not_called()
        self._assert_cleaned_up()

    def test_confirmed_meanwhile(self):
        """The API read 'confirming' while the user's confirm ran: this
        confirm, which waited for the lock, finds it 'confirmed'.
        """
        self.mock_get_migration.return_value = objects.Migration(
            id=42, status='confirmed')
        self.assertIsNone(self._confirm())
        self._assert_skipped()

    def test_migration_gone(self):
        self.mock_get_migration.side_effect = exception.MigrationNotFound(
            migration_id=42)
        self.assertIsNone(self._confirm())
        self._assert_skipped()

    def test_reads_migration_again(self):
        """The migration is read by its id, as an admin (the user's
        confirm is not the migration's owner's).
        """
        self._confirm()
        self.mock_get_migration.assert_called_once_with(mock.ANY, 42)
        ctxt = self.mock_get_migration.call_args[0][0]
        self.assertTrue(ctxt.is_admin)
        self.assertEqual(self.context.request_id, ctxt.request_id)

    @ddt.data('confirming', 'finished')
    def test_confirms(self, status):
        """The migration is still to confirm: the source is cleaned up."""
        self.migration.status = status
        self.mock_get_migration.return_value = objects.Migration(
            id=42, status=status)
        self._confirm()
        self.mock_network.setup_networks_on_host.assert_called_once_with(
            self.context, self.instance, self.instance.host, teardown=True)
        self.mock_driver_confirm.assert_called_once_with(
            self.context, self.migration, self.instance, mock.ANY)
        self.mock_rt.drop_move_claim_at_source.assert_called_once_with(
            self.context, self.instance, self.migration)
        self.assertEqual(vm_states.ACTIVE, self.instance.vm_state)
        self.mock_save.assert_called_once_with(
            expected_task_state=[None, task_states.DELETING,
                                 task_states.SOFT_DELETING])
        self.assertEqual(
            [mock.call(self.context, self.instance, 'resize.confirm.start'),
             mock.call(self.context, self.instance, 'resize.confirm.end',
                       network_info=mock.ANY)],
            self.mock_notify.call_args_list)
        self._assert_cleaned_up()

    def test_passed_migration_already_confirmed(self):
        """confirm_resize's own check, on the status it was given."""
        self.migration.status = 'confirmed'
        self._confirm()
        self.mock_get_migration.assert_not_called()
        self.mock_driver_confirm.assert_not_called()
        self.mock_delete_alloc.assert_not_called()

    @mock.patch.object(compute_utils, 'add_instance_fault_from_exc')
    def test_confirm_fails(self, mock_fault):
        """A confirm that fails on the source errors out the instance."""
        self.mock_driver_confirm.side_effect = test.TestingException()
        self.assertRaises(test.TestingException, self._confirm)
        self.assertEqual(vm_states.ERROR, self.instance.vm_state)
        self.assertEqual('error', self.migration.status)
        mock_fault.assert_called_once()
        self._assert_cleaned_up()
