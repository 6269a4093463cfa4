"""Trainables that fit a tiny network with Keras or Lightning through nbtune's callbacks.

Both learn the same toy problem (is x0 + x1 > 0, from 8 normal features; 200 samples to train
on, 100 to validate), in full batches of 50 without shuffling, so that a run is the same
every time and a resumed run the same as an unpaused one. Config: `epochs` in all, `metrics`
and `every` for the callback, `nap` seconds per epoch to leave time to pause the trial.
"""

from __future__ import annotations

import time

import numpy as np


def toy_data():
    """(train features, train labels, validation features, validation labels), float32."""
    features = np.random.default_rng(0).normal(size=(300, 8)).astype("float32")
    labels = (features[:, 0] + features[:, 1] > 0).astype("float32")
    return features[:200], labels[:200], features[200:], labels[200:]


def keras_fits(config):
    """Fits a two-layer Keras classifier for `epochs` epochs in all."""
    import keras

    from nbtune.integrations.keras import ReportCallback, resume_kwargs

    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy", metrics=["accuracy"])
    x, y, x_valid, y_valid = toy_data()

    class Nap(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            time.sleep(config.get("nap", 0.0))

    model.fit(
        x,
        y,
        batch_size=50,
        epochs=config["epochs"],
        validation_data=(x_valid, y_valid),
        shuffle=False,
        verbose=0,
        callbacks=[
            Nap(),
            ReportCallback(config.get("metrics"), checkpoint_every=config.get("every")),
        ],
        **resume_kwargs(model),
    )


def keras_backend(config):
    """Reports the back end Keras runs on in the worker."""
    import keras

    import nbtune

    nbtune.report(backend=keras.backend.backend())


def keras_fits_a_model_without_config(config):
    """Fits a subclassed Keras model that Keras cannot save whole (it has no `get_config`),
    checkpointing after every epoch."""
    import keras

    from nbtune.integrations.keras import ReportCallback

    class Opaque(keras.Model):
        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def call(self, features):
            return self.layer(features)

    model = Opaque(keras.layers.Dense(1, activation="sigmoid"))
    model.compile("adam", "binary_crossentropy")
    x, y, _, _ = toy_data()
    model.fit(x, y, epochs=2, verbose=0, callbacks=[ReportCallback(checkpoint_every=1)])


def resumes_from_a_checkpoint_of_its_own(config):
    """Checkpoints a folder of its own making and fails; started again from that checkpoint
    (`max_failures=1`), it asks the `library`'s `resume_kwargs` to continue from it."""
    import tempfile

    import nbtune

    if nbtune.get_checkpoint() is None:
        folder = tempfile.mkdtemp()
        nbtune.report(step=1, checkpoint=nbtune.Checkpoint.from_directory(folder))
        raise RuntimeError("fails, to be started again from its checkpoint")
    if config["library"] == "keras":
        import keras

        from nbtune.integrations.keras import resume_kwargs

        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
        model.compile("adam", "mse")
        resume_kwargs(model)
    else:
        from nbtune.integrations.lightning import resume_kwargs

        resume_kwargs()


def lightning_fits(config):
    """Fits `classifier()` for `epochs` epochs in all."""
    import lightning
    import torch

    from nbtune.integrations.lightning import ReportCallback, resume_kwargs

    lightning.seed_everything(1, verbose=False)
    x, y, x_valid, y_valid = (torch.from_numpy(array) for array in toy_data())

    def batches(features, labels):
        dataset = torch.utils.data.TensorDataset(features, labels)
        return torch.utils.data.DataLoader(dataset, batch_size=50)

    class Nap(lightning.pytorch.Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            time.sleep(config.get("nap", 0.0))

    trainer = lightning.Trainer(
        max_epochs=config["epochs"],
        accelerator="cpu",
        deterministic=True,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[
            Nap(),
            ReportCallback(config.get("metrics"), checkpoint_every=config.get("every")),
        ],
    )
    trainer.fit(classifier(), batches(x, y), batches(x_valid, y_valid), **resume_kwargs())


def classifier():
    """A two-layer Lightning classifier that logs `train_loss` (per epoch) and `val_loss`."""
    import lightning
    import torch

    class Classifier(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)
            )

        def loss(self, batch):
            features, labels = batch
            logits = self.net(features).squeeze(-1)
            return torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)

        def training_step(self, batch, index):
            loss = self.loss(batch)
            self.log("train_loss", loss, on_step=False, on_epoch=True)
            return loss

        def validation_step(self, batch, index):
            self.log("val_loss", self.loss(batch))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=0.01)

    return Classifier()
