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

"""The virt driver of the deployment test: nova's fake driver with gates.

Chosen with ``compute_driver = deploy_gated.GatedFakeDriver`` (see
driver_alias). The test drives it across processes through
files in the directory named by NOVA_FIXES_DEPLOY_GATES:

``<host>.<step>.arm``
    the next call of <step> on <host> stops: it takes the arm file (a
    rename: a call of the same step meanwhile, in another greenthread,
    runs through), creates ``<host>.<step>.reached`` and waits until
    ``<host>.<step>.release`` exists (at most GATE_TIMEOUT seconds), then
    consumes the files. If the release file says ``fail``, the step raises
    InstanceNotFound instead of running (the guest vanished meanwhile).
``<host>.guests``
    UUIDs, one a line, of guests running on <host> that nova did not
    create (added out of band); destroy() removes a guest from it.
``<host>.running``
    written by the driver: the UUIDs, one a line, of the guests it holds
    (those nova created, running or stopped), after every change.

With NOVA_FIXES_DEPLOY_KEEP_STOPPED=1 a guest destroyed with its disks
kept (the source of a cross-cell resize) stays listed, stopped, until
its disks go (cleanup, a destroy with disks) or it comes back (a
revert): the orphan task sees it, as it would see a hypervisor that
keeps such guests defined.
"""

import os
import time

from nova.compute import power_state
from nova import exception
from nova.virt import fake
from nova.virt import hardware

GATE_TIMEOUT = 180


class GatedFakeDriver(fake.FakeDriver):

    def __init__(self, *args, **kwargs):
        super(GatedFakeDriver, self).__init__(*args, **kwargs)
        self._keep = os.environ.get('NOVA_FIXES_DEPLOY_KEEP_STOPPED') == '1'
        # Guests destroyed with their disks kept: uuid -> name.
        self._kept = {}

    def init_host(self, host):
        result = super(GatedFakeDriver, self).init_host(host)
        self._publish()
        return result

    def _publish(self):
        if not getattr(self, '_host', None):
            return
        path = self._path('running')
        with open(path + '.tmp', 'w') as f:
            f.write(''.join(u + '\n' for u in sorted(
                set(self.instances) | set(self._kept))))
        os.rename(path + '.tmp', path)

    def _path(self, name):
        return os.path.join(os.environ['NOVA_FIXES_DEPLOY_GATES'],
                            '%s.%s' % (self._host, name))

    def _gate(self, step, instance):
        arm = self._path(step + '.arm')
        taken = arm + '.taken'
        try:
            os.rename(arm, taken)
        except FileNotFoundError:
            return
        reached = self._path(step + '.reached')
        release = self._path(step + '.release')
        with open(reached, 'w') as f:
            f.write(instance.uuid)
        deadline = time.monotonic() + GATE_TIMEOUT
        while not os.path.exists(release):
            if time.monotonic() > deadline:
                raise exception.NovaException(
                    'gate %s: not released in %ss' % (step, GATE_TIMEOUT))
            time.sleep(0.1)
        with open(release) as f:
            verdict = f.read().strip()
        for path in (taken, reached, release):
            os.unlink(path)
        if verdict == 'fail':
            raise exception.InstanceNotFound(instance_id=instance.uuid)

    def _out_of_band(self):
        try:
            with open(self._path('guests')) as f:
                return [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def list_instance_uuids(self):
        uuids = super(GatedFakeDriver, self).list_instance_uuids()
        uuids += [u for u in sorted(self._kept) if u not in uuids]
        return uuids + [u for u in self._out_of_band() if u not in uuids]

    def list_instances(self):
        return (super(GatedFakeDriver, self).list_instances() +
                [n for u, n in sorted(self._kept.items())
                 if u not in self.instances] +
                self._out_of_band())

    def instance_exists(self, instance):
        return (instance.uuid in self._out_of_band() or
                instance.uuid in self._kept or
                super(GatedFakeDriver, self).instance_exists(instance))

    def get_info(self, instance, use_cache=True):
        if instance.uuid not in self.instances:
            if instance.uuid in self._kept:
                return hardware.InstanceInfo(state=power_state.SHUTDOWN)
            if instance.uuid in self._out_of_band():
                return hardware.InstanceInfo(state=power_state.RUNNING)
        return super(GatedFakeDriver, self).get_info(instance, use_cache)

    def spawn(self, context, instance, *args, **kwargs):
        self._gate('spawn', instance)
        self._kept.pop(instance.uuid, None)
        try:
            return super(GatedFakeDriver, self).spawn(
                context, instance, *args, **kwargs)
        finally:
            self._publish()

    def destroy(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, destroy_secrets=True):
        self._gate('destroy', instance)
        guests = self._out_of_band()
        held = instance.uuid in self.instances or instance.uuid in self._kept
        if instance.uuid in guests and not held:
            guests.remove(instance.uuid)
            with open(self._path('guests'), 'w') as f:
                f.write(''.join(g + '\n' for g in guests))
            return
        if self._keep and not destroy_disks and (
                instance.uuid in self.instances):
            self._kept[instance.uuid] = instance.name
        elif destroy_disks:
            self._kept.pop(instance.uuid, None)
        try:
            return super(GatedFakeDriver, self).destroy(
                context, instance, network_info, block_device_info,
                destroy_disks, destroy_secrets)
        finally:
            self._publish()

    def cleanup(self, context, instance, network_info,
                block_device_info=None, destroy_disks=True, *args, **kwargs):
        if destroy_disks:
            self._kept.pop(instance.uuid, None)
            self._publish()
        return super(GatedFakeDriver, self).cleanup(
            context, instance, network_info, block_device_info,
            destroy_disks, *args, **kwargs)

    def finish_revert_migration(self, context, instance, *args, **kwargs):
        self._kept.pop(instance.uuid, None)
        try:
            return super(GatedFakeDriver, self).finish_revert_migration(
                context, instance, *args, **kwargs)
        finally:
            self._publish()

    def migrate_disk_and_power_off(self, context, instance, dest, flavor,
                                   network_info, block_device_info=None,
                                   timeout=0, retry_interval=0):
        self._gate('migrate_disk_and_power_off', instance)
        return super(GatedFakeDriver, self).migrate_disk_and_power_off(
            context, instance, dest, flavor, network_info, block_device_info,
            timeout, retry_interval)
