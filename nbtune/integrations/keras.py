"""Keras: report each epoch's results, checkpoint the model, resume it at the next epoch.

    import nbtune as nt
    from nbtune.integrations.keras import ReportCallback, resume_kwargs

    def train(config):
        model = build_and_compile(config)
        model.fit(
            x, y, validation_data=(x_valid, y_valid), epochs=20, verbose=0,
            callbacks=[ReportCallback({"loss": "val_loss"}, checkpoint_every=5)],
            **resume_kwargs(model),
        )

Results keep the names Keras gives them in `fit`'s logs (`loss`, `accuracy`, `val_loss`,
`val_accuracy`), as in Ray Tune. A scheduler's stop ends `fit` after that epoch; a pause
checkpoints the model after the epoch it comes, and `resume_kwargs(model)` loads the
checkpoint's weights and optimizer state into the freshly built `model` and returns the
`initial_epoch=` that continues at the next epoch, to the same 20 in all (on a fresh start it
leaves the model as it is and returns `initial_epoch=0`). The resumed training equals an unpaused
one where the data order does not depend on the epoch (`shuffle=False`): `fit` shuffles anew.

Keras picks its back end (`KERAS_BACKEND`: jax, torch, tensorflow) once, when it is first
imported, in each process: set `os.environ["KERAS_BACKEND"]` in the notebook before the first
run starts worker processes (they start with the kernel's environment and stay for later runs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import keras

from nbtune.integrations._reporting import MetricNames, Reporter, model_folder

MODEL_FILE = "model.keras"
"""The model's file in a checkpoint (Keras's own format: architecture, weights, optimizer)."""
EPOCH_FILE = "training_metadata.json"
"""How many epochs the checkpointed model has trained, as `{"epoch": 7}`."""


class ReportCallback(keras.callbacks.Callback):
    """Reports the results of `fit`'s logs after every epoch.

    Args:
        metrics: which results to report, under which names: `{"loss": "val_loss"}`,
            `["val_loss", "val_accuracy"]`, or None for every one under its own name.
        checkpoint_every: save the model every this many epochs (a directory checkpoint
            holding `model.keras`); None saves it only when the trial is paused.
    """

    def __init__(self, metrics: MetricNames = None, *, checkpoint_every: int | None = None):
        super().__init__()
        self._reporter = Reporter("keras", metrics, checkpoint_every)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        results = {name: float(value) for name, value in (logs or {}).items()}
        self._reporter.report(
            results, epoch + 1, lambda folder: _save(self.model, epoch + 1, folder)
        )


def resume_kwargs(model: keras.Model) -> dict[str, int]:
    """The arguments of `model.fit` that continue the trial after its checkpoint's epoch.

    Loads the checkpoint's weights and optimizer state into `model`, which must be built
    (`keras.Input`, or `model.build(shape)`) and compiled as the checkpointed one was; on a
    fresh start the model is left as it is.

    Returns:
        `{"initial_epoch": epochs already trained}`, 0 on a fresh start.
    """
    if not isinstance(model, keras.Model) or not model.built or not model.compiled:
        raise ValueError(
            f"keras.resume_kwargs(model={type(model).__name__}): pass the trial's Keras model, "
            "built (keras.Input, or model.build(shape)) and compiled"
        )
    folder = model_folder("keras", EPOCH_FILE)
    if folder is None:
        return {"initial_epoch": 0}
    if not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    model.load_weights(str(folder / MODEL_FILE))
    return {"initial_epoch": json.loads((folder / EPOCH_FILE).read_text())["epoch"]}


def _save(model: keras.Model, epochs: int, folder: Path) -> None:
    try:
        model.save(folder / MODEL_FILE)
    except NotImplementedError as exc:
        raise ValueError(
            f"keras.ReportCallback: {type(model).__name__} cannot be saved as {MODEL_FILE}: "
            "implement its get_config() (Keras asks it of a subclassed model whose __init__ "
            "takes arguments it cannot serialize)"
        ) from exc
    (folder / EPOCH_FILE).write_text(json.dumps({"epoch": epochs}))
