"""Large objects reach trials once per run: `with_parameters`, and arrays a trainable captures.

Arrays of 20-40 MB, real worker processes (loky, threads, a Dask cluster).
"""

from __future__ import annotations

import functools
import gc
import os
import subprocess
import sys
import threading
import time
import zlib
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
from cloudpickle import loads

import nbtune as nt
from nbtune.executors import _shared
from nbtune.executors._shared import RunData, check_picklable
from nbtune.trainable import is_class_trainable
from nbtune.trainable_check import trainable_name

ROWS = 2_500_000
"""20 MB of float64."""


@pytest.fixture(autouse=True)
def _forget_maps():
    """Maps this process made (unpickling a payload in the test) go with the test."""
    yield
    _shared._mapped_arrays.clear()


@pytest.fixture(scope="module")
def data():
    return np.arange(ROWS, dtype=np.float64)


def facts(array):
    """What a trial can tell about the array it got, as numbers."""
    filename = getattr(array, "filename", None) or ""
    return {
        "total": float(array.sum()),
        "writeable": int(array.flags.writeable),
        "mapped": int(isinstance(array, np.memmap)),
        "file": zlib.crc32(str(filename).encode()),
        "pid": os.getpid(),
    }


def train_with(config, data, scale):
    nt.report(loss=1.0, scaled=scale, **facts(data))


class Fit(nt.Trainable):
    def setup(self, config, data, scale):
        self.facts = facts(data)
        self.scale = scale

    def step(self):
        return {"loss": 1.0, "scaled": self.scale, "done": True, **self.facts}


def closure_over(array):
    """A trainable that captures `array`, as a notebook cell's function does."""

    def train(config):
        time.sleep(config.get("nap", 0))
        nt.report(loss=1.0, **facts(array))

    return train


def last_results(tuner):
    assert all(trial.error is None for trial in tuner.trials), [t.error for t in tuner.trials]
    return [trial.last_result for trial in tuner.trials]


@pytest.mark.parametrize("trainable", [train_with, Fit])
def test_with_parameters_passes_the_objects_to_every_trial(
    make_tuner, executor_class, data, trainable
):
    bound = nt.with_parameters(trainable, data=data, scale=3)
    tuner = make_tuner(bound, {"x": nt.grid([1, 2, 3])}, metric="loss", executor=executor_class())
    tuner.run()
    results = last_results(tuner)
    assert [r["total"] for r in results] == [float(data.sum())] * 3
    assert {r["scaled"] for r in results} == {3}
    assert {r["writeable"] for r in results} == {0}, "read-only, with threads too"


def test_a_bound_trainable_keeps_its_name_and_kind(make_tuner):
    bound = nt.with_parameters(train_with, data=1, scale=2)
    assert trainable_name(bound) == "train_with"
    assert make_tuner(bound, name=None).name.startswith("train_with-")
    assert not is_class_trainable(bound)
    bound_class = nt.with_parameters(Fit, data=np.ones(3), scale=2)
    assert is_class_trainable(bound_class) and issubclass(bound_class, Fit)
    assert trainable_name(bound_class) == "Fit"
    with pytest.raises(ValueError, match="config"):
        nt.with_parameters(train_with, config={})
    with pytest.raises(TypeError, match="function"):
        nt.with_parameters(object, data=1)


class RecordedRunData(RunData):
    made: ClassVar[list[RunData]] = []

    def __init__(self):
        super().__init__()
        self.made.append(self)


def test_a_captured_array_reaches_loky_workers_as_a_map_in_a_run_folder(
    make_tuner, data, monkeypatch
):
    monkeypatch.setattr("nbtune.executors.loky.RunData", RecordedRunData)
    tuner = make_tuner(closure_over(data), {"x": nt.grid([1, 2, 3])}, metric="loss")
    tuner.run()
    results = last_results(tuner)
    assert {(r["mapped"], r["writeable"], r["total"]) for r in results} == {(1, 0, data.sum())}
    (run,) = RecordedRunData.made
    assert run.folder.startswith(_shared._temp_root()) and not os.path.exists(run.folder)


def test_warm_workers_reuse_what_they_mapped_unless_the_array_changed(make_tuner):
    array = np.ones(ROWS)
    executor = nt.LokyExecutor()
    space = {"x": nt.grid([1, 2, 3, 4]), "nap": 0.1}
    runs = []
    for _ in range(2):
        tuner = make_tuner(closure_over(array), space, executor=executor)
        tuner.run()
        runs.append({r["pid"]: r["file"] for r in last_results(tuner)})
    assert len(set(runs[0].values())) == 1, "one file per run"
    warm = runs[0].keys() & runs[1].keys()
    assert warm, "a worker served both runs"
    assert all(runs[1][pid] == runs[0][pid] for pid in warm), "its map of the first run's file"
    array[0] = 5.0
    tuner = make_tuner(closure_over(array), space, executor=executor)
    tuner.run()
    results = last_results(tuner)
    assert {r["total"] for r in results} == {array.sum()}, "the new content, not the old map"
    assert not {r["file"] for r in results} & set(runs[0].values())


def test_large_arrays_are_written_once_and_small_ones_inline():
    big = np.arange(ROWS, dtype=np.float32)
    small = np.arange(10)
    frame = pd.DataFrame({"a": np.arange(ROWS // 2, dtype=float), "b": np.ones(ROWS // 2)})
    trainable = functools.partial(train_with, data=[big, big[::2], small, frame], scale=big)
    run = RunData()
    try:
        payload = run.dumps(trainable)
        assert len(payload) < 100_000
        run.wait()
        assert len(os.listdir(run.folder)) == 3, "big (once), its strided view, the frame's block"
        copy = loads(payload)
        got_big, strided, got_small, got_frame = copy.keywords["data"]
        assert copy.keywords["scale"] is got_big, "one array, one map"
        assert isinstance(got_big, np.memmap) and not got_big.flags.writeable
        np.testing.assert_array_equal(strided, big[::2])
        assert type(got_small) is np.ndarray
        pd.testing.assert_frame_equal(got_frame, frame)
        assert run.dumps(trainable) == payload, "nothing written twice"
    finally:
        run.close()
    assert not os.path.exists(run.folder)


def test_checking_that_a_trainable_pickles_writes_nothing():
    before = set(os.listdir(_shared._temp_root()))
    check_picklable(closure_over(np.ones(ROWS)))
    assert set(os.listdir(_shared._temp_root())) == before
    with pytest.raises(TypeError, match="pickle"):
        check_picklable(closure_over(threading.Lock()))


def test_an_unpicklable_object_fails_when_the_tuner_is_built(make_tuner):
    with pytest.raises(TypeError, match="worker processes"):
        make_tuner(nt.with_parameters(train_with, data=threading.Lock(), scale=1))


def _resident_file_pages():
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return sum(int(fields[name].split()[0]) * 1024 for name in ("RssFile", "RssShmem"))


def test_a_worker_lets_the_pages_of_its_maps_go_between_runs_but_keeps_the_maps():
    """loky recycles a worker whose resident set grew by 300 MB over a task, maps included."""
    array = np.random.default_rng(0).random(5 * ROWS // 2)  # 50 MB
    run = RunData()
    try:
        mapped = loads(run.dumps(array))
        assert mapped.sum() == array.sum()
        touched = _resident_file_pages()
        _shared.release_pages()
        assert _resident_file_pages() < touched - 40e6
        assert mapped.sum() == array.sum(), "the map still reads the same"
        assert loads(run.dumps(array)) is mapped, "and is reused"
    finally:
        run.close()


def test_a_new_worker_waits_for_a_file_being_written_and_fails_if_the_run_ended(monkeypatch):
    array = np.ones(ROWS)
    written = threading.Event()
    write = _shared._write
    monkeypatch.setattr(_shared, "_write", lambda *args: (written.wait(10), write(*args)))
    run = RunData()
    payload = run.dumps(array)
    threading.Timer(0.3, written.set).start()
    np.testing.assert_array_equal(loads(payload), array)
    run.close()
    _shared._mapped_arrays.clear()
    with pytest.raises(FileNotFoundError, match="run has ended"):
        loads(payload)


def test_a_file_that_cannot_be_written_fails_the_worker_that_needs_it(monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", full)
    run = RunData()
    try:
        payload = run.dumps(np.zeros(ROWS))
        with pytest.raises(OSError, match="No space left on device"):
            loads(payload)
    finally:
        run.close()


def test_dask_loads_a_scattered_trainable_once_and_lets_it_go_with_the_payload(dask_client):
    from nbtune.executors import dask as dask_executor

    array = np.arange(ROWS, dtype=np.float64)
    future = dask_executor._payload(dask_client, closure_over(array))
    payload = future.result()
    assert isinstance(payload, dask_executor._Scattered) and len(payload.stream) < 100_000
    trainable = dask_executor._load(payload)
    assert dask_executor._load(payload) is trainable, "once per worker and run"
    (got,) = [cell.cell_contents for cell in trainable.__closure__]
    assert not got.flags.writeable and np.array_equal(got, array)
    del payload, trainable, got
    gc.collect()
    assert not dask_executor._loaded
    assert dask_executor._payload(dask_client, closure_over(np.ones(3))).__class__ is bytes


def test_a_global_of_the_notebook_is_mapped_too():
    """A function defined in a notebook cell is pickled by value, with the globals it uses."""
    namespace = {"__name__": "__main__", "features": np.arange(ROWS, dtype=np.float64)}
    exec("def train(config):\n    return features.sum()\n", namespace)
    run = RunData()
    try:
        payload = run.dumps(namespace["train"])
        assert len(payload) < 100_000
        train = loads(payload)
        assert isinstance(train.__globals__["features"], np.memmap)
        assert train({}) == namespace["features"].sum()
    finally:
        run.close()


def test_a_run_folder_left_open_goes_with_its_run_data():
    run = RunData()
    folder = run.folder
    run.dumps(np.ones(ROWS))
    run.wait()
    del run
    gc.collect()
    assert not os.path.exists(folder)


def test_the_folder_of_a_killed_driver_is_removed_by_the_resource_tracker(tmp_path):
    driver = (
        "import os, numpy as np\n"
        "from nbtune.executors._shared import RunData\n"
        "run = RunData()\n"
        "run.dumps(np.ones(1_000_000))\n"
        "run.wait()\n"
        "print(run.folder, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    done = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True)
    folder = done.stdout.strip()
    assert folder.startswith(_shared._temp_root())
    deadline = time.monotonic() + 10
    while os.path.exists(folder) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(folder)


def test_a_run_without_large_arrays_makes_no_folder():
    run = RunData()
    run.dumps(closure_over(np.ones(10)))
    assert run._folders == {}
    run.close()


# ----- every trial gets the objects as they were (issue 30, item 5) --------------------------


def changes_what_it_got(config, X, seen):
    """Tries to change the small array it got, and appends to the list it got."""
    first = float(X[0])
    try:
        X[0] += 1
        wrote = 1
    except ValueError:
        wrote = 0
    seen.append(config["x"])
    nt.report(loss=1.0, first=first, wrote=wrote, seen=len(seen))


def test_every_trial_gets_the_objects_as_they_were(make_tuner, executor_class):
    X, seen = np.zeros(10), []
    bound = nt.with_parameters(changes_what_it_got, X=X, seen=seen)
    tuner = make_tuner(
        bound,
        {"x": nt.grid([0, 1, 2, 3])},
        metric="loss",
        executor=executor_class(),
        max_concurrent=1,
    )
    tuner.run()
    results = last_results(tuner)
    assert [r["first"] for r in results] == [0.0] * 4, "no trial sees another's change"
    assert [r["seen"] for r in results] == [1] * 4
    assert {r["wrote"] for r in results} == {0}, "small arrays are read-only too, as large ones"
    assert X[0] == 0 and seen == [], "the notebook's objects are untouched"


def reports_the_shape(array):
    def train(config):
        nt.report(loss=1.0, rows=array.shape[0], total=float(array[-1].sum()), pid=os.getpid())

    return train


def test_an_array_reshaped_in_place_reaches_a_warm_worker_with_its_new_shape(make_tuner):
    array = np.arange(ROWS, dtype=np.float64)
    executor = nt.LokyExecutor()
    pids = []
    for rows in (ROWS, ROWS // 2):
        array.shape = (rows, -1)
        tuner = make_tuner(reports_the_shape(array), {"x": 1}, executor=executor, max_concurrent=1)
        tuner.run()
        (result,) = last_results(tuner)
        assert result["rows"] == rows and result["total"] == array[-1].sum()
        pids.append(result["pid"])
    assert pids[0] == pids[1], "the second run's trial ran on the first run's worker"
