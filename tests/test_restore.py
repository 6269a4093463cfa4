"""Carrying on a run that was stopped or whose driver died: nothing lost, nothing twice."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import trainables
from kernels import Kernel

import nbtune as nt
from nbtune.events import TrialStarted

STEPS = 40
SPACE = {"steps": STEPS, "interval": 0.02, "checkpoint": True, "x": nt.grid(range(4))}


def results_on_disk(run: Path) -> list[tuple[int, int]]:
    lines = (run / "results.jsonl").read_text().splitlines()
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        rows.append((row["trial_id"], row["training_iteration"]))
    return rows


def assert_every_trial_complete_once(tuner) -> None:
    frame = tuner.dataframe()
    assert (frame["status"] == "TERMINATED").all(), frame[["trial_id", "status", "error"]]
    assert sorted(frame["config/x"]) == [0, 1, 2, 3], "no grid point run twice, none missed"
    history = tuner.history()
    for _, iterations in history.groupby("trial_id")["training_iteration"]:
        assert iterations.tolist() == list(range(1, STEPS + 1))
    assert (history["step"] == history["training_iteration"]).all(), "no work repeated or skipped"
    on_disk = results_on_disk(tuner.path)
    assert len(on_disk) == len(set(on_disk)) == 4 * STEPS, "each result on disk exactly once"


def test_a_run_whose_driver_was_killed_carries_on(runs):
    driver = textwrap.dedent(f"""
        import sys, threading
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import nbtune as nt, trainables
        space = {{"steps": {STEPS}, "interval": 0.02, "checkpoint": True, "x": nt.grid(range(4))}}
        tuner = nt.Tuner(trainables.steps, space, metric="loss", max_concurrent=2,
                         name="crash", storage_path={str(runs)!r}, seed=0, progress=False)
        tuner.run()
    """)
    process = subprocess.Popen([sys.executable, "-c", driver], start_new_session=True)
    run = runs / "crash"
    deadline = time.monotonic() + 60
    while not ((run / "results.jsonl").exists() and len(results_on_disk(run)) >= 30):
        assert time.monotonic() < deadline and process.poll() is None, "the driver never got going"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    reported = set(results_on_disk(run))
    assert nt.load(run).state == "unfinished", "nothing says how a killed run ended"

    tuner = nt.Tuner.restore(run, trainables.steps, progress=False)
    tuner.run()
    assert nt.load(run).state == "finished"

    assert reported <= set(results_on_disk(run)), "every result reported before the kill is kept"
    assert_every_trial_complete_once(tuner)


def test_a_paused_trial_of_a_stopped_run_resumes_from_its_checkpoint(make_tuner, stop_midway):
    tuner = make_tuner(trainables.steps, SPACE, metric="loss", name="paused")
    stop_midway(tuner, iteration=3)
    paused_at = tuner.get_trial(0).iteration
    assert tuner.get_trial(0).status is nt.TrialStatus.PAUSED

    again = nt.Tuner.restore(tuner.path, trainables.steps, progress=False, stop=None)
    again.start()
    assert nt.load(tuner.path).state == "unfinished", "the stopped run is on again"
    again.wait()
    history = again.history()
    trial_0 = history[history["trial_id"] == 0]["training_iteration"].tolist()
    assert trial_0 == list(range(1, STEPS + 1)), f"paused at {paused_at}, carried on from there"
    assert again.get_trial(0).status is nt.TrialStatus.TERMINATED


def test_resume_true_carries_on_a_run_of_the_same_name(make_tuner):
    first = make_tuner(trainables.count_up, {"x": nt.grid([1, 2])}, name="same", metric="loss")
    first.run()
    again = make_tuner(
        trainables.count_up,
        {"x": nt.grid([1, 2])},
        name="same",
        metric="loss",
        num_samples=2,
        resume=True,
    )
    again.run()
    frame = again.dataframe()
    assert frame["trial_id"].tolist() == [0, 1, 2, 3], "ids go on from where the first run ended"
    assert len(again.history()) == 4 * 5


def test_a_run_whose_kernel_was_killed_carries_on(runs, log):
    kernel = Kernel(runs.parent)
    try:
        kernel.check(f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            import nbtune as nt, trainables
            space = {{"steps": {STEPS}, "interval": 0.02, "checkpoint": True,
                      "x": nt.grid(range(4))}}
            tuner = nt.Tuner(trainables.steps, space, metric="loss", max_concurrent=2,
                             name="kernel", storage_path={str(runs)!r}, seed=0)
            tuner.start(display=False)
        """)
        run = runs / "kernel"
        deadline = time.monotonic() + 60
        while not (
            (run / "results.jsonl").exists() and len(results_on_disk(run)) >= STEPS * 2 + 10
        ):
            assert time.monotonic() < deadline, "the run in the kernel never got far enough"
            time.sleep(0.05)
        os.kill(kernel.manager.provisioner.pid, signal.SIGKILL)
        kernel.manager.provisioner.process.wait()
        reported = set(results_on_disk(run))
    finally:
        kernel.shutdown()
    before = nt.load(run).dataframe()
    finished = set(before[before["status"] == "TERMINATED"]["trial_id"])
    assert finished, "some trials had finished before the kill"

    tuner = nt.Tuner.restore(run, trainables.steps, progress=False, callbacks=[log])
    tuner.run()

    assert finished.isdisjoint(e.trial_id for e in log.of(TrialStarted)), "finished ones kept"

    assert reported <= set(results_on_disk(run)), "every result reported before the kill is kept"
    assert_every_trial_complete_once(tuner)


def first_start(events, trial_id):
    return next(e for e in events if isinstance(e, TrialStarted) and e.trial_id == trial_id)


def test_a_renamed_copy_carries_on_where_it_is_and_leaves_the_original_alone(
    make_tuner, stop_midway, runs
):
    tuner = make_tuner(trainables.steps, SPACE, metric="loss", name="orig", keep_checkpoints=None)
    stop_midway(tuner, iteration=3)
    paused_at = tuner.get_trial(0).iteration
    original = {path: path.read_bytes() for path in tuner.path.rglob("*") if path.is_file()}
    copy = runs / "orig-v1"
    shutil.copytree(tuner.path, copy)

    started = []
    again = nt.Tuner.restore(
        copy, trainables.steps, progress=False, callbacks=[started.append], stop=None
    )
    assert again.path == copy and again.name == "orig-v1"
    again.run()

    assert first_start(started, 0).restored_from == paused_at
    trial_0 = again.history().query("trial_id == 0")
    assert trial_0["training_iteration"].tolist() == list(range(1, STEPS + 1))
    assert (trial_0["step"] == trial_0["training_iteration"]).all(), "resumed at its checkpoint"
    assert nt.load(copy).state == "finished" and nt.load(copy).name == "orig-v1"
    now = {path: path.read_bytes() for path in tuner.path.rglob("*") if path.is_file()}
    assert now == original, "the original folder is not written"
    assert nt.load(tuner.path).state == "stopped"


def test_a_moved_folder_carries_on_from_its_checkpoints_where_it_is_now(
    make_tuner, stop_midway, runs, tmp_path, monkeypatch
):
    tuner = make_tuner(trainables.steps, SPACE, metric="loss", name="moving")
    stop_midway(tuner, iteration=3)
    paused_at = tuner.get_trial(0).iteration
    elsewhere = tmp_path / "elsewhere" / "moved"
    elsewhere.parent.mkdir()
    os.rename(tuner.path, elsewhere)
    assert not tuner.path.exists(), "nothing is left where the run began"

    assert len(nt.load(elsewhere).history()) >= paused_at
    monkeypatch.chdir(elsewhere)
    started = []
    again = nt.Tuner.restore(
        ".", trainables.steps, progress=False, callbacks=[started.append], stop=None
    )
    assert again.path == elsewhere
    again.run()

    assert not tuner.path.exists() and not (elsewhere / "moving").exists(), "no new run made"
    assert first_start(started, 0).restored_from == paused_at
    history = again.history()
    trial_0 = history[history["trial_id"] == 0]
    assert trial_0["training_iteration"].tolist() == list(range(1, STEPS + 1))
    assert (trial_0["step"] == trial_0["training_iteration"]).all(), "resumed at its checkpoint"
    frame = again.dataframe()
    assert frame["error"].isna().all(), frame[["trial_id", "error"]]
    assert nt.load(elsewhere).state == "finished"


def test_the_mlflow_runs_of_a_moved_folder_are_carried_on(
    make_tuner, stop_midway, tmp_path, monkeypatch
):
    pytest.importorskip("mlflow")
    from nbtune.integrations.mlflow import MLflowLogger

    monkeypatch.chdir(tmp_path)  # MLflow's artifacts go to ./mlruns

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = MLflowLogger(store, "moved-runs")
    space = {**SPACE, "x": nt.grid([0, 1])}
    tuner = make_tuner(trainables.steps, space, metric="loss", name="mlflow", callbacks=[first])
    stop_midway(tuner, iteration=3)
    moved = tmp_path / "moved-here"
    os.rename(tuner.path, moved)

    second = MLflowLogger(store, "moved-runs")
    again = nt.Tuner.restore(moved, trainables.steps, progress=False, callbacks=[second])
    again.run()
    assert second.parent_run_id == first.parent_run_id, "the experiment's run goes on"
    assert second.run_ids[0] == first.run_ids[0], "trial 0 goes on in its own run"
