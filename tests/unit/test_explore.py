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

"""The race explorer's command line: operation filters, step names,
the matrix' counts, and runs in a child process (no nova services run
here).
"""

import argparse
import io
import json
import os
import signal
import sys

import fixtures
import testtools

from tests.explore import __main__ as explore
from tests.explore import forked
from tests.explore import tracker
from tests.explore import variants

OP = 'cold-migrate-revert'
STEPS = ['rpc compute.revert_resize',
         'rpc compute-alt.finish_revert_resize',
         'ComputeManager._finish_revert_resize',
         'rpc compute.prep_resize', 'ComputeManager._revert_allocation']


class OperationFilterTest(testtools.TestCase):

    def test_patterns(self):
        self.assertEqual(['live-migrate', 'live-migrate-pre-fails',
                          'live-migrate-driver-fails', 'live-migrate-abort'],
                         explore._operations(['live-migrate*']))
        self.assertEqual(['boot'], explore._operations(['boot', 'bo?t']))

    def test_unknown_operation_is_one_line(self):
        error = self.assertRaises(SystemExit, explore._operations,
                                  ['cold-migrate-revrt'])
        self.assertIn("no operation matches 'cold-migrate-revrt'",
                      str(error))

    def test_bad_variant_exits(self):
        stderr = self.useFixture(fixtures.MonkeyPatch('sys.stderr',
                                                      io.StringIO())).new_value
        self.assertRaises(SystemExit, explore.main,
                          ['--variants', 'delete,crash', 'boot'])
        self.assertIn('--variants: one or more of delete, down, outage',
                      stderr.getvalue())


class StepTest(testtools.TestCase):

    def test_labels(self):
        self.assertEqual('rpc compute.prep_resize', tracker.Step(
            'rpc', 'compute', 'prep_resize', 1).label)
        self.assertEqual('ComputeManager._prep_resize#2', tracker.Step(
            'entry', 'ComputeManager', '_prep_resize', 2).label)

    def test_not_steps(self):
        self.assertFalse(tracker.is_step('_get_power_state'))
        self.assertFalse(tracker.is_step('_unshelve_instance_key_scrub'))
        self.assertTrue(tracker.is_step('_revert_allocation'))
        self.assertTrue(tracker.is_step('_get_power_state',
                                        all_entries=True))


class ReportTest(testtools.TestCase):

    def _report(self, cells, ops=(OP,), steps=None, workers=None):
        out = io.StringIO()
        if steps is None:
            steps = {('vanilla', OP): STEPS, ('fixed', OP): STEPS}
        counts = explore.report(list(ops), steps, cells, ['delete'],
                                ['vanilla', 'fixed'], out=out,
                                workers=workers)
        return counts, out.getvalue().splitlines()

    def _cells(self, vanilla, fixed):
        cells = {}
        for step in ['after'] + STEPS:
            cells[('vanilla', OP, step, 'delete')] = (
                vanilla.get(step, 'LEAK'), ['x'])
            cells[('fixed', OP, step, 'delete')] = (
                fixed.get(step, 'OK'), [])
        return cells

    def test_all_well(self):
        (passed, failed), lines = self._report(
            self._cells({'after': 'OK'}, {}))
        # 6 fixed-side OK, 5 known vanilla leaks found.
        self.assertEqual((11, 0), (passed, failed))
        self.assertEqual(
            ['explored (vanilla): 6 steps, 5 leaks, 0 wrong, 0 errors, '
             '0 stuck',
             'explored (fixed): 6 steps, 0 leaks, 0 wrong, 0 errors, 0 stuck'],
            lines[-2:])

    def test_stuck_fails_and_is_counted_per_variant(self):
        cells = self._cells({'after': 'OK'}, {})
        for step in STEPS:
            cells[('vanilla', OP, step, 'outage')] = ('LEAK', ['x'])
            cells[('fixed', OP, step, 'outage')] = ('OK', [])
        cells[('fixed', OP, STEPS[0], 'outage')] = ('STUCK', ['server'])
        out = io.StringIO()
        passed, failed = explore.report(
            [OP], {('vanilla', OP): STEPS, ('fixed', OP): STEPS}, cells,
            ['delete', 'outage'], ['vanilla', 'fixed'], out=out)
        lines = out.getvalue().splitlines()
        # 6 + 5 fixed-side OK but one STUCK; 5 known vanilla leaks found.
        self.assertEqual((15, 1), (passed, failed))
        self.assertIn('explored (fixed, outage): 5 steps, 0 leaks, 0 wrong, '
                      '0 errors, 1 stuck', lines)
        self.assertIn('explored (vanilla, outage): 5 steps, 5 leaks, 0 '
                      'wrong, 0 errors, 0 stuck', lines)
        self.assertEqual('explored (fixed): 11 steps, 0 leaks, 0 wrong, '
                         '0 errors, 1 stuck', lines[-1])

    def test_fixed_leak_and_missed_vanilla_leak_fail(self):
        (passed, failed), lines = self._report(self._cells(
            {'after': 'OK', 'rpc compute.revert_resize': 'OK'},
            {'rpc compute.prep_resize': 'LEAK', 'after': 'ERROR'}))
        self.assertEqual((8, 3), (passed, failed))
        self.assertIn('vanilla did not show the known leak: '
                      'cold-migrate-revert | rpc compute.revert_resize | '
                      'delete (1848343 revert_resize)', lines)
        self.assertEqual(
            'explored (fixed): 6 steps, 1 leaks, 0 wrong, 1 errors, 0 stuck',
            lines[-1])

    def _workers(self, **codes):
        return {(side, OP): explore.Worker(code, explore._exit_why(code))
                for side, code in codes.items()}

    def test_short_fixed_worker_fails(self):
        # The fixed worker died after its second step: the three steps
        # after it have no record.
        cells = self._cells({'after': 'OK'}, {})
        for step in STEPS[2:]:
            del cells[('fixed', OP, step, 'delete')]
        (passed, failed), lines = self._report(
            cells, workers=self._workers(vanilla=0, fixed=1))
        # fixed: 3 OK, 3 ERROR; 5 known leaks; workers: vanilla passes,
        # fixed fails.
        self.assertEqual((9, 4), (passed, failed))
        self.assertIn('  fixed cold-migrate-revert | '
                      'ComputeManager._finish_revert_resize | delete: '
                      'ERROR: no record (worker exit 1)', lines)
        self.assertIn('worker fixed cold-migrate-revert failed: worker '
                      'exit 1; 3 runs without a record', lines)
        self.assertIn('  %-36s LEAK    ERROR  '
                      % 'ComputeManager._revert_allocation', lines)
        self.assertEqual(
            ['9 passed, 4 failed',
             'explored (vanilla): 6 steps, 5 leaks, 0 wrong, 0 errors, '
             '0 stuck',
             'explored (fixed): 6 steps, 0 leaks, 0 wrong, 3 errors, 0 stuck'],
            lines[-3:])

    def test_missing_fixed_worker_has_the_steps_of_vanilla(self):
        # The fixed worker was killed before it recorded anything.
        cells = {key: value for key, value in self._cells(
            {'after': 'OK'}, {}).items() if key[0] == 'vanilla'}
        (passed, failed), lines = self._report(
            cells, steps={('vanilla', OP): STEPS},
            workers=self._workers(vanilla=0, fixed=-signal.SIGKILL))
        self.assertEqual((6, 7), (passed, failed))
        self.assertIn('  fixed cold-migrate-revert | after | delete: '
                      'ERROR: no record (no steps recorded; worker killed '
                      'by signal 9)', lines)
        self.assertEqual(
            'explored (fixed): 6 steps, 0 leaks, 0 wrong, 6 errors, 0 stuck',
            lines[-1])

    def test_short_vanilla_worker_exit_0_fails(self):
        # Vanilla's record lacks a step that is not a known leak: an
        # ERROR there, and its worker fails although it exited 0.
        cells = self._cells({'after': 'OK'}, {})
        steps = {('vanilla', OP): STEPS + ['ComputeManager.x'],
                 ('fixed', OP): STEPS}
        (passed, failed), lines = self._report(
            cells, steps=steps, workers=self._workers(vanilla=0, fixed=0))
        self.assertEqual((12, 1), (passed, failed))
        self.assertIn('worker vanilla cold-migrate-revert failed: worker '
                      'exit 0; 1 runs without a record', lines)
        # A step only vanilla recorded is not one of the fixed side's.
        self.assertIn('  %-36s ERROR   -      ' % 'ComputeManager.x',
                      lines)
        self.assertEqual(
            'explored (vanilla): 7 steps, 5 leaks, 0 wrong, 1 errors, 0 stuck',
            lines[-2])

    def test_expected_cells(self):
        steps = {('vanilla', OP): ['a', 'b'], ('fixed', OP): ['a', 'c']}
        self.assertEqual(
            [('vanilla', OP, 'after', 'delete'),
             ('vanilla', OP, 'a', 'delete'), ('vanilla', OP, 'a', 'down'),
             ('vanilla', OP, 'b', 'delete'), ('vanilla', OP, 'b', 'down'),
             ('fixed', OP, 'after', 'delete'),
             ('fixed', OP, 'a', 'delete'), ('fixed', OP, 'a', 'down'),
             ('fixed', OP, 'c', 'delete'), ('fixed', OP, 'c', 'down'),
             ('vanilla', 'boot', 'after', 'delete'),
             ('fixed', 'boot', 'after', 'delete')],
            explore.expected_cells([OP, 'boot'], steps, ['delete', 'down'],
                                   ['vanilla', 'fixed']))

    def test_survive_mode_lines_and_vanilla_findings(self):
        cells = {}
        for side in ('vanilla', 'fixed'):
            cells[(side, OP, 'after', 'delete')] = ('OK', [])
            for step in STEPS:
                cells[(side, OP, step, 'survive-restart')] = ('OK', [])
        cells[('vanilla', OP, STEPS[1], 'survive-restart')] = (
            'WRONG', ['survive: instance x holds nothing'])
        cells[('fixed', OP, STEPS[2], 'survive-restart')] = (
            'STUCK', ['survive: server x in task state resize_prep'])
        out = io.StringIO()
        passed, failed = explore.report(
            [OP], {('vanilla', OP): STEPS, ('fixed', OP): STEPS}, cells,
            ['survive-restart'], ['vanilla', 'fixed'], out=out)
        lines = out.getvalue().splitlines()
        self.assertIn('explored (fixed, restart, survive): 5 steps, 0 '
                      'leaks, 0 wrong, 0 errors, 1 stuck', lines)
        self.assertIn('explored (vanilla, restart, survive): 5 steps, 0 '
                      'leaks, 1 wrong, 0 errors, 0 stuck', lines)
        # What vanilla's survivors hold is listed, as the fixed side's
        # failures are; only the fixed side's count.
        self.assertIn('  vanilla %s | %s | survive-restart: WRONG: survive: '
                      'instance x holds nothing' % (OP, STEPS[1]), lines)
        self.assertIn('  fixed %s | %s | survive-restart: STUCK: survive: '
                      'server x in task state resize_prep' % (OP, STEPS[2]),
                      lines)
        self.assertEqual(1, failed)
        head = [line.split() for line in lines
                if line.startswith('  step ')]
        self.assertEqual([['step', 'v/Sre', 'f/Sre']], head)

    def test_timeout_only_at_rpc_steps(self):
        steps = {('fixed', OP): ['rpc compute.prep_resize',
                                 'ComputeManager._prep_resize']}
        self.assertEqual(
            [('fixed', OP, 'after', 'delete'),
             ('fixed', OP, 'rpc compute.prep_resize', 'delete'),
             ('fixed', OP, 'rpc compute.prep_resize', 'timeout'),
             ('fixed', OP, 'ComputeManager._prep_resize', 'delete')],
            explore.expected_cells([OP], steps, ['delete', 'timeout'],
                                   ['fixed']))
        self.assertEqual(
            [('fixed', OP, 'after', 'delete'),
             ('fixed', OP, 'rpc compute.prep_resize', 'survive-timeout'),
             ('fixed', OP, 'rpc compute.prep_resize', 'survive-restart'),
             ('fixed', OP, 'ComputeManager._prep_resize',
              'survive-restart')],
            explore.expected_cells([OP], steps, ['survive-timeout',
                                                 'survive-restart'],
                                   ['fixed']))


class VariantsTest(testtools.TestCase):

    def test_modes(self):
        self.assertEqual(['delete', 'down', 'survive-down'],
                         variants.of_modes(['delete', 'down'],
                                           ['delete', 'survive']))
        self.assertEqual(['survive-timeout'], variants.of_modes(
            ['delete', 'timeout'], ['survive']))
        self.assertEqual(('timeout', 'survive', 'Sti'), (
            variants.fault('survive-timeout'),
            variants.mode('survive-timeout'),
            variants.short('survive-timeout')))
        self.assertEqual(('timeout', 'delete', 'tim'), (
            variants.fault('timeout'), variants.mode('timeout'),
            variants.short('timeout')))

    def test_audit_mode(self):
        self.assertEqual(['down', 'audit-heal'],
                         variants.of_modes(['down'], ['delete', 'audit']))
        self.assertEqual(['audit-heal'],
                         variants.of_modes(['delete'], ['audit']))
        self.assertEqual(('heal', 'audit', 'Ahe', False), (
            variants.fault('audit-heal'), variants.mode('audit-heal'),
            variants.short('audit-heal'), variants.is_survive('audit-heal')))
        self.assertIn('audit-heal', variants.ALL)


class _Message(object):
    """What the fake transport gives an RPC server: a call has a reply
    queue, a cast has none.
    """

    def __init__(self, reply_q):
        self._reply_q = reply_q
        self.message = {'method': 'prep_resize'}

    def reply(self, reply=None, failure=None):
        if self._reply_q:
            self._reply_q.put((reply, failure))


class LoseReplyTest(testtools.TestCase):
    """The timeout variant's fault: the callee runs, the caller gets a
    MessagingTimeout and never the reply.
    """

    def setUp(self):
        super(LoseReplyTest, self).setUp()
        self.tracker = tracker.Tracker()
        self.ran = []

    def _process(self, server, incoming):
        self.ran.append(incoming[0])
        incoming[0].reply('done')

    def test_a_call_loses_its_reply(self):
        import queue

        import oslo_messaging
        reply_q = queue.Queue()
        message = _Message(reply_q)
        self.tracker._lose_reply(self._process, None, [message])
        self.assertEqual([message], self.ran)
        self.assertEqual('call', self.tracker.fault_applied)
        reply, failure = reply_q.get_nowait()
        self.assertIsNone(reply)
        self.assertIsInstance(failure, oslo_messaging.MessagingTimeout)
        self.assertTrue(reply_q.empty(), 'the reply was delivered too')

    def test_a_cast_runs_as_it_is(self):
        message = _Message(None)
        self.tracker._lose_reply(self._process, None, [message])
        self.assertEqual([message], self.ran)
        self.assertEqual('cast', self.tracker.fault_applied)

    def test_the_target_is_not_held(self):
        step = tracker.Step('rpc', 'compute', 'prep_resize', 1)
        self.tracker.arm(target=step, fault='timeout')
        self.tracker.step('rpc', 'compute', 'prep_resize')
        self.assertTrue(self.tracker.reached.is_set())
        self.assertEqual('timeout', self.tracker._local.fault)
        entry = tracker.Step('entry', 'ComputeManager', '_prep_resize', 1)
        self.tracker.arm(target=entry, fault='timeout')
        self.tracker.reached.clear()
        self.tracker.step('entry', 'ComputeManager', '_prep_resize')
        self.assertEqual('entry', self.tracker.fault_applied)


class CastsTest(testtools.TestCase):
    """The recording notes the RPC steps that were casts, and the
    timeout variant runs none of them.
    """

    def test_recorded_casts(self):
        t = tracker.Tracker()
        t.arm(record=True)
        processed = []

        def process(server, incoming):
            processed.append(incoming[0])

        server = argparse.Namespace(_target=argparse.Namespace(
            topic='compute', server='host1'))
        call, cast = _Message(object()), _Message(None)
        t._step_and_process(process, server, [call], 'check_can_live_'
                            'migrate_destination')
        t._step_and_process(process, server, [cast], 'prep_resize')
        t.disarm()
        self.assertEqual([call, cast], processed)
        self.assertEqual(
            [tracker.Step('rpc', 'compute', 'check_can_live_migrate_'
                          'destination', 1),
             tracker.Step('rpc', 'compute', 'prep_resize', 1)], t.steps)
        self.assertEqual([tracker.Step('rpc', 'compute', 'prep_resize', 1)],
                         t.casts)

    def test_not_recorded_unless_recording(self):
        t = tracker.Tracker()
        t.arm()
        t.step('rpc', 'compute', 'prep_resize', cast=True)
        self.assertEqual([], t.casts)

    def test_timeout_variant_skips_the_recorded_casts(self):
        from tests.explore import worker
        call = tracker.Step('rpc', 'compute', 'check_can_live_migrate_'
                            'destination', 1)
        cast = tracker.Step('rpc', 'compute', 'prep_resize', 1)
        recorded = _outcome('OK', steps=[call, cast], casts=[cast])
        plans = []

        def run(plan):
            plans.append(plan)
            return recorded if plan[0] == 'record' else _outcome('OK')

        written = []
        worker._explore_plans(argparse.Namespace(name=OP), run,
                              ['delete', 'timeout'], 0, written.append,
                              lambda line: None)
        self.assertEqual([('record',), ('inject', call, 'delete'),
                          ('inject', call, 'timeout'),
                          ('inject', cast, 'delete')], plans)
        skipped = [w for w in written if w.get('step') == cast.label and
                   w.get('variant') == 'timeout']
        self.assertEqual(1, len(skipped))
        self.assertEqual('N/A', skipped[0]['result'])
        self.assertIn('cast', skipped[0]['details'][0])


class KillTest(testtools.TestCase):
    """The restart variant: the held step's thread ends at the hold, the
    caller of an RPC call gets no reply.
    """

    def setUp(self):
        super(KillTest, self).setUp()
        self.tracker = tracker.Tracker()
        self.step = tracker.Step('entry', 'ComputeManager', '_prep_resize', 1)
        self.tracker.arm(target=self.step)
        self.tracker.kill = True
        self.tracker.release.set()

    def _held(self, after=None):
        """The step, as nova's thread reaches it; ``after`` stands for
        what nova does once the step returns.
        """
        self.tracker.step('entry', 'ComputeManager', '_prep_resize')
        if after:
            after()

    def test_nothing_after_the_step_runs(self):
        after = []
        self.assertRaises(tracker.Killed, self._held,
                          lambda: after.append('ran'))
        self.assertEqual([], after)
        # A BaseException: nova's "except Exception" does not take it.
        self.assertFalse(issubclass(tracker.Killed, Exception))

    def test_the_callers_timeout_fires(self):
        import queue

        import oslo_messaging
        reply_q = queue.Queue()
        message = _Message(reply_q)
        try:
            self._held()
        except BaseException:
            self.assertTrue(self.tracker._unwound(message))
        self.assertTrue(self.tracker.killed.is_set())
        reply, failure = reply_q.get_nowait()
        self.assertIsNone(reply)
        self.assertIsInstance(failure, oslo_messaging.MessagingTimeout)

    def test_unwound_whatever_a_finally_block_raised(self):
        def finally_raises():
            try:
                self._held()
            finally:
                # As nova's build does when its result is unbound.
                raise UnboundLocalError('result')

        try:
            finally_raises()
        except BaseException as e:
            self.assertIsInstance(e, UnboundLocalError)
            self.assertTrue(self.tracker._unwound())
        self.assertTrue(self.tracker.killed.is_set())

    def test_another_threads_exception_is_not_taken(self):
        try:
            raise ValueError('not a killed step')
        except BaseException:
            self.assertFalse(self.tracker._unwound())
        self.assertFalse(self.tracker.killed.is_set())

    def test_without_kill_the_step_goes_on(self):
        self.tracker.kill = False
        after = []
        self._held(lambda: after.append('ran'))
        self.assertEqual(['ran'], after)


def _writer(*records, code=0):
    """A worker's command line that writes `records` (str: as it is) to
    its --out, then exits with `code`.
    """
    lines = ''.join(r if isinstance(r, str) else json.dumps(r) + '\n'
                    for r in records)
    script = ('import sys\nwith open(sys.argv[1], "w") as f:\n'
              '    f.write(%r)\nsys.exit(%d)\n' % (lines, code))
    return lambda args, out, op: [sys.executable, '-c', script, out]


class WorkersTest(testtools.TestCase):

    def setUp(self):
        super(WorkersTest, self).setUp()
        self.outdir = self.useFixture(fixtures.TempDir()).path
        self.stdout = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        self.args = argparse.Namespace(jobs=1, fixed='dropin',
                                       fixed_path=None)

    def _run(self, commands, deadline=600):
        units = list(commands)
        return explore._run_workers(
            units, self.args, self.outdir, deadline,
            command=lambda args, out, op: commands[
                (os.path.basename(out).split('-', 1)[0], op)](args, out, op))

    def test_exit_codes_and_a_short_record(self):
        step = {'op': OP, 'step': 'after', 'variant': 'delete',
                'result': 'OK', 'details': []}
        killer = [sys.executable, '-c',
                  'import os, signal; os.kill(os.getpid(), signal.SIGKILL)']
        workers = self._run({
            ('vanilla', OP): _writer({'op': OP, 'steps': STEPS}, step),
            # Killed while writing its second record.
            ('fixed', OP): _writer({'op': OP, 'steps': STEPS[:1]}, step,
                                   '{"op": "cold-mig', code=1),
            ('fixed', 'boot'): lambda args, out, op: killer})
        self.assertEqual(
            {('vanilla', OP): explore.Worker(0, 'worker exit 0'),
             ('fixed', OP): explore.Worker(1, 'worker exit 1'),
             ('fixed', 'boot'): explore.Worker(
                 -9, 'worker killed by signal 9')}, workers)
        steps, cells = explore._load(self.outdir, list(workers))
        self.assertEqual({('vanilla', OP): STEPS, ('fixed', OP): STEPS[:1]},
                         steps)
        self.assertEqual({('vanilla', OP, 'after', 'delete'): ('OK', []),
                          ('fixed', OP, 'after', 'delete'): ('OK', [])},
                         cells)

    def test_deadline_kills_and_leaves_the_rest(self):
        # A worker that never ends by itself, and one that waits behind
        # it (--jobs 1).
        hung = [sys.executable, '-c', 'import signal; signal.pause()']
        workers = self._run({('fixed', OP): lambda args, out, op: hung,
                             ('fixed', 'boot'): _writer()}, deadline=1)
        self.assertEqual(
            {('fixed', OP): explore.Worker(
                None, "worker killed: the run's deadline of 1 s passed"),
             ('fixed', 'boot'): explore.Worker(
                 None, "worker not started: the run's deadline of 1 s "
                 "passed")}, workers)
        self.assertIn("fixed cold-migrate-revert: worker killed: the run's "
                      "deadline of 1 s passed", self.stdout.getvalue())
        (passed, failed) = explore.report(
            [OP, 'boot'], {}, {}, ['delete'], ['fixed'], out=io.StringIO(),
            workers=workers)
        self.assertEqual((0, 4), (passed, failed))

    def test_a_reused_out_dir_starts_afresh(self):
        # A record of an earlier run is not taken for this one's.
        stale = os.path.join(self.outdir, 'fixed-%s.jsonl' % OP)
        with open(stale, 'w') as f:
            f.write(json.dumps({'op': OP, 'steps': STEPS}) + '\n')
        failing = [sys.executable, '-c', 'import sys; sys.exit(2)']
        workers = self._run({('fixed', OP): lambda args, out, op: failing})
        self.assertEqual({('fixed', OP): explore.Worker(2, 'worker exit 2')},
                         workers)
        self.assertEqual(({}, {}), explore._load(self.outdir, [('fixed',
                                                                 OP)]))


class MainTest(testtools.TestCase):

    def test_crashed_workers_fail_the_run(self):
        outdir = self.useFixture(fixtures.TempDir()).path
        stdout = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        self.useFixture(fixtures.MonkeyPatch(
            'tests.explore.__main__._worker_command', _writer(code=3)))
        self.assertEqual(1, explore.main(['--ci', '--out', outdir]))
        lines = stdout.getvalue().splitlines()
        # Per side: the 'after' run of each of the four operations; the
        # eleven known leaks of vanilla (five of cold-migrate-revert,
        # three of live-migrate-pre-fails, three of live-migrate) are not
        # found;
        # eight workers fail.
        self.assertEqual(
            ['0 passed, 23 failed',
             'explored (vanilla): 4 steps, 0 leaks, 0 wrong, 4 errors, '
             '0 stuck',
             'explored (fixed): 4 steps, 0 leaks, 0 wrong, 4 errors, 0 stuck'],
            lines[-3:])
        self.assertIn('worker fixed live-migrate-pre-fails failed: worker '
                      'exit 3; 1 runs without a record', lines)

    def _variants_given(self, argv):
        outdir = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', io.StringIO()))
        commands = []

        def command(args, out, op):
            commands.append(args.variants)
            return _writer()(args, out, op)

        self.useFixture(fixtures.MonkeyPatch(
            'tests.explore.__main__._worker_command', command))
        explore.main(argv + ['--out', outdir])
        return set(map(tuple, commands))

    def test_every_variant_unless_told(self):
        self.assertEqual({variants.DEFAULT_FAULTS},
                         self._variants_given(['--ci']))
        self.assertEqual(
            {variants.DEFAULT_FAULTS + ('survive-down', 'survive-outage',
                                        'survive-timeout',
                                        'survive-restart')},
            self._variants_given(['--ci', '--modes', 'delete,survive']))
        self.assertEqual({('restart', 'survive-restart')},
                         self._variants_given(
                             ['--ci', '--variants', 'restart',
                              '--modes', 'survive,delete']))
        self.assertEqual({('survive-restart',)}, self._variants_given(
            ['--ci', '--variants', 'restart', '--modes', 'survive']))
        self.assertEqual({('delete', 'timeout')}, self._variants_given(
            ['--ci', '--variants', 'delete,timeout', '--modes', 'delete']))
        # dbfail: opt-in, survive mode only.
        self.assertEqual({('restart', 'survive-restart', 'survive-dbfail')},
                         self._variants_given(
                             ['--ci', '--variants', 'restart,dbfail',
                              '--modes', 'delete,survive']))

    def test_bad_modes_exit(self):
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
        for argv, message in (
                (['--modes', 'sideways'], '--modes: one or more of '
                 'delete, survive, audit'),
                (['--modes', 'survive,audit', '--variants', 'delete'],
                 '--variants delete has no fault of the survive mode '
                 '(down, outage, timeout, restart, dbfail)'),
                (['--modes', 'survive', '--variants', 'delete'],
                 '--variants delete has no fault of the survive mode '
                 '(down, outage, timeout, restart, dbfail)'),
                (['--modes', 'delete', '--variants', 'dbfail'],
                 '--variants dbfail has no fault of the delete mode '
                 '(delete, down, outage, timeout, restart)')):
            e = self.assertRaises(SystemExit, explore.main, argv)
            self.assertEqual(2, e.code)
            self.assertIn(message, sys.stderr.getvalue())

    def test_default_deadline(self):
        self.useFixture(fixtures.MonkeyPatch('os.cpu_count', lambda: 2))
        # The CI subset: 2 operations, 2 sides, the delete variant.
        self.assertEqual(300 + 480 * 4 // 2, explore.default_deadline(
            [None] * 4, ['delete'], 2))
        # More jobs than cores do not shorten it.
        self.assertEqual(300 + 480 * 4 * 2 // 2, explore.default_deadline(
            [None] * 4, ['delete', 'down'], 4))


def _outcome(result, **kwargs):
    outcome = forked.Outcome()
    outcome.result = result
    for name, value in kwargs.items():
        setattr(outcome, name, value)
    return outcome


class ForkedRunTest(testtools.TestCase):
    """A run in a child process: what comes back, and what does not."""

    def setUp(self):
        super(ForkedRunTest, self).setUp()
        # What a failing child prints stays in its copy of this.
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
        self.runner = forked.Runner()
        self.addCleanup(self.runner.close)

    def test_outcome_comes_back_whole(self):
        step = tracker.Step('rpc', 'compute', 'revert_resize', 2)
        outcome = self.runner.run(lambda: _outcome(
            'LEAK', details=['migration 1234 on host1: VCPU=1'],
            notes=['guest left'], steps=[step],
            unholdable=[tracker.Step('entry', 'ComputeManager', 'x', 1)],
            casts=[step], held_owner='host1'))
        self.assertEqual('LEAK', outcome.result)
        self.assertEqual(['migration 1234 on host1: VCPU=1'],
                         outcome.details)
        self.assertEqual(['guest left'], outcome.notes)
        self.assertEqual([step], outcome.steps)
        self.assertEqual('rpc compute.revert_resize#2',
                         outcome.steps[0].label)
        self.assertEqual('ComputeManager.x', outcome.unholdable[0].label)
        self.assertEqual([step], outcome.casts)
        self.assertEqual('host1', outcome.held_owner)

    def test_the_child_changes_nothing_here(self):
        state = {'runs': 0}

        def func():
            state['runs'] += 1
            return _outcome('OK', notes=['runs %d' % state['runs']])

        self.assertEqual(['runs 1'], self.runner.run(func).notes)
        self.assertEqual(['runs 1'], self.runner.run(func).notes)
        self.assertEqual(0, state['runs'])

    def test_a_child_that_raises_is_an_error(self):
        def func():
            raise RuntimeError('boom')

        outcome = self.runner.run(func)
        self.assertEqual('ERROR', outcome.result)
        self.assertEqual(["the run's process exited 1 without a result"],
                         outcome.details)

    def test_a_killed_child_is_an_error(self):
        def func():
            os.kill(os.getpid(), signal.SIGKILL)

        self.assertEqual(["the run's process was killed by signal 9 "
                          "without a result"], self.runner.run(func).details)

    def test_a_child_past_its_timeout_is_killed(self):
        def func():
            signal.pause()

        outcome = self.runner.run(func, timeout=0.5)
        self.assertEqual('ERROR', outcome.result)
        self.assertEqual(['the run did not end within 0.5 s'],
                         outcome.details)

    def test_a_result_larger_than_a_pipe_buffer(self):
        details = ['x' * 1000] * 500
        self.assertEqual(details, self.runner.run(
            lambda: _outcome('WRONG', details=details)).details)


class ForkedDatabaseTest(testtools.TestCase):
    """The child's view of an in-memory SQLite database it inherited."""

    def setUp(self):
        super(ForkedDatabaseTest, self).setUp()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
        from oslo_db.sqlalchemy import engines
        import sqlalchemy
        self.sa = sqlalchemy
        # oslo.db's engine, with its guard against forked connections.
        self.engine = engines.create_engine('sqlite://')
        with self.engine.begin() as conn:
            conn.exec_driver_sql('CREATE TABLE servers (id INTEGER)')
            conn.exec_driver_sql('INSERT INTO servers VALUES (1)')
        self.runner = forked.Runner()
        self.addCleanup(self.runner.close)

    def _count(self):
        try:
            with self.engine.connect() as conn:
                count = conn.exec_driver_sql(
                    'SELECT count(*) FROM servers').scalar()
        except Exception as e:
            # oslo.db wraps what SQLite raised.
            return _outcome('ERROR', details=[str(e).splitlines()[0]])
        return _outcome('OK', notes=[str(count)])

    def test_the_child_adopts_the_connection(self):
        self.assertEqual(['1'], self.runner.run(self._count).notes)

    def test_without_adopting_it_the_database_is_gone(self):
        # What adopt_connections is for: oslo.db discards the connection,
        # and a new in-memory one has no table.
        self.useFixture(fixtures.MonkeyPatch(
            'tests.explore.forked.adopt_connections', lambda records: None))
        outcome = self.runner.run(self._count)
        self.assertEqual(['(sqlite3.OperationalError) no such table: '
                          'servers'], outcome.details)

    def test_reflect_once(self):
        sa = self.sa
        self.useFixture(forked.ReflectOnce([self.engine]))
        with self.engine.begin() as conn:
            conn.exec_driver_sql('CREATE TABLE later (id INTEGER)')
        metadata = sa.MetaData()
        metadata.reflect(bind=self.engine)
        # The tables reflected when the fixture was set up.
        self.assertEqual(['servers'], sorted(metadata.tables))
        self.assertIsInstance(metadata.tables['servers'], sa.Table)
        # Anything else is reflected as it is.
        only = sa.MetaData()
        only.reflect(bind=self.engine, only=['later'])
        self.assertEqual(['later'], sorted(only.tables))
