"""What a reported value is: the one definition every module asks.

A trainable reports whatever its libraries hand it: Python floats, NumPy scalars of any width
(`np.mean` of a float32 array is an `np.float32`, and `np.float64` is even a `float`), 0-d
arrays, torch or JAX scalars. The worker turns each into a plain Python value (`plain`) before
the result leaves it, so that the kernel never holds NumPy types and every comparison, chart
and file sees the same number the user meant.

Every other module asks this one, never a test of its own:

    plain(value)   -> bool, int, float, str, None, a list or a dict of those; anything else as is
    number(value)  -> int | float | None     a number a column can hold (NaN, inf included)
    finite(value)  -> float | None           a number that can be compared: best, rungs, models
    problem(...)   -> str | None             why a key cannot play its role (the tuned metric,
    require(...)   -> int | float             a scheduler's time_attr): one line, or raised

Bools are recorded but are not numbers here: `True` as a loss is a mistake, not a 1.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping
from typing import Any


def plain(value: Any) -> Any:
    """`value` as plain Python, so that the kernel, the log and pandas see ordinary values.

    Python and NumPy numbers and bools of every width, 0-d arrays and anything with `.item()`
    (a torch or JAX scalar) or `__float__` become a `bool`, `int` or `float`; text becomes
    `str`; dicts, lists and tuples become dicts and lists of plain values. Arrays with
    dimensions (even of one element: they are not scalars) and other objects are kept as they
    are, to be recorded as they were reported.
    """
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return _scalar(value)


def _scalar(value: Any) -> Any:
    """A scalar as a Python bool, int, float or str (exact types, not subclasses such as
    `np.float64`); anything that is not a scalar unchanged."""
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    if getattr(value, "ndim", 0) != 0:
        return value
    item = getattr(value, "item", None)
    if callable(item):
        unwrapped = item()
        if type(unwrapped) is not type(value):
            return _scalar(unwrapped)
    if hasattr(value, "__float__"):
        return float(value)
    return value


def number(value: Any) -> int | float | None:
    """`value` as a Python int or float if it is a number (NaN and infinities included), else
    None: what a numeric column holds. Bools and text are not numbers."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def finite(value: Any) -> float | None:
    """`value` as a float if it is a finite number, else None: what can be compared, counted
    as the best, placed at a rung or taught to a searcher. NaN and infinities never can."""
    value = number(value)
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def problem(
    result: Mapping[str, Any], key: str, role: str, *, finite_only: bool = False
) -> str | None:
    """Why `result[key]` cannot serve as `role` (e.g. "the metric"), in one line that names
    the key, what was reported and its type, and what to report instead; None if it can.

    Args:
        result: the reported values.
        key: the name that plays the role.
        role: how the error names the role: "the metric", "ASHA's time_attr".
        finite_only: refuse NaN and infinities too (a trial's progress must be finite; a
            metric may be NaN, which is recorded but never counts as the best).
    """
    if key not in result:
        names = ", ".join(sorted(result)) or "nothing"
        return f"the trial reported {names} but not {role} {key!r}; call nbtune.report({key}=...)"
    value = result[key]
    if number(value) is None:
        fix = "report an int or a float there, and anything else under another name"
        return _refusal(role, key, value, "a number", fix)
    if finite_only and finite(value) is None:
        return _refusal(role, key, value, "a finite number", "report a finite value there")
    return None


def _refusal(role: str, key: str, value: Any, kind: str, fix: str) -> str:
    shown = reprlib.repr(value).replace("\n", " ")
    return (
        f"{role} {key!r} must be {kind}, but the trial reported {key}={shown} "
        f"({type(value).__name__}); {fix}"
    )


def require(
    result: Mapping[str, Any], key: str, role: str, *, finite_only: bool = False
) -> int | float:
    """`result[key]` as a Python number, for a key that must play `role`.

    Raises:
        ValueError: the one-line `problem` with it.
    """
    message = problem(result, key, role, finite_only=finite_only)
    if message is not None:
        raise ValueError(message)
    return number(result[key])
