"""Trials on threads of the current process: no pickling, breakpoints work; for debugging."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from nbtune.executors._base import Executor
from nbtune.protocol import NUDGE, Decision, Reply, TrialLaunch, WorkerEvent
from nbtune.trainable import run_trial


class _ThreadChannel:
    """A trial thread's line to the runner: its messages go to the shared event queue."""

    def __init__(self, events: queue.SimpleQueue) -> None:
        self.replies: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.forgotten = False
        self._events = events

    def send(self, event: WorkerEvent) -> None:
        if not self.forgotten:
            self._events.put(event)

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

    def update_trainable(self, trainable: Callable | type) -> None:
        self._trainable = trainable

    def start(self, launch: TrialLaunch) -> None:
        channel = _ThreadChannel(self._events)
        self._channels[launch.trial_id] = channel
        thread = threading.Thread(
            target=run_trial,
            args=(self._trainable, launch, channel),
            name=f"nbtune-trial-{launch.trial_id}",
            daemon=True,
        )
        thread.start()

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        self._channels[trial_id].replies.put(Reply(decision, free_steps))

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
        events = [item for item in items if item is not None]
        for event in events:
            if not event.holds_worker:
                self._channels.pop(event.trial_id, None)
        return events

    def forget(self, trial_id: int) -> None:
        """A thread cannot be killed: it goes on unheard, and stops at its next report."""
        channel = self._channels.pop(trial_id, None)
        if channel is not None:
            channel.forgotten = True
            channel.replies.put(Reply(Decision.STOP))

    def wakeup(self) -> None:
        self._events.put(None)

    def close(self) -> None:
        """Stop every trial at its next report; those still running are abandoned: their
        threads (and threads they started) are no longer taken for a running trial's."""
        for channel in self._channels.values():
            channel.forgotten = True
            channel.replies.put(Reply(Decision.STOP))
        self._channels = {}
