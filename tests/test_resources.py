"""What each trial may use: thread pools capped at its CPUs, its own GPUs, and no more trials at
once than the machine holds."""

from __future__ import annotations

import itertools
import os

import pytest
import trainables

import nbtune as nt
from nbtune.resources import TrialResources


def spans(tuner):
    """Each trial's (first report, last report, GPUs), from the result log."""
    history = tuner.history()
    return [
        (rows["timestamp"].min(), rows["timestamp"].max(), rows["gpus"].iloc[0])
        for _, rows in history.groupby("trial_id")
    ]


def overlapping(spans_):
    return [(a, b) for a, b in itertools.combinations(spans_, 2) if a[0] <= b[1] and b[0] <= a[1]]


def six_trials_on_gpus(make_tuner, gpu, gpus):
    """Run six trials, four at a time if the GPUs allow, each asking for `gpu` of `gpus`."""
    tuner = make_tuner(
        trainables.resources_seen,
        {"trial": nt.grid(list(range(6)))},
        metric="loss",
        max_concurrent=4,
        resources_per_trial={"gpu": gpu},
        executor=nt.LokyExecutor(gpus=gpus),
    )
    tuner.run()
    return tuner


def test_each_trial_sees_only_its_own_gpus(make_tuner):
    tuner = six_trials_on_gpus(make_tuner, 1, ["0", "1"])
    seen = spans(tuner)
    assert {gpus for _, _, gpus in seen} == {"0", "1"}
    for a, b in overlapping(seen):
        assert a[2] != b[2], "two trials ran on one GPU at once"
    assert tuner.dataframe()["gpu"].isin(["0", "1"]).all()


def test_a_fraction_shares_a_gpu_with_at_most_one_other_trial(make_tuner):
    seen = spans(six_trials_on_gpus(make_tuner, 0.5, ["0"]))
    assert {gpus for _, _, gpus in seen} == {"0"}
    for a, b, c in itertools.combinations(seen, 3):
        at_once = a[0] <= b[1] and b[0] <= a[1] and max(a[0], b[0]) <= c[1]
        assert not (at_once and c[0] <= min(a[1], b[1])), "three trials shared one GPU"


@pytest.mark.parametrize(
    ("resources", "max_concurrent", "threads"),
    [({"cpu": 1}, 2, 1), (None, 2, max(1, (os.cpu_count() or 1) // 2)), (None, 1, os.cpu_count())],
)
def test_thread_pools_are_capped_at_the_trial_s_cpus(
    make_tuner, resources, max_concurrent, threads
):
    tuner = make_tuner(
        trainables.resources_seen,
        {"steps": 1, "interval": 0},
        metric="loss",
        max_concurrent=max_concurrent,
        resources_per_trial=resources,
    )
    tuner.run()
    row = tuner.history().iloc[0]
    assert (row["omp"], row["blas"]) == (threads, threads)
    assert row["gpus"] == "unset", "a trial that asks for no GPU leaves CUDA_VISIBLE_DEVICES alone"


def test_no_more_trials_run_at_once_than_the_cpus_hold(make_tuner):
    cpus = os.cpu_count() or 1
    tuner = make_tuner(
        trainables.resources_seen,
        {"trial": nt.grid(list(range(4)))},
        metric="loss",
        max_concurrent=4,
        resources_per_trial={"cpu": cpus},
    )
    tuner.run()
    assert not overlapping(spans(tuner)), "each trial takes every CPU: one at a time"


@pytest.mark.parametrize(
    ("resources", "executor", "message"),
    [
        (
            {"gpu": 2},
            lambda: nt.LokyExecutor(gpus=["0"]),
            r"asks 2 GPU per trial, but the executor has 1",
        ),
        ({"gpu": 1}, nt.ThreadExecutor, r"the executor has 0 \(none found\)"),
        ({"cpu": 10_000}, nt.LokyExecutor, r"asks 10000 CPUs per trial, but there are"),
        ({"gpu": 1.5}, nt.LokyExecutor, r"fraction of one GPU or whole GPUs"),
        ({"memory": 1}, nt.LokyExecutor, r"unknown resource 'memory'"),
        ({"cpu": 0}, nt.LokyExecutor, r"\['cpu'\]=0: pass a number > 0"),
    ],
)
def test_a_request_that_can_never_fit_is_refused_when_the_tuner_is_built(
    make_tuner, resources, executor, message
):
    with pytest.raises(ValueError, match=message):
        make_tuner(trainables.count_up, {}, resources_per_trial=resources, executor=executor())


def test_gpus_are_picked_among_those_not_taken():
    whole, half = TrialResources(gpu=1), TrialResources(gpu=0.5)
    assert whole.pick(["0", "1"], ["0"]) == "1"
    assert whole.pick(["0", "1"], ["0", "1"]) is None
    assert TrialResources(gpu=2).pick(["0", "1", "2"], ["1"]) == "0,2"
    assert half.pick(["0", "1"], ["1"]) == "1", "a half fills a shared GPU first"
    assert half.pick(["0"], ["0", "0"]) is None
    assert half.at_once(cpus=8, gpus=2) == 4
    assert TrialResources().pick(["0"], []) == ""


def test_a_restored_run_keeps_its_resources(make_tuner):
    tuner = make_tuner(
        trainables.count_up,
        {"steps": 1},
        resources_per_trial={"gpu": 1},
        executor=nt.LokyExecutor(gpus=["7"]),
    )
    tuner.run()
    restored = nt.Tuner.restore(
        tuner.path, trainables.count_up, executor=nt.LokyExecutor(gpus=["7"]), progress=False
    )
    assert restored.resources == TrialResources(gpu=1.0)
