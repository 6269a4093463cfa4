"""What a reported value is: plain Python in the kernel, a number or not, finite or not, and the
one-line error for a key that cannot play its role."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import trainables

import nbtune as nt
from nbtune.events import TrialResult
from nbtune.metrics import Pickled, finite, number, plain, problem, require
from nbtune.stopping import StopCriteria
from nbtune.ui.data import history_data

INTEGERS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64", "longdouble"]


@pytest.mark.parametrize("name", INTEGERS)
def test_numpy_integers_of_every_width_become_python_ints(name):
    value = getattr(np, name)(7)
    assert type(plain(value)) is int and plain(value) == 7
    assert type(number(value)) is int
    assert type(finite(value)) is float and finite(value) == 7.0


@pytest.mark.parametrize("name", FLOATS)
def test_numpy_floats_of_every_width_become_python_floats(name):
    value = getattr(np, name)(0.25)
    assert type(plain(value)) is float and plain(value) == 0.25
    assert type(number(value)) is float
    assert finite(value) == 0.25


def test_np_float64_is_a_float_yet_converted_so_the_kernel_holds_no_numpy_type():
    assert isinstance(np.float64(0.5), float)
    assert type(plain(np.float64(0.5))) is float


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (np.array(0.5, dtype=np.float32), 0.5),
        (np.array(3, dtype=np.int16), 3),
        (np.array(True), True),
        (trainables.Scalar(np.int64(2)), 2),
        (trainables.Scalar(0.75), 0.75),
        (trainables.Ratio(), 0.25),
        (Fraction(1, 4), 0.25),
        (np.bool_(False), False),
        (True, True),
        (np.str_("text"), "text"),
    ],
    ids=repr,
)
def test_scalars_of_every_kind_become_plain_python(value, expected):
    converted = plain(value)
    assert converted == expected and type(converted) is type(expected)


def test_containers_become_plain_too_and_what_is_not_a_scalar_is_kept():
    one_element = np.array([0.5])
    converted = plain({"a": [np.float32(0.5), (np.int8(1), "x")], "b": one_element, "c": None})
    assert converted == {"a": [0.5, [1, "x"]], "b": one_element, "c": None}
    assert type(converted["a"][0]) is float and type(converted["a"][1][0]) is int
    assert converted["b"] is one_element, "a 1-element array is not a scalar"


@pytest.mark.parametrize(
    "value",
    [True, np.bool_(True), "0.5", np.str_("1"), [0.5], {"loss": 0.5}, None, np.array([0.5]), 1j],
    ids=repr,
)
def test_bools_text_and_containers_are_not_numbers(value):
    assert number(value) is None
    assert finite(value) is None


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan"), np.inf])
def test_nan_and_infinities_are_numbers_but_never_finite(value):
    assert number(value) is not None and type(number(value)) is float
    assert finite(value) is None


def test_a_metric_may_be_any_number_nan_included():
    for value in (0.5, 3, np.float16(0.5), np.uint64(2**63), math.nan, -math.inf):
        assert problem({"loss": value}, "loss", "the metric") is None


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("low", "loss='low' (str)"),
        (True, "loss=True (bool)"),
        ([0.1, 0.2], "loss=[0.1, 0.2] (list)"),
        ({"a": 1}, "loss={'a': 1} (dict)"),
        (None, "loss=None (NoneType)"),
        (np.array([0.5]), "loss=array([0.5]) (ndarray)"),
        (np.zeros((2, 2)), "(ndarray)"),
    ],
    ids=repr,
)
def test_what_is_not_a_number_gets_one_line_naming_the_key_and_its_type(value, shown):
    message = problem({"loss": value}, "loss", "the metric")
    assert message.startswith("the metric 'loss' must be a number, but the trial reported loss=")
    assert shown in message
    assert message.endswith("report an int or a float there, and anything else under another name")
    assert "\n" not in message


def test_a_missing_key_gets_one_line_naming_what_was_reported():
    assert problem({"acc": 0.5, "epoch": 1}, "loss", "the metric") == (
        "the trial reported acc, epoch but not the metric 'loss'; call nbtune.report(loss=...)"
    )
    assert "reported nothing but not" in problem({}, "loss", "the metric")


def test_a_time_attr_must_be_a_finite_number():
    assert require({"t": np.int64(3)}, "t", "ASHA's time_attr", finite_only=True) == 3
    with pytest.raises(ValueError, match=r"^ASHA's time_attr 't' must be a finite number, but "):
        require({"t": math.nan}, "t", "ASHA's time_attr", finite_only=True)
    with pytest.raises(ValueError, match=r"^ASHA's time_attr 't' must be a number, but the trial "):
        require({"t": "3"}, "t", "ASHA's time_attr", finite_only=True)


def test_schedulers_read_numpy_values_as_numbers():
    asha = nt.ASHA(max_t=9, time_attr="t")
    asha.setup("loss", "max")
    assert asha.progress({"t": np.int64(4)}) == 4
    assert asha.score({"loss": np.float32(0.5)}) == 0.5
    assert asha.score({"loss": True}) is None
    asha.setup("loss", "min")
    assert asha.score({"loss": np.float64(0.5)}) == -0.5
    assert asha.score({"loss": math.nan}) is None


def test_stop_criteria_take_numpy_thresholds_and_ignore_what_is_not_a_number():
    criteria = StopCriteria({"loss": np.float32(0.5), "t": np.int64(3)}, "loss", "min")
    assert criteria(0, {"loss": np.float32(0.25)})
    assert criteria(0, {"t": np.int8(3)})
    assert not criteria(0, {"loss": "low", "t": True})
    with pytest.raises(TypeError, match=r"stop\['loss'\]=True: the threshold must be a number"):
        StopCriteria({"loss": True}, "loss", "min")


def test_learning_curves_plot_numbers_of_any_type_and_skip_what_cannot_be_drawn():
    trial = nt.Trial(0, {})
    rows = [
        {"trial_id": 0, "training_iteration": i, "loss": value}
        for i, value in enumerate([np.float32(0.5), math.nan, "x", np.float16(0.25)], start=1)
    ]
    (curve,) = history_data([trial], rows, "loss", "min").curves
    assert curve.x == (1, 4) and curve.y == (0.5, 0.25)
    assert all(type(y) is float for y in curve.y)


@pytest.fixture(params=["loky", "thread"])
def executor(request):
    return {"loky": nt.LokyExecutor, "thread": nt.ThreadExecutor}[request.param]()


def test_the_worker_sends_plain_python_whatever_the_trainable_reports(make_tuner, executor, log):
    widths = [*INTEGERS, *FLOATS]
    tuner = make_tuner(
        trainables.every_kind, {"widths": widths}, executor=executor, callbacks=[log]
    )
    tuner.run()
    (event,) = log.of(TrialResult)
    result = event.result
    for name in INTEGERS:
        assert type(result[f"np_{name}"]) is int and result[f"np_{name}"] == 3
    for name in FLOATS:
        assert type(result[f"np_{name}"]) is float and result[f"np_{name}"] == 3.0
    assert type(result["zero_d"]) is float and result["zero_d"] == 0.5
    assert result["np_bool"] is True
    assert type(result["item"]) is int and result["item"] == 7
    assert type(result["ratio"]) is float and result["ratio"] == 0.25
    assert result["nested"] == {"a": [0.5, [1]]} and type(result["nested"]["a"][0]) is float
    assert type(result["text"]) is str
    assert isinstance(result["one_element"], Pickled), "kept pickled: the kernel never unpickles it"
    assert isinstance(result["one_element"].load(), np.ndarray), "recorded as it was reported"


@pytest.fixture(scope="module")
def float_run(tmp_path_factory):
    """The seeded ASHA run of `asha_run` with plain floats and ints: the reference."""
    return asha_run(tmp_path_factory.mktemp("runs"), "float")


def asha_run(storage_path, kind):
    """A seeded ASHA run on one worker, its values reported as `kind`; its total iterations,
    best configuration and best loss."""
    tuner = nt.Tuner(
        trainables.typed_curve,
        {"q": nt.uniform(0.1, 1.0), "type": kind, "max_t": 27},
        metric="loss",
        scheduler=nt.ASHA(max_t=27, time_attr="t"),
        num_samples=12,
        max_concurrent=1,
        seed=5,
        progress=False,
        storage_path=storage_path,
        name=kind,
    )
    tuner.run()
    return len(tuner.history()), tuner.best_config, tuner.best_result["loss"]


@pytest.mark.parametrize("kind", ["float32", "float64"])
def test_numpy_values_tune_exactly_as_plain_floats_do(float_run, runs, kind):
    iterations, best_config, best_loss = float_run
    assert iterations < 12 * 27 / 2, "ASHA stopped most trials early"
    assert asha_run(runs, kind) == (iterations, {**best_config, "type": kind}, best_loss)
