"""Model-based search with Optuna's samplers (TPE by default), through its ask-and-tell API.

    suggest  -> study.ask(distributions) -> params -> SearchSpace.complete -> config
    on_result  -> optuna_trial.report(metric, training_iteration)
    on_complete -> study.tell(optuna_trial, last metric)   (FAIL if errored or not finite)
                   with the last result's constraint violations, where the run has constraints

With several metrics the study has one direction per metric, `tell` gets the tuple of the
last values, and nothing is reported along the way (Optuna prunes only single objectives).

Our domains become Optuna distributions; `sample_from` values are computed from the sampled
ones, as `SearchSpace.config` does. Optuna is an optional extra, imported only when an
`OptunaSearch` is made, so `import nbtune` never pays for it.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nbtune import objectives
from nbtune.define_by_run import DefineByRunSpace
from nbtune.metrics import finite
from nbtune.search._base import Searcher
from nbtune.space import (
    Choice,
    Domain,
    Grid,
    IntRange,
    LogUniform,
    Normal,
    RandInt,
    SampleFrom,
    SearchSpace,
    Uniform,
)
from nbtune.trial import Trial, TrialStatus

if TYPE_CHECKING:
    import optuna

_DIRECTIONS = {"min": "minimize", "max": "maximize"}

_TRIAL_ID = "nbtune_trial_id"
"""The user attribute of each Optuna trial that holds the nbtune trial id it belongs to."""


class OptunaSearch(Searcher):
    """Suggests configurations with an Optuna sampler, learning from every finished trial.

    Each trial's value is the metric of its last result, as Ray Tune's OptunaSearch tells
    it: what the configuration reached where it ended (its best value along the way would
    flatter noisy curves). Intermediate results are reported to Optuna by
    `training_iteration`. A trial cut short (stopped by the scheduler, the user, the time
    budget or fail_fast: `Trial.cut_short`) is told as PRUNED, as Optuna's own pruners leave
    one: TPE then weighs it by how far it got and its value there, below every trial that ran
    to its end. A trial that errors, reports nothing, or ends on a NaN or infinite value is
    told as failed, so the sampler learns nothing from it.

    With several metrics (`metric=["loss", "latency_ms"]`) the study is multi-objective: its
    sampler (TPE by default, as Optuna's; or `NSGAIISampler()`) learns each trial's last values
    together, and `study.best_trials` is the same front as the Tuner's `best_trials`.

    With `Tuner(constraints=...)`, each finished trial's violations of them (by its last
    result) go to the study before its value, as Optuna's constrained optimisation takes them
    (`trial.set_constraint` on Optuna 5; on Optuna 4 the sampler's `constraints_func`, which
    OptunaSearch gives the samplers it makes), so TPE, NSGA-II and GPSampler steer towards the
    feasible region; a trial that lacks a constrained key is told as failed.

    Grids are refused (a sampler cannot promise to visit every value; use `choice`), and
    `choice` categories are given to Optuna as their indices, so any values work (tuples,
    None, objects).

    Args:
        sampler: an Optuna sampler (`CmaEsSampler()`, `GPSampler()`, `QMCSampler()`, ...), or
            a sampler's class, made when the run starts with `sampler_options` and seeded
            with the Tuner's seed (unless the options give one); by default `TPESampler`,
            with the constant liar on Optuna 4 as on 5 (`constant_liar=True`: a trial still
            running counts as a poor one, so parallel trials do not crowd one point).
        sampler_options: the options of the sampler's class
            (`OptunaSearch(n_startup_trials=5, multivariate=True)`,
            `OptunaSearch(GPSampler, n_startup_trials=8)`).

    Raises:
        ImportError: If Optuna is not installed, with the command that installs it.
        TypeError: options the sampler's class does not take, or options with a sampler
            already made.
    """

    learns = True

    def __init__(
        self,
        sampler: optuna.samplers.BaseSampler | type[optuna.samplers.BaseSampler] | None = None,
        **sampler_options: Any,
    ) -> None:
        optuna = _import_optuna()
        base = optuna.samplers.BaseSampler
        is_class = isinstance(sampler, type)
        is_sampler = isinstance(sampler, base) or (is_class and issubclass(sampler, base))
        if sampler is not None and not is_sampler:
            raise TypeError(
                f"OptunaSearch(sampler={sampler!r}): pass an Optuna sampler object, e.g. "
                "optuna.samplers.TPESampler(seed=0), or none for TPE seeded with the Tuner's "
                "seed"
            )
        if sampler_options and not (sampler is None or is_class):
            raise TypeError(
                f"OptunaSearch({type(sampler).__name__}(...), {', '.join(sampler_options)}=...): "
                f"give options to the class, OptunaSearch({type(sampler).__name__}, ...), or "
                "to the sampler you make"
            )
        if sampler is None or is_class:
            _check_options(sampler or optuna.samplers.TPESampler, sampler_options)
        self.sampler = sampler
        self.sampler_options = sampler_options
        self._study: optuna.Study | None = None
        self._distributions: dict[str, optuna.distributions.BaseDistribution] = {}
        self._running: dict[int, optuna.Trial] = {}
        self._pruned: set[int] = set()
        self._points: list[dict[str, Any]] = []
        self._suggested = 0
        self._total = 0

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A searcher saved before nbtune knew which trials were pruned has none, and one
        saved before it held back its points to evaluate has queued them in its study."""
        state.setdefault("_pruned", set())
        state.setdefault("_points", [])
        state.setdefault("sampler_options", {})
        self.__dict__.update(state)

    def setup(
        self, space: SearchSpace, metric: str | None, mode: str, num_samples: int, seed: int
    ) -> None:
        if metric is None:
            raise ValueError("OptunaSearch models a metric; pass metric=... to the Tuner")
        super().setup(space, metric, mode, num_samples, seed)
        optuna = _import_optuna()
        self._distributions = distributions(space)
        sampler = self._sampler(optuna, seed)
        directions = [_DIRECTIONS[one] for one in objectives.modes(metric, mode)]
        self._study = optuna.create_study(sampler=sampler, directions=directions)
        self._total = num_samples

    def _sampler(self, optuna: Any, seed: int) -> optuna.samplers.BaseSampler:
        """The sampler given, or one made of the class given (TPE by default) with the
        options, the Tuner's seed, and on TPE the constant liar where Optuna's default lacks
        it (Optuna 4, which calls it experimental: nbtune chose it, so that warning is left
        out)."""
        if self.sampler is not None and not isinstance(self.sampler, type):
            deaf = getattr(self.sampler, "_constraints_func", False) is None
            if self.constraints and not _constraints_by_name() and deaf:
                warnings.warn(_DEAF_SAMPLER.format(type(self.sampler).__name__), stacklevel=2)
            return self.sampler
        kind = self.sampler or optuna.samplers.TPESampler
        parameters = inspect.signature(kind).parameters
        options = dict(self.sampler_options)
        if "seed" in parameters:
            options.setdefault("seed", seed)
        liar = parameters.get("constant_liar")
        if issubclass(kind, optuna.samplers.TPESampler) and liar and liar.default is False:
            options.setdefault("constant_liar", True)
        if self.constraints and not _constraints_by_name() and "constraints_func" in parameters:
            options.setdefault("constraints_func", told_constraints)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return kind(**options)

    @property
    def study(self) -> optuna.Study:
        """The Optuna study, for Optuna's own analysis and plots (`optuna.visualization`)."""
        if self._study is None:
            raise RuntimeError("OptunaSearch has no study before the Tuner starts")
        return self._study

    def suggest(self, trial_id: int) -> dict[str, Any] | None:
        if self.is_finished:
            return None
        if self._points:
            self.study.enqueue_trial(self._points.pop(0))
        trial = self.study.ask(self._distributions)
        trial.set_user_attr(_TRIAL_ID, trial_id)
        self._running[trial_id] = trial
        self._suggested += 1
        return self._config(trial)

    def _config(self, trial: optuna.Trial) -> dict[str, Any]:
        """The configuration of an Optuna trial: a define-by-run space runs against it, so the
        sampler models its conditionals; otherwise its parameters are our domains' values."""
        if isinstance(self.space, DefineByRunSpace):
            return self.space.run(trial, lambda: trial.params)
        return self.space.complete(self._values(trial.params))

    @property
    def is_finished(self) -> bool:
        return self._suggested >= self._total

    @property
    def planned_trials(self) -> int:
        """`num_samples`, plus what `extend` added."""
        return self._total

    def extend(self, num_samples: int) -> None:
        self._total += num_samples

    def on_result(self, trial_id: int, result: Mapping[str, Any]) -> None:
        trial = self._running.get(trial_id)
        if objectives.is_several(self.metric):
            return
        value = finite(result.get(self.metric))
        if trial is not None and value is not None:
            trial.report(value, result["training_iteration"])

    def on_pruned(self, trial_id: int) -> None:
        if not objectives.is_several(self.metric):
            self._pruned.add(trial_id)

    def on_complete(self, trial_id: int, result: Mapping[str, Any] | None, error: bool) -> None:
        """Tell the study how the trial ended: its last values, or PRUNED when it was cut
        short (`on_pruned`), or FAIL."""
        from optuna.trial import TrialState

        trial = self._running.pop(trial_id, None)
        pruned = trial_id in self._pruned
        self._pruned.discard(trial_id)
        if trial is None:
            return
        values = None if error or result is None else objectives.values(result, self.metric)
        violations = self.constraints.violations(result or {})
        if values is None or math.inf in violations.values():
            self.study.tell(trial, state=TrialState.FAIL)
            return
        tell_constraints(trial, violations)
        if pruned:
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, list(values))

    def restore(self, trials: Sequence[Trial]) -> None:
        """Catch up with the journal, which may be up to a second newer than this state.

        Trials suggested after the state was saved are given back to Optuna with their
        configuration; every trial that has ended since is told. Trials still unfinished stay
        open in the study, to be told when the resumed run ends them.
        """
        ours = [trial for trial in trials if trial.origin == "searcher"]
        self._suggested = max(self._suggested, len(ours))
        told = {
            frozen.user_attrs.get(_TRIAL_ID)
            for frozen in self.study.get_trials(deepcopy=False)
            if frozen.state.is_finished()
        }
        for trial in ours:
            if trial.trial_id in told:
                continue
            if trial.trial_id not in self._running:
                self._readmit(trial)
            if trial.status.is_finished:
                error = trial.status is TrialStatus.ERROR
                if trial.cut_short:
                    self.on_pruned(trial.trial_id)
                self.on_complete(trial.trial_id, trial.last_result or None, error)

    def _readmit(self, trial: Trial) -> None:
        """Open an Optuna trial with the parameters of a trial the saved state did not know."""
        self.on_trial_add(trial.trial_id, trial.config)

    def on_trial_add(self, trial_id: int, config: Mapping[str, Any]) -> None:
        """Open an Optuna trial with the parameters of a trial nbtune runs without having asked
        Optuna (added by hand, forked): told like the others, so the study has every trial.

        A configuration that cannot be mapped back (a category not in the space, a value
        outside a domain, a category changed by its trip through the JSON journal) is left out
        of the study: the trial runs, unmodelled.
        """
        params = self._params(config)
        if params is None:
            return
        self.study.enqueue_trial(params, user_attrs={_TRIAL_ID: trial_id})
        try:
            admitted = self.study.ask(self._distributions)
            if isinstance(self.space, DefineByRunSpace):
                self.space.run(admitted, lambda: admitted.params)
        except ValueError:
            return
        self._running[trial_id] = admitted

    def update_space(self, space: SearchSpace | DefineByRunSpace) -> None:
        """Suggest from `space` from now on. The study keeps every earlier trial, and TPE
        learns from those whose values the new space holds: a range may widen, narrow or move,
        parameters may come and go. A parameter may not change its kind (a float range to a
        choice, linear to log, other categories): Optuna models one kind per parameter in a
        study."""
        optuna = _import_optuna()
        new = {} if isinstance(space, DefineByRunSpace) else distributions(space)
        known = dict(self._distributions)
        for frozen in self.study.get_trials(deepcopy=False):
            known.update(frozen.distributions)
        for name, distribution in new.items():
            if name not in known:
                continue
            try:
                optuna.distributions.check_distribution_compatibility(known[name], distribution)
            except ValueError:
                raise ValueError(
                    f"OptunaSearch cannot change what kind of parameter {name!r} is "
                    f"({known[name]!r} to {distribution!r}); keep its kind and change its "
                    "range, or start a new Tuner"
                ) from None
        self.space = space
        self._distributions = new

    def evaluate_first(self, points: Sequence[Mapping[str, Any]]) -> None:
        """Give these points first, with their missing parameters sampled; TPE learns from
        them as its own. Each goes to the study (`enqueue_trial`) only as it is asked for, so
        that a trial added by hand meanwhile, queued and asked for at once, gets its own
        parameters rather than the next point's."""
        for point in points:
            params = self._params(point, partial=True)
            if params is None:
                raise ValueError(
                    f"points_to_evaluate: {point!r} has a value outside the search space"
                )
            self._points.append(params)

    def learn_from(self, trials: Sequence[Trial]) -> None:
        """Add the finished trials of an earlier run to the study (`study.add_trial`), with
        their last values, those cut short as PRUNED at their last iteration; those whose
        values or parameters do not fit are left out, and cut-short ones of several metrics
        (Optuna keeps no intermediate values for them)."""
        optuna = _import_optuna()
        for trial in trials:
            values = objectives.values(trial.last_result or {}, self.metric)
            if trial.status is not TrialStatus.TERMINATED or values is None:
                continue
            outcome = self._outcome(trial, values)
            found = self._evaluated(trial.config)
            violations = self.constraints.violations(trial.last_result)
            if outcome is None or found is None or math.inf in violations.values():
                continue
            params, distributions = found
            outcome.update(constraint_arguments(violations))
            self.study.add_trial(
                optuna.trial.create_trial(params=params, distributions=distributions, **outcome)
            )

    def _outcome(self, trial: Trial, values: Sequence[float]) -> dict[str, Any] | None:
        """How a finished trial of another run is told: `create_trial`'s arguments."""
        if not trial.cut_short:
            return {"values": list(values)}
        if objectives.is_several(self.metric):
            return None
        from optuna.trial import TrialState

        return {"state": TrialState.PRUNED, "intermediate_values": {trial.iteration: values[0]}}

    def _evaluated(self, config: Mapping[str, Any]) -> tuple[dict, dict] | None:
        """The Optuna parameters and distributions of a configuration run elsewhere."""
        if isinstance(self.space, DefineByRunSpace):
            optuna = _import_optuna()
            fixed = optuna.trial.FixedTrial(SearchSpace.flatten(config))
            try:
                self.space.run(fixed, lambda: fixed.params)
            except ValueError:
                return None
            return fixed.params, fixed.distributions
        params = self._params(config)
        if params is None:
            return None
        distributions = self._distributions
        if any(
            not distributions[name]._contains(distributions[name].to_internal_repr(value))
            for name, value in params.items()
        ):
            return None
        return params, distributions

    def _values(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Optuna's parameters as values of our domains: category indices become categories."""
        values = dict(params)
        for name, domain in self.space.domains().items():
            if isinstance(domain, Choice):
                values[name] = domain.categories[params[name]]
        return values

    def _params(self, config: Mapping[str, Any], partial: bool = False) -> dict[str, Any] | None:
        """The Optuna parameters that make `config`, or None if one value has none; a
        `partial` config may leave parameters out (Optuna samples them)."""
        flat = SearchSpace.flatten(config)
        if isinstance(self.space, DefineByRunSpace):
            return flat
        domains = self.space.domains()
        params = {}
        for name in self._distributions:
            if partial and name not in flat:
                continue
            domain, value = domains[name], flat.get(name)
            if isinstance(domain, Choice):
                if value not in domain.categories:
                    return None
                value = domain.categories.index(value)
            params[name] = value
        return params


def distributions(space: SearchSpace) -> dict[str, optuna.distributions.BaseDistribution]:
    """The Optuna distribution of each sampled parameter, by "/"-joined name.

    `sample_from` parameters have none: they are computed from the others.

    Raises:
        ValueError: For a `grid` parameter, saying to use `choice`.
    """
    return {
        name: _distribution(name, domain)
        for name, domain in space.domains().items()
        if not isinstance(domain, SampleFrom)
    }


def _distribution(name: str, domain: Domain) -> optuna.distributions.BaseDistribution:
    """The Optuna distribution of one domain; ours exclude `high`, Optuna's include it."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(domain, Uniform) and domain.q is not None:
        return FloatDistribution(domain.low, domain.high, step=domain.q)
    if isinstance(domain, Uniform | LogUniform) and domain.q is None:
        high = math.nextafter(domain.high, domain.low)
        return FloatDistribution(domain.low, high, log=isinstance(domain, LogUniform))
    if isinstance(domain, RandInt):
        return IntDistribution(domain.low, domain.high - 1)
    if isinstance(domain, IntRange) and not (domain.log and domain.step > 1):
        return IntDistribution(domain.low, domain.high, step=domain.step, log=domain.log)
    if isinstance(domain, LogUniform | IntRange | Normal):
        raise ValueError(
            f"OptunaSearch cannot model {name!r}: {domain!r} ({_UNMODELLED[type(domain)]}); "
            "use RandomSearch, or a domain Optuna has"
        )
    if isinstance(domain, Choice):
        return CategoricalDistribution(list(range(len(domain.categories))))
    if isinstance(domain, Grid):
        raise ValueError(
            f"OptunaSearch samples, it cannot walk every value of {name!r}: {domain!r}; "
            "use choice(...) instead, or RandomSearch for a grid"
        )
    raise TypeError(f"OptunaSearch does not know the domain {domain!r} of {name!r}")


_UNMODELLED = {
    LogUniform: "Optuna's floats take a step or a log scale, not both: use loguniform or quniform",
    IntRange: "Optuna's log-scale ints take no step: use lograndint or qrandint",
    Normal: "Optuna has no normal distribution: use uniform over the likely range",
}


def _check_options(kind: Any, options: dict[str, Any]) -> None:
    """Refuse, in one line, options the sampler's class does not take."""
    parameters = inspect.signature(kind).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    unknown = [name for name in options if name not in parameters and not takes_any]
    if unknown:
        known = ", ".join(name for name in parameters if name != "self")
        raise TypeError(f"{kind.__name__} takes no option {unknown[0]!r}; it takes {known}")


@functools.cache
def _constraints_by_name() -> bool:
    """Whether this Optuna takes constraint values by name (`Trial.set_constraint`, Optuna 5)
    rather than from a sampler's `constraints_func` (Optuna 4)."""
    try:
        from optuna.trial import Trial as OptunaTrial
    except ImportError:
        return False
    return hasattr(OptunaTrial, "set_constraint")


_CONSTRAINTS_ATTR = "nbtune_constraints"
"""On Optuna 4, the user attribute that holds a trial's violations for `told_constraints`."""

_DEAF_SAMPLER = (
    "OptunaSearch({0}(...)): on Optuna 4 a sampler made without constraints_func does not "
    "steer by the constraints; pass its class, OptunaSearch({0}, ...), or make it with "
    "constraints_func=nbtune.search.optuna.told_constraints"
)


def tell_constraints(trial: optuna.Trial, violations: Mapping[str, float]) -> None:
    """Give a live Optuna trial its constraint violations (zero or less is feasible), before
    it is told its value: by name on Optuna 5, for `told_constraints` on Optuna 4."""
    if not violations:
        return
    if _constraints_by_name():
        for key, amount in violations.items():
            trial.set_constraint(key, amount)
    else:
        trial.set_user_attr(_CONSTRAINTS_ATTR, list(violations.values()))


def told_constraints(trial: optuna.trial.FrozenTrial) -> list[float]:
    """An Optuna 4 sampler's `constraints_func`: the violations `tell_constraints` gave."""
    return trial.user_attrs.get(_CONSTRAINTS_ATTR, [])


def constraint_arguments(violations: Mapping[str, float]) -> dict[str, Any]:
    """The arguments of `optuna.trial.create_trial` that give a finished trial its constraint
    violations, as this Optuna keeps them (Optuna's plots then mark infeasible trials)."""
    if not violations:
        return {}
    if _constraints_by_name():
        return {"constraints": dict(violations)}
    return {"system_attrs": {"constraints": tuple(violations.values())}}


def _import_optuna(needed_by: str = "OptunaSearch"):
    """The optuna module, or a one-line ImportError that says what needs it and how to install
    it (`nbtune.optuna_study` imports it through here too)."""
    try:
        import optuna
    except ImportError:
        raise ImportError(f"{needed_by} needs Optuna: pip install 'nbtune[optuna]'") from None
    return optuna
