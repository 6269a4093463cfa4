"""`LokyExecutor`, the default executor: trials in worker processes that nbtune starts (as loky
does), by default warm workers that nbtune keeps from run to run (`WarmWorkers`).

    runner thread                               worker process (kept from run to run)
    -------------                               -------------------------------------
    open() ---- a free warm worker, or a new one, gets the run down its pipe
                                                _serve(trainable, lines): the whole run
    accept thread <--- connect(address) ------------ Ready(pid)
    start(launch) ---- down an idle line -----------> run_trial(...), then the next launch
    poll() <-------------------------------------------- WorkerResult(metrics, ..., waits)
    reply(trial, decision) ---- Reply --------------> report() returns, or ends the trial
    poll() <------------------------------ WorkerDone or WorkerFailed: the line is idle
    close(): hang up ---------------------------------> "idle" up the pipe: free for the next run

Each worker serves one run at a time and takes the run's trials down its authenticated AF_UNIX
line (about 0.03 ms per round trip; see `_lines`): a trial starts as soon as a line is idle,
without a task submission or a handshake of its own. Workers are kept for the next run in the
process (they leave after `_IDLE_WORKER_TIMEOUT_S` unused), so a second run starts warm; runs
side by side never share one. A first run starts warm too when its Tuner was built a moment
before: building it starts the workers in the background (`prepare`, `warm_up`). They are
started the way loky starts its workers (a fresh interpreter that does not import
`__main__`), and `joblib.Parallel` keeps its own pool. The
trainable is pickled once per run; large arrays in it travel as memory maps of files in a
run-private folder (`_shared`), so workers share one copy of them. A trainable changed
mid-run (`update_trainable`) is pickled once more, and each worker gets it down its line
before its next launch (`NewTrainable`).

The pool is nbtune's rather than a `loky.ProcessPoolExecutor` because a worker that dies there
breaks the whole pool, and every trial on it: here a dead worker loses its own trial only, and
the run starts another worker in its place.

`LokyExecutor` owns what a run needs whichever processes serve it: the run's lines, its
pickled trainable, the replies to trials. It leaves the processes to the `ProcessPool` (see
`_processes`) that it picks once, in `__init__`: `WarmWorkers` here, or for
`reuse_workers=False` the `FreshProcesses` of `fresh` (a process started for each trial).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from typing import Any

from loky.backend.context import get_context
from loky.backend.utils import kill_process_tree

from nbtune.arguments import is_whole_number
from nbtune.executors._base import Executor
from nbtune.executors._lines import TrialLines, connect, hang_up
from nbtune.executors._processes import (
    ProcessPool,
    before_loky_exits,
    forget_loky_start_method,
    freeze,
    run_one,
    tie_to_driver,
)
from nbtune.executors._shared import RunData, release_pages
from nbtune.executors.fresh import FreshProcesses
from nbtune.protocol import (
    NUDGE,
    Decision,
    NewTrainable,
    Ready,
    Reply,
    TrialLaunch,
    WorkerEvent,
    WorkerLost,
    WorkerStarted,
)
from nbtune.resources import gpu_ids, visible_gpus
from nbtune.session import answer

_IDLE_WORKER_TIMEOUT_S = 300
_HANDOVER_S = 0.25
"""How long a new run waits for a worker of the last one to finish with it, rather than start
a new process (a worker leaves a run within milliseconds unless its trial is busy)."""
_EARLY_DEATHS = 3
"""How many workers may die before they say Ready before a run stops starting more."""
_BOOTING_AT_ONCE = os.cpu_count() or 1
"""How many workers may boot at once: no more than there are cores. A worker's boot (a fresh
interpreter importing nbtune) is a few tenths of a second of CPU: four at once on two cores made
the first trial wait for all four (a first result 0.53 s after `Tuner(...)` in a kernel, 0.42 s
two at a time; one at a time gave 0.37 s but put a cold run's last worker a boot later)."""
_BOOT_WAIT_S = 2.0
"""How long a booting worker keeps the next from starting, at most (one stuck in its boot
holds up no other)."""
_BOOTED, _IDLE = "booted", "idle"
"""What a worker says up its pipe: once it has booted, and each time it is done with a run."""


class _Worker:
    """A worker process, and the pipe down which it is handed a run (and says when it is done
    with one)."""

    def __init__(self) -> None:
        context = get_context("loky")
        self.pipe, theirs = context.Pipe()
        self.process = context.Process(
            target=_work, args=(theirs, os.getpid()), name="nbtune-worker"
        )
        self.process.start()
        theirs.close()
        self.free = True
        self.booted = False
        self._started_at = time.monotonic()

    def serve(self, run: tuple[bytes, str, bytes]) -> None:
        self.free = False
        with contextlib.suppress(OSError):
            self.pipe.send(run)

    def is_free(self) -> bool:
        """Alive and done with its last run."""
        with contextlib.suppress(OSError, EOFError):
            while self.pipe.poll():
                self.booted = True
                if self.pipe.recv() == _IDLE:
                    self.free = True
        return self.free and self.process.is_alive()

    def is_booting(self) -> bool:
        """Still importing what it runs: it has not said so up its pipe, is alive, and has
        not been at it longer than `_BOOT_WAIT_S`."""
        if not self.booted:
            with contextlib.suppress(OSError):
                self.booted = self.pipe.poll()
        overdue = time.monotonic() - self._started_at > _BOOT_WAIT_S
        return not (self.booted or overdue or not self.process.is_alive())

    def kill(self) -> None:
        """Kill the worker and what its trial started (a joblib pool, say); frozen first, so
        that its trial cannot see those processes die and end as if nothing happened."""
        if self.process.exitcode is None:
            freeze(self.process.pid)
        with contextlib.suppress(OSError):
            kill_process_tree(self.process)


_every_worker: set[_Worker] = set()
_free_workers: list[_Worker] = []
_workers_lock = threading.Lock()
_exiting = False
"""Set once the interpreter exits: no worker starts after its workers were killed."""


def _take_worker() -> _Worker | None:
    """A warm worker that no live run uses (one still leaving its last run is waited for,
    briefly), or a new one; None while `_BOOTING_AT_ONCE` workers boot (the run asks again
    at its next poll, which a worker that connects wakes)."""
    with _workers_lock:
        _forget_dead_free_workers()
        worker = _first_free()
        if worker is None and _free_workers:
            wait([worker.pipe for worker in _free_workers], _HANDOVER_S)
            worker = _first_free()
        if worker is not None:
            _free_workers.remove(worker)
            return worker
        return _new_worker() if _may_start_worker() else None


def warm_up(count: int) -> None:
    """Start workers on a thread of their own until `count` of them live in this process (a
    run's included), for a run to come: a worker takes a few tenths of a second to start (a
    fresh interpreter that imports nbtune), which its first trial would otherwise wait for.

    They are the workers `_take_worker` hands out: a run that opens meanwhile takes those
    started so far and starts only the rest (the lock makes each start one or the other's), so
    none is started twice; unused, they leave as any free worker does."""
    threading.Thread(
        target=_start_workers, args=(count,), name="nbtune-warm-up", daemon=True
    ).start()


def _start_workers(count: int) -> None:
    while True:
        with _workers_lock:
            _forget_dead_free_workers()
            if _exiting or len(_every_worker) >= count:
                return
            if _may_start_worker():
                _free_workers.append(_new_worker())
                continue
            booting = [worker for worker in _every_worker if worker.is_booting()]
        wait([w.pipe for w in booting] + [w.process.sentinel for w in booting], _BOOT_WAIT_S)


def _may_start_worker() -> bool:
    """Whether fewer than `_BOOTING_AT_ONCE` workers boot; the caller holds `_workers_lock`."""
    return sum(worker.is_booting() for worker in _every_worker) < _BOOTING_AT_ONCE


def _new_worker() -> _Worker:
    """Start a worker; the caller holds `_workers_lock`."""
    if not _every_worker:
        before_loky_exits(_kill_every_worker)
    worker = _Worker()
    _every_worker.add(worker)
    return worker


def _forget_dead_free_workers() -> None:
    """The caller holds `_workers_lock`."""
    for worker in [worker for worker in _free_workers if not worker.process.is_alive()]:
        _free_workers.remove(worker)
        _every_worker.discard(worker)


def _first_free() -> _Worker | None:
    """The free worker given back last: the one most likely to have this run's data mapped."""
    return next((worker for worker in reversed(_free_workers) if worker.is_free()), None)


def _let_them_leave(workers: list[_Worker], timeout: float) -> None:
    """Wait up to `timeout` s for `workers` to be done with their run: idle ones leave at once,
    one whose trial is busy is not waited for long."""
    deadline = time.monotonic() + timeout
    while leaving := [w.pipe for w in workers if not w.is_free() and w.process.is_alive()]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        wait(leaving, remaining)


def _give_back(worker: _Worker) -> None:
    """Keep `worker` for the next run; it takes one once it says it is done with this one."""
    with _workers_lock:
        if worker.process.is_alive():
            _free_workers.append(worker)
        else:
            _every_worker.discard(worker)


def _kill_every_worker() -> None:
    global _exiting
    with _workers_lock:
        _exiting = True
        workers = list(_every_worker)
        _every_worker.clear()
        _free_workers.clear()
    for worker in workers:
        worker.kill()


def _work(runs: Any, driver: int) -> None:
    """A worker process's life: serve the runs that come down `runs`, one after another, until
    none comes for `_IDLE_WORKER_TIMEOUT_S` or the driver is gone."""
    tie_to_driver(driver)
    forget_loky_start_method()
    with contextlib.suppress(OSError, EOFError):
        runs.send(_BOOTED)
        while runs.poll(_IDLE_WORKER_TIMEOUT_S):
            _serve(*runs.recv())
            runs.send(_IDLE)


def _serve(payload: bytes, address: str, authkey: bytes) -> None:
    """A worker's task for a whole run: run the trials that come down its line, one after
    another, until the run hangs up; a `NewTrainable` on the line replaces `payload` for the
    launches after it."""
    try:
        connection = connect(address, authkey)
        connection.send(Ready(os.getpid()))
        while True:
            message = answer(connection)
            if isinstance(message, NewTrainable):
                payload = message.payload
            else:
                run_one(payload, message, connection)
    except (OSError, EOFError):
        hang_up()
    finally:
        release_pages()


class WarmWorkers(ProcessPool):
    """Warm workers that serve a run's trials one after another down their lines, and are
    given back for the next run when it ends (see the diagram above)."""

    def __init__(self) -> None:
        self._workers: list[_Worker] = []
        self._lines: TrialLines | None = None
        self._holding: set[int] = set()
        self._waiting: deque[TrialLaunch] = deque()
        self._news: list[WorkerEvent] = []
        self._early_deaths = 0
        self._failure: str | None = None
        self._open = False
        self._trainable: NewTrainable | None = None

    def prepare(self, size: int) -> None:
        warm_up(size)

    def open(self, payload: bytes, lines: TrialLines, size: int) -> None:
        self._run = (payload, lines.address, lines.authkey)
        self._trainable = None
        self._size = self._warm = size
        self._workers = []
        self._lines = lines
        self._holding = set()
        self._waiting.clear()
        self._news, self._early_deaths, self._failure = [], 0, None
        self._open = True
        self._staff()

    def start(self, launch: TrialLaunch) -> None:
        self._waiting.append(launch)
        self._dispatch()

    def update_payload(self, payload: bytes) -> None:
        """Each line gets `payload` before its next launch (its worker runs the run's first
        payload until then)."""
        version = 1 if self._trainable is None else self._trainable.version + 1
        self._trainable = NewTrainable(version, payload)

    def resize(self, size: int) -> None:
        """Allow up to `size` workers; more start only when trials wait for them."""
        if size > self._size:
            self._size = size
            self._staff()

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        earlier, self._news = self._news, []
        events = earlier + self._lines.poll(0 if earlier else timeout)
        self._holding.difference_update(e.trial_id for e in events if not e.holds_worker)
        self._staff()
        self._dispatch()
        events.extend(self._news)
        self._news = []
        return events

    def kill(self, trial_id: int) -> None:
        """Kill the trial's worker (another takes its place); a trial still waiting for a
        line is dropped."""
        pid = self._lines.pid_of(trial_id)
        if pid is not None:
            for worker in self._workers:
                if worker.process.pid == pid:
                    worker.kill()
            return
        for launch in [launch for launch in self._waiting if launch.trial_id == trial_id]:
            self._waiting.remove(launch)
            self._news.append(WorkerLost(trial_id, "it was killed before it started"))

    def abandon(self) -> None:
        self._open = False
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.kill()

    def close(self) -> None:
        """Give the run's workers back for the next run, once they are done with this one."""
        self._open = False
        self._lines = None
        _let_them_leave(self._workers, _HANDOVER_S)
        for worker in self._workers:
            _give_back(worker)
        self._workers = []

    def _dispatch(self) -> None:
        """Send waiting trials down idle lines; with no worker left to serve them, they are lost."""
        while self._waiting and self._lines.launch(
            self._waiting[0].trial_id, self._waiting[0], self._trainable
        ):
            trial_id = self._waiting.popleft().trial_id
            self._holding.add(trial_id)
            self._news.append(WorkerStarted(trial_id))
        self._staff()
        if self._waiting and self._failure is not None and not self._workers:
            error = f"its worker failed: {self._failure}"
            self._news.extend(WorkerLost(launch.trial_id, error) for launch in self._waiting)
            self._waiting.clear()

    def _staff(self) -> None:
        """One worker per trial that can run: the run's first workers as soon as they may
        boot (`_BOOTING_AT_ONCE`), more (up to `resize`'s count) only for trials that run or
        wait, so that a larger count than there are trials starts no idle process. A worker
        that died is replaced, unless workers keep dying before they can serve (then something
        in every worker is broken)."""
        if not self._open:
            return
        self._bury_the_dead()
        if self._failure is not None:
            return
        busy = len(self._holding) + len(self._waiting)
        wanted = min(self._size, max(self._warm, busy))
        for _ in range(wanted - len(self._workers)):
            worker = _take_worker()
            if worker is None:
                return
            worker.serve(self._run)
            self._workers.append(worker)

    def _bury_the_dead(self) -> None:
        """Forget the run's dead workers (their lines report their trials lost)."""
        for worker in [worker for worker in self._workers if not worker.process.is_alive()]:
            self._workers.remove(worker)
            with _workers_lock:
                _every_worker.discard(worker)
            if self._lines.has_served(worker.process.pid):
                continue
            self._early_deaths += 1
            if self._early_deaths >= _EARLY_DEATHS:
                self._failure = (
                    f"{self._early_deaths} worker processes died before they could serve "
                    f"(the last with exit code {worker.process.exitcode})"
                )


class LokyExecutor(Executor):
    """Runs each trial in a worker process; the default executor.

    Killing a worker ends its own trial only, so `can_kill_trial` is True: a forced stop ends
    the trial at once, and a hung trial is killed when it times out.

    Args:
        max_workers: how many worker processes; by default the run's `max_concurrent`.
        gpus: the GPU ids to hand out to trials that ask for them (`resources_per_trial`):
            a list (`["0", "1"]`), or a string as CUDA_VISIBLE_DEVICES spells them (`"0,1"`);
            `[]` for none. By default the kernel's CUDA_VISIBLE_DEVICES (where "-1" means
            none, as for CUDA), else what `nvidia-smi -L` lists.
        reuse_workers: keep warm workers that run trial after trial, run after run (the
            default: a trial starts in well under a millisecond). False starts a process for
            each trial (Ray Tune's default, about 0.1 s each): what a trial leaks (GPU memory,
            framework graphs) is freed when it ends (see `nbtune.executors.fresh`). A warm
            worker keeps the CUDA device of its first GPU trial once a library has opened it:
            runs that give trials different GPUs want `reuse_workers=False`.
    """

    can_kill_trial = True
    can_kill_worker = True
    captures_output = True
    isolates_trials = True
    announces_start = True

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        gpus: Sequence[str | int] | str | None = None,
        reuse_workers: bool = True,
    ) -> None:
        if max_workers is not None and not (is_whole_number(max_workers) and max_workers >= 1):
            raise ValueError(f"LokyExecutor(max_workers={max_workers!r}): pass a whole number >= 1")
        if not isinstance(reuse_workers, bool):
            raise ValueError(
                f"LokyExecutor(reuse_workers={reuse_workers!r}): pass True (warm workers) or "
                "False (a fresh process per trial)"
            )
        self.max_workers = max_workers
        self.reuse_workers = reuse_workers
        self._gpus = None if gpus is None else gpu_ids(gpus)
        self._pool: ProcessPool = WarmWorkers() if reuse_workers else FreshProcesses()
        self._lines: TrialLines | None = None
        self._data: RunData | None = None

    def gpus(self) -> list[str]:
        if self._gpus is None:
            self._gpus = visible_gpus()
        return list(self._gpus)

    def prepare(self, max_workers: int) -> None:
        """Start the run's workers in the background (see `Executor.prepare`)."""
        self._pool.prepare(self.max_workers or max_workers)

    def open(self, trainable: Callable | type, max_workers: int) -> None:
        self._data = RunData()
        payload = self._data.dumps(trainable)
        # AF_UNIX where the system has it (POSIX); a local TCP line elsewhere (Windows)
        self._lines = (
            TrialLines() if hasattr(socket, "AF_UNIX") else TrialLines("AF_INET", ("127.0.0.1", 0))
        )
        self._pool.open(payload, self._lines, self.max_workers or max_workers)

    def start(self, launch: TrialLaunch) -> None:
        self._pool.start(launch)

    def update_trainable(self, trainable: Callable | type) -> None:
        """Pickle `trainable` (its large arrays to the run's folder, as `open` does) for the
        launches to come."""
        self._pool.update_payload(self._data.dumps(trainable))

    def resize(self, max_workers: int) -> None:
        self._pool.resize(max_workers)

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        """Answer the trial; if its process has just died, the next poll reports it lost. A
        trial told to stop leaves its line to the next launch."""
        self._lines.reply(trial_id, Reply(decision, free_steps))
        if decision is Decision.STOP:
            self._lines.release(trial_id)

    def nudge(self, trial_id: int) -> None:
        self._lines.reply(trial_id, NUDGE)

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        return self._pool.poll(timeout)

    def kill(self, trial_id: int) -> None:
        self._pool.kill(trial_id)

    def wakeup(self) -> None:
        lines = self._lines
        if lines is not None:
            lines.wakeup()

    def abandon(self) -> None:
        self._pool.abandon()

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()
            self._lines = None
            self._pool.close()
        if self._data is not None:
            self._data.close()
            self._data = None
