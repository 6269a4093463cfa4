"""What nbtune's training-library callbacks cost per boosting round or epoch.

Prints one JSON line per library and setting, for example:

    {"figure": "callback_overhead", "library": "xgboost", "checkpoint_every": null,
     "ms_per_step": 0.19, "ms_in_callback_per_step": 0.08, "plain_ms_per_step": 0.2,
     "step": "round", "steps": 300, ...}

Each trial trains the same model for `steps` rounds (XGBoost, LightGBM) or epochs (Keras on
JAX, Lightning) in a warm loky worker, once without the callback (timed inside the trial) and
once with it. `ms_per_step` is the difference divided by the steps: everything the callback
costs, what its mere presence makes the library do included, but as noisy as the training's
own time. `ms_in_callback_per_step` is the time spent inside the callback's hook per step: the
report's round trip to the runner and, with `checkpoint_every`, saving the model in the
library's format; it leaves out the training's own time and its noise. Medians over `REPEATS`
trials. Keras and Lightning train a two-layer network of 500 weights on the 569 samples, in 9
batches per epoch plus a validation pass; libraries that are not installed are left out.

Usage:
    python benchmarks/integrations.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# benchmarks/sklearn.py would shadow scikit-learn, here and in the worker processes (which
# inherit the path): this script needs nothing of its folder.
sys.path.remove(str(Path(__file__).resolve().parent))

import nbtune as nt

REPEATS = 5
STEPS = {"xgboost": 300, "lightgbm": 300, "keras": 40, "lightning": 40}
HOOKS = {
    "xgboost": "after_iteration",
    "lightgbm": "__call__",
    "keras": "on_epoch_end",
    "lightning": "on_train_epoch_end",
}
"""The method of each callback that the library calls after every step."""
STEP_NAME = {"xgboost": "round", "lightgbm": "round", "keras": "epoch", "lightning": "epoch"}


def train(config):
    from sklearn.datasets import load_breast_cancer

    features, labels = load_breast_cancer(return_X_y=True)
    features = ((features - features.mean(0)) / features.std(0)).astype("float32")
    labels = labels.astype("float32")
    spent: list[float] = []
    callbacks = [timed_callback(config["library"], config["every"], spent)]
    fit = FITS[config["library"]]
    started = time.perf_counter()
    fit(features, labels, STEPS[config["library"]], callbacks if config["with_callback"] else [])
    return {"seconds": time.perf_counter() - started, "in_callback_seconds": sum(spent)}


def timed_callback(library: str, every: int | None, spent: list[float]) -> object:
    """The library's `ReportCallback`, adding the seconds of each call of its hook to `spent`."""
    callback_class = importlib.import_module(f"nbtune.integrations.{library}").ReportCallback
    hook = HOOKS[library]
    untimed = getattr(callback_class, hook)

    def timed(self, *args):
        started = time.perf_counter()
        try:
            return untimed(self, *args)
        finally:
            spent.append(time.perf_counter() - started)

    return type("Timed", (callback_class,), {hook: timed})(checkpoint_every=every)


def fit_xgboost(features, labels, rounds, callbacks):
    import xgboost as xgb

    data = xgb.DMatrix(features, labels)
    xgb.train(
        {"objective": "binary:logistic", "nthread": 1, "max_depth": 2},
        data,
        rounds,
        evals=[(data, "train")],
        verbose_eval=False,
        callbacks=callbacks,
    )


def fit_lightgbm(features, labels, rounds, callbacks):
    import lightgbm as lgb

    data = lgb.Dataset(features, labels)
    lgb.train(
        {"objective": "binary", "verbose": -1, "num_threads": 1, "num_leaves": 4},
        data,
        rounds,
        valid_sets=[data],
        valid_names=["train"],
        callbacks=callbacks,
    )


def fit_keras(features, labels, epochs, callbacks):
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((features.shape[1],)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    model.fit(
        features,
        labels,
        batch_size=64,
        epochs=epochs,
        validation_data=(features, labels),
        verbose=0,
        callbacks=callbacks,
    )


def fit_lightning(features, labels, epochs, callbacks):
    import lightning
    import torch

    class Classifier(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(features.shape[1], 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)
            )

        def loss(self, batch):
            x, y = batch
            return torch.nn.functional.binary_cross_entropy_with_logits(self.net(x).squeeze(-1), y)

        def training_step(self, batch, index):
            loss = self.loss(batch)
            self.log("train_loss", loss, on_step=False, on_epoch=True)
            return loss

        def validation_step(self, batch, index):
            self.log("val_loss", self.loss(batch))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters())

    data = torch.utils.data.TensorDataset(torch.from_numpy(features), torch.from_numpy(labels))
    trainer = lightning.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )
    trainer.fit(
        Classifier(),
        torch.utils.data.DataLoader(data, batch_size=64),
        torch.utils.data.DataLoader(data, batch_size=569),
    )


FITS: dict[str, Callable] = {
    "xgboost": fit_xgboost,
    "lightgbm": fit_lightgbm,
    "keras": fit_keras,
    "lightning": fit_lightning,
}


def seconds(
    storage: str, library: str, with_callback: bool, every: int | None
) -> tuple[float, float]:
    """Median seconds of the trainings, and of the time spent in the callback's hook."""
    space = {"library": library, "with_callback": with_callback, "every": every}
    tuner = nt.Tuner(
        train,
        {**space, "repeat": nt.grid(list(range(REPEATS)))},
        max_concurrent=1,
        name=f"{library}-{with_callback}-{every}",
        storage_path=storage,
        progress=False,
    )
    tuner.run()
    errors = [trial.error for trial in tuner.trials if trial.error]
    if errors:
        raise SystemExit(f"{library}: {errors[0]}")
    finals = tuner.history().dropna(subset=["seconds"])
    return statistics.median(finals["seconds"]), statistics.median(finals["in_callback_seconds"])


def main() -> None:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    installed = [name for name in FITS if importlib.util.find_spec(name)]
    with tempfile.TemporaryDirectory() as storage:
        for library in installed:
            steps = STEPS[library]
            plain, _ = seconds(storage, library, False, None)
            for every in (None, 10):
                reported, in_callback = seconds(storage, library, True, every)
                print(
                    json.dumps(
                        {
                            "figure": "callback_overhead",
                            "library": library,
                            "checkpoint_every": every,
                            "ms_per_step": round((reported - plain) / steps * 1000, 4),
                            "ms_in_callback_per_step": round(in_callback / steps * 1000, 4),
                            "plain_ms_per_step": round(plain / steps * 1000, 4),
                            "step": STEP_NAME[library],
                            "steps": steps,
                            "repeats": REPEATS,
                        }
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
