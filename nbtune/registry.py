"""The names `%tune` accepts for `--scheduler`, `--searcher` and `--executor`.

The Python API takes instances (`Tuner(train, scheduler=ASHA(max_t=27))`); names exist only
for the magic. One table maps each name to the class it makes, as a "module:Class" path that
is imported when the name is used, so an optional back end costs nothing until chosen. A class
whose required arguments have a sensible value gets it from the table (Ray Tune's, where Ray
has one), so that the name alone works. `describe()` renders the table for the magic's help
and for the README.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One name: the class it makes ("module:Class"), what that does, and its options by name.

    Attributes:
        target: the class, as "module:Class", imported when the name is used.
        summary: what it does, in a few words.
        defaults: options it gets unless they are given: values for required arguments, so
            that the name alone makes something useful.
        required: required arguments with no sensible value; whoever names it passes them.
    """

    target: str
    summary: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()

    @property
    def class_name(self) -> str:
        return self.target.partition(":")[2]

    @property
    def call(self) -> str:
        """What the name makes, in Python: `ASHA(max_t=100)`, or `PBT(perturbation_interval,
        hyperparam_mutations)` for arguments it must be given."""
        given = [f"{key}={value!r}" for key, value in self.defaults.items()]
        return f"{self.class_name}({', '.join([*self.required, *given])})"

    def create(self, **options: Any) -> Any:
        """A new instance: `options`, then this entry's defaults, then the class's own.

        Raises:
            TypeError: for an option the class does not take, or a required one left out;
                the message lists the options it takes.
        """
        module, _, name = self.target.partition(":")
        cls = getattr(importlib.import_module(module), name)
        arguments = {**self.defaults, **options}
        signature = inspect.signature(cls)
        try:
            signature.bind(**arguments)
        except TypeError as exc:
            raise TypeError(f"{name}: {exc}; it takes {', '.join(signature.parameters)}") from None
        return cls(**arguments)


TABLE: dict[str, dict[str, Entry]] = {
    "scheduler": {
        "fifo": Entry("nbtune.schedulers.fifo:FIFOScheduler", "every trial runs to its end"),
        "asha": Entry(
            "nbtune.schedulers.asha:ASHA",
            "early stopping at rungs, asynchronous",
            defaults={"max_t": 100},
        ),
        "hyperband": Entry(
            "nbtune.schedulers.hyperband:HyperBand",
            "synchronous halving; trials should checkpoint",
            defaults={"max_t": 81},
        ),
        "median": Entry(
            "nbtune.schedulers.median_stopping:MedianStopping",
            "stops trials below the median at a step",
            # Not before three results: a running average of one or two is mostly noise.
            defaults={"grace_period": 3},
        ),
        "pbt": Entry(
            "nbtune.schedulers.pbt:PBT",
            "population based training, lists as mutations",
            required=("perturbation_interval", "hyperparam_mutations"),
        ),
    },
    "searcher": {
        "random": Entry("nbtune.search.random:RandomSearch", "random and grid search"),
        "optuna": Entry("nbtune.search.optuna:OptunaSearch", "Optuna's TPE sampler (model-based)"),
    },
    "executor": {
        "loky": Entry("nbtune.executors.loky:LokyExecutor", "worker processes"),
        "thread": Entry("nbtune.executors.thread:ThreadExecutor", "threads, for debugging"),
        "dask": Entry("nbtune.executors.dask:DaskExecutor", "a Dask cluster (address=...)"),
    },
}
"""Family ("scheduler", ...) -> name -> entry; the first name of each family is the default."""


def names(family: str) -> list[str]:
    """The names of one family, default first: `names("executor") == ["loky", "thread", ...]`."""
    return list(TABLE[family])


def create(family: str, name: str, **options: Any) -> Any:
    """A new instance of what `name` stands for: `create("scheduler", "asha")`; `options` go
    to its constructor: `create("executor", "dask", address="tcp://host:8786")`.

    Raises:
        ValueError: for a name the table does not have, listing those it has.
        TypeError: for options its constructor does not take.
    """
    entries = TABLE[family]
    if name not in entries:
        raise ValueError(f"unknown {family} {name!r}; use one of: {', '.join(entries)}")
    return entries[name].create(**options)


def describe(markdown: bool = False) -> str:
    """The table as aligned text (for `%tune --help`) or as a Markdown table (for the README)."""
    rows = []
    for family, entries in TABLE.items():
        for position, (name, entry) in enumerate(entries.items()):
            default = " (default)" if position == 0 else ""
            rows.append((f"--{family}", name, entry.call, entry.summary + default))
    if markdown:
        lines = ["| option | name | Python | what it does |", "| --- | --- | --- | --- |"]
        lines += [f"| `{o}` | `{n}` | `{c}` | {s} |" for o, n, c, s in rows]
        return "\n".join(lines)
    width = [max(len(row[column]) for row in rows) for column in range(3)]
    return "\n".join(f"{o:{width[0]}}  {n:{width[1]}}  {c:{width[2]}}  {s}" for o, n, c, s in rows)
