"""Waiting in tests for a condition that another thread, process or page makes true."""

from __future__ import annotations

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
