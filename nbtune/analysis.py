"""Reading a finished (or running, or crashed) experiment from its directory, without a runner."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from nbtune.results import ResultsView
from nbtune.storage import ExperimentReader
from nbtune.trial import Trial


class ExperimentAnalysis(ResultsView):
    """An experiment as it stands on disk: `dataframe()`, `history()`, `best_*`.

    Reading is a snapshot taken when the object is made; call `nbtune.load` again to see a
    running experiment's newer results.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        reader = ExperimentReader(path)
        self.path = reader.path
        self.spec = reader.spec()
        self.name: str = self.spec["name"]
        self.metric = self.spec["metric"]
        self.mode = self.spec["mode"]
        outcome = reader.outcome()
        self.state: str = outcome["state"] if outcome else "unfinished"
        """How the run ended (finished, stopped, failed), or "unfinished": it still runs
        elsewhere, or its process died (`Tuner.restore` carries it on)."""
        self._results = reader.results()
        self._trials = reader.trials(self._results, self.metric, self.mode)

    def _snapshot(self) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]]]:
        return self._trials, self._results

    def __repr__(self) -> str:
        return f"ExperimentAnalysis({str(self.path)!r}, {len(self._trials)} trials)"


def load(path: str | os.PathLike) -> ExperimentAnalysis:
    """Load an experiment directory (e.g. `"nbtune-runs/demo"`) for analysis.

    It unpickles nothing unless a value in it was stored pickled; still, only load
    directories you trust.
    """
    return ExperimentAnalysis(path)
