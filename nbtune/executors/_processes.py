"""What the two kinds of `LokyExecutor` processes share: the pool that each kind is, and the
life of a process that nbtune starts for trials.

`LokyExecutor` (`loky`) owns a run's lines (`_lines.TrialLines`) and its pickled trainable
(`_shared.RunData`), and leaves its processes to the `ProcessPool` that it picks in `__init__`:
`loky.WarmWorkers` (warm workers kept from run to run, the default) or `fresh.FreshProcesses`
(a process started for each trial, `reuse_workers=False`). Both start their processes as loky
does (a fresh interpreter that does not import `__main__`) and run them the same way:

    driver                                   a process of either kind
    ------                                   ------------------------
    before_loky_exits(kill them all) ------> tie_to_driver(driver): ignore Ctrl-C, exit
                                               as soon as the driver is gone (a fresh
                                               process: with every process it started)
                                             forget_loky_start_method()
    lines <--- connect(address, authkey) --- run_one(payload, launch, line): load the
                                               trainable, run the trial down the line
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable

from nbtune.executors._lines import TrialLines, WorkerLine, load_trainable
from nbtune.protocol import TrialLaunch, WorkerEvent, WorkerFailed
from nbtune.trainable import run_trial


class ProcessPool:
    """The processes that run a `LokyExecutor`'s trials; the executor hands them the run.

    Lifecycle, all on the runner thread except `abandon` and `prepare` (any thread, before a
    run): `open(payload, lines, size)` once per run, then any number of `start`,
    `update_payload`, `resize`, `poll` and `kill` calls, then `close()` once the executor has
    closed the run's lines. The executor answers trials down their lines itself.
    """

    def prepare(self, size: int) -> None:
        """Start processes for `size` trials at a time in the background, for a run to come
        (see `Executor.prepare`); none by default."""

    def open(self, payload: bytes, lines: TrialLines, size: int) -> None:
        """Get ready to run trials of the pickled trainable `payload`, up to `size` at a time;
        their processes connect to `lines`."""
        raise NotImplementedError

    def start(self, launch: TrialLaunch) -> None:
        """Start one trial (or queue it for the next free process); never blocks for it."""
        raise NotImplementedError

    def update_payload(self, payload: bytes) -> None:
        """Run the pickled trainable `payload` for the trials started from now on."""
        raise NotImplementedError

    def resize(self, size: int) -> None:
        """Make room for `size` trials at a time (the run's concurrency changed)."""

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        """Wait up to `timeout` s for the lines' events; add the trials lost with a process."""
        raise NotImplementedError

    def kill(self, trial_id: int) -> None:
        """End one trial at once: kill its process (the next poll reports the trial lost)."""
        raise NotImplementedError

    def abandon(self) -> None:
        """Kill every process of the run at once. Thread-safe."""
        raise NotImplementedError

    def close(self) -> None:
        """The run is over and its lines are closed: let its processes go."""
        raise NotImplementedError


def before_loky_exits(call: Callable[[], None]) -> None:
    """Run `call` when the interpreter exits, before loky and multiprocessing wait there for
    their processes.

    A worker whose trial left joblib processes behind can keep that wait going for minutes: the
    workers must be killed first. `threading._register_atexit` hooks run before `atexit`'s.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        atexit.register(call)
    else:
        register(call)


_PARENT_CHECK_S = 1.0

KILL = getattr(signal, "SIGKILL", signal.SIGTERM)
"""The signal that ends a process at once, which it cannot catch: SIGKILL on POSIX. Windows has
none; `os.kill` with SIGTERM there ends the process at once (TerminateProcess). Process groups
(`lead_own_group`, `kill_group`, `freeze`) are POSIX's: on Windows those calls do nothing."""


def tie_to_driver(driver: int, *, group: bool = False) -> None:
    """The first thing a worker does: end at once when its driver (process `driver`) dies, a
    killed kernel or script, even in the middle of a trial; and leave Ctrl-C to the driver.
    With `group`, the worker leads a process group of its own (see `lead_own_group`), and
    everything in that group ends with it.

    An interrupt of the notebook's kernel (or of a script in a terminal) reaches its whole
    process group, workers included: the driver decides what it means for the trials (see
    `Tuner.run`), so a worker ignores it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(
        target=_exit_without, args=(driver, group), name="nbtune-driver-watch", daemon=True
    ).start()


def _exit_without(driver: int, group: bool) -> None:
    while os.getppid() == driver:
        time.sleep(_PARENT_CHECK_S)
    if group:
        kill_group(os.getpid())
    os._exit(1)


def lead_own_group() -> None:
    """Make this process the leader of a session and process group of its own, so that the
    processes it starts (and theirs) can be killed together with `kill_group`, even once their
    parent is gone. A process that starts a session of its own leaves the group."""
    with contextlib.suppress(OSError, AttributeError):
        os.setsid()


def freeze(pid: int) -> None:
    """SIGSTOP process `pid`, and the group that it leads if it leads one: before its process
    tree is killed, so that it cannot see its children die and carry on (end its trial as if
    nothing happened, start more processes). Call it only on a process not yet reaped."""
    with contextlib.suppress(OSError, AttributeError):
        os.killpg(pid, signal.SIGSTOP)
    with contextlib.suppress(OSError, AttributeError):
        os.kill(pid, signal.SIGSTOP)


def kill_group(leader: int) -> None:
    """SIGKILL every process of the group that `leader` leads (nothing if it leads none).

    Call it before `leader` is reaped, or while processes of its group live: either keeps the
    group's id from being given to another process.
    """
    with contextlib.suppress(OSError, AttributeError):
        os.killpg(leader, KILL)


def forget_loky_start_method() -> None:
    """Give trials the platform's default multiprocessing start method, as outside nbtune.

    A loky worker's default is loky's own, which only loky's processes know: a spawn or
    forkserver pool that a trial starts would hand it to children that cannot find it
    ("cannot find context for 'loky'"), and hang.
    """
    if multiprocessing.get_start_method(allow_none=True) == "loky":
        multiprocessing.set_start_method(None, force=True)


def run_one(payload: bytes, launch: TrialLaunch, connection: WorkerLine) -> None:
    """Run the trial `launch` of the pickled trainable `payload` down `connection`; a trainable
    that cannot be loaded fails the trial."""
    try:
        trainable = load_trainable(payload)
    except Exception as exc:
        summary = f"the trainable cannot be loaded in the worker: {type(exc).__name__}: {exc}"
        connection.send(
            WorkerFailed(launch.trial_id, summary.splitlines()[0], traceback.format_exc())
        )
        return
    run_trial(trainable, launch, connection)
