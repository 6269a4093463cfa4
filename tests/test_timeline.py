"""`nbtune.timeline`: each stretch of running of real runs, read back from their journals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import trainables
from waiting import eventually

import nbtune as nt
from nbtune.events import TrialCompleted, TrialPaused, TrialResult, TrialStarted
from nbtune.timeline import OVERLAP_S, JournalTimeline

LONG = 3000
"""Steps of a trial that runs until the test stops it (0.01 s each)."""


def result_of(trial_id, iteration):
    return lambda e: (
        isinstance(e, TrialResult)
        and e.trial_id == trial_id
        and e.result["training_iteration"] >= iteration
    )


def event_of(kind, trial_id):
    return lambda e: isinstance(e, kind) and e.trial_id == trial_id


def hows(frame, trial_id):
    return frame.loc[frame["trial_id"] == trial_id, "how"].astype(str).tolist()


def column(frame, trial_id, name):
    return frame.loc[frame["trial_id"] == trial_id, name].tolist()


def seconds(frame):
    return (frame["end"] - frame["start"]).dt.total_seconds()


def assert_slots_never_overlap(frame, max_concurrent):
    assert frame["worker"].between(0, max_concurrent - 1).all(), frame
    for worker, stretches in frame.groupby("worker"):
        stretches = stretches.sort_values("start")
        gaps = (stretches["start"].iloc[1:].to_numpy() - stretches["end"].iloc[:-1].to_numpy()) / (
            pd.Timedelta(seconds=1)
        )
        assert (gaps >= -OVERLAP_S).all(), f"stretches overlap on worker {worker}: {stretches}"


def assert_running_adds_up(frame, tuner, leave_out=()):
    ran = seconds(frame.loc[~frame.index.isin(leave_out)]).groupby(frame["trial_id"]).sum()
    runtime = tuner.dataframe().set_index("trial_id")["runtime_s"]
    pd.testing.assert_series_equal(
        ran.reindex(runtime.index, fill_value=0.0), runtime, check_names=False, atol=1e-6
    )


def assert_loaded_the_same(tuner, frame):
    pd.testing.assert_frame_equal(nt.timeline(nt.load(tuner.path)), frame)
    pd.testing.assert_frame_equal(nt.timeline(tuner.path), frame)


@pytest.mark.parametrize("checkpoint", [True, False], ids=["checkpoint", "suspend"])
def test_pauses_and_a_stop_end_stretches_and_a_live_one_runs_until_now(make_tuner, log, checkpoint):
    space = {"steps": nt.grid([20, LONG, 20]), "checkpoint": checkpoint}
    tuner = make_tuner(trainables.steps, space, metric="loss", executor=nt.ThreadExecutor())
    tuner.subscribe(log)
    tuner.start(display=False)
    log.wait_for(result_of(0, 3))
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0))
    before = pd.Timestamp.now(tz="UTC")
    live = nt.timeline(tuner)
    assert hows(live, 0) == ["paused"]
    assert hows(live, 1) == ["running"], "trial 1 runs on"
    running = live.loc[live["trial_id"] == 1].iloc[0]
    assert running["start"] < running["end"] and running["end"] >= before, "it runs until now"

    tuner.resume(0)
    log.wait_for(event_of(TrialCompleted, 0))
    tuner.stop(1)
    assert tuner.wait(30)
    frame = nt.timeline(tuner)
    assert list(frame.columns) == [
        *("trial_id", "worker", "start", "end", "how", "attempt", "parent", "stopped_by")
    ]
    assert hows(frame, 0) == ["paused", "terminated"], "the pause is a gap between two stretches"
    assert hows(frame, 1) == ["stopped"] and column(frame, 1, "stopped_by") == ["user"]
    assert hows(frame, 2) == ["terminated"]
    assert frame["start"].is_monotonic_increasing
    assert (frame["attempt"] == 1).all() and frame["parent"].isna().all()
    first, second = frame.loc[frame["trial_id"] == 0].itertuples()
    assert first.end <= second.start
    assert_slots_never_overlap(frame, max_concurrent=2)
    assert_running_adds_up(frame, tuner)
    assert_loaded_the_same(tuner, frame)


def test_a_failed_attempt_that_is_retried_is_lost_and_the_next_one_ends_it(make_tuner, tmp_path):
    space = {"steps": 8, "marker": str(tmp_path / "failed-once")}
    tuner = make_tuner(
        trainables.fails_once, space, metric="loss", max_failures=1, executor=nt.LokyExecutor()
    )
    tuner.run()
    frame = nt.timeline(tuner)
    assert hows(frame, 0) == ["lost", "terminated"]
    assert column(frame, 0, "attempt") == [1, 2]
    assert_slots_never_overlap(frame, max_concurrent=2)
    assert_running_adds_up(frame, tuner)
    assert_loaded_the_same(tuner, frame)


def test_a_trial_that_fails_every_attempt_ends_in_error(make_tuner):
    space = {"fail_at": 3}
    tuner = make_tuner(
        trainables.fail_at, space, metric="loss", max_failures=1, executor=nt.ThreadExecutor()
    )
    tuner.run()
    frame = nt.timeline(tuner)
    assert hows(frame, 0) == ["lost", "error"]
    assert column(frame, 0, "attempt") == [1, 2]
    assert_running_adds_up(frame, tuner)


def test_a_fork_names_its_parent_and_starts_after_it_began(make_tuner, log):
    space = {"steps": LONG, "checkpoint": True, "lr": 1.0}
    tuner = make_tuner(trainables.steps, space, metric="loss", executor=nt.ThreadExecutor())
    tuner.subscribe(log)
    tuner.start(display=False)
    log.wait_for(result_of(0, 5))
    child = tuner.fork(0, {"steps": 12, "lr": 0.5})
    log.wait_for(event_of(TrialStarted, child))
    tuner.stop(0)
    log.wait_for(event_of(TrialCompleted, child))
    assert tuner.wait(30)
    frame = nt.timeline(tuner)
    assert hows(frame, 0) == ["stopped"]
    assert hows(frame, child) == ["terminated"]
    assert column(frame, child, "parent") == [0]
    assert pd.isna(column(frame, 0, "parent")[0])
    assert column(frame, child, "start")[0] > column(frame, 0, "start")[0]
    assert sorted(frame["worker"]) == [0, 1], "they ran side by side"
    assert_running_adds_up(frame, tuner)
    assert_loaded_the_same(tuner, frame)


QUALITIES = [5, 3, 6, 1, 4, 2, 2.5]
CUT = {2: 1, 4: 1, 5: 3, 6: 1}
"""The trials ASHA(max_t=9, grace_period=1, reduction_factor=3) cuts, with their last step,
when they run one at a time in this order (see tests/schedulers/test_asha.py)."""


def test_the_trials_a_scheduler_cuts_are_stopped_and_the_others_terminated(make_tuner):
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.grid(QUALITIES), "max_t": 20},
        metric="loss",
        scheduler=nt.ASHA(max_t=9, grace_period=1, reduction_factor=3),
        max_concurrent=1,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    frame = nt.timeline(tuner)
    assert frame["trial_id"].tolist() == list(range(len(QUALITIES))), "one after the other"
    assert (frame["worker"] == 0).all()
    for trial_id in range(len(QUALITIES)):
        cut = trial_id in CUT
        assert hows(frame, trial_id) == ["stopped" if cut else "terminated"], trial_id
        assert column(frame, trial_id, "stopped_by") == ["scheduler" if cut else pd.NA]
    assert_slots_never_overlap(frame, max_concurrent=1)
    assert_running_adds_up(frame, tuner)
    assert_loaded_the_same(tuner, frame)


STEPS = 200


def results_on_disk(run):
    path = run / "results.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_a_killed_run_s_stretches_run_until_restored_and_then_were_lost(runs):
    driver = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import nbtune as nt, trainables
        space = {{"steps": {STEPS}, "interval": 0.01, "checkpoint": True, "x": nt.grid(range(3))}}
        tuner = nt.Tuner(trainables.steps, space, metric="loss", max_concurrent=2,
                         name="crash", storage_path={str(runs)!r}, progress=False,
                         executor=nt.ThreadExecutor())
        tuner.run()
    """)
    process = subprocess.Popen([sys.executable, "-c", driver], start_new_session=True)
    run = runs / "crash"
    try:
        eventually(lambda: results_on_disk(run) >= 10, "the driver reports 10 results", timeout=60)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    killed = nt.load(run)
    assert killed.state == "unfinished"
    before = nt.timeline(killed)
    assert sorted(before["trial_id"]) == [0, 1]
    assert set(before["how"].astype(str)) == {"running"}
    assert before["end"].isna().all(), "a run read from disk: when they ended is not known"
    last_report = killed.history().groupby("trial_id")["timestamp"].max()

    tuner = nt.Tuner.restore(run, trainables.steps, progress=False, executor=nt.ThreadExecutor())
    tuner.run()
    frame = nt.timeline(tuner)
    for trial_id in (0, 1):
        assert hows(frame, trial_id) == ["lost", "terminated"]
        lost = frame.loc[(frame["trial_id"] == trial_id) & (frame["how"] == "lost")].iloc[0]
        assert lost["end"] == last_report[trial_id], "it ended at its last result, as far as known"
    assert hows(frame, 2) == ["terminated"]
    assert_slots_never_overlap(frame, max_concurrent=2)
    lost = frame.index[frame["how"] == "lost"]
    assert_running_adds_up(frame, tuner, leave_out=lost)
    assert_loaded_the_same(tuner, frame)


def test_a_run_not_started_has_no_stretches_and_a_bad_source_is_refused(make_tuner):
    tuner = make_tuner(trainables.steps, {"steps": 3})
    frame = nt.timeline(tuner)
    assert frame.empty and list(frame.columns)[:4] == ["trial_id", "worker", "start", "end"]
    assert str(frame["start"].dtype) == "datetime64[ns, UTC]"
    with pytest.raises(TypeError, match=r"^timeline\(\) reads a Tuner, .* not int$"):
        nt.timeline(3)


def test_the_journal_is_read_as_it_grows_a_line_being_written_left_for_later(make_tuner):
    tuner = make_tuner(trainables.steps, {"steps": 3}, executor=nt.ThreadExecutor())
    tuner.run()
    journal = (tuner.path / "trials.jsonl").read_bytes()
    growing = JournalTimeline(tuner.path)
    (tuner.path / "trials.jsonl").write_bytes(journal[:-5])
    assert [s.how for s in growing.read().segments()] == ["running"], "the last line is not whole"
    (tuner.path / "trials.jsonl").write_bytes(journal)
    assert [s.how for s in growing.read().segments()] == ["terminated"]
    assert growing.read().segments() == JournalTimeline(tuner.path).read().segments()
