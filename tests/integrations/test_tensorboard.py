"""TensorBoardLogger writes event files that TensorBoard's own reader reads back: a scalar per
metric at every step, each trial's HParams session (its config, how it ended) and the
experiment's HParams config; all without TensorFlow."""

from __future__ import annotations

import sys

import pytest
import trainables

import nbtune as nt

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing import (
    event_accumulator,
    event_file_loader,
)
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

from nbtune.integrations.tensorboard import TensorBoardLogger


def read(folder):
    """The scalars (tag -> [(step, value)]) and HParams records (tag -> plugin data) of the
    event files in `folder`."""
    accumulator = event_accumulator.EventAccumulator(
        str(folder), size_guidance={event_accumulator.SCALARS: 0}
    )
    accumulator.Reload()
    scalars = {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }
    hparams = {
        tag: plugin_data_pb2.HParamsPluginData.FromString(content)
        for tag, content in accumulator.PluginTagToContent("hparams").items()
    }
    return scalars, hparams


def tags_written(folder):
    """Every summary tag written in `folder`'s event files, once per time written."""
    return [
        value.tag
        for path in sorted(folder.glob("events.out.tfevents.*"))
        for event in event_file_loader.EventFileLoader(str(path)).Load()
        for value in event.summary.value
    ]


def hparam_values(start):
    values = start.session_start_info.hparams
    return {name: getattr(value, value.WhichOneof("kind")) for name, value in values.items()}


def test_every_metric_is_a_scalar_at_every_step_and_every_trial_an_hparams_session(
    make_tuner, tmp_path
):
    logger = TensorBoardLogger(tmp_path / "tensorboard")
    space = {"fail_at": nt.grid([3, 99]), "optimizer": {"name": "adam", "nesterov": False}}
    tuner = make_tuner(
        trainables.fail_at, space, metric="loss", executor=nt.ThreadExecutor(), callbacks=[logger]
    )
    tuner.run()
    assert logger.failure is None
    assert logger.folder == tmp_path / "tensorboard" / tuner.name
    assert "tensorflow" not in sys.modules

    history = tuner.history()
    for trial_id, status in [(0, api_pb2.STATUS_FAILURE), (1, api_pb2.STATUS_SUCCESS)]:
        scalars, hparams = read(logger.folder / f"trial_{trial_id}")
        rows = history[history["trial_id"] == trial_id]
        steps, values = zip(*scalars["loss"], strict=True)
        assert list(steps) == list(rows["training_iteration"])
        assert list(values) == pytest.approx(list(rows["loss"])), "as float32"
        assert [step for step, _ in scalars["time_total_s"]] == list(rows["training_iteration"])
        assert hparam_values(hparams["_hparams_/session_start_info"]) == {
            "fail_at": tuner.get_trial(trial_id).config["fail_at"],
            "optimizer/name": "adam",
            "optimizer/nesterov": False,
        }
        assert hparams["_hparams_/session_end_info"].session_end_info.status == status

    _, hparams = read(logger.folder)
    experiment = hparams["_hparams_/experiment"].experiment
    assert {(info.name, info.type) for info in experiment.hparam_infos} == {
        ("fail_at", api_pb2.DATA_TYPE_FLOAT64),
        ("optimizer/name", api_pb2.DATA_TYPE_STRING),
        ("optimizer/nesterov", api_pb2.DATA_TYPE_BOOL),
    }
    assert {info.name.tag for info in experiment.metric_infos} == {"loss", "time_total_s"}


def test_by_default_the_event_files_sit_in_the_experiment_folder_of_worker_processes(
    make_tuner,
):
    logger = TensorBoardLogger()
    tuner = make_tuner(
        trainables.quadratic,
        {"lr": nt.grid([0.01, 0.1]), "layers": 1},
        metric="loss",
        callbacks=[logger],
    )
    tuner.run()
    assert logger.folder == tuner.path.resolve()
    for trial_id in (0, 1):
        scalars, _ = read(tuner.path / f"trial_{trial_id}")
        assert [step for step, _ in scalars["loss"]] == list(range(1, 21))
    assert len(nt.load(tuner.path).dataframe()) == 2, "the experiment folder still reads back"
    again = nt.Tuner.restore(tuner.path, trainables.quadratic, progress=False)
    assert again.path == tuner.path, "and restores: nbtune takes the folders as its own"


def test_a_restored_trial_goes_on_in_its_folder_with_one_session(make_tuner, tmp_path, stop_midway):
    space = {"steps": 12, "interval": 0.02, "checkpoint": True, "x": nt.grid([0, 1])}
    logdir = tmp_path / "tensorboard"
    tuner = make_tuner(
        trainables.steps, space, metric="loss", callbacks=[TensorBoardLogger(logdir)]
    )
    stop_midway(tuner, iteration=3)
    _, hparams = read(logdir / tuner.name / "trial_0")
    assert "_hparams_/session_end_info" not in hparams, "still open: restore carries it on"

    again = nt.Tuner.restore(
        tuner.path, trainables.steps, progress=False, callbacks=[TensorBoardLogger(logdir)]
    )
    again.run()
    scalars, hparams = read(logdir / tuner.name / "trial_0")
    assert [step for step, _ in scalars["loss"]] == list(range(1, 13)), "each step once"
    assert hparams["_hparams_/session_end_info"].session_end_info.status == (api_pb2.STATUS_SUCCESS)
    assert (
        tags_written(logdir / tuner.name / "trial_0").count("_hparams_/session_start_info") == 1
    ), "one session, started once"
