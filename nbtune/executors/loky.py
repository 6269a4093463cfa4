"""Trials in worker processes of a private loky pool (joblib's process executor, packaged alone).

    runner thread                               loky worker process
    -------------                               -------------------
    start(launch) ---- pool.submit ------------> _run_in_worker(trainable, launch, lines, key)
    accept thread <--- connect(address) -------- (once per worker and run, then kept open)
    poll(): wait([wakeup pipe, connections]) <-> ("hello", launch key) / True
    poll() <----------------------------------- ("result", metrics, checkpoint, output, t)
    reply(trial, decision) --------------------> report() returns, or ends the trial
    poll() <----------------------------------- ("done", ...) or ("error", ...)
    future callback -> a worker that died ----> WorkerLost (a bystander if its worker lived)

Results and replies travel over one authenticated AF_UNIX connection per worker (about
0.03 ms per round trip; see `_lines`), which carries its trials one after another. The pool
is shared by every run in the process that asks for the same number of workers, so a second
run starts on warm workers. It is nbtune's own pool, never joblib's global one, so
`joblib.Parallel` keeps working beside it. Trials are submitted only when a worker is free:
loky queues tasks ahead, and a queued task can no longer be cancelled.

A worker that dies breaks the whole pool: loky fails every running task, then kills the
other workers. The task callbacks run in between, so the workers still alive there are spared by
the death itself: a trial that they ran is a bystander, lost only because of another's death.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import signal
import threading
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future

import cloudpickle
from loky import ProcessPoolExecutor
from loky.process_executor import BrokenProcessPool, ShutdownExecutorError

from nbtune.executors._base import Executor, WorkerEvent, WorkerLost
from nbtune.executors._lines import TrialLines, connect, greet, hang_up, load_trainable
from nbtune.schedulers._base import Decision
from nbtune.session import NUDGE
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


def _run_in_worker(
    payload: bytes, launch: TrialLaunch, launch_key: int, address: str, authkey: bytes
) -> None:
    connection = connect(address, authkey)
    try:
        if greet(connection, launch_key):
            run_trial(load_trainable(payload), launch, connection)
    except (OSError, EOFError):
        hang_up()
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
        self._lines: TrialLines | None = None
        self._keys = itertools.count()
        self._deaths: deque[tuple[TrialLaunch, int, BaseException]] = deque()
        self._spared: set[int] = set()
        self._spared_lock = threading.Lock()
        self._kill_on_hello: set[int] = set()

    def open(self, trainable: Callable | type, max_workers: int) -> None:
        self._payload = cloudpickle.dumps(trainable)
        self._pool = _acquire_pool(self.max_workers or max_workers)
        self._pools = [self._pool]
        self._lines = TrialLines(bystander=self._was_spared, greeted=self._greeted)
        self._resubmits: Counter[int] = Counter()
        self._deaths.clear()
        self._spared, self._kill_on_hello = set(), set()

    def start(self, launch: TrialLaunch) -> None:
        launch_key = next(self._keys)
        self._lines.expect(launch_key, launch.trial_id)
        self._submit(launch, launch_key)

    def resize(self, max_workers: int) -> None:
        if max_workers > self._pool._max_workers:
            self._pool = _acquire_pool(max_workers)
            self._pools.append(self._pool)

    def _submit(self, launch: TrialLaunch, launch_key: int) -> None:
        lines = self._lines
        args = (_run_in_worker, self._payload, launch, launch_key, lines.address, lines.authkey)
        try:
            future = self._pool.submit(*args)
        except _POOL_ERRORS:
            self._pool = _acquire_pool(self._pool._max_workers)
            self._pools.append(self._pool)
            future = self._pool.submit(*args)
        future.add_done_callback(
            functools.partial(self._on_task_done, launch, launch_key, self._pool)
        )

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        """Answer the trial; if its worker has just died, the next poll reports it lost."""
        self._lines.reply(trial_id, (decision, free_steps))

    def nudge(self, trial_id: int) -> None:
        self._lines.reply(trial_id, NUDGE)

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        events = self._lines.poll(timeout)
        events.extend(self._collect_deaths())
        return events

    def kill(self, trial_id: int) -> None:
        """Kill the trial's worker process (at once, or as soon as it has one)."""
        pid = self._lines.pid_of(trial_id)
        if pid is None:
            self._kill_on_hello.add(trial_id)
            return
        self._kill_on_hello.discard(trial_id)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def wakeup(self) -> None:
        lines = self._lines
        if lines is not None:
            lines.wakeup()

    def abandon(self) -> None:
        pools, self._pools = self._pools, []
        for pool in pools:
            pool.shutdown(wait=False, kill_workers=True)

    def close(self) -> None:
        if self._lines is None:
            return
        self._lines.close()
        self._lines = None
        for pool in self._pools:
            _release_pool(pool)

    def _collect_deaths(self) -> list[WorkerEvent]:
        """Trials whose task failed before they connected (a connected one sees EOF instead).

        A trial submitted just as the pool broke (another worker was killed) never ran: it is
        submitted again, to a fresh pool, a few times before it counts as lost.
        """
        events = []
        while self._deaths:
            launch, launch_key, error = self._deaths.popleft()
            if not self._lines.withdraw(launch_key):
                continue
            if isinstance(error, _POOL_ERRORS) and self._resubmits[launch_key] < _MAX_RESUBMITS:
                self._resubmits[launch_key] += 1
                self._lines.expect(launch_key, launch.trial_id)
                self._submit(launch, launch_key)
                continue
            events.append(WorkerLost(launch.trial_id, f"its worker failed: {error!r}"))
        return events

    def _on_task_done(
        self, launch: TrialLaunch, launch_key: int, pool: ProcessPoolExecutor, future: Future
    ) -> None:
        """Runs on loky's thread. When the pool breaks, that is before it kills the surviving
        workers: note which are still alive (their trials are bystanders)."""
        error = future.exception()
        if error is None:
            return
        if isinstance(error, _POOL_ERRORS):
            processes = list(pool._processes.items())
            with self._spared_lock:
                self._spared.update(pid for pid, process in processes if process.exitcode is None)
        self._deaths.append((launch, launch_key, error))
        self.wakeup()

    def _was_spared(self, pid: int) -> bool:
        """Whether the worker `pid` was alive when its pool broke (consumed once)."""
        with self._spared_lock:
            spared = pid in self._spared
            self._spared.discard(pid)
        return spared

    def _greeted(self, trial_id: int) -> None:
        if trial_id in self._kill_on_hello:
            self.kill(trial_id)
