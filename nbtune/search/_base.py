"""The searcher base: which configuration to try next."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nbtune.constraints import UNCONSTRAINED, Constraints
from nbtune.space import SearchSpace
from nbtune.trial import Trial


class Searcher:
    """Base of every searcher.

    The runner calls `setup` once before the run, then `suggest` whenever it has a free worker
    and no waiting trial, `on_result` after every result, and `on_complete` when a trial ends.
    A searcher says it has nothing more to give, ever, through `is_finished`; `suggest` returning
    None only means "nothing right now" (a model-based searcher waiting for results). How many
    it will give in all, where it knows, is `planned_trials`: the end of the dashboard's
    progress bar.

    Searchers are pickled with the experiment's state, so `Tuner.restore` carries on where they
    left off.
    """

    space: SearchSpace
    metric: str | None = None
    mode: str = "min"
    constraints: Constraints = UNCONSTRAINED
    """The run's outcome constraints (`Tuner(constraints=...)`), given before `setup`."""
    learns = False
    """Whether the searcher models the results to choose what it suggests next (model-based,
    as TPE), so that what it is told shapes the search: ASHA then judges the first arrivals
    at its crowded rungs too, rather than let a random trial run in full unjudged."""

    def setup(
        self, space: SearchSpace, metric: str | None, mode: str, num_samples: int, seed: int
    ) -> None:
        """Learn the search space, the objective, the budget and the seed (in a run of several
        metrics, `metric` and `mode` are lists, one mode per metric)."""
        self.space = space
        self.metric = metric
        self.mode = mode

    def use_constraints(self, constraints: Constraints) -> None:
        """Learn the run's outcome constraints, before `setup`: a model-based searcher is
        told each finished trial's violations of them, to steer towards feasible ones."""
        self.constraints = constraints

    def suggest(self, trial_id: int) -> dict[str, Any] | None:
        """The configuration for the new trial `trial_id`, or None if there is none right now."""
        raise NotImplementedError

    @property
    def is_finished(self) -> bool:
        """True once `suggest` will never return another configuration."""
        raise NotImplementedError

    @property
    def planned_trials(self) -> int | None:
        """How many trials this searcher suggests in all, as set up and extended so far; None
        if it cannot say (it suggests until something else ends the run)."""
        return None

    def extend(self, num_samples: int) -> None:
        """Allow `num_samples` more configurations than the budget given to `setup`."""
        raise NotImplementedError(f"{type(self).__name__} cannot extend its budget")

    def restore(self, trials: Sequence[Trial]) -> None:
        """Catch up with the trials of a run being resumed.

        Its saved state can be up to a second older than the trial journal; a searcher whose
        state follows from the trials it suggested (`origin == "searcher"`) updates it here.
        """

    def on_result(self, trial_id: int, result: Mapping[str, Any]) -> None:
        """`trial_id` reported `result`."""

    def on_complete(self, trial_id: int, result: Mapping[str, Any] | None, error: bool) -> None:
        """`trial_id` ended; `result` is its last result (None if it reported nothing)."""

    def on_pruned(self, trial_id: int) -> None:
        """`trial_id` was cut short (`Trial.cut_short`): the scheduler stopped it as worse than
        its peers, or the user, the time budget or fail_fast stopped it, so its last result is
        an early one. Its `on_complete` follows at once (Optuna tells such a trial as PRUNED).
        """

    def update_space(self, space: Any) -> None:
        """Take a new search space mid-run (`Tuner.update_space`): trials suggested from now on
        sample it. A searcher that cannot raises ValueError saying why, in one line."""
        raise ValueError(
            f"{type(self).__name__} cannot take a new search space mid-run; start a new Tuner "
            "(warm_start=... learns from this run)"
        )

    def evaluate_first(self, points: Sequence[Mapping[str, Any]]) -> None:
        """Suggest these configurations before any other (`Tuner(points_to_evaluate=...)`); they
        count toward the budget, and a point that leaves parameters out gets them drawn."""
        raise NotImplementedError(f"{type(self).__name__} cannot take points_to_evaluate")

    def on_trial_add(self, trial_id: int, config: Mapping[str, Any]) -> None:
        """A trial this searcher did not suggest joins the run (added by hand, forked, made by
        a scheduler); its results and its end follow through `on_result` and `on_complete`.
        A model-based searcher learns from it as from its own."""

    def learn_from(self, trials: Sequence[Trial]) -> None:
        """The trials of an earlier run (`Tuner(warm_start=...)`), told before the first
        suggestion: a model-based searcher learns from the finished ones; random search never
        suggests one of their configurations again."""


class WrappingSearcher(Searcher):
    """A searcher around another one (`searcher`) that passes on every call it does not
    change itself."""

    def __init__(self, searcher: Searcher) -> None:
        self.searcher = searcher

    def setup(
        self, space: SearchSpace, metric: str | None, mode: str, num_samples: int, seed: int
    ) -> None:
        super().setup(space, metric, mode, num_samples, seed)
        self.searcher.setup(space, metric, mode, num_samples, seed)

    def use_constraints(self, constraints: Constraints) -> None:
        super().use_constraints(constraints)
        self.searcher.use_constraints(constraints)

    def suggest(self, trial_id: int) -> dict[str, Any] | None:
        return self.searcher.suggest(trial_id)

    @property
    def is_finished(self) -> bool:
        return self.searcher.is_finished

    @property
    def planned_trials(self) -> int | None:
        return self.searcher.planned_trials

    @property
    def learns(self) -> bool:
        return self.searcher.learns

    def extend(self, num_samples: int) -> None:
        self.searcher.extend(num_samples)

    def restore(self, trials: Sequence[Trial]) -> None:
        self.searcher.restore(trials)

    def on_result(self, trial_id: int, result: Mapping[str, Any]) -> None:
        self.searcher.on_result(trial_id, result)

    def on_complete(self, trial_id: int, result: Mapping[str, Any] | None, error: bool) -> None:
        self.searcher.on_complete(trial_id, result, error)

    def on_pruned(self, trial_id: int) -> None:
        self.searcher.on_pruned(trial_id)

    def update_space(self, space: Any) -> None:
        self.searcher.update_space(space)
        self.space = space

    def evaluate_first(self, points: Sequence[Mapping[str, Any]]) -> None:
        self.searcher.evaluate_first(points)

    def on_trial_add(self, trial_id: int, config: Mapping[str, Any]) -> None:
        self.searcher.on_trial_add(trial_id, config)

    def learn_from(self, trials: Sequence[Trial]) -> None:
        self.searcher.learn_from(trials)

    @property
    def study(self) -> Any:
        """The inner searcher's Optuna study (`OptunaSearch.study`), for Optuna's own tools."""
        study = getattr(self.searcher, "study", None)
        if study is None:
            raise AttributeError(f"{type(self.searcher).__name__} has no study")
        return study
