"""What each chart shows, computed from trials and results alone: no plotly, no widgets.

The live dashboard and the `nbtune.plot_*` functions draw the same data, and tests check these
small records instead of pixels.
"""

from __future__ import annotations

import bisect
import html
import math
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nbtune.forecast import UNFINISHED, Forecaster, references_of
from nbtune.horizon import horizon_of
from nbtune.metrics import finite, format_value, number
from nbtune.objectives import names
from nbtune.space import IntRange, LogUniform, SearchSpace
from nbtune.trial import RESULT_KEYS, Trial, TrialStatus, better_of

MAX_POINTS_PER_CURVE = 200
FEATURED_CURVES = 10
"""With more curves than this, only the best this many are drawn in colour, the rest faint."""
MIN_IMPORTANCE_TRIALS = 5
"""Fewer trials with a value of the metric than this tell nothing about importance."""
TRIAL_COLORS = (
    "#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a",
    "#19d3f3", "#ff6692", "#b6e880", "#ff97ff", "#fecb52",
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7b4173",
)  # fmt: skip
"""Each trial's own colour, `TRIAL_COLORS[trial_id % 20]`: the same in every chart and redraw,
and readable on a light and a dark background."""
_CONFIG_CHARS = 120
LABEL_CHARS = 48
"""Characters of a category shown as a tick of a chart's axis."""
"""A hover's configuration is cut to about this many characters."""


@dataclass(frozen=True)
class Curve:
    """One trial's metric against its iteration and time (thinned to at most
    `MAX_POINTS_PER_CURVE` points).

    Attributes:
        state: "pending", "running", "paused", "completed", "stopped" (by the user, a
            scheduler or a stop criterion) or "error": what its line style shows.
        seconds: each point's time, in seconds since the run's first result.
        label: hover text (HTML-escaped): the trial, its state and its shortened config.
        color: the trial's own colour (`TRIAL_COLORS`).
        featured: drawn in colour (one of the best `FEATURED_CURVES`, or there are no more
            curves than that); the others are drawn faint.
        feasible: its last result satisfies the run's constraints (drawn faded otherwise).
    """

    trial_id: int
    status: str
    x: tuple[int, ...]
    y: tuple[float, ...]
    label: str
    seconds: tuple[float, ...]
    state: str
    color: str
    featured: bool
    feasible: bool = True


@dataclass(frozen=True)
class ForecastLine:
    """Where an unfinished trial's curve is heading (`nbtune.forecast`): a faint dotted
    extension from its last point to the forecast at `horizon`, bending as a log-linear curve.

    Attributes:
        x: iterations, from the curve's last one to the horizon.
        y: the values there.
        low: the 80 % interval's low end at the horizon.
        high: its high end.
    """

    trial_id: int
    x: tuple[float, ...]
    y: tuple[float, ...]
    low: float
    high: float
    color: str

    @property
    def horizon(self) -> float:
        return self.x[-1]

    @property
    def predicted(self) -> float:
        return self.y[-1]


@dataclass(frozen=True)
class HistoryData:
    metric: str
    curves: tuple[Curve, ...]
    best: tuple[int, ...]
    """Ids of the best trials (up to three), to highlight."""
    forecasts: tuple[ForecastLine, ...] = ()
    """One per unfinished curve of `MIN_FORECAST_POINTS` or more short of the horizon, when
    forecasts were asked for."""


@dataclass(frozen=True)
class BestSoFarData:
    """The best value of the metric over time (seconds since the first result)."""

    metric: str
    seconds: tuple[float, ...]
    values: tuple[float, ...]
    trial_ids: tuple[int, ...]


@dataclass(frozen=True)
class Axis:
    """One parameter as an axis: numbers, or categories shown as their codes' labels.

    Attributes:
        values: one per trial; None where a trial has no such parameter (a conditional one
            of a define-by-run space) on a numeric axis; "None" is a category of its own.
        log: its values span decades on a log scale (a `loguniform`, a `lograndint`, ...).
        integer: every value is a whole number: ticks at whole numbers only.
    """

    name: str
    values: tuple[float | None, ...]
    labels: tuple[str, ...] | None = None
    log: bool = False
    integer: bool = False

    @property
    def present(self) -> list[float]:
        """The values of the trials that have the parameter."""
        return [value for value in self.values if value is not None]


@dataclass(frozen=True)
class ParameterData:
    """Each trial's parameters against its value of the metric (trials without one left out).

    Attributes:
        last: the values are each trial's last one (a key the run does not tune, drawn without
            a notion of best); otherwise its best.
    """

    metric: str
    trial_ids: tuple[int, ...]
    metric_values: tuple[float, ...]
    axes: tuple[Axis, ...]
    labels: tuple[str, ...]
    last: bool = False
    infeasible: frozenset[int] = frozenset()
    """The trials that miss a constraint, marked in the charts."""

    @property
    def value_name(self) -> str:
        """What the values are called on the chart: the metric's name, "acc (last)" for last
        values."""
        return f"{self.metric} (last)" if self.last else self.metric


@dataclass(frozen=True)
class ImportanceData:
    """How much of the spread of the metric each parameter explains on its own, highest first."""

    metric: str
    names: tuple[str, ...]
    importances: tuple[float, ...]
    trials: int
    """How many trials with a value of the metric it was computed from."""

    @property
    def enough(self) -> bool:
        """Whether there are trials and parameters enough to tell anything."""
        return self.trials >= MIN_IMPORTANCE_TRIALS and bool(self.names)


def trial_color(trial_id: int) -> str:
    """The trial's own colour, the same in every chart."""
    return TRIAL_COLORS[trial_id % len(TRIAL_COLORS)]


def history_data(
    trials: Sequence[Trial],
    rows: Sequence[Mapping[str, Any]],
    metric: str,
    mode: str | None,
    max_points: int = MAX_POINTS_PER_CURVE,
    *,
    forecast: bool = True,
    horizon: int | None = None,
    infeasible: Collection[int] = (),
    points: CurvePoints | None = None,
) -> HistoryData:
    """One curve per trial that has reported `metric` (any numeric key), in trial order.

    With a `mode`, the best three by `trial_values` are marked and, when there are more curves
    than `FEATURED_CURVES`, the best that many drawn in colour. Without one (a key the run does
    not tune), no curve is best, and the colour goes to the curves that reported last.

    Args:
        forecast: forecast each unfinished curve (`ForecastLine`), to `horizon` or, without
            one, to the length of the longest trial that ran in full (none before one has).
        infeasible: the ids of the trials that miss a constraint: never among the best.
        points: the points of `metric` gathered from `rows` so far, kept by a live chart
            between redraws (`CurvePoints`): only the rows added since are read.
    """
    gathered = (points or CurvePoints(metric, mode)).update(rows)
    points, latest = gathered.points, gathered.latest
    reported = [trial for trial in trials if trial.trial_id in points]
    if mode is None:
        best: tuple[int, ...] = ()
        recent = sorted(latest, key=latest.__getitem__)[-FEATURED_CURVES:]
    else:
        order = _best_ids_of(trials, gathered.values(trials), mode)
        order = tuple(trial_id for trial_id in order if trial_id not in infeasible)
        best, recent = order[:3], order[:FEATURED_CURVES]
    featured = (
        {trial.trial_id for trial in reported} if len(reported) <= FEATURED_CURVES else set(recent)
    )
    curves = tuple(
        _curve(trial, *gathered.thinned(trial.trial_id, max_points), trial.trial_id in featured)
        for trial in reported
    )
    if infeasible:
        curves = tuple(
            replace(curve, feasible=curve.trial_id not in infeasible) for curve in curves
        )
    forecasts = _forecasts(trials, points, metric, horizon) if forecast else ()
    return HistoryData(metric, curves, best, forecasts)


class CurvePoints:
    """Each trial's points of one metric (iteration, value, seconds since the run's first
    result), gathered as results come.

    `update(rows)` reads only the rows it has not seen (the result rows only grow): a live
    chart of 200 trials of 300 results each redraws for the cost of the new results, not of
    60,000 (a tenth of a second, taken from the kernel's other threads at each redraw).
    """

    def __init__(self, metric: str, mode: str | None) -> None:
        self.metric, self.mode = metric, mode
        self._forget()

    def _forget(self) -> None:
        self.points: dict[int, tuple[list[int], list[float], list[float]]] = {}
        self.latest: dict[int, int] = {}
        """Each trial's last row with a value, by its index in the rows."""
        self._values: dict[int, float] = {}
        self._thinned: dict[tuple[int, int], tuple[int, tuple[tuple, ...]]] = {}
        self._start: float | None = None
        self._seen = 0

    def update(self, rows: Sequence[Mapping[str, Any]]) -> CurvePoints:
        """Take in the rows not seen yet."""
        if len(rows) < self._seen:
            self._forget()
        for index in range(self._seen, len(rows)):
            self._take(index, rows[index])
        self._seen = len(rows)
        return self

    def _take(self, index: int, row: Mapping[str, Any]) -> None:
        if self._start is None:
            self._start = finite(row.get("timestamp"))
        value = finite(row.get(self.metric))
        if value is None:
            return
        trial_id = row["trial_id"]
        xs, ys, seconds = self.points.setdefault(trial_id, ([], [], []))
        xs.append(row["training_iteration"])
        ys.append(value)
        seconds.append(_seconds(row, self._start or 0.0))
        self.latest[trial_id] = index
        self._values[trial_id] = self._kept(self._values.get(trial_id), value)

    def _kept(self, held: float | None, value: float) -> float | None:
        """Of a trial's value so far and a new one, the one it keeps: the better under the
        mode, without one the new one."""
        return value if self.mode is None else better_of(held, value, self.mode)

    def values(self, trials: Sequence[Trial]) -> dict[int, float]:
        """Each trial's value, as `trial_values` gives it from the same rows (its best under
        the mode, without one its last finite one; of a trial that returned its score, that
        score alone)."""
        values = dict(self._values)
        for trial in trials:
            if not trial.returned or trial.trial_id not in self.points:
                continue
            xs, ys, _ = self.points[trial.trial_id]
            score = None
            for x, y in zip(xs, ys, strict=True):
                score = self._kept(score, y) if x == trial.iteration else score
            values.pop(trial.trial_id)
            if score is not None:
                values[trial.trial_id] = score
        return values

    def thinned(self, trial_id: int, max_points: int) -> tuple[tuple, ...]:
        """A trial's iterations, values and seconds thinned alike by `thin_indexes` (made
        again only when the trial has new points)."""
        series = self.points[trial_id]
        count, thinned = self._thinned.get((trial_id, max_points), (-1, ()))
        if count != len(series[0]):
            thinned = _thin(series, max_points)
            self._thinned[trial_id, max_points] = len(series[0]), thinned
        return thinned


FORECAST_POINTS = 16
"""Points of a drawn forecast line."""
MIN_FORECAST_POINTS = 3
"""A curve's forecast is drawn once it has this many results (`Tuner.forecast()` gives one
from the first: from a point or two, a line says little)."""
_FORECAST_CACHE_SIZE = 4096
_forecast_cache: dict[tuple, ForecastLine | None] = {}
_forecasters: dict[tuple, Forecaster] = {}


def _forecasts(
    trials: Sequence[Trial],
    points: Mapping[int, tuple[list[int], list[float], list[float]]],
    metric: str,
    horizon: int | None,
) -> tuple[ForecastLine, ...]:
    """The forecast of each unfinished curve, remembered by trial and number of results (the
    dashboard redraws ten times a second; a curve is fitted again only when it grew), and with
    it the finished curves' calibration (`Forecaster`), by the finished curves."""
    curves = {trial_id: _by_iteration(xs, ys) for trial_id, (xs, ys, _) in points.items()}
    horizon = horizon or horizon_of(trials)
    if horizon is None:
        return ()
    references = references_of(trials, curves)
    known = tuple((len(curve), curve[-1], curve[0]) for curve in references)
    forecaster = _remembered(
        _forecasters, (metric, horizon, known), Forecaster, horizon, references
    )
    lines = []
    for trial in trials:
        curve = curves.get(trial.trial_id)
        drawable = MIN_FORECAST_POINTS <= len(curve or ()) < horizon
        if trial.status not in UNFINISHED or not drawable:
            continue
        key = (metric, horizon, known, trial.trial_id, len(curve), curve[-1], curve[0])
        line = _remembered(_forecast_cache, key, _line, trial.trial_id, curve, forecaster)
        if line is not None:
            lines.append(line)
    return tuple(lines)


def _remembered(cache: dict, key: tuple, make: Any, *args: Any) -> Any:
    """`make(*args)`, made once per `key` (the cache is emptied when full)."""
    if key not in cache:
        if len(cache) >= _FORECAST_CACHE_SIZE:
            cache.clear()
        cache[key] = make(*args)
    return cache[key]


def _by_iteration(xs: Sequence[int], ys: Sequence[float]) -> list[float]:
    """A curve's values at iterations 1, 2, ..., its last: NaN where it has none."""
    curve = [math.nan] * (max(xs) if xs else 0)
    for x, y in zip(xs, ys, strict=True):
        if x >= 1:
            curve[x - 1] = y
    return curve


def _line(trial_id: int, curve: Sequence[float], forecaster: Forecaster) -> ForecastLine | None:
    """The forecast drawn from the curve's last finite point to the horizon, or None if there
    is none."""
    result = forecaster(curve)
    last = next((i for i in range(len(curve) - 1, -1, -1) if math.isfinite(curve[i])), None)
    if last is None or not math.isfinite(result.predicted):
        return None
    start, end, value = last + 1, result.horizon, curve[last]
    xs = [start * (end / start) ** (k / (FORECAST_POINTS - 1)) for k in range(FORECAST_POINTS)]
    reach = math.log(end / start)
    ys = [value + (result.predicted - value) * math.log(x / start) / reach for x in xs]
    return ForecastLine(
        trial_id, tuple(xs), tuple(ys), result.low, result.high, trial_color(trial_id)
    )


def trial_values(
    trials: Sequence[Trial],
    rows: Sequence[Mapping[str, Any]],
    metric: str,
    mode: str | None,
) -> dict[int, float]:
    """Each trial's value of `metric` (any reported key), by trial id: its best under `mode`
    (for the tuned metric, its `best_value`), or without a mode its last value; trials whose
    value is not a finite number are left out. Of a trial that returned its score
    (`Trial.returned`), only that last result counts, as for its `best_value`."""
    returned = {trial.trial_id: trial.iteration for trial in trials if trial.returned}
    values: dict[int, float | None] = {}
    for row in rows:
        if metric not in row:
            continue
        trial_id = row["trial_id"]
        if returned.get(trial_id, row["training_iteration"]) != row["training_iteration"]:
            continue
        if mode is None:
            values[trial_id] = finite(row[metric])
        else:
            values[trial_id] = better_of(values.get(trial_id), row[metric], mode)
    return {trial_id: value for trial_id, value in values.items() if value is not None}


class ReportedKeys:
    """The numeric keys the results report, gathered as results come: the tuned metrics
    first (even before they are reported), then every other key whose value was a number at
    least once, in the order they first came; nbtune's own keys (`RESULT_KEYS`) left out.

    `update(rows)` reads only the rows it has not seen (the result rows only grow), so a live
    view asks it at every redraw for the cost of the new results alone.
    """

    def __init__(self, metric: str | Sequence[str] | None = None) -> None:
        self.tuned = names(metric)
        self._found: dict[str, None] = {}
        self._seen = 0

    def update(self, rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """Take in the rows not seen yet, and return `keys`."""
        if len(rows) < self._seen:
            self._found.clear()
            self._seen = 0
        for row in rows[self._seen :]:
            for key, value in row.items():
                if key not in self._found and number(value) is not None:
                    self._found[key] = None
        self._seen = len(rows)
        return self.keys

    @property
    def keys(self) -> tuple[str, ...]:
        skipped = {*self.tuned, *RESULT_KEYS}
        return (*self.tuned, *(key for key in self._found if key not in skipped))


def numeric_keys(
    rows: Sequence[Mapping[str, Any]], metric: str | Sequence[str] | None = None
) -> tuple[str, ...]:
    """Every numeric key the results report, the tuned metrics first (see `ReportedKeys`)."""
    return ReportedKeys(metric).update(rows)


def _first_time(rows: Sequence[Mapping[str, Any]]) -> float:
    """When the run's first result came (epoch seconds), the origin of the time axes."""
    return next((t for row in rows if (t := finite(row.get("timestamp"))) is not None), 0.0)


def _seconds(row: Mapping[str, Any], start: float) -> float:
    """Seconds from `start` to the row's result; NaN (not drawn) if it has no time."""
    stamp = finite(row.get("timestamp"))
    return math.nan if stamp is None else stamp - start


def _curve(trial: Trial, xs: tuple, ys: tuple, seconds: tuple, featured: bool) -> Curve:
    return Curve(
        trial_id=trial.trial_id,
        status=trial.status.value,
        x=xs,
        y=ys,
        label=describe(trial),
        seconds=seconds,
        state=state_of(trial),
        color=trial_color(trial.trial_id),
        featured=featured,
    )


def state_of(trial: Trial) -> str:
    """What a curve's style tells: "pending", "running", "paused", "completed", "stopped" (a
    finished trial that was stopped before its end: by the user, a scheduler or a stop
    criterion) or "error"."""
    if trial.status is TrialStatus.TERMINATED:
        return "stopped" if trial.stopped_by else "completed"
    return trial.status.value.lower()


def best_so_far_data(rows: Sequence[Mapping[str, Any]], metric: str, mode: str) -> BestSoFarData:
    """A step for every result that improved on the best so far."""
    seconds, values, trial_ids = [], [], []
    best = None
    start = _first_time(rows)
    for row in rows:
        improved = better_of(best, row.get(metric), mode)
        if improved != best:
            best = improved
            seconds.append(_seconds(row, start))
            values.append(best)
            trial_ids.append(row["trial_id"])
    return BestSoFarData(metric, tuple(seconds), tuple(values), tuple(trial_ids))


def parameter_data(
    trials: Sequence[Trial],
    metric: str,
    log_scale: Collection[str] | None = None,
    rows: Sequence[Mapping[str, Any]] | None = None,
    mode: str | None = None,
    infeasible: Collection[int] = (),
) -> ParameterData:
    """Parameters against each trial's value of `metric`; categorical ones coded 0, 1, 2, ...

    Args:
        log_scale: the names of the parameters to draw on a log scale, as
            `log_scale_names(space)` reads them off the search space. None when the space
            cannot say (a define-by-run space, a run loaded from disk): then a positive
            parameter is drawn on a log scale when its values spread evenly over decades.
        rows: the result rows, to read any reported key's values from (`trial_values`: each
            trial's best under `mode`, its last without one). Without them, each trial's
            `best_value`: that of the run's one tuned metric.
        mode: with `rows`, "min" or "max"; None for last values.
        infeasible: the ids of the trials that miss a constraint, to mark.
    """
    if rows is None:
        values = {trial.trial_id: trial.best_value for trial in trials}
    else:
        values = trial_values(trials, rows, metric, mode)
    scored = [trial for trial in trials if values.get(trial.trial_id) is not None]
    flat = [SearchSpace.flatten(trial.config) for trial in scored]
    params = list(dict.fromkeys(name for config in flat for name in config))
    axes = (_axis(name, [config.get(name) for config in flat], log_scale) for name in params)
    return ParameterData(
        metric=metric,
        trial_ids=tuple(trial.trial_id for trial in scored),
        metric_values=tuple(values[trial.trial_id] for trial in scored),
        axes=tuple(axis for axis in axes if _varies(axis)),
        labels=tuple(describe(trial) for trial in scored),
        last=rows is not None and mode is None,
        infeasible=frozenset(infeasible) & {trial.trial_id for trial in scored},
    )


def log_scale_names(space: Any) -> frozenset[str] | None:
    """The parameters of `space` (a `SearchSpace`) whose domain is on a log scale:
    `loguniform`, `qloguniform`, `lograndint`, `qlograndint`. None for a space that knows no
    domains in advance (a define-by-run space) or no space, for `parameter_data` to infer."""
    domains = space.domains() if space is not None else {}
    if not domains:
        return None
    return frozenset(
        name
        for name, domain in domains.items()
        if isinstance(domain, LogUniform) or (isinstance(domain, IntRange) and domain.log)
    )


def importance_data(trials: Sequence[Trial], metric: str, mode: str) -> ImportanceData:
    """Each varying parameter's share of the spread of the trials' best values.

    The trials are ranked by their best value (so that a few diverged trials do not decide it)
    and grouped by the parameter: by category, or into about sqrt(n) bins of equal count for
    numbers. The importance is the share of the ranks' variance between the groups, corrected
    for the number of groups (epsilon squared), so a parameter that does not matter scores
    about 0 and one that decides the order alone scores 1. Each is measured on its own:
    correlated parameters share credit, and interactions are not seen.
    """
    data = parameter_data(trials, metric)
    ranks = _ranks(data.metric_values, descending=mode == "max")
    scored = [(axis.name, _epsilon_squared(_groups(axis), ranks)) for axis in data.axes]
    scored.sort(key=lambda item: item[1], reverse=True)
    return ImportanceData(
        metric=metric,
        names=tuple(name for name, _ in scored),
        importances=tuple(score for _, score in scored),
        trials=len(ranks),
    )


def _ranks(values: Sequence[float], descending: bool) -> list[float]:
    """Rank 0 for the best value; tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i], reverse=descending)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2
        start = end + 1
    return ranks


def _groups(axis: Axis) -> list[int]:
    """The group of each trial: its category, or its bin of about equal count for numbers
    (the trials without the parameter a group of their own)."""
    if axis.labels is not None:
        return [int(value) for value in axis.values]
    ordered = sorted(axis.present)
    bins = max(2, min(10, round(math.sqrt(len(ordered)))))
    edges = sorted({ordered[len(ordered) * k // bins] for k in range(1, bins)})
    return [-1 if value is None else bisect.bisect_right(edges, value) for value in axis.values]


def _epsilon_squared(groups: Sequence[int], values: Sequence[float]) -> float:
    """The share of the variance of `values` between `groups`, less what chance would give."""
    members: dict[int, list[float]] = {}
    for group, value in zip(groups, values, strict=True):
        members.setdefault(group, []).append(value)
    count, kinds = len(values), len(members)
    if kinds < 2 or count <= kinds:
        return 0.0
    mean = sum(values) / count
    total = sum((value - mean) ** 2 for value in values)
    if total == 0:
        return 0.0
    between = sum(len(m) * (sum(m) / len(m) - mean) ** 2 for m in members.values())
    within_mean_square = (total - between) / (count - kinds)
    return max(0.0, (between - (kinds - 1) * within_mean_square) / total)


def clipped(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with "…" as the last if it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def config_text(config: Mapping[str, Any]) -> str:
    """A configuration on one line, as the table, the header and the hover texts show it:
    "lr=0.001, net/layers=2, act=None" (nested keys joined by "/", values by `format_value`)."""
    return ", ".join(f"{k}={format_value(v)}" for k, v in SearchSpace.flatten(config).items())


def describe(trial: Trial) -> str:
    """Hover text: the trial's id, its state and its configuration (shortened), HTML-escaped."""
    config = config_text(trial.config)
    if len(config) > _CONFIG_CHARS:
        config = config[: _CONFIG_CHARS - 1] + "…"
    return html.escape(f"trial {trial.trial_id} · {state_of(trial)}") + "<br>" + html.escape(config)


def _axis(name: str, values: list[Any], log_scale: Collection[str] | None) -> Axis:
    """Numbers (None where missing) if every value there is a finite number; else categories."""
    present = [value for value in values if value is not None]
    numbers = [finite(value) for value in present]
    if present and None not in numbers:
        log = _looks_logarithmic(numbers) if log_scale is None else name in log_scale
        integer = all(isinstance(number(value), int) for value in present)
        coded = iter(numbers)
        return Axis(
            name,
            tuple(None if value is None else next(coded) for value in values),
            log=log and min(numbers) > 0,
            integer=integer,
        )
    categories = list(dict.fromkeys(map(format_value, values)))
    codes = {category: code for code, category in enumerate(categories)}
    labels = tuple(clipped(category, LABEL_CHARS) for category in categories)
    return Axis(name, tuple(float(codes[format_value(value)]) for value in values), labels)


def _looks_logarithmic(values: Sequence[float]) -> bool:
    """Whether positive `values` spanning two decades or more sit more evenly on a log scale
    than on a linear one (their median nearer the middle of the log range): how a
    `loguniform`'s draws look, and a `uniform`'s do not."""
    low, high = min(values), max(values)
    if low <= 0 or high < 100 * low:
        return False
    median = statistics.median(values)
    linear = (median - low) / (high - low)
    logarithmic = math.log(median / low) / math.log(high / low)
    return abs(logarithmic - 0.5) < abs(linear - 0.5)


def _varies(axis: Axis) -> bool:
    return len(set(axis.present)) > 1


def ranked(trials: Sequence[Trial], mode: str) -> list[Trial]:
    """The trials that have a best value, the best first (ties in the order given)."""
    scored = [trial for trial in trials if trial.best_value is not None]
    return sorted(scored, key=lambda trial: trial.best_value, reverse=mode == "max")


def _best_ids_of(
    trials: Sequence[Trial], values: Mapping[int, float], mode: str
) -> tuple[int, ...]:
    """The ids of the trials that have a value, the best first (ties in trial order), as
    `ranked` orders them by their `best_value`."""
    scored = [trial.trial_id for trial in trials if trial.trial_id in values]
    return tuple(sorted(scored, key=values.__getitem__, reverse=mode == "max"))


def _thin(series: Sequence[list], max_points: int) -> tuple[tuple, ...]:
    """Each of `series` (of equal length) thinned alike by `thin_indexes`."""
    keep = thin_indexes(len(series[0]), max_points)
    return tuple(tuple(values[i] for i in keep) for values in series)


def thin_indexes(length: int, most: int) -> list[int]:
    """The indexes of every k-th of `length` points so that at most `most` remain, always
    keeping the first and the last."""
    if length <= most:
        return list(range(length))
    step = math.ceil(length / most)
    return [*list(range(0, length - 1, step))[: most - 1], length - 1]
