"""Several objectives: `metric=[...]`, `mode=[...]`, the Pareto front in `best_trials` and the
`pareto` column, kept on disk; Optuna's multi-objective samplers; schedulers with a metric of
their own."""

from __future__ import annotations

import io
import math
import random

import pytest

import nbtune as nt
from nbtune.events import ExperimentDone, TrialResult
from nbtune.objectives import non_dominated
from nbtune.progress import ProgressLine
from nbtune.stopping import StopCriteria

METRICS = ["loss", "latency_ms"]

POINTS = [
    (0.0, 1.0),
    (0.25, 0.5625),
    (0.5, 0.25),
    (0.75, 0.0625),
    (1.0, 0.0),
    (0.5, 0.7),  # dominated by point 2
    (0.9, 0.9),  # dominated by points 2 and 3
    (math.nan, 0.0),  # beats every latency, but a NaN loss is never on the front
    (0.1, math.inf),
]
FRONT = [0, 1, 2, 3, 4]


def points_trainable(iterations: int = 2):
    """A trainable that reports `POINTS[config["i"]]` (the same values each iteration); made
    here, so that a worker process gets it by value."""

    def train(config):
        loss, latency = POINTS[config["i"]]
        for _ in range(iterations):
            nt.report(loss=loss, latency_ms=latency)

    return train


def brute_force_front(frame):
    """The front by definition, from a trials frame: every pair compared, NaN/inf left out."""
    points = {
        row.trial_id: (row.loss, row.latency_ms)
        for row in frame.itertuples()
        if math.isfinite(row.loss) and math.isfinite(row.latency_ms)
    }

    def dominated(p):
        return any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in points.values())

    return sorted(trial_id for trial_id, p in points.items() if not dominated(p))


@pytest.mark.parametrize("executor", [nt.ThreadExecutor, nt.LokyExecutor])
def test_best_trials_is_the_known_front_live_loaded_and_restored(make_tuner, executor):
    train = points_trainable()
    tuner = make_tuner(
        train,
        {"i": nt.grid(list(range(len(POINTS))))},
        metric=METRICS,
        mode=["min", "min"],
        executor=executor(),
    )
    tuner.run()
    assert [trial.trial_id for trial in tuner.best_trials] == FRONT
    frame = tuner.dataframe()
    assert list(frame["pareto"]) == [i in FRONT for i in range(len(POINTS))]
    assert frame["pareto"].dtype == bool
    assert {"loss", "latency_ms"} <= set(frame.columns)
    assert not any(column.startswith("best_") for column in frame.columns)

    loaded = nt.load(tuner.path)
    assert (loaded.metric, loaded.mode) == (METRICS, ["min", "min"])
    assert [trial.trial_id for trial in loaded.best_trials] == FRONT
    assert list(loaded.dataframe()["pareto"]) == list(frame["pareto"])

    restored = nt.Tuner.restore(tuner.path, train, num_samples=2, progress=False)
    assert (restored.metric, restored.mode) == (METRICS, ["min", "min"])
    restored.run(display=False)
    again = [trial.trial_id + len(POINTS) for trial in tuner.best_trials]
    assert [trial.trial_id for trial in restored.best_trials] == FRONT + again, (
        "the same values again are on the front too"
    )


def test_best_trial_and_friends_point_at_best_trials(make_tuner):
    tuner = make_tuner(
        points_trainable(1),
        {"i": nt.grid([0, 5])},
        metric=METRICS,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    for attribute in ("best_trial", "best_config", "best_result", "best_checkpoint"):
        with pytest.raises(ValueError, match="several metrics .* use best_trials") as raised:
            getattr(tuner, attribute)
        assert "\n" not in str(raised.value)
    assert tuner.mode == ["min", "min"], "one mode applies to every metric"


def test_one_metric_keeps_its_api_and_its_front_is_its_best(make_tuner):
    tuner = make_tuner(
        points_trainable(1),
        {"i": nt.grid([0, 2, 7])},
        metric="latency_ms",
        mode="max",
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    assert tuner.best_trial.trial_id == 0
    assert [trial.trial_id for trial in tuner.best_trials] == [0]
    assert "pareto" not in tuner.dataframe().columns
    assert "best_latency_ms" in tuner.dataframe().columns


def test_a_trainable_returns_a_tuple_of_the_metrics_but_not_one_number(make_tuner):
    def returns(config):
        return (config["x"], 1 - config["x"]) if config["x"] else 0.5

    tuner = make_tuner(
        returns, {"x": nt.grid([0, 0.25])}, metric=METRICS, executor=nt.ThreadExecutor()
    )
    tuner.run()
    failed, scored = tuner.trials
    assert scored.last_result["loss"] == 0.25 and scored.last_result["latency_ms"] == 0.75
    assert failed.status is nt.TrialStatus.ERROR
    assert "tunes 2 metrics: return a dict of them" in failed.error


def test_asha_with_a_metric_of_its_own_stops_on_loss_while_selecting_on_both(make_tuner):
    def train(config):
        for step in range(1, 10):
            nt.report(loss=config["x"] + 1 / step, latency_ms=(1 - config["x"]) ** 2)

    scheduler = nt.ASHA(max_t=9, grace_period=1, reduction_factor=3, metric="loss")
    tuner = make_tuner(
        train,
        {"x": nt.grid([0.1 * i for i in range(1, 10)])},
        metric=METRICS,
        mode=["min", "min"],
        scheduler=scheduler,
        max_concurrent=1,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    assert (scheduler.metric, scheduler.mode) == ("loss", "min"), "its mode is the Tuner's"
    frame = tuner.dataframe()
    assert frame["training_iteration"].max() == 9
    assert frame["training_iteration"].min() < 9, "ASHA stopped some trials early on loss"
    assert [trial.trial_id for trial in tuner.best_trials] == brute_force_front(frame)
    assert list(frame.loc[frame["pareto"], "trial_id"]) == brute_force_front(frame)


def test_a_scheduler_s_own_metric_must_be_reported(make_tuner):
    def train(config):
        nt.report(loss=1.0, latency_ms=2.0)

    tuner = make_tuner(
        train,
        {"x": 1},
        metric=METRICS,
        scheduler=nt.MedianStopping(grace_period=1, metric="accuracy", mode="max"),
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    error = tuner.trials[0].error
    assert "MedianStopping's metric 'accuracy'" in error and "nbtune.report(accuracy=...)" in error


SCHEDULERS = {
    "ASHA": lambda **own: nt.ASHA(max_t=4, **own),
    "HyperBand": lambda **own: nt.HyperBand(max_t=4, **own),
    "MedianStopping": lambda **own: nt.MedianStopping(grace_period=1, **own),
    "PBT": lambda **own: nt.PBT(1, {"x": nt.uniform(0, 1)}, **own),
}


@pytest.mark.parametrize("name", SCHEDULERS)
def test_a_scheduler_that_compares_trials_needs_one_metric(make_tuner, name):
    with pytest.raises(ValueError) as raised:
        make_tuner(
            points_trainable(),
            {"x": nt.uniform(0, 1)},
            metric=["loss", "latency_ms"],
            mode=["max", "min"],
            scheduler=SCHEDULERS[name](),
        )
    assert str(raised.value) == (f"{name} needs one metric: pass {name}(metric='loss', mode='max')")
    tuner = make_tuner(
        points_trainable(),
        {"x": nt.uniform(0, 1)},
        metric=METRICS,
        scheduler=SCHEDULERS[name](metric="latency_ms", mode="max"),
    )
    assert (tuner.scheduler.metric, tuner.scheduler.mode) == ("latency_ms", "max")


def test_a_scheduler_s_own_metric_overrides_a_single_tuned_metric(make_tuner):
    own = nt.ASHA(max_t=3, metric="acc", mode="max")
    tuner = make_tuner(points_trainable(), {"x": 1}, metric="loss", scheduler=own)
    assert (tuner.scheduler.metric, tuner.scheduler.mode) == ("acc", "max")
    assert tuner.metric == "loss"
    with pytest.raises(ValueError) as raised:
        make_tuner(points_trainable(), {"x": 1}, metric="loss", scheduler=nt.ASHA(3, metric="acc"))
    assert str(raised.value) == (
        "ASHA(metric='acc'): pass mode='min' or 'max' too; the Tuner does not tune 'acc', so its "
        "mode is not known"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"mode": ["min"]},
            "mode=['min']: pass one mode per metric (2 for ['loss', 'latency_ms'])",
        ),
        ({"mode": ["min", "most"]}, "mode=['min', 'most']: use 'min' or 'max'"),
        ({"metric": ["loss", "loss"]}, "metric=['loss', 'loss']: 'loss' is named twice"),
        ({"metric": ["loss", 3]}, "metric=['loss', 3]: pass the name of a reported value"),
        ({"metric": []}, "metric=[]: name at least one reported value"),
    ],
)
def test_bad_metrics_and_modes_are_refused_in_one_line(make_tuner, options, message):
    with pytest.raises((ValueError, TypeError)) as raised:
        make_tuner(points_trainable(), {"x": 1}, **{"metric": METRICS, **options})
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_a_scheduler_s_mode_needs_its_metric():
    with pytest.raises(ValueError, match=r"^ASHA\(mode='max'\): pass metric=\.\.\. with it$"):
        nt.ASHA(max_t=3, mode="max")
    with pytest.raises(ValueError, match=r"^ASHA\(mode='best'\): use 'min' or 'max'$"):
        nt.ASHA(max_t=3, metric="loss", mode="best")


def test_a_list_of_one_metric_is_that_metric(make_tuner):
    tuner = make_tuner(points_trainable(), {"x": 1}, metric=["loss"], mode=["max"])
    assert (tuner.metric, tuner.mode) == ("loss", "max")


def test_stop_thresholds_follow_each_metric_s_mode():
    stop = StopCriteria({"loss": 0.5, "accuracy": 0.9}, ["loss", "accuracy"], ["min", "max"])
    assert stop(0, {"loss": 0.4, "accuracy": 0.1})
    assert stop(0, {"loss": 0.9, "accuracy": 0.95})
    assert not stop(0, {"loss": 0.6, "accuracy": 0.5})


def test_the_front_takes_each_mode_and_keeps_ties():
    points = [(1.0, 1.0), (1.0, 1.0), (2.0, 0.5), (0.5, 0.5), (3.0, 3.0)]
    assert non_dominated(points, ["min", "min"]) == [False, False, False, True, False]
    assert non_dominated(points, ["max", "max"]) == [False, False, False, False, True]
    assert non_dominated(points, ["min", "max"]) == [True, True, False, True, True]
    assert non_dominated(points[:2], ["min", "min"]) == [True, True], "equal points tie"


@pytest.mark.parametrize("metrics", [1, 2, 3, 4])
def test_the_front_agrees_with_comparing_every_pair(metrics):
    rng = random.Random(metrics)
    for _ in range(50):
        points = [tuple(rng.randint(0, 5) for _ in range(metrics)) for _ in range(30)]
        modes = [rng.choice(["min", "max"]) for _ in range(metrics)]
        signed = [
            tuple(v if m == "min" else -v for v, m in zip(p, modes, strict=True)) for p in points
        ]

        def dominated(p, signed=signed):
            return any(all(a <= b for a, b in zip(q, p, strict=True)) and q != p for q in signed)

        assert non_dominated(points, modes) == [not dominated(p) for p in signed]


@pytest.mark.parametrize("sampler", ["default", "NSGAIISampler"])
def test_optuna_search_learns_both_values_and_its_front_is_ours(make_tuner, sampler):
    optuna = pytest.importorskip("optuna")

    def train(config):
        x, y = config["x"], config["y"]
        nt.report(loss=x**2 + y**2, accuracy=1 - (x - 1) ** 2 - y**2)

    chosen = None if sampler == "default" else optuna.samplers.NSGAIISampler(seed=0)
    searcher = nt.OptunaSearch(sampler=chosen)
    tuner = make_tuner(
        train,
        {"x": nt.uniform(-1, 2), "y": nt.uniform(-1, 1)},
        metric=["loss", "accuracy"],
        mode=["min", "max"],
        num_samples=16,
        searcher=searcher,
        seed=0,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    study = searcher.study
    assert study.directions == [
        optuna.study.StudyDirection.MINIMIZE,
        optuna.study.StudyDirection.MAXIMIZE,
    ]
    expected = optuna.samplers.TPESampler if chosen is None else optuna.samplers.NSGAIISampler
    assert type(study.sampler) is expected
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(finished) == 16
    for frozen in finished:
        trial = tuner.get_trial(frozen.user_attrs["nbtune_trial_id"])
        assert frozen.values == [trial.last_result["loss"], trial.last_result["accuracy"]]
    ours = [trial.trial_id for trial in tuner.best_trials]
    theirs = sorted(frozen.user_attrs["nbtune_trial_id"] for frozen in study.best_trials)
    assert ours == theirs and len(ours) >= 2


def test_a_repeater_tells_optuna_the_mean_of_each_metric(make_tuner):
    pytest.importorskip("optuna")

    def train(config):
        noise = 0.1 * config["__trial_index__"]
        nt.report(loss=config["x"] + noise, latency_ms=1 - config["x"] + noise)

    inner = nt.OptunaSearch()
    tuner = make_tuner(
        train,
        {"x": nt.uniform(0, 1)},
        metric=METRICS,
        num_samples=3,
        searcher=nt.Repeater(inner, 2),
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    told = sorted(tuple(frozen.values) for frozen in inner.study.trials)
    pairs = [tuner.trials[i : i + 2] for i in range(0, 6, 2)]
    means = sorted(
        tuple(sum(t.last_result[name] for t in pair) / 2 for name in METRICS) for pair in pairs
    )
    assert [value for pair in told for value in pair] == pytest.approx(
        [value for pair in means for value in pair]
    )


def test_the_progress_line_counts_the_front():
    stream = io.StringIO()
    line = ProgressLine("demo", METRICS, ["min", "min"], stream=stream, interval_s=3600)
    for trial_id, (loss, latency) in enumerate(POINTS):
        line(TrialResult(trial_id, {"loss": loss, "latency_ms": latency}))
    line(ExperimentDone("finished"))
    assert "Pareto front 5 of 7 trials" in stream.getvalue(), "NaN and inf are not counted"
    assert "best" not in stream.getvalue()
