"""PyTorch Lightning: report each epoch's metrics, checkpoint the trainer, resume at the next epoch.

    import lightning as L
    import nbtune as nt
    from nbtune.integrations.lightning import ReportCallback, resume_kwargs

    def train(config):
        trainer = L.Trainer(
            max_epochs=20, enable_progress_bar=False, logger=False,
            callbacks=[ReportCallback({"loss": "val_loss"}, checkpoint_every=5)],
        )
        trainer.fit(Model(config), train_loader, valid_loader, **resume_kwargs())

Results are `trainer.callback_metrics` at the end of each training epoch, under the names the
LightningModule `self.log`s them (`val_loss`, `train_loss`), as in Ray Tune. A scheduler's stop
ends `fit` after that epoch; a pause checkpoints the trainer after the epoch it comes, and
`resume_kwargs()` gives `fit` the `ckpt_path=` of that checkpoint, from which Lightning
restores the model, optimizer and loops and continues at the next epoch, to the same
`max_epochs` in all (`ckpt_path=None` on a fresh start). The resumed training equals an unpaused
one where the data order does not depend on the epoch (no shuffling, or a sampler that seeds
itself with the epoch): a new DataLoader shuffles anew. The callback is a `lightning.pytorch`
one: for the older `pytorch_lightning` package, install `lightning` instead.
"""

from __future__ import annotations

from typing import Any

import lightning

from nbtune.integrations._reporting import MetricNames, Reporter, model_folder

CHECKPOINT_FILE = "checkpoint.ckpt"
"""The trainer's file in a checkpoint (Lightning's own: model, optimizers, loops, callbacks)."""


class ReportCallback(lightning.pytorch.Callback):
    """Reports `trainer.callback_metrics` after every training epoch.

    Args:
        metrics: which metrics to report, under which names: `{"loss": "val_loss"}`,
            `["val_loss"]`, or None for every one under its own name.
        checkpoint_every: save the trainer every this many epochs (a directory checkpoint
            holding `checkpoint.ckpt`); None saves it only when the trial is paused.
    """

    def __init__(self, metrics: MetricNames = None, *, checkpoint_every: int | None = None):
        super().__init__()
        self._reporter = Reporter("lightning", metrics, checkpoint_every)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        results = {name: float(value) for name, value in trainer.callback_metrics.items()}
        self._reporter.report(
            results,
            trainer.current_epoch + 1,
            lambda folder: trainer.save_checkpoint(folder / CHECKPOINT_FILE, weights_only=False),
        )


def resume_kwargs() -> dict[str, str | None]:
    """The arguments of `trainer.fit` that continue the trial after its checkpoint's epoch.

    Returns:
        `{"ckpt_path": the checkpoint's file}`, or `{"ckpt_path": None}` on a fresh start.
    """
    folder = model_folder("lightning", CHECKPOINT_FILE)
    return {"ckpt_path": None if folder is None else str(folder / CHECKPOINT_FILE)}
