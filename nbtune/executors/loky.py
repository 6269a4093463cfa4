"""Trials in worker processes of a private loky pool (joblib's process executor, packaged alone).

    runner thread                               loky worker process
    -------------                               -------------------
    open() ---------- pool.submit, once a worker --> _serve(trainable, lines): the whole run
    accept thread <--- connect(address) ------------ Ready(pid)
    start(launch) ---- down an idle line -----------> run_trial(...), then the next launch
    poll() <-------------------------------------------- WorkerResult(metrics, ..., waits)
    reply(trial, decision) ---- Reply --------------> report() returns, or ends the trial
    poll() <------------------------------ WorkerDone or WorkerFailed: the line is idle
    future callback: the pool broke -------------> serve again, on a fresh pool

Each worker runs one serving task per run and takes the run's trials down its authenticated
AF_UNIX line (about 0.03 ms per round trip; see `_lines`): a trial starts as soon as a line is
idle, without a task submission or a handshake of its own. The pool is shared by every run in
the process that asks for the same number of workers, so a second run starts on warm workers.
It is nbtune's own pool, never joblib's global one, so `joblib.Parallel` keeps working beside it.
The trainable is pickled once per run; large arrays in it travel as memory maps of files in a
run-private folder (`_shared`), so workers share one copy of them.

A worker that dies breaks the whole pool: loky fails every running task, then kills the
other workers. The task callbacks run in between, so the workers still alive there are spared by
the death itself: a trial that they ran is a bystander, lost only because of another's death.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from loky import ProcessPoolExecutor
from loky.process_executor import BrokenProcessPool, ShutdownExecutorError

from nbtune.executors._base import Executor
from nbtune.executors._lines import TrialLines, WorkerLine, connect, hang_up, load_trainable
from nbtune.executors._shared import RunData, release_pages
from nbtune.protocol import (
    NUDGE,
    Decision,
    Ready,
    Reply,
    TrialLaunch,
    WorkerEvent,
    WorkerFailed,
    WorkerLost,
)
from nbtune.resources import visible_gpus
from nbtune.session import answer
from nbtune.trainable import run_trial

_IDLE_WORKER_TIMEOUT_S = 300
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
        pool = ProcessPoolExecutor(
            max_workers=max_workers,
            timeout=_IDLE_WORKER_TIMEOUT_S,
            initializer=_tie_to_driver,
            initargs=(os.getpid(),),
        )
        for _ in range(max_workers):
            pool.submit(_warm_up)
        if not _every_pool:
            _before_loky_exits(_shutdown_pools)
        _every_pool.append(pool)
        return pool


def _before_loky_exits(call: Callable[[], None]) -> None:
    """Run `call` when the interpreter exits, before loky waits there for its pools' workers.

    loky joins its pools at exit (a `threading._register_atexit` hook, which runs before
    `atexit`'s, last registered first), and a worker whose trial left joblib processes behind
    can keep that wait going for minutes: the pools must be killed first. Registered once
    the first pool runs, so after loky's own hook.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        atexit.register(call)
    else:
        register(call)


def _release_pool(pool: ProcessPoolExecutor) -> None:
    """Keep `pool` warm for the next run, unless it broke."""
    with _pools_lock:
        if _works(pool):
            _idle_pools.setdefault(pool._max_workers, []).append(pool)


def _works(pool: ProcessPoolExecutor) -> bool:
    return pool._flags.broken is None and not pool._flags.shutdown


def _warm_up() -> None:
    """Give each new worker nbtune's modules before its first trial: a warm start.

    Unpickling this task imports them, which keeps one worker busy while the next takes the
    next warm-up task, so every worker gets one.
    """


def _shutdown_pools() -> None:
    with _pools_lock:
        for pool in _every_pool:
            pool.shutdown(wait=False, kill_workers=True)
        _every_pool.clear()
        _idle_pools.clear()


def _serve(payload: bytes, address: str, authkey: bytes) -> None:
    """A worker's task for a whole run: run the trials that come down its line, one after
    another, until the run hangs up."""
    _forget_loky_start_method()
    try:
        connection = connect(address, authkey)
        connection.send(Ready(os.getpid()))
        while True:
            _run_one(payload, answer(connection), connection)
    except (OSError, EOFError):
        hang_up()
    finally:
        release_pages()


_PARENT_CHECK_S = 1.0


def _tie_to_driver(driver: int) -> None:
    """Each worker's initializer: end the worker at once when its driver (process `driver`)
    dies, a killed kernel or script, even in the middle of a trial or before its first task,
    where loky's own idle timeout would keep it for minutes."""
    threading.Thread(
        target=_exit_without, args=(driver,), name="nbtune-driver-watch", daemon=True
    ).start()


def _exit_without(driver: int) -> None:
    while os.getppid() == driver:
        time.sleep(_PARENT_CHECK_S)
    os._exit(1)


def _forget_loky_start_method() -> None:
    """Give trials the platform's default multiprocessing start method, as outside nbtune.

    A loky worker's default is loky's own, which only loky's processes know: a spawn or
    forkserver pool that a trial starts would hand it to children that cannot find it
    ("cannot find context for 'loky'"), and hang.
    """
    if multiprocessing.get_start_method(allow_none=True) == "loky":
        multiprocessing.set_start_method(None, force=True)


def _run_one(payload: bytes, launch: TrialLaunch, connection: WorkerLine) -> None:
    try:
        trainable = load_trainable(payload)
    except Exception as exc:
        summary = f"the trainable cannot be loaded in the worker: {type(exc).__name__}: {exc}"
        connection.send(
            WorkerFailed(launch.trial_id, summary.splitlines()[0], traceback.format_exc())
        )
        return
    run_trial(trainable, launch, connection)


class LokyExecutor(Executor):
    """Runs each trial in a worker process; the default executor.

    Killing one worker breaks every trial on a loky pool, so `can_kill_trial` is False: stops
    are cooperative, delivered as the reply to the trial's next report. A hung trial can still
    be killed (`can_kill_worker`): the trials on the other workers come back as bystanders.

    Args:
        max_workers: size of the worker pool; by default the run's `max_concurrent`.
        gpus: the GPU ids to hand out to trials that ask for them (`resources_per_trial`);
            by default the kernel's CUDA_VISIBLE_DEVICES, else what `nvidia-smi -L` lists.
        reuse_workers: keep warm workers that run trial after trial, run after run (the
            default: a trial starts in well under a millisecond). False starts a process for
            each trial (Ray Tune's default, about half a second each): what a trial leaks
            (GPU memory, framework graphs) is freed when it ends, and a process that dies takes
            no other trial with it (see `nbtune.executors.fresh`). A warm worker keeps the
            CUDA device of its first GPU trial once a library has opened it: runs that give
            trials different GPUs want `reuse_workers=False`.
    """

    can_kill_trial = False
    can_kill_worker = True
    captures_output = True
    isolates_trials = True

    def __new__(cls, *args: Any, reuse_workers: bool = True, **kwargs: Any) -> LokyExecutor:
        if reuse_workers is False and cls is LokyExecutor:
            from nbtune.executors.fresh import FreshProcessExecutor

            cls = FreshProcessExecutor
        return super().__new__(cls)

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        gpus: Sequence[str] | None = None,
        reuse_workers: bool = True,
    ) -> None:
        if max_workers is not None and (
            isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1
        ):
            raise ValueError(f"LokyExecutor(max_workers={max_workers!r}): pass a whole number >= 1")
        if not isinstance(reuse_workers, bool):
            raise ValueError(
                f"LokyExecutor(reuse_workers={reuse_workers!r}): pass True (warm workers) or "
                "False (a fresh process per trial)"
            )
        self.max_workers = max_workers
        self.reuse_workers = reuse_workers
        self._gpus = None if gpus is None else [str(gpu) for gpu in gpus]
        self._pools: list[ProcessPoolExecutor] = []
        self._lines: TrialLines | None = None
        self._lock = threading.Lock()
        self._serving: dict[Future, ProcessPoolExecutor] = {}
        self._holding: set[int] = set()
        self._spared: set[int] = set()
        self._waiting: deque[TrialLaunch] = deque()
        self._dropped: list[WorkerEvent] = []
        self._failure: BaseException | None = None
        self._open = False
        self._data: RunData | None = None

    def gpus(self) -> list[str]:
        if self._gpus is None:
            self._gpus = visible_gpus()
        return list(self._gpus)

    def open(self, trainable: Callable | type, max_workers: int) -> None:
        self._data = RunData()
        self._payload = self._data.dumps(trainable)
        self._size = self._warm = self.max_workers or max_workers
        self._pools = []
        self._lines = TrialLines(bystander=self._was_spared)
        self._serving, self._spared, self._holding = {}, set(), set()
        self._waiting.clear()
        self._dropped, self._failure = [], None
        self._open = True
        self._staff()

    def start(self, launch: TrialLaunch) -> None:
        self._waiting.append(launch)
        self._dispatch()

    def resize(self, max_workers: int) -> None:
        """Allow up to `max_workers` workers; more start only when trials wait for them."""
        if max_workers > self._size:
            self._size = max_workers
            self._staff()

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        """Answer the trial; if its worker has just died, the next poll reports it lost. A
        trial told to stop leaves its line to the next launch."""
        self._lines.reply(trial_id, Reply(decision, free_steps))
        if decision is Decision.STOP:
            self._lines.release(trial_id)

    def nudge(self, trial_id: int) -> None:
        self._lines.reply(trial_id, NUDGE)

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        events = self._lines.poll(timeout)
        self._holding.difference_update(e.trial_id for e in events if not e.holds_worker)
        self._staff()
        self._dispatch()
        events.extend(self._dropped)
        self._dropped = []
        return events

    def kill(self, trial_id: int) -> None:
        """Kill the trial's worker process; a trial still waiting for a line is dropped."""
        pid = self._lines.pid_of(trial_id)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return
        for launch in [launch for launch in self._waiting if launch.trial_id == trial_id]:
            self._waiting.remove(launch)
            self._dropped.append(WorkerLost(trial_id, "it was killed before it started"))

    def wakeup(self) -> None:
        lines = self._lines
        if lines is not None:
            lines.wakeup()

    def abandon(self) -> None:
        self._open = False
        pools, self._pools = self._pools, []
        for pool in pools:
            pool.shutdown(wait=False, kill_workers=True)

    def close(self) -> None:
        if self._data is not None:
            self._data.close()
            self._data = None
        if self._lines is None:
            return
        self._open = False
        self._lines.close()
        self._lines = None
        for pool in self._pools:
            _release_pool(pool)

    def _dispatch(self) -> None:
        """Send waiting trials down idle lines; with no worker left to serve them, they are lost."""
        while self._waiting and self._lines.launch(self._waiting[0].trial_id, self._waiting[0]):
            self._holding.add(self._waiting.popleft().trial_id)
        self._staff()
        if self._waiting and self._failure is not None and not self._serving:
            error = f"its worker failed: {self._failure!r}"
            self._dropped.extend(WorkerLost(launch.trial_id, error) for launch in self._waiting)
            self._waiting.clear()

    def _staff(self) -> None:
        """One serving task per worker that can be busy: the run's first workers at once, more
        (up to `resize`'s count) only for trials that run or wait, so that a larger count than
        there are trials starts no idle process. A broken pool is replaced."""
        if not self._open:
            return
        with self._lock:
            busy = len(self._holding) + len(self._waiting)
            wanted = min(self._size, max(self._warm, busy))
            missing = 0 if self._failure is not None else wanted - len(self._serving)
        for _ in range(missing):
            self._submit(missing)

    def _submit(self, due: int) -> None:
        """Submit one serving task; `due`, how many are being submitted, sizes a new pool."""
        task = (_serve, self._payload, self._lines.address, self._lines.authkey)
        pool = self._pool_with_room(due)
        try:
            future = pool.submit(*task)
        except _POOL_ERRORS:
            pool = self._pool_with_room(due)
            future = pool.submit(*task)
        with self._lock:
            self._serving[future] = pool
        future.add_done_callback(functools.partial(self._on_served, pool))

    def _pool_with_room(self, due: int) -> ProcessPoolExecutor:
        """A working pool with a worker free of serving tasks, else a new one for the `due`
        tasks (a serving task holds its worker for the whole run: never queue one)."""
        with self._lock:
            load = Counter(self._serving.values())
        for pool in self._pools:
            if _works(pool) and load[pool] < pool._max_workers:
                return pool
        pool = _acquire_pool(due)
        self._pools.append(pool)
        return pool

    def _on_served(self, pool: ProcessPoolExecutor, future: Future) -> None:
        """Runs on loky's thread when a serving task ends: its line broke, or its pool did.

        When the pool breaks, that is before it kills the surviving workers: note which are
        still alive (their trials are bystanders). The task is replaced at the next poll,
        unless it failed in a way that replacing would only repeat.
        """
        error = None if future.cancelled() else future.exception()
        with self._lock:
            self._serving.pop(future, None)
            if isinstance(error, _POOL_ERRORS):
                processes = pool._processes.items()
                self._spared.update(pid for pid, process in processes if process.exitcode is None)
            elif error is not None:
                self._failure = error
        if self._open:
            self.wakeup()

    def _was_spared(self, pid: int) -> bool:
        """Whether the worker `pid` was alive when its pool broke (consumed once)."""
        with self._lock:
            spared = pid in self._spared
            self._spared.discard(pid)
        return spared
