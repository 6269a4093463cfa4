"""Reading a finished (or running, or crashed) experiment from its directory, without a runner."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from nbtune import environment, remote
from nbtune.constraints import Constraints
from nbtune.errors import RunEndedError
from nbtune.events import Event
from nbtune.results import ResultsView
from nbtune.storage import ExperimentReader
from nbtune.trial import Trial


class ExperimentAnalysis(ResultsView):
    """An experiment as it stands on disk: `dataframe()`, `history()`, `best_*`.

    Reading is a snapshot taken when the object is made; call `nbtune.load` again to see a
    running experiment's newer results. Its `dashboard()` is read-only: it is never `live`, and
    the commands of a live run (`pause`, `stop`, ...) are refused with a hint to restore it.
    """

    live = False
    """A loaded experiment is never live: nothing here runs its trials."""

    planned_trials = None
    """Not known: the searcher's plan is in its pickled state, which loading does not unpickle;
    a dashboard counts the trials there are."""

    def __init__(self, path: str | os.PathLike, trust: bool = False) -> None:
        reader = ExperimentReader(path)
        self.path = reader.path
        self.spec = reader.spec()
        self.name: str = Path(os.path.abspath(self.path)).name or self.spec.get("name", "")
        """The folder's name, as a restore names the run (the spec's is where it began)."""
        self.metric = self.spec.get("metric")
        self.mode = self.spec.get("mode", "min")
        self.constraints = Constraints.parse(self.spec.get("constraints"))
        self.max_concurrent: int = self.spec.get("max_concurrent") or 1
        outcome = reader.outcome()
        self.state: str = outcome["state"] if outcome else "unfinished"
        """How the run ended (finished, stopped, failed), or "unfinished": it still runs
        elsewhere, or its process died (`Tuner.restore` carries it on)."""
        self._results = reader.results(trust=trust)
        self._trials = reader.trials(self._results, self.metric, self.mode, trust=trust)

    def _snapshot(self) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]]]:
        return self._trials, self._results

    @property
    def environment(self) -> dict[str, Any] | None:
        """Where the run was made: `python`, `platform`, `hostname`, `packages` (name ->
        version) and `git` (`commit`, `dirty`; None outside a repository), as recorded when it
        was created (see `nbtune.environment`); None for a run recorded without it."""
        return environment.read(self.path)

    def __repr__(self) -> str:
        return f"ExperimentAnalysis({str(self.path)!r}, {len(self._trials)} trials)"

    # ----- the commands of a live run, refused ------------------------------------------------

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Nothing here sends events; `callback` is never called. Returns a no-op."""
        return _no_op

    def pause(self, *trial_ids: int | str) -> NoReturn:
        self._refuse("pause")

    def resume(self, *trial_ids: int | str) -> NoReturn:
        self._refuse("resume")

    def stop(self, *trial_ids: int | str, force: bool = False) -> NoReturn:
        self._refuse("stop")

    def pause_all(self) -> NoReturn:
        self._refuse("pause_all")

    def resume_all(self) -> NoReturn:
        self._refuse("resume_all")

    def set_max_concurrent(self, max_concurrent: int) -> NoReturn:
        self._refuse("set_max_concurrent")

    def _refuse(self, command: str) -> NoReturn:
        raise RunEndedError(
            f"{command}(): {self.name!r} is loaded from disk, not running here; carry it on "
            f"with nbtune.Tuner.restore({str(self.path)!r}, trainable) to steer it"
        )


def _no_op() -> None:
    pass


def view_of(source: Any) -> ResultsView:
    """What a chart reads: a `Tuner` or an `ExperimentAnalysis` as it is, a directory loaded.

    Raises:
        TypeError: `source` is none of those, in one line.
    """
    if isinstance(source, (str, os.PathLike)):
        source = ExperimentAnalysis(source)
    if not isinstance(source, ResultsView):
        raise TypeError(
            f"cannot plot {type(source).__name__}; pass a Tuner, nbtune.load(...) or the path "
            "of an experiment directory"
        )
    return source


def load(
    path: str | os.PathLike,
    trust: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> ExperimentAnalysis:
    """Load an experiment directory (e.g. `"nbtune-runs/demo"`) for analysis.

    Args:
        path: the experiment's directory, or its URL in remote storage (e.g.
            `"s3://bucket/runs/demo"`), whose results are copied into a local cache folder
            first (`path` is then that folder).
        trust: unpickle the values that were stored pickled (arrays, objects a trial reported
            or a config held). Unpickling runs code, so by default they stay `Pickled` (shown
            with their type and repr; `value.load()` unpickles one): loading runs nothing.
        storage_options: passed to fsspec for a URL (credentials, endpoint).
    """
    if remote.is_url(path):
        path = remote.read_copy(str(path), storage_options, part="results")
    return ExperimentAnalysis(path, trust)
