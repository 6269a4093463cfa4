"""What a reported value is: the one definition every module asks.

A trainable reports whatever its libraries hand it: Python floats, NumPy scalars of any width
(`np.mean` of a float32 array is an `np.float32`, and `np.float64` is even a `float`), 0-d
arrays, torch or JAX scalars. The worker turns each into a plain Python value (`plain`) before
the result leaves it, so that the kernel never holds NumPy types and every comparison, chart
and file sees the same number the user meant.

Every other module asks this one, never a test of its own:

    plain(value)   -> bool, int, float, str, None, a list or a dict of those; anything else as is
    storable(...)  -> the metrics as the worker sends them: plain, anything else `Pickled`
    number(value)  -> int | float | None     a number a column can hold (NaN, inf included)
    finite(value)  -> float | None           a number that can be compared: best, rungs, models
    format_number(value) -> str              a number as every view shows it: 4 significant digits
    format_value(value)  -> str              any value so shown: a float as above, the rest by str
    problem(...)   -> str | None             why a key cannot play its role (the tuned metric,
    require(...)   -> int | float             a scheduler's time_attr): one line, or raised

Bools are recorded but are not numbers here: `True` as a loss is a mistake, not a 1.

What cannot be recorded faithfully is refused in the worker, in one line naming the key, so
that it ends its trial and never the run: a dict key that is not text (JSON would turn `1`
into `"1"`, and `{1: a, "1": b}` would lose a value), a structure that contains itself, an
int beyond the range of a float.
"""

from __future__ import annotations

import math
import reprlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import cloudpickle

_TOP = "the result"
"""How an error names the reported values as a whole (below it, keys name themselves)."""


@dataclass(frozen=True)
class Pickled:
    """A reported value that is not plain data, pickled by the worker that reported it.

    The kernel records it, shows it and writes it as it is, but never unpickles it on its own:
    loading a pickle runs code, and one that loads in the worker may fail in the kernel.
    `load()` unpickles it, when asked.

    Attributes:
        data: the pickle.
        type_name: the type of the reported value.
        text: a short repr of it, to show.
    """

    data: bytes
    type_name: str
    text: str

    @classmethod
    def of(cls, value: Any) -> Pickled:
        """`value` pickled (raises whatever pickling it raises)."""
        shown = reprlib.repr(value).replace("\n", " ")
        return cls(cloudpickle.dumps(value), type(value).__name__, shown)

    def load(self) -> Any:
        """The reported value, unpickled: only for values from runs you trust."""
        return cloudpickle.loads(self.data)

    def __repr__(self) -> str:
        return f"<pickled {self.type_name}: {self.text}>"


def plain(value: Any) -> Any:
    """`value` as plain Python, so that the kernel, the log and pandas see ordinary values.

    Python and NumPy numbers and bools of every width, 0-d arrays and anything with `.item()`
    (a torch or JAX scalar) or `__float__` become a `bool`, `int` or `float`; text becomes
    `str`; dicts, lists and tuples become dicts and lists of plain values. Arrays with
    dimensions (even of one element: they are not scalars) and other objects are kept as they
    are, to be recorded as they were reported.

    Raises:
        TypeError: a key is not text; the line names it.
        ValueError: a value contains itself, or is an int beyond a float's range.
    """
    return _plain(value, _TOP, _as_is, frozenset())


def storable(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics of one result as the worker sends them: plain values (see `plain`), and
    anything else `Pickled`, so that the kernel never unpickles what a trial reported.

    Raises:
        TypeError: a key is not text, or a value cannot be pickled; the line names it.
        ValueError: a value contains itself, or is an int beyond a float's range.
    """
    return _plain(metrics, _TOP, _pickled, frozenset())


def _plain(value: Any, where: str, other: Callable[[Any, str], Any], inside: frozenset) -> Any:
    """`plain` at `where` (the key path, for errors) below the containers `inside`."""
    if isinstance(value, (Mapping, list, tuple)):
        if id(value) in inside:
            raise ValueError(f"{where} contains itself; report plain data, without cycles")
        inside = inside | {id(value)}
        if isinstance(value, Mapping):
            return {
                _text_key(key, where): _plain(item, _below(where, key), other, inside)
                for key, item in value.items()
            }
        return [_plain(item, f"{where}[{i}]", other, inside) for i, item in enumerate(value)]
    value = _scalar(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max:
        raise ValueError(
            f"{where} is an int of about {math.floor(value.bit_length() * math.log10(2)) + 1} "
            "digits, beyond the range of a float; report a smaller number"
        )
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return other(value, where)


def _below(where: str, key: str) -> str:
    """The path of `key` in the container at `where`: `loss`, `table['a'][0]`."""
    return key if where == _TOP else f"{where}[{key!r}]"


def _text_key(key: Any, where: str) -> str:
    if isinstance(key, str):
        return key
    raise TypeError(
        f"{where} has the key {reprlib.repr(key)} ({type(key).__name__}): the keys of a "
        "reported dict must be text (JSON's are); convert them with str()"
    )


def _as_is(value: Any, where: str) -> Any:
    return value


def _pickled(value: Any, where: str) -> Pickled:
    try:
        return Pickled.of(value)
    except Exception as exc:
        shown = reprlib.repr(value).replace("\n", " ")
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise TypeError(
            f"{where}={shown} ({type(value).__name__}) cannot be pickled ({reason}); "
            "report plain data there"
        ) from None


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


SIGNIFICANT = 4
"""How many significant digits a number keeps when it is shown as text: in the dashboard (its
table, header, hover texts and chart ticks), the static summary and the progress line."""


def format_number(value: float) -> str:
    """`value` as text, at most four significant digits: 0.001235, 1.5, 1.235e+05, nan, inf; a
    whole number below 10**4 as it is (42, not 42.0)."""
    if isinstance(value, int) and abs(value) < 10**SIGNIFICANT:
        return str(value)
    return f"{value:.{SIGNIFICANT}g}"


def format_value(value: Any) -> str:
    """A reported or configured value as text: a float by `format_number`, anything else
    (an int, a string, None, a list) as `str` gives it."""
    return format_number(value) if isinstance(value, float) else str(value)


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
    if isinstance(value, Pickled):
        shown, type_name = value.text, value.type_name
    else:
        shown, type_name = reprlib.repr(value).replace("\n", " "), type(value).__name__
    return (
        f"{role} {key!r} must be {kind}, but the trial reported {key}={shown} ({type_name}); {fix}"
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
