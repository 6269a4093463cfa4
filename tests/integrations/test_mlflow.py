"""MLflowLogger logs a run to a real MLflow store (SQLite), read back with MlflowClient: a run
for the experiment, a nested run per trial with its params, every metric at every step, its
status, its error and its best checkpoint; a restored run carries on in the same runs."""

from __future__ import annotations

import contextlib
import logging
import pickle
import socket
import threading
from pathlib import Path

import pytest
import trainables

import nbtune as nt

mlflow = pytest.importorskip("mlflow")
from nbtune.integrations.mlflow import MLflowLogger  # noqa: E402

EXPERIMENT = "nbtune-tests"


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A SQLite tracking store with an experiment whose artifacts go under `tmp_path`."""
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    client.create_experiment(EXPERIMENT, artifact_location=str(tmp_path / "artifacts"))
    return uri


def runs_of(uri):
    """The experiment's run and its trials' runs (by trial id)."""
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id])
    parents = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    assert len(parents) == 1, "one run for the experiment"
    trials = {int(run.data.tags["nbtune.trial_id"]): run for run in runs if run not in parents}
    assert len(trials) == len(runs) - 1, "every other run is a trial's"
    return parents[0], trials


def steps_of(uri, run, metric):
    client = mlflow.MlflowClient(uri)
    return [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, metric)]


def valley(config):
    """Loss (epoch - 5)², checkpointed every epoch: the best checkpoint is not the latest."""
    for epoch in range(10):
        nt.report(loss=float((epoch - 5) ** 2), extra={"depth": epoch}, checkpoint={"at": epoch})


def test_each_trial_is_a_nested_run_with_params_metrics_and_its_best_checkpoint(
    make_tuner, store, tmp_path
):
    logger = MLflowLogger(store, EXPERIMENT, tags={"team": "a"})
    space = {"lr": nt.grid([0.1, 0.2]), "nested": {"width": 3}}
    tuner = make_tuner(
        valley, space, metric="loss", executor=nt.ThreadExecutor(), callbacks=[logger]
    )
    tuner.run()
    assert logger.failure is None

    parent, trials = runs_of(store)
    assert parent.info.status == "FINISHED"
    assert parent.info.run_name == tuner.name
    assert parent.data.tags["nbtune.path"] == str(tuner.path.resolve())
    assert sorted(trials) == [0, 1]
    history = tuner.history()
    for trial_id, run in trials.items():
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["team"] == "a"
        config = tuner.get_trial(trial_id).config
        assert run.data.params == {"lr": str(config["lr"]), "nested/width": "3"}
        rows = history[history["trial_id"] == trial_id]
        expected = list(zip(rows["training_iteration"], rows["loss"], strict=True))
        assert steps_of(store, run, "loss") == expected, "every result, at its step"
        assert [step for step, _ in steps_of(store, run, "extra/depth")] == list(range(1, 11))
        assert "training_iteration" not in run.data.metrics

        folder = mlflow.MlflowClient(store).download_artifacts(
            run.info.run_id, "best_checkpoint", str(tmp_path / f"download{trial_id}")
        )
        (saved,) = list(Path(folder).iterdir())
        assert saved.name == "checkpoint_000006.pkl", "the best, at loss 0, not the latest"
        assert pickle.loads(saved.read_bytes()) == tuner.get_checkpoint(trial_id, "best")


def test_a_failed_trial_fails_its_run_with_its_error_in_worker_processes(make_tuner, store):
    logger = MLflowLogger(store, EXPERIMENT)
    tuner = make_tuner(
        trainables.fail_at, {"fail_at": nt.grid([3, 99])}, metric="loss", callbacks=[logger]
    )
    tuner.run()
    assert logger.failure is None

    parent, trials = runs_of(store)
    assert parent.info.status == "FINISHED", "the run itself went well"
    failed, completed = trials[0], trials[1]
    assert failed.info.status == "FAILED"
    assert "boom at step 3" in failed.data.tags["error"]
    text = mlflow.MlflowClient(store).download_artifacts(failed.info.run_id, "error.txt")
    assert "Traceback" in Path(text).read_text()
    assert [step for step, _ in steps_of(store, failed, "loss")] == [1, 2]
    assert completed.info.status == "FINISHED"
    assert [step for step, _ in steps_of(store, completed, "loss")] == list(range(1, 10))


def test_a_retried_trial_goes_on_in_the_same_run(make_tuner, store, tmp_path):
    logger = MLflowLogger(store, EXPERIMENT)
    space = {"steps": 8, "marker": str(tmp_path / "failed-once")}
    tuner = make_tuner(
        trainables.fails_once,
        space,
        metric="loss",
        max_failures=1,
        executor=nt.ThreadExecutor(),
        callbacks=[logger],
    )
    tuner.run()

    _, trials = runs_of(store)
    assert list(trials) == [0], "one run, not one per attempt"
    run = trials[0]
    assert run.info.status == "FINISHED"
    assert run.data.tags["nbtune.attempts"] == "2"
    assert [step for step, _ in steps_of(store, run, "loss")] == list(range(1, 9))


def test_a_stopped_run_ends_its_open_runs_killed_and_restore_carries_them_on(
    make_tuner, store, stop_midway
):
    space = {"steps": 12, "interval": 0.02, "checkpoint": True, "x": nt.grid([0, 1])}
    first = MLflowLogger(store, EXPERIMENT)
    tuner = make_tuner(trainables.steps, space, metric="loss", callbacks=[first])
    stop_midway(tuner, iteration=3)
    parent, trials = runs_of(store)
    assert parent.info.status == "KILLED", "a stopped run"
    assert trials[0].info.status == "KILLED", "a trial cut short, which restore carries on"
    paused_at = tuner.get_trial(0).iteration

    second = MLflowLogger(store, EXPERIMENT)
    again = nt.Tuner.restore(tuner.path, trainables.steps, progress=False, callbacks=[second])
    again.run()
    assert again.get_trial(0).status is nt.TrialStatus.TERMINATED
    assert second.parent_run_id == first.parent_run_id
    assert second.run_ids[0] == first.run_ids[0]

    parent, trials = runs_of(store)
    assert parent.info.status == "FINISHED"
    assert trials[0].info.status == "FINISHED"
    steps = [step for step, _ in steps_of(store, trials[0], "loss")]
    assert steps == list(range(1, 13)), f"paused at {paused_at}: each step once, none missed"


def test_a_store_that_fails_warns_once_and_the_run_records_everything(make_tuner, tmp_path, caplog):
    (tmp_path / "a-file").write_text("not a folder")
    logger = MLflowLogger(f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}", EXPERIMENT)
    tuner = make_tuner(
        trainables.quadratic,
        {"lr": nt.grid([0.01, 0.1]), "layers": 2},
        metric="loss",
        executor=nt.ThreadExecutor(),
        callbacks=[logger],
    )
    with caplog.at_level(logging.WARNING, logger="nbtune"):
        tuner.run()
    assert tuner.state == "finished"
    assert len(tuner.history()) == 2 * 20, "every result recorded"
    assert logger.failure is not None
    warnings = [r for r in caplog.records if "MLflowLogger failed" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert logger.flush(5), "a failed logger still answers a flush"


def long_names(config):
    """Reports `loss` and two metrics whose names pass MLflow's 250 characters and share
    their first 250."""
    stem = "m" * 260
    for step in range(3):
        nt.report(loss=float(step), **{f"{stem}_a": 1.0, f"{stem}_b": 2.0})


def test_a_metric_name_over_mlflows_limit_is_shortened_and_every_trial_is_logged(make_tuner, store):
    logger = MLflowLogger(store, EXPERIMENT)
    tuner = make_tuner(
        long_names,
        {"x": nt.grid([1, 2, 3])},
        metric="loss",
        executor=nt.ThreadExecutor(),
        callbacks=[logger],
    )
    tuner.run()
    assert logger.failure is None

    _, trials = runs_of(store)
    assert sorted(trials) == [0, 1, 2], "every trial, not only those before the long name"
    for run in trials.values():
        assert [step for step, _ in steps_of(store, run, "loss")] == [1, 2, 3]
        long = [name for name in run.data.metrics if name.startswith("mmm")]
        assert len(long) == 2 and all(len(name) <= 250 for name in long), long
        assert sorted(run.data.metrics[name] for name in long) == [1.0, 2.0], "kept apart"


@pytest.fixture
def refused_uri():
    """The address of a local port that refuses connections (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def hung_uri():
    """The address of a local server that accepts connections and never answers; closing it
    at the end releases whoever still waits on it."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def accept():
        with contextlib.suppress(OSError):
            while True:
                accepted.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for connection in accepted:
        connection.close()


def run_in_thread(call, timeout):
    """Call `call` on a thread; return whether it returned within `timeout` seconds."""
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive()


def test_a_refused_tracking_server_fails_the_logger_at_once_and_run_does_not_wait(
    make_tuner, refused_uri, caplog
):
    logger = MLflowLogger(refused_uri, EXPERIMENT)  # the default flush_timeout_s, 60 s
    tuner = make_tuner(
        trainables.count_up,
        {"steps": 2},
        metric="loss",
        executor=nt.ThreadExecutor(),
        callbacks=[logger],
    )
    with caplog.at_level(logging.WARNING, logger="nbtune"):
        assert run_in_thread(tuner.run, timeout=20), "run() waited for a server that refuses"
    assert tuner.state == "finished" and len(tuner.history()) == 2
    warned = [r.getMessage() for r in caplog.records if "MLflowLogger failed" in r.getMessage()]
    assert len(warned) == 1 and refused_uri in warned[0], warned


def test_a_hung_tracking_server_does_not_block_the_next_tuners_start(make_tuner, hung_uri, caplog):
    logger = MLflowLogger(hung_uri, EXPERIMENT, flush_timeout_s=0.2, timeout_s=120)
    first = make_tuner(
        trainables.count_up,
        {"steps": 2},
        metric="loss",
        executor=nt.ThreadExecutor(),
        callbacks=[logger],
    )
    first.run()
    second = make_tuner(
        trainables.count_up,
        {"steps": 2},
        metric="loss",
        executor=nt.ThreadExecutor(),
        callbacks=[logger],
    )
    with caplog.at_level(logging.WARNING, logger="nbtune"):
        assert run_in_thread(second.start, timeout=10), "start() waited for the hung logger"
        assert second.wait(60)
    assert second.state == "finished" and len(second.history()) == 2
    assert any(first.name in r.getMessage() for r in caplog.records if "abandon" in r.getMessage())
