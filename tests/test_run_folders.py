"""Where a run's mapped arrays live (`nbtune.executors._shared`): shared memory when there is
plenty, else a folder on disk, and never left behind by a driver that was killed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from waiting import eventually

import nbtune as nt
from nbtune.executors import _shared
from nbtune.executors._shared import RunData


def driver_with_an_array(runs: Path) -> subprocess.Popen:
    """A driver, in a session of its own, whose trial holds a mapped array and never ends; it
    prints the array's folder once the trial has reported."""
    driver = textwrap.dedent(f"""
        import threading
        import numpy as np, nbtune as nt
        array = np.ones(1_000_000)

        def train(config):
            nt.report(loss=float(array.sum()))
            threading.Event().wait()

        def said(event):
            if isinstance(event, nt.events.TrialResult):
                print(tuner.executor._data.folder, flush=True)

        tuner = nt.Tuner(train, {{}}, metric="loss", storage_path={str(runs)!r},
                         progress=False, callbacks=[said])
        tuner.start()
        tuner.wait()
    """)
    return subprocess.Popen(
        [sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True, start_new_session=True
    )


def test_the_folder_of_a_driver_killed_with_its_process_group_goes_at_the_next_start(runs):
    """A kernel kill reaches the whole process group, loky's resource tracker included."""
    process = driver_with_an_array(runs)
    try:
        folder = process.stdout.readline().strip()
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()
    assert Path(folder).name.startswith(f"nbtune-run-{process.pid}-")
    assert os.path.isdir(folder), "nothing of the driver was left to remove it"
    run = RunData()
    try:
        run.dumps(np.ones(1_000_000))
        run.wait()
        assert not os.path.exists(folder), "the next run removed the dead driver's folder"
    finally:
        run.close()


def test_the_folder_of_a_driver_killed_alone_goes_with_it(runs):
    """Its resource tracker outlives it and removes what the driver registered."""
    process = driver_with_an_array(runs)
    try:
        folder = process.stdout.readline().strip()
        assert os.path.isdir(folder)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        eventually(lambda: not os.path.exists(folder), "the folder was removed")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.stdout.close()


def test_a_live_driver_s_folder_is_left_alone():
    alive = os.getppid()
    folder = tempfile.mkdtemp(prefix=f"nbtune-run-{alive}-", dir=_shared._temp_root())
    try:
        run = RunData()
        run.dumps(np.ones(1_000_000))
        run.wait()
        run.close()
        assert os.path.isdir(folder)
    finally:
        os.rmdir(folder)


@pytest.fixture
def small_shared_memory(tmp_path, monkeypatch):
    """A real 64 MB tmpfs (Docker's, Kubernetes' and Binder's /dev/shm) in place of /dev/shm."""
    mount = tmp_path / "shm"
    mount.mkdir()
    monkeypatch.setattr(_shared, "SHARED_MEMORY", str(mount), raising=False)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def sums(array):
    def train(config):
        nt.report(loss=float(array.sum()), mapped=int(isinstance(array, np.memmap)))

    return train


def test_a_large_array_and_a_small_shared_memory_use_a_folder_on_disk(
    make_tuner, small_shared_memory
):
    array = np.ones(100 * 2**20 // 8)  # 100 MB
    tuner = make_tuner(sums(array), {"x": nt.grid([1, 2])}, metric="loss")
    tuner.run()
    for trial in tuner.trials:
        assert trial.error is None, trial.error
        assert trial.last_result["loss"] == array.size and trial.last_result["mapped"] == 1
    assert not os.listdir(small_shared_memory), "nothing written to the small shared memory"


def test_nbtune_temp_folder_says_where_the_arrays_go(tmp_path, monkeypatch):
    monkeypatch.setenv("NBTUNE_TEMP_FOLDER", str(tmp_path))
    run = RunData()
    try:
        _, path = run.path_of(np.ones(1_000_000))
        assert Path(path).parent.parent == tmp_path
    finally:
        run.close()
