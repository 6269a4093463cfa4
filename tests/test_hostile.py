"""Hostile use: trainables and inputs that try to lose data, hang the run or kill it."""

from __future__ import annotations

import base64
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from multiprocessing.connection import Client
from pathlib import Path

import numpy as np
import psutil
import pytest
import trainables

import nbtune as nt
from nbtune.events import TrialPaused, TrialResult, TrialRetried
from nbtune.executors import _lines as lines_module
from nbtune.executors._lines import TrialLines
from nbtune.metrics import Pickled
from nbtune.protocol import Ready


@pytest.mark.parametrize("trainable", [trainables.reports_in_finally, trainables.swallows_the_stop])
def test_a_trial_that_reports_after_its_stop_neither_hangs_the_run_nor_records_it(
    make_tuner, executor_class, trainable
):
    tuner = make_tuner(
        trainable,
        {"x": nt.grid([0, 1, 2])},
        metric="loss",
        max_concurrent=1,
        stop={"training_iteration": 2},
        executor=executor_class(),
    )
    tuner.start()
    assert tuner.wait(timeout=30), "the run hangs"
    assert [trial.status for trial in tuner.trials] == [nt.TrialStatus.TERMINATED] * 3
    history = tuner.history()
    assert history["training_iteration"].tolist() == [1, 2] * 3
    assert "last" not in history and "caught" not in history


def test_a_restored_run_cuts_a_torn_last_line_before_it_appends(make_tuner, recwarn):
    tuner = make_tuner(trainables.count_up, {"steps": 3}, metric="loss", num_samples=1)
    tuner.run()
    for log in ("results.jsonl", "trials.jsonl", "commands.jsonl"):
        with open(tuner.path / log, "a") as file:
            file.write('{"trial_id": 0, "training_itera')
    again = nt.Tuner.restore(tuner.path, trainables.count_up, num_samples=2, progress=False)
    again.run()
    history = nt.load(tuner.path).history()
    assert sorted(zip(history["trial_id"], history["training_iteration"], strict=True)) == [
        (trial_id, step) for trial_id in (0, 1) for step in (1, 2, 3)
    ], "the second trial's first result is not glued to the fragment"
    assert not [w for w in recwarn if "incomplete" in str(w.message)]
    for log in ("results.jsonl", "trials.jsonl", "commands.jsonl"):
        text = (tuner.path / log).read_text()
        assert text.endswith("\n") or not text, f"{log} ends in whole lines"


def test_an_odd_value_ends_its_trial_with_one_line_naming_the_key_and_the_run_goes_on(make_tuner):
    kinds = [*trainables.ODD_VALUES, "loads_nowhere"]
    tuner = make_tuner(
        trainables.reports_odd,
        {"odd": nt.grid(kinds)},
        metric="loss",
        max_consecutive_failures=None,
    )
    tuner.run()
    assert tuner.state == "finished"
    errors = {trial.config["odd"]: trial.error for trial in tuner.trials}
    named = {
        "huge_int": "loss",
        "huge_extra": "count",
        "tuple_keys": "table",
        "circular": "loop",
        "int_and_text_key": "by_id",
    }
    for kind, key in named.items():
        assert errors[kind] is not None and key in errors[kind], (kind, errors[kind])
        assert "\n" not in errors[kind]
    assert errors["loads_nowhere"] is None, "a value the kernel cannot load is kept, unloaded"
    again = nt.Tuner.restore(tuner.path, trainables.reports_odd, progress=False)
    again.run()
    history = nt.load(tuner.path).history()
    assert len(history) == len(kinds) + 2, "each trial's first result, and two more of the last"
    blob = history["blob"].dropna().iloc[0]
    with pytest.raises(RuntimeError, match="cannot be loaded here"):
        blob.load()


@pytest.mark.parametrize("name", [".", "..", "demo\n", "a" * 300, "../up", "a\\b", 3])
def test_a_name_that_is_not_one_plain_folder_is_refused_in_one_line(runs, tmp_path, name):
    keep = tmp_path / "keep.txt"
    keep.write_text("precious")
    runs.mkdir()
    with pytest.raises((ValueError, TypeError), match=r"^name=.*: use one folder name") as error:
        nt.Tuner(trainables.count_up, name=name, storage_path=runs, overwrite=True)
    assert "\n" not in str(error.value)
    assert keep.read_text() == "precious" and runs.is_dir(), "nothing is removed"


def test_overwrite_removes_only_an_nbtune_experiment(runs):
    folder = runs / "notes"
    folder.mkdir(parents=True)
    (folder / "thesis.tex").write_text("precious")
    with pytest.raises(
        FileExistsError, match="is not the folder of an nbtune experiment; overwrite=True"
    ):
        nt.Tuner(trainables.count_up, name="notes", storage_path=runs, overwrite=True)
    assert (folder / "thesis.tex").read_text() == "precious"


def test_overwrite_does_not_follow_a_link_to_an_experiment(make_tuner, runs):
    elsewhere = make_tuner(trainables.count_up, {"steps": 1}, name="elsewhere", metric="loss")
    elsewhere.run()
    (runs / "link").symlink_to(elsewhere.path)
    with pytest.raises(PermissionError, match="link is a link; nbtune refuses"):
        make_tuner(trainables.count_up, name="link", overwrite=True)
    assert len(nt.load(elsewhere.path).history()) == 1


def test_an_acknowledged_extend_survives_the_driver_s_death(runs):
    driver = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import threading
        import nbtune as nt, trainables
        from nbtune.events import TrialStarted
        started = threading.Semaphore(0)
        def count_starts(event):
            if isinstance(event, TrialStarted):
                started.release()
        tuner = nt.Tuner(trainables.silent, {{"seconds": 60}}, metric="loss", num_samples=2,
                         max_concurrent=2, name="extended", storage_path={str(runs)!r},
                         progress=False, callbacks=[count_starts])
        tuner.start()
        started.acquire(), started.acquire()  # the run saved its state; it reports nothing more
        tuner.extend(4)
        print("acknowledged", flush=True)
        tuner.wait()
    """)
    process = subprocess.Popen(
        [sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout.readline() == "acknowledged\n"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    again = nt.Tuner.restore(runs / "extended", trainables.silent, progress=False)
    assert again.searcher.planned_trials == 6


def test_reported_dicts_that_look_like_pickles_round_trip_and_load_unpickles_only_if_trusted(
    make_tuner,
):
    tuner = make_tuner(trainables.reports_lookalikes, metric="loss")
    tuner.run()
    (row,) = nt.load(tuner.path).history().to_dict("records")
    for key, value in trainables.LOOKALIKES.items():
        assert row[key] == value
    assert isinstance(row["grid"], Pickled), "loading unpickles nothing by default"
    (trusted,) = nt.load(tuner.path, trust=True).history().to_dict("records")
    assert (trusted["grid"] == np.eye(2)).all()


def test_loading_a_directory_runs_none_of_its_pickles(make_tuner, tmp_path):
    tuner = make_tuner(trainables.count_up, {"steps": 1}, metric="loss")
    tuner.run()
    planted = tmp_path / "pwned"
    bomb = {"__pickle__": base64.b64encode(pickle.dumps(trainables.WritesWhenLoaded(planted)))}
    bomb["__pickle__"] = bomb["__pickle__"].decode()
    row = {"trial_id": 0, "training_iteration": 2, "loss": 0.1, "extra": bomb}
    with open(tuner.path / "results.jsonl", "a") as file:
        file.write(json.dumps(row) + "\n")
    record = json.loads((tuner.path / "trials.jsonl").read_text().splitlines()[-1])
    with open(tuner.path / "trials.jsonl", "a") as file:
        file.write(json.dumps({**record, "config": {"steps": bomb}}) + "\n")
    outcome = json.loads((tuner.path / "outcome.json").read_text())
    (tuner.path / "outcome.json").write_text(json.dumps({**outcome, "error": bomb}))
    loaded = nt.load(tuner.path)
    loaded.dataframe(), loaded.history()
    assert not planted.exists()


@pytest.mark.parametrize("family", ["AF_UNIX", "AF_INET"])
def test_a_silent_connection_does_not_keep_the_next_worker_out(family, monkeypatch):
    monkeypatch.setattr(lines_module, "HANDSHAKE_TIMEOUT_S", 0.5)
    lines = TrialLines(family, ("127.0.0.1", 0) if family == "AF_INET" else None)
    try:
        with socket.socket(getattr(socket, family)) as silent:
            silent.connect(lines.address)
            connected = []
            worker = threading.Thread(
                target=lambda: connected.append(Client(lines.address, authkey=lines.authkey)),
                daemon=True,
            )
            worker.start()
            worker.join(timeout=5)
            assert connected, "a worker could not connect while another connection said nothing"
            connected[0].send(Ready(os.getpid()))
            deadline = time.monotonic() + 5
            while not lines.launch(0, "the launch"):  # filed, then its Ready heard
                assert time.monotonic() < deadline, "its line is never heard"
                lines.poll(timeout=1)
            assert connected[0].recv() == "the launch"
            connected[0].close()
            silent.settimeout(5)
            while silent.recv(4096):  # the challenge, then the end: it was hung up on
                pass
    finally:
        lines.close()


def test_every_file_of_an_experiment_is_private_to_its_owner(make_tuner):
    tuner = make_tuner(trainables.leaves_every_file, metric="loss")
    tuner.run()
    names = {path.name for path in tuner.path.rglob("*")}
    assert {"state.pkl", "output.log", "error.txt", "checkpoint_000001.pkl"} <= names
    for path in [tuner.path, *tuner.path.rglob("*")]:
        mode = path.stat().st_mode & 0o777
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"


@pytest.mark.parametrize("exposure", ["writable by others", "owned by another user", "a link"])
def test_a_folder_that_others_could_have_written_is_refused(make_tuner, runs, exposure):
    tuner = make_tuner(trainables.count_up, {"steps": 1}, name="shared", metric="loss")
    tuner.run()
    outside = runs.parent / "outside"
    outside.mkdir()
    if exposure == "writable by others":
        tuner.path.chmod(0o777)
    elif exposure == "owned by another user":
        if os.geteuid() != 0:
            pytest.skip("giving a folder away needs root")
        os.chown(tuner.path, 65534, 65534)
    else:
        checkpoints = tuner.path / "trials" / "0" / "checkpoints"
        checkpoints.rmdir()
        checkpoints.symlink_to(outside)
    with pytest.raises(PermissionError, match=f"^{tuner.path}.*; nbtune refuses"):
        nt.Tuner.restore(tuner.path, trainables.count_up, progress=False)
    assert not list(outside.iterdir())


def test_a_second_writer_is_refused_while_the_first_run_lives(runs):
    driver = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import threading
        import nbtune as nt, trainables
        from nbtune.events import TrialStarted
        started = threading.Event()
        tuner = nt.Tuner(trainables.silent, {{"seconds": 60}}, metric="loss", max_concurrent=1,
                         name="busy", storage_path={str(runs)!r}, progress=False,
                         callbacks=[lambda e: isinstance(e, TrialStarted) and started.set()])
        tuner.start()
        started.wait()
        print("running", flush=True)
        tuner.wait()
    """)
    process = subprocess.Popen(
        [sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout.readline() == "running\n"
        for options in ({"resume": True}, {"overwrite": True}):
            with pytest.raises(FileExistsError, match="is in use by a live run .process \\d+.;"):
                nt.Tuner(trainables.silent, name="busy", storage_path=runs, **options)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    again = nt.Tuner.restore(runs / "busy", trainables.silent, progress=False)
    again.start()
    with pytest.raises(FileExistsError, match="is in use by a live run"):
        nt.Tuner.restore(runs / "busy", trainables.silent, progress=False)
    again.stop()
    again.wait()
    nt.Tuner.restore(runs / "busy", trainables.silent, progress=False)


def test_a_user_s_pause_holds_when_another_trial_s_worker_dies(make_tuner, log):
    space = {"interval": 0.02, "x": nt.grid([0, 1])}
    tuner = make_tuner(trainables.forever, space, metric="loss", max_failures=1, callbacks=[log])
    tuner.start()
    log.wait_for(lambda e: isinstance(e, TrialResult) and e.trial_id == 1)
    tuner.pause(1)
    log.wait_for(lambda e: isinstance(e, TrialPaused) and e.trial_id == 1)  # suspended in place
    seen = log.wait_for(lambda e: isinstance(e, TrialResult) and e.trial_id == 0)
    os.kill(seen.result["pid"], signal.SIGKILL)
    log.wait_for(lambda e: isinstance(e, TrialRetried) and e.trial_id == 0)
    after = len(log.events)
    log.wait_for(lambda e: isinstance(e, TrialResult) and e in log.events[after:])
    paused = tuner.get_trial(1)
    assert paused.status is nt.TrialStatus.PAUSED, "the user's pause holds"
    assert paused.paused_by == "suspend", "it kept its worker"
    assert not [e for e in log.of(TrialResult, 1) if e in log.events[after:]]
    tuner.resume(1)
    log.wait_for(
        lambda e: isinstance(e, TrialResult) and e.trial_id == 1 and e in log.events[after:]
    )
    tuner.stop()
    assert tuner.wait(30)


def test_pause_all_then_stop_keeps_the_trials(make_tuner, log):
    space = {"steps": 1000, "interval": 0.01, "checkpoint": nt.grid([True, False])}
    tuner = make_tuner(trainables.steps, space, metric="loss", callbacks=[log])
    tuner.start()
    log.wait_for(lambda e: isinstance(e, TrialResult) and e.trial_id == 1)
    log.wait_for(lambda e: isinstance(e, TrialResult) and e.trial_id == 0)
    tuner.pause_all()
    tuner.stop()
    assert tuner.wait(30)
    assert [trial.status for trial in tuner.trials] == [nt.TrialStatus.PAUSED] * 2


def test_a_command_from_a_subscriber_runs_at_once(make_tuner, log):
    tuner = make_tuner(trainables.forever, {"interval": 0.01}, metric="loss", callbacks=[log])

    def stop_at_first_result(event):
        if isinstance(event, TrialResult) and tuner.get_trial(0).status is nt.TrialStatus.RUNNING:
            tuner.stop(0)

    tuner.subscribe(stop_at_first_result)
    tuner.start()
    assert tuner.wait(timeout=5), "the runner stalls"
    assert tuner.get_trial(0).status is nt.TrialStatus.TERMINATED
    assert tuner.get_trial(0).iteration <= 2, "it obeyed at its next report"


def worker_processes():
    """This process's loky workers (its resource tracker aside)."""
    children = psutil.Process().children(recursive=True)
    return [child for child in children if "resource_tracker" not in " ".join(child.cmdline())]


def test_more_concurrency_than_trials_starts_no_idle_workers(make_tuner, log):
    tuner = make_tuner(
        trainables.forever, {"interval": 0.02, "x": nt.grid([0, 1])}, metric="loss", callbacks=[log]
    )
    tuner.start()
    log.wait_for(lambda e: isinstance(e, TrialResult) and e.trial_id == 1)
    before = len(worker_processes())
    tuner.set_max_concurrent(6)
    after = len(log.events)
    log.wait_for(lambda e: isinstance(e, TrialResult) and e in log.events[after:])  # a step on
    assert len(worker_processes()) <= before, "nothing more can run: no worker more"
    tuner.stop()
    assert tuner.wait(30)


@pytest.mark.parametrize("count", [100_000, 10**9])
def test_an_absurd_concurrency_is_refused_in_one_line(make_tuner, count):
    with pytest.raises(ValueError, match=f"^max_concurrent={count}: pass a whole number from 1 to"):
        make_tuner(trainables.count_up, max_concurrent=count)
    tuner = make_tuner(trainables.forever, metric="loss")
    tuner.start()
    with pytest.raises(ValueError, match=f"^max_concurrent={count}: pass a whole number from 1"):
        tuner.set_max_concurrent(count)
    tuner.stop()
    assert tuner.wait(30)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_trial_can_start_a_process_pool_of_its_own(make_tuner, method):
    tuner = make_tuner(trainables.uses_a_pool, {"method": method}, metric="loss")
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.TERMINATED, trial.error
    assert trial.last_result["loss"] == 2.0


def test_a_forked_child_s_report_is_refused_in_one_line(make_tuner, tmp_path):
    said = tmp_path / "said.txt"
    tuner = make_tuner(trainables.reports_from_a_fork, {"said": str(said)}, metric="loss")
    tuner.run()
    assert tuner.history()["loss"].tolist() == [1.0], "only the trial's own report counts"
    assert said.read_text().startswith("nbtune.report() was called in a process forked")


def test_a_helper_thread_s_report_is_recorded(make_tuner):
    tuner = make_tuner(trainables.reports_from_a_thread, metric="loss")
    tuner.run()
    history = tuner.history()
    assert history["loss"].tolist() == [0.0, 1.0]
    assert history["said"].iloc[1] == "reported"


def test_a_driver_whose_trials_used_joblib_exits_at_once(runs):
    driver = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import nbtune as nt, trainables
        tuner = nt.Tuner(trainables.uses_joblib, {{"x": nt.grid([0, 1, 2])}}, metric="loss",
                         max_concurrent=2, storage_path={str(runs)!r}, progress=False)
        tuner.run()
        print(sorted(trial.status.value for trial in tuner.trials), flush=True)
    """)
    process = subprocess.Popen(
        [sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout.readline() == "['TERMINATED', 'TERMINATED', 'TERMINATED']\n"
        assert process.wait(timeout=20) == 0, "the driver exits once its run has ended"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
