"""`stopped_by`: who cut each trial short (the user, a scheduler, the stop criteria, the time
budget, fail_fast), told apart from a trial that ran to its own end, as the real mechanism
leaves it: in the live run, on disk (`nbtune.load`) and after `Tuner.restore`."""

from __future__ import annotations

import json
import threading
import time

import pandas as pd
import pytest
import trainables
from test_control import result_of

import nbtune as nt
from nbtune.events import TrialPaused
from nbtune.trial import STOPPED_BY

LONG = 3000
"""Steps of a trial that must still run when the test steps in (0.01 s each): the test stops
it long before its end."""


def stopped_by(source) -> dict[int, str | None]:
    """Trial id -> its `stopped_by`, None where the column is empty."""
    column = source.dataframe().set_index("trial_id")["stopped_by"]
    return {trial_id: None if pd.isna(value) else value for trial_id, value in column.items()}


def paused(trial_id):
    return lambda event: isinstance(event, TrialPaused) and event.trial_id == trial_id


def test_asha_s_cuts_are_the_scheduler_s_and_its_survivors_ran_to_their_end(make_tuner):
    # test_asha.py works these cuts out by hand: trials 0, 1 and 3 reach max_t = 9.
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.grid([5, 3, 6, 1, 4, 2, 2.5]), "max_t": 20},
        metric="loss",
        scheduler=nt.ASHA(max_t=9, grace_period=1, reduction_factor=3),
        max_concurrent=1,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    cut = dict.fromkeys([2, 4, 5, 6], "scheduler")
    expected = {0: None, 1: None, 3: None, **cut}
    assert stopped_by(tuner) == expected
    assert stopped_by(nt.load(tuner.path)) == expected
    assert tuner.dataframe().dtypes["stopped_by"] == "string"


def test_hyperband_s_cuts_at_its_rungs_are_the_scheduler_s(make_tuner):
    # One bracket of nine (test_hyperband.py): only trial 2 reaches max_t = 9; the others are
    # cut at a rung, either as the last to arrive there or while they wait paused.
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.grid([4, 7, 1, 9, 3, 8, 2, 6, 5]), "max_t": 20},
        metric="loss",
        scheduler=nt.HyperBand(max_t=9),
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    assert stopped_by(tuner) == {**dict.fromkeys(range(9), "scheduler"), 2: None}


def test_the_trials_pbt_replaces_are_the_scheduler_s_and_the_others_ran_to_their_end(
    make_tuner,
):
    tuner = make_tuner(
        trainables.accumulate,
        {"lr": nt.grid([1, 10, 100, 1000]), "max_t": 10, "interval": 0.01},
        metric="loss",
        scheduler=nt.PBT(perturbation_interval=3, hyperparam_mutations={"lr": [1, 10, 100]}),
        max_concurrent=4,
        seed=0,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    forks = sum(trial.origin == "scheduler" for trial in tuner.trials)
    replaced = {t for t, by in stopped_by(tuner).items() if by == "scheduler"}
    assert forks >= 1, "lr=1 stays at the bottom, so it is replaced"
    assert len(replaced) == forks, "each fork takes the place of a trial PBT stopped"
    assert set(stopped_by(tuner).values()) == {"scheduler", None}


def run_cut_at_five(make_tuner):
    """A finished run of two trials of 3 and 9 steps under `stop={"training_iteration": 5}`."""
    tuner = make_tuner(
        trainables.count_up,
        {"steps": nt.grid([3, 9])},
        metric="loss",
        stop={"training_iteration": 5},
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    return tuner


def test_the_stop_criteria_are_told_apart_from_a_trial_s_own_end(make_tuner):
    tuner = run_cut_at_five(make_tuner)
    assert stopped_by(tuner) == {0: None, 1: "stop criteria"}
    assert tuner.dataframe()["training_iteration"].tolist() == [3, 5]


def test_the_time_budget_cuts_the_trials_it_finds_running(make_tuner):
    tuner = make_tuner(
        trainables.forever,
        {"interval": 0.01, "x": nt.grid([0, 1])},
        time_budget_s=0.5,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    assert tuner.state == "finished"
    assert stopped_by(tuner) == {0: "time budget", 1: "time budget"}


def fails_or_goes_on(config):
    """Fails after one result if `fails`, else reports until it is stopped."""
    if config["fails"]:
        nt.report(loss=1.0)
        raise RuntimeError("boom")
    trainables.forever({"interval": 0.01})


def test_fail_fast_cuts_the_others_and_the_failed_trial_is_not_stopped(make_tuner):
    tuner = make_tuner(
        fails_or_goes_on,
        {"fails": nt.grid([False, True])},
        fail_fast=True,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    assert tuner.state == "failed"
    assert tuner.dataframe()["status"].tolist() == ["TERMINATED", "ERROR"]
    assert stopped_by(tuner) == {0: "fail fast", 1: None}


@pytest.mark.parametrize("checkpoint", [True, False], ids=["checkpoint", "suspend"])
def test_the_user_stops_a_running_and_a_paused_trial(make_tuner, log, checkpoint):
    tuner = make_tuner(
        trainables.steps,
        {"steps": LONG, "checkpoint": checkpoint, "x": nt.grid([0, 1])},
        metric="loss",
        callbacks=[log],
    )
    tuner.start()
    log.wait_for(result_of(0, 1))
    log.wait_for(result_of(1, 1))
    tuner.pause(1)
    log.wait_for(paused(1))
    tuner.stop(0, 1)
    assert tuner.wait(60)
    frame = tuner.dataframe()
    assert frame["status"].tolist() == ["TERMINATED"] * 2
    assert (frame["training_iteration"] < LONG).all(), "both were cut short"
    assert stopped_by(tuner) == stopped_by(nt.load(tuner.path)) == {0: "user", 1: "user"}


def test_a_trial_killed_by_a_forced_stop_was_stopped_by_the_user(make_tuner, log):
    tuner = make_tuner(
        trainables.hangs_at,
        {"steps": 5, "hang_at": 2, "hang_s": 60, "interval": 0.01},
        callbacks=[log],
    )
    tuner.start()
    log.wait_for(result_of(0, 1))
    tuner.stop(0, force=True)
    assert tuner.wait(60)
    assert tuner.get_trial(0).iteration == 1, "killed while silent, not at a report"
    assert stopped_by(tuner) == {0: "user"}


def until_opened(gate: threading.Event):
    """A trainable that reports (with a checkpoint if `checkpoint`) every few milliseconds,
    `steps` times, and goes on until `gate` is set: it runs while the test acts on it."""

    def train(config):
        checkpoint = nt.get_checkpoint()
        step = checkpoint["step"] if checkpoint else 0
        while step < config["steps"] or not gate.is_set():
            step += 1
            time.sleep(0.002)
            nt.report(loss=1 / step, checkpoint={"step": step} if config["checkpoint"] else None)

    return train


@pytest.mark.parametrize("checkpoint", [True, False], ids=["checkpoint", "suspend"])
def test_stop_all_cuts_running_and_suspended_trials_and_restore_keeps_it(
    make_tuner, log, checkpoint
):
    gate = threading.Event()
    tuner = make_tuner(
        until_opened(gate),
        {"steps": 5, "checkpoint": checkpoint, "x": nt.grid(range(4))},
        metric="loss",
        callbacks=[log],
        executor=nt.ThreadExecutor(),
    )
    tuner.start()
    log.wait_for(result_of(0, 1))
    log.wait_for(result_of(1, 1))
    tuner.pause(1)
    log.wait_for(paused(1))
    if checkpoint:
        log.wait_for(result_of(2, 1))  # trial 1's worker went to trial 2
    waiting = tuner.add_trial({"steps": 5, "checkpoint": checkpoint, "x": 9})
    tuner.stop()
    assert tuner.wait(60)
    assert tuner.state == "stopped"
    gate.set()
    # A trial paused by checkpoint stays resumable; a suspended one cannot be saved: it ends.
    if checkpoint:
        statuses = ["TERMINATED", "PAUSED", "TERMINATED", "PENDING"]
        cut = {0: "user", 1: None, 2: "user", waiting: None}
    else:
        statuses = ["TERMINATED", "TERMINATED", "PENDING"]
        cut = {0: "user", 1: "user", waiting: None}
    assert tuner.dataframe()["status"].tolist() == statuses
    assert stopped_by(tuner) == stopped_by(nt.load(tuner.path)) == cut

    again = nt.Tuner.restore(
        tuner.path, until_opened(gate), progress=False, executor=nt.ThreadExecutor()
    )
    again.run()
    assert (again.dataframe()["status"] == "TERMINATED").all()
    assert stopped_by(again) == stopped_by(nt.load(tuner.path))
    assert len(again.trials) == 5, "the grid's four points and the trial added by hand"
    assert stopped_by(again) == {**dict.fromkeys(range(5)), **cut}, "the rest ran to their end"


def test_an_experiment_written_before_stopped_by_still_loads_and_restores(make_tuner):
    tuner = run_cut_at_five(make_tuner)
    journal, snapshot = tuner.path / "trials.jsonl", tuner.path / "trials.json"
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert any(line["stopped_by"] == "stop criteria" for line in lines)
    journal.write_text("".join(json.dumps(_older(line)) + "\n" for line in lines))
    compacted = json.loads(snapshot.read_text())
    compacted["trials"] = [_older(record) for record in compacted["trials"]]
    compacted["journal_offset"] = journal.stat().st_size
    snapshot.write_text(json.dumps(compacted))

    loaded = nt.load(tuner.path)
    assert stopped_by(loaded) == {0: None, 1: None}, "not recorded: left empty"
    assert loaded.dataframe()["training_iteration"].tolist() == [3, 5]
    snapshot.unlink()
    assert stopped_by(nt.load(tuner.path)) == {0: None, 1: None}, "from the journal alone"
    again = nt.Tuner.restore(tuner.path, trainables.count_up, progress=False)
    again.run()
    assert again.state == "finished"
    assert stopped_by(again) == {0: None, 1: None}


def _older(record):
    """A trial record as an nbtune before `stopped_by` wrote it."""
    return {name: value for name, value in record.items() if name != "stopped_by"}


def test_a_field_of_a_newer_nbtune_is_left_out(make_tuner):
    tuner = make_tuner(trainables.count_up, {"steps": 2}, executor=nt.ThreadExecutor())
    tuner.run()
    journal = tuner.path / "trials.jsonl"
    (tuner.path / "trials.json").unlink()
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    journal.write_text("".join(json.dumps({**line, "later": 1}) + "\n" for line in lines))
    assert nt.load(tuner.path).dataframe()["status"].tolist() == ["TERMINATED"]


def test_every_value_is_documented():
    assert set(STOPPED_BY) == {
        "user",
        "scheduler",
        "stop criteria",
        "time budget",
        "deadline",
        "fail fast",
        "failures",
    }


def test_every_stop_but_the_stop_criteria_cuts_a_trial_short():
    cut = {value for value in STOPPED_BY if nt.Trial(0, {}, stopped_by=value).cut_short}
    assert cut == set(STOPPED_BY) - {"stop criteria"}
    assert not nt.Trial(0, {}).cut_short, "a trial that ran to its own end"
