"""Keras (on JAX) reports through nbtune's callback, checkpoints its model, stops when a
scheduler says so, and pauses and resumes at any epoch with nothing repeated or missed."""

from __future__ import annotations

import pytest

keras = pytest.importorskip("keras")

import networks  # noqa: E402
from epoch_callbacks import EpochCallbackSuite  # noqa: E402

from nbtune.integrations.keras import resume_kwargs  # noqa: E402


class TestKerasCallback(EpochCallbackSuite):
    library = "keras"
    trainable = staticmethod(networks.keras_fits)
    checkpoint_file = "model.keras"
    default_names = frozenset({"loss", "accuracy", "val_loss", "val_accuracy"})


def test_a_model_keras_cannot_save_is_a_one_line_error(make_tuner):
    tuner = make_tuner(networks.keras_fits_a_model_without_config, {}, metric="loss")
    tuner.run()
    assert tuner.get_trial(0).error == (
        "ValueError: keras.ReportCallback: Opaque cannot be saved as model.keras: implement its "
        "get_config() (Keras asks it of a subclassed model whose __init__ takes arguments it "
        "cannot serialize)"
    )


def test_keras_runs_on_jax_here_and_in_the_workers(make_tuner):
    assert keras.backend.backend() == "jax"
    tuner = make_tuner(networks.keras_backend, {})
    tuner.run()
    assert list(tuner.history()["backend"]) == ["jax"]


@pytest.mark.parametrize("built, compiled", [(True, False), (False, True)])
def test_resume_kwargs_wants_a_built_and_compiled_model(built, compiled):
    model = keras.Sequential([keras.Input((8,))] * built + [keras.layers.Dense(1)])
    if compiled:
        model.compile("adam", "mse")
    with pytest.raises(ValueError, match=r"^keras.resume_kwargs\(model=Sequential\): .* compiled$"):
        resume_kwargs(model)
