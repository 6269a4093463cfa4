"""The core's side of the front end: the `DashboardSource` protocol its views implement, and the
registry through which `import nbtune` wires a dashboard in without the core importing it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from trainables import count_up

import nbtune as nt
from nbtune import front_end
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
