"""The dashboard in a real kernel, clicked the way JupyterLab clicks: comm messages."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from kernels import Kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


IPYKERNEL6 = Path(sys.prefix) / "ipykernel6"
"""ipykernel 6, installed apart by `make test` (pip --target), for the kernel on 6.x."""


def ipykernel6_spec(folder: Path) -> Path:
    """A kernelspec folder for the same Python with ipykernel 6 first on its path, then the
    tests' own PYTHONPATH (a worktree's nbtune, say), which the spec's env would replace."""
    if not (IPYKERNEL6 / "ipykernel").exists():
        pytest.skip(f"ipykernel 6 is not installed in {IPYKERNEL6}; `make test` installs it")
    spec = folder / "kernels" / "ipykernel6"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    path = [str(IPYKERNEL6), *filter(None, [os.environ.get("PYTHONPATH")])]
    kernel = {
        "argv": argv,
        "env": {"PYTHONPATH": os.pathsep.join(path)},
        "language": "python",
        "display_name": "ipykernel 6",
    }
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return folder


@pytest.fixture(params=["python3", "ipykernel6"])
def kernel(request, tmp_path, monkeypatch):
    """A kernel on ipykernel 7 (the environment's) and one on the latest ipykernel 6."""
    if request.param == "ipykernel6":
        monkeypatch.setenv("JUPYTER_PATH", str(ipykernel6_spec(tmp_path / "jupyter")))
    started = Kernel(tmp_path, request.param)
    yield started
    started.shutdown()


TRAINABLE = """
    import threading
    import nbtune as nt
    from nbtune.events import TrialPaused, TrialResult, TrialResumed

    def train(config):
        checkpoint = nt.get_checkpoint()
        step = checkpoint["step"] if checkpoint else 0
        while True:
            step += 1
            nt.report(loss=config["x"] / step, checkpoint={"step": step})
            threading.Event().wait(0.02)
"""
"""A trainable that reports until it is stopped and checkpoints every step."""

SETUP = (
    TRAINABLE
    + """
    seen = {}
    def flag(kind, trial_id):
        return seen.setdefault((kind, trial_id), threading.Event())
    def note(event):
        flag(type(event).__name__, getattr(event, "trial_id", None)).set()
    def wait_for(kind, trial_id):
        return flag(kind, trial_id).wait(30)

    tuner = nt.Tuner(train, {"x": nt.grid([1.0, 2.0])}, metric="loss", max_concurrent=2,
                     name="dash", callbacks=[note])
    tuner.start()
"""
)


def test_the_dashboard_shows_results_and_its_buttons_steer_the_run(kernel):
    started = kernel.run(SETUP)
    assert started.ok, started.error
    assert any(WIDGET_VIEW in data for data in started.displays), "start() shows the dashboard"

    state = kernel.run("""
        assert wait_for("TrialResult", 0) and wait_for("TrialResult", 1)
        dashboard = tuner.dashboard()
        assert dashboard.ready.wait(30)
        dashboard.redraw()
        print(dashboard.clicks_while_busy, dashboard.visible_ids(), dashboard.actions(0))
        print("Buttons act between cells here" in dashboard.message.value)
        print(dashboard.table.comm.comm_id)
        print(dashboard.stop_all.comm.comm_id)
    """)
    assert state.ok, state.error
    subshells, warned, table_id, stop_all_id = state.stdout.splitlines()
    assert subshells == f"{kernel.subshells} [0, 1] ['pause', 'stop']"
    assert warned == str(not kernel.subshells), "without subshells, the dashboard says so"

    pause = {"type": "action", "action": "pause", "trial_id": 0}
    clicked = kernel.click_then_run(table_id, 'print(wait_for("TrialPaused", 0))', pause)
    assert clicked.stdout == "True\n", "the row's Pause paused trial 0"
    paused = kernel.run("""
        print(tuner.get_trial(0).status, tuner.get_trial(0).paused_by)
        dashboard.redraw()
        print(dashboard.actions(0))
    """)
    assert paused.stdout.splitlines() == ["PAUSED checkpoint", "['resume', 'stop']"], paused

    kernel.send(table_id, {"type": "action", "action": "resume", "trial_id": 0})
    resumed = kernel.run("""
        assert wait_for("TrialResumed", 0)
        print(tuner.get_trial(0).status in (nt.TrialStatus.PENDING, nt.TrialStatus.RUNNING))
    """)
    assert resumed.stdout == "True\n", resumed

    ended = kernel.click_then_run(stop_all_id, "print(tuner.wait(60), tuner.state)")
    assert ended.stdout == "True stopped\n", "Stop all ended the run"
    assert ended.displays == [], "the summary goes under the dashboard, not under wait()"
    summary = started.displays[1]["text/html"]
    assert "nbtune · dash</b> — stopped" in summary, "wait() leaves a static summary"
    assert "best loss = <b>" in summary

    final = kernel.run("""
        dashboard._thread.join(10)
        print(len(dashboard.figures["learning curves"].data), "stopped" in dashboard.title.value)
        print(dashboard._thread.is_alive(), dashboard.failures)
    """)
    assert final.stdout == "2 True\nFalse {}\n", final


UNWAITED = """
    import threading
    import nbtune as nt

    release = threading.Event()

    def train(config):
        nt.report(loss=config["x"])
        release.wait(30)
        nt.report(loss=config["x"] / 2)

    hooks = len(get_ipython().events.callbacks["post_run_cell"])
    tuner = nt.Tuner(train, {"x": nt.grid([1.0, 2.0])}, metric="loss", max_concurrent=2,
                     name="unwaited", executor=nt.ThreadExecutor())
    tuner.start()
"""


def test_a_run_never_waited_on_leaves_its_summary_under_its_dashboard(kernel):
    started = kernel.run(UNWAITED)
    assert started.ok, started.error
    dashboard, slot = started.displays
    assert WIDGET_VIEW in dashboard
    assert slot["text/html"] == "", "the summary's slot is empty while the run goes on"

    ended = kernel.run("release.set(); print(tuner._runner.wait(30))")
    later = kernel.run("print(tuner.state, len(get_ipython().events.callbacks['post_run_cell']))")

    summary = started.displays[1]["text/html"]
    assert "nbtune · unwaited</b> — finished" in summary, "the cell after the end filled it"
    assert "best loss = <b>0.5</b> (trial 0: x=1)" in summary
    assert (ended.stdout, ended.stderr, ended.displays) == ("True\n", "", [])
    assert (later.stderr, later.displays) == ("", []), "nothing shows in the later cells"
    hooks = kernel.check("print(hooks)")
    assert later.stdout == f"finished {hooks}", "the hook removed itself once it had filled it"


def test_a_restored_run_has_a_live_dashboard_and_a_loaded_one_a_read_only_one(kernel):
    kernel.check(TRAINABLE)
    kernel.check("""
        reported, paused = threading.Event(), threading.Semaphore(0)
        def note(event):
            if isinstance(event, TrialResult) and event.trial_id == 1:
                reported.set()
            if isinstance(event, TrialPaused):
                paused.release()

        first = nt.Tuner(train, {"x": nt.grid([1.0, 2.0])}, metric="loss", max_concurrent=2,
                         name="again", executor=nt.ThreadExecutor(), callbacks=[note])
        first.start(display=False)
        assert reported.wait(30)
        first.pause(0, 1)
        assert paused.acquire(timeout=30) and paused.acquire(timeout=30)
        first.stop()
        assert first.wait(30)
    """)

    restored = kernel.run("""
        again = nt.Tuner.restore("nbtune-runs/again", train, executor=nt.ThreadExecutor())
        again.start()
        dashboard = again.dashboard()
        assert dashboard.ready.wait(30)
        dashboard.redraw()
        print(dashboard.live, dashboard.visible_ids(), dashboard.controls.layout.display)
        print(dashboard.stop_all.comm.comm_id)
    """)
    assert restored.ok, restored.error
    shown, stop_all_id = restored.stdout.splitlines()
    assert shown == "True [0, 1] ", "the restored run's dashboard is live, with its trials"
    assert WIDGET_VIEW in restored.displays[0]

    ended = kernel.click_then_run(stop_all_id, "print(again.wait(60), again.state)")
    assert ended.stdout == "True stopped\n", "its Stop all ended the run"
    assert "nbtune · again</b> — stopped" in restored.displays[1]["text/html"]

    loaded = kernel.run("""
        view = nt.load("nbtune-runs/again").dashboard()
        actions = [view.actions(trial_id) for trial_id in view.visible_ids()]
        print(view.live, view.visible_ids(), view.controls.layout.display)
        print(actions, "best loss" in view.best.value)
        display(view)
    """)
    assert loaded.ok, loaded.error
    assert loaded.stdout.splitlines() == ["False [0, 1] none", "[[], []] True"], "read-only"
    assert len(loaded.displays) == 1 and WIDGET_VIEW in loaded.displays[0], "and no summary"
