"""Typed events that the runner publishes, and the bus that hands them to subscribers.

Subscribers run on the runner thread, in the order they subscribed. They must be quick: a
dashboard, for instance, only buffers what it receives and draws it later on its own timer.
A subscriber that raises (anything but `KeyboardInterrupt`: a `sys.exit()` in a callback
included) is dropped, with one warning that names it, so that it cannot stop the experiment.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("nbtune")


@dataclass(frozen=True)
class Event:
    """Base of every event: when it happened (epoch seconds)."""

    timestamp: float = field(default_factory=time.time, kw_only=True)


@dataclass(frozen=True)
class TrialAdded(Event):
    trial_id: int
    config: Mapping[str, Any]


@dataclass(frozen=True)
class TrialStarted(Event):
    """A trial went to the executor, and runs as soon as a worker takes it.

    `restored_from` is the iteration of the checkpoint it starts from, if any.
    """

    trial_id: int
    restored_from: int | None = None


@dataclass(frozen=True)
class TrialResult(Event):
    """A trial reported; `result` is the row as written to the result log. A `returned` one
    is the trial's score: it ranks the trial, not the best of its results before it (see
    `nbtune.session.report_score`)."""

    trial_id: int
    result: Mapping[str, Any]
    returned: bool = False


@dataclass(frozen=True)
class TrialPaused(Event):
    trial_id: int


@dataclass(frozen=True)
class TrialResumed(Event):
    trial_id: int


@dataclass(frozen=True)
class TrialCompleted(Event):
    """A trial ended normally: it returned, or a stop criterion or the scheduler stopped it."""

    trial_id: int


@dataclass(frozen=True)
class TrialErrored(Event):
    trial_id: int
    error: str
    traceback: str


@dataclass(frozen=True)
class TrialRetried(Event):
    """A trial failed and starts again (from its latest checkpoint); `attempt` is the new one."""

    trial_id: int
    attempt: int
    error: str


@dataclass(frozen=True)
class TrialOutput(Event):
    """Text a trial printed, shipped from its worker instead of leaking into some cell."""

    trial_id: int
    text: str


@dataclass(frozen=True)
class CommandApplied(Event):
    """A user's command (`pause`, `fork`, ...) reached the runner; `error` if it was refused."""

    command: str
    arguments: Mapping[str, Any]
    error: str | None = None


@dataclass(frozen=True)
class ExperimentDone(Event):
    """The runner has stopped; `state` is "finished", "stopped" or "failed"."""

    state: str
    error: str | None = None


Subscriber = Callable[[Event], None]


class EventBus:
    """Delivers events to subscribers; safe to subscribe and unsubscribe from any thread."""

    def __init__(self) -> None:
        self._subscribers: tuple[Subscriber, ...] = ()
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Add `subscriber`; return a function that removes it again."""
        with self._lock:
            self._subscribers = (*self._subscribers, subscriber)
        return lambda: self.unsubscribe(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers = tuple(s for s in self._subscribers if s is not subscriber)

    def publish(self, event: Event) -> None:
        """Hand `event` to every subscriber, in order. One that raises is dropped and named in
        a warning (with its traceback), and the others still get the event; a
        `KeyboardInterrupt` is the user's, so it goes through."""
        for subscriber in self._subscribers:
            try:
                subscriber(event)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self.unsubscribe(subscriber)
                logger.warning(
                    "nbtune: dropping subscriber %s, which raised %s; the run goes on without it",
                    _name(subscriber),
                    f"{type(exc).__name__}: {exc}".splitlines()[0],
                    exc_info=True,
                )


def _name(subscriber: Subscriber) -> str:
    """What a subscriber is called: a function's qualified name, or a callable's class."""
    named = subscriber if hasattr(subscriber, "__qualname__") else type(subscriber)
    return f"{getattr(named, '__module__', '?')}.{named.__qualname__}"
