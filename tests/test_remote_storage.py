"""Runs kept in remote storage: a real S3 API on localhost (moto's server, s3fs as the client),
and fsspec's memory:// file system.

Each test writes under its own prefix of one bucket, and its cache folder is its own
(NBTUNE_CACHE_DIR), so that a restore starts from an empty cache as on another machine.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import trainables
from waiting import eventually

import nbtune as nt

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

STEPS = 30
SPACE = {"steps": STEPS, "interval": 0.02, "checkpoint": True, "x": nt.grid(range(4))}


@pytest.fixture(scope="session")
def s3_endpoint():
    """The URL of an S3 API served by moto on localhost, with a bucket `runs`."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    import boto3

    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket="runs")
    yield endpoint
    server.stop()


@pytest.fixture
def options(s3_endpoint):
    return {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": s3_endpoint}}


@pytest.fixture
def s3(options):
    import s3fs

    return s3fs.S3FileSystem(**options)


@pytest.fixture
def url(request):
    """A prefix of the bucket for this test alone."""
    return f"s3://runs/{request.node.name.replace('[', '-').replace(']', '')}"


@pytest.fixture
def in_store(url, options):
    """`in_store(trainable, space, name=..., **more)`: a Tuner (metric "loss") whose run is
    kept under this test's prefix of the bucket."""

    def make(trainable, space, **more):
        return nt.Tuner(
            trainable,
            space,
            metric="loss",
            storage_path=url,
            storage_options=options,
            progress=False,
            **more,
        )

    return make


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """This test's own cache folder; `cache("other")` switches to another (another machine)."""

    def switch(name="cache"):
        folder = tmp_path / name
        monkeypatch.setenv("NBTUNE_CACHE_DIR", str(folder))
        return folder

    switch()
    return switch


def remote_results(s3, run_url) -> list[tuple[int, int]]:
    text = s3.cat_file(f"{run_url}/results.jsonl").decode()
    return [(row["trial_id"], row["training_iteration"]) for row in map(json.loads, text.split())]


def remote_checkpoints(s3, run_url) -> list[str]:
    """The checkpoint files under the run's trials in the store, as "<trial>/checkpoints/...".
    (The test's name, in `run_url`, may say "checkpoint" too.)"""
    trials = run_url.split("://", 1)[-1] + "/trials/"
    found = [path.removeprefix(trials) for path in s3.find(trials) if path.startswith(trials)]
    return sorted(path for path in found if "/checkpoints/" in path)


def histories(view) -> dict[int, list[tuple]]:
    history = view.history()
    return {
        trial_id: list(zip(rows["training_iteration"], rows["loss"], rows["step"], strict=True))
        for trial_id, rows in history.groupby("trial_id")
    }


def test_a_run_in_s3_reads_back_from_its_url(in_store, url, options, s3):
    tuner = in_store(
        trainables.steps,
        {**SPACE, "steps": 5, "interval": 0.0},
        name="demo",
        seed=0,
    )
    tuner.run()
    assert s3.exists(f"{url}/demo/experiment.json")
    assert not s3.exists(f"{url}/demo/lease.json"), "the lease is given up at the end"

    loaded = nt.load(f"{url}/demo", storage_options=options)
    assert loaded.state == "finished"
    assert histories(loaded) == histories(tuner)
    table = nt.runs(url, storage_options=options)
    assert table["name"].tolist() == ["demo"]
    assert table["state"].tolist() == ["finished"]
    assert table["TERMINATED"].tolist() == [4]
    assert table["path"].tolist() == [f"{url}/demo"]


def test_a_memory_url_holds_a_run_for_tests():
    tuner = nt.Tuner(
        trainables.count_up,
        {"steps": 3, "x": nt.grid([1, 2])},
        metric="loss",
        name="in-memory",
        storage_path="memory://nbtune-tests",
        overwrite=True,
        executor=nt.ThreadExecutor(),
        progress=False,
    )
    tuner.run()
    loaded = nt.load("memory://nbtune-tests/in-memory")
    assert len(loaded.history()) == 6


def draws_a_plot(config):
    """Saves a small picture in its own folder (its working directory), then reports."""
    Path("plot.svg").write_text(
        f"<svg xmlns='http://www.w3.org/2000/svg'><!-- {config['x']} --></svg>"
    )
    nt.report(loss=config["x"])


def test_a_trials_artifacts_reach_the_store_and_read_back_from_it(
    in_store, url, options, s3, cache
):
    tuner = in_store(
        draws_a_plot,
        {"x": nt.grid([1, 2])},
        name="plots",
    )
    tuner.run()
    for trial_id in (0, 1):
        assert s3.exists(f"{url}/plots/trials/{trial_id}/artifacts/plot.svg")
    cache("elsewhere")
    loaded = nt.load(f"{url}/plots", storage_options=options)
    assert list(loaded.artifacts(1)) == ["plot.svg"]
    assert "<!-- 2 -->" in loaded.artifacts(1).paths()[0].read_text()


def test_a_pause_a_stop_and_the_end_reach_the_store_without_waiting_for_the_period(
    in_store, url, options
):
    """With an hour between syncs, only the syncs at a pause, a stop and the end bring them."""
    run_url = f"{url}/slow"
    tuner = in_store(
        trainables.steps,
        {**SPACE, "x": nt.grid([1, 2])},
        name="slow",
        sync_period_s=3600,
    )
    tuner.start()
    eventually(lambda: tuner.trials and tuner.trials[0].iteration >= 3, "trial 0 reports")
    tuner.pause(0)

    def paused_in_store():
        frame = nt.load(run_url, storage_options=options).dataframe()
        return frame[frame["trial_id"] == 0]["status"].tolist() == ["PAUSED"]

    eventually(paused_in_store, "the store shows trial 0 paused")
    tuner.stop()
    tuner.wait()
    stopped = nt.load(run_url, storage_options=options)
    assert stopped.state == "stopped"
    assert histories(stopped) == histories(tuner), "every result is in the store"

    again = nt.Tuner.restore(
        run_url, trainables.steps, storage_options=options, sync_period_s=3600, progress=False
    )
    again.run()
    finished = nt.load(run_url, storage_options=options)
    assert finished.state == "finished"
    assert histories(finished) == histories(again)
    assert [i for i, *_ in histories(finished)[0]] == list(range(1, STEPS + 1))


def test_a_kept_checkpoint_reaches_the_store_without_waiting_for_the_period(in_store, url, s3):
    """The trial checkpoints twice, then goes silent: only the sync that each kept
    checkpoint asks for can have brought them, with an hour between syncs."""
    tuner = in_store(
        trainables.hangs_at,
        {"steps": 3, "interval": 0.0, "hang_at": 3, "hang_s": 600},
        name="silent",
        sync_period_s=3600,
    )
    tuner.start()
    try:
        expected = ["0/checkpoints/checkpoint_000001.pkl", "0/checkpoints/checkpoint_000002.pkl"]
        eventually(
            lambda: s3.invalidate_cache() or remote_checkpoints(s3, f"{url}/silent") == expected,
            "both checkpoints in the store",
        )
    finally:
        tuner.stop(0, force=True)
        tuner.wait()


def test_retention_deletes_checkpoints_in_the_store_too(in_store, url, s3):
    tuner = in_store(
        trainables.steps,
        {"steps": 12, "interval": 0.02, "checkpoint": True, "x": nt.grid([1, 2])},
        name="kept",
        keep_checkpoints=1,
        sync_period_s=0.05,
    )
    tuner.run()
    expected = [f"{t}/checkpoints/checkpoint_000012.pkl" for t in (0, 1)]
    assert remote_checkpoints(s3, f"{url}/kept") == expected


def dips_at_two(config):
    """Loss |step - 2| (its best at step 2) with a checkpoint each step; step 5 waits until
    the file `config["gate"]` exists."""
    checkpoint = nt.get_checkpoint()
    for step in range((checkpoint or {}).get("step", 0) + 1, 13):
        while step == 5 and not os.path.exists(config["gate"]):
            time.sleep(0.005)
        nt.report(loss=abs(step - 2), checkpoint={"step": step})


def test_retention_goes_on_in_the_store_after_a_restore_elsewhere(
    in_store, url, options, s3, cache, tmp_path
):
    """The store keeps a paused trial's best and latest checkpoints; restored from an empty
    cache, the run ends with its best and its last there, and no other."""
    gate = tmp_path / "gate"
    tuner = in_store(
        dips_at_two,
        {"gate": str(gate)},
        name="dips",
    )
    tuner.start()
    eventually(lambda: tuner.trials and tuner.trials[0].iteration >= 4, "trial 0 waits at step 5")
    tuner.pause(0)
    gate.touch()
    eventually(lambda: tuner.get_trial(0).status is nt.TrialStatus.PAUSED, "trial 0 paused")
    tuner.stop()
    assert tuner.wait(30)
    paused_at = tuner.get_trial(0).checkpoint_iteration
    assert 5 <= paused_at < 12
    s3.invalidate_cache()
    kept = [f"0/checkpoints/checkpoint_{i:06d}.pkl" for i in (2, paused_at)]
    assert remote_checkpoints(s3, f"{url}/dips") == kept, "its best and its latest"

    cache("other-machine")
    restored = nt.Tuner.restore(f"{url}/dips", dips_at_two, storage_options=options, progress=False)
    restored.run()
    assert restored.get_trial(0).status is nt.TrialStatus.TERMINATED
    s3.invalidate_cache()
    kept = [f"0/checkpoints/checkpoint_{i:06d}.pkl" for i in (2, 12)]
    assert remote_checkpoints(s3, f"{url}/dips") == kept, "its best and its last, no other"


def test_a_killed_driver_is_restored_elsewhere_with_no_result_lost_or_repeated(
    url, options, s3, cache, tmp_path, monkeypatch
):
    """The driver is killed with SIGKILL mid-run; a restore from another folder, with an
    empty cache, finishes the run: every trial's history is that of an uninterrupted run."""
    run_url = f"{url}/crash"
    driver = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import nbtune as nt, trainables
        space = {{"steps": {STEPS}, "interval": 0.02, "checkpoint": True, "x": nt.grid(range(4))}}
        tuner = nt.Tuner(trainables.steps, space, metric="loss", max_concurrent=2,
                         name="crash", seed=0, storage_path={url!r}, storage_options={options!r},
                         sync_period_s=0.2, progress=False)
        tuner.run()
    """)
    process = subprocess.Popen(
        [sys.executable, "-c", driver], start_new_session=True, env=os.environ.copy()
    )

    def far_enough():
        assert process.poll() is None, "the driver ended before it was killed"
        return s3.exists(f"{run_url}/results.jsonl") and len(remote_results(s3, run_url)) >= 50

    s3.invalidate_cache()
    eventually(lambda: s3.invalidate_cache() or far_enough(), "the driver syncs results", 60)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    before = set(remote_results(s3, run_url))
    assert len(before) < 4 * STEPS, "the driver was killed mid-run"
    assert nt.load(run_url, storage_options=options).state == "unfinished"

    cache("other-machine")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    restored = nt.Tuner.restore(run_url, trainables.steps, storage_options=options, progress=False)
    restored.run()

    uninterrupted = nt.Tuner(
        trainables.steps,
        SPACE,
        metric="loss",
        max_concurrent=2,
        name="whole",
        seed=0,
        storage_path=tmp_path / "local",
        progress=False,
    )
    uninterrupted.run()
    assert histories(restored) == histories(uninterrupted)
    s3.invalidate_cache()
    after = remote_results(s3, run_url)
    assert len(after) == len(set(after)) == 4 * STEPS, "each result in the store exactly once"
    assert before <= set(after)
    assert histories(nt.load(run_url, storage_options=options)) == histories(uninterrupted)


def test_a_second_writer_is_refused_in_one_line_while_the_lease_is_fresh(
    in_store, url, options, cache
):
    tuner = in_store(
        trainables.forever,
        {"interval": 0.02},
        name="busy",
    )
    tuner.start()
    try:
        cache("another-machine")
        with pytest.raises(FileExistsError) as refused:
            nt.Tuner.restore(f"{url}/busy", trainables.forever, storage_options=options)
        message = str(refused.value)
        assert "\n" not in message
        assert f"on {socket.gethostname()} (process {os.getpid()}" in message
    finally:
        tuner.stop()
        tuner.wait()
    again = nt.Tuner.restore(f"{url}/busy", trainables.forever, storage_options=options)
    assert again.path.is_relative_to(cache("another-machine")), "free once the writer ended"


def test_a_dask_workers_checkpoints_reach_the_store(in_store, url, s3, dask_client):
    tuner = in_store(
        trainables.steps,
        {"steps": 4, "interval": 0.0, "checkpoint": True, "x": nt.grid([1, 2])},
        name="dask",
        keep_checkpoints=None,
        executor=nt.DaskExecutor(dask_client),
    )
    tuner.run()
    stored = [f"{t}/checkpoints/checkpoint_{i:06d}.pkl" for t in (0, 1) for i in range(1, 5)]
    assert remote_checkpoints(s3, f"{url}/dask") == stored


@pytest.mark.parametrize(
    ("storage_path", "error", "says"),
    [
        ("nosuch://bucket/runs", ValueError, "fsspec knows no protocol 'nosuch'"),
        ("gs://bucket/runs", ImportError, "pip install 'nbtune[gcs]'"),
        ("s3://no-such-bucket/runs", OSError, "bucket 'no-such-bucket' does not exist"),
    ],
)
def test_a_url_that_cannot_be_used_is_refused_in_one_line(options, storage_path, error, says):
    if "gs://" in storage_path and _installed("gcsfs"):
        pytest.skip("gcsfs is installed here")
    with pytest.raises(error) as refused:
        nt.Tuner(
            trainables.count_up,
            {"steps": 1},
            storage_path=storage_path,
            storage_options=options if storage_path.startswith("s3") else None,
        )
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)


def test_an_endpoint_that_does_not_answer_is_refused_in_one_line():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    options = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{closed}"},
        "config_kwargs": {"retries": {"max_attempts": 1}},
    }
    with pytest.raises(OSError, match=r"^s3://runs/x cannot be reached \(EndpointConnection"):
        nt.Tuner(trainables.count_up, storage_path="s3://runs/x", storage_options=options)


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_storage_options_for_a_local_folder_are_refused(runs):
    with pytest.raises(ValueError, match="storage_options=... is for a URL storage_path"):
        nt.Tuner(trainables.count_up, storage_path=runs, storage_options={"key": "x"})
    assert not runs.exists()
