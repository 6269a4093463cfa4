"""Past runs: `nbtune.runs(storage_path)`, one row per experiment folder.

    nbtune-runs/<name>/  --run_row-->  name, state, started, duration_s, trials, counts,
                                       metric, mode, best, best_config, versions, path

A run that ended is read from small files only: its spec, `outcome.json`, `environment.json`
and the `summary.json` written with the outcome (see `nbtune.storage.summarize`). One that has
not ended (it runs, or its process died), or that ended before summaries were written, is read
from its trial journal and result log instead. Whether it still runs is told by its lock,
which the system drops when the process dies, however it dies: a folder without an outcome
whose lock nobody holds is `interrupted`.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbtune import environment, remote
from nbtune.constraints import Constraints
from nbtune.storage import ExperimentReader, lock_held, summarize
from nbtune.trial import TrialStatus

if TYPE_CHECKING:
    import pandas as pd

STATES = ("running", "paused", "finished", "stopped", "failed", "interrupted")
"""What `runs()` says of a run: live ("running", "paused": its last `pause_all` holds), ended
as its outcome says ("finished", "stopped", "failed"), or "interrupted": it has no outcome and
no live process holds its folder (it was killed, or its kernel died; `Tuner.restore` carries
it on)."""
COUNT_COLUMNS = tuple(status.value for status in TrialStatus)
"""A column per trial status, named as `TrialStatus` (`PENDING`, ..., `ERROR`): how many of
the run's trials are in it."""
COLUMNS = (
    "name",
    "state",
    "started",
    "duration_s",
    "trials",
    *COUNT_COLUMNS,
    "metric",
    "mode",
    "best",
    "best_config",
    "nbtune_version",
    "code_version",
    "error",
    "path",
)
"""The columns of `runs()`, in order."""
_TEXT_COLUMNS = (
    "name",
    "state",
    "metric",
    "mode",
    "nbtune_version",
    "code_version",
    "error",
    "path",
)


def runs(
    storage_path: str | os.PathLike = "nbtune-runs",
    storage_options: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Every run under `storage_path`, one row per experiment folder, oldest first.

    `storage_path` may be a URL of remote storage (`"s3://bucket/runs"`, with
    `storage_options` for fsspec): each run's small files are copied to a local cache folder
    to be read, a run is live while its writer's lease is fresh, and `path` is its URL.

    Columns: `name`; `state` (see `STATES`); `started` (when the run was created, UTC);
    `duration_s` (until it ended; so far for a live run; until its last result for an
    interrupted one); `trials` and a column per trial status (`PENDING`, `RUNNING`, `PAUSED`,
    `TERMINATED`, `ERROR`); `metric`, `mode`, `best` (the best value of a run of one metric)
    and `best_config`; `nbtune_version` and `code_version` (the git commit the run was made
    at, "+dirty" if the working tree had changes; see `nbtune.environment`); `error` (why the
    run failed, or what could not be read of a damaged folder); `path`.

    A folder without experiments (or none at all) gives an empty frame with these columns; a
    damaged run gives a row of what could be read.

    Raises:
        NotADirectoryError: `storage_path` is a file, in one line.
    """
    import pandas as pd  # imported here so that `import nbtune` stays light

    if remote.is_url(storage_path):
        rows = _remote_rows(str(storage_path), storage_options)
    else:
        rows = _local_rows(Path(storage_path))
    rows.sort(key=lambda row: (_sort_time(row["started"]), row["name"]))
    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    frame["started"] = pd.to_datetime(frame["started"], unit="s", utc=True)
    dtypes: dict[str, Any] = {column: "Int64" for column in ("trials", *COUNT_COLUMNS)}
    dtypes.update(duration_s="float64", best="float64")
    dtypes.update(dict.fromkeys(_TEXT_COLUMNS, "string"))
    return frame.astype(dtypes)


def _local_rows(root: Path) -> list[dict[str, Any]]:
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(
            f"{root} is a file, not a folder of runs; pass the storage_path runs are kept "
            "under, e.g. nbtune.runs('nbtune-runs')"
        )
    folders = sorted(root.iterdir()) if root.is_dir() else []
    return [_row_of(folder) for folder in folders if (folder / "experiment.json").is_file()]


def _remote_rows(url: str, storage_options: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The rows of the runs under `url`, each read from a local copy of its small files; a
    run is live while its writer's lease is fresh."""
    store = remote.RemoteStore(url, storage_options)
    rows = []
    for name in store.names():
        folder = store.folder(name, reading=True)
        live = remote.is_fresh(remote.lease_of(store, name))
        try:
            remote.pull(store, name, folder, part="summary")
            row = _row_of(folder, held=lambda _, live=live: live)
        except Exception as exc:
            row = _failed_row(folder, exc)
        row["path"] = store.url_of(name)
        rows.append(row)
    return rows


def run_row(folder: Path, held: Callable[[Path], bool | None] = lock_held) -> dict[str, Any]:
    """One run's row of `runs()`; what cannot be read is left missing and said in `error`."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(name=folder.name, path=str(folder))
    problems: list[str] = []
    reader = ExperimentReader(folder)
    spec = _guarded(reader.spec, problems, "experiment.json") or {}
    started = _number(spec.get("created_at"))
    row.update(
        name=spec.get("name") if isinstance(spec.get("name"), str) else folder.name,
        metric=_metric(spec.get("metric")),
        mode=_metric(spec.get("mode")),
        started=started,
    )
    env = environment.read(folder)
    row["nbtune_version"] = ((env or {}).get("packages") or {}).get("nbtune")
    row["code_version"] = environment.code_version(env)
    known_problems = len(problems)
    outcome = _outcome(reader, problems)
    state, summary = _state(folder, outcome, held), None
    if state == "interrupted" and outcome is None and len(problems) == known_problems:
        # A run that ended between the two reads wrote its outcome before freeing its lock.
        outcome = _outcome(reader, problems)
        state = state if outcome is None else _state(folder, outcome, held)
    if outcome is not None:
        row["error"] = outcome.get("error")
        summary = reader.summary()
    last_record = None
    if summary is None:
        summary, last_record = _from_logs(reader, spec, problems)
    row["state"] = state
    row["duration_s"] = _duration(state, started, outcome, last_record, folder)
    if summary is not None:
        row["trials"] = summary.get("trials")
        counts = summary.get("counts") or {}
        row.update({column: counts.get(column, 0) for column in COUNT_COLUMNS})
        row["best"] = _number(summary.get("best"))
        row["best_config"] = summary.get("best_config")
    if problems:
        row["error"] = "; ".join(filter(None, [row["error"], *problems]))
    return row


def _row_of(folder: Path, held: Callable[[Path], bool | None] = lock_held) -> dict[str, Any]:
    """`run_row(folder, held)`; a folder that went away or fails in an unforeseen way still
    gets its row, with what went wrong in `error`."""
    try:
        return run_row(folder, held)
    except Exception as exc:
        return _failed_row(folder, exc)


def _failed_row(folder: Path, exc: Exception) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    reason = (str(exc).splitlines() or [""])[0]
    row.update(name=folder.name, path=str(folder), error=f"{type(exc).__name__}: {reason}")
    return row


def _outcome(reader: ExperimentReader, problems: list[str]) -> dict[str, Any] | None:
    outcome = _guarded(reader.outcome, problems, "outcome.json")
    if outcome is not None and not isinstance(outcome, dict):
        problems.append("outcome.json cannot be read (not a JSON object)")
        return None
    return outcome


def _state(
    folder: Path, outcome: dict[str, Any] | None, held: Callable[[Path], bool | None]
) -> str:
    if outcome is not None:
        return str(outcome.get("state"))
    if held(folder):
        return "paused" if _paused(folder) else "running"
    return "interrupted"


def _paused(folder: Path) -> bool:
    """Whether the live run's last `pause_all` or `resume_all` (not refused) was a pause: it
    holds every trial. (A run whose trials were each paused by hand reads as running.)"""
    try:
        text = (folder / "commands.jsonl").read_text(encoding="utf-8")
    except OSError:
        return False
    for line in reversed(text.splitlines()):
        if '"pause_all"' not in line and '"resume_all"' not in line:
            continue
        try:
            command = json.loads(line)
        except ValueError:
            continue
        if command.get("error") is None and command.get("command") in ("pause_all", "resume_all"):
            return command["command"] == "pause_all"
    return False


def _from_logs(
    reader: ExperimentReader, spec: dict[str, Any], problems: list[str]
) -> tuple[dict[str, Any] | None, float | None]:
    """The summary of a run that has none, from its journal and result log, and the time of
    its last result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn last line of a killed run is no news here
        results = _guarded(reader.results, problems, "results.jsonl")
        if results is None:
            return None, None
        metric, mode = spec.get("metric"), spec.get("mode")
        trials = _guarded(lambda: reader.trials(results, metric, mode), problems, "the journal")
    last = max((_number(row.get("timestamp")) or 0.0 for row in results), default=None)
    constraints = Constraints.parse(spec.get("constraints"))
    return (None if trials is None else summarize(trials, metric, mode, constraints)), last


def _duration(
    state: str,
    started: float | None,
    outcome: dict[str, Any] | None,
    last_record: float | None,
    folder: Path,
) -> float | None:
    if started is None:
        return None
    if outcome is not None:
        end = _number(outcome.get("ended_at"))
    elif state == "interrupted":
        end = last_record or _modified(folder)
    else:
        end = time.time()
    return None if end is None else max(0.0, end - started)


def _modified(folder: Path) -> float | None:
    """When the run last wrote one of its logs."""
    times = []
    for name in ("results.jsonl", "trials.jsonl"):
        try:
            times.append((folder / name).stat().st_mtime)
        except OSError:
            continue
    return max(times, default=None)


def _guarded(read: Any, problems: list[str], what: str) -> Any:
    """`read()`, or None with a line in `problems` if it fails."""
    try:
        return read()
    except Exception as exc:
        reason = (str(exc).splitlines() or [""])[0]
        problems.append(f"{what} cannot be read ({type(exc).__name__}: {reason})")
        return None


def _metric(value: Any) -> str | None:
    """A metric (or mode) as text: several are joined by commas."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return ", ".join(value)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _sort_time(started: float | None) -> float:
    return math.inf if started is None else started
