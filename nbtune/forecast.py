"""Forecasts: where an unfinished trial's learning curve will end, and when the run will.

    a trial's curve --+--> power law    a + b * t**-c     --+
                      +--> exponential  a + b * exp(-c t) --+-- weighted by fit (Akaike) and by
                      +--> log-linear   a + b * log t     --+   error on the curve's last third
                                                                          |
    finished trials' curves --> "peers": their value at the horizon over   |
                                their value at the trial's step ----------+--> blend, weighted
                                their errors, each cut at that step ------+    by those errors
                                                                          |
                                              predicted, and an 80 % interval, at the horizon

Each family is fitted by least squares for a grid of its rate c (for a given c it is linear in
a and b, solved in closed form), as numpy alone can do it quickly and without failing. The
families are weighted by their Akaike weights (how much better each fits, in units of the
noise) times, as Domhan et al. (2015) weigh theirs, how well each, fitted without the curve's
last third, predicts it. Finished trials inform the forecast twice: they give a
second predictor (their typical final-to-now ratio, the only one for a curve of a few points),
and cut at the trial's step they measure the error of both predictors, which sets their weights,
corrects a systematic bias and sizes the interval. Without finished trials the interval comes
from the fit's residuals, its error on its own last points carried to the horizon, and the
spread between the families, plus a share of the change forecast (no real curve is exactly
one of the families).

`run_eta_s` turns seconds per iteration, the trials still to run and the iterations each is
expected to take (a scheduler's rungs cut most trials short) into the seconds the run has left.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbtune.horizon import ran_in_full, scheduler_max_t
from nbtune.metrics import finite
from nbtune.trial import Trial, TrialStatus

Z80 = 1.2815515655446004
"""The half-width of a central 80 % interval of a normal distribution, in standard deviations."""
MIN_FIT_POINTS = 4
"""A curve needs this many points for its own three-parameter fits; a shorter one is forecast
from the finished trials' ratios alone (or, without any, held at its latest values)."""
MIN_CALIBRATION = 3
"""Finished curves needed to measure the predictors' errors on them."""
MAX_REFERENCES = 24
"""The finished curves (the latest ones) that inform a forecast: enough for a median and an
error, few enough that a forecast takes milliseconds."""
_POWER_RATES = np.logspace(-2, math.log10(4.0), 40)
_EXP_RATES = np.logspace(-1.5, 1.5, 40)
"""Exponential rates in units of 1 / (the curve's last iteration)."""
_PARAMETERS = np.array([3, 3, 2])
"""Each family's parameters (power law, exponential, log-linear), which Akaike's weights count."""
_SHAPE_ERROR = 0.3
"""A curve is none of the three families exactly: its forecast change from now to the horizon
is taken to be this uncertain (a share of it), on top of what its own residuals say."""
_LEVEL_ERROR = 0.03
"""Without finished trials to measure it, a real curve's end is taken to be at least this
uncertain (a share of its level): noise and drift that no family fitted to a third of the
curve can see (scikit-learn's log loss reaches 4 % median error)."""
CALIBRATION_GROWTH = 1.1
"""Past step 10, the finished curves are cut at steps this far apart to calibrate a forecast
(`Forecaster`): the errors at step 40 and 43 differ little, and each calibration fits every
finished curve."""
_TINY = 1e-12


@dataclass(frozen=True)
class CurveForecast:
    """A curve's value forecast at `horizon`, and an 80 % interval (NaN where nothing can say
    how wide: a single point and no finished trial)."""

    predicted: float
    low: float
    high: float
    horizon: int


# ----- fitting one curve ----------------------------------------------------------------------


def _families(t: np.ndarray, last: float) -> list[np.ndarray]:
    """Each family's shape f(t) for every rate of its grid: rows of a (rates, len(t)) array."""
    return [
        t[None, :] ** -_POWER_RATES[:, None],
        np.exp(-(_EXP_RATES[:, None] / last) * t[None, :]),
        np.log(t)[None, :],
    ]


def _fit(
    t: np.ndarray, y: np.ndarray, at: np.ndarray, last: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each family fitted to (t, y) by least squares, its best rate chosen: the fitted values
    at `at` (a (families, len(at)) array) and each family's residual sum of squares."""
    predictions, sums = [], []
    level = y - y.mean()
    for shape, shape_at in zip(_families(t, last), _families(at, last), strict=True):
        mean = shape.mean(axis=1)
        centred = shape - mean[:, None]
        spread = (centred**2).sum(axis=1)
        moment = (centred * level).sum(axis=1)
        slope = np.where(spread > _TINY, moment / np.maximum(spread, _TINY), 0.0)
        sse = (level**2).sum() - slope * moment
        best = int(np.argmin(sse))
        sums.append(max(float(sse[best]), 0.0))
        predictions.append(y.mean() + slope[best] * (shape_at[best] - mean[best]))
    return np.array(predictions), np.array(sums)


@dataclass(frozen=True)
class _OwnFit:
    predicted: float
    sigma: float
    """The fit's own uncertainty at the horizon: noise, error carried from its last points,
    and the families' disagreement."""
    now: float
    """The fitted value at the curve's last point."""


def _own_fit(t: np.ndarray, y: np.ndarray, horizon: float) -> _OwnFit:
    """The weighted ensemble of the three families for a curve of `MIN_FIT_POINTS` or more.

    A family's weight is its Akaike weight (how much better it fits the whole curve, in units
    of the noise, its parameters counted) times the inverse square of its error on the
    curve's last third when fitted to the rest (how well it extrapolates this curve).
    """
    n, last = len(t), float(t[-1])
    fitted, sums = _fit(t, y, np.array([last, horizon]), last)
    noise_ms = float(sums.min()) / max(n - 3, 1)
    scale = _TINY * (1 + float(np.abs(y).mean())) ** 2
    akaike = np.exp(-((sums - sums.min()) / (2 * (noise_ms + scale)) + _PARAMETERS - 2))
    held = max(1, n // 3)
    train = n - held
    if train >= 3:
        early, _ = _fit(t[:train], y[:train], t[train:], float(t[train - 1]))
        errors = np.sqrt(((early - y[None, train:]) ** 2).mean(axis=1))
        reach = math.log(horizon / last) / max(math.log(last / t[train - 1]), _TINY)
    else:
        errors, reach = np.zeros(len(fitted)), 0.0
    weights = akaike / (errors**2 + 0.25 * noise_ms + scale)
    weights /= weights.sum()
    predicted = float(weights @ fitted[:, 1])
    spread = math.sqrt(float(weights @ (fitted[:, 1] - predicted) ** 2))
    carried = float(weights @ errors) * max(reach, 0.0)
    now = float(weights @ fitted[:, 0])
    shape = _SHAPE_ERROR * (predicted - now)
    return _OwnFit(
        predicted=predicted,
        sigma=math.sqrt(
            noise_ms + carried**2 + spread**2 + shape**2 + (_LEVEL_ERROR * predicted) ** 2
        ),
        now=now,
    )


# ----- what finished trials say ---------------------------------------------------------------


def _trailing(y: np.ndarray, n: int) -> float:
    """The mean of a curve's last (up to) three values up to its `n`th point: its level there
    with some of the noise averaged out (the same for the trial and its peers)."""
    return float(y[max(0, n - 3) : n].mean())


def _ratio_space(values: Sequence[float]) -> bool:
    """Whether the peers' change is measured as a ratio (every value of one sign, away from 0)
    rather than as a difference."""
    array = np.asarray(values)
    return bool(np.all(array > _TINY) or np.all(array < -_TINY))


def _peer_predict(level: float, starts: np.ndarray, ends: np.ndarray) -> float:
    """`level` carried to the horizon as the peers' curves went: by their median ratio of end
    to start (or median difference when their values change sign)."""
    if _ratio_space([level, *starts, *ends]):
        return level * float(np.exp(np.median(np.log(ends / starts))))
    return level + float(np.median(ends - starts))


@dataclass(frozen=True)
class _Calibration:
    """What the finished curves, cut at the trial's step, say of the predictors."""

    own_weight: float
    """The share of the own fit in the blend (the rest: the peers' ratio)."""
    bias: float
    """The blend's median error on them, in units of each curve's scale."""
    sigma: float
    """The blend's error spread, in the same units."""


def _scale(y: np.ndarray) -> float:
    """A curve's scale, which makes errors of curves of different sizes comparable."""
    return float(abs(y[-min(3, len(y)) :].mean()) + y.std()) + _TINY


def _calibrate(
    references: Sequence[np.ndarray], n: int, horizon: int, ratio: bool
) -> _Calibration | None:
    """Forecast each finished curve (values at iterations 1, 2, ...) from its first `n` points,
    with the peers' ratio left out of its own (leave one out), and measure the errors."""
    if len(references) < MIN_CALIBRATION:
        return None
    starts = np.array([_trailing(y, n) for y in references])
    ends = np.array([y[horizon - 1] for y in references])
    own, peer, scales = [], [], []
    for index, y in enumerate(references):
        others = np.arange(len(references)) != index
        level = starts[index]
        if ratio:
            peer.append(level * float(np.exp(np.median(np.log(ends[others] / starts[others])))))
        else:
            peer.append(level + float(np.median(ends[others] - starts[others])))
        if n >= MIN_FIT_POINTS:
            t = np.arange(1.0, n + 1)
            own.append(_own_fit(t, y[:n], float(horizon)).predicted)
        scales.append(_scale(y[:n]))
    scale = np.array(scales)
    peer_errors = (np.array(peer) - ends) / scale
    if own:
        own_errors = (np.array(own) - ends) / scale
        own_ms, peer_ms = float((own_errors**2).mean()), float((peer_errors**2).mean())
        weight = peer_ms / (own_ms + peer_ms + _TINY)
        errors = weight * own_errors + (1 - weight) * peer_errors
    else:
        weight, errors = 0.0, peer_errors
    bias = float(np.median(errors))
    count = len(errors)
    sigma = float(np.sqrt(((errors - bias) ** 2).sum() / max(count - 1, 1)))
    return _Calibration(weight, bias, sigma * math.sqrt(1 + 1 / count))


# ----- one curve ------------------------------------------------------------------------------


class Forecaster:
    """Forecasts curves at one horizon, informed by the same finished curves; what it learns
    from those at each step (the calibration) is kept, so that the curves of a run, forecast
    again at every redraw of a dashboard, cost a fit each.

    Args:
        horizon: the iteration to forecast.
        references: finished trials' curves of the same metric (values at iterations 1, 2,
            ...); those shorter than `horizon` or with a value that is not finite before it
            are left out, and of the rest the last `MAX_REFERENCES`.
    """

    def __init__(self, horizon: int, references: Sequence[Sequence[float]] = ()) -> None:
        self.horizon = max(int(horizon), 1)
        usable = []
        for curve in references:
            y = np.asarray(curve, dtype=float)
            if len(y) >= self.horizon and np.isfinite(y[: self.horizon]).all():
                usable.append(y[: self.horizon])
        self.references = usable[-MAX_REFERENCES:]
        self._calibrations: dict[tuple[int, bool], _Calibration | None] = {}

    def _calibration(self, n: int, ratio: bool) -> _Calibration | None:
        """The calibration at step `n`, measured at the step of `CALIBRATION_GROWTH` at or
        below it: curves forecast every few results share it (a dashboard redraws often)."""
        step = _calibration_step(n)
        key = (step, ratio)
        if key not in self._calibrations:
            self._calibrations[key] = _calibrate(self.references, step, self.horizon, ratio)
        return self._calibrations[key]

    def __call__(self, values: Sequence[float]) -> CurveForecast:
        """Forecast a curve (its values at iterations 1, 2, ..., n; NaN and infinities are left
        out of the fits) at the horizon, or at n for a curve already past it. NaN throughout
        for a curve with no finite value."""
        y_all = np.asarray(values, dtype=float)
        n = len(y_all)
        horizon = max(self.horizon, n, 1)
        finite_points = np.isfinite(y_all)
        t, y = np.arange(1.0, n + 1)[finite_points], y_all[finite_points]
        if not len(y):
            return CurveForecast(math.nan, math.nan, math.nan, horizon)
        own = _own_fit(t, y, float(horizon)) if len(y) >= MIN_FIT_POINTS else None
        if self.references and n < self.horizon:
            return self._with_peers(t, y, n, own)
        if own is not None:
            return _interval(own.predicted, own.sigma, horizon)
        if len(y) == 1 or horizon == t[-1]:
            return CurveForecast(float(y[-1]), math.nan, math.nan, horizon)
        # Two or three points and no finished trial: the log-linear trend, held to half its
        # reach, and as uncertain as the change it forecasts.
        level = _trailing(y, len(y))
        slope = (y[-1] - y[0]) / math.log(t[-1] / t[0])
        predicted = level + 0.5 * slope * math.log(horizon / t[-1])
        return _interval(predicted, abs(predicted - level) + 0.1 * _scale(y), horizon)

    def _with_peers(
        self, t: np.ndarray, y: np.ndarray, n: int, own: _OwnFit | None
    ) -> CurveForecast:
        """The own fit blended with the peers' ratio, as their errors on the finished curves
        say."""
        horizon = self.horizon
        level, scale = _trailing(y, len(y)), _scale(y)
        starts = np.array([_trailing(r, n) for r in self.references])
        ends = np.array([r[horizon - 1] for r in self.references])
        ratio = _ratio_space([level, *starts, *ends])
        peer = _peer_predict(level, starts, ends)
        calibration = self._calibration(n, ratio)
        if calibration is not None:
            weight = calibration.own_weight if own is not None else 0.0
            blend = weight * (own.predicted if own is not None else 0.0) + (1 - weight) * peer
            sigma = calibration.sigma * scale
            if own is not None:
                sigma = math.hypot(sigma, weight * (own.predicted - peer) / 2)
            return _interval(blend - calibration.bias * scale, sigma, horizon)
        if own is None:
            spread = float(np.abs(ends / starts - 1).max()) if ratio else 0.0
            return _interval(peer, abs(peer - level) + spread * abs(level), horizon)
        predicted = (own.predicted + peer) / 2
        return _interval(predicted, math.hypot(own.sigma, (own.predicted - peer) / 2), horizon)


def _calibration_step(n: int) -> int:
    """`n` up to 10, then the step of a geometric grid 10 % apart at or below it."""
    if n <= 10:
        return n
    return max(
        10, round(10 * CALIBRATION_GROWTH ** math.floor(math.log(n / 10, CALIBRATION_GROWTH)))
    )


def forecast_curve(
    values: Sequence[float], horizon: int, references: Sequence[Sequence[float]] = ()
) -> CurveForecast:
    """Forecast a curve's value at iteration `horizon` (see `Forecaster`).

    Args:
        values: the curve so far, its values at iterations 1, 2, ..., n.
        horizon: the iteration to forecast (a curve already past it is forecast at n).
        references: finished trials' curves of the same metric.
    """
    return Forecaster(horizon, references)(values)


def _interval(predicted: float, sigma: float, horizon: int) -> CurveForecast:
    half = Z80 * sigma
    return CurveForecast(predicted, predicted - half, predicted + half, horizon)


# ----- a run's trials -------------------------------------------------------------------------


def curves_of(rows: Sequence[Mapping[str, Any]], metric: str) -> dict[int, list[float]]:
    """Each trial's values of `metric` by iteration, 1, 2, ...: NaN where a result lacks a
    finite number for it."""
    curves: dict[int, list[float]] = {}
    for row in rows:
        curve = curves.setdefault(row["trial_id"], [])
        iteration = row.get("training_iteration", len(curve) + 1)
        while len(curve) < iteration - 1:
            curve.append(math.nan)
        value = finite(row.get(metric))
        curve.append(math.nan if value is None else value)
    return curves


UNFINISHED = (TrialStatus.RUNNING, TrialStatus.PAUSED, TrialStatus.PENDING)


def references_of(trials: Sequence[Trial], curves: Mapping[int, list[float]]) -> list[list[float]]:
    """The curves of the trials that ran in full, by trial id: what a forecast learns from."""
    return [curves[t.trial_id] for t in trials if ran_in_full(t) and t.trial_id in curves]


def forecast_frame(
    trials: Sequence[Trial],
    rows: Sequence[Mapping[str, Any]],
    metric: str,
    horizon: int | None,
) -> Any:
    """One row per unfinished trial that has results, indexed by `trial_id`: `predicted` (the
    metric at `horizon`), `low` and `high` (an 80 % interval), `horizon` (the one given, or
    the trial's iteration if it is already past it; with none given, its own iteration)."""
    import pandas as pd  # imported here so that `import nbtune` stays light

    curves = curves_of(rows, metric)
    forecaster = Forecaster(horizon or 1, references_of(trials, curves))
    records = []
    for trial in trials:
        curve = curves.get(trial.trial_id)
        if trial.status not in UNFINISHED or not curve:
            continue
        result = forecaster(curve)
        records.append((trial.trial_id, result.predicted, result.low, result.high, result.horizon))
    frame = pd.DataFrame.from_records(
        records, columns=["trial_id", "predicted", "low", "high", "horizon"]
    )
    frame = frame.astype(
        {"trial_id": "int64", "predicted": "float64", "low": "float64", "high": "float64"}
    )
    return frame.astype({"horizon": "int64"}).set_index("trial_id")


# ----- when the run ends ----------------------------------------------------------------------


def expected_length(scheduler: Any, horizon: int, reached: int = 0) -> float:
    """The iterations a trial is expected to run in all, given it has reached `reached`.

    A scheduler with rungs (ASHA, HyperBand: its `rungs` or `bracket_shape`) lets a trial past
    rung k with probability reduction_factor**-(k + 1), the first rung being reached by all;
    any other runs its trials to `horizon`.
    """
    milestones = _rungs(scheduler, horizon)
    if not milestones:
        return float(max(horizon, reached))
    factor = float(scheduler.reduction_factor)
    expected, alive, start = 0.0, 1.0, 0.0
    ends = [*milestones, float(horizon)]
    for index, end in enumerate(ends):
        if end <= reached:
            start = end
            continue
        expected += alive * (end - max(start, reached))
        start = end
        if index < len(milestones):
            alive /= factor
    return reached + expected


def _rungs(scheduler: Any, horizon: int) -> list[float]:
    """The rungs below `horizon` of the scheduler's most common bracket, in iterations."""
    if scheduler_max_t(scheduler) is None or not hasattr(scheduler, "reduction_factor"):
        return []
    rungs = getattr(scheduler, "rungs", None)
    if rungs:
        milestones = [float(rung.milestone) for rung in rungs[0]]
    elif hasattr(scheduler, "bracket_shape"):
        _, budgets = scheduler.bracket_shape(scheduler.s_max)
        milestones = [float(budget) for budget in budgets]
    else:
        return []
    return sorted(m for m in milestones if m < horizon)


def run_eta_s(
    trials: Sequence[Trial],
    rows: Sequence[Mapping[str, Any]],
    planned_trials: int | None,
    max_concurrent: int,
    horizon: int | None,
    scheduler: Any = None,
    now: float | None = None,
) -> float | None:
    """Seconds until the run is expected to end; None before any result.

    Seconds per iteration are measured over every trial's results (its running time over its
    iterations, start-up included). Each unfinished trial is expected to run to its expected
    length (`expected_length`, from where it is), each trial still to come from scratch; the
    work is dealt to `max_concurrent` workers, the running trials first, in a list schedule,
    and the ETA is when the last one ends.

    Args:
        planned_trials: how many trials the searcher plans (None: only the trials there are).
        horizon: where a trial ends (`horizon_of`); None: the longest trial so far.
        now: the time (epoch seconds) it is, to count the part of an iteration already run.
    """
    if not rows:
        return None
    if horizon is None:
        horizon = max((trial.iteration for trial in trials), default=1)
    spent = sum(finite(t.last_result.get("time_total_s")) or 0.0 for t in trials)
    done = sum(trial.iteration for trial in trials)
    if done <= 0:
        return None
    per_iteration = spent / done
    running, waiting = [], []
    for trial in trials:
        if trial.status.is_finished:
            continue
        left = expected_length(scheduler, horizon, trial.iteration) - trial.iteration
        seconds = max(left, 0.0) * per_iteration
        if trial.status is TrialStatus.RUNNING:
            stamp = finite(trial.last_result.get("timestamp"))
            if now is not None and stamp is not None:
                seconds = max(seconds - min(now - stamp, per_iteration), 0.0)
            running.append(seconds)
        else:
            waiting.append(seconds)
    created = sum(trial.origin == "searcher" for trial in trials)
    to_come = max(0, (planned_trials or 0) - created)
    waiting += [expected_length(scheduler, horizon) * per_iteration] * to_come
    return _makespan(running, waiting, max(1, max_concurrent))


def _makespan(running: list[float], waiting: list[float], workers: int) -> float:
    """When the last job ends: the running ones hold workers, the waiting ones take the next
    free worker in order."""
    busy = sorted(running)[-workers:] if len(running) > workers else list(running)
    heap = busy + [0.0] * max(0, workers - len(busy))
    heapq.heapify(heap)
    for seconds in waiting:
        heapq.heappush(heap, heapq.heappop(heap) + seconds)
    return max(heap, default=0.0)
