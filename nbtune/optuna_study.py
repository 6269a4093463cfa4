"""Any run as an Optuna study, for Optuna's analysis: `optuna.visualization`, importances, ...

    trials, result rows, space  ->  one FrozenTrial per trial  ->  in-memory study.add_trials

Each nbtune trial becomes one Optuna trial, numbered in trial-id order:

    nbtune                                        Optuna
    TERMINATED, ran to its end (or met `stop=`)   COMPLETE, its last values (FAIL if one of
                                                  them is missing, NaN or infinite)
    TERMINATED, cut short (`Trial.cut_short`:     PRUNED; with one metric its value is its last
      scheduler, user, time budget, fail fast)      finite one, as Optuna's `tell` leaves it
    ERROR                                         FAIL
    RUNNING, PAUSED, PENDING that ran before      RUNNING
    PENDING that never started                    WAITING (as an enqueued trial)

Intermediate values are every finite value of the metric by `training_iteration` (one metric
only: Optuna keeps none for several). Directions come from `mode`. nbtune's own facts (trial_id,
status, training_iteration, stopped_by, origin, parent, ...) are user attributes.

Parameters and their distributions come from the space where it knows them: a `SearchSpace`'s
domains (log, step, int; a choice's categories as they are, or their repr where Optuna's
categorical cannot hold them), a define-by-run space's function run again against each trial's
values (`optuna.trial.FixedTrial`). A run read from disk has no space: each parameter's
distribution is inferred from the values its trials had (see `inferred_distribution`), and a
value the same in every trial is a constant, not a parameter. Where the space's distribution
does not hold a trial's value (a trial added by hand outside it), the inferred one is used.

Optuna is imported here only when a study is made, so `import nbtune` never pays for it.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nbtune import objectives
from nbtune.constraints import UNCONSTRAINED, Constraints
from nbtune.define_by_run import DefineByRunSpace
from nbtune.metrics import finite
from nbtune.search.optuna import _distribution, _import_optuna, constraint_arguments
from nbtune.space import Choice, Grid, SampleFrom, SearchSpace, flatten_config
from nbtune.trial import Trial, TrialStatus

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

USER_ATTRS = (
    "trial_id",
    "status",
    "training_iteration",
    "stopped_by",
    "origin",
    "parent",
    "attempts",
    "runtime_s",
    "paused_by",
    "error",
)
"""The facts of each nbtune trial kept as the Optuna trial's user attributes, by these names."""

_SCALARS = (type(None), bool, int, float, str)
"""What Optuna's `CategoricalDistribution` holds; other categories are given as their repr."""


def study_of(
    trials: Sequence[Trial],
    rows: Sequence[Mapping[str, Any]],
    metric: str | Sequence[str],
    mode: str | Sequence[str],
    space: Any = None,
    name: str | None = None,
    constraints: Constraints = UNCONSTRAINED,
) -> optuna.Study:
    """An in-memory Optuna study holding one frozen trial per nbtune trial (see the module).

    Args:
        trials: the run's trials.
        rows: its result rows (`nbtune.trial.RESULT_KEYS` and the reported metrics).
        metric, mode: the run's metric(s) and mode(s): the study's objectives and directions.
        space: the run's `SearchSpace` or `DefineByRunSpace`; None (a run read from disk) to
            infer the distributions from the values.
        name: the study's name.
        constraints: the run's constraints: each finished trial carries the violations of
            its last result (infinite for a key it did not report), so Optuna's plots mark
            infeasible trials and `study.best_trials` leaves them out.

    Raises:
        ImportError: Optuna is not installed, with the command that installs it.
    """
    optuna = _import_optuna("to_optuna_study")
    directions = [_DIRECTIONS[one] for one in objectives.modes(metric, mode)]
    with _quiet(optuna):
        study = optuna.create_study(directions=directions, study_name=name)
    study.add_trials(frozen_trials(trials, rows, metric, space, constraints))
    return study


_DIRECTIONS = {"min": "minimize", "max": "maximize"}


def frozen_trials(
    trials: Sequence[Trial],
    rows: Sequence[Mapping[str, Any]],
    metric: str | Sequence[str],
    space: Any = None,
    constraints: Constraints = UNCONSTRAINED,
) -> list[optuna.trial.FrozenTrial]:
    """The Optuna trial of each nbtune trial, in trial-id order (see `study_of`)."""
    optuna = _import_optuna("to_optuna_study")
    ordered = sorted(trials, key=lambda trial: trial.trial_id)
    rows_of: dict[int, list[Mapping[str, Any]]] = {trial.trial_id: [] for trial in ordered}
    for row in rows:
        rows_of.setdefault(row["trial_id"], []).append(row)
    params = _parameters(ordered, space)
    fallback = _latest_time(ordered, rows)
    frozen = []
    for trial, (values, distributions) in zip(ordered, params, strict=True):
        own = sorted(rows_of[trial.trial_id], key=lambda row: row["training_iteration"])
        state, outcome = _outcome(trial, own, metric)
        violations = constraints.violations(trial.last_result) if state.is_finished() else {}
        made = optuna.trial.create_trial(
            state=state,
            values=outcome,
            params=values,
            distributions=distributions,
            user_attrs=user_attrs(trial),
            intermediate_values=intermediate_values(own, metric),
            **constraint_arguments(violations),
        )
        start, end = _times(trial, own, fallback)
        made.datetime_start = None if state.name == "WAITING" else _when(start)
        made.datetime_complete = _when(end) if state.is_finished() else None
        frozen.append(made)
    return frozen


def _outcome(
    trial: Trial, rows: Sequence[Mapping[str, Any]], metric: str | Sequence[str]
) -> tuple[Any, list[float] | None]:
    """The Optuna state of a trial and its values (None where it has none)."""
    from optuna.trial import TrialState

    if trial.status is TrialStatus.ERROR:
        return TrialState.FAIL, None
    if not trial.status.is_finished:
        started = trial.started_at is not None or rows or trial.attempts > 1
        return (TrialState.RUNNING if started else TrialState.WAITING), None
    if trial.cut_short:
        steps = intermediate_values(rows, metric)
        last = steps[max(steps)] if steps else None
        return TrialState.PRUNED, None if last is None else [last]
    values = objectives.values(trial.last_result, metric)
    return (TrialState.FAIL, None) if values is None else (TrialState.COMPLETE, list(values))


def intermediate_values(
    rows: Sequence[Mapping[str, Any]], metric: str | Sequence[str]
) -> dict[int, float]:
    """Each finite value of the run's one metric, by `training_iteration`; none for several
    metrics (Optuna keeps intermediate values of single objectives only)."""
    if objectives.is_several(metric):
        return {}
    found = ((row["training_iteration"], finite(row.get(metric))) for row in rows)
    return {step: value for step, value in found if value is not None}


def user_attrs(trial: Trial) -> dict[str, Any]:
    """nbtune's own facts about the trial (`USER_ATTRS`), as plain values."""
    return {
        "trial_id": trial.trial_id,
        "status": trial.status.value,
        "training_iteration": trial.iteration,
        "stopped_by": trial.stopped_by,
        "origin": trial.origin,
        "parent": trial.parent,
        "attempts": trial.attempts,
        "runtime_s": trial.runtime_s,
        "paused_by": trial.paused_by,
        "error": trial.error,
    }


IMPORTANCE_METHODS = ("ped-anova", "fanova")
"""The importance evaluators of Optuna that `param_importances` runs, by name."""


def param_importances(
    study: optuna.Study, method: str, seed: int | None = 0
) -> tuple[dict[str, float], int]:
    """Each parameter's share of the importance by one of Optuna's evaluators, greatest first,
    and how many trials it learnt from (the complete ones: Optuna reads no others).

    "ped-anova" is `PedAnovaImportanceEvaluator` (Optuna 5's default: how differently the
    parameter is spread among the best trials than among all), "fanova" is
    `FanovaImportanceEvaluator` (the share of the variance of a random forest's fit each
    parameter explains, seeded with `seed`). A study of several objectives is refused by
    Optuna; none is asked for with fewer than two complete trials.

    Raises:
        ValueError: `method` is not one of `IMPORTANCE_METHODS`.
    """
    optuna = _import_optuna(f"method={method!r}")
    if method not in IMPORTANCE_METHODS:
        raise ValueError(f"method={method!r}: use {', '.join(map(repr, IMPORTANCE_METHODS))}")
    states = (optuna.trial.TrialState.COMPLETE,)
    complete = len(study.get_trials(deepcopy=False, states=states))
    if complete < 2:
        return {}, complete
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if method == "fanova":
            evaluator = optuna.importance.FanovaImportanceEvaluator(seed=seed)
        else:
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
        found = optuna.importance.get_param_importances(study, evaluator=evaluator)
    return dict(sorted(found.items(), key=lambda item: -item[1])), complete


# ----- times ------------------------------------------------------------------------------------


def _times(trial: Trial, rows: Sequence[Mapping[str, Any]], fallback: float) -> tuple[float, float]:
    """When the trial first started and when it ended (epoch seconds).

    Its start is its first result's time less the running time it had then (else its last
    start); its end is its last result's time plus the running time it had after it (else its
    start plus its running time). A trial that never ran starts and ends at `fallback`.
    """
    if rows:
        first, last = rows[0], rows[-1]
        start = first["timestamp"] - (first.get("time_total_s") or 0.0)
        if trial.started_at is not None:
            start = min(start, trial.started_at)
        end = last["timestamp"] + max(0.0, trial.runtime_s - (last.get("time_total_s") or 0.0))
        return start, end
    if trial.started_at is not None:
        return trial.started_at, trial.started_at + trial.runtime_s
    return fallback, fallback


def _latest_time(trials: Sequence[Trial], rows: Sequence[Mapping[str, Any]]) -> float:
    """The latest moment the run records: what a trial that never ran is dated with."""
    known = [row["timestamp"] for row in rows]
    known += [trial.started_at for trial in trials if trial.started_at is not None]
    return max(known, default=None) or time.time()


def _when(seconds: float) -> datetime.datetime:
    """Epoch seconds as the naive local datetime Optuna records."""
    return datetime.datetime.fromtimestamp(seconds)


# ----- parameters -------------------------------------------------------------------------------


Params = tuple[dict[str, Any], dict[str, "BaseDistribution"]]
"""One trial's Optuna parameters and their distributions."""


def _parameters(trials: Sequence[Trial], space: Any) -> list[Params]:
    """Each trial's Optuna parameters and distributions, from the space where it knows them
    (see the module)."""
    configs = [flatten_config(trial.config) for trial in trials]
    if isinstance(space, DefineByRunSpace):
        return _suggested(space, configs)
    if isinstance(space, SearchSpace):
        sampled = [n for n, d in space.domains().items() if not isinstance(d, SampleFrom)]
        known = _space_distributions(space)
    else:
        sampled = list(dict.fromkeys(name for config in configs for name in config))
        known = {}
    chosen = {}
    for name in sampled:
        present = [config[name] for config in configs if name in config]
        distribution = known.get(name)
        if distribution is None or not all(_holds(distribution, v) for v in present):
            distribution = inferred_distribution(present, constant_too=space is not None)
        if distribution is not None:
            chosen[name] = distribution
    return [_trial_params(config, chosen) for config in configs]


def _trial_params(config: Mapping[str, Any], chosen: Mapping[str, Any]) -> Params:
    params, distributions = {}, {}
    for name, distribution in chosen.items():
        if name in config:
            params[name] = _external(distribution, config[name])
            distributions[name] = distribution
    return params, distributions


def _suggested(space: DefineByRunSpace, configs: Sequence[Mapping[str, Any]]) -> list[Params]:
    """A define-by-run space's function run against each configuration: what it suggests,
    with the distributions it suggests them from. A configuration it cannot run against (one
    added by hand that lacks a value it asks for) keeps its values, with inferred
    distributions."""
    optuna = _import_optuna("to_optuna_study")
    found: list[Params | None] = []
    for config in configs:
        fixed = optuna.trial.FixedTrial(dict(config))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                space.run(fixed, lambda fixed=fixed: fixed.params)
        except ValueError:
            found.append(None)
            continue
        found.append((dict(fixed.params), dict(fixed.distributions)))
    if all(one is not None for one in found):
        return found  # type: ignore[return-value]
    inferred = _parameters(
        [Trial(index, config) for index, config in enumerate(configs)], space=None
    )
    return [one if one is not None else guess for one, guess in zip(found, inferred, strict=True)]


def _space_distributions(space: SearchSpace) -> dict[str, BaseDistribution]:
    """The distribution of each domain Optuna has one for: as `OptunaSearch` models it, but a
    choice (or grid) over its categories themselves rather than their indices."""
    from optuna.distributions import CategoricalDistribution

    found = {}
    for name, domain in space.domains().items():
        if isinstance(domain, SampleFrom):
            continue
        if isinstance(domain, Choice | Grid):
            values = domain.categories if isinstance(domain, Choice) else domain.values
            found[name] = CategoricalDistribution(_categories(values))
            continue
        with contextlib.suppress(ValueError):
            found[name] = _distribution(name, domain)
    return found


def inferred_distribution(values: Sequence[Any], constant_too: bool = False) -> Any:
    """The Optuna distribution of a parameter known only by the values its trials had.

    Whole numbers (not bools) make an `IntDistribution`, numbers a `FloatDistribution`, from
    the least to the greatest; either is on a log scale when its positive values spread over
    two decades or more and sit more evenly on a log scale than on a linear one (how the draws
    of a `loguniform` look). Anything else makes a categorical over the values seen, in the
    order seen (as their repr where Optuna's categorical cannot hold them). None for a value
    the same in every trial (a constant), unless `constant_too`, or for no value at all.
    """
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    values = [value for value in values if not _is_nan(value)]
    if not values:
        return None
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if numbers and all(math.isfinite(v) for v in values):
        low, high = min(values), max(values)
        if low == high and not constant_too:
            return None
        log = low > 0 and _looks_logarithmic(values)
        if all(isinstance(value, int) for value in values):
            return IntDistribution(int(low), int(high), log=log and low >= 1)
        return FloatDistribution(float(low), float(high), log=log)
    seen: list[Any] = []
    for value in values:
        if _index(seen, value) is None:
            seen.append(value)
    categories = _categories(seen)
    if len(categories) < 2 and not constant_too:
        return None
    return CategoricalDistribution(categories)


def _looks_logarithmic(values: Sequence[float]) -> bool:
    """Whether positive `values` spanning two decades or more sit more evenly on a log scale
    than on a linear one (their median nearer the middle of the log range): how a
    `loguniform`'s draws look, and a `uniform`'s do not."""
    ordered = sorted(values)
    low, high, median = ordered[0], ordered[-1], ordered[len(ordered) // 2]
    if low <= 0 or high < 100 * low:
        return False
    linear = (median - low) / (high - low)
    logarithmic = math.log(median / low) / math.log(high / low)
    return abs(logarithmic - 0.5) < abs(linear - 0.5)


def _categories(values: Sequence[Any]) -> list[Any]:
    """Categories Optuna can hold: the values themselves if each is a scalar and no two are
    equal (1 and True are, to Python), else every one as its repr."""
    plain = [_category(value) for value in values]
    if all(isinstance(v, _SCALARS) for v in values) and _distinct(plain):
        return plain
    return [repr(value) for value in values]


def _distinct(values: Sequence[Any]) -> bool:
    """Whether no two values are equal to Python (which `CategoricalDistribution` goes by)."""
    return all(values.index(value) == index for index, value in enumerate(values))


def _category(value: Any) -> Any:
    return value if isinstance(value, _SCALARS) else repr(value)


def _external(distribution: Any, value: Any) -> Any:
    """A config value as the distribution's parameter: a category not held as itself is held
    as its repr."""
    from optuna.distributions import CategoricalDistribution

    if not isinstance(distribution, CategoricalDistribution):
        return value
    return value if _index(distribution.choices, value) is not None else repr(value)


def _holds(distribution: Any, value: Any) -> bool:
    """Whether `value` is one of the distribution's (for a categorical, as itself or its
    repr)."""
    from optuna.distributions import CategoricalDistribution

    if isinstance(distribution, CategoricalDistribution):
        choices = distribution.choices
        return _index(choices, value) is not None or _index(choices, repr(value)) is not None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return False
    try:
        return bool(distribution._contains(distribution.to_internal_repr(value)))
    except (TypeError, ValueError):
        return False


def _index(choices: Sequence[Any], value: Any) -> int | None:
    """Where `value` is among `choices`, of the same type (True is not 1 here)."""
    for index, choice in enumerate(choices):
        if type(choice) is type(value) and choice == value:
            return index
    return None


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


@contextlib.contextmanager
def _quiet(optuna: Any) -> Iterator[None]:
    """Optuna's own log line about each new study left out: a run's study is not news."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)
