"""Trials on threads of the current process: no pickling, breakpoints work; for debugging."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from nbtune.executors._base import ONGOING, Executor, WorkerEvent, event_from_message
from nbtune.schedulers._base import Decision
from nbtune.session import NUDGE
from nbtune.trainable import TrialLaunch, run_trial


class _ThreadChannel:
    """A trial thread's line to the runner: its messages go to the shared event queue."""

    def __init__(self, trial_id: int, events: queue.SimpleQueue) -> None:
        self.trial_id = trial_id
        self.replies: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.forgotten = False
        self._events = events

    def send(self, message: tuple) -> None:
        if not self.forgotten:
            self._events.put((self.trial_id, message))

    def recv(self) -> Any:
        return self.replies.get()

    def poll(self) -> bool:
        return not self.replies.empty()


class ThreadExecutor(Executor):
    """Runs each trial on its own daemon thread of the kernel's process.

    CPU-bound Python trials share the GIL, so this is for debugging and for trainables that
    release it (NumPy, PyTorch); use the default `LokyExecutor` to run trials in parallel.
    """

    pickles_trainable = False

    def __init__(self) -> None:
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._channels: dict[int, _ThreadChannel] = {}
        self._trainable: Callable | type | None = None

    def open(self, trainable: Callable | type, max_workers: int) -> None:
        self._trainable = trainable
        self._events = queue.SimpleQueue()
        self._channels = {}

    def start(self, launch: TrialLaunch) -> None:
        channel = _ThreadChannel(launch.trial_id, self._events)
        self._channels[launch.trial_id] = channel
        thread = threading.Thread(
            target=run_trial,
            args=(self._trainable, launch, channel),
            name=f"nbtune-trial-{launch.trial_id}",
            daemon=True,
        )
        thread.start()

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        self._channels[trial_id].replies.put((decision, free_steps))

    def nudge(self, trial_id: int) -> None:
        channel = self._channels.get(trial_id)
        if channel is not None:
            channel.replies.put(NUDGE)

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        try:
            items = [self._events.get(timeout=timeout)]
        except queue.Empty:
            return []
        while not self._events.empty():
            items.append(self._events.get_nowait())
        return [self._to_event(*item) for item in items if item is not None]

    def _to_event(self, trial_id: int, message: tuple) -> WorkerEvent:
        event = event_from_message(trial_id, message)
        if message[0] not in ONGOING:
            self._channels.pop(trial_id, None)
        return event

    def forget(self, trial_id: int) -> None:
        """A thread cannot be killed: it goes on unheard, and stops at its next report."""
        channel = self._channels.pop(trial_id, None)
        if channel is not None:
            channel.forgotten = True
            channel.replies.put((Decision.STOP, 0))

    def wakeup(self) -> None:
        self._events.put(None)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.replies.put((Decision.STOP, 0))
        self._channels = {}
