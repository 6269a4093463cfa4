"""Search spaces: domains draw what they promise, and configs are the ones Ray Tune would make."""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nbtune.space as nt

DRAWS = 2_000


def draws(domain: nt.Domain, n: int = DRAWS) -> list:
    rng = np.random.default_rng(0)
    return [domain.sample(rng) for _ in range(n)]


# Domains


def test_uniform_draws_floats_spread_over_low_to_high():
    values = draws(nt.uniform(-2, 3))
    assert all(type(v) is float and -2 <= v < 3 for v in values)
    assert min(values) < -1.9 and max(values) > 2.9


def test_loguniform_draws_cluster_around_the_geometric_mean():
    values = draws(nt.loguniform(1e-4, 1e-1))
    assert all(type(v) is float and 1e-4 <= v < 1e-1 for v in values)
    geometric_mean = math.sqrt(1e-4 * 1e-1)
    assert abs(math.log10(statistics.median(values)) - math.log10(geometric_mean)) < 0.25


def test_randint_hits_every_int_and_never_high():
    values = draws(nt.randint(-1, 4))
    assert all(type(v) is int for v in values)
    assert set(values) == {-1, 0, 1, 2, 3}


def test_choice_hits_every_category_and_returns_it_unchanged():
    layers = [64, 64]
    values = draws(nt.choice(["sgd", "adam", layers]))
    assert Counter(map(repr, values)).keys() == {"'sgd'", "'adam'", "[64, 64]"}
    assert any(v is layers for v in values)


def test_grid_samples_like_a_choice_for_searchers_that_cannot_enumerate():
    assert set(draws(nt.grid([1, 2, 3]), n=200)) == {1, 2, 3}


def test_sample_from_cannot_be_sampled_without_a_config():
    with pytest.raises(TypeError, match="depends on the config"):
        nt.sample_from(len).sample(np.random.default_rng(0))


@given(
    low=st.floats(-1e300, 1e300),
    width=st.floats(min_value=0, max_value=1e300, exclude_min=True),
    seed=st.integers(0, 2**32),
)
def test_uniform_and_loguniform_stay_in_range_even_for_tiny_ranges(low, width, seed):
    high = low + width
    if high == low:
        high = math.nextafter(low, math.inf)
    rng = np.random.default_rng(seed)
    assert low <= nt.uniform(low, high).sample(rng) < high
    if low > 0:
        assert low <= nt.loguniform(low, high).sample(rng) < high


@pytest.mark.parametrize(
    ("domain", "text"),
    [
        (nt.uniform(0, 1), "uniform(0.0, 1.0)"),
        (nt.loguniform(1e-4, 0.1), "loguniform(0.0001, 0.1)"),
        (nt.randint(1, 4), "randint(1, 4)"),
        (nt.choice(("a", "b")), "choice(['a', 'b'])"),
        (nt.grid([1, 2]), "grid([1, 2])"),
        (nt.sample_from(len), "sample_from(len)"),
    ],
)
def test_domains_read_like_the_call_that_made_them(domain, text):
    assert repr(domain) == text


def test_domains_compare_by_value():
    assert nt.uniform(0, 1) == nt.Uniform(0.0, 1.0)
    assert nt.choice(["a"]) == nt.choice(("a",))
    assert nt.randint(0, 2) != nt.randint(0, 3)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: nt.uniform(1.0, 0.5), ValueError, "low must be below high; swap the bounds"),
        (lambda: nt.uniform(1, 1), ValueError, "use a constant for a fixed value"),
        (lambda: nt.uniform("0", 1), TypeError, "bounds must be numbers, got str and int"),
        (lambda: nt.uniform(True, 2), TypeError, "bounds must be numbers, got bool"),
        (lambda: nt.uniform(0, math.inf), ValueError, "bounds must be finite"),
        (lambda: nt.uniform(math.nan, 1), ValueError, "bounds must be finite"),
        (
            lambda: nt.loguniform(0, 1),
            ValueError,
            r"^loguniform\(low=0, high=1\): low must be > 0 for a log scale; "
            r"use uniform\(\) or a positive low$",
        ),
        (lambda: nt.loguniform(0.1, 0.01), ValueError, "swap the bounds"),
        (lambda: nt.loguniform(None, 1), TypeError, "bounds must be numbers"),
        (lambda: nt.randint(0, 2.5), TypeError, r"randint\(low=0, high=2.5\): .*integers"),
        (lambda: nt.randint(5, 1), ValueError, "swap the bounds"),
        (lambda: nt.choice([]), ValueError, r"^choice\(\[\]\): needs at least one category$"),
        (lambda: nt.choice("adam"), TypeError, "expects a list or tuple, got str"),
        (lambda: nt.choice({"a", "b"}), TypeError, "got set"),
        (lambda: nt.grid(()), ValueError, r"^grid\(\(\)\): needs at least one value$"),
        (
            lambda: nt.sample_from(3),
            TypeError,
            r"^sample_from\(3\): expects a function config -> value$",
        ),
    ],
)
def test_invalid_domains_fail_at_once_with_a_one_line_hint(make, error, message):
    with pytest.raises(error, match=message) as info:
        make()
    assert "\n" not in str(info.value)


# SearchSpace

SPACE = {
    "lr": nt.loguniform(1e-4, 1e-1),
    "optimizer": nt.choice(["sgd", "adam"]),
    "model": {"layers": nt.randint(1, 4), "widths": [64, 32], "head": {"dropout": 0.1}},
    "seed": 7,
}


def test_parameter_names_are_flat_in_definition_order_constants_included():
    assert nt.SearchSpace(SPACE).parameter_names == (
        "lr",
        "optimizer",
        "model/layers",
        "model/widths",
        "model/head/dropout",
        "seed",
    )


def test_config_has_the_space_shape_with_constants_and_drawn_values():
    config = nt.SearchSpace(SPACE).config(0, seed=1)
    assert config.keys() == SPACE.keys()
    assert 1e-4 <= config["lr"] < 1e-1
    assert config["optimizer"] in ("sgd", "adam")
    assert config["model"]["layers"] in (1, 2, 3)
    assert config["model"]["widths"] == [64, 32]
    assert config["model"]["head"] == {"dropout": 0.1}
    assert config["seed"] == 7


def test_configs_are_fresh_so_a_trial_mutating_its_config_harms_no_other():
    space = nt.SearchSpace(SPACE)
    config = space.config(0, seed=1)
    config["model"]["widths"].append(16)
    config["model"]["head"]["dropout"] = 0.5
    again = space.config(0, seed=1)
    assert again["model"]["widths"] == [64, 32]
    assert again["model"]["head"] == {"dropout": 0.1}
    assert SPACE["model"]["widths"] == [64, 32]


def test_configs_depend_on_seed_and_index_only():
    space = nt.SearchSpace(SPACE)
    later_first = [space.config(i, seed=3) for i in reversed(range(5))][::-1]
    assert [space.config(i, seed=3) for i in range(5)] == later_first
    assert [space.config(i, seed=4) for i in range(5)] != later_first
    assert space.config(0, seed=3) != space.config(1, seed=3)


def test_grids_expand_like_ray_tune_num_samples_times_over():
    space = nt.SearchSpace(
        {"x": nt.grid([0, 1]), "lr": nt.uniform(0, 1), "y": nt.grid(["a", "b", "c"])}
    )
    assert space.grid_size == 6
    configs = [space.config(i, seed=0) for i in range(2 * space.grid_size)]
    points = [(c["x"], c["y"]) for c in configs]
    assert points == list(itertools.product([0, 1], ["a", "b", "c"])) * 2
    assert Counter(points) == {point: 2 for point in itertools.product([0, 1], ["a", "b", "c"])}
    assert len({c["lr"] for c in configs}) == 12


def test_grid_parameters_take_part_in_nesting():
    space = nt.SearchSpace({"model": {"depth": nt.grid([2, 4])}, "width": nt.grid([8, 16])})
    assert [space.config(i, seed=0) for i in range(2)] == [
        {"model": {"depth": 2}, "width": 8},
        {"model": {"depth": 2}, "width": 16},
    ]


def test_an_empty_space_gives_empty_configs():
    for space in (nt.SearchSpace(None), nt.SearchSpace({})):
        assert space.parameter_names == ()
        assert space.grid_size == 1
        assert space.config(3, seed=0) == {}


def test_sample_from_sees_resolved_values_and_earlier_sample_froms():
    seen = []

    def momentum(config):
        seen.append(config)
        return 0.9 if config["optimizer"] == "sgd" else 0.0

    space = nt.SearchSpace(
        {
            "optimizer": nt.grid(["sgd", "adam"]),
            "momentum": nt.sample_from(momentum),
            "nesterov": nt.sample_from(lambda c: c["momentum"] > 0),
            "train": {"lr": nt.uniform(0, 1), "warmup": nt.sample_from(lambda c: c["train"]["lr"])},
        }
    )
    sgd, adam = space.config(0, seed=0), space.config(1, seed=0)
    assert (sgd["momentum"], sgd["nesterov"]) == (0.9, True)
    assert (adam["momentum"], adam["nesterov"]) == (0.0, False)
    assert sgd["train"]["warmup"] == sgd["train"]["lr"]
    assert list(sgd) == ["optimizer", "momentum", "nesterov", "train"]
    assert seen[0] == {"optimizer": "sgd", "train": {"lr": sgd["train"]["lr"]}}


def test_a_raising_sample_from_names_the_parameter_and_the_error():
    space = nt.SearchSpace({"momentum": nt.sample_from(lambda c: c["optimizer"])})
    message = r"^sample_from for 'momentum' raised KeyError\('optimizer'\); "
    with pytest.raises(ValueError, match=message) as info:
        space.config(0, seed=0)
    assert isinstance(info.value.__cause__, KeyError)


def test_a_sample_from_cannot_read_a_later_one():
    space = nt.SearchSpace(
        {"a": nt.sample_from(lambda c: c["b"]), "b": nt.sample_from(lambda c: 1)}
    )
    with pytest.raises(ValueError, match=r"'a' raised KeyError\('b'\)"):
        space.config(0, seed=0)


def test_domains_lists_the_non_constant_leaves_for_model_based_searchers():
    weight_decay = nt.sample_from(lambda c: c["lr"] / 10)
    space = nt.SearchSpace({**SPACE, "wd": weight_decay})
    assert space.domains() == {
        "lr": SPACE["lr"],
        "optimizer": SPACE["optimizer"],
        "model/layers": SPACE["model"]["layers"],
        "wd": weight_decay,
    }
    assert space.has_sample_from
    assert not nt.SearchSpace(SPACE).has_sample_from


@pytest.mark.parametrize(
    ("space", "error", "message"),
    [
        ([("lr", 0.1)], TypeError, "must be a dict .*, got list$"),
        ({"model/lr": 0.1}, ValueError, "key 'model/lr' contains '/', which joins nested names"),
        ({"model": {"a/b": 1}}, ValueError, r"key 'a/b' \(in 'model'\) contains '/'"),
        ({"model": {1: 2}}, TypeError, r"key 1 \(in 'model'\) must be a str"),
    ],
)
def test_invalid_spaces_fail_at_once(space, error, message):
    with pytest.raises(error, match=message):
        nt.SearchSpace(space)


def test_negative_index_or_seed_is_refused():
    with pytest.raises(ValueError, match=r"config\(index=-1, seed=0\): both must be >= 0"):
        nt.SearchSpace(SPACE).config(-1, seed=0)


def test_flatten_joins_nested_names_for_dataframe_columns():
    config = {"lr": 0.1, "model": {"layers": 2, "head": {"dropout": 0.1}}, "tags": ["a"]}
    expected = {"lr": 0.1, "model/layers": 2, "model/head/dropout": 0.1, "tags": ["a"]}
    assert list(nt.flatten_config(config).items()) == list(expected.items())
    assert nt.SearchSpace.flatten(config) == expected


def test_check_config_accepts_a_config_that_fits():
    space = nt.SearchSpace(SPACE)
    space.check_config(space.config(0, seed=0))
    space.check_config(
        {
            "lr": 0.01,
            "optimizer": "sgd",
            "model": {"layers": 1, "widths": [], "head": {"dropout": 0}},
            "seed": 0,
        }
    )


def test_check_config_lists_unknown_and_missing_names():
    space = nt.SearchSpace({"lr": nt.uniform(0, 1), "model": {"layers": nt.randint(1, 3)}})
    with pytest.raises(
        ValueError,
        match=r"^config does not fit the search space: unknown 'lrr'; missing 'lr'$",
    ):
        space.check_config({"lrr": 0.1, "model": {"layers": 2}})
    with pytest.raises(ValueError, match=r"space: missing 'model/layers'$"):
        space.check_config({"lr": 0.1, "model": {}})
    with pytest.raises(ValueError, match=r"space: unknown 'model/width', 'x'$"):
        space.check_config({"lr": 0.1, "model": {"layers": 2, "width": 3}, "x": 1})


# Ray Tune's quantised, log-integer and normal domains


def test_quniform_rounds_to_multiples_of_q_within_both_bounds():
    values = draws(nt.quniform(0, 1, 0.1))
    assert set(values) == {round(0.1 * k, 1) for k in range(11)}, "0.0 to 1.0, ends included"


def test_qloguniform_draws_on_a_log_scale_then_rounds():
    values = draws(nt.qloguniform(0.001, 1, 0.001))
    assert all(0.001 <= v <= 1 and v == round(v, 3) for v in values)
    assert sum(v < 0.032 for v in values) > DRAWS * 0.4, "half the decades lie below 0.032"


def test_qrandint_includes_high_and_steps_by_q():
    assert set(draws(nt.qrandint(0, 10, 2))) == {0, 2, 4, 6, 8, 10}
    assert all(type(v) is int for v in draws(nt.qrandint(0, 10, 2), 10))


def test_lograndint_excludes_high_and_favours_small_values():
    values = draws(nt.lograndint(1, 100))
    assert all(type(v) is int and 1 <= v < 100 for v in values)
    assert sum(v < 10 for v in values) > DRAWS * 0.4, "one of two decades"
    assert repr(nt.lograndint(1, 100)) == "lograndint(1, 100)"


def test_qlograndint_steps_from_low_up_to_high():
    values = draws(nt.qlograndint(5, 100, 5))
    assert set(values) <= set(range(5, 101, 5)) and 100 in values and 5 in values


def test_quantised_floats_are_multiples_of_q_within_the_bounds_as_in_ray_tune():
    assert set(draws(nt.quniform(0.05, 1, 0.1))) == {round(0.1 * k, 1) for k in range(1, 11)}
    assert repr(nt.quniform(0.05, 0.3, 0.1)) == "quniform(0.1, 0.3, 0.1)", "0.3 / 0.1 < 3"
    values = draws(nt.qloguniform(0.0005, 1, 0.001))
    assert min(values) == 0.001 and max(values) <= 1


def test_quantised_ints_are_multiples_of_q_within_the_bounds_as_in_ray_tune():
    assert set(draws(nt.qrandint(1, 10, 3))) == {3, 6, 9}
    assert set(draws(nt.qrandint(-21, 12, 3))) == set(range(-21, 13, 3))
    assert set(draws(nt.qlograndint(1, 10, 2))) == {2, 4, 6, 8, 10}
    with pytest.raises(ValueError, match=r"^qrandint\(4, 5, 3\): no multiple of 3 lies"):
        nt.qrandint(4, 5, 3)


def test_randn_and_qrandn_draw_normal_values():
    values = draws(nt.randn(2.0, 0.5))
    assert statistics.mean(values) == pytest.approx(2.0, abs=0.05)
    assert statistics.stdev(values) == pytest.approx(0.5, abs=0.05)
    rounded = draws(nt.qrandn(0.0, 1.0, 0.25))
    assert all(v == round(v * 4) / 4 for v in rounded)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: nt.quniform(0, 1, 0), r"quniform\(low=0, high=1, q=0\): q must be a finite"),
        (lambda: nt.quniform(0.01, 0.05, 0.1), r"no multiple of 0\.1 lies between the bounds"),
        (lambda: nt.quniform(0.05, 0.15, 0.1), r"0\.1 is the only multiple of 0\.1 between"),
        (lambda: nt.qrandint(0, 10, 0), r"qrandint\(0, 10, 0\): the step must be >= 1"),
        (lambda: nt.qrandint(0, 1.5, 1), r"bounds and step must be integers"),
        (lambda: nt.lograndint(0, 10), r"low must be >= 1 for a log scale"),
        (lambda: nt.randn(0, 0), r"randn\(0, 0\): sd must be > 0"),
    ],
)
def test_bad_bounds_and_steps_are_one_line_errors(make, message):
    with pytest.raises((ValueError, TypeError), match=message) as refused:
        make()
    assert "\n" not in str(refused.value)


def test_the_new_domains_are_reprs_users_can_read_back():
    for domain in (
        nt.quniform(0, 1, 0.5),
        nt.qloguniform(1, 100, 1),
        nt.qrandint(0, 10, 2),
        nt.qlograndint(1, 100, 3),
        nt.randn(0.0, 1.0),
        nt.qrandn(0.0, 1.0, 0.5),
    ):
        assert repr(domain).startswith(
            ("quniform", "qloguniform", "qrandint", "qlograndint", "randn", "qrandn")
        )


@pytest.mark.parametrize(
    ("domain", "inside", "outside"),
    [
        (nt.uniform(0, 1), [0, 0.5, 0.999], [1.0, -0.1, math.nan, "0.5", True]),
        (nt.loguniform(1e-3, 1), [1e-3, 0.5], [1.0, 0.0]),
        (nt.quniform(0, 1, 0.25), [0.0, 0.25, 1.0], [0.3, 1.25]),
        (nt.randint(1, 4), [1, 3, np.int64(2)], [4, 0, 2.0, True]),
        (nt.qrandint(1, 10, 3), [3, 6, 9], [1, 4, 10, 12]),
        (nt.lograndint(1, 100), [1, 99], [100, 0]),
        (nt.randn(0, 1), [-5.0, 3], [math.inf, "1"]),
        (nt.qrandn(0, 1, 0.5), [1.5, -2.0], [1.2]),
        (nt.choice(["a", None]), ["a", None], ["b", 0]),
        (nt.grid([1, 2]), [1, 2], [3]),
        (nt.sample_from(lambda config: 1), [object()], []),
    ],
)
def test_contains_says_which_values_a_domain_can_give(domain, inside, outside):
    assert [value for value in inside if not domain.contains(value)] == []
    assert [value for value in outside if domain.contains(value)] == []


def test_check_values_names_the_first_value_outside_its_domain():
    space = nt.SearchSpace({"model": {"depth": nt.qrandint(2, 10, 2)}, "act": "relu"})
    space.check_values({"model": {"depth": 4}, "act": "tanh"}, "here")
    with pytest.raises(
        ValueError, match=r"^here: 'model/depth' = 5 is outside qrandint\(2, 10, 2\)"
    ):
        space.check_values({"model": {"depth": 5}}, "here")
