"""Ctrl-C while a script or cell waits for a run: the run stops so that it can be carried on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import trainables

import nbtune as nt


def start_driver(runs: Path, name: str, trainable: str, space: dict) -> subprocess.Popen:
    """A script that runs a tuner and waits for it, as a user's script (or cell) does."""
    code = textwrap.dedent(f"""
        import signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even when
        sys.path.insert(0, {str(Path(__file__).parent)!r})  # the suite runs in the background
        import nbtune as nt, trainables
        tuner = nt.Tuner(trainables.{trainable}, {space!r}, metric="loss", max_concurrent=2,
                         name={name!r}, storage_path={str(runs)!r}, progress=False)
        tuner.run()
        print("returned", tuner.state)
    """)
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for_results(run: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while (
        not (run / "results.jsonl").exists()
        or len((run / "results.jsonl").read_text().splitlines()) < count
    ):
        assert process.poll() is None and time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)


def test_one_interrupt_pauses_every_trial_and_restore_carries_on(runs):
    space = {"steps": 40, "interval": 0.02, "checkpoint": True, "x": [0, 1, 2]}
    process = start_driver(runs, "ctrl-c", "steps", space)
    run = runs / "ctrl-c"
    wait_for_results(run, 10, process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert out == "returned stopped\n"
    assert f"carry it on with nbtune.Tuner.restore({str(run)!r}, steps)" in err
    statuses = set(nt.load(run).dataframe()["status"])
    assert statuses == {"PAUSED"}, "every trial that ran was paused, none ended"

    tuner = nt.Tuner.restore(run, trainables.steps, progress=False)
    tuner.run()
    history = tuner.history()
    for _, iterations in history.groupby("trial_id")["training_iteration"]:
        assert iterations.tolist() == list(range(1, 41))
    assert (history["step"] == history["training_iteration"]).all()
    lines = (run / "results.jsonl").read_text().splitlines()
    keys = [(row["trial_id"], row["training_iteration"]) for row in map(json.loads, lines)]
    assert len(keys) == len(set(keys)), "nothing recorded twice"


def test_a_second_interrupt_ends_the_trials_at_once(runs):
    process = start_driver(runs, "ctrl-c-twice", "slow_after_first", {"seconds": 60})
    run = runs / "ctrl-c-twice"
    wait_for_results(run, 1, process)
    process.send_signal(signal.SIGINT)
    assert "interrupted" in process.stderr.readline()
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert time.monotonic() - started < 15, "the trials in their 60 s step were ended at once"
    assert process.returncode == 0, err
    assert out == "returned stopped\n"
    frame = nt.load(run).dataframe()
    assert set(frame["status"]) == {"PAUSED"}
    assert set(frame["paused_by"]) == {"checkpoint"}, "they restart from their checkpoints"
