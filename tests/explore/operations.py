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

"""The server operations the explorer knows.

An operation says which computes it needs (``hosts``), what exists before
it starts (``prepare``: not explored) and what it does (``run``: every step
of it is explored). ``run`` drives nova through the API and waits with
``case.settle()`` (nothing left in flight) between its requests, never by
polling; ``case.act`` and ``case.show`` stop the operation once the
explorer has deleted its server. Add one by subclassing Operation and
listing it in OPERATIONS.
"""

from nova import exception

FLAVOR = dict(vcpu=1, memory_mb=64, disk=1, ephemeral=0)
BIGGER = dict(vcpu=2, memory_mb=128, disk=1, ephemeral=0)


class Operation(object):
    #: The name the command line and the matrix use.
    name = None
    hosts = ('host1', 'host2')
    flavor = FLAVOR
    #: Whether ``run`` creates the servers itself (boot operations).
    boots = False
    #: The cell of each host, if not cell1 (a second cell is set up).
    cells = {}

    def prepare(self, case):
        """Create what exists before the operation (not explored)."""
        case.boot(host='host1')
        case.settle()
        case.expect(case.servers[0], 'ACTIVE', 'host1')

    def run(self, case):
        raise NotImplementedError()

    def restore(self, case):
        """Undo what ``prepare`` broke, before the invariants are checked
        (a compute it took down comes back).
        """


class Boot(Operation):
    name = 'boot'
    hosts = ('host1',)
    boots = True
    count = 1

    def prepare(self, case):
        pass

    def run(self, case):
        case.boot(count=self.count)
        case.settle()
        for server in case.servers:
            case.expect(server, 'ACTIVE', 'host1')


class BootMulti(Boot):
    name = 'boot-multi'
    count = 2


class ColdMigrate(Operation):
    name = 'cold-migrate-confirm'
    finish = 'confirmResize'

    def move(self, case, server):
        case.act(server, {'migrate': None})

    def run(self, case):
        server = case.servers[0]
        self.move(case, server)
        case.settle()
        case.expect(server, 'VERIFY_RESIZE', self.target)
        case.act(server, {self.finish: None})
        case.settle()
        case.expect(server, 'ACTIVE', self.final)

    target = final = 'host2'


class ColdMigrateRevert(ColdMigrate):
    name = 'cold-migrate-revert'
    finish = 'revertResize'
    final = 'host1'


class Resize(ColdMigrate):
    name = 'resize-confirm'

    def prepare(self, case):
        self.flavor_id = case._create_flavor(**BIGGER)
        super(Resize, self).prepare(case)

    def move(self, case, server):
        case.act(server, {'resize': {'flavorRef': self.flavor_id}})


class ResizeRevert(Resize):
    name = 'resize-revert'
    finish = 'revertResize'
    final = 'host1'


class ResizeSameHost(Resize):
    name = 'resize-same-host'
    hosts = ('host1',)
    target = final = 'host1'

    def prepare(self, case):
        case.flags(allow_resize_to_same_host=True)
        super(ResizeSameHost, self).prepare(case)


class CrossCellResize(Resize):
    """A resize to a host of another cell (host1 in cell1, host2 in
    cell2), which the policy allows the admin to do.
    """
    name = 'cross-cell-resize-confirm'
    cells = {'host2': 'cell2'}

    def prepare(self, case):
        from nova.policies import base as base_policies
        from nova.policies import servers as servers_policies
        case.policy.set_rules({servers_policies.CROSS_CELL_RESIZE:
                               base_policies.RULE_ADMIN_API},
                              overwrite=False)
        super(CrossCellResize, self).prepare(case)


class CrossCellResizeRevert(CrossCellResize):
    name = 'cross-cell-resize-revert'
    finish = 'revertResize'
    final = 'host1'


class LiveMigrate(Operation):
    name = 'live-migrate'
    #: migration statuses and server host at the end.
    outcome = (('completed',), 'host2')

    def prepare(self, case):
        # The fake driver leaves the guest on the source; a real one (and
        # nova's FakeLiveMigrateDriver) has it gone once migrated.
        def post_live_migration(driver, context, instance,
                                block_device_info, migrate_data=None):
            driver.destroy(context, instance, network_info=None,
                           block_device_info=block_device_info)

        case.stub_out('nova.virt.fake.FakeDriver.post_live_migration',
                      post_live_migration)
        super(LiveMigrate, self).prepare(case)

    def run(self, case):
        server = case.servers[0]
        case.act(server, {'os-migrateLive': {
            'host': 'host2', 'block_migration': 'auto'}})
        case.settle()
        case.expect(server, 'ACTIVE', self.outcome[1])
        status = case.migration_status(server)
        if status not in self.outcome[0]:
            raise AssertionError('migration %s, expected %s'
                                 % (status, self.outcome[0]))


def _fail(*args, **kwargs):
    raise exception.MigrationError(reason='injected by the explorer')


class LiveMigratePreFails(LiveMigrate):
    name = 'live-migrate-pre-fails'
    outcome = (('error', 'failed'), 'host1')

    def prepare(self, case):
        case.stub_out('nova.virt.fake.FakeDriver.pre_live_migration', _fail)
        super(LiveMigratePreFails, self).prepare(case)


class LiveMigrateDriverFails(LiveMigrate):
    """The driver reports the failure the way libvirt does: it calls the
    recover method it was given.
    """
    name = 'live-migrate-driver-fails'
    outcome = (('error', 'failed'), 'host1')

    def prepare(self, case):
        def live_migration(driver, context, instance, dest, post_method,
                           recover_method, block_migration=False,
                           migrate_data=None):
            recover_method(context, instance, dest, migrate_data)

        case.stub_out('nova.virt.fake.FakeDriver.live_migration',
                      live_migration)
        super(LiveMigrateDriverFails, self).prepare(case)


class LiveMigrateAbort(LiveMigrate):
    """The user aborts the live migration while the driver migrates; the
    driver then calls the recover method, as libvirt does for a cancelled
    job.
    """
    name = 'live-migrate-abort'
    outcome = (('cancelled',), 'host1')

    def prepare(self, case):
        migrating = case.gate('the driver migrates')
        aborted = case.gate('the migration is aborted')

        def live_migration(driver, context, instance, dest, post_method,
                           recover_method, block_migration=False,
                           migrate_data=None):
            migrating.set()
            case.wait_gate(aborted)
            recover_method(context, instance, dest, migrate_data,
                           migration_status='cancelled')

        def live_migration_abort(driver, instance):
            aborted.set()

        case.stub_out('nova.virt.fake.FakeDriver.live_migration',
                      live_migration)
        case.stub_out('nova.virt.fake.FakeDriver.live_migration_abort',
                      live_migration_abort)
        super(LiveMigrateAbort, self).prepare(case)

    def run(self, case):
        server = case.servers[0]
        case.act(server, {'os-migrateLive': {
            'host': 'host2', 'block_migration': 'auto'}})
        case.wait_gate(case.gates['the driver migrates'])
        migration = case.migration(server)
        case.api_call('delete', '/servers/%s/migrations/%s' % (
            server['id'], migration['id']))
        case.settle()
        case.expect(server, 'ACTIVE', self.outcome[1])
        status = case.migration_status(server)
        if status not in self.outcome[0]:
            raise AssertionError('migration %s, expected %s'
                                 % (status, self.outcome[0]))


class Evacuate(Operation):
    name = 'evacuate'

    def prepare(self, case):
        super(Evacuate, self).prepare(case)
        case.computes['host1'].stop()
        case.compute_down('host1')

    def run(self, case):
        server = case.servers[0]
        case.act(server, {'evacuate': {}})
        case.settle()
        case.expect(server, ('ACTIVE', 'SHUTOFF'), 'host2')

    def restore(self, case):
        case.bring_up('host1')


class ShelveUnshelve(Operation):
    name = 'shelve-unshelve'

    def run(self, case):
        server = case.servers[0]
        case.act(server, {'shelve': {}})
        case.settle()
        case.expect(server, 'SHELVED_OFFLOADED')
        case.act(server, {'unshelve': None})
        case.settle()
        case.expect(server, 'ACTIVE')


OPERATIONS = [cls() for cls in (
    Boot, BootMulti, ColdMigrate, ColdMigrateRevert, Resize, ResizeRevert,
    ResizeSameHost, CrossCellResize, CrossCellResizeRevert, LiveMigrate,
    LiveMigratePreFails, LiveMigrateDriverFails, LiveMigrateAbort, Evacuate,
    ShelveUnshelve)]
