"""Trials in worker processes of a private loky pool (joblib's process executor).

    runner thread                               loky worker process
    -------------                               -------------------
    start(launch) ---- pool.submit ------------> _run_in_worker(trainable, launch, address, key)
    accept thread <--- Client(address, key) ---- (once per worker and run, then kept open)
    poll(): wait([wakeup pipe, connections]) <-- ("hello", trial id)
    poll() <----------------------------------- ("result", metrics, checkpoint, output, t)
    reply(trial, decision) --------------------> report() returns, or ends the trial
    poll() <----------------------------------- ("done", ...) or ("error", ...)
    future callback -> a worker that died ----> WorkerLost (a bystander if its worker lived)

Results and replies travel over one authenticated AF_UNIX connection per worker (about
0.03 ms per round trip), which carries its trials one after another. The pool is shared by
every run in the process that asks for the same number of workers, so a second run starts on
warm workers. It is nbtune's own pool, never joblib's global one, so `joblib.Parallel` keeps
working beside it. Trials are submitted only when a worker is free: loky queues tasks ahead,
and a queued task can no longer be cancelled.

A worker that dies breaks the whole pool: loky fails every running task, then kills the
other workers. The task callbacks run in between, so the workers still alive there are spared by
the death itself: a trial that they ran is a bystander, lost only because of another's death.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import secrets
import signal
import threading
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener, wait

import cloudpickle
from joblib.externals.loky import ProcessPoolExecutor
from joblib.externals.loky.process_executor import BrokenProcessPool, ShutdownExecutorError

from nbtune.executors._base import (
    ONGOING,
    Executor,
    WorkerEvent,
    WorkerLost,
    event_from_message,
)
from nbtune.schedulers._base import Decision
from nbtune.trainable import TrialLaunch, run_trial

_IDLE_WORKER_TIMEOUT_S = 300
_MAX_RESUBMITS = 3
_POOL_ERRORS = (BrokenProcessPool, ShutdownExecutorError)
_every_pool: list[ProcessPoolExecutor] = []
_idle_pools: dict[int, list[ProcessPoolExecutor]] = {}
_pools_lock = threading.Lock()


def _acquire_pool(max_workers: int) -> ProcessPoolExecutor:
    """A pool of `max_workers` workers that no live run uses: an idle warm one, or a new one.

    Runs one after another share warm workers; runs side by side never queue behind each other.
    """
    with _pools_lock:
        idle = _idle_pools.get(max_workers)
        if idle:
            return idle.pop()
        pool = ProcessPoolExecutor(max_workers=max_workers, timeout=_IDLE_WORKER_TIMEOUT_S)
        for _ in range(max_workers):
            pool.submit(_warm_up)
        _every_pool.append(pool)
        return pool


def _release_pool(pool: ProcessPoolExecutor) -> None:
    """Keep `pool` warm for the next run, unless it broke."""
    with _pools_lock:
        if pool._flags.broken is None and not pool._flags.shutdown:
            _idle_pools.setdefault(pool._max_workers, []).append(pool)


def _warm_up() -> None:
    """Give each new worker nbtune's modules before its first trial: a warm start.

    Unpickling this task imports them, which keeps one worker busy while the next takes the
    next warm-up task, so every worker gets one.
    """


@atexit.register
def _shutdown_pools() -> None:
    with _pools_lock:
        for pool in _every_pool:
            pool.shutdown(wait=False, kill_workers=True)
        _every_pool.clear()
        _idle_pools.clear()


@functools.lru_cache(maxsize=4)
def _load_trainable(payload: bytes) -> Callable | type:
    return cloudpickle.loads(payload)


_runner_connection: tuple[str, Connection] | None = None


def _connection_to(address: str, authkey: bytes) -> Connection:
    """The worker's line to the run's runner, kept open from one trial to the next."""
    global _runner_connection
    if _runner_connection is not None:
        known_address, connection = _runner_connection
        if known_address == address:
            return connection
        connection.close()
    _runner_connection = address, Client(address, family="AF_UNIX", authkey=authkey)
    return _runner_connection[1]


def _run_in_worker(payload: bytes, launch: TrialLaunch, address: str, authkey: bytes) -> None:
    global _runner_connection
    connection = _connection_to(address, authkey)
    try:
        connection.send(("hello", launch.trial_id, os.getpid()))
        run_trial(_load_trainable(payload), launch, connection)
    except (OSError, EOFError):
        _runner_connection = None
        connection.close()
        raise


class LokyExecutor(Executor):
    """Runs each trial in a worker process; the default executor.

    Killing one worker breaks every trial on a loky pool, so `can_kill_trial` is False: stops
    are cooperative, delivered as the reply to the trial's next report. A hung trial can still
    be killed (`can_kill_worker`): the trials on the other workers come back as bystanders.

    Args:
        max_workers: size of the worker pool; by default the run's `max_concurrent`.
    """

    can_kill_trial = False
    can_kill_worker = True
    streams_results = True
    captures_output = True

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers
        self._pool: ProcessPoolExecutor | None = None
        self._listener: Listener | None = None
        self._lock = threading.Lock()
        self._connections: dict[Connection, int | None] = {}
        self._by_trial: dict[int, Connection] = {}
        self._pids: dict[int, int] = {}
        self._spared: set[int] = set()
        self._kill_on_hello: set[int] = set()
        self._deaths: deque[tuple[TrialLaunch, BaseException]] = deque()
        self._live: set[int] = set()
        self._closing = True
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)

    def __del__(self) -> None:
        os.close(self._wake_read)
        os.close(self._wake_write)

    def open(self, trainable: Callable | type, max_workers: int) -> None:
        self._payload = cloudpickle.dumps(trainable)
        self._pool = _acquire_pool(self.max_workers or max_workers)
        self._pools = [self._pool]
        self._authkey = secrets.token_bytes(32)
        self._listener = Listener(family="AF_UNIX", authkey=self._authkey)
        self._address = self._listener.address
        self._closing = False
        self._live = set()
        self._pids, self._spared, self._kill_on_hello = {}, set(), set()
        self._launches: dict[int, TrialLaunch] = {}
        self._resubmits: Counter[int] = Counter()
        self._deaths.clear()
        threading.Thread(
            target=self._accept_connections, name="nbtune-loky-accept", daemon=True
        ).start()

    def start(self, launch: TrialLaunch) -> None:
        self._live.add(launch.trial_id)
        self._launches[launch.trial_id] = launch
        self._submit(launch)

    def resize(self, max_workers: int) -> None:
        if max_workers > self._pool._max_workers:
            self._pool = _acquire_pool(max_workers)
            self._pools.append(self._pool)

    def _submit(self, launch: TrialLaunch) -> None:
        args = (_run_in_worker, self._payload, launch, self._address, self._authkey)
        try:
            future = self._pool.submit(*args)
        except (BrokenProcessPool, ShutdownExecutorError):
            self._pool = _acquire_pool(self._pool._max_workers)
            self._pools.append(self._pool)
            future = self._pool.submit(*args)
        future.add_done_callback(functools.partial(self._on_task_done, launch, self._pool))

    def reply(self, trial_id: int, decision: Decision) -> None:
        """Answer the trial; if its worker has just died, the next poll reports it lost."""
        with self._lock:
            connection = self._by_trial.get(trial_id)
        if connection is None:
            return
        with contextlib.suppress(OSError):
            connection.send(decision)

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        with self._lock:
            connections = list(self._connections)
        ready = wait([self._wake_read, *connections], timeout)
        events: list[WorkerEvent] = []
        for source in ready:
            if source == self._wake_read:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_read, 4096)
            else:
                events.extend(self._receive(source))
        events.extend(self._collect_deaths())
        return events

    def kill(self, trial_id: int) -> None:
        """Kill the trial's worker process (at once, or as soon as it has one)."""
        pid = self._pids.get(trial_id)
        if pid is None:
            self._kill_on_hello.add(trial_id)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def wakeup(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_write, b"!")

    def abandon(self) -> None:
        pools, self._pools = self._pools, []
        for pool in pools:
            pool.shutdown(wait=False, kill_workers=True)

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        with contextlib.suppress(OSError, EOFError):
            Client(self._address, family="AF_UNIX", authkey=self._authkey).close()
        with self._lock:
            connections = list(self._connections)
            self._connections, self._by_trial = {}, {}
        for connection in connections:
            connection.close()
        for pool in self._pools:
            _release_pool(pool)

    def _receive(self, connection: Connection) -> list[WorkerEvent]:
        """One message from a worker; its connection serves one trial after another."""
        trial_id = self._connections[connection]
        try:
            message = connection.recv()
        except (EOFError, OSError):
            self._forget(connection)
            if trial_id is None or trial_id not in self._live:
                return []
            pid = self._pids.get(trial_id)
            with self._lock:
                bystander = pid in self._spared
                self._spared.discard(pid)
            self._ended(trial_id)
            if bystander:
                return [WorkerLost(trial_id, "another trial's worker died", bystander=True)]
            return [WorkerLost(trial_id, "its worker process died")]
        if message[0] == "hello":
            self._hello(connection, *message[1:])
            return []
        if message[0] not in ONGOING:
            self._ended(trial_id)
            self._assign(connection, None)
        return [event_from_message(trial_id, message)]

    def _hello(self, connection: Connection, trial_id: int, pid: int) -> None:
        self._assign(connection, trial_id)
        self._pids[trial_id] = pid
        if trial_id in self._kill_on_hello:
            self._kill_on_hello.discard(trial_id)
            self.kill(trial_id)

    def _assign(self, connection: Connection, trial_id: int | None) -> None:
        with self._lock:
            self._by_trial.pop(self._connections[connection], None)
            self._connections[connection] = trial_id
            if trial_id is not None:
                self._by_trial[trial_id] = connection

    def _ended(self, trial_id: int) -> None:
        self._live.discard(trial_id)
        self._launches.pop(trial_id, None)
        self._resubmits.pop(trial_id, None)
        self._pids.pop(trial_id, None)
        self._kill_on_hello.discard(trial_id)

    def _forget(self, connection: Connection) -> None:
        with self._lock:
            trial_id = self._connections.pop(connection, None)
            self._by_trial.pop(trial_id, None)
        connection.close()

    def _collect_deaths(self) -> list[WorkerEvent]:
        """Trials whose task failed before they connected (a connected one sees EOF instead).

        A trial submitted just as the pool broke (another worker was killed) never ran: it is
        submitted again, to a fresh pool, a few times before it counts as lost.
        """
        with self._lock:
            connected = set(self._by_trial)
        events = []
        while self._deaths:
            launch, error = self._deaths.popleft()
            trial_id = launch.trial_id
            if self._launches.get(trial_id) is not launch:
                continue
            if trial_id not in self._live or trial_id in connected:
                continue
            if isinstance(error, _POOL_ERRORS) and self._resubmits[trial_id] < _MAX_RESUBMITS:
                self._resubmits[trial_id] += 1
                self._submit(launch)
                continue
            self._ended(trial_id)
            events.append(WorkerLost(trial_id, f"its worker failed: {error!r}"))
        return events

    def _on_task_done(self, launch: TrialLaunch, pool: ProcessPoolExecutor, future: Future) -> None:
        """Runs on loky's thread. When the pool breaks, that is before it kills the surviving
        workers: note which are still alive (their trials are bystanders)."""
        error = future.exception()
        if error is None:
            return
        if isinstance(error, _POOL_ERRORS):
            processes = list(pool._processes.items())
            with self._lock:
                self._spared.update(pid for pid, process in processes if process.exitcode is None)
        self._deaths.append((launch, error))
        self.wakeup()

    def _accept_connections(self) -> None:
        listener = self._listener
        with listener:
            while True:
                try:
                    connection = listener.accept()
                except (OSError, AuthenticationError):
                    if self._closing:
                        return
                    continue
                if self._closing:
                    connection.close()
                    return
                with self._lock:
                    self._connections[connection] = None
                self.wakeup()
