"""What a trial's process leaves behind: the processes that it starts end with it.

A trial may start processes of its own (a `multiprocessing.Process`, a joblib pool, a
`subprocess.Popen`), which may start more. When the trial ends (it returns, it is stopped with
`force=True`, or it times out) every one of them ends too, the runner hears that the trial is
over, and the run ends. Each kind of `LokyExecutor` is tried: warm workers and a process per
trial.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import subprocess
import sys
import time

import pytest

import nbtune as nt
from nbtune.events import TrialResult

pytestmark = pytest.mark.skipif(
    not hasattr(os, "pidfd_open"), reason="waits for processes to end with pidfds (Linux)"
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _child(pids):
    """A process of the trial's: it starts a sleeping grandchild, says both pids, and waits."""
    grandchild = subprocess.Popen(SLEEPER)
    pids.send((os.getpid(), grandchild.pid))
    grandchild.wait()


def starts_processes(config):
    """Starts a `multiprocessing.Process` (which starts a `subprocess.Popen` of its own) and a
    `subprocess.Popen`, reports their pids, then waits as `config["then"]` says: "hang" (until
    it is killed) or "return" (it ends, leaving them running). It reports once first, so that
    a trial timeout counts from when its process has started."""
    nt.report(loss=1.0)
    ours, theirs = multiprocessing.Pipe()
    child = multiprocessing.Process(target=_child, args=(theirs,))
    child.start()
    child_pid, grandchild_pid = ours.recv()
    popen = subprocess.Popen(SLEEPER)
    nt.report(loss=0.0, descendants=[child_pid, grandchild_pid, popen.pid], pid=os.getpid())
    if config["then"] == "hang":
        child.join()


def handles_on(pids):
    """pidfds on those of `pids` still running: each becomes readable when its process ends. A
    trial that returns may have its processes ended (and reaped) before the test hears its pids:
    those have nothing left to outlive it with."""
    handles = {}
    for pid in pids:
        try:
            handles[pid] = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
    return handles


def still_running(handles, timeout=5.0):
    """The pids of `handles` whose processes have not ended within `timeout` seconds (a process
    that was killed ends within milliseconds); those are killed, so that a failure leaks none."""
    deadline = time.monotonic() + timeout
    pending = dict(handles)
    while pending:
        ended, _, _ = select.select(
            list(pending.values()), [], [], max(0.0, deadline - time.monotonic())
        )
        if not ended:
            break
        pending = {pid: handle for pid, handle in pending.items() if handle not in ended}
    survivors = sorted(pid for pid in pending if _alive(pid))
    for pid, handle in handles.items():
        if pid in survivors:
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        os.close(handle)
    return survivors


def _alive(pid):
    """Whether `pid` runs (a zombie that nobody reaped yet does not)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def start_and_catch_descendants(make_tuner, log, reuse_workers, then, **options):
    executor = nt.LokyExecutor(reuse_workers=reuse_workers)
    tuner = make_tuner(
        starts_processes,
        {"then": then},
        metric="loss",
        executor=executor,
        callbacks=[log],
        max_concurrent=1,
        **options,
    )
    tuner.start()
    result = log.wait_for(lambda e: isinstance(e, TrialResult) and "descendants" in e.result)
    descendants = result.result["descendants"]
    return tuner, handles_on(descendants)


@pytest.mark.parametrize("reuse_workers", [False, True])
def test_a_forced_stop_ends_the_trial_and_every_process_it_started(make_tuner, log, reuse_workers):
    tuner, descendants = start_and_catch_descendants(make_tuner, log, reuse_workers, "hang")
    try:
        tuner.stop(0, force=True)
        assert tuner.wait(30), "the run ended"
        assert tuner.get_trial(0).status is nt.TrialStatus.TERMINATED
        assert still_running(descendants) == [], "the trial's processes ended with it"
    finally:
        tuner.stop()
        tuner.wait(30)


@pytest.mark.parametrize("reuse_workers", [False, True])
def test_a_trial_that_times_out_is_killed_with_every_process_it_started(
    make_tuner, log, reuse_workers
):
    tuner, descendants = start_and_catch_descendants(
        make_tuner, log, reuse_workers, "hang", trial_timeout_s=2.0
    )
    try:
        assert tuner.wait(30), "the run ended"
        trial = tuner.get_trial(0)
        assert trial.status is nt.TrialStatus.ERROR
        assert "TrialTimeout" in trial.error
        assert still_running(descendants) == [], "the trial's processes ended with it"
    finally:
        tuner.stop()
        tuner.wait(30)


def test_processes_that_a_trial_leaves_running_end_with_its_process(make_tuner, log):
    tuner, descendants = start_and_catch_descendants(make_tuner, log, False, "return")
    try:
        assert tuner.wait(30), "the run ended"
        assert tuner.get_trial(0).status is nt.TrialStatus.TERMINATED
        assert still_running(descendants) == [], "nothing the trial started outlives it"
    finally:
        tuner.stop()
        tuner.wait(30)


DRIVER = """
import sys
import nbtune as nt
from test_process_trees import starts_processes

def say_pids(event):
    if type(event).__name__ == "TrialResult" and "descendants" in event.result:
        print(event.result["pid"], *event.result["descendants"], flush=True)

tuner = nt.Tuner(starts_processes, {"then": "hang"}, metric="loss", storage_path=sys.argv[1],
                 progress=False, executor=nt.LokyExecutor(reuse_workers=False))
tuner.subscribe(say_pids)
tuner.start()
tuner.wait()
"""


def test_a_killed_driver_takes_its_trial_processes_and_theirs_with_it(tmp_path):
    here = os.path.dirname(__file__)
    path = os.pathsep.join(
        filter(None, [here, os.path.dirname(here), os.environ.get("PYTHONPATH")])
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    try:
        pids = [int(pid) for pid in driver.stdout.readline().split()]
        assert len(pids) == 4, "the trial's process and the three it started"
        processes = handles_on(pids)
    finally:
        driver.kill()
        driver.wait()
    assert still_running(processes) == [], "nothing of the run outlives its driver"
