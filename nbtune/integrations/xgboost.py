"""XGBoost: report each boosting round's evaluation results, checkpoint the booster, resume it.

    import nbtune as nt
    from nbtune.integrations.xgboost import ReportCallback, resume_kwargs

    def train(config):
        xgb.train(
            config, dtrain, evals=[(dvalid, "validation")], verbose_eval=False,
            callbacks=[ReportCallback({"loss": "validation-logloss"}, checkpoint_every=10)],
            **resume_kwargs(num_boost_round=200),
        )

Results are named `<data set>-<metric>` as Ray Tune names them (`validation-logloss`,
`train-error`). A scheduler's stop ends `xgb.train` at that round; a pause checkpoints the
booster at that round, and `resume_kwargs` continues from it to the same 200 rounds in all.
Works with `xgb.train` and the scikit-learn API (`XGBClassifier(callbacks=[...])`, then
`fit(..., xgb_model=resume_kwargs(n)["xgb_model"])`); with `xgb.cv` it reports the means.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import xgboost

from nbtune.integrations._reporting import MetricNames, Reporter, model_folder, total_rounds

MODEL_FILE = "model.ubj"
"""The booster's file in a checkpoint (XGBoost's binary JSON format)."""


class ReportCallback(xgboost.callback.TrainingCallback):
    """Reports the evaluation results after every boosting round.

    Args:
        metrics: which results to report, under which names: `{"loss": "validation-logloss"}`,
            `["validation-logloss"]`, or None for every one under its own name.
        checkpoint_every: save the booster every this many rounds (a directory checkpoint
            holding `model.ubj`); None saves it only when the trial is paused.
    """

    def __init__(self, metrics: MetricNames = None, *, checkpoint_every: int | None = None):
        super().__init__()
        self._reporter = Reporter("xgboost", metrics, checkpoint_every)

    def after_iteration(self, model: Any, epoch: int, evals_log: dict) -> bool:
        results = {
            f"{data}-{metric}": _mean(values[-1])
            for data, by_metric in evals_log.items()
            for metric, values in by_metric.items()
        }
        step = model.num_boosted_rounds() if hasattr(model, "num_boosted_rounds") else epoch + 1
        self._reporter.report(results, step, lambda folder: _save(model, folder))
        return False


def resume_kwargs(num_boost_round: int) -> dict[str, Any]:
    """The arguments of `xgb.train` that run the trial to `num_boost_round` rounds in all: from
    its checkpoint (`xgb_model=` and the rounds still to run) or, on a fresh start, from
    scratch (`num_boost_round=` alone)."""
    rounds = total_rounds("xgboost", num_boost_round)
    folder = model_folder("xgboost", MODEL_FILE)
    if folder is None:
        return {"num_boost_round": rounds}
    booster = xgboost.Booster(model_file=str(folder / MODEL_FILE))
    return {"xgb_model": booster, "num_boost_round": max(0, rounds - booster.num_boosted_rounds())}


def _save(model: Any, folder: Path) -> None:
    if not hasattr(model, "save_model"):
        raise ValueError(
            "xgboost.ReportCallback(checkpoint_every=...): xgb.cv has no single booster to "
            "checkpoint; checkpoint with xgb.train"
        )
    model.save_model(str(folder / MODEL_FILE))


def _mean(value: Any) -> float:
    """A result, or the mean of xgb.cv's (mean, std) pair."""
    return float(value[0] if isinstance(value, tuple) else value)
