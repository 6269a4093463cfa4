"""Population based training: weak trials take over the checkpoints of strong ones, mutated.

Jaderberg et al., "Population Based Training of Neural Networks" (2017). Every
`perturbation_interval`, a trial in the bottom quantile of the population stops, and a new
trial forks from a trial of the top quantile (its latest checkpoint, with a mutated copy of
its config), exactly as `Tuner.fork` makes one. The fork takes the stopped trial's place, so the
population keeps its size, and its `parent` column in `dataframe()` traces the lineage.

A population larger than `max_concurrent` shares the workers, as Ray Tune's PBT does: every
member is queued from the start, a trial that reaches a perturbation point ahead of a waiting
member pauses (by checkpoint) and goes back to the queue, and the member that is furthest
behind runs next. So the whole population is compared, not only the trials that happen to run
at the same time.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nbtune.protocol import Decision
from nbtune.schedulers._base import Exploit, Resume, Scheduler, check_positive
from nbtune.space import Choice, Domain, LogUniform, RandInt, Uniform
from nbtune.trial import Trial

if TYPE_CHECKING:
    import numpy as np

Mutation = Domain | Sequence[Any] | Callable[[], Any] | Mapping[str, Any]


class PBT(Scheduler):
    """Replaces bottom trials by mutated forks of top ones, every `perturbation_interval`.

    Args:
        perturbation_interval: how much `time_attr` a trial runs between two chances to be
            replaced (and, for a fork, before its first).
        hyperparam_mutations: which config keys change and how: an nbtune domain (`uniform`,
            `loguniform`, `randint`, `choice`), a list of values, or a function of no
            arguments that draws one; a dict for nested keys.
        quantile_fraction: the share of the population in the top and in the bottom quantile.
        resample_probability: the chance that a key is drawn afresh rather than perturbed:
            numbers are multiplied by one of `perturbation_factors`, list values move to a
            neighbour.
        perturbation_factors: the factors a number is multiplied by.
        time_attr: the result key that measures progress.
        metric: compare trials by this reported value rather than the Tuner's metric (which
            a run of several metrics needs: `metric="loss"`).
        mode: "min" or "max" for `metric` (default: the Tuner's mode of it, if it tunes it).
        seed: for the draws (default: the Tuner's seed).
    """

    needs_metric = True
    shares_time = True

    def __init__(
        self,
        perturbation_interval: float,
        hyperparam_mutations: Mapping[str, Mutation],
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        perturbation_factors: tuple[float, float] = (1.2, 0.8),
        time_attr: str = "training_iteration",
        seed: int | None = None,
        *,
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        check_positive("PBT", "perturbation_interval", perturbation_interval)
        if not isinstance(hyperparam_mutations, Mapping) or not hyperparam_mutations:
            raise ValueError(
                "PBT(hyperparam_mutations=...): pass a dict from config keys to domains or "
                'lists, e.g. {"lr": nbtune.loguniform(1e-4, 1e-1)}'
            )
        _check_mutations(hyperparam_mutations)
        if not 0 < quantile_fraction <= 0.5:
            raise ValueError(
                f"PBT(quantile_fraction={quantile_fraction!r}): pass a number in (0, 0.5]"
            )
        if not 0 <= resample_probability <= 1:
            raise ValueError(
                f"PBT(resample_probability={resample_probability!r}): pass a number in [0, 1]"
            )
        self.perturbation_interval = perturbation_interval
        self.hyperparam_mutations = dict(hyperparam_mutations)
        self.quantile_fraction = quantile_fraction
        self.resample_probability = resample_probability
        self.perturbation_factors = tuple(perturbation_factors)
        self.time_attr = time_attr
        self.own_metric(metric, mode)
        self.seed = seed
        self._rng = _generator(seed)
        self._members: dict[int, _Member] = {}

    def setup(self, metric: str | None, mode: str, seed: int = 0) -> None:
        super().setup(metric, mode, seed)
        if self.seed is None:
            self._rng = _generator(seed)

    def on_trial_add(self, trial: Trial) -> None:
        self._members[trial.trial_id] = _Member(trial.config, last_perturbed=trial.iteration)

    def on_result(self, trial: Trial, result: Mapping[str, Any]) -> Decision:
        member = self._members.setdefault(trial.trial_id, _Member(trial.config, 0))
        progress = self.progress(result)
        score = self.score(result)
        member.score = -math.inf if score is None else score
        member.can_donate = trial.has_checkpoint
        member.progress, member.waiting = progress, False
        if progress - member.last_perturbed < self.perturbation_interval:
            return Decision.CONTINUE
        member.last_perturbed = progress
        bottom, top = self.quantiles()
        donors = [trial_id for trial_id in top if self._members[trial_id].can_donate]
        if trial.trial_id in bottom and donors:
            donor = donors[int(self._rng.integers(len(donors)))]
            self.request(Exploit(donor, self.explore(self._members[donor].config), trial.trial_id))
            return Decision.STOP
        if not self._someone_behind(trial.trial_id, progress):
            return Decision.CONTINUE
        member.waiting = True
        self.request(Resume(trial.trial_id))
        return Decision.PAUSE

    def _someone_behind(self, trial_id: int, progress: float) -> bool:
        """Whether a waiting member has come less far: then `trial_id` gives way to it."""
        return any(
            member.waiting and member.progress < progress
            for other, member in self._members.items()
            if other != trial_id
        )

    def choose_trial_to_run(self, waiting: Sequence[Trial]) -> Trial | None:
        """The waiting trial that has come least far (the first in the queue among equals)."""
        if not waiting:
            return None

        def progress(trial: Trial) -> float:
            member = self._members.get(trial.trial_id)
            return trial.iteration if member is None else member.progress

        return min(waiting, key=progress)

    def next_decision_at(self, trial: Trial) -> float:
        """Its next perturbation."""
        member = self._members.get(trial.trial_id)
        if member is None:
            return 0.0
        return member.last_perturbed + self.perturbation_interval

    def on_trial_complete(self, trial: Trial) -> None:
        self._members.pop(trial.trial_id, None)

    def on_trial_error(self, trial: Trial) -> None:
        self._members.pop(trial.trial_id, None)

    def quantiles(self) -> tuple[list[int], list[int]]:
        """The live trials in the bottom and in the top quantile, by their latest score."""
        scored = [trial_id for trial_id, m in self._members.items() if m.score is not None]
        scored.sort(key=lambda trial_id: self._members[trial_id].score)
        count = min(math.ceil(len(scored) * self.quantile_fraction), len(scored) // 2)
        if count == 0:
            return [], []
        return scored[:count], scored[-count:]

    def explore(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A mutated copy of `config`: each key of `hyperparam_mutations` resampled or perturbed."""
        return self._mutate_all(self.hyperparam_mutations, copy.deepcopy(dict(config)))

    def _mutate_all(self, mutations: Mapping[str, Mutation], config: dict[str, Any]) -> dict:
        for key, mutation in mutations.items():
            if isinstance(mutation, Mapping):
                config[key] = self._mutate_all(mutation, dict(config.get(key) or {}))
            else:
                config[key] = self._mutate(mutation, config.get(key))
        return config

    def _mutate(self, mutation: Mutation, value: Any) -> Any:
        values = _values_of(mutation)
        resample = self._rng.random() < self.resample_probability
        if values is not None:
            if resample or value not in values:
                return values[int(self._rng.integers(len(values)))]
            index = values.index(value) + int(self._rng.choice([-1, 1]))
            return values[min(max(index, 0), len(values) - 1)]
        if resample or not isinstance(value, (int, float)) or isinstance(value, bool):
            return self._draw(mutation)
        factor = self.perturbation_factors[int(self._rng.integers(len(self.perturbation_factors)))]
        return _within(mutation, value * factor, integer=isinstance(value, int))

    def _draw(self, mutation: Mutation) -> Any:
        if isinstance(mutation, Domain):
            return mutation.sample(self._rng)
        if callable(mutation):
            return mutation()
        raise TypeError(
            f"PBT cannot draw from {mutation!r}: use an nbtune domain, a list or a function"
        )


class _Member:
    """What PBT knows of one live trial."""

    def __init__(self, config: Mapping[str, Any], last_perturbed: float) -> None:
        self.config = config
        self.last_perturbed = last_perturbed
        self.progress = last_perturbed
        self.waiting = True
        self.score: float | None = None
        self.can_donate = False

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A member saved before PBT shared workers never waits: it is where it last
        perturbed, and no one gives way to it before it reports again."""
        state.setdefault("progress", state["last_perturbed"])
        state.setdefault("waiting", False)
        self.__dict__.update(state)


def _check_mutations(mutations: Mapping[str, Mutation], prefix: str = "") -> None:
    """Refuse, in one line, a mutation that PBT could not draw from when it comes to it."""
    for key, mutation in mutations.items():
        name = f"{prefix}{key}"
        if isinstance(mutation, (Mapping, list, tuple)) and not mutation:
            problem = "give at least one value to draw from"
            raise ValueError(
                f"PBT(hyperparam_mutations=...): {{{name!r}: {mutation!r}}}: {problem}"
            )
        if isinstance(mutation, Mapping):
            _check_mutations(mutation, f"{name}/")
        elif not isinstance(mutation, (Domain, list, tuple)) and not callable(mutation):
            raise TypeError(
                f"PBT(hyperparam_mutations=...): {{{name!r}: {mutation!r}}}: use an nbtune "
                "domain, a list of values or a function of no arguments"
            )


def _values_of(mutation: Mutation) -> list[Any] | None:
    """The values of a list or `choice` mutation; None for numeric domains and functions."""
    if isinstance(mutation, Choice):
        return list(mutation.categories)
    if isinstance(mutation, (list, tuple)):
        return list(mutation)
    return None


def _within(mutation: Mutation, value: float, *, integer: bool) -> float | int:
    """A perturbed number kept inside its domain's bounds (and an int if it was one)."""
    if isinstance(mutation, (Uniform, LogUniform, RandInt)):
        upper = mutation.high - 1 if isinstance(mutation, RandInt) else mutation.high
        value = min(max(value, mutation.low), upper)
    return round(value) if integer else value


def _generator(seed: int | None) -> np.random.Generator:
    """NumPy's generator, imported here so that worker processes, which import this module
    with the rest of nbtune, never load NumPy for it."""
    import numpy as np

    return np.random.default_rng(seed)
