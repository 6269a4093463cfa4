"""`nbtune.runs()`: past runs listed, one row per experiment folder, from real runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import trainables
from waiting import eventually

import nbtune as nt
from nbtune.campaign import COLUMNS, COUNT_COLUMNS
from nbtune.events import TrialResult


def threads(make_tuner, trainable, space, **options):
    return make_tuner(trainable, space, executor=nt.ThreadExecutor(), **options)


def row_of(frame, name):
    rows = frame[frame["name"] == name]
    assert len(rows) == 1, f"one row for {name!r}: {frame['name'].tolist()}"
    return rows.iloc[0]


def assert_row_matches_the_run(row, path):
    """The row says what `nbtune.load` reads of the run in full."""
    run = nt.load(path)
    spec = json.loads((Path(path) / "experiment.json").read_text())
    trials = run.snapshot()[0]
    counts = Counter(trial.status.value for trial in trials)
    assert row["trials"] == len(trials)
    assert {column: row[column] for column in COUNT_COLUMNS} == {
        column: counts.get(column, 0) for column in COUNT_COLUMNS
    }
    assert row["metric"] == spec["metric"] and row["mode"] == spec["mode"]
    assert row["started"] == pd.Timestamp(spec["created_at"], unit="s", tz="UTC")
    best = run.best_result
    if best is None:
        assert pd.isna(row["best"]) and row["best_config"] is None
    else:
        assert row["best"] == best[spec["metric"]]
        assert row["best_config"] == run.best_config
    assert row["nbtune_version"] == nt.__version__
    assert row["path"] == str(path)


def test_each_run_is_a_row_with_its_state_counts_and_best(make_tuner, runs, log):
    space = {"steps": nt.grid([3, 5, 4])}  # distinct bests: the best trial is plain
    finished = threads(make_tuner, trainables.count_up, space, metric="loss")
    finished.run()
    failing = threads(
        make_tuner,
        trainables.fail_at,
        {"fail_at": nt.grid([3, 20])},
        metric="loss",
        max_concurrent=1,
        fail_fast=True,
    )
    failing.run()
    stopped = threads(make_tuner, trainables.forever, {"interval": 0.01}, metric="loss")
    stopped.subscribe(log)
    stopped.start()
    log.wait_for(lambda e: isinstance(e, TrialResult))
    stopped.stop()
    assert stopped.wait(30)

    frame = nt.runs(runs)
    assert list(frame.columns) == list(COLUMNS)
    assert frame["name"].tolist() == ["run0", "run1", "run2"], "oldest first"
    assert frame["state"].tolist() == ["finished", "failed", "stopped"]
    for tuner in (finished, failing, stopped):
        row = row_of(frame, tuner.name)
        assert_row_matches_the_run(row, tuner.path)
        outcome = json.loads((tuner.path / "outcome.json").read_text())
        spec = json.loads((tuner.path / "experiment.json").read_text())
        assert row["duration_s"] == pytest.approx(outcome["ended_at"] - spec["created_at"])
    assert row_of(frame, "run0")["best"] == 0.2, "count_up's loss ends at 1 / steps"
    assert row_of(frame, "run0")["best_config"] == {"steps": 5}
    assert row_of(frame, "run1")["ERROR"] == 1
    assert "fail" in row_of(frame, "run1")["error"].lower()
    assert pd.isna(row_of(frame, "run0")["error"])


def test_the_summary_written_at_the_end_agrees_with_the_logs(make_tuner, runs):
    space = {"lr": nt.uniform(0.1, 1), "steps": nt.randint(1, 6), "interval": 0}
    tuner = threads(make_tuner, trainables.steps, space, metric="loss", num_samples=12)
    tuner.run()
    summary = tuner.path / "summary.json"
    assert summary.exists()
    from_summary = nt.runs(runs).iloc[0]

    summary.unlink()
    from_logs = nt.runs(runs).iloc[0]
    pd.testing.assert_series_equal(from_summary, from_logs)
    assert_row_matches_the_run(from_logs, tuner.path)


def test_the_summary_is_read_only_while_its_outcome_holds(make_tuner, runs, log):
    """A stopped run carried on to its end is listed as it ends, not as it was stopped."""
    space = {"steps": nt.grid([30, 31, 32]), "interval": 0.01}
    first = threads(make_tuner, trainables.count_up, space, metric="loss", max_concurrent=1)
    first.subscribe(log)
    first.start()
    log.wait_for(lambda e: isinstance(e, TrialResult))
    first.stop()
    assert first.wait(30)
    stopped = row_of(nt.runs(runs), first.name)
    assert stopped["state"] == "stopped" and stopped["trials"] < 3

    again = nt.Tuner.restore(
        first.path, trainables.count_up, progress=False, executor=nt.ThreadExecutor()
    )
    again.run()
    row = row_of(nt.runs(runs), first.name)
    assert row["state"] == "finished"
    assert row["trials"] == 3 and row["TERMINATED"] == 3
    assert_row_matches_the_run(row, first.path)


def test_a_live_run_is_running_then_paused(make_tuner, runs, log):
    tuner = threads(make_tuner, trainables.forever, {"interval": 0.01}, metric="loss")
    tuner.subscribe(log)
    tuner.start()
    try:
        log.wait_for(lambda e: isinstance(e, TrialResult))
        row = row_of(nt.runs(runs), tuner.name)
        assert row["state"] == "running"
        assert row["trials"] >= 1 and not pd.isna(row["best"])
        assert row["duration_s"] >= 0 and pd.isna(row["error"])
        tuner.pause_all()
        assert row_of(nt.runs(runs), tuner.name)["state"] == "paused"
        tuner.resume_all()
        assert row_of(nt.runs(runs), tuner.name)["state"] == "running"
    finally:
        tuner.stop()
        assert tuner.wait(30)
    assert row_of(nt.runs(runs), tuner.name)["state"] == "stopped"


def test_a_run_whose_process_was_killed_is_interrupted(runs):
    """The driver (a loky run in another process) holds its folder while it lives; killed
    with SIGKILL, it leaves no outcome and its lock is free: interrupted, not running."""
    driver = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import nbtune as nt, trainables
        space = {{"steps": 1000, "interval": 0.02, "x": nt.grid(range(4))}}
        tuner = nt.Tuner(trainables.steps, space, metric="loss", max_concurrent=2,
                         name="killed", storage_path={str(runs)!r}, seed=0, progress=False)
        tuner.run()
    """)
    process = subprocess.Popen([sys.executable, "-c", driver], start_new_session=True)
    run = runs / "killed"
    try:

        def reported():
            assert process.poll() is None, "the driver died before it reported"
            return (run / "results.jsonl").exists() and (run / "results.jsonl").stat().st_size

        eventually(reported, "the driver's first results", timeout=60, every=0.05)
        assert row_of(nt.runs(runs), "killed")["state"] == "running", "held by a live process"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    row = row_of(nt.runs(runs), "killed")
    assert row["state"] == "interrupted"
    assert row["RUNNING"] >= 1, "its trials were running when it died"
    assert row["duration_s"] > 0
    assert_row_matches_the_run(row, run)
    assert row["code_version"] is pd.NA or isinstance(row["code_version"], str)


def test_a_folder_without_runs_is_an_empty_frame(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a run")
    for folder in (tmp_path, tmp_path / "missing"):
        frame = nt.runs(folder)
        assert frame.empty and list(frame.columns) == list(COLUMNS)


def test_a_file_is_refused_in_one_line(tmp_path):
    file = tmp_path / "runs.txt"
    file.write_text("")
    with pytest.raises(NotADirectoryError, match="is a file") as caught:
        nt.runs(file)
    assert "\n" not in str(caught.value)


def test_a_damaged_run_is_a_row_of_what_could_be_read(make_tuner, runs):
    names = ["spec", "outcome", "journal", "newer", "summary"]
    for name in names:
        tuner = threads(
            make_tuner, trainables.count_up, {"steps": nt.grid([2, 3])}, metric="loss", name=name
        )
        tuner.run()
    (runs / "spec" / "experiment.json").write_text("{torn")
    (runs / "outcome" / "outcome.json").write_text("[1, 2]")
    (runs / "journal" / "trials.json").unlink()
    (runs / "journal" / "summary.json").unlink()
    (runs / "journal" / "trials.jsonl").write_text('{"trial_id": 0}\n')
    spec = json.loads((runs / "newer" / "experiment.json").read_text())
    (runs / "newer" / "experiment.json").write_text(json.dumps({**spec, "format_version": 99}))
    (runs / "summary" / "summary.json").write_text("{torn")

    frame = nt.runs(runs)
    assert sorted(frame["name"]) == sorted(names)
    spec_row = row_of(frame, "spec")
    assert "experiment.json cannot be read" in spec_row["error"]
    assert spec_row["state"] == "finished" and spec_row["trials"] == 2
    outcome_row = row_of(frame, "outcome")
    assert outcome_row["state"] == "interrupted", "an unreadable outcome reads as unfinished"
    assert outcome_row["trials"] == 2, "read from the logs"
    journal_row = row_of(frame, "journal")
    assert pd.isna(journal_row["trials"]) or journal_row["trials"] == 0, "what could be read"
    assert "newer nbtune" in row_of(frame, "newer")["error"]
    assert_row_matches_the_run(row_of(frame, "summary"), runs / "summary")
    assert all("\n" not in text for text in frame["error"].dropna())
