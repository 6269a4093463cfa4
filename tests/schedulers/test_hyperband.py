"""HyperBand: the paper's brackets, synchronous rungs, and the user's commands alongside."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import trainables

import nbtune as nt
from nbtune.events import ExperimentDone, TrialPaused, TrialResult
from nbtune.schedulers import Decision, Resume, Stop

# Li et al. (2018), Table 1 for R = 81, eta = 3, and the same formulas worked by hand for
# R = 16, eta = 2: per bracket s, the trials n_i at each rung and their budgets r_i.
PAPER = {
    (81, 3): {
        4: ([81, 27, 9, 3, 1], [1, 3, 9, 27, 81]),
        3: ([34, 11, 3, 1], [3, 9, 27, 81]),
        2: ([15, 5, 1], [9, 27, 81]),
        1: ([8, 2], [27, 81]),
        0: ([5], [81]),
    },
    (16, 2): {
        4: ([16, 8, 4, 2, 1], [1, 2, 4, 8, 16]),
        3: ([10, 5, 2, 1], [2, 4, 8, 16]),
        2: ([7, 3, 1], [4, 8, 16]),
        1: ([5, 2], [8, 16]),
        0: ([5], [16]),
    },
}


def play_bracket(hyperband, first_id, size):
    """Feed a full bracket's trials their results rung by rung, obeying every decision and
    request; return how many trials ran at each rung and to what budget."""
    alive = list(range(first_id, first_id + size))
    for trial_id in alive:
        hyperband.on_trial_add(nt.Trial(trial_id, {}))
    sizes, budgets = [], []
    while alive:
        budget = hyperband._bracket_of[alive[0]].milestone
        budget = hyperband.max_t if budget == float("inf") else budget
        sizes.append(len(alive))
        budgets.append(budget)
        going_on = []
        for trial_id in alive:
            trial = nt.Trial(trial_id, {}, checkpoint="ckpt")
            result = {"loss": float(trial_id), "training_iteration": budget}
            if hyperband.on_result(trial, result) is Decision.CONTINUE:
                going_on.append(trial_id)
        requests = hyperband.take_requests()
        going_on += [r.trial_id for r in requests if isinstance(r, Resume)]
        for stopped in (r.trial_id for r in requests if isinstance(r, Stop)):
            hyperband.on_trial_complete(nt.Trial(stopped, {}))
        alive = sorted(going_on)
    return sizes, budgets


def test_brackets_have_the_sizes_and_budgets_of_the_papers_formulas():
    for (max_t, eta), brackets in PAPER.items():
        hyperband = nt.HyperBand(max_t=max_t, reduction_factor=eta)
        hyperband.setup("loss", "min")
        first_id = 0
        for s in sorted(brackets, reverse=True):
            size = brackets[s][0][0]
            assert play_bracket(hyperband, first_id, size) == brackets[s], (max_t, eta, s)
            assert hyperband.brackets[-1].s == s
            first_id += size


NINE = [4, 7, 1, 9, 3, 8, 2, 6, 5]
"""q of trials 0-8; one bracket (s = 2 for max_t = 9): 9 trials at t=1, the best 3 (q = 1,
2, 3: trials 2, 6, 4) at t=3, the best (trial 2) on to t=9."""
LAST_STEP = {0: 1, 1: 1, 2: 9, 3: 1, 4: 3, 5: 1, 6: 3, 7: 1, 8: 1}


def assert_ran_like_the_paper(tuner):
    frame = tuner.dataframe().set_index("trial_id")
    assert (frame["status"] == "TERMINATED").all(), frame[["status", "error"]]
    assert frame["training_iteration"].to_dict() == LAST_STEP
    history = tuner.history()
    for trial_id, steps in history.groupby("trial_id")["t"]:
        assert steps.tolist() == list(range(1, LAST_STEP[trial_id] + 1)), "no gap, no repeat"
    assert len(history) == 21


def test_trials_pause_at_each_rung_and_only_the_best_resume(make_tuner, log):
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.grid(NINE), "max_t": 20},
        metric="loss",
        scheduler=nt.HyperBand(max_t=9),
        callbacks=[log],
    )
    tuner.run()
    assert_ran_like_the_paper(tuner)
    steps = [e.result["t"] for e in log.events if isinstance(e, TrialResult)]
    for rung in (1, 3):
        last_arrival = max(i for i, step in enumerate(steps) if step == rung)
        assert steps.index(rung + 1) > last_arrival, (
            f"every trial reaches {rung} before any goes on"
        )


def test_trials_that_checkpoint_every_third_step_never_hold_the_run_at_a_rung(make_tuner):
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.grid(NINE), "max_t": 20, "checkpoint_every": 3},
        metric="loss",
        scheduler=nt.HyperBand(max_t=9),
    )
    tuner.start()
    assert tuner.wait(120), "the run went on: no rung held both workers"
    assert_ran_like_the_paper(tuner)
    history = tuner.history()
    for trial_id, steps in history.groupby("trial_id")["t"]:
        assert steps.tolist() == list(range(1, len(steps) + 1)), f"trial {trial_id} repeated"


def sparse_checkpoints(config):
    """Ray's hyperband_function_example: a falling loss, a checkpoint every `every` steps
    (never for 0), resumed from the latest."""
    checkpoint = nt.get_checkpoint()
    start = checkpoint["step"] if checkpoint else 0
    for step in range(start + 1, 201):
        saved = {"step": step} if config["every"] and step % config["every"] == 0 else None
        nt.report(loss=(config["x"] - 0.3) ** 2 + 1 / step, checkpoint=saved)


@pytest.mark.parametrize(("num_samples", "every"), [(20, 3), (8, 0)])
def test_a_bracket_the_run_never_fills_is_judged_with_the_trials_it_has(
    make_tuner, num_samples, every
):
    tuner = make_tuner(
        sparse_checkpoints,
        {"x": nt.uniform(0, 1), "every": every},
        metric="loss",
        num_samples=num_samples,
        scheduler=nt.HyperBand(max_t=200),
    )
    tuner.run()
    assert tuner.state == "finished", tuner.status
    frame = tuner.dataframe()
    assert (frame["status"] == "TERMINATED").all()
    size, budgets = tuner.scheduler.bracket_shape(tuner.scheduler.s_max)
    assert num_samples < size, "the first bracket never fills"
    ran = sorted(frame["training_iteration"], reverse=True)
    kept = num_samples // 3
    assert ran[kept - 1] > budgets[0] == ran[kept], "a third went past the first rung"
    assert ran[0] == 200, "the best of each rung went on to max_t"
    for trial_id, steps in tuner.history().groupby("trial_id")["training_iteration"]:
        assert steps.tolist() == list(range(1, len(steps) + 1)), f"trial {trial_id}: {steps}"


def test_a_trial_the_user_paused_is_not_resumed_but_is_judged_once_resumed(
    make_tuner, log, tmp_path
):
    gate = tmp_path / "gate"
    order = [1, 5, 6, 7, 8, 9, 2, 3, 4]
    space = {"q": nt.grid(order), "max_t": 20, "gate": str(gate), "free": 1}
    tuner = make_tuner(
        trainables.learning_curve, space, metric="loss", scheduler=nt.HyperBand(9), callbacks=[log]
    )
    tuner.start()
    log.wait_for(lambda e: isinstance(e, TrialPaused) and e.trial_id == 0)
    tuner.pause(0)
    gate.touch()

    def paused_at_rung_3(trial_id):
        """Paused after its result at iteration 3 (whether it paused at rung 1 too depends on
        whether its result completed that rung)."""
        events = list(log.events)
        reached = next(
            (
                i
                for i, e in enumerate(events)
                if isinstance(e, TrialResult)
                and e.trial_id == trial_id
                and e.result["training_iteration"] == 3
            ),
            None,
        )
        return reached is not None and any(
            isinstance(e, TrialPaused) and e.trial_id == trial_id for e in events[reached:]
        )

    log.wait_for(lambda e: paused_at_rung_3(6) and paused_at_rung_3(7))
    held = tuner.get_trial(0)
    assert (held.status, held.iteration) == (nt.TrialStatus.PAUSED, 1), "promoted, yet held"

    tuner.resume(0)
    tuner.wait()
    frame = tuner.dataframe().set_index("trial_id")
    assert frame["training_iteration"].to_dict() == {
        0: 9,
        1: 1,
        2: 1,
        3: 1,
        4: 1,
        5: 1,
        6: 3,
        7: 3,
        8: 1,
    }


def test_a_killed_run_carries_on_with_the_schedulers_saved_brackets(runs):
    driver = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        import nbtune as nt, trainables
        space = {{"q": nt.grid({NINE}), "max_t": 20, "interval": 0.1}}
        nt.Tuner(trainables.learning_curve, space, metric="loss", scheduler=nt.HyperBand(9),
                 max_concurrent=2, name="hb", storage_path={str(runs)!r}, progress=False).run()
    """)
    process = subprocess.Popen([sys.executable, "-c", driver], start_new_session=True)
    results = runs / "hb" / "results.jsonl"
    deadline = time.monotonic() + 60
    while not (results.exists() and len(results.read_text().splitlines()) >= 11):
        assert time.monotonic() < deadline and process.poll() is None, "the driver never got going"
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert len(results.read_text().splitlines()) < 21, "killed before the end"

    tuner = nt.Tuner.restore(runs / "hb", trainables.learning_curve, progress=False)
    tuner.run()
    assert_ran_like_the_paper(tuner)


class PausesForever(nt.Scheduler):
    """Pauses every trial at its second result and never resumes one."""

    def on_result(self, trial, result):
        return Decision.PAUSE if result["training_iteration"] == 2 else Decision.CONTINUE


def test_a_run_whose_scheduler_holds_every_trial_ends_saying_why(make_tuner, log):
    tuner = make_tuner(
        trainables.count_up, {"steps": 5}, num_samples=3, scheduler=PausesForever(), callbacks=[log]
    )
    tuner.start()
    assert tuner.wait(60), "the run ended instead of waiting forever"
    done = log.of(ExperimentDone)[0]
    assert done.state == "failed"
    assert done.error == (
        "the run cannot go on: PausesForever holds trials 0, 1, 2 paused and resumes none of "
        "them; nothing else is left to run"
    )
    frame = tuner.dataframe()
    assert (frame["status"] == "PAUSED").all(), "held for Tuner.restore"
    assert (frame["training_iteration"] == 2).all()
