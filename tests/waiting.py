"""Waiting in tests for a condition that another thread, process or page makes true."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def eventually(check: Callable[[], Any], what: str, timeout: float = 30, every: float = 0.1) -> Any:
    """Poll `check()` every `every` seconds until it returns something truthy, and return it;
    fail after `timeout` seconds.

    A check that comes back truthy only after the deadline fails too: a page too busy to
    answer (each check runs in it) does not pass for one that answered in time.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        late = time.monotonic() > deadline
        if result and not late:
            return result
        if late:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(every)


class EventLog:
    """A subscriber that keeps every event and lets a test wait for one, without sleeping."""

    def __init__(self):
        self.events = []
        self._changed = threading.Condition()

    def __call__(self, event):
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def wait_for(self, predicate, timeout=30):
        """Block until some event satisfies `predicate`; return it."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: next((e for e in self.events if predicate(e)), None), timeout
            )
        assert found is not None, f"no matching event within {timeout} s"
        return found

    def of(self, kind, trial_id=None):
        return [
            e
            for e in self.events
            if isinstance(e, kind) and (trial_id is None or e.trial_id == trial_id)
        ]

    def index(self, kind, trial_id):
        """Position of the first `kind` event of `trial_id` in the log."""
        return next(
            i for i, e in enumerate(self.events) if isinstance(e, kind) and e.trial_id == trial_id
        )
