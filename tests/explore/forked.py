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

"""A run of the explorer in a child process, from a prepared state.

The harness starts nova's services and prepares an operation once, then
forks a child per run: the child runs from a copy of that state, reports
what it found as one JSON document on a pipe and exits without tearing
anything down. The parent blocks for real (not as a green thread) until
the child has ended, so nothing of the prepared state moves between two
runs. Nothing here imports nova.
"""

import gc
import json
import os
import sys
import time
import traceback

import fixtures

from tests.explore import tracker

#: How long a run's child process may take, start to end (a run that works
#: takes seconds; every wait inside it is bounded well below this).
RUN_TIMEOUT = 600


class Outcome(object):
    """What one run found: result is OK, LEAK, WRONG or ERROR (or N/A)."""

    def __init__(self):
        self.result = None
        self.details = []
        #: What was seen but is no failure (guests before the periodics).
        self.notes = []
        self.steps = []
        self.unholdable = []
        #: The recorded steps that were RPC casts (see Tracker.casts).
        self.casts = []
        self.held_owner = None

    def error(self, why):
        if self.result != 'ERROR':
            self.result = 'ERROR'
            self.details = [why]

    def to_dict(self):
        return {'result': self.result, 'details': self.details,
                'notes': self.notes}

    def to_wire(self):
        """Everything, for the parent of the run's process."""
        return dict(self.to_dict(), held_owner=self.held_owner,
                    steps=[list(s) for s in self.steps],
                    unholdable=[list(s) for s in self.unholdable],
                    casts=[list(s) for s in self.casts])

    @classmethod
    def from_wire(cls, wire):
        outcome = cls()
        outcome.result = wire['result']
        outcome.details = list(wire['details'])
        outcome.notes = list(wire['notes'])
        outcome.held_owner = wire['held_owner']
        outcome.steps = [tracker.Step(*s) for s in wire['steps']]
        outcome.unholdable = [tracker.Step(*s) for s in wire['unholdable']]
        outcome.casts = [tracker.Step(*s) for s in wire['casts']]
        return outcome


def _original(name):
    """A module as it was before eventlet patched it, or as it is."""
    try:
        from eventlet import patcher
    except ImportError:
        return __import__(name)
    return patcher.original(name)


class Runner(object):
    """Forks the runs of one prepared state.

    Made once the state is prepared: it notes the database connections
    the children will adopt, and freezes the objects the parent has (gc
    leaves them alone from then on). A child's collections then never walk
    the prepared heap, which would copy most of its pages from the parent
    (copy-on-write) and cost each run more than it spares. ``close`` undoes
    the freeze.
    """

    def __init__(self):
        self._records = connection_records()
        gc.collect()
        gc.freeze()

    def close(self):
        gc.unfreeze()

    def run(self, func, timeout=RUN_TIMEOUT):
        """Call ``func()`` in a child process: the Outcome it returns, or
        an ERROR Outcome saying why there is none (the child raised,
        exited without a result, was killed, or was still running after
        ``timeout`` seconds, when it is killed).
        """
        read_end, write_end = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            # The run's process: it reports and ends, never returns.
            code = 1
            try:
                os.close(read_end)
                adopt_connections(self._records)
                wire = json.dumps(func().to_wire()).encode()
                view = memoryview(wire)
                while view:
                    view = view[os.write(write_end, view):]
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(write_end)
        wire, why = _collect(pid, read_end, timeout)
        if wire is None:
            outcome = Outcome()
            outcome.error(why)
            return outcome
        return Outcome.from_wire(json.loads(wire.decode()))


def _collect(pid, fd, timeout):
    """What the child `pid` writes to `fd` until it exits: (bytes, None),
    or (None, why).
    """
    real_os = _original('os')
    real_select = _original('select')
    chunks = []
    why = None
    end = time.monotonic() + timeout
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0 or not real_select.select([fd], [], [], left)[0]:
                why = 'the run did not end within %s s' % timeout
                real_os.kill(pid, 9)
                break
            chunk = real_os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        real_os.close(fd)
    _, status = real_os.waitpid(pid, 0)
    if why:
        return None, why
    code = real_os.waitstatus_to_exitcode(status)
    if code != 0 or not chunks:
        return None, "the run's process %s without a result" % (
            'exited %d' % code if code >= 0 else
            'was killed by signal %d' % -code)
    return b''.join(chunks), None


def connection_records():
    """The pooled database connections of this process (SQLAlchemy's
    connection records).
    """
    try:
        from sqlalchemy.pool import base as pool_base
    except ImportError:
        return []
    return [obj for obj in gc.get_objects()
            if isinstance(obj, pool_base._ConnectionRecord)]


def adopt_connections(records):
    """The child takes over the database connections it was forked with.

    oslo.db discards a pooled connection checked out in another process
    than the one that opened it; for the fixtures' in-memory SQLite that
    would be a new, empty database. The parent does not use them while
    the child lives.
    """
    pid = os.getpid()
    for record in records:
        if record.info.get('pid') is not None:
            record.info['pid'] = pid


class ReflectOnce(fixtures.Fixture):
    """The schema of some databases reflected once, for every child.

    nova's archive_deleted_rows reflects every table of the cell database
    on each call: most of what it costs on the fixtures' SQLite (0.85 of
    1.3 s a run). The schema does not change while an operation is
    explored, so a MetaData.reflect() of one of these engines, with no
    other arguments, is given the tables reflected here. The archive moves
    the same rows: it only reads the table definitions.
    """

    def __init__(self, engines):
        super(ReflectOnce, self).__init__()
        self.engines = engines

    def _setUp(self):
        import sqlalchemy
        original = sqlalchemy.MetaData.reflect
        reflected = {}
        for engine in self.engines:
            if engine not in reflected:
                reflected[engine] = sqlalchemy.MetaData()
                original(reflected[engine], bind=engine)

        def reflect(metadata, bind=None, **kwargs):
            known = reflected.get(bind) if bind is not None else None
            if known is None or kwargs or metadata.tables:
                return original(metadata, bind=bind, **kwargs)
            for table in known.tables.values():
                metadata._add_table(table.name, table.schema, table)

        self.useFixture(fixtures.MonkeyPatch('sqlalchemy.MetaData.reflect',
                                             reflect))


def warm_inspect():
    """Fill inspect's file-to-module cache before the children are forked.

    nova's exception notifications call inspect.trace(), whose first
    lookup of a file maps every loaded module (some 30,000 lstat calls,
    half a second); in the parent it is paid once, not in every child.
    """
    import inspect
    inspect.getmodule(compile('', '<nova-fixes explore>', 'exec'))
