"""The dashboard's progress bar, outside a kernel: finished trials out of those the searcher
plans (read through `DashboardSource.planned_trials`), whichever searcher it is."""

from __future__ import annotations

import threading

import pytest
import trainables

import nbtune as nt
from nbtune.events import TrialResult

SEARCHERS = {
    "random": (nt.RandomSearch, 3),
    "optuna": (nt.OptunaSearch, 3),
    "limited-optuna": (lambda: nt.ConcurrencyLimiter(nt.OptunaSearch(), 1), 3),
    "repeated-optuna": (lambda: nt.Repeater(nt.OptunaSearch(), 2), 6),
}
"""Each searcher (made fresh) and the trials it plans with num_samples=3."""


@pytest.fixture
def gated_run(make_tuner, log):
    """Starts a run of three samples, one trial at a time, each held after its first result
    until `gate` is set; returns (tuner, gate) once trial 0 has reported."""
    gate = threading.Event()

    def train(config):
        nt.report(loss=config["x"])
        gate.wait(30)

    def start(searcher):
        tuner = make_tuner(
            train,
            {"x": nt.uniform(0, 1)},
            metric="loss",
            num_samples=3,
            max_concurrent=1,
            searcher=searcher,
            executor=nt.ThreadExecutor(),
        )
        tuner.subscribe(log)
        tuner.start(display=False)
        log.wait_for(lambda e: isinstance(e, TrialResult) and e.trial_id == 0)
        return tuner, gate

    return start


def bar(dashboard):
    dashboard.redraw()
    return dashboard.progress.value, dashboard.progress.max


@pytest.mark.parametrize("name", SEARCHERS)
def test_the_bar_ends_at_the_trials_the_searcher_plans(gated_run, name):
    make_searcher, planned = SEARCHERS[name]
    tuner, gate = gated_run(make_searcher())
    dashboard = tuner.dashboard()
    try:
        assert len(tuner.trials) < planned, "the trials made so far are fewer than planned"
        assert bar(dashboard) == (0, planned)
        gate.set()
        assert tuner.wait(60)
        assert len(tuner.trials) == planned
        assert bar(dashboard) == (planned, planned)
    finally:
        gate.set()
        dashboard.close()


def test_trials_added_by_hand_lengthen_the_bar(gated_run):
    tuner, gate = gated_run(nt.RandomSearch())
    dashboard = tuner.dashboard()
    try:
        tuner.add_trial({"x": 0.5})
        assert bar(dashboard) == (0, 4)
        gate.set()
        assert tuner.wait(60)
        assert bar(dashboard) == (4, 4)
    finally:
        gate.set()
        dashboard.close()


def test_a_loaded_experiment_counts_the_trials_it_has(gated_run):
    tuner, gate = gated_run(nt.RandomSearch())
    tuner.stop()
    gate.set()
    assert tuner.wait(60)
    loaded = nt.load(tuner.path)
    trials, _ = loaded.snapshot()
    finished = sum(trial.status.is_finished for trial in trials)
    assert loaded.planned_trials is None and len(trials) < 3, "it was stopped early"
    assert bar(loaded.dashboard()) == (finished, len(trials))


def test_the_header_shows_the_run_s_checkpoints_on_disk(make_tuner):
    tuner = make_tuner(trainables.quadratic, {"lr": 0.01, "layers": 1}, metric="loss")
    tuner.run()
    dashboard = tuner.dashboard()
    try:
        total = sum(tuner.dataframe()["checkpoint_mb"])
        assert total > 0
        assert f"checkpoints {total:.1f} MB" in dashboard.counts.value
    finally:
        dashboard.close()
