"""CatBoost: report each iteration's evaluation results, checkpoint its snapshot, resume from it.

    import nbtune as nt
    from nbtune.integrations.catboost import ReportCallback, resume_kwargs

    def train(config):
        model = CatBoostClassifier(iterations=200, verbose=False, **config)
        model.fit(
            X, y, eval_set=(X_valid, y_valid),
            callbacks=[ReportCallback({"loss": "validation-Logloss"}, checkpoint_every=10)],
            **resume_kwargs(),
        )

Results are named `<data set>-<metric>` with CatBoost's own names: `learn-Logloss`,
`validation-Logloss` (`validation_0`, `validation_1`, ... with several eval sets). A scheduler's
stop or a pause ends `fit` at that iteration, as CatBoost's own early stopping does: `fit`
returns the model trained so far, and the trial ends there (a later `nbtune.report` raises the
stop again, so code after `fit` may run but reports nothing).

`resume_kwargs()` makes CatBoost write its snapshot (`save_snapshot`, `snapshot_file`) after
every iteration, to a file of the trial's own: a checkpoint is a copy of that snapshot, so a
pause at any iteration resumes at the next, and a resumed `fit` continues from it to the same
`iterations` in all (give it the same parameters and data: CatBoost refuses a snapshot of
other parameters). Without `resume_kwargs()` the callback only reports, and a pause waits in
the trial's worker. An error inside the callback (a metric CatBoost does not compute) reaches
the trainable as CatBoost's `CatBoostError`, whose traceback ends with the callback's own.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import catboost  # noqa: F401  (the library this module serves: fail here if it is missing)
except ModuleNotFoundError:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "nbtune.integrations.catboost needs CatBoost: pip install 'nbtune[catboost]'"
    ) from None

from nbtune.integrations._reporting import MetricNames, Reporter, model_folder
from nbtune.session import TrialPaused, TrialStopped, _current

SNAPSHOT_FILE = "snapshot.cbsnapshot"
"""CatBoost's snapshot in a checkpoint: the model and the state of its training."""
ITERATION_FILE = "iteration.json"
"""The iteration the snapshot in a checkpoint was taken at."""


@dataclass
class _Snapshots:
    """Where CatBoost writes one trial's snapshot, and the iteration its fit resumes after."""

    file: Path
    start: int

    def save(self, iteration: int, folder: Path) -> None:
        shutil.copyfile(self.file, folder / SNAPSHOT_FILE)
        (folder / ITERATION_FILE).write_text(json.dumps({"iteration": iteration}))


_TRIALS: weakref.WeakKeyDictionary[Any, _Snapshots] = weakref.WeakKeyDictionary()
"""The snapshots of each running trial, by its session (a trial's `resume_kwargs` sets them
for its callback to find; they go when the trial does)."""


class ReportCallback:
    """Reports the evaluation results after every iteration (a CatBoost callback).

    Args:
        metrics: which results to report, under which names: `{"loss": "validation-Logloss"}`,
            `["validation-Logloss"]`, or None for every one under its own name.
        checkpoint_every: checkpoint the training every this many iterations (a directory
            checkpoint holding CatBoost's snapshot); None checkpoints it only when the trial
            is paused. Either needs `fit(..., **resume_kwargs())`.
    """

    def __init__(self, metrics: MetricNames = None, *, checkpoint_every: int | None = None):
        self._reporter = Reporter("catboost", metrics, checkpoint_every)
        self._every = checkpoint_every

    def after_iteration(self, info: Any) -> bool:
        """Report iteration `info.iteration`; False (end `fit`) once the trial must end."""
        snapshots = _TRIALS.get(_current())
        if snapshots is None and self._every is not None:
            raise ValueError(
                "catboost.ReportCallback(checkpoint_every=...): checkpoints are CatBoost's "
                "snapshots; pass **resume_kwargs() to fit so that it writes them"
            )
        step = int(info.iteration)
        if snapshots is not None and step <= snapshots.start:
            return True  # the snapshot's own iteration, which CatBoost replays on a resume
        results = {
            f"{data}-{metric}": float(values[-1])
            for data, by_metric in info.metrics.items()
            for metric, values in by_metric.items()
            if len(values)
        }
        save = None if snapshots is None else (lambda folder: snapshots.save(step, folder))
        try:
            self._reporter.report(results, step, save)
        except (TrialStopped, TrialPaused):
            return False  # raised through CatBoost, they would come out as a CatBoostError
        return True


def resume_kwargs() -> dict[str, Any]:
    """The arguments of `fit` that make CatBoost write a snapshot after every iteration, to a
    file of the trial's own, and continue from the trial's checkpoint if it has one.

    Returns:
        `{"save_snapshot": True, "snapshot_file": ..., "snapshot_interval": 0}`.
    """
    session = _current()
    folder = model_folder("catboost", SNAPSHOT_FILE)
    scratch = Path(tempfile.mkdtemp(prefix="nbtune-catboost-"))
    file = scratch / SNAPSHOT_FILE
    start = 0
    if folder is not None:
        shutil.copyfile(folder / SNAPSHOT_FILE, file)
        start = _iteration(folder)
    snapshots = _Snapshots(file, start)
    weakref.finalize(snapshots, shutil.rmtree, scratch, True)
    _TRIALS[session] = snapshots
    return {"save_snapshot": True, "snapshot_file": str(file), "snapshot_interval": 0}


def _iteration(folder: Path) -> int:
    try:
        return int(json.loads((folder / ITERATION_FILE).read_text())["iteration"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(
            f"catboost.resume_kwargs(): the trial's checkpoint holds no {ITERATION_FILE} (it was "
            "not written by catboost.ReportCallback); resume from your own checkpoint by hand"
        ) from None
