import pytest

from nbtune.schedulers._base import NO_LIMIT
from nbtune.stopping import StopCriteria


def test_iteration_threshold_stops_once_reached():
    stop = StopCriteria({"training_iteration": 3}, "loss", "min")
    assert [stop(0, {"training_iteration": i}) for i in (1, 2, 3, 4)] == [False, False, True, True]


def test_the_tuned_metric_is_reached_in_the_direction_of_mode():
    minimise = StopCriteria({"loss": 0.01}, "loss", "min")
    maximise = StopCriteria({"accuracy": 0.9}, "accuracy", "max")
    assert not minimise(0, {"loss": 0.5})
    assert minimise(0, {"loss": 0.005})
    assert not maximise(0, {"accuracy": 0.5})
    assert maximise(0, {"accuracy": 0.95})


def test_a_function_gets_the_trial_id_and_result():
    stop = StopCriteria(
        lambda trial_id, result: trial_id == 2 and result["loss"] < 1, "loss", "min"
    )
    assert stop(2, {"loss": 0.5})
    assert not stop(1, {"loss": 0.5})


def test_no_criteria_never_stops():
    assert not StopCriteria(None, "loss", "min")(0, {"loss": 0.0, "training_iteration": 10**6})


@pytest.mark.parametrize(
    ("stop", "message"),
    [
        (5, "pass a dict like"),
        ({"training_iteration": "10"}, "the threshold must be a number"),
        ({"loss": True}, "the threshold must be a number"),
    ],
)
def test_bad_criteria_are_refused(stop, message):
    with pytest.raises(TypeError, match=message):
        StopCriteria(stop, "loss", "min")


def test_only_an_iteration_limit_lets_results_go_unchecked():
    assert StopCriteria({"training_iteration": 10}, "loss", "min").free_steps(3) == 6
    assert StopCriteria({"training_iteration": 10}, "loss", "min").free_steps(12) == 0
    assert StopCriteria(None, "loss", "min").free_steps(3) == NO_LIMIT
    assert StopCriteria({"loss": 0.1}, "loss", "min").free_steps(3) == 0
    assert StopCriteria(lambda trial_id, result: False, "loss", "min").free_steps(3) == 0


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e309])
def test_a_threshold_that_is_not_finite_is_refused_in_one_line(value):
    with pytest.raises(ValueError) as refused:
        StopCriteria({"training_iteration": value}, "loss", "min")
    assert str(refused.value) == (
        f"stop['training_iteration']={value!r}: the threshold must be a finite number; leave "
        "the key out to have no limit"
    )
