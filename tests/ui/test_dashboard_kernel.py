"""The dashboard in a real kernel, clicked the way JupyterLab clicks: comm messages."""

from __future__ import annotations

import json
import queue
import sys
import textwrap
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


IPYKERNEL6 = Path(sys.prefix) / "ipykernel6"
"""ipykernel 6, installed apart by `make test` (pip --target), for the kernel on 6.x."""


class Kernel:
    """A real ipykernel, driven as a front end drives it."""

    def __init__(self, cwd, kernel_name="python3"):
        self.manager, self.client = start_new_kernel(kernel_name=kernel_name, cwd=str(cwd))
        self.subshells = kernel_name == "python3"

    def run(self, code: str, timeout: float = 60) -> dict:
        """Execute `code`; return its stdout, its display data and any error."""
        msg_id = self.client.execute(textwrap.dedent(code))
        return self.collect(msg_id, timeout)

    def start(self, code: str) -> str:
        """Start executing `code` without waiting for it."""
        return self.client.execute(textwrap.dedent(code))

    def collect(self, msg_id: str, timeout: float = 60) -> dict:
        out = {"stdout": "", "displays": [], "error": None}
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no reply within {timeout} s; so far {out}") from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content["name"] == "stdout":
                out["stdout"] += content["text"]
            elif kind == "display_data":
                out["displays"].append(content["data"])
            elif kind == "error":
                out["error"] = "\n".join(content["traceback"])
            elif kind == "status" and content["execution_state"] == "idle":
                return out

    def click(self, comm_id: str) -> None:
        """Send a button click exactly as the widget front end does."""
        content = {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}
        self.client.shell_channel.send(self.client.session.msg("comm_msg", content))

    def click_then_run(self, comm_id: str, code: str) -> dict:
        """Click, then run `code`: during the click where subshells serve clicks, else after."""
        if not self.subshells:
            self.click(comm_id)
            return self.run(code)
        busy = self.start(code)
        self.click(comm_id)
        return self.collect(busy)

    def shutdown(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def ipykernel6_spec(folder: Path) -> Path:
    """A kernelspec folder for the same Python with ipykernel 6 first on its path."""
    if not (IPYKERNEL6 / "ipykernel").exists():
        pytest.skip(f"ipykernel 6 is not installed in {IPYKERNEL6}; `make test` installs it")
    spec = folder / "kernels" / "ipykernel6"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {
        "argv": argv,
        "env": {"PYTHONPATH": str(IPYKERNEL6)},
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


SETUP = """
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


def test_the_dashboard_shows_results_and_its_buttons_steer_the_run(kernel):
    started = kernel.run(SETUP)
    assert started["error"] is None, started["error"]
    assert any(WIDGET_VIEW in data for data in started["displays"]), "start() shows the dashboard"

    state = kernel.run("""
        assert wait_for("TrialResult", 0) and wait_for("TrialResult", 1)
        dashboard = tuner.dashboard()
        print(dashboard.clicks_while_busy, dashboard.table.visible_ids())
        print("Buttons act between cells here" in dashboard.message.value)
        print(dashboard.table.row_for(0).buttons["pause"].comm.comm_id)
        print(dashboard.table.row_for(0).buttons["resume"].comm.comm_id)
        print(dashboard.stop_all.comm.comm_id)
    """)
    assert state["error"] is None, state["error"]
    subshells, warned, pause_id, resume_id, stop_all_id = state["stdout"].splitlines()
    assert subshells == f"{kernel.subshells} [0, 1]"
    assert warned == str(not kernel.subshells), "without subshells, the dashboard says so"

    clicked = kernel.click_then_run(pause_id, 'print(wait_for("TrialPaused", 0))')
    assert clicked["stdout"] == "True\n", "the click paused trial 0"
    paused = kernel.run("""
        print(tuner.get_trial(0).status, tuner.get_trial(0).paused_by)
        dashboard.redraw()
        print(dashboard.table.row_for(0).buttons["resume"].layout.visibility)
    """)
    assert paused["stdout"].splitlines() == ["PAUSED checkpoint", "visible"], paused

    kernel.click(resume_id)
    resumed = kernel.run("""
        assert wait_for("TrialResumed", 0)
        print(tuner.get_trial(0).status in (nt.TrialStatus.PENDING, nt.TrialStatus.RUNNING))
    """)
    assert resumed["stdout"] == "True\n", resumed

    ended = kernel.click_then_run(stop_all_id, "print(tuner.wait(60), tuner.state)")
    assert ended["stdout"] == "True stopped\n", "Stop all ended the run"
    summary = "".join(data.get("text/html", "") for data in ended["displays"])
    assert "nbtune · dash</b> — stopped" in summary, "wait() leaves a static summary"
    assert "best loss = <b>" in summary

    final = kernel.run("""
        dashboard._thread.join(10)
        print(len(dashboard.figures["learning curves"].data), "stopped" in dashboard.title.value)
    """)
    assert final["stdout"] == "2 True\n", final
