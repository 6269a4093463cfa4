"""A concise progress line on stderr for runs outside a notebook."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from nbtune import objectives
from nbtune.events import (
    Event,
    ExperimentDone,
    TrialAdded,
    TrialCompleted,
    TrialErrored,
    TrialResult,
    TrialStarted,
)
from nbtune.metrics import finite, format_number
from nbtune.trial import better_of


class ProgressLine:
    """Subscriber that keeps counts from events and prints a status line now and then.

    On a terminal the line is redrawn in place (at most every `interval_s`); in a log it is a
    new line every `interval_s` seconds at most; a final line is always printed.
    """

    def __init__(
        self,
        name: str,
        metric: str | Sequence[str] | None,
        mode: str | Sequence[str],
        stream: TextIO | None = None,
        interval_s: float | None = None,
    ) -> None:
        self.name = name
        self.metric = metric
        self.mode = mode
        self.stream = stream or sys.stderr
        is_terminal = self.stream.isatty()
        self.interval_s = interval_s if interval_s is not None else (0.2 if is_terminal else 10.0)
        self._end = "\r" if is_terminal else "\n"
        self._statuses: dict[int, str] = {}
        self._results = 0
        self._best_of: dict[int, float] = {}
        """Each trial's best value of the metric: its returned score once it returned one."""
        self._last_values: dict[int, tuple[float, ...]] = {}
        """With several metrics: each trial's last finite values, for the front's size."""
        self._started = time.monotonic()
        self._last_print = self._started

    def __call__(self, event: Event) -> None:
        self._count(event)
        now = time.monotonic()
        if isinstance(event, ExperimentDone):
            self.stream.write(f"{self.line()} [{event.state}]\n")
            self.stream.flush()
        elif now - self._last_print >= self.interval_s:
            self._last_print = now
            self.stream.write(self.line() + self._end)
            self.stream.flush()

    def _count(self, event: Event) -> None:
        if isinstance(event, TrialAdded):
            self._statuses[event.trial_id] = "pending"
        elif isinstance(event, TrialStarted):
            self._statuses[event.trial_id] = "running"
        elif isinstance(event, TrialCompleted):
            self._statuses[event.trial_id] = "terminated"
        elif isinstance(event, TrialErrored):
            self._statuses[event.trial_id] = "error"
        elif isinstance(event, TrialResult):
            self._results += 1
            if objectives.is_several(self.metric):
                self._note_values(event.trial_id, event.result)
            elif self.metric is not None:
                self._note_best(event)

    def _note_best(self, event: TrialResult) -> None:
        value, held = finite(event.result.get(self.metric)), self._best_of.get(event.trial_id)
        best = value if event.returned else better_of(held, value, self.mode)
        if best is None:
            self._best_of.pop(event.trial_id, None)
        else:
            self._best_of[event.trial_id] = best

    def _note_values(self, trial_id: int, result: Mapping[str, Any]) -> None:
        values = objectives.values(result, self.metric)
        if values is None:
            self._last_values.pop(trial_id, None)
        else:
            self._last_values[trial_id] = values

    def line(self) -> str:
        counts = Counter(self._statuses.values())
        states = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        parts = [f"nbtune {self.name}: {len(self._statuses)} trials ({states or 'none yet'})"]
        parts.append(f"{self._results} results")
        if self._best_of:
            pick = min if self.mode == "min" else max
            trial_id = pick(self._best_of, key=self._best_of.__getitem__)
            best = format_number(self._best_of[trial_id])
            parts.append(f"best {self.metric}={best} (trial {trial_id})")
        if self._last_values:
            modes = objectives.modes(self.metric, self.mode)
            front = sum(objectives.non_dominated(list(self._last_values.values()), modes))
            parts.append(f"Pareto front {front} of {len(self._last_values)} trials")
        parts.append(f"{time.monotonic() - self._started:.1f} s")
        return " | ".join(parts)
