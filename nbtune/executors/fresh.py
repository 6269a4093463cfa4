"""`LokyExecutor(reuse_workers=False)`: every trial in a process of its own, started for it
(`FreshProcesses`, the pool that such an executor leaves its trials to; see `_processes`).

    runner thread                                  the trial's own process
    -------------                                  -----------------------
    start(launch) -- expect(key); Process.start -> _run_alone(...): tie to the driver,
                                                   set the trial's threads and GPUs, then
    accept thread <-- connect(address, key) ------ Hello(launch key, pid)
    poll() ---------- Ack(True) -----------------> load the trainable, run_trial(...)
    poll() <----------------------------------------- WorkerResult / WorkerDone / WorkerFailed
                                                   the process exits: its memory is freed
    poll(): a process gone before it said Hello --> WorkerLost

A process per trial costs a start (an interpreter, nbtune and the trainable, about half a second)
and buys what warm workers cannot give: whatever a trial leaks (GPU memory, framework graphs,
threads) is gone when it ends, and each trial gets its CUDA_VISIBLE_DEVICES before anything in
its process can touch a GPU. Processes start as loky's do (a fresh interpreter that
does not import the notebook's or script's `__main__`), and are not daemonic, so a trial may
start processes of its own (`n_jobs=-1`).
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from loky.backend.context import get_context

from nbtune.executors._lines import TrialLines, connect, greet
from nbtune.executors._processes import (
    ProcessPool,
    before_loky_exits,
    forget_loky_start_method,
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
    tie_to_driver(driver)
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
    this process's exit they would keep it waiting for them, or be cut off while they start."""
    children = multiprocessing.active_children()
    for child in children:
        _kill(child)
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
        _kill(process)


def _kill(process: Any) -> None:
    with contextlib.suppress(ProcessLookupError, TypeError):
        os.kill(process.pid, signal.SIGKILL)


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

    def resize(self, size: int) -> None:
        """Nothing to do: a process starts with each trial."""

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        if self._processes and (timeout is None or timeout > _UNSEEN_PROCESS_CHECK_S):
            timeout = _UNSEEN_PROCESS_CHECK_S
        events = self._lines.poll(timeout)
        events.extend(self._ended_processes())
        return events

    def kill(self, trial_id: int) -> None:
        """Kill the trial's process; its line breaks, and the next poll reports it lost."""
        for known in self._processes.values():
            if known.trial_id == trial_id:
                _kill(known.process)

    def abandon(self) -> None:
        for known in self._processes.values():
            _kill(known.process)

    def close(self) -> None:
        """Give the processes a moment to exit on their own (they have reported how their
        trials ended), then kill what is left: when the run is over, none of its processes
        holds memory."""
        self._lines = None
        deadline = time.monotonic() + _EXIT_GRACE_S
        for known in self._processes.values():
            known.process.join(max(0.0, deadline - time.monotonic()))
            if known.process.is_alive():
                _kill(known.process)
                known.process.join()
        self._ended_processes()

    def _ended_processes(self) -> list[WorkerEvent]:
        """Reap the processes that exited; one that never said Hello leaves its trial lost
        (a process that connected is reported by its line instead)."""
        events: list[WorkerEvent] = []
        for launch_key, known in list(self._processes.items()):
            if known.process.is_alive():
                continue
            del self._processes[launch_key]
            with _processes_lock:
                _every_process.discard(known.process)
            if self._lines is not None and self._lines.withdraw(launch_key):
                error = f"its process exited with code {known.process.exitcode} before it started"
                events.append(WorkerLost(known.trial_id, error))
        return events
