"""Each configuration run several times, so that a noisy objective is judged by its mean."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nbtune import objectives
from nbtune.schedulers._base import check_positive
from nbtune.search._base import Searcher, WrappingSearcher
from nbtune.trial import Trial, TrialStatus

TRIAL_INDEX = "__trial_index__"
"""The config key that tells a repeated trial which of its group it is (0, 1, ...)."""


@dataclass
class _Group:
    """The trials that run one configuration of the wrapped searcher."""

    config: Mapping[str, Any]
    members: list[int] = field(default_factory=list)
    ended: dict[int, Mapping[str, Any] | None] = field(default_factory=dict)
    """Each ended member's last result; None for one that failed or reported nothing."""

    @property
    def first(self) -> int:
        """The id the wrapped searcher knows the group by."""
        return self.members[0]


class Repeater(WrappingSearcher):
    """Runs each configuration of `searcher` in `repeat` trials and tells it their mean.

    A noisy objective (a random initialisation, a random split of the data) can make one
    configuration look better than it is. The Repeater gives each configuration `searcher`
    suggests to `repeat` trials in a row; once all of them have ended, `searcher` hears of one
    trial whose metric is the mean of their last results, so that a model-based searcher
    learns from the mean. Trials that failed, or reported no finite metric, are left out of it;
    if all did, `searcher` hears of a failure. Results along the way are not passed on.

    The budget counts configurations: `num_samples=10` with `repeat=3` makes 30 trials. Each
    mean is of last results, so use it with schedulers that let trials run to the end (FIFO,
    the default): one that stops trials early would average values taken at different times.

    Args:
        searcher: the searcher whose configurations to repeat, e.g. `OptunaSearch()`.
        repeat: trials per configuration (>= 1).
        set_index: put each trial's place in its group in its config, as `__trial_index__`
            (0 to repeat - 1), e.g. to seed the trainable's randomness with it.
    """

    def __init__(self, searcher: Searcher, repeat: int, set_index: bool = True) -> None:
        check_positive("Repeater", "repeat", repeat, integer=True)
        super().__init__(searcher)
        self.repeat = repeat
        self.set_index = set_index
        self._filling: _Group | None = None
        """The group still handing out trials, if any."""
        self._group_of: dict[int, _Group] = {}
        """Trial id -> its group, for every group some member of which has not ended."""
        self._outside: set[int] = set()
        """Trials added by hand, passed on one by one."""

    def suggest(self, trial_id: int) -> dict[str, Any] | None:
        group = self._filling
        if group is None:
            config = self.searcher.suggest(trial_id)
            if config is None:
                return None
            group = _Group(config)
        self._join(group, trial_id)
        return self._config(group.config, len(group.members) - 1)

    def _join(self, group: _Group, trial_id: int) -> None:
        group.members.append(trial_id)
        self._group_of[trial_id] = group
        self._filling = group if len(group.members) < self.repeat else None

    def _config(self, config: Mapping[str, Any], index: int) -> dict[str, Any]:
        return {**config, TRIAL_INDEX: index} if self.set_index else dict(config)

    @property
    def is_finished(self) -> bool:
        return self._filling is None and self.searcher.is_finished

    @property
    def planned_trials(self) -> int | None:
        """`repeat` trials for each configuration the wrapped searcher plans."""
        planned = self.searcher.planned_trials
        return None if planned is None else planned * self.repeat

    def on_result(self, trial_id: int, result: Mapping[str, Any]) -> None:
        """Not passed on: the searcher knows one trial per group, told only the mean."""

    def on_pruned(self, trial_id: int) -> None:
        """Not passed on: the searcher hears of a group's mean, not of its members."""

    def on_trial_add(self, trial_id: int, config: Mapping[str, Any]) -> None:
        """A trial added by hand is one trial, not a group: passed on as it is."""
        self._outside.add(trial_id)
        config = {name: value for name, value in config.items() if name != TRIAL_INDEX}
        self.searcher.on_trial_add(trial_id, config)

    def on_complete(self, trial_id: int, result: Mapping[str, Any] | None, error: bool) -> None:
        if trial_id in self._outside:
            self._outside.discard(trial_id)
            self.searcher.on_complete(trial_id, result, error)
            return
        group = self._end_member(trial_id, None if error else result)
        if group is not None:
            mean = _mean(group.ended.values(), self.metric)
            self.searcher.on_complete(group.first, mean, error=mean is None)

    def _end_member(self, trial_id: int, result: Mapping[str, Any] | None) -> _Group | None:
        """Record a member's end (None: it failed); its group once every member has ended."""
        group = self._group_of.pop(trial_id, None)
        if group is None:
            return None
        group.ended[trial_id] = result
        return group if len(group.ended) == self.repeat else None

    def restore(self, trials: Sequence[Trial]) -> None:
        """Rebuild the groups from the journal: the k-th trial this searcher suggested is
        member k % repeat of group k // repeat, as `suggest` hands them out. The wrapped
        searcher catches up with one trial per group, which stands for the group."""
        ours = [trial for trial in trials if trial.origin == "searcher"]
        self._group_of, self._filling = {}, None
        stand_ins = []
        for start in range(0, len(ours), self.repeat):
            members = ours[start : start + self.repeat]
            group = _Group(_without_index(members[0].config))
            for trial in members:
                self._join(group, trial.trial_id)
            for trial in members:
                if trial.status.is_finished:
                    self._end_member(trial.trial_id, _last_result(trial))
            stand_ins.append(self._standing_for(group, members[0]))
        self.searcher.restore(stand_ins)

    def _standing_for(self, group: _Group, first: Trial) -> Trial:
        """The group as the wrapped searcher knows it: its first trial, with the group's
        configuration, running until every member has ended, then holding their mean."""
        stand_in = replace(first, config=group.config)
        if len(group.ended) < self.repeat:
            return replace(stand_in, status=TrialStatus.RUNNING, last_result={})
        mean = _mean(group.ended.values(), self.metric)
        status = TrialStatus.ERROR if mean is None else TrialStatus.TERMINATED
        return replace(stand_in, status=status, last_result=mean or {})


def _mean(
    results: Iterable[Mapping[str, Any] | None], metric: str | Sequence[str] | None
) -> dict[str, Any] | None:
    """The last of `results` that has a finite value of every tuned metric, holding the mean
    of each over all that have them; None if none has."""
    scored = [r for r in results if r is not None and objectives.values(r, metric) is not None]
    if not scored:
        return None
    means = {
        name: math.fsum(r[name] for r in scored) / len(scored) for name in objectives.names(metric)
    }
    return {**scored[-1], **means}


def _last_result(trial: Trial) -> Mapping[str, Any] | None:
    """What an ended trial leaves to the mean: its last result, or None if it failed."""
    return None if trial.status is TrialStatus.ERROR else trial.last_result or None


def _without_index(config: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key != TRIAL_INDEX}
