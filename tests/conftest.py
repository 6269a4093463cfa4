"""Shared fixtures: a private experiment folder per test and a Tuner factory."""

from __future__ import annotations

import functools

import pytest
from waiting import EventLog

import nbtune as nt
from nbtune.events import TrialPaused, TrialResult

EXECUTORS = {
    "dask": None,
    "fresh": functools.partial(nt.LokyExecutor, reuse_workers=False),
    "loky": nt.LokyExecutor,
    "thread": nt.ThreadExecutor,
}
"""Each executor by name ("fresh": a process per trial); the Dask one needs the session's
cluster (see `executor_class`)."""


@pytest.fixture
def runs(tmp_path):
    """A folder for this test's experiment directories."""
    return tmp_path / "runs"


@pytest.fixture(params=sorted(EXECUTORS))
def executor_class(request):
    """Each executor in turn, for behaviour every executor must share: call it to get one."""
    if request.param == "dask":
        return functools.partial(nt.DaskExecutor, request.getfixturevalue("dask_client"))
    return EXECUTORS[request.param]


@pytest.fixture(scope="session")
def dask_client():
    """A client of a real two-worker Dask cluster (separate processes, one thread each),
    started once per test session, when a test first asks for it."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            silence_logs=50,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.fixture
def make_tuner(runs):
    """Build a Tuner that writes under `runs`, prints no progress and names itself."""
    counter = iter(range(1000))

    def make(trainable, space=None, **options):
        options.setdefault("name", f"run{next(counter)}")
        options.setdefault("storage_path", runs)
        options.setdefault("progress", False)
        options.setdefault("max_concurrent", 2)
        return nt.Tuner(trainable, space, **options)

    return make


@pytest.fixture
def log():
    return EventLog()


@pytest.fixture
def stop_midway(log):
    """Runs a tuner until trial 0 has reported `iteration` results, pauses that trial, then
    stops the run: a run to restore, with a trial paused at its checkpoint."""

    def stop(tuner, iteration=1):
        tuner.subscribe(log)
        tuner.start()
        log.wait_for(
            lambda e: (
                isinstance(e, TrialResult)
                and e.trial_id == 0
                and e.result["training_iteration"] >= iteration
            )
        )
        tuner.pause(0)
        log.wait_for(lambda e: isinstance(e, TrialPaused) and e.trial_id == 0)
        tuner.stop()
        assert tuner.wait(30)

    return stop


def pytest_addoption(parser):
    parser.addoption(
        "--matrix",
        action="store_true",
        help="run the whole combination matrix (tests marked `matrix`), not only its sample",
    )


def pytest_collection_modifyitems(config, items):
    """Tests marked `matrix` run only with --matrix (`make test-matrix`): left out, not
    skipped, so that the summary of `make test` lists no skip for them."""
    if config.getoption("--matrix"):
        return
    left_out = [item for item in items if "matrix" in item.keywords]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if "matrix" not in item.keywords]
