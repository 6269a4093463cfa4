"""Lines between the runner and its worker processes: one authenticated connection per worker.

    worker (any process)                         runner thread
    --------------------                         -------------
    connect(address, authkey) -- once, kept ---> accept thread files the connection
    send(Hello(launch key, pid)) --------------> poll(): is this launch still wanted?
    recv() <------------------------------------ Ack(True) (run it) or Ack(False) (stale: skip)
    run_trial(..., connection) <---------------> poll() / reply(): results and decisions

A connection carries the trials of its worker one after another. The handshake names the
launch, not just the trial, so that a copy of a launch that a back end runs again (a task
resubmitted after its worker died) is recognised and refused: a trial never runs twice at
once and nothing is reported twice. The process executors (loky, Dask) share this module;
they differ in how tasks reach workers and in the address family (AF_UNIX, or TCP).

A worker may instead serve the whole run (loky): it says `Ready(pid)` once, and the runner
sends each trial's launch down its line whenever the line is idle (`launch()`), which spares
a task submission and a handshake per trial. A line whose trial was told to stop takes the
next launch at once (`release()`): the worker reads it as soon as the trial has ended. Once
the trainable has changed (`NewTrainable`), each line gets the new one before its next launch.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import secrets
import select
import socket
import threading
from collections import deque
from collections.abc import Callable
from multiprocessing import AuthenticationError
from multiprocessing.connection import (
    Client,
    Connection,
    Listener,
    answer_challenge,
    deliver_challenge,
    wait,
)
from typing import Any

import cloudpickle

from nbtune.protocol import (
    Ack,
    Hello,
    NewTrainable,
    Ready,
    WorkerEvent,
    WorkerLost,
    WorkerStarted,
)
from nbtune.session import answer

HANDSHAKE_TIMEOUT_S = 5.0
"""How long a new connection has to prove that it knows the run's key."""

Translate = Callable[[WorkerEvent], WorkerEvent]
"""Turns a worker's message into the one the runner sees (the Dask executor stores shipped
checkpoints with it); called on the runner thread, while the trial still owns its line."""


@functools.lru_cache(maxsize=4)
def load_trainable(payload: bytes) -> Callable | type:
    """The trainable from its pickle, unpickled once per worker process and run."""
    return cloudpickle.loads(payload)


# ----- the worker's side -------------------------------------------------------------------------

_worker_lines = threading.local()


class WorkerLine:
    """The worker's end of its line: what `nbtune.session.Channel` asks for, made cheap.

    A trial that reports between two decisions checks its line at every report, and the
    report itself goes out without a reply: both are on the trial's own time, so both skip
    what `Connection` does for any object (a selector built for each poll, a pickler that
    copies its reducer table for each message).
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._fileno = connection.fileno()

    def send(self, message: Any) -> None:
        self._connection.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))

    def recv(self) -> Any:
        return self._connection.recv()

    def poll(self) -> bool:
        """Whether a message waits to be read (a Connection reads whole messages only, so
        the socket is readable exactly then)."""
        return bool(select.select([self._fileno], [], [], 0)[0])

    def close(self) -> None:
        self._connection.close()


def connect(address: Any, authkey: bytes) -> WorkerLine:
    """The worker thread's line to the runner at `address`, kept open from one trial to the next.

    Per thread, so that a worker process that runs several tasks at once (Dask) gives each its
    own line.
    """
    known = getattr(_worker_lines, "line", None)
    if known is not None:
        known_address, line = known
        if known_address == address:
            return line
        line.close()
    connection = Client(address, authkey=authkey)
    _no_delay(connection)
    line = WorkerLine(connection)
    _worker_lines.line = address, line
    return line


def hang_up() -> None:
    """Drop this thread's line after it broke; the next trial connects again."""
    known = getattr(_worker_lines, "line", None)
    _worker_lines.line = None
    if known is not None:
        known[1].close()


def greet(connection: WorkerLine, launch_key: int) -> bool:
    """Name the launch this task runs (and the process); whether the runner still wants it."""
    connection.send(Hello(launch_key, os.getpid()))
    return answer(connection).ok


def _shut(connection: Connection) -> None:
    """Wake a thread blocked reading `connection`: it reads the end of the stream."""
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(connection.fileno())) as sock:
        sock.shutdown(socket.SHUT_RDWR)


def _no_delay(connection: Connection) -> None:
    """Send small TCP messages at once: a report waits for its reply, so Nagle costs 40 ms."""
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(connection.fileno())) as sock:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# ----- the runner's side -------------------------------------------------------------------------


class TrialLines:
    """The runner's end of every worker's line, listening at `address` (AF_UNIX by default).

    `expect(key, trial_id)` before a launch is submitted (or `launch()` down a serving
    line); `poll()` returns what the workers said, a line that broke while it served a trial
    as `WorkerLost`; `reply()` answers a trial. Thread-safe where `Executor` needs it to be:
    `wakeup()`, and the bookkeeping that the accept thread shares.

    """

    def __init__(
        self,
        family: str = "AF_UNIX",
        address: Any = None,
        translate: Translate | None = None,
    ) -> None:
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        self.authkey = secrets.token_bytes(32)
        self._listener = Listener(address, family=family)
        self.address = self._listener.address
        self._translate = translate
        self._pids: dict[int, int] = {}
        self._ready: set[int] = set()
        self._lock = threading.Lock()
        self._connections: dict[Connection, int | None] = {}
        self._by_trial: dict[int, Connection] = {}
        self._expected: dict[int, int] = {}
        self._serving: dict[Connection, int] = {}
        self._idle: deque[Connection] = deque()
        self._released: set[int] = set()
        self._next: dict[Connection, int] = {}
        self._versions: dict[Connection, int] = {}
        self._closing = False
        threading.Thread(target=self._accept, name="nbtune-accept", daemon=True).start()

    def expect(self, launch_key: int, trial_id: int) -> None:
        """A task that runs trial `trial_id` under `launch_key` is on its way."""
        with self._lock:
            self._expected[launch_key] = trial_id

    def withdraw(self, launch_key: int) -> bool:
        """Stop waiting for `launch_key`; whether it was still awaited (it never connected)."""
        with self._lock:
            return self._expected.pop(launch_key, None) is not None

    def pid_of(self, trial_id: int) -> int | None:
        """The process id of the worker running `trial_id`, once it has connected."""
        return self._pids.get(trial_id)

    def has_served(self, pid: int) -> bool:
        """Whether the worker `pid` said Ready: it started and connected."""
        return pid in self._ready

    def serves(self, trial_id: int) -> bool:
        """Whether a worker is connected and running `trial_id`."""
        with self._lock:
            return trial_id in self._by_trial

    def reply(self, trial_id: int, message: Any) -> None:
        """Send `message` to the trial; a line that just broke shows up in the next poll."""
        with self._lock:
            connection = self._by_trial.get(trial_id)
        if connection is None:
            return
        with contextlib.suppress(OSError):
            connection.send(message)

    def launch(self, trial_id: int, launch: Any, trainable: NewTrainable | None = None) -> bool:
        """Send `launch` down an idle serving line, or else one whose trial is ending (it runs
        once that trial has); False when there is neither. A line that breaks meanwhile shows
        up in the next poll. `trainable` (the run's trainable, once it has changed) goes
        first down a line whose worker has not had that version yet."""
        connection = self._free_line()
        if connection is None:
            return False
        if self._connections[connection] is None:
            self._assign(connection, trial_id)
        else:
            self._next[connection] = trial_id
        self._pids[trial_id] = self._serving[connection]
        with contextlib.suppress(OSError):
            if trainable is not None and self._versions.get(connection) != trainable.version:
                connection.send(trainable)
                self._versions[connection] = trainable.version
            connection.send(launch)
        return True

    def release(self, trial_id: int) -> None:
        """The trial was told to stop: its serving line may take the next launch now."""
        self._released.add(trial_id)

    def _free_line(self) -> Connection | None:
        """An idle serving line, or else one whose trial was told to stop and that has no
        launch queued behind it yet."""
        while self._idle:
            connection = self._idle.popleft()
            if connection in self._serving:
                return connection
        while self._released:
            with self._lock:
                connection = self._by_trial.get(self._released.pop())
            if connection in self._serving and connection not in self._next:
                return connection
        return None

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        """Wait up to `timeout` s for messages (or `wakeup()`); return them as events."""
        with self._lock:
            connections = list(self._connections)
        events: list[WorkerEvent] = []
        for source in wait([self._wake_read, *connections], timeout):
            if source == self._wake_read:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_read, 4096)
            else:
                events.extend(self._receive(source))
        return events

    def wakeup(self) -> None:
        """Make a `poll` blocked in another thread return now."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_write, b"!")

    def close(self) -> None:
        """Hang up on every worker (their trials end) and stop listening."""
        if self._closing:
            return
        self._closing = True
        self._knock()
        with self._lock:
            connections = list(self._connections)
            self._connections, self._by_trial, self._expected = {}, {}, {}
            self._serving, self._idle, self._released, self._next = {}, deque(), set(), {}
            self._versions = {}
        for connection in connections:
            connection.close()

    def _knock(self) -> None:
        """Wake the accept thread with a bare connection, which fails its handshake at once;
        it then sees the lines closing and stops listening."""
        with contextlib.suppress(OSError):
            if isinstance(self.address, str):
                with socket.socket(socket.AF_UNIX) as knock:
                    knock.connect(self.address)
            else:
                socket.create_connection(self.address).close()

    def __del__(self) -> None:
        os.close(self._wake_read)
        os.close(self._wake_write)

    def _receive(self, connection: Connection) -> list[WorkerEvent]:
        trial_id = self._connections[connection]
        try:
            message = connection.recv()
        except (EOFError, OSError):
            following = self._next.pop(connection, None)
            self._forget(connection)
            lost = [] if trial_id is None else [self._lost(trial_id)]
            if following is not None:
                self._pids.pop(following, None)
                error = "its worker died before it started"
                lost.append(WorkerLost(following, error, bystander=True))
            return lost
        if isinstance(message, Hello):
            return self._greeted(connection, message)
        if isinstance(message, Ready):
            self._serving[connection] = message.pid
            self._ready.add(message.pid)
            self._idle.append(connection)
            return []
        if self._translate is not None:
            message = self._translate(message)
        if not message.holds_worker:
            self._pids.pop(trial_id, None)
            self._released.discard(trial_id)
            following = self._next.pop(connection, None)
            self._assign(connection, following)
            if following is None and connection in self._serving:
                self._idle.append(connection)
        return [message]

    def _lost(self, trial_id: int) -> WorkerLost:
        self._pids.pop(trial_id, None)
        return WorkerLost(trial_id, "its worker process died")

    def _greeted(self, connection: Connection, hello: Hello) -> list[WorkerEvent]:
        with self._lock:
            trial_id = self._expected.pop(hello.launch_key, None)
        if trial_id is not None:
            self._assign(connection, trial_id)
            self._pids[trial_id] = hello.pid
        with contextlib.suppress(OSError):
            connection.send(Ack(trial_id is not None))
        return [] if trial_id is None else [WorkerStarted(trial_id)]

    def _assign(self, connection: Connection, trial_id: int | None) -> None:
        with self._lock:
            self._by_trial.pop(self._connections[connection], None)
            self._connections[connection] = trial_id
            if trial_id is not None:
                self._by_trial[trial_id] = connection

    def _forget(self, connection: Connection) -> None:
        with self._lock:
            trial_id = self._connections.pop(connection, None)
            self._by_trial.pop(trial_id, None)
        self._serving.pop(connection, None)
        self._versions.pop(connection, None)
        connection.close()

    def _accept(self) -> None:
        """Take connections as they come; each proves it knows the key on a thread of its
        own, so that one that says nothing never keeps the next worker out."""
        listener = self._listener
        with listener:
            while True:
                try:
                    connection = listener.accept()
                except OSError:
                    if self._closing:
                        return
                    continue
                if self._closing:
                    connection.close()
                    return
                threading.Thread(
                    target=self._handshake, args=(connection,), name="nbtune-handshake", daemon=True
                ).start()

    def _handshake(self, connection: Connection) -> None:
        """Authenticate `connection` both ways (as `Listener.accept` does) within
        `HANDSHAKE_TIMEOUT_S`, then file it; one that fails or stays silent is hung up on."""
        timer = threading.Timer(HANDSHAKE_TIMEOUT_S, _shut, (connection,))
        timer.start()
        try:
            deliver_challenge(connection, self.authkey)
            answer_challenge(connection, self.authkey)
        except (OSError, EOFError, AuthenticationError):
            connection.close()
            return
        finally:
            timer.cancel()
        _no_delay(connection)
        with self._lock:
            if self._closing:
                connection.close()
                return
            self._connections[connection] = None
        self.wakeup()
