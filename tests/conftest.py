"""Shared fixtures: a private experiment folder per test and a Tuner factory."""

from __future__ import annotations

import pytest

import nbtune as nt

EXECUTORS = {"loky": nt.LokyExecutor, "thread": nt.ThreadExecutor}


@pytest.fixture
def runs(tmp_path):
    """A folder for this test's experiment directories."""
    return tmp_path / "runs"


@pytest.fixture(params=sorted(EXECUTORS))
def executor_class(request):
    """Each executor in turn, for behaviour every executor must share."""
    return EXECUTORS[request.param]


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
