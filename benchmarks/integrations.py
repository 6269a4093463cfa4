"""What nbtune's training-library callbacks cost per boosting round or epoch.

Prints one JSON line per library and setting, for example:

    {"figure": "callback_overhead", "library": "xgboost", "checkpoint_every": null,
     "ms_per_step": 0.19, "ms_in_callback_per_step": 0.08, "plain_ms_per_step": 0.2,
     "step": "round", "steps": 300, ...}

Each trial trains the same model for `steps` rounds (XGBoost, LightGBM), iterations (CatBoost)
or epochs (Keras on JAX, Lightning, Transformers) in a warm loky worker, once without the
callback (timed inside the trial) and once with it. `ms_per_step` is the difference divided by
the steps: everything the callback costs, what its mere presence makes the library do included,
but as noisy as the training's own time. `ms_in_callback_per_step` is the time spent inside the
callback's hook per step: the report's round trip to the runner and, with `checkpoint_every`,
saving the model in the library's format; it leaves out the training's own time and its noise.
Medians over `REPEATS` trials. Keras and Lightning train a two-layer network of 500 weights on
the 569 samples, in 9 batches per epoch plus a validation pass. CatBoost runs with
`resume_kwargs()`, which makes it write its snapshot after every iteration (what lets a pause
resume at any iteration): that write is in `ms_per_step`, not in `ms_in_callback_per_step`.
Transformers trains a one-layer BERT (built from its config) on 64 random sequences of 8
tokens, in 4 batches per epoch plus an evaluation, and hands the callback its Trainer with
`resume_kwargs(trainer)`. Libraries that are not installed are left out.

Usage:
    python benchmarks/integrations.py [LIBRARY ...]   (default: every one installed)
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
STEPS = {
    "xgboost": 300,
    "lightgbm": 300,
    "catboost": 300,
    "keras": 40,
    "lightning": 40,
    "transformers": 40,
}
HOOKS = {
    "xgboost": "after_iteration",
    "lightgbm": "__call__",
    "catboost": "after_iteration",
    "keras": "on_epoch_end",
    "lightning": "on_train_epoch_end",
    "transformers": "on_evaluate",
}
"""The method of each callback that the library calls after every step."""
STEP_NAME = {
    "xgboost": "round",
    "lightgbm": "round",
    "catboost": "iteration",
    "keras": "epoch",
    "lightning": "epoch",
    "transformers": "epoch",
}


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

    def timed(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return untimed(self, *args, **kwargs)
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


def fit_catboost(features, labels, iterations, callbacks):
    from catboost import CatBoostClassifier

    from nbtune.integrations.catboost import resume_kwargs

    with tempfile.TemporaryDirectory() as train_dir:
        CatBoostClassifier(
            iterations=iterations, depth=2, thread_count=1, verbose=False, train_dir=train_dir
        ).fit(
            features,
            labels,
            eval_set=(features, labels),
            callbacks=callbacks or None,
            **(resume_kwargs() if callbacks else {}),
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


def fit_transformers(features, labels, epochs, callbacks):
    import torch
    import transformers

    from nbtune.integrations.transformers import resume_kwargs

    transformers.set_seed(0)
    model = transformers.BertForSequenceClassification(
        transformers.BertConfig(
            num_hidden_layers=1,
            hidden_size=32,
            num_attention_heads=2,
            intermediate_size=37,
            vocab_size=100,
        )
    )
    ids = torch.randint(0, 100, (64, 8), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": row, "labels": int(row[0] < 50)} for row in ids]
    with tempfile.TemporaryDirectory() as output_dir:
        args = transformers.TrainingArguments(
            output_dir,
            eval_strategy="epoch",
            save_strategy="no",
            logging_strategy="epoch",
            num_train_epochs=epochs,
            per_device_train_batch_size=16,
            report_to="none",
            disable_tqdm=True,
            use_cpu=True,
        )
        trainer = transformers.Trainer(
            model, args, train_dataset=data, eval_dataset=data, callbacks=callbacks
        )
        trainer.train(**(resume_kwargs(trainer) if callbacks else {}))


FITS: dict[str, Callable] = {
    "xgboost": fit_xgboost,
    "lightgbm": fit_lightgbm,
    "catboost": fit_catboost,
    "keras": fit_keras,
    "lightning": fit_lightning,
    "transformers": fit_transformers,
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
    wanted = sys.argv[1:] or list(FITS)
    unknown = sorted(set(wanted) - set(FITS))
    if unknown:
        raise SystemExit(f"no such library: {unknown[0]}; pick among {', '.join(FITS)}")
    installed = [name for name in wanted if importlib.util.find_spec(name)]
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
