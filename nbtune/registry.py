"""The names `%tune` accepts for `--scheduler`, `--searcher` and `--executor`.

The Python API takes instances (`Tuner(train, scheduler=FIFOScheduler())`); names exist only
for the magic. One table maps each name to the class it makes, as a "module:Class" path that
is imported when the name is used, so an optional back end costs nothing until chosen.
`describe()` renders the table for the magic's help and for the README.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One name: the class it makes ("module:Class") and what that does, in a few words."""

    target: str
    summary: str

    @property
    def class_name(self) -> str:
        return self.target.partition(":")[2]

    def create(self, **options: Any) -> Any:
        """A new instance, with the class's defaults for what `options` leaves out."""
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)(**options)


TABLE: dict[str, dict[str, Entry]] = {
    "scheduler": {
        "fifo": Entry("nbtune.schedulers.fifo:FIFOScheduler", "every trial runs to its end"),
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
    """The names of one family, default first: `names("executor") == ["loky", "thread"]`."""
    return list(TABLE[family])


def create(family: str, name: str, **options: Any) -> Any:
    """A new instance of what `name` stands for: `create("scheduler", "fifo")`; `options` go
    to its constructor: `create("executor", "dask", address="tcp://host:8786")`.

    Raises:
        ValueError: for a name the table does not have, listing those it has.
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
            rows.append((f"--{family}", name, f"{entry.class_name}()", entry.summary + default))
    if markdown:
        lines = ["| option | name | Python | what it does |", "| --- | --- | --- | --- |"]
        lines += [f"| `{o}` | `{n}` | `{c}` | {s} |" for o, n, c, s in rows]
        return "\n".join(lines)
    width = [max(len(row[column]) for row in rows) for column in range(3)]
    return "\n".join(f"{o:{width[0]}}  {n:{width[1]}}  {c:{width[2]}}  {s}" for o, n, c, s in rows)
