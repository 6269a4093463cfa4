"""What only the Dask executor does, on the session's real two-worker LocalCluster: shipping
checkpoints between disks, restarting a worker to kill a trial, surviving a killed worker."""

from __future__ import annotations

import os
import signal
import time

import cloudpickle
import pytest
import trainables
from executors.conftest import Driver

import nbtune as nt
from nbtune import registry
from nbtune.events import TrialResult, TrialRetried
from nbtune.executors._lines import TrialLines, connect, hang_up
from nbtune.protocol import Ack, Hello, WorkerPaused, WorkerResult
from nbtune.schedulers import Decision

distributed = pytest.importorskip("distributed")
from nbtune.executors.dask import INLINE_CHECKPOINT_BYTES, _dask_resources  # noqa: E402


@pytest.fixture
def dask_driver(dask_client, tmp_path):
    drivers = []

    def make(trainable):
        driver = Driver(nt.DaskExecutor(dask_client), trainable, tmp_path)
        drivers.append(driver)
        return driver

    yield make
    for driver in drivers:
        driver.executor.close()


def next_event(driver, kind, timeout=30):
    """Poll until an event of `kind` arrives (answering nothing); return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in driver.executor.poll(1.0):
            driver.events.append(event)
            if isinstance(event, kind):
                return event
    raise AssertionError(f"no {kind.__name__} within {timeout} s")


def test_a_large_checkpoint_travels_to_the_driver_and_back_to_a_worker(dask_driver, tmp_path):
    assert len(trainables.BIG) > INLINE_CHECKPOINT_BYTES
    driver = dask_driver(trainables.big_checkpoint)
    driver.launch(0, {"steps": 5})
    first = next_event(driver, WorkerResult)
    assert first.checkpoint == str(tmp_path / "trial0" / "checkpoint_000001.pkl")
    driver.executor.reply(0, Decision.PAUSE)
    paused = next_event(driver, WorkerPaused)
    assert paused.checkpoint == first.checkpoint
    with open(paused.checkpoint, "rb") as file:
        assert cloudpickle.load(file) == {"step": 1, "data": trainables.BIG}

    driver.launch(1, {"steps": 3}, iteration=1, checkpoint_path=paused.checkpoint)
    driver.run_until_ended([1])
    resumed = driver.results(1)
    assert [r.metrics["resumed_intact"] for r in resumed] == [True, True]
    assert resumed[-1].checkpoint == str(tmp_path / "trial1" / "checkpoint_000003.pkl")
    assert os.path.getsize(resumed[-1].checkpoint) > INLINE_CHECKPOINT_BYTES


def test_a_forced_stop_restarts_the_trials_worker_and_the_trial_ends_stopped(
    make_tuner, log, dask_client
):
    tuner = make_tuner(
        trainables.forever,
        {"interval": 0.01},
        metric="loss",
        callbacks=[log],
        executor=nt.DaskExecutor(dask_client),
    )
    tuner.start()
    first = log.wait_for(lambda e: isinstance(e, TrialResult))
    assert first.result["pid"] in worker_pids(dask_client)
    tuner.stop(0, force=True)
    tuner.stop()
    tuner.wait(30)
    assert tuner.get_trial(0).status is nt.TrialStatus.TERMINATED, "it ends as the user asked"
    assert first.result["pid"] not in worker_pids(dask_client), "its worker was restarted"


def test_a_worker_killed_mid_trial_loses_nothing(make_tuner, log, dask_client, tmp_path):
    gate = tmp_path / "gate"
    space = {
        "steps": 30,
        "interval": 0.02,
        "checkpoint": True,
        "hold_at": 6,
        "gate": str(gate),
        "x": nt.grid([0, 1]),
    }
    tuner = make_tuner(
        trainables.steps,
        space,
        metric="loss",
        max_failures=1,
        callbacks=[log],
        executor=nt.DaskExecutor(dask_client),
    )
    tuner.start()
    seen = log.wait_for(
        lambda e: (
            isinstance(e, TrialResult) and e.trial_id == 0 and e.result["training_iteration"] >= 5
        )
    )
    pid = seen.result["pid"]
    assert pid in worker_pids(dask_client), "the pid of a real Dask worker process"
    os.kill(pid, signal.SIGKILL)
    gate.touch()
    assert tuner.wait(60)
    frame = tuner.dataframe()
    assert (frame["status"] == "TERMINATED").all(), frame[["trial_id", "status", "error"]]
    assert frame.loc[0, "attempts"] == 2, "the killed trial was retried from its checkpoint"
    assert len(log.of(TrialRetried)) == 1
    history = tuner.history()
    for _, iterations in history.groupby("trial_id")["training_iteration"]:
        assert iterations.tolist() == list(range(1, 31)), "no result lost or recorded twice"
    assert (history["step"] == history["training_iteration"]).all()


def test_a_second_copy_of_a_launch_is_refused():
    lines = TrialLines("AF_INET", ("127.0.0.1", 0))

    def hello(launch_key):
        hang_up()
        connection = connect(lines.address, lines.authkey)
        connection.send(Hello(launch_key, os.getpid()))
        while not connection.poll():
            lines.poll(1.0)
        return connection.recv()

    try:
        lines.expect(7, trial_id=0)
        assert hello(7) == Ack(True)
        assert lines.serves(0)
        assert hello(7) == Ack(False), "a copy of launch 7, run again after its worker died"
    finally:
        hang_up()
        lines.close()


def test_resources_per_trial_use_the_clusters_names():
    assert _dask_resources({"cpu": 1, "gpu": 0}, set()) == {}
    assert _dask_resources({"cpu": 1, "gpu": 1}, {"GPU", "CPU"}) == {"CPU": 1, "GPU": 1}
    with pytest.raises(ValueError, match=r"no Dask worker declares a 'gpu' resource"):
        _dask_resources({"gpu": 1}, {"MEMORY"})


def test_the_magic_name_connects_to_an_address(dask_client):
    executor = registry.create("executor", "dask", address=dask_client.scheduler.address)
    try:
        assert executor.client.scheduler.address == dask_client.scheduler.address
    finally:
        executor.client.close()


def worker_pids(client):
    return set(client.run(os.getpid).values())
