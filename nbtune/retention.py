"""Which of a trial's checkpoints stay on disk.

`Tuner(..., keep_checkpoints=N)` keeps, per trial, its latest checkpoint and its best ones by
the tuned metric: the best one for N = 2 (the default), the N best for N > 2, none for N = 1;
`None` keeps every checkpoint. Without a metric, "best" means most recent. A checkpoint that
any trial's record still points to (a paused trial's, a fork's starting point, what a restore
resumes from) is never deleted, whatever its rank.

The runner tells `CheckpointRetention` of each checkpoint as it is stored, with the metric's
value at that result; what it deletes, it deletes at once, so the disk never holds more than
the kept checkpoints and the ones in use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from nbtune import checkpoint
from nbtune.metrics import finite

_LAST = (-float("inf"),)


class CheckpointRetention:
    """Keeps the latest and the best checkpoints of each trial, and deletes the others.

    Args:
        keep: `keep_checkpoints` (None keeps all).
        metric: the tuned metric (None: keep the most recent).
        mode: "min" or "max".
        folder_of: where a trial's checkpoints are stored, by trial id.
    """

    def __init__(
        self, keep: int | None, metric: str | None, mode: str, folder_of: Callable[[int], Path]
    ) -> None:
        self.keep = keep
        self.metric = metric
        self.mode = mode
        self._folder_of = folder_of
        self._kept: dict[int, dict[int, tuple[Path, tuple[float, ...]]]] = {}

    def restored(self, trial_id: int, rows: Mapping[int, Mapping]) -> None:
        """Learn of the checkpoints a restored trial has on disk, scored by its logged `rows`
        (by iteration)."""
        stored = checkpoint.stored(self._folder_of(trial_id))
        self._kept[trial_id] = {
            iteration: (path, rank(rows.get(iteration, {}), iteration, self.metric, self.mode))
            for iteration, path in stored.items()
        }

    def stored(
        self, trial_id: int, path: Path, iteration: int, row: Mapping, in_use: Iterable[Path]
    ) -> None:
        """A checkpoint of `trial_id` taken at `iteration` (whose result is `row`; empty for a
        result replayed after a restart, which keeps the rank it had) is on disk; delete those
        of the trial's checkpoints that fall out of the kept ones and are not `in_use`."""
        if self.keep is None:
            return
        kept = self._kept.setdefault(trial_id, {})
        known = kept.get(iteration)
        if known is None or row:
            known = path, rank(row, iteration, self.metric, self.mode)
        kept[iteration] = (path, known[1])
        latest = max(kept)
        ranked = sorted((i for i in kept if i != latest), key=lambda i: kept[i][1], reverse=True)
        best = 1 if self.keep == 2 else (0 if self.keep < 2 else self.keep)
        protected = {Path(p) for p in in_use}
        for dropped in ranked[best:]:
            dropped_path = kept[dropped][0]
            if dropped_path in protected:
                continue
            checkpoint.remove(dropped_path)
            del kept[dropped]


def best_stored(
    directory: Path, rows: Mapping[int, Mapping], metric: str | None, mode: Any
) -> Path | None:
    """Of the checkpoints kept in a trial's `directory`, the one taken at its best result
    (`rows`: its results by iteration, ranked by `rank`); None if none is kept."""
    kept = checkpoint.stored(directory)
    if not kept:
        return None

    def quality(iteration: int) -> tuple[float, ...]:
        return rank(rows.get(iteration, {}), iteration, metric, mode)

    return kept[max(kept, key=quality)]


def rank(row: Mapping, iteration: int, metric: str | None, mode: str) -> tuple[float, ...]:
    """How good the checkpoint taken at `row` is (higher is better): the metric's value signed
    by `mode`, then recency; a result without a finite value ranks below every other."""
    if metric is None:
        return (float(iteration),)
    value = finite(row.get(metric))
    if value is None:
        return (*_LAST, float(iteration))
    return (value if mode == "max" else -value, float(iteration))
