"""A run's start: what is ready before `start()`, and what waits until after it.

Building a Tuner starts its worker processes in the background (and, in a notebook, imports
the dashboard), so that `start()` and the first trial find them ready; the environment is
recorded beside the run rather than before it; the dashboard's table shows the first results
while plotly is still being imported.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
import time

import pytest
import trainables
from kernels import Kernel

import nbtune as nt

SCRIPT_PREAMBLE = """
import os, sys, time
import nbtune as nt

def workers():
    \"\"\"The pids of this process's worker processes, from /proc.\"\"\"
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline") as file:
                command = file.read()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and "popen_loky" in command:
            found.append(int(entry))
    return sorted(found)

def wait_for_workers(count):
    while len(workers()) < count:
        time.sleep(0.01)
    return workers()

def train(config):
    nt.report(loss=0.0, pid=os.getpid())
"""


def run_script(code: str, folder) -> list[str]:
    """Run `code` after `SCRIPT_PREAMBLE` in a fresh Python (a fresh worker pool); return its
    printed lines."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT_PREAMBLE + textwrap.dedent(code), str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds worker processes in /proc")
def test_building_a_tuner_starts_the_workers_that_its_run_then_uses(tmp_path):
    lines = run_script(
        """
        tuner = nt.Tuner(train, {"x": nt.grid([0, 1])}, metric="loss", max_concurrent=2,
                         storage_path=sys.argv[1], name="warm", progress=False)
        before = wait_for_workers(2)
        print(before)
        tuner.run()
        print(sorted(set(tuner.history()["pid"])))
        print(workers())
        """,
        tmp_path,
    )
    before, used, after = lines
    assert len(eval(before)) == 2, "the Tuner started its 2 workers before start()"
    assert set(eval(used)) <= set(eval(before)), "the run's trials ran on those workers"
    assert after == before, "the run started no worker of its own"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds worker processes in /proc")
def test_no_worker_is_started_twice_by_a_run_started_at_once_or_a_larger_tuner(tmp_path):
    lines = run_script(
        """
        at_once = nt.Tuner(train, {"x": nt.grid([0, 1])}, metric="loss", max_concurrent=2,
                           storage_path=sys.argv[1], name="at-once", progress=False)
        at_once.run()
        print(len(workers()))
        larger = nt.Tuner(train, {"x": nt.grid([0, 1, 2])}, metric="loss", max_concurrent=3,
                          storage_path=sys.argv[1], name="larger", progress=False)
        wait_for_workers(3)
        larger.run()
        print(len(workers()))
        """,
        tmp_path,
    )
    assert lines == ["2", "3"], "the run took the Tuner's workers; the larger one added one"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds worker processes in /proc")
def test_a_tuner_on_threads_starts_no_worker_process(tmp_path):
    lines = run_script(
        """
        tuner = nt.Tuner(train, {"x": nt.grid([0, 1])}, metric="loss", max_concurrent=2,
                         storage_path=sys.argv[1], name="threads", progress=False,
                         executor=nt.ThreadExecutor())
        tuner.run()
        print(workers())
        """,
        tmp_path,
    )
    assert lines == ["[]"], "the threads ran the trials; no process was started for them"


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits on processes with pidfds")
def test_a_tuner_never_started_leaves_no_worker_behind_when_its_process_exits(tmp_path):
    lines = run_script(
        """
        tuner = nt.Tuner(train, {}, metric="loss", max_concurrent=2,
                         storage_path=sys.argv[1], name="unused", progress=False)
        print(wait_for_workers(2))
        """,
        tmp_path,
    )
    pending = []
    for pid in eval(lines[0]):
        try:
            pending.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 10
    while pending:
        ended, _, _ = select.select(pending, [], [], max(0.0, deadline - time.monotonic()))
        assert ended, f"{len(pending)} workers outlived the process that started them by 10 s"
        for handle in ended:
            os.close(handle)
        pending = [handle for handle in pending if handle not in ended]


def test_the_environment_is_recorded_by_the_time_the_run_ends(make_tuner):
    tuner = make_tuner(trainables.count_up, {"x": 1}, metric="loss", executor=nt.ThreadExecutor())
    tuner.run()
    assert (tuner.path / "environment.json").exists(), "a run that has ended is whole on disk"
    assert tuner.environment["packages"]["nbtune"] == nt.__version__


def test_the_environment_can_be_read_while_it_is_being_recorded(make_tuner):
    tuner = make_tuner(trainables.forever, {"interval": 0.01}, metric="loss")
    tuner.start()
    try:
        assert tuner.environment["python"], "reading it waits for the recording"
    finally:
        tuner.stop()
        tuner.wait()


TABLE_BEFORE_PLOTLY = """
import threading
from importlib.abc import MetaPathFinder

plotly_may_load = threading.Event()

class HoldPlotly(MetaPathFinder):
    \"\"\"Holds plotly's import until the test lets it go: a slow import, made as slow as
    need be.\"\"\"
    def find_spec(self, name, path, target=None):
        if name == "plotly":
            plotly_may_load.wait()
        return None

sys.meta_path.insert(0, HoldPlotly())

finish = threading.Event()

def count(config):
    for step in range(3):
        nt.report(loss=float(step))
    finish.wait()

tuner = nt.Tuner(count, {"x": nt.grid([0, 1])}, metric="loss", storage_path=sys.argv[1],
                 name="table", progress=False, max_concurrent=2, executor=nt.ThreadExecutor())
tuner.start(display=False)
dashboard = tuner.dashboard()
dashboard.ready.wait()
while sorted(dashboard.visible_ids()) != [0, 1]:
    time.sleep(0.01)
print("table", sorted(dashboard.visible_ids()), "plotly" in sys.modules,
      dashboard.figures == {})
plotly_may_load.set()
dashboard.redraw()
finish.set()
tuner.wait()
print("chart", len(dashboard.figures["learning curves"].data))
"""


def test_the_table_shows_results_while_plotly_is_still_being_imported(tmp_path):
    table, chart = run_script(TABLE_BEFORE_PLOTLY, tmp_path)
    assert table == "table [0, 1] False True", "the table did not wait for plotly"
    assert chart == "chart 2", "once plotly is there, the chart draws both trials"


def test_a_tuner_built_in_a_notebook_imports_the_dashboard_before_it_starts(tmp_path):
    kernel = Kernel(tmp_path)
    try:
        built = kernel.run("""
            import sys, time
            import nbtune as nt
            def train(config):
                nt.report(loss=1.0)
            tuner = nt.Tuner(train, {}, metric="loss", name="early")
            while "nbtune.ui.live" not in sys.modules:
                time.sleep(0.01)
            print(tuner.state)
        """)
        assert built.ok, built.error
        assert built.stdout == "pending\n", "plotly's FigureWidget came before start()"
        started = kernel.run("tuner.run()")
        assert started.ok, started.error
    finally:
        kernel.shutdown()
