"""The worker side of a trial: what a trainable calls while it runs.

`report`, `get_checkpoint`, `get_trial_id` and `get_trial_dir` find the trial they belong to
through the session that the worker activated before calling the trainable. In a process worker
there is one session per process; the thread executor keeps one per thread.

A thread that the trial started (a data loader, a library's callback thread) may report too:
it belongs to the one running trial that it was not already there for. Its reports and the
trial's own go down the line one at a time, each waiting for its reply, in the order they
are made; a thread left over from a trial that has ended cannot report into the next one.
"""

from __future__ import annotations

import io
import os
import reprlib
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from nbtune import checkpoint as stored_checkpoint
from nbtune.metrics import storable
from nbtune.protocol import (
    Decision,
    Nudge,
    Reply,
    WorkerPaused,
    WorkerResult,
    WorkerSuspended,
)
from nbtune.storage import private_dir
from nbtune.trial import RESULT_KEYS

RESERVED_KEYS = frozenset(RESULT_KEYS)


class Channel(Protocol):
    """The worker's line to the runner: send a message, receive the runner's reply, and see
    whether one is there without waiting."""

    def send(self, message: Any) -> None: ...

    def recv(self) -> Any: ...

    def poll(self) -> bool: ...


def answer(channel: Channel) -> Any:
    """The runner's next answer on `channel`, past any nudge (one left over from a trial
    that ended before its next report is harmless)."""
    message = channel.recv()
    while isinstance(message, Nudge):
        message = channel.recv()
    return message


class TrialStopped(BaseException):
    """Raised inside `report()` when the runner ends the trial; nbtune catches it.

    It derives from BaseException so that a trainable's own `except Exception` does not
    swallow the stop.
    """


class TrialPaused(BaseException):
    """Raised inside `report()` when the trial pauses by checkpoint, freeing its worker."""


class TrialSession:
    """One running trial, seen from its worker."""

    def __init__(
        self,
        trial_id: int,
        channel: Channel,
        *,
        iteration: int,
        checkpoint_path: str | None,
        checkpoint_dir: str,
        capture_output: bool,
        artifact_dir: str | None = None,
    ) -> None:
        self.trial_id = trial_id
        self.artifact_dir = artifact_dir
        self.iteration = iteration
        self._channel = channel
        self._checkpoint_path = checkpoint_path
        self._checkpoint_dir = Path(checkpoint_dir)
        self._output = io.StringIO() if capture_output else None
        self._free_steps = 0
        self._pid = os.getpid()
        self.last_metrics: dict[str, Any] = {}
        self._ended: type[BaseException] | None = None
        self._closed = False
        self._line = threading.Lock()
        self._threads_before: frozenset[threading.Thread] = frozenset()
        self._checkpoint_copy: str | None = None
        self.checkpoint_on_demand: Callable[[], Any] | None = None

    def report(
        self, metrics: dict[str, Any], checkpoint: Any = None, *, returned: bool = False
    ) -> None:
        """Send one result and, unless the runner said it may go on unanswered, wait for its
        decision.

        The runner answers each result it must decide on with a `Reply`: its `free_steps`
        next results cannot change the trial's course (no rung of the scheduler, no stop
        criterion falls on them), so they travel without a round trip. Should the runner need
        an answer sooner (the user paused the trial), it nudges, and the next report waits.

        The values leave as plain Python, anything else pickled (see `nbtune.metrics.storable`):
        nothing past this point sees a NumPy or torch scalar, or unpickles what the trial
        reported; what cannot be recorded faithfully raises here, naming its key.

        Once the runner has ended or paused the trial, a further report (from a `finally:`
        block, or after catching the stop) sends nothing and raises the same again: the line
        already belongs to the next trial, whose launch must not be read as a reply.

        Reports from the trial's threads take the line one at a time (a report and its reply,
        then the next), so that a reply always answers the report that waits for it.
        """
        if os.getpid() != self._pid:
            raise RuntimeError(
                "nbtune.report() was called in a process forked from the trial's; only the "
                "trial's own process can report: send the child's results back to it"
            )
        with self._line:
            if self._ended is not None:
                raise self._ended
            if self._closed:
                raise RuntimeError(
                    "nbtune.report() was called from a thread after its trial had ended; join "
                    "the threads that report before the trainable returns"
                )
            self._report(metrics, checkpoint, returned)

    def _report(self, metrics: dict[str, Any], checkpoint: Any, returned: bool) -> None:
        metrics = storable(metrics)
        reserved = RESERVED_KEYS.intersection(metrics)
        if reserved:
            name = sorted(reserved)[0]
            raise ValueError(f"nbtune.report({name}=...): nbtune sets {name!r}; rename your metric")
        self.iteration += 1
        self.last_metrics = metrics
        path = None if checkpoint is None else self._save_checkpoint(checkpoint)
        waits = self._free_steps == 0 or self._channel.poll()
        output = self.drain_output()
        self._channel.send(
            WorkerResult(
                self.trial_id, metrics, path, output, time.time(), waits=waits, returned=returned
            )
        )
        if not waits:
            self._free_steps -= 1
            return
        decision = self._await_reply()
        if decision is Decision.PAUSE:
            decision = self._pause(path)
        if decision is Decision.STOP:
            self._end(TrialStopped)

    def _pause(self, checkpoint_path: str | None) -> Decision:
        """Pause as the runner asked: by checkpoint if there is one for this very iteration
        (so a resume repeats nothing), else by waiting here until resumed or stopped."""
        path = checkpoint_path or self._checkpoint_now()
        if path is not None:
            self._channel.send(WorkerPaused(self.trial_id, path))
            self._end(TrialPaused)
        self._channel.send(WorkerSuspended(self.trial_id))
        decision = self._await_reply()
        while decision is Decision.PAUSE:
            decision = self._await_reply()
        return decision

    def _end(self, how: type[BaseException]) -> None:
        """Leave the trial as the runner said (stopped or paused), for good."""
        self._ended = how
        raise how

    @property
    def paused(self) -> bool:
        """Whether the trial left its worker paused (it must then say nothing more)."""
        return self._ended is TrialPaused

    def _await_reply(self) -> Decision:
        reply: Reply = answer(self._channel)
        self._free_steps = reply.free_steps
        return reply.decision

    def _checkpoint_now(self) -> str | None:
        if self.checkpoint_on_demand is None:
            return None
        checkpoint = self.checkpoint_on_demand()
        return None if checkpoint is None else self._save_checkpoint(checkpoint)

    def end(self, message: Any) -> None:
        """Send the trial's last message (done, failed), once no report of one of its threads
        is on the line; such a thread cannot report after it."""
        with self._line:
            self._closed = True
            self._channel.send(message)

    def get_checkpoint(self) -> Any:
        """The checkpoint the trial was started from, or None on a fresh start.

        A directory checkpoint comes as a private copy, the same one for the whole trial and
        removed when it ends: the trial may write into it (save its next checkpoint there,
        say) without touching the stored one, which a fork or a retry may start from too.
        """
        if self._checkpoint_path is None:
            return None
        if self._checkpoint_copy is None and os.path.isdir(self._checkpoint_path):
            folder = tempfile.mkdtemp(prefix=f"nbtune-trial{self.trial_id}-")
            copy = os.path.join(folder, os.path.basename(self._checkpoint_path))
            try:
                shutil.copytree(self._checkpoint_path, copy, symlinks=True)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            self._checkpoint_copy = copy
        return stored_checkpoint.load(self._checkpoint_copy or self._checkpoint_path)

    def trial_dir(self) -> Path:
        """The trial's artifact folder, made (private to its owner) if missing."""
        if self.artifact_dir is None:
            raise RuntimeError(
                "nbtune.get_trial_dir(): this trial has no folder of its own (it was run "
                "without an experiment folder)"
            )
        return private_dir(Path(self.artifact_dir))

    def drain_output(self) -> str:
        """Text the trial printed since the last call."""
        if self._output is None:
            return ""
        text = self._output.getvalue()
        self._output.seek(0)
        self._output.truncate()
        return text

    def _save_checkpoint(self, checkpoint: Any) -> str:
        return str(stored_checkpoint.save(checkpoint, self._checkpoint_dir, self.iteration))

    def __enter__(self) -> TrialSession:
        self._threads_before = frozenset(threading.enumerate())
        _activate(self)
        if self._output is not None:
            self._saved_streams = sys.stdout, sys.stderr
            sys.stdout = sys.stderr = self._output
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._output is not None:
            sys.stdout, sys.stderr = self._saved_streams
        _activate(None)
        if self._checkpoint_copy is not None:
            shutil.rmtree(os.path.dirname(self._checkpoint_copy), ignore_errors=True)
            self._checkpoint_copy = None

    def started(self, thread: threading.Thread) -> bool:
        """Whether `thread` started while the trial ran (it was not there before)."""
        return thread not in self._threads_before

    @property
    def abandoned(self) -> bool:
        """Whether its run let go of the trial (a thread left running when the run ended)."""
        return bool(getattr(self._channel, "forgotten", False))


_thread_local = threading.local()
_active: set[TrialSession] = set()
"""The sessions of this process's running trials, whatever their thread."""
_active_lock = threading.Lock()


def _activate(session: TrialSession | None) -> None:
    known = getattr(_thread_local, "session", None)
    with _active_lock:
        if known is not None:
            _active.discard(known)
        if session is not None:
            _active.add(session)
    _thread_local.session = session


def _current() -> TrialSession:
    session = getattr(_thread_local, "session", None)
    if session is None:
        return _started_by()
    return session


def _started_by() -> TrialSession:
    """The running trial that started the calling thread: the one that it was not already
    there for; a one-line error if there is none, or several."""
    with _active_lock:
        running = [session for session in _active if not session.abandoned]
    if not running:
        raise RuntimeError(
            "nbtune.report() and friends only work inside a trial; "
            "call them from the trainable you pass to nbtune.Tuner"
        )
    thread = threading.current_thread()
    owners = [session for session in running if session.started(thread)]
    if len(owners) == 1:
        return owners[0]
    if not owners:
        raise RuntimeError(
            "nbtune.report() was called from a thread that no running trial started (one "
            "left over by a trial that has ended?); report from the trial's threads, and "
            "join them before the trainable returns"
        )
    raise RuntimeError(
        "nbtune.report() was called from a thread started while several trials ran on "
        "threads of this process (ThreadExecutor), so it belongs to none of them for sure: "
        "report from the trial's own thread, or use the default LokyExecutor"
    )


def report(
    metrics: Mapping[str, Any] | None = None, /, *, checkpoint: Any = None, **more: Any
) -> None:
    """Report one result of the running trial, optionally with a checkpoint to resume from.

    The metrics come as keywords, `report(loss=0.3, accuracy=0.91)`, or as one mapping, as in
    Ray Tune 2: `report({"loss": 0.3})`; the two may be mixed as long as no name comes twice.
    Returns once the runner has decided what the trial does next, or at once where nothing
    can be decided (between two rungs of the scheduler, say); if the decision is to stop,
    `report` does not return (nbtune ends the trial cleanly).

    Args:
        metrics: the values to record, by name.
        checkpoint: any picklable object from which the trial can resume (read it back with
            `get_checkpoint()`); saved to the experiment directory before the result is sent.
        **more: more values to record, e.g. `loss=0.3, accuracy=0.91`.

    Raises:
        TypeError: `metrics` is not a mapping, or a name is given twice.
    """
    _current().report(_merged(metrics, more), checkpoint)


def report_score(metrics: Mapping[str, Any]) -> None:
    """Report the running trial's last result as its score: that result ranks the trial, not
    the best of the ones before it (as a trainable's returned value does). For nbtune's own
    trainables whose results are partial until the last (a search's cross-validation, whose
    running mean over the first folds is no candidate's score)."""
    _current().report(dict(metrics), returned=True)


def _merged(metrics: Mapping[str, Any] | None, more: dict[str, Any]) -> dict[str, Any]:
    """The metrics of one `report` call as one dict; a one-line error for a call that is not
    one of its forms."""
    if metrics is None:
        return more
    if not isinstance(metrics, Mapping):
        shown = reprlib.repr(metrics)
        raise TypeError(
            f"nbtune.report({shown}): pass the metrics by name, report(loss=...), "
            "or as one dict, report({'loss': ...}); a checkpoint goes in checkpoint=..."
        )
    twice = sorted(set(metrics).intersection(more))
    if twice:
        raise TypeError(
            f"nbtune.report: {twice[0]!r} is given both in the dict and as a keyword; pass it once"
        )
    return {**metrics, **more}


def get_checkpoint() -> Any:
    """The checkpoint this trial resumes from, or None when it starts fresh."""
    return _current().get_checkpoint()


def get_trial_id() -> int:
    """The id of the running trial (0, 1, 2, ... in creation order)."""
    return _current().trial_id


def get_trial_dir() -> Path:
    """The running trial's own folder, `<experiment>/trials/<id>/artifacts/`, made on the first
    call: for the files it writes (models, plots, tables), which `tuner.artifacts(trial_id)`
    lists and the dashboard's trial tab shows.

    It is also the trial's working directory while it runs, unless the Tuner was given
    `chdir_to_trial_dir=False` (and except on threads: see `Tuner`). On Dask it is a folder on
    the worker's disk, whose new and changed files are shipped to the experiment's folder
    with each checkpoint and when the trial ends (pauses, fails or finishes).

    Raises:
        RuntimeError: called outside a trial.
    """
    return _current().trial_dir()


def checkpoint_on_pause(make: Callable[[], Any] | None) -> None:
    """Let a pause checkpoint the trial at whatever step it comes: `make()` returns the
    checkpoint (an object, or a `Checkpoint.from_directory`) of the training as it stands.

    For code that can save its state after any step, such as a training library's callback:
    the pause then resumes at the very next step, with nothing repeated or missed, even between
    the trial's regular checkpoints. None forgets it.
    """
    _current().checkpoint_on_demand = make
