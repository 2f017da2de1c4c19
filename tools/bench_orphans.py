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

"""Benchmark: one orphan instances scan with 1,000 and 10,000 guests.

Prints, for nova-fixes' _cleanup_orphan_instances and, side by side on the
same host, nova's own _cleanup_running_deleted_instances: the database
statements one scan executes (the goal is a constant, not one per guest)
and its CPU time. It runs on nova's functional fixtures (a cell database in
SQLite, the fake virt driver holding the guests), so the figures count
statements, not network round trips to a real database.

Usage: python tools/bench_orphans.py [N ...]   (default: 1000 10000)
"""

import os
import sys
import time
import unittest

import fixtures

from nova.compute import power_state
from nova import context as nova_context
from nova.virt import fake
from oslo_utils import uuidutils
import sqlalchemy
from sqlalchemy import event

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from tests.functional import test_orphan_instances  # noqa: E402

SIZES = [int(n) for n in sys.argv[1:]] or [1000, 10000]
ROWS = []


class _Statements(object):
    def __init__(self):
        self.count = 0

    def __call__(self, *args, **kwargs):
        self.count += 1


class OrphanScanBenchmark(test_orphan_instances._OrphanTestBase):

    def _scan(self, method):
        statements = _Statements()
        event.listen(sqlalchemy.engine.Engine, 'before_cursor_execute',
                     statements)
        try:
            manager = self.computes['host1'].manager
            ctxt = nova_context.get_admin_context()
            with nova_context.target_cell(
                    ctxt, self.host_mappings['host1'].cell_mapping) as cctxt:
                start = time.process_time()
                method(manager, cctxt)
                cpu = time.process_time() - start
        finally:
            event.remove(sqlalchemy.engine.Engine, 'before_cursor_execute',
                         statements)
        return statements.count, cpu

    def test_scan(self):
        from nova_fixes.nova.compute import manager as fixes_manager
        self.flags(action='log', group='orphan_instances')
        self.flags(running_deleted_instance_action='log')
        driver = self.computes['host1'].manager.driver
        # Keep the log quiet: one warning per orphan is what the task does,
        # but formatting 10,000 lines is not what is measured here.
        self.useFixture(fixtures.MockPatchObject(
            fixes_manager.LOG, 'warning'))
        for size in SIZES:
            driver.instances.clear()
            for _ in range(size):
                uuid = uuidutils.generate_uuid()
                driver.instances[uuid] = fake.FakeInstance(
                    'guest', power_state.RUNNING, uuid)
            orphan = self._scan(fixes_manager._cleanup_orphan_instances)
            nova = self._scan(lambda m, c:
                              m._cleanup_running_deleted_instances(c))
            ROWS.append((size, orphan, nova))


def main():
    suite = unittest.TestSuite([OrphanScanBenchmark('test_scan')])
    result = unittest.TextTestRunner(stream=open(os.devnull, 'w')).run(
        suite)
    if not result.wasSuccessful():
        for _, tb in result.errors + result.failures:
            print(tb)
        return 1
    print('%8s  %-34s  %-34s' % ('guests', '_cleanup_orphan_instances',
                                 '_cleanup_running_deleted_instances'))
    print('%8s  %-34s  %-34s' % ('', 'DB statements   CPU s',
                                 'DB statements   CPU s'))
    for size, (o_stmts, o_cpu), (n_stmts, n_cpu) in ROWS:
        print('%8d  %13d %7.3f %12s  %13d %7.3f'
              % (size, o_stmts, o_cpu, '', n_stmts, n_cpu))
    return 0


if __name__ == '__main__':
    sys.exit(main())
