"""`LokyExecutor(reuse_workers=False)`: every trial in a process of its own, started for it
(`FreshProcesses`, the pool that such an executor leaves its trials to; see `_processes`).

    runner thread                                  the trial's own process
    -------------                                  -----------------------
    start(launch) -- expect(key); Process.start -> _run_alone(...): lead a process group,
                                                   tie to the driver, set the trial's
                                                   threads and GPUs, then
    accept thread <-- connect(address, key) ------ Hello(launch key, pid)
    poll() ---------- Ack(True) -----------------> load the trainable, run_trial(...)
    poll() <----------------------------------------- WorkerResult / WorkerDone / WorkerFailed
                                                   the process exits: its memory is freed
    poll(): the process exited -------------------> kill its group: what it started ends too
    poll(): a process gone before it said Hello --> WorkerLost
    kill(trial) ----------------------------------> kill its tree and group; its line breaks

A process per trial costs a start (an interpreter, nbtune and the trainable, about half a second)
and buys what warm workers cannot give: whatever a trial leaks (GPU memory, framework graphs,
threads) is gone when it ends, and each trial gets its CUDA_VISIBLE_DEVICES before anything in
its process can touch a GPU. Processes start as loky's do (a fresh interpreter that
does not import the notebook's or script's `__main__`), and are not daemonic, so a trial may
start processes of its own (`n_jobs=-1`).

Those end with the trial. Each trial process leads a process group (and session) of its own,
which the processes it starts join, and their children too, even after their parent has gone:
when the trial ends (it returns, is killed, or its driver dies) the whole group is killed. A
killed trial's process tree is killed as well, which reaches processes that started a session of
their own while their parent lived (`subprocess.Popen(start_new_session=True)`); a process that
leaves the group and whose parent has already ended (a daemon) is out of reach. A forked child
would otherwise hold the trial's line open after the trial's process is gone, and the runner
would never hear that the trial was lost.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import threading
import time
import warnings
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from loky.backend.context import get_context
from loky.backend.utils import kill_process_tree

from nbtune.executors._lines import TrialLines, connect, greet
from nbtune.executors._processes import (
    KILL,
    ProcessPool,
    before_loky_exits,
    forget_loky_start_method,
    freeze,
    kill_group,
    lead_own_group,
    run_one,
    tie_to_driver,
)
from nbtune.executors._shared import release_pages
from nbtune.protocol import TrialLaunch, WorkerEvent, WorkerLost
from nbtune.resources import limits

_UNSEEN_PROCESS_CHECK_S = 0.5
"""How often `poll` looks for trial processes that ended before they connected."""

_EXIT_GRACE_S = 1.0
"""How long the processes of a finished run have to exit before they are killed."""

_every_process: set[Any] = set()
_processes_lock = threading.Lock()


@dataclass
class _TrialProcess:
    trial_id: int
    process: Any


def _run_alone(
    payload: bytes, address: str, authkey: bytes, launch_key: int, launch: TrialLaunch, driver: int
) -> None:
    """The whole life of a trial's process: one trial, then exit."""
    lead_own_group()
    tie_to_driver(driver, group=True)
    forget_loky_start_method()
    with _trial_environment(launch):
        connection = connect(address, authkey)
        try:
            if greet(connection, launch_key):
                run_one(payload, launch, connection)
        except (OSError, EOFError):
            pass
        finally:
            release_pages()
            _end_what_the_trial_left()


def _end_what_the_trial_left() -> None:
    """Kill the processes that the trial started and left running (a joblib pool, say): at
    this process's exit they would keep it waiting for them, or be cut off while they start.
    (The runner kills what is left of the group once this process has exited.)"""
    children = multiprocessing.active_children()
    for child in children:
        with contextlib.suppress(OSError):
            os.kill(child.pid, KILL)
    for child in children:
        child.join()


def _trial_environment(launch: TrialLaunch) -> contextlib.AbstractContextManager:
    """The trial's thread caps and CUDA_VISIBLE_DEVICES, set before its trainable is even
    unpickled: in a fresh process nothing has touched a GPU yet."""
    if launch.threads is None:
        return contextlib.nullcontext()
    return limits(launch.threads, launch.gpus)


def _kill_every_process() -> None:
    with _processes_lock:
        processes = list(_every_process)
        _every_process.clear()
    for process in processes:
        _signal_all(process)


def _signal_all(process: Any) -> None:
    """SIGKILL a trial's process and its group, without waiting (thread-safe)."""
    kill_group(process.pid)
    with contextlib.suppress(OSError, TypeError):
        os.kill(process.pid, KILL)


def _has_exited(process: Any) -> bool:
    """Whether `process` has ended, leaving it unreaped (its id keeps naming its group)."""
    if process.exitcode is not None:
        return True
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _end(process: Any) -> None:
    """Kill a trial's process and every process that it started, then reap it: frozen first
    (see `freeze`), its tree (which reaches processes in sessions of their own while their
    parent lives), then its group (which reaches those whose parent has already ended)."""
    if not _has_exited(process):
        freeze(process.pid)
        with warnings.catch_warnings(), contextlib.suppress(OSError):
            warnings.simplefilter("ignore")
            kill_process_tree(process)
    kill_group(process.pid)
    _reap(process)


def _reap(process: Any) -> None:
    """Kill what is left of an ended trial process's group, then reap the process."""
    kill_group(process.pid)
    process.join()


class FreshProcesses(ProcessPool):
    """A new process for every trial, gone with its memory when the trial ends."""

    def __init__(self) -> None:
        self._lines: TrialLines | None = None
        self._processes: dict[int, _TrialProcess] = {}

    def open(self, payload: bytes, lines: TrialLines, size: int) -> None:
        self._payload = payload
        self._lines = lines
        self._keys = itertools.count()
        self._processes = {}
        with _processes_lock:
            if not _every_process:
                before_loky_exits(_kill_every_process)

    def start(self, launch: TrialLaunch) -> None:
        launch_key = next(self._keys)
        self._lines.expect(launch_key, launch.trial_id)
        process = get_context("loky").Process(
            target=_run_alone,
            args=(
                self._payload,
                self._lines.address,
                self._lines.authkey,
                launch_key,
                launch,
                os.getpid(),
            ),
            name=f"nbtune-trial-{launch.trial_id}",
        )
        process.start()
        with _processes_lock:
            _every_process.add(process)
        self._processes[launch_key] = _TrialProcess(launch.trial_id, process)

    def update_payload(self, payload: bytes) -> None:
        """The processes started from now on get `payload`."""
        self._payload = payload

    def resize(self, size: int) -> None:
        """Nothing to do: a process starts with each trial."""

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        if self._processes and (timeout is None or timeout > _UNSEEN_PROCESS_CHECK_S):
            timeout = _UNSEEN_PROCESS_CHECK_S
        events = self._lines.poll(timeout)
        events.extend(self._ended_processes())
        return events

    def kill(self, trial_id: int) -> None:
        """Kill the trial's process and every process it started; its line breaks, and the
        next poll reports it lost."""
        for known in self._processes.values():
            if known.trial_id == trial_id:
                _end(known.process)

    def abandon(self) -> None:
        for known in list(self._processes.values()):
            _signal_all(known.process)

    def close(self) -> None:
        """Give the processes a moment to exit on their own (they have reported how their
        trials ended), then kill what is left: when the run is over, none of its processes
        holds memory."""
        self._lines = None
        deadline = time.monotonic() + _EXIT_GRACE_S
        running = [known.process for known in self._processes.values()]
        running = [process for process in running if not _has_exited(process)]
        while running and (remaining := deadline - time.monotonic()) > 0:
            ended = wait([process.sentinel for process in running], remaining)
            running = [process for process in running if process.sentinel not in ended]
        for known in self._processes.values():
            _end(known.process)
        self._ended_processes()

    def _ended_processes(self) -> list[WorkerEvent]:
        """Reap the processes that exited; one that never said Hello leaves its trial lost
        (a process that connected is reported by its line instead)."""
        events: list[WorkerEvent] = []
        for launch_key, known in list(self._processes.items()):
            if not _has_exited(known.process):
                continue
            _reap(known.process)
            del self._processes[launch_key]
            with _processes_lock:
                _every_process.discard(known.process)
            if self._lines is not None and self._lines.withdraw(launch_key):
                error = f"its process exited with code {known.process.exitcode} before it started"
                events.append(WorkerLost(known.trial_id, error))
        return events
