"""Hugging Face Transformers: report each evaluation of a `Trainer`, checkpoint it, resume it.

    import nbtune as nt
    from nbtune.integrations.transformers import ReportCallback, resume_kwargs

    def train(config):
        args = TrainingArguments(
            "out", eval_strategy="epoch", num_train_epochs=20, report_to="none",
            learning_rate=config["lr"],
        )
        trainer = Trainer(
            model, args, train_dataset=train_set, eval_dataset=valid_set,
            callbacks=[ReportCallback({"loss": "eval_loss"}, checkpoint_every=5)],
        )
        trainer.train(**resume_kwargs(trainer))

Each evaluation is one result, the metrics the Trainer hands its callbacks (`eval_loss`,
`eval_accuracy` from `compute_metrics`, `epoch`, ...), as in Ray Tune: with
`eval_strategy="epoch"`, iteration k is epoch k. A scheduler's stop ends `train()` after that
evaluation (`control.should_training_stop`). A pause saves the Trainer's own checkpoint (model,
optimizer, learning-rate scheduler, RNG states, trainer state), and `resume_kwargs(trainer)`
gives `train()` the `resume_from_checkpoint=` of that checkpoint, from which the Trainer goes
on at the next epoch, to the same `num_train_epochs` in all (`None` on a fresh start). It also
hands the callback its Trainer, which the callback needs to save a checkpoint: without it the
callback only reports, and a pause waits in the trial's worker. With several eval data sets,
each one's evaluation is a result of its own.
"""

from __future__ import annotations

import shutil
import weakref
from pathlib import Path
from typing import Any

try:
    import transformers
except ModuleNotFoundError:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "nbtune.integrations.transformers needs Hugging Face Transformers and PyTorch: "
        "pip install 'nbtune[transformers]'"
    ) from None

from nbtune.integrations._reporting import MetricNames, Reporter, model_folder
from nbtune.metrics import number
from nbtune.session import TrialPaused, TrialStopped

STATE_FILE = "trainer_state.json"
"""The file that marks a Trainer's checkpoint (beside the model, optimizer, scheduler and RNG)."""
_CHECKPOINT_PREFIX = "checkpoint"
"""The Trainer's checkpoint folders in its output_dir: `checkpoint-<global step>`."""


class ReportCallback(transformers.TrainerCallback):
    """Reports the metrics of every evaluation (a Hugging Face `TrainerCallback`).

    Args:
        metrics: which metrics to report, under which names: `{"loss": "eval_loss"}`,
            `["eval_loss"]`, or None for every one under its own name.
        checkpoint_every: save the Trainer's checkpoint every this many evaluations; None
            saves it only when the trial is paused. Either needs `resume_kwargs(trainer)`.
    """

    def __init__(self, metrics: MetricNames = None, *, checkpoint_every: int | None = None):
        super().__init__()
        self._reporter = Reporter("transformers", metrics, checkpoint_every)
        self._every = checkpoint_every
        self._trainer: weakref.ref | None = None

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        trainer = None if self._trainer is None else self._trainer()
        if trainer is None and self._every is not None:
            raise ValueError(
                "transformers.ReportCallback(checkpoint_every=...): the callback saves the "
                "Trainer's checkpoints; call trainer.train(**resume_kwargs(trainer))"
            )
        results = {}
        for name, value in (kwargs.get("metrics") or {}).items():
            value = number(value)
            if value is not None and not isinstance(value, bool):
                results[name] = float(value)
        save = None if trainer is None else (lambda folder: _save(trainer, folder))
        try:
            self._reporter.report(results, _evaluations(state), save)
        except (TrialStopped, TrialPaused):
            control.should_training_stop = True
        return control


def resume_kwargs(trainer: Any) -> dict[str, str | None]:
    """The arguments of `trainer.train` that continue the trial after its checkpoint's epoch;
    hands `trainer` to its ReportCallback, which saves the checkpoints.

    Returns:
        `{"resume_from_checkpoint": the checkpoint's folder}`, or None in it on a fresh start.
    """
    handler = getattr(trainer, "callback_handler", None)
    callbacks = [c for c in getattr(handler, "callbacks", ()) if isinstance(c, ReportCallback)]
    if not callbacks:
        raise ValueError(
            "transformers.resume_kwargs(trainer): the Trainer has no ReportCallback; pass "
            "Trainer(..., callbacks=[ReportCallback(...)])"
        )
    for callback in callbacks:
        callback._trainer = weakref.ref(trainer)
    folder = model_folder("transformers", STATE_FILE)
    return {"resume_from_checkpoint": None if folder is None else str(folder)}


def _evaluations(state: Any) -> int:
    """The evaluations of the whole training so far, a resumed one included (the Trainer logs
    each one's metrics, `eval_...`, in its state, which a checkpoint holds)."""
    return sum(any(key.startswith("eval_") for key in entry) for entry in state.log_history)


def _save(trainer: Any, folder: Path) -> None:
    """The Trainer's own checkpoint of this very step, moved (or copied, if the Trainer keeps
    one of the same step) into `folder`."""
    save_checkpoint = getattr(trainer, "_save_checkpoint", None)
    if save_checkpoint is None:  # pragma: no cover - depends on the transformers release
        raise RuntimeError(
            f"transformers.ReportCallback: transformers {transformers.__version__}'s Trainer "
            "has no _save_checkpoint; install transformers>=4.40"
        )
    source = Path(trainer.args.output_dir) / f"{_CHECKPOINT_PREFIX}-{trainer.state.global_step}"
    kept = source.exists()
    save_checkpoint(trainer.model, trial=None)
    if kept:
        shutil.copytree(source, folder, dirs_exist_ok=True)
        return
    for item in source.iterdir():
        shutil.move(item, folder / item.name)
    source.rmdir()
