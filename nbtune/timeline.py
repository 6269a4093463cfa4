"""When each trial ran, and on which worker: a run's stretches of running, read from its journal.

    trials.jsonl --JournalTimeline.read()--> segments --frame(rows, now)--> DataFrame
    (one line per change of a trial)          (one per stretch of running)   + worker slots

A stretch opens at a journal line that shows its trial RUNNING with a new `started_at`, and
closes at the trial's next line that leaves RUNNING. Journal lines carry no time of their own:
a stretch's end is its start plus the running time it added to the trial (`runtime_s`, which
the runner adds up each time a stretch ends), so the stretches of a trial add up to its
`runtime_s`. The journal records no worker either: each stretch gets the first worker slot
free at its start (the one its trial ran on before, if that one is free), which uses as few
slots as the run had trials at once.

A stretch that the journal never saw end (the run's process died; `Tuner.restore` started the
trial again) ends at its trial's last result before it started again, `how="lost"`. The
journal (`trials.jsonl`) is append-only: compacting it into `trials.json` leaves it whole, so
the timeline reads it alone, from its first line.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbtune.storage import loads

if TYPE_CHECKING:
    import pandas as pd

    from nbtune.results import ResultsView

HOWS = ("running", "paused", "terminated", "stopped", "error", "lost")
"""How a stretch of running ended: "running" (it has not: a live stretch, or one a run read
from disk had not ended when it was read), "paused" (the trial was paused: by the user, the
scheduler, or the run's stop), "terminated" (the trial ran to its end), "stopped" (the trial
was cut short: its `stopped_by` is set), "error" (it failed for good), "lost" (its attempt
failed and was retried, `attempts` going up; or its worker, or its run's process, was lost
under it and it started again)."""

OVERLAP_S = 1e-3
"""How far the derived end of one stretch may pass the start of the next on its worker: the
rounding of `started_at + runtime_s` (a microsecond or so), never a real overlap."""

COLUMNS = ("trial_id", "worker", "start", "end", "how", "attempt", "parent", "stopped_by")


@dataclass(frozen=True)
class Segment:
    """One stretch of running of one trial; times in epoch seconds.

    Attributes:
        end: when it ended; None while it runs (or where the journal lost it, until `until`).
        until: for a stretch the journal never saw end, when its trial started again: it
            ended at the last result its trial reported before that.
    """

    trial_id: int
    start: float
    end: float | None
    how: str
    attempt: int
    parent: int | None
    stopped_by: str | None = None
    until: float | None = None


@dataclass
class _Open:
    """A stretch under way: when it started, and the trial's `runtime_s` before it."""

    segment: Segment
    runtime_before: float


class JournalTimeline:
    """The stretches of running of an experiment's trials, read from its journal as it grows:
    each `read()` takes in only the lines written since the last one (a live dashboard reads
    a long run's journal at every redraw).

    Args:
        path: the experiment's directory.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path) / "trials.jsonl"
        self._offset = 0
        self._closed: list[Segment] = []
        self._open: dict[int, _Open] = {}

    def read(self) -> JournalTimeline:
        """Take in the journal's new whole lines (a line being written is left for the next
        read); returns itself."""
        try:
            with open(self.path, "rb") as file:
                file.seek(self._offset)
                data = file.read()
        except FileNotFoundError:
            return self
        whole = data.rfind(b"\n") + 1
        self._offset += whole
        for line in data[:whole].decode("utf-8").splitlines():
            if line:
                self.take(loads(line))
        return self

    def take(self, record: Mapping[str, Any]) -> None:
        """Take in one journal line: a trial's record as it changed."""
        trial_id = record["trial_id"]
        started_at = record.get("started_at")
        running = record["status"] == "RUNNING" and started_at is not None
        under_way = self._open.get(trial_id)
        if under_way is not None:
            if running and started_at == under_way.segment.start:
                return
            self._closed.append(_closed(under_way, record))
            del self._open[trial_id]
        if running:
            segment = Segment(
                trial_id,
                float(started_at),
                None,
                "running",
                int(record.get("attempts", 1)),
                record.get("parent"),
            )
            self._open[trial_id] = _Open(segment, float(record.get("runtime_s", 0.0)))

    def segments(
        self, rows: Sequence[Mapping[str, Any]] = (), now: float | None = None
    ) -> list[Segment]:
        """Every stretch so far, by start; those under way end at `now` (None: not known).

        Args:
            rows: the run's results, which date the end of a stretch the journal lost.
            now: where a stretch under way ends: the present, for a live run.
        """
        reported = _report_times(rows)
        ended = [_dated(segment, reported) for segment in self._closed]
        running = [replace(under_way.segment, end=now) for under_way in self._open.values()]
        return sorted([*ended, *running], key=lambda s: (s.start, s.trial_id))

    def frame(
        self, rows: Sequence[Mapping[str, Any]] = (), now: float | None = None
    ) -> pd.DataFrame:
        """The stretches as `timeline` returns them (see `segments` for the arguments)."""
        return segments_frame(self.segments(rows, now))


def _closed(under_way: _Open, record: Mapping[str, Any]) -> Segment:
    """The stretch `under_way` as `record`, its trial's next journal line, ended it."""
    segment = under_way.segment
    ran = float(record.get("runtime_s", 0.0)) - under_way.runtime_before
    status = record["status"]
    if status == "RUNNING" or ran <= 0.0:
        # Started again, or left RUNNING with no time added: its end was never journaled
        # (the run's process died, and a restore carried the trial on).
        until = record.get("started_at") if status == "RUNNING" else None
        return replace(segment, how="lost", until=until if until is not None else float("inf"))
    stopped_by = record.get("stopped_by")
    how = {
        "PAUSED": "paused",
        "PENDING": "lost",
        "ERROR": "error",
        "TERMINATED": "stopped" if stopped_by else "terminated",
    }[status]
    return replace(segment, end=segment.start + ran, how=how, stopped_by=stopped_by)


def _report_times(rows: Iterable[Mapping[str, Any]]) -> dict[int, list[float]]:
    """Each trial's result times, sorted."""
    times: dict[int, list[float]] = {}
    for row in rows:
        times.setdefault(row["trial_id"], []).append(float(row["timestamp"]))
    for found in times.values():
        found.sort()
    return times


def _dated(segment: Segment, reported: Mapping[int, list[float]]) -> Segment:
    """A lost stretch ends at its trial's last result within it (at its start if none)."""
    if segment.end is not None or segment.until is None:
        return segment
    times = reported.get(segment.trial_id, [])
    last = bisect.bisect_left(times, segment.until) - 1
    end = times[last] if last >= 0 and times[last] >= segment.start else segment.start
    return replace(segment, end=end)


def workers(segments: Sequence[Segment]) -> list[int]:
    """A worker slot for each stretch (given by start), so that no two stretches on one slot
    overlap: the slot its trial last ran on if that is free, else the lowest free one."""
    free_at: list[float] = []
    last_slot: dict[int, int] = {}
    slots = []
    for segment in segments:
        end = segment.end if segment.end is not None else float("inf")
        free = [slot for slot, at in enumerate(free_at) if at <= segment.start + OVERLAP_S]
        slot = last_slot.get(segment.trial_id)
        if slot not in free:
            slot = free[0] if free else len(free_at)
        if slot == len(free_at):
            free_at.append(end)
        free_at[slot] = end
        last_slot[segment.trial_id] = slot
        slots.append(slot)
    return slots


def segments_frame(segments: Sequence[Segment]) -> pd.DataFrame:
    """One row per stretch (by start): the columns of `timeline`."""
    import pandas as pd  # here, so that `import nbtune` stays light

    records = [
        {
            "trial_id": segment.trial_id,
            "worker": worker,
            "start": segment.start,
            "end": segment.end,
            "how": segment.how,
            "attempt": segment.attempt,
            "parent": segment.parent,
            "stopped_by": segment.stopped_by,
        }
        for segment, worker in zip(segments, workers(segments), strict=True)
    ]
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    for column in ("start", "end"):
        frame[column] = pd.to_datetime(frame[column].astype("float64"), unit="s", utc=True)
    return frame.astype(
        {
            "start": "datetime64[ns, UTC]",
            "end": "datetime64[ns, UTC]",
            "trial_id": "int64",
            "worker": "int64",
            "how": pd.CategoricalDtype(HOWS),
            "attempt": "int64",
            "parent": "Int64",
            "stopped_by": "string",
        }
    )


def timeline(run: Any) -> pd.DataFrame:
    """When each trial ran, and on which worker: one row per stretch of running.

    Args:
        run: a `Tuner` (live or done), `nbtune.load(...)`, or an experiment's directory.

    Returns:
        A DataFrame, by start: `trial_id`; `worker`, a worker slot (0, 1, ...; the journal
        records none, so each stretch gets the first slot free when it started: no two
        stretches of a slot overlap); `start` and `end` (UTC timestamps; a stretch still
        running ends now in a live run, NaT in one read from disk); `how` it ended (see
        `HOWS`: running, paused, terminated, stopped, error, lost); `attempt` (1, then 2 after
        a failure retried...); `parent`, the trial it was forked from; `stopped_by` for a
        stopped one. A trial's `end - start` add up to its `runtime_s`.

    Raises:
        TypeError: `run` is none of those, in one line.
    """
    view = _view(run)
    rows = view.snapshot()[1]
    now = time.time() if getattr(view, "live", False) else None
    return JournalTimeline(view.path).read().frame(rows, now)


def _view(run: Any) -> ResultsView:
    from nbtune.analysis import ExperimentAnalysis  # here: `import nbtune` imports this module
    from nbtune.results import ResultsView

    if isinstance(run, (str, os.PathLike)):
        return ExperimentAnalysis(run)
    if not isinstance(run, ResultsView):
        raise TypeError(
            f"timeline() reads a Tuner, nbtune.load(...) or an experiment directory, not "
            f"{type(run).__name__}"
        )
    return run
