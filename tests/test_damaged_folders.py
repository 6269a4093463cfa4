"""A damaged experiment folder still loads and carries on: what cannot be read is skipped with
one warning per file (naming it, its first bad line and how many), the trials come from the
journal when the snapshot is unreadable, a result the log lost is run again from an earlier
checkpoint, and a run whose driver died before its first state save is restored from its spec
and journal."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
import trainables

import nbtune as nt
from nbtune.events import TrialPaused, TrialResult, TrialStarted
from nbtune.storage import ExperimentReader

STEPS = 8
SPACE = {"steps": STEPS, "interval": 0.005, "checkpoint": True, "x": nt.grid([0, 1, 2])}


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A run stopped with trial 0 paused at its checkpoint, made once for the module."""
    runs = tmp_path_factory.mktemp("template")
    at_3, paused = threading.Event(), threading.Event()

    def watch(event):
        if isinstance(event, TrialResult) and event.trial_id == 0:
            if event.result["training_iteration"] >= 3:
                at_3.set()
        elif isinstance(event, TrialPaused) and event.trial_id == 0:
            paused.set()

    tuner = nt.Tuner(
        trainables.steps,
        SPACE,
        metric="loss",
        name="stopped",
        storage_path=runs,
        executor=nt.ThreadExecutor(),
        max_concurrent=1,
        keep_checkpoints=None,
        progress=False,
        callbacks=[watch],
    )
    tuner.start(display=False)
    assert at_3.wait(30), "trial 0 never reached its third result"
    tuner.pause(0)
    assert paused.wait(30), "trial 0 never paused"
    tuner.stop()
    assert tuner.wait(30)
    assert (tuner.path / "trials.json").exists(), "the run's end compacted the journal"
    return tuner.path


@pytest.fixture
def run(stopped_run, tmp_path):
    copy = tmp_path / "runs" / "stopped"
    shutil.copytree(stopped_run, copy)
    return copy


def insert_line(path: Path, number: int, line: bytes) -> None:
    """Put `line` (with its newline) at line `number` (from 1) of the file."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(number - 1, line + b"\n")
    path.write_bytes(b"".join(lines))


def damage_results_42(run):
    insert_line(run / "results.jsonl", 2, b"42")
    return "results.jsonl", "skipped 1 line that cannot be read, the first at line 2 (a JSON int"


def damage_results_row_without_trial_id(run):
    insert_line(run / "results.jsonl", 3, b'{"training_iteration": 1, "loss": 0.5}')
    return "results.jsonl", "skipped 1 line that cannot be read, the first at line 3 (no trial_id)"


def damage_results_invalid_utf8(run):
    insert_line(run / "results.jsonl", 1, b'{"trial_id": 0, "loss": "\xff\xfe"}')
    insert_line(run / "results.jsonl", 5, b"[1, 2]")
    return "results.jsonl", "skipped 2 lines that cannot be read, the first at line 1 (not UTF-8"


def damage_journal_non_object_at_its_end(run):
    journal = run / "trials.jsonl"
    lines = len(journal.read_bytes().splitlines())
    with open(journal, "ab") as file:
        file.write(b'"PAUSED"\n')
    return "trials.jsonl", f"skipped 1 line that cannot be read, the first at line {lines + 1}"


def damage_empty_snapshot(run):
    (run / "trials.json").write_bytes(b"")
    return "trials.json", "cannot be read (JSONDecodeError"


def damage_garbage_outcome(run):
    (run / "outcome.json").write_bytes(b"\x00\x9fgarbage")
    return "outcome.json", "cannot be read (not UTF-8 at byte 1); the run reads as unfinished"


DAMAGES = [
    damage_results_42,
    damage_results_row_without_trial_id,
    damage_results_invalid_utf8,
    damage_journal_non_object_at_its_end,
    damage_empty_snapshot,
    damage_garbage_outcome,
]


def only_warning(caught, name):
    """The one warning in `caught`, which names the file `name`, on one line."""
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert f"{os.sep}{name}: " in messages[0] and "\n" not in messages[0], messages[0]
    return messages[0]


def records(run):
    """Every trial's id, status, iteration and checkpoint, as the folder holds them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reader = ExperimentReader(run)
        trials = reader.trials(reader.results(), "loss", "min")
    return [(t.trial_id, t.status, t.iteration, t.checkpoint) for t in trials]


def assert_every_trial_carried_to_its_end(tuner):
    """Each trial TERMINATED with its results counted from 1, each once; all STEPS of them
    but for one that the stopped run had ended early (stopped by the user)."""
    frame = tuner.dataframe().set_index("trial_id")
    assert (frame["status"] == "TERMINATED").all(), frame[["status", "error"]]
    assert sorted(frame["config/x"]) == [0, 1, 2], "no grid point run twice, none missed"
    history = tuner.history()
    for trial_id, iterations in history.groupby("trial_id")["training_iteration"]:
        steps = iterations.tolist()
        assert steps == list(range(1, len(steps) + 1)), f"trial {trial_id}: {steps}"
        if tuner.get_trial(trial_id).stopped_by != "user":
            assert len(steps) == STEPS, f"trial {trial_id}: {steps}"


def history_of(frame):
    return sorted(zip(frame["trial_id"], frame["training_iteration"], strict=True))


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__.removeprefix("damage_"))
def test_a_damaged_folder_loads_with_one_warning_for_the_file(run, damage):
    intact = nt.load(run)
    intact_records = records(run)
    name, expected = damage(run)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = nt.load(run)
    assert expected in only_warning(caught, name)

    assert history_of(loaded.history()) == history_of(intact.history()), "every result kept"
    assert records(run) == intact_records, "every trial kept as it was"
    assert loaded.state == ("unfinished" if name == "outcome.json" else intact.state)


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda f: f.__name__.removeprefix("damage_"))
def test_a_damaged_folder_is_restored_and_finishes(run, damage):
    name, expected = damage(run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuner = nt.Tuner.restore(run, trainables.steps, executor=nt.ThreadExecutor())
        tuner.run(display=False)
    if name == "outcome.json":
        assert not caught, "a restore reads no outcome: it replaces it"
    else:
        assert expected in only_warning(caught, name)

    assert tuner.state == "finished"
    assert_every_trial_carried_to_its_end(tuner)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the bad lines are still there: said above
        assert nt.load(run).state == "finished"


def test_a_torn_last_result_whose_checkpoint_was_written_is_run_again(run):
    """The driver died while writing trial 0's last result, after its worker had stored the
    checkpoint taken with it and the journal named that checkpoint: the trial resumes from
    the checkpoint before it, so that the lost result is reported (and logged) again."""
    results = run / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if line.startswith(b'{"trial_id":0,'))
    lost = ExperimentReader(run).results()[last]
    lost_at = lost["training_iteration"]
    journaled = nt.load(run).dataframe().set_index("trial_id").loc[0]
    assert journaled["training_iteration"] == lost_at, "trial 0's last result is the last line"
    torn = lines[last][: len(lines[last]) // 2]
    results.write_bytes(b"".join(lines[:last] + lines[last + 1 :]) + torn)

    with pytest.warns(UserWarning, match="skipped its last line, which is incomplete"):
        reader = ExperimentReader(run)
        trial = reader.trials(reader.results(), "loss", "min")[0]
    assert trial.iteration == lost_at - 1
    assert trial.checkpoint == f"trials/0/checkpoints/checkpoint_{lost_at - 1:06d}.pkl"
    assert trial.checkpoint_iteration == lost_at - 1

    started = []
    tuner = nt.Tuner.restore(
        run, trainables.steps, executor=nt.ThreadExecutor(), callbacks=[started.append]
    )
    tuner.run(display=False)
    first = next(e for e in started if isinstance(e, TrialStarted) and e.trial_id == 0)
    assert first.restored_from == lost_at - 1
    history = tuner.history()
    trial_0 = history[history["trial_id"] == 0]
    assert trial_0["training_iteration"].tolist() == list(range(1, STEPS + 1))
    assert (trial_0["step"] == trial_0["training_iteration"]).all(), "no step skipped"
    on_disk = [
        (row["trial_id"], row["training_iteration"]) for row in ExperimentReader(run).results()
    ]
    assert on_disk.count((0, lost_at)) == 1, "the lost result is in the log again, once"


def test_a_run_killed_right_after_start_is_restored_from_its_spec_and_journal(tmp_path):
    """The driver died before it first saved the searcher and scheduler: restore sets up
    fresh ones, carries on the trials the journal holds, and runs the rest of the grid."""
    runs = tmp_path / "runs"
    driver = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import nbtune as nt, trainables
        space = {{"steps": {STEPS}, "interval": 0.005, "checkpoint": True,
                  "x": nt.grid([0, 1, 2])}}
        tuner = nt.Tuner(trainables.steps, space, metric="loss", max_concurrent=1,
                         name="early", storage_path={str(runs)!r}, seed=0,
                         executor=nt.ThreadExecutor(), progress=False)
        tuner.start(display=False)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    process = subprocess.run([sys.executable, "-c", driver], check=False, timeout=120)
    assert process.returncode == -signal.SIGKILL
    run = runs / "early"
    (run / "state.pkl").unlink(missing_ok=True)  # whether or not the runner got to save it
    assert (run / "experiment.json").exists() and (run / "trials.jsonl").exists()

    with pytest.raises(ValueError, match=r"has no state\.pkl .* space=\.\.\.") as refused:
        nt.Tuner.restore(run, trainables.steps)
    assert "\n" not in str(refused.value)

    space = {"steps": STEPS, "interval": 0.005, "checkpoint": True, "x": nt.grid([0, 1, 2])}
    tuner = nt.Tuner.restore(run, trainables.steps, space=space, executor=nt.ThreadExecutor())
    tuner.run(display=False)

    assert tuner.state == "finished"
    frame = tuner.dataframe()
    assert (frame["status"] == "TERMINATED").all(), frame[["trial_id", "status", "error"]]
    assert sorted(frame["config/x"]) == [0, 1, 2], "no grid point run twice, none missed"
    history = tuner.history()
    for _, iterations in history.groupby("trial_id")["training_iteration"]:
        assert iterations.tolist() == list(range(1, STEPS + 1))
    assert (run / "state.pkl").exists(), "the restored run saved its state"
    assert nt.load(run).state == "finished"
