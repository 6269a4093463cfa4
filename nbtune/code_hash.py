"""A short hash of a trainable's code, so that a trial says which version of it ran.

In a notebook a training function is redefined all the time: a bug fixed halfway through a
campaign, a run restored with a changed function. `code_hash(train)` hashes what the function
runs: its bytecode and constants (nested functions' too), the functions and classes its closure
and defaults hold or that it calls by name from its own module (a helper defined in the same
notebook), and a class trainable's methods; not its name, file or line numbers, so the same
code in another cell hashes the same. `dataframe()["code"]` shows it per trial.
"""

from __future__ import annotations

import hashlib
import types
from typing import Any

DIGITS = 8
"""How many hex digits a code hash keeps."""
_DEPTH = 4
"""How deep the closure is followed (a helper a helper calls...)."""


def code_hash(trainable: Any) -> str:
    """An 8-hex-digit hash of `trainable`'s code (a function, a callable object, or a class
    trainable)."""
    digest = hashlib.sha256()
    _feed(digest, trainable, _DEPTH, set())
    return digest.hexdigest()[:DIGITS]


def _feed(digest: Any, thing: Any, depth: int, seen: set[int]) -> None:
    if id(thing) in seen or depth < 0:
        return
    seen.add(id(thing))
    if isinstance(thing, types.MethodType):
        thing = thing.__func__
    if isinstance(thing, types.FunctionType):
        _feed_function(digest, thing, depth, seen)
    elif isinstance(thing, type):
        for name, member in sorted(vars(thing).items()):
            if isinstance(member, (types.FunctionType, staticmethod, classmethod)):
                digest.update(name.encode())
                _feed(digest, getattr(member, "__func__", member), depth, seen)
    elif callable(thing):
        _feed(digest, type(thing), depth, seen)
        inner = [getattr(thing, "func", None), *getattr(thing, "__dict__", {}).values()]
        for value in inner:
            if isinstance(value, (types.FunctionType, types.MethodType, type)):
                _feed(digest, value, depth - 1, seen)


def _feed_function(digest: Any, function: types.FunctionType, depth: int, seen: set[int]) -> None:
    _feed_code(digest, function.__code__)
    called = [function.__globals__.get(name) for name in _names(function.__code__)]
    neighbours = [
        value
        for value in called
        if isinstance(value, (types.FunctionType, type))
        and getattr(value, "__module__", None) == function.__module__
    ]
    for value in neighbours:
        _feed(digest, value, depth - 1, seen)
    for value in (*(function.__defaults__ or ()), *_closure(function)):
        if isinstance(value, (types.FunctionType, type, types.MethodType)):
            _feed(digest, value, depth - 1, seen)
        else:
            digest.update(type(value).__qualname__.encode())


def _feed_code(digest: Any, code: types.CodeType) -> None:
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode())
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            _feed_code(digest, constant)
        else:
            digest.update(repr(constant).encode())


def _names(code: types.CodeType) -> list[str]:
    """The global names `code` (and the code nested in it) refers to."""
    names = list(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names += _names(constant)
    return names


def _closure(function: types.FunctionType) -> list[Any]:
    cells = function.__closure__ or ()
    values = []
    for cell in cells:
        try:
            values.append(cell.cell_contents)
        except ValueError:
            continue
    return values
