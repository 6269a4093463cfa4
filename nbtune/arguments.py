"""Checks of the numbers users pass as arguments, each failing with one line that says what to
pass instead.

Every public entry point that takes a count (trials, workers, seeds, failures...) checks it
here, so that `num_samples=0`, `max_workers=2.0` and `max_failures=True` get the same kind of
answer wherever they are given.
"""

from __future__ import annotations

import datetime
import time
from typing import Any


def is_whole_number(value: Any) -> bool:
    """Whether `value` is an int (a bool is not a number of anything)."""
    return isinstance(value, int) and not isinstance(value, bool)


def whole_number(name: str, value: Any, *, minimum: int = 1, alternative: str = "") -> int:
    """`value` if it is a whole number of at least `minimum`; else a ValueError that names
    `name` and says what to pass (`alternative` adds what else is accepted, e.g.
    ", or None to keep them all")."""
    if is_whole_number(value) and value >= minimum:
        return value
    raise ValueError(f"{name}={value!r}: pass a whole number >= {minimum}{alternative}")


def positive_seconds(name: str, value: Any) -> float | None:
    """`value` as a positive number of seconds, or None (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name}={value!r}: pass a positive number of seconds (or None)")
    return value


def seconds_until(name: str, deadline: Any) -> float:
    """`deadline` as seconds from now: a positive number of seconds, or a moment (a
    `datetime`; one without a time zone is local time) that has not passed."""
    if isinstance(deadline, datetime.datetime):
        seconds = deadline.timestamp() - time.time()
        if seconds <= 0:
            raise ValueError(f"{name}={deadline!r}: that moment has passed; pass a later one")
        return seconds
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not deadline > 0:
        raise ValueError(
            f"{name}={deadline!r}: pass a positive number of seconds from now, or a datetime"
        )
    if deadline == float("inf"):
        raise ValueError(f"{name}={deadline!r}: pass a finite number of seconds, or None")
    return float(deadline)
