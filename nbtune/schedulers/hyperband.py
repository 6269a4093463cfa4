"""Synchronous HyperBand: brackets of successive halving that wait for every trial at each rung.

Li et al., "Hyperband: A Novel Bandit-Based Approach to Hyperparameter Optimization" (JMLR
2018). With R = `max_t` and eta = `reduction_factor`, s_max = floor(log_eta(R)) and bracket s
(from s_max down to 0) takes n = ceil((s_max + 1) / (s + 1) * eta**s) trials, first running
each for r = R * eta**-s. At each rung the bracket waits until all its trials got there (they
pause, freeing their workers), keeps the best floor(n * eta**-(i + 1)) and resumes them from
their checkpoints for eta times longer; the others stop. Brackets fill in turn as trials
arrive; one that cannot fill (the searcher ran out) closes with the trials it has.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from nbtune.protocol import Decision
from nbtune.schedulers._base import Resume, Scheduler, Stop, check_positive
from nbtune.trial import Trial


class HyperBand(Scheduler):
    """Brackets of successive halving; a trial pauses at each rung until its bracket is judged.

    Trials should checkpoint (pass `checkpoint=...` to `nbtune.report`), since they leave their
    worker at every rung. One with no checkpoint of the rung's step waits in its worker while
    there are workers to spare, and gives its worker back when the run needs it: it then
    resumes from its latest checkpoint (or from scratch), repeating the steps since, whose
    results are not recorded twice.

    A trial the user pauses holds its bracket back until it is resumed or stopped; one the
    user resumes while it waits at a rung runs on and is judged with the rest.

    Args:
        max_t: the most `time_attr` any trial gets (R in the paper); it stops there.
        reduction_factor: eta: each rung keeps 1/eta of the trials for eta times longer.
        time_attr: the result key that measures progress, counted from 1.
        metric: compare trials by this reported value rather than the Tuner's metric (which
            a run of several metrics needs: `metric="loss"`).
        mode: "min" or "max" for `metric` (default: the Tuner's mode of it, if it tunes it).
    """

    needs_metric = True

    def __init__(
        self,
        max_t: int,
        reduction_factor: float = 3,
        time_attr: str = "training_iteration",
        *,
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        check_positive("HyperBand", "max_t", max_t, integer=True)
        if isinstance(reduction_factor, bool) or not reduction_factor > 1:
            raise ValueError(
                f"HyperBand(reduction_factor={reduction_factor!r}): pass a number above 1"
            )
        self.max_t = max_t
        self.reduction_factor = reduction_factor
        self.time_attr = time_attr
        self.own_metric(metric, mode)
        self.brackets: list[Bracket] = []
        self._bracket_of: dict[int, Bracket] = {}

    @property
    def s_max(self) -> int:
        """The largest s with eta**s <= max_t: the most aggressive bracket."""
        s = 0
        while self.reduction_factor ** (s + 1) <= self.max_t:
            s += 1
        return s

    def bracket_shape(self, s: int) -> tuple[int, list[int]]:
        """Bracket s's size n and its rungs' cumulative budgets r * eta**i, the last = max_t."""
        eta = self.reduction_factor
        size = math.ceil((self.s_max + 1) / (s + 1) * eta**s - 1e-9)
        budgets = [max(1, round(self.max_t * eta ** (i - s))) for i in range(s + 1)]
        return size, budgets

    def on_trial_add(self, trial: Trial) -> None:
        self._join(trial.trial_id)

    def on_result(self, trial: Trial, result: Mapping[str, Any]) -> Decision:
        progress = self.progress(result)
        if progress >= self.max_t:
            return Decision.STOP
        bracket = self._join(trial.trial_id)
        trial_id = trial.trial_id
        if trial_id not in bracket.alive:
            return Decision.STOP
        if progress < bracket.milestone or trial_id in bracket.reached:
            return Decision.CONTINUE
        score = self.score(result)
        bracket.reached[trial_id] = -math.inf if score is None else score
        if bracket.ready:
            return self._judge(bracket, deciding=trial_id)
        return Decision.PAUSE

    def next_decision_at(self, trial: Trial) -> float:
        """The rung its bracket waits at, or `max_t`; any result once the trial is judged."""
        bracket = self._bracket_of.get(trial.trial_id)
        judged = bracket is None or trial.trial_id not in bracket.alive
        if judged or trial.trial_id in bracket.reached:
            return 0.0
        return min(self.max_t, bracket.milestone)

    def on_trial_complete(self, trial: Trial) -> None:
        self._leave(trial.trial_id)

    def on_trial_error(self, trial: Trial) -> None:
        self._leave(trial.trial_id)

    def on_queue_empty(self) -> None:
        for bracket in self.brackets:
            bracket.closed = bracket.closed or bool(bracket.trials)
            if bracket.ready:
                self._judge(bracket)

    def restore(self, trials: Sequence[Trial]) -> set[int]:
        """Trials that wait at a rung keep waiting, even those the run died before pausing."""
        for trial in trials:
            self._join(trial.trial_id)
            if trial.status.is_finished:
                self._leave(trial.trial_id)
        waiting = {trial_id for bracket in self.brackets for trial_id in bracket.reached}
        return {trial.trial_id for trial in trials if trial.trial_id in waiting}

    def _join(self, trial_id: int) -> Bracket:
        """The trial's bracket; a new trial joins the one filling up (or opens the next)."""
        if trial_id in self._bracket_of:
            return self._bracket_of[trial_id]
        if not self.brackets or self.brackets[-1].closed:
            s = self.s_max - len(self.brackets) % (self.s_max + 1)
            self.brackets.append(Bracket(s, self.reduction_factor, *self.bracket_shape(s)))
        bracket = self.brackets[-1]
        bracket.add(trial_id)
        self._bracket_of[trial_id] = bracket
        return bracket

    def _leave(self, trial_id: int) -> None:
        bracket = self._bracket_of.get(trial_id)
        if bracket is None or trial_id not in bracket.alive:
            return
        bracket.alive.discard(trial_id)
        bracket.reached.pop(trial_id, None)
        if bracket.ready:
            self._judge(bracket)

    def _judge(self, bracket: Bracket, deciding: int | None = None) -> Decision:
        """Every live trial of `bracket` reached its rung: resume the best, stop the rest.

        Returns the decision for `deciding`, the trial whose result completed the rung.
        """
        ranked = sorted(bracket.reached, key=bracket.reached.__getitem__, reverse=True)
        kept = set(ranked[: bracket.keep_count()])
        decision = Decision.CONTINUE
        for trial_id in ranked:
            if trial_id == deciding:
                decision = Decision.CONTINUE if trial_id in kept else Decision.STOP
            else:
                self.request(Resume(trial_id) if trial_id in kept else Stop(trial_id))
        bracket.advance(kept)
        return decision


class Bracket:
    """One bracket of successive halving: its trials, its rungs, and where it stands."""

    def __init__(self, s: int, eta: float, size: int, budgets: list[int]) -> None:
        self.s = s
        self.eta = eta
        self.size = size
        self.budgets = budgets
        self.trials: list[int] = []
        self.alive: set[int] = set()
        self.rung = 0
        self.reached: dict[int, float] = {}
        self.closed = False

    @property
    def milestone(self) -> float:
        """The progress at which trials pause at the current rung (inf past the last one)."""
        rungs = self.budgets[:-1]
        return rungs[self.rung] if self.rung < len(rungs) else math.inf

    @property
    def ready(self) -> bool:
        """Whether the current rung can be judged: the bracket is full and everyone got there."""
        if not self.closed or not self.alive:
            return False
        return all(trial_id in self.reached for trial_id in self.alive)

    def add(self, trial_id: int) -> None:
        self.trials.append(trial_id)
        self.alive.add(trial_id)
        self.closed = len(self.trials) >= self.size

    def keep_count(self) -> int:
        """How many go on to the next rung: floor(n * eta**-(i + 1)) of the n trials, at least 1."""
        paper = math.floor(len(self.trials) / self.eta ** (self.rung + 1) + 1e-9)
        return min(len(self.reached), max(1, paper))

    def advance(self, kept: set[int]) -> None:
        """Move to the next rung with only `kept` alive."""
        self.alive = set(kept)
        self.reached = {}
        self.rung += 1
