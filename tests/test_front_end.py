"""The core's side of the front end: the `DashboardSource` protocol its views implement, and the
registry through which `import nbtune` wires a dashboard in without the core importing it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import pytest
from trainables import count_up

import nbtune as nt
from nbtune import front_end
from nbtune.constraints import Constraints
from nbtune.events import TrialResult
from nbtune.front_end import DashboardSource

KINDS = {
    "name": str,
    "path": Path,
    "metric": str,
    "mode": str,
    "state": str,
    "live": bool,
    "max_concurrent": int,
    "planned_trials": (int, type(None)),
    "snapshot": tuple,
    "checkpoint_mb": dict,
    "constraints": Constraints,
}
"""What each data member of the protocol holds, or its method returns (`snapshot`,
`checkpoint_mb`)."""

METHODS = {"snapshot", "checkpoint_mb"}

COMMANDS = {"subscribe", "pause", "resume", "stop", "pause_all", "resume_all", "set_max_concurrent"}


@pytest.fixture
def finished(make_tuner):
    """A finished run of two trials."""
    tuner = make_tuner(
        count_up, {"steps": nt.grid([1, 2])}, metric="loss", executor=nt.ThreadExecutor()
    )
    tuner.run(display=False)
    return tuner


def declared_members() -> set[str]:
    return {name for name in vars(DashboardSource) if not name.startswith("_")}


def test_the_protocol_declares_what_the_dashboard_reads_and_the_commands_it_sends():
    assert declared_members() == set(KINDS) | COMMANDS


@pytest.mark.parametrize("view", ["tuner", "analysis"])
def test_the_tuner_and_a_loaded_experiment_are_dashboard_sources(finished, view):
    source = finished if view == "tuner" else nt.load(finished.path)
    assert isinstance(source, DashboardSource)
    for name, kind in KINDS.items():
        member = getattr(source, name)
        value = member() if name in METHODS else member
        assert isinstance(value, kind), f"{view}.{name} is {value!r}"
    for name in COMMANDS:
        assert callable(getattr(source, name)), f"{view}.{name}"
    trials, rows = source.snapshot()
    assert (len(trials), len(rows), source.live) == (2, 3, False)


def test_the_tuner_plans_its_searchers_trials_once_it_has_started(make_tuner, finished):
    waiting = make_tuner(count_up, {"steps": nt.grid([1, 2, 3])}, num_samples=2)
    assert waiting.planned_trials is None, "before start() the searcher has no budget yet"
    assert finished.planned_trials == 2


GRID = {"x": nt.grid([1, 2, 3]), "y": nt.uniform(0, 1)}
FREE = {"y": nt.uniform(0, 1)}
PLANS = {
    "grid x num_samples": (GRID, 2, {}, 6),
    "points to evaluate": (FREE, 3, {"points_to_evaluate": [{"y": 0.1}, {"y": 0.2}]}, 3),
    "points and a grid": (GRID, 1, {"points_to_evaluate": [{"x": 1, "y": 0.1}, {"x": 2}]}, 3),
    "repeater": (FREE, 3, {"searcher": lambda: nt.Repeater(nt.RandomSearch(), 2)}, 6),
    "limiter": (FREE, 3, {"searcher": lambda: nt.ConcurrencyLimiter(nt.RandomSearch(), 1)}, 3),
    "limited repeater": (
        GRID,
        1,
        {"searcher": lambda: nt.ConcurrencyLimiter(nt.Repeater(nt.RandomSearch(), 2), 1)},
        6,
    ),
}
"""Space, num_samples, other Tuner options (searchers made fresh) and the trials it plans."""


@pytest.fixture
def gated(make_tuner):
    """Builds a Tuner whose trials (one at a time) each report once, then wait for `gate`:
    the run is live, with trials still to come, until the test sets it."""
    gate = threading.Event()

    def train(config):
        nt.report(loss=config["y"])
        gate.wait(30)

    def make(space, **options):
        options = {key: value() if callable(value) else value for key, value in options.items()}
        return make_tuner(
            train,
            space,
            metric="loss",
            max_concurrent=1,
            executor=nt.ThreadExecutor(),
            **options,
        )

    yield make, gate
    gate.set()


@pytest.mark.parametrize("plan", PLANS)
def test_the_tuner_plans_every_trial_its_searcher_will_run(gated, plan):
    space, num_samples, options, planned = PLANS[plan]
    make, gate = gated
    tuner = make(space, num_samples=num_samples, **options)
    tuner.start(display=False)
    assert tuner.planned_trials == planned, "while the first trial runs"
    assert len(tuner.trials) < planned
    gate.set()
    assert tuner.wait(30)
    assert tuner.planned_trials == len(tuner.trials) == planned


def test_trials_added_by_hand_come_on_top_of_the_plan(gated):
    make, gate = gated
    tuner = make(FREE, num_samples=2)
    tuner.add_trial({"y": 0.5})
    tuner.start(display=False)
    tuner.add_trial({"y": 0.6})
    assert tuner.planned_trials == 2
    assert [trial.origin for trial in tuner.trials].count("user") == 2
    gate.set()
    assert tuner.wait(30)
    assert tuner.planned_trials == 2 and len(tuner.trials) == 4


def test_a_run_stopped_early_plans_no_more_and_its_restore_plans_its_extra_samples(gated, log):
    make, gate = gated
    tuner = make(GRID, num_samples=2, callbacks=[log])
    tuner.start(display=False)
    assert tuner.planned_trials == 6
    log.wait_for(lambda event: isinstance(event, TrialResult))
    tuner.stop()
    gate.set()
    assert tuner.wait(30)
    made = len(tuner.trials)
    assert made < 6
    assert tuner.planned_trials == made, "no pending trial that will never run"

    again = nt.Tuner.restore(
        tuner.path, tuner.trainable, num_samples=3, progress=False, executor=nt.ThreadExecutor()
    )
    again.start(display=False)
    assert again.planned_trials == 9, "3 samples of a grid of 3"
    assert again.wait(30)
    assert again.planned_trials == len(again.trials) == 9


@pytest.mark.parametrize(
    ("command", "arguments"),
    [
        ("pause", (0,)),
        ("resume", (0,)),
        ("stop", ()),
        ("pause_all", ()),
        ("resume_all", ()),
        ("set_max_concurrent", (3,)),
    ],
)
def test_a_loaded_experiment_refuses_the_commands_of_a_live_run(finished, command, arguments):
    analysis = nt.load(finished.path)
    with pytest.raises(nt.RunEndedError, match=rf"^{command}\(\): 'run0' is loaded from disk"):
        getattr(analysis, command)(*arguments)


def test_a_loaded_experiment_never_calls_a_subscriber(finished):
    heard = []
    unsubscribe = nt.load(finished.path).subscribe(heard.append)
    unsubscribe()
    assert heard == []


class Recorder:
    """A front end's dashboard that records what the core asks of it."""

    made: ClassVar[list[Recorder]] = []

    def __init__(self, source):
        self.source = source
        self.shown = 0
        self.filled = 0
        Recorder.made.append(self)

    def show(self):
        self.shown += 1
        return self

    def fill(self):
        self.filled += 1
        return True


@pytest.fixture
def recorder(monkeypatch):
    """`Recorder` registered as the front end for one test; the notebook's one back after."""
    monkeypatch.setattr(front_end, "_load", front_end._load)
    monkeypatch.setattr(Recorder, "made", [])
    front_end.register(lambda: Recorder)
    return Recorder


def test_start_shows_the_registered_front_ends_dashboard_and_wait_fills_its_slot(
    make_tuner, recorder
):
    tuner = make_tuner(count_up, {"steps": 2}, metric="loss", executor=nt.ThreadExecutor())
    tuner.start(display=True)
    assert tuner.wait(30)
    (dashboard,) = recorder.made
    assert (dashboard.source, dashboard.shown, dashboard.filled) == (tuner, 1, 1)
    assert tuner.dashboard() is dashboard, "made once"
    loaded = nt.load(tuner.path).dashboard()
    assert isinstance(loaded, Recorder) and loaded.source.path == tuner.path


def test_without_a_registered_front_end_a_dashboard_cannot_be_made(monkeypatch, finished):
    monkeypatch.setattr(front_end, "_load", None)
    with pytest.raises(RuntimeError, match="no front end registered"):
        nt.load(finished.path).dashboard()


def test_import_nbtune_registers_the_notebooks_dashboard_but_imports_it_only_when_made(finished):
    code = (
        "import sys, nbtune\n"
        "from nbtune import front_end\n"
        "print(front_end._load is not None, 'nbtune.ui' in sys.modules)\n"
        f"dashboard = nbtune.load({str(finished.path)!r}).dashboard()\n"
        "print(type(dashboard).__module__, 'ipywidgets' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["True False", "nbtune.ui.dashboard True"]
