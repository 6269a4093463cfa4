"""What only the process executor does: separate processes, captured output, warm reuse."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Client

import pytest
import trainables
from executors.conftest import Driver

import nbtune as nt
from nbtune.protocol import WorkerDone, WorkerLost
from nbtune.schedulers import Decision


@pytest.fixture
def loky_driver(tmp_path):
    drivers = []

    def make(trainable, max_workers=2):
        driver = Driver(nt.LokyExecutor(), trainable, tmp_path, max_workers=max_workers)
        drivers.append(driver)
        return driver

    yield make
    for driver in drivers:
        driver.executor.close()


def test_trials_run_in_other_processes_and_a_second_run_reuses_them(loky_driver):
    first = loky_driver(trainables.forever)
    first.launch(0, {})
    first.launch(1, {})

    def stop_once_both_ran(event):
        both = first.results(0) and first.results(1)
        return Decision.STOP if both else Decision.CONTINUE

    first.run_until_ended([0, 1], decide=stop_once_both_ran)
    first_pids = {first.results(i)[0].metrics["pid"] for i in (0, 1)}
    first.executor.close()
    second = loky_driver(trainables.count_up)
    second.launch(0, {"steps": 1})
    second.launch(1, {"steps": 1})
    second.run_until_ended([0, 1])
    pids = {second.results(i)[0].metrics["pid"] for i in (0, 1)}
    assert os.getpid() not in first_pids
    assert len(first_pids) == 2, "two trials at once run in two processes"
    assert pids <= first_pids, "the second run should start on the first run's warm workers"


def test_what_a_trial_prints_is_shipped_with_its_report(loky_driver, capfd):
    driver = loky_driver(trainables.chatty)
    driver.launch(0, {})
    driver.run_until_ended([0])
    assert driver.results(0)[0].output == "hello from the trial\n"
    assert "hello from the trial" not in capfd.readouterr().out


def test_a_killed_worker_is_reported_lost_and_the_executor_recovers(loky_driver):
    driver = loky_driver(trainables.forever)
    driver.launch(0, {"interval": 0.01})
    killed = []

    def kill_then_continue(event):
        if not killed:
            pid = event.metrics["pid"]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return Decision.CONTINUE

    driver.run_until_ended([0], decide=kill_then_continue)
    assert isinstance(driver.ending(0), WorkerLost)
    driver.executor.close()
    after = loky_driver(trainables.count_up)
    after.launch(1, {"steps": 2})
    after.run_until_ended([1])
    assert len(after.results(1)) == 2
    assert after.results(1)[0].metrics["pid"] != killed[0]


def test_killing_a_trial_that_waits_for_a_worker_spares_the_trial_on_that_worker(loky_driver):
    driver = loky_driver(trainables.forever, max_workers=1)
    driver.launch(0, {})
    driver.next_result()
    driver.executor.reply(0, Decision.STOP)
    driver.run_until_ended([0])
    driver.launch(1, {})
    assert driver.next_result().trial_id == 1
    driver.launch(2, {})
    driver.executor.kill(2)
    driver.executor.reply(1, Decision.CONTINUE)
    driver.run_until_ended([1, 2], decide=lambda event: Decision.STOP)
    assert isinstance(driver.ending(1), WorkerDone), "trial 1's worker was not killed"
    assert driver.ending(2) == WorkerLost(2, "it was killed before it started")
    assert not driver.results(2)


def test_the_channel_rejects_a_client_without_the_key(loky_driver):
    from multiprocessing import AuthenticationError

    driver = loky_driver(trainables.count_up)
    with pytest.raises(AuthenticationError):
        Client(driver.executor._lines.address, family="AF_UNIX", authkey=b"wrong key")
    driver.launch(0, {"steps": 2})
    driver.run_until_ended([0])
    assert len(driver.results(0)) == 2


def test_a_client_that_hangs_up_in_the_handshake_leaves_the_line_open(loky_driver):
    driver = loky_driver(trainables.count_up)
    lines = driver.executor._lines
    with socket.socket(socket.AF_UNIX) as bare:
        bare.connect(lines.address)
        assert bare.recv(4096), "the runner's challenge"
    connected = ThreadPoolExecutor(1).submit(Client, lines.address, "AF_UNIX", lines.authkey)
    connected.result(timeout=10).close()
    driver.launch(0, {"steps": 2})
    driver.run_until_ended([0])
    assert len(driver.results(0)) == 2


WORKER_IMPORTS = """
import sys
import time
import nbtune as nt

def train(config):
    heavy = ("numpy", "pandas", "joblib", "plotly", "ipywidgets", "IPython", "nbtune.tuner",
             "nbtune.runner", "nbtune.analysis", "nbtune.search", "nbtune.schedulers")
    nt.report(loss=0.0, heavy=",".join(name for name in heavy if name in sys.modules))

tuner = nt.Tuner(train, metric="loss", num_samples=1, storage_path=sys.argv[1], progress=False)
tuner.run()
print(repr(tuner.history()["heavy"].iloc[0]))
"""


def test_a_new_worker_loads_only_what_its_trials_need(tmp_path):
    """Every cold run waits for its workers to start, so they import only what trials need:
    neither numpy, pandas nor joblib, nor the front end, nor the driver's side of nbtune."""
    assert script_output(WORKER_IMPORTS, tmp_path).strip() == "''"


def script_output(script: str, folder) -> str:
    """What `script` prints, run in a fresh Python process (a pool of its own) with `folder` as
    its argument."""
    out = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout


WORKER_BOOTS = """
import sys
import time
import nbtune as nt
from nbtune.executors import loky

loky._BOOTING_AT_ONCE = 1

def most_booting_until(done):
    most = 0
    while not done():
        with loky._workers_lock:
            most = max(most, sum(worker.is_booting() for worker in loky._every_worker))
        time.sleep(0.001)
    return most

def booted(count):
    with loky._workers_lock:
        workers = list(loky._every_worker)
    return len(workers) == count and not any(worker.is_booting() for worker in workers)

loky.warm_up(2)
warmed = most_booting_until(lambda: booted(2))

def train(config):
    nt.report(loss=config["x"])

tuner = nt.Tuner(train, {"x": nt.grid([0, 1, 2, 3, 4, 5])}, metric="loss",
                 max_concurrent=4, storage_path=sys.argv[1], progress=False)
tuner.start()
ran = most_booting_until(lambda: not tuner.status.live)
print(warmed, ran, tuner.status.state, len(tuner.dataframe()))
"""


def test_no_more_workers_boot_at_once_than_the_cores_allow(tmp_path):
    """Four workers booting at once on two cores made the first trial wait for all four: they
    boot `_BOOTING_AT_ONCE` at a time (one here), whether warmed up ahead or started by a run,
    and the run, held back meanwhile, ends as it would."""
    assert script_output(WORKER_BOOTS, tmp_path).split() == ["1", "1", "finished", "6"]


def test_joblib_parallel_works_beside_a_run(loky_driver):
    joblib = pytest.importorskip("joblib")
    driver = loky_driver(trainables.count_up)
    driver.launch(0, {"steps": 2})
    driver.run_until_ended([0])
    squares = joblib.Parallel(n_jobs=2)(joblib.delayed(pow)(i, 2) for i in range(4))
    assert squares == [0, 1, 4, 9]
    driver.launch(1, {"steps": 1})
    driver.run_until_ended([1])
    assert len(driver.results(1)) == 1


DRIVER = """
import sys
import nbtune as nt
import trainables

def say_when_reporting(event):
    if type(event).__name__ == "TrialResult":
        print("reporting", flush=True)

tuner = nt.Tuner(trainables.forever, {"interval": 0.05, "x": nt.grid([0, 1])},
                 storage_path=sys.argv[1], name="orphans", progress=False, max_concurrent=2,
                 executor=nt.LokyExecutor(reuse_workers=REUSE_WORKERS))
tuner.subscribe(say_when_reporting)
tuner.start()
tuner.wait()
"""


def start_script(code, folder, **options):
    """A Python process running `code` with the experiment folder as its argument; it can
    import the tests' trainables, and its standard output is a pipe of text."""
    tests = os.path.dirname(os.path.dirname(__file__))
    path = os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-c", code, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        **options,
    )


def children_of(pid):
    """Handles (pidfds) on the processes whose parent is `pid`, read from /proc: each becomes
    readable when its process ends."""
    handles = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                handles.append(os.pidfd_open(int(entry)))
        except (OSError, ProcessLookupError):
            continue
    return handles


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits on processes with pidfds")
@pytest.mark.parametrize("reuse_workers", [True, False])
def test_workers_do_not_outlive_a_killed_driver(tmp_path, reuse_workers):
    driver = start_script(DRIVER.replace("REUSE_WORKERS", str(reuse_workers)), tmp_path)
    try:
        assert driver.stdout.readline() == "reporting\n", "the trials run in workers"
        workers = children_of(driver.pid)
        assert workers, "the driver has worker processes"
    finally:
        driver.kill()
        driver.wait()
    deadline = time.monotonic() + 5
    pending = list(workers)
    while pending:
        ended, _, _ = select.select(pending, [], [], max(0.0, deadline - time.monotonic()))
        assert ended, f"{len(pending)} worker processes outlived their driver by 5 s"
        pending = [handle for handle in pending if handle not in ended]
    for handle in workers:
        os.close(handle)


NESTED_JOBLIB = """
import nbtune as nt
import trainables

tuner = nt.Tuner(trainables.uses_joblib, {"x": nt.grid([0, 1])}, metric="loss",
                 storage_path=__import__("sys").argv[1], name="nested", progress=False,
                 max_concurrent=2, executor=nt.LokyExecutor(reuse_workers=REUSE_WORKERS))
tuner.run()
print("run ended", flush=True)
"""


@pytest.mark.parametrize("reuse_workers", [True, False])
def test_a_script_whose_trials_use_joblib_exits_when_its_run_ends(tmp_path, reuse_workers):
    code = NESTED_JOBLIB.replace("REUSE_WORKERS", str(reuse_workers))
    script = start_script(code, tmp_path, stderr=subprocess.PIPE)
    try:
        assert script.stdout.readline() == "run ended\n"
        script.wait(timeout=20)
    finally:
        script.kill()
    assert script.returncode == 0, script.stderr.read()
    assert "leaked" not in script.stderr.read(), "joblib's pool in the worker was shut down"
