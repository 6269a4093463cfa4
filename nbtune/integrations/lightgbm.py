"""LightGBM: report each boosting round's evaluation results, checkpoint the booster, resume it.

    import nbtune as nt
    from nbtune.integrations.lightgbm import ReportCallback, resume_kwargs

    def train(config):
        lgb.train(
            config, train_set, valid_sets=[valid_set], valid_names=["validation"],
            callbacks=[ReportCallback({"loss": "validation-binary_logloss"}, checkpoint_every=10)],
            **resume_kwargs(num_boost_round=200),
        )

Results are named `<data set>-<metric>` as Ray Tune names them (`validation-binary_logloss`;
LightGBM calls an unnamed validation set `valid_0`). A scheduler's stop ends `lgb.train` at that
round; a pause checkpoints the booster at that round, and `resume_kwargs` continues from it to
the same 200 rounds in all (build the Datasets inside the trainable, or with
`free_raw_data=False`: LightGBM needs their raw data to continue a model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightgbm

from nbtune.integrations._reporting import MetricNames, Reporter, model_folder, total_rounds

MODEL_FILE = "model.txt"
"""The booster's file in a checkpoint (LightGBM's text format)."""


class ReportCallback:
    """Reports the evaluation results after every boosting round (a LightGBM callback).

    Args:
        metrics: which results to report, under which names:
            `{"loss": "validation-binary_logloss"}`, `["validation-binary_logloss"]`, or None
            for every one under its own name.
        checkpoint_every: save the booster every this many rounds (a directory checkpoint
            holding `model.txt`); None saves it only when the trial is paused.
    """

    order = 30
    """Where LightGBM runs it among the callbacks: after its own recorders and early stopping."""

    def __init__(self, metrics: MetricNames = None, *, checkpoint_every: int | None = None):
        self._reporter = Reporter("lightgbm", metrics, checkpoint_every)

    def __call__(self, env: Any) -> None:
        results = {f"{item[0]}-{item[1]}": float(item[2]) for item in env.evaluation_result_list}
        self._reporter.report(results, env.iteration + 1, lambda folder: _save(env.model, folder))


def resume_kwargs(num_boost_round: int) -> dict[str, Any]:
    """The arguments of `lgb.train` that run the trial to `num_boost_round` rounds in all: from
    its checkpoint (`init_model=` and the rounds still to run) or, on a fresh start, from
    scratch (`num_boost_round=` alone)."""
    rounds = total_rounds("lightgbm", num_boost_round)
    folder = model_folder("lightgbm", MODEL_FILE)
    if folder is None:
        return {"num_boost_round": rounds}
    booster = lightgbm.Booster(model_file=str(folder / MODEL_FILE))
    return {"init_model": booster, "num_boost_round": max(0, rounds - booster.current_iteration())}


def _save(model: Any, folder: Path) -> None:
    if not hasattr(model, "save_model"):
        raise ValueError(
            "lightgbm.ReportCallback(checkpoint_every=...): lgb.cv has no single booster to "
            "checkpoint; checkpoint with lgb.train"
        )
    model.save_model(str(folder / MODEL_FILE))
