"""A driver killed at the worst moments: right after `start()`, before any trial reported or the
run saved anything else; and just after the user's pause was acknowledged, before the trial got
to the report that carries it out. Each run is carried on, in this process, with nothing more
than `Tuner.restore(path, trainable)`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import trainables
from waiting import eventually

import nbtune as nt
from nbtune.events import TrialCompleted, TrialStarted

STEPS = 3


def drive_until(runs: Path, name: str, space: dict, then: str, said: str) -> Path:
    """Start a run of `waits_for_go` in a driver process, run `then` in it, and SIGKILL the
    driver (its workers with it) as soon as it prints `said`; return the run's folder."""
    start = textwrap.dedent(f"""
        import sys, threading
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import nbtune as nt, trainables
        from nbtune.events import TrialResult
        space = {space!r}
        space["x"] = nt.grid(space["x"])
        tuner = nt.Tuner(trainables.waits_for_go, space, metric="loss", max_concurrent=2,
                         name={name!r}, storage_path={str(runs)!r}, seed=0, progress=False)
    """)
    driver = (
        f"{start}{textwrap.dedent(then)}\nprint({said!r}, flush=True)\nthreading.Event().wait()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout.readline() == f"{said}\n", "the driver died before it got there"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        eventually(lambda: group_is_gone(process.pid), "the driver's workers died with it")
    return runs / name


def group_is_gone(group: int) -> bool:
    """Whether no process is left in the process group (a worker that outlives the driver by
    a moment still holds the run's lock)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_driver_killed_right_after_start_is_restored_with_just_its_trainable(runs, tmp_path):
    go = tmp_path / "go"
    space = {"steps": STEPS, "free": 0, "go": str(go), "x": [0, 1, 2]}
    run = drive_until(runs, "early", space, "tuner.start(display=False)", "started")
    assert nt.load(run).state == "unfinished"
    assert nt.load(run).history().empty, "killed before any trial reported"

    tuner = nt.Tuner.restore(run, trainables.waits_for_go, progress=False)
    go.touch()
    tuner.run(display=False)

    frame = tuner.dataframe()
    assert (frame["status"] == "TERMINATED").all(), frame[["trial_id", "status", "error"]]
    assert sorted(frame["config/x"]) == [0, 1, 2], "no grid point run twice, none missed"
    for _, steps in tuner.history().groupby("trial_id")["step"]:
        assert steps.tolist() == list(range(1, STEPS + 1))


def test_a_pause_acknowledged_before_the_driver_died_holds_in_the_restored_run(runs, tmp_path, log):
    go = tmp_path / "go"
    space = {"steps": STEPS, "free": 1, "go": str(go), "x": [0, 1]}
    pause_after_first_result = """
        reported = threading.Event()
        tuner.subscribe(
            lambda event: isinstance(event, TrialResult) and event.trial_id == 0 and reported.set()
        )
        tuner.start(display=False)
        assert reported.wait(60)
        tuner.pause(0)
    """
    run = drive_until(runs, "paused", space, pause_after_first_result, "paused")
    dead = nt.load(run).dataframe().set_index("trial_id")["status"]
    assert dead[0] == "RUNNING", "the pause had not reached the trial when the driver died"

    tuner = nt.Tuner.restore(run, trainables.waits_for_go, progress=False, callbacks=[log])
    tuner.start(display=False)
    assert tuner.get_trial(0).status is nt.TrialStatus.PAUSED
    assert tuner.get_trial(0).paused_by == "checkpoint"
    go.touch()
    log.wait_for(lambda event: isinstance(event, TrialCompleted) and event.trial_id == 1)
    assert tuner.state == "paused", "the trial the user paused waits for the user"
    assert [event.trial_id for event in log.of(TrialStarted)] == [1]

    tuner.resume(0)
    assert tuner.wait(60)
    assert tuner.get_trial(0).status is nt.TrialStatus.TERMINATED
    history = tuner.history()
    assert history[history["trial_id"] == 0]["step"].tolist() == [1, 2, 3], "from its checkpoint"
