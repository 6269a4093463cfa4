"""The table of names `%tune` takes: what each name makes, with which options, and its errors."""

from __future__ import annotations

import pytest

import nbtune as nt
from nbtune import registry


def test_a_scheduler_named_alone_gets_a_value_for_each_required_argument():
    asha = registry.create("scheduler", "asha")
    assert isinstance(asha, nt.ASHA)
    assert (asha.max_t, asha.grace_period, asha.reduction_factor) == (100, 1, 3), "Ray's max_t"

    hyperband = registry.create("scheduler", "hyperband")
    assert isinstance(hyperband, nt.HyperBand)
    assert hyperband.max_t == 81, "Ray's HyperBandScheduler default: brackets of 1 to 81"

    median = registry.create("scheduler", "median")
    assert isinstance(median, nt.MedianStopping)
    assert (median.grace_period, median.min_samples_required) == (3, 3)

    assert isinstance(registry.create("scheduler", "fifo"), nt.FIFOScheduler)


def test_options_override_the_tables_defaults_and_keep_the_classs_own():
    asha = registry.create("scheduler", "asha", max_t=27, grace_period=2)
    assert (asha.max_t, asha.grace_period, asha.reduction_factor) == (27, 2, 3)


def test_pbt_takes_its_mutations_as_lists_of_values():
    pbt = registry.create(
        "scheduler", "pbt", perturbation_interval=4, hyperparam_mutations={"lr": [0.001, 0.01]}
    )
    assert isinstance(pbt, nt.PBT)
    assert pbt.hyperparam_mutations == {"lr": [0.001, 0.01]}


def test_an_option_the_class_does_not_take_is_refused_with_those_it_takes():
    with pytest.raises(TypeError) as refused:
        registry.create("scheduler", "asha", max_tt=27)
    assert str(refused.value) == (
        "ASHA: got an unexpected keyword argument 'max_tt'; it takes max_t, grace_period, "
        "reduction_factor, brackets, time_attr, bootstrap_count, metric, mode"
    )


def test_a_required_option_left_out_is_named():
    with pytest.raises(
        TypeError,
        match="^PBT: missing a required argument: "
        "'perturbation_interval'; it takes perturbation_interval, ",
    ):
        registry.create("scheduler", "pbt")


def test_a_value_the_class_refuses_comes_from_the_class():
    with pytest.raises(ValueError, match=r"^ASHA\(max_t=0\): pass a positive number"):
        registry.create("scheduler", "asha", max_t=0)


def test_an_unknown_name_lists_the_names_of_its_family():
    with pytest.raises(ValueError) as unknown:
        registry.create("scheduler", "lottery")
    assert str(unknown.value) == (
        "unknown scheduler 'lottery'; use one of: fifo, asha, hyperband, median, pbt"
    )


def test_names_put_the_default_first():
    assert registry.names("scheduler")[0] == "fifo"
    assert registry.names("searcher")[0] == "random"
    assert registry.names("executor")[0] == "loky"


def test_describe_shows_what_each_name_makes_in_python():
    rows = registry.describe(markdown=True).splitlines()
    assert rows[:7] == [
        "| option | name | Python | what it does |",
        "| --- | --- | --- | --- |",
        "| `--scheduler` | `fifo` | `FIFOScheduler()` | every trial runs to its end (default) |",
        "| `--scheduler` | `asha` | `ASHA(max_t=100)` | early stopping at rungs, asynchronous |",
        "| `--scheduler` | `hyperband` | `HyperBand(max_t=81)` | synchronous halving; trials "
        "should checkpoint |",
        "| `--scheduler` | `median` | `MedianStopping(grace_period=3)` | stops trials below the "
        "median at a step |",
        "| `--scheduler` | `pbt` | `PBT(perturbation_interval, hyperparam_mutations)` | "
        "population based training, lists as mutations |",
    ], "an argument without a value by name is shown bare: whoever names it passes it"
    assert len(rows) == 2 + sum(len(registry.names(family)) for family in registry.TABLE)


def test_describe_as_text_aligns_its_columns_for_the_help():
    calls = [entry.call for entries in registry.TABLE.values() for entry in entries.values()]
    rows = registry.describe().splitlines()
    assert len({row.index(call) for row, call in zip(rows, calls, strict=True)}) == 1
