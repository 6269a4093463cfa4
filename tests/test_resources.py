"""What each trial may use: thread pools capped at its CPUs, its own GPUs, and no more trials at
once than the machine holds."""

from __future__ import annotations

import itertools
import math
import os
import re

import numpy as np
import pytest
import trainables

import nbtune as nt
from nbtune.resources import TrialResources, visible_gpus


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


@pytest.mark.parametrize("gpus", [["0", "1"], "0,1"], ids=["list", "string"])
def test_each_trial_sees_only_its_own_gpus(make_tuner, gpus):
    tuner = six_trials_on_gpus(make_tuner, 1, gpus)
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
        ({"cpu": 0}, nt.LokyExecutor, r"\['cpu'\]=0: pass a finite number > 0"),
        ({"cpu": math.nan}, nt.LokyExecutor, r"\['cpu'\]=nan: pass a finite number > 0"),
        ({"gpu": math.nan}, nt.LokyExecutor, r"\['gpu'\]=nan: pass a finite number > 0"),
        ({"gpu": math.inf}, nt.LokyExecutor, r"\['gpu'\]=inf: pass a finite number > 0"),
        ({"cpu": math.inf}, nt.LokyExecutor, r"\['cpu'\]=inf: pass a finite number > 0"),
        ({"gpu": -math.inf}, nt.LokyExecutor, r"\['gpu'\]=-inf: pass a finite number > 0"),
        ({"cpu": "2"}, nt.LokyExecutor, r"\['cpu'\]='2': pass a finite number > 0"),
        ({"gpu": True}, nt.LokyExecutor, r"\['gpu'\]=True: pass a finite number > 0"),
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


def test_numpy_amounts_are_taken_as_the_numbers_they_are():
    resources = TrialResources.parse({"cpu": np.int64(2), "gpu": np.float32(0.5)})
    assert resources == TrialResources(cpu=2, gpu=0.5)
    assert type(resources.cpu) is int and type(resources.gpu) is float


def test_a_tiny_gpu_fraction_bounds_nothing_but_breaks_nothing():
    assert TrialResources.parse({"gpu": 5e-324}).at_once(cpus=2, gpus=1) >= 1


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ("0,1", ["0", "1"]),
        (" 0 , 1 ", ["0", "1"]),
        ("3", ["3"]),
        ("", []),
        ([0, 1], ["0", "1"]),
        (("GPU-8f1c", "MIG-2a"), ["GPU-8f1c", "MIG-2a"]),
        ([], []),
    ],
)
def test_gpus_are_a_list_of_ids_or_a_string_as_cuda_visible_devices_reads_them(gpus, expected):
    assert nt.LokyExecutor(gpus=gpus).gpus() == expected


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        (2, "(gpus=2): pass the GPU ids, as a list (['0', '1']) or a string ('0,1'), or []"),
        (["0,1"], "(gpus=['0,1']): '0,1' is not one GPU id; pass ['0', '1']"),
        (["0", "0"], "(gpus=['0', '0']): GPU '0' is listed twice"),
        ("0,0", "(gpus='0,0'): GPU '0' is listed twice"),
        ("-1", "(gpus='-1'): '-1' is not a GPU id; pass gpus=[] for none"),
        ([-1], "(gpus=[-1]): '-1' is not a GPU id; pass gpus=[] for none"),
        ("0,,1", "(gpus='0,,1'): an empty GPU id; pass the ids, like '0,1'"),
        ([True], "(gpus=[True]): True is not a GPU id; pass strings like '0'"),
        ([0.5], "(gpus=[0.5]): 0.5 is not a GPU id; pass strings like '0'"),
        ({"0": 1}, "(gpus={'0': 1}): pass the GPU ids"),
    ],
)
def test_gpus_that_are_not_a_list_of_ids_are_refused_in_one_line(gpus, message):
    with pytest.raises(ValueError, match=re.escape("LokyExecutor" + message)) as refused:
        nt.LokyExecutor(gpus=gpus)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("-1", []),
        ("", []),
        ("0,1", ["0", "1"]),
        ("0, 1", ["0", "1"]),
        ("1,-1,0", ["1"]),
        ("GPU-8f1c", ["GPU-8f1c"]),
    ],
)
def test_cuda_visible_devices_is_read_as_cuda_reads_it(monkeypatch, visible, expected):
    """CUDA sees the devices listed before the first invalid one: "-1" means none."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert visible_gpus() == expected
    assert nt.LokyExecutor().gpus() == expected


def test_a_gpu_trial_is_refused_where_cuda_visible_devices_hides_every_gpu(monkeypatch, make_tuner):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    with pytest.raises(ValueError, match=r"the executor has 0 \(none found\)"):
        make_tuner(trainables.count_up, {}, resources_per_trial={"gpu": 1})
