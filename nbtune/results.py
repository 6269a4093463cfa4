"""Results as pandas: one row per trial, one row per result, and the best of them.

The live `Tuner` and the offline `ExperimentAnalysis` both build their frames here, from the
same trial records and result rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbtune.checkpoint import load as load_checkpoint
from nbtune.checkpoint import size_of
from nbtune.constraints import UNCONSTRAINED, Constraints
from nbtune.errors import TrialNotFoundError
from nbtune.front_end import Dashboard, make_dashboard
from nbtune.horizon import view_horizon
from nbtune.metrics import finite, number
from nbtune.objectives import is_several, modes, names, pareto_trials, single
from nbtune.retention import best_stored
from nbtune.space import SearchSpace
from nbtune.storage import checkpoint_dir
from nbtune.trial import RESULT_KEYS, Trial, TrialStatus, better_of

if TYPE_CHECKING:
    import optuna
    import pandas as pd


def trials_frame(
    trials: Sequence[Trial],
    metric: str | Sequence[str] | None,
    mode: str | Sequence[str],
    checkpoint_mb: Mapping[int, float] | None = None,
    rows: Sequence[Mapping[str, Any]] | None = None,
    constraints: Constraints = UNCONSTRAINED,
) -> pd.DataFrame:
    """One row per trial: id, status, `config/<param>` columns, metric (last and best), ...,
    `stopped_by` (who cut a TERMINATED trial short: "user", "scheduler", "stop criteria", "time
    budget", "deadline" or "fail fast", see `nbtune.trial.STOPPED_BY`; <NA> for one that ran to
    its end, failed or is not over), and `checkpoint_mb`, the disk its checkpoints use, where it
    is given; `gpu`, the ids it ran on, in a run whose trials use GPUs. With several metrics:
    each one's last value and `pareto`, whether the trial is on the Pareto front (see
    `nbtune.objectives`). With `constraints`, `feasible`: whether the trial's last result
    satisfies them (<NA> before it reports). Given the result `rows`, every other key a trial
    reported follows the metrics, with its last value (numbers and text), under its own name,
    or under `REPORTED_PREFIX` + its name where that name is one of these columns."""
    import pandas as pd  # imported here so that workers and `import nbtune` stay light

    reported = last_reported(rows or (), metric)
    records = []
    on_gpus = any(trial.gpus for trial in trials)
    front = {trial.trial_id for trial in pareto_trials(trials, metric, mode, constraints)}
    for trial in trials:
        row: dict[str, Any] = {"trial_id": trial.trial_id, "status": trial.status.value}
        row.update({f"config/{k}": v for k, v in SearchSpace.flatten(trial.config).items()})
        if isinstance(metric, str):
            row[metric] = number(trial.last_result.get(metric))
            row[f"best_{metric}"] = trial.best_value
        elif metric is not None:
            row.update({name: number(trial.last_result.get(name)) for name in metric})
            row["pareto"] = trial.trial_id in front
        if constraints:
            row["feasible"] = constraints.trial_feasible(trial.last_result)
        row["training_iteration"] = trial.iteration
        row["runtime_s"] = trial.runtime_s
        row["error"] = trial.error
        row["paused_by"] = trial.paused_by
        row["stopped_by"] = trial.stopped_by
        row["parent"] = trial.parent
        row["attempts"] = trial.attempts
        row["space_version"] = trial.space_version
        row["code"] = trial.code
        if checkpoint_mb is not None:
            row["checkpoint_mb"] = checkpoint_mb.get(trial.trial_id, 0.0)
        if on_gpus:
            row["gpu"] = trial.gpus
        records.append(row)
    columns, dtypes = _trial_columns(records, metric), _trial_dtypes(metric)
    if constraints:
        columns.insert(columns.index(next(iter(_TAIL_DTYPES))), "feasible")
        dtypes["feasible"] = "boolean"
    dtypes.update(_sometimes_set_ints(records, columns))
    _add_reported(records, columns, dtypes, reported, trials)
    if checkpoint_mb is not None:
        columns.append("checkpoint_mb")
        dtypes["checkpoint_mb"] = "float64"
    if on_gpus:
        columns.append("gpu")
        dtypes["gpu"] = "string"
    return pd.DataFrame.from_records(records, columns=columns).astype(dtypes)


REPORTED_PREFIX = "result/"
"""Where a reported key goes in `dataframe()` when its name is one of nbtune's own columns
(`status`, `error`, `best_loss`...): `result/status`."""


def last_reported(
    rows: Sequence[Mapping[str, Any]], metric: str | Sequence[str] | None
) -> dict[int, dict[str, Any]]:
    """By trial, the last value of each key it reported, nbtune's own keys and the tuned
    metrics (which have columns of their own) left out."""
    skipped = {*RESULT_KEYS, *names(metric)}
    last: dict[int, dict[str, Any]] = {}
    for row in rows:
        values = last.setdefault(row["trial_id"], {})
        values.update(row)
    for values in last.values():
        for key in skipped & values.keys():
            del values[key]
    return last


def _add_reported(
    records: list[dict[str, Any]],
    columns: list[str],
    dtypes: dict[str, Any],
    reported: Mapping[int, Mapping[str, Any]],
    trials: Sequence[Trial],
) -> None:
    """Put each trial's last reported values in its record, one column per key in the order
    the keys first came, after the metrics."""
    keys = list(dict.fromkeys(key for values in reported.values() for key in values))
    if not keys:
        return
    taken = {*columns, "checkpoint_mb", "gpu"}
    column_of = {key: REPORTED_PREFIX + key if key in taken else key for key in keys}
    for record, trial in zip(records, trials, strict=True):
        for key, value in reported.get(trial.trial_id, {}).items():
            record[column_of[key]] = value
    first_tail = columns.index(next(iter(_TAIL_DTYPES)))
    columns[first_tail:first_tail] = list(column_of.values())
    for column in column_of.values():
        dtypes[column] = _reported_dtype([r[column] for r in records if column in r])
        for record in records:
            if dtypes[column] == "float64" and column in record:
                record[column] = number(record[column])


def _reported_dtype(values: list[Any]) -> str:
    """float64 for numbers, string for text, object for a mix or anything else."""
    if all(number(value) is not None for value in values):
        return "float64"
    if all(isinstance(value, str) for value in values):
        return "string"
    return "object"


_TAIL_DTYPES = {
    "training_iteration": "int64",
    "runtime_s": "float64",
    "error": "string",
    "paused_by": "string",
    "stopped_by": "string",
    "parent": "Int64",
    "attempts": "int64",
    "space_version": "int64",
    "code": "string",
}
"""The columns after a trial's config and metrics, in order, with their dtypes."""


def _trial_columns(rows: list[dict[str, Any]], metric: str | Sequence[str] | None) -> list[str]:
    config_columns = dict.fromkeys(k for row in rows for k in row if k.startswith("config/"))
    metric_columns = _metric_columns(metric)
    return ["trial_id", "status", *config_columns, *metric_columns, *_TAIL_DTYPES]


def _sometimes_set_ints(rows: list[dict[str, Any]], columns: list[str]) -> dict[str, str]:
    """Nullable ints for the config columns that only some trials have (a define-by-run
    space's conditional parameters), so that 3 stays 3 beside a missing value, not 3.0."""
    dtypes = {}
    for column in columns:
        if not column.startswith("config/"):
            continue
        values = [row[column] for row in rows if column in row]
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        if values and ints and len(values) < len(rows):
            dtypes[column] = "Int64"
    return dtypes


def _metric_columns(metric: str | Sequence[str] | None) -> list[str]:
    if metric is None:
        return []
    if isinstance(metric, str):
        return [metric, f"best_{metric}"]
    return [*metric, "pareto"]


def _trial_dtypes(metric: str | Sequence[str] | None) -> dict[str, Any]:
    import pandas as pd

    dtypes: dict[str, Any] = {
        "trial_id": "int64",
        "status": pd.CategoricalDtype([status.value for status in TrialStatus]),
        **_TAIL_DTYPES,
    }
    for column in _metric_columns(metric):
        dtypes[column] = "bool" if column == "pareto" else "float64"
    return dtypes


def history_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per result: trial id, iteration, every reported metric, timestamps."""
    import pandas as pd

    frame = pd.DataFrame.from_records(rows)
    if frame.empty:
        return pd.DataFrame({key: pd.Series(dtype="float64") for key in RESULT_KEYS}).astype(
            {"trial_id": "int64", "training_iteration": "int64"}
        )
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], unit="s", utc=True)
    metrics = [column for column in frame.columns if column not in RESULT_KEYS]
    return frame[[*RESULT_KEYS, *metrics]]


def best_row(
    rows: Sequence[Mapping[str, Any]],
    metric: str,
    mode: str,
    trials: Sequence[Trial] = (),
    constraints: Constraints = UNCONSTRAINED,
) -> Mapping[str, Any] | None:
    """The result with the best finite value of `metric`, or None if there is none yet; of a
    trial that returned its score (`Trial.returned`), only that last result counts. With
    `constraints`, only feasible results of trials whose last result is feasible count."""
    returned = {trial.trial_id: trial.iteration for trial in trials if trial.returned}
    infeasible = constraints.infeasible(trials)
    best, best_value = None, None
    for row in rows:
        if returned.get(row["trial_id"], row["training_iteration"]) != row["training_iteration"]:
            continue
        if row["trial_id"] in infeasible or not constraints.feasible(row):
            continue
        value = better_of(best_value, row.get(metric), mode)
        if value != best_value:
            best, best_value = row, value
    return best


class ResultsView:
    """What every view of an experiment offers: its tables and its best trial.

    Subclasses supply `metric`, `mode` and `_snapshot()`, a consistent pair of the trials and
    the result rows at one moment.
    """

    metric: str | list[str] | None
    mode: str | list[str]
    constraints: Constraints = UNCONSTRAINED
    """The bounds on reported keys that the best trials must satisfy (`nbtune.constraints`)."""
    path: Path
    _dashboard: Dashboard | None = None

    def _snapshot(self) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]]]:
        raise NotImplementedError

    def snapshot(self) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]]]:
        """The trials and the result rows at one moment, consistent with each other: what a
        dashboard draws."""
        return self._snapshot()

    def _best_row(self) -> Mapping[str, Any] | None:
        trials, rows = self._snapshot()
        return best_row(rows, self._require_metric(), self.mode, trials, self.constraints)

    def dataframe(self) -> pd.DataFrame:
        """One row per trial: `trial_id`, `status`, `config/<param>`, the metric, the last
        value of every other key it reported (`acc`, ...; `result/<key>` for a key named like
        one of these columns), ..., `stopped_by` (who cut a trial short, see `trials_frame`),
        `checkpoint_mb` (megabytes, 10**6 bytes, its checkpoints use on disk)."""
        trials, rows = self._snapshot()
        mb = self.checkpoint_mb(trials)
        return trials_frame(trials, self.metric, self.mode, mb, rows, self.constraints)

    def checkpoint_mb(self, trials: Sequence[Trial] | None = None) -> dict[int, float]:
        """Megabytes (10**6 bytes) of checkpoints on disk, by trial id."""
        trials = self._snapshot()[0] if trials is None else trials
        return {
            trial.trial_id: size_of(checkpoint_dir(self.path, trial.trial_id)) / 1e6
            for trial in trials
        }

    def get_checkpoint(self, trial_id: int, which: str = "latest") -> Any:
        """Trial `trial_id`'s checkpoint as it reported it: the object it passed to
        `nbtune.report(checkpoint=...)`, or a `Checkpoint` for a directory; None if it has none
        on disk.

        Args:
            trial_id: the trial.
            which: "latest" (what a resume starts from) or "best" (of those kept on disk, the
                one taken at its best result by the metric; with several metrics, the latest).

        Raises:
            ValueError: `which` is neither.
            TrialNotFoundError: there is no such trial.
        """
        if which not in ("latest", "best"):
            raise ValueError(f"which={which!r}: use 'latest' or 'best'")
        trials, rows = self._snapshot()
        trial = next((t for t in trials if t.trial_id == trial_id), None)
        if trial is None:
            raise TrialNotFoundError(f"there is no trial {trial_id!r}; it has {len(trials)}")
        path = self._latest(trial) if which == "latest" else self._best_stored(trial, rows)
        return None if path is None else load_checkpoint(path)

    @property
    def best_checkpoint(self) -> Any:
        """The checkpoint of `best_trial` taken at its best result that is kept on disk (see
        `get_checkpoint(trial_id, "best")`); None before there is one."""
        trial = self.best_trial
        return None if trial is None else self.get_checkpoint(trial.trial_id, "best")

    def _latest(self, trial: Trial) -> Path | None:
        return None if trial.checkpoint is None else self.path / trial.checkpoint

    def _best_stored(self, trial: Trial, rows: Sequence[Mapping[str, Any]]) -> Path | None:
        own = {r["training_iteration"]: r for r in rows if r["trial_id"] == trial.trial_id}
        directory = checkpoint_dir(self.path, trial.trial_id)
        return best_stored(directory, own, single(self.metric), self.mode)

    def history(self) -> pd.DataFrame:
        """One row per reported result, in the order the results arrived."""
        return history_frame(self._snapshot()[1])

    @property
    def best_result(self) -> dict[str, Any] | None:
        """The result with the best value of the metric (None until one arrives)."""
        row = self._best_row()
        return None if row is None else dict(row)

    @property
    def best_trial(self) -> Trial | None:
        """The trial that reported `best_result`."""
        row = self._best_row()
        if row is None:
            return None
        trials = self._snapshot()[0]
        return next(trial for trial in trials if trial.trial_id == row["trial_id"])

    def get_best_trial(
        self, metric: str | None = None, mode: str | None = None, scope: str = "last"
    ) -> Trial | None:
        """The best trial by `metric` (default: the tuned one) under `mode` (default: the
        tuned metric's), as Ray Tune's `get_best_trial`: by each trial's last value of it
        (`scope="last"`), its best ever ("all"), the mean of all its values ("avg") or of its
        last 5 or 10 ("last-5-avg", "last-10-avg"). NaN and infinities never win, ties go to
        the lower id, a trial whose last result misses a constraint never wins; None while no
        trial has a value.

        Raises:
            ValueError: an unknown scope or mode, a metric no trial reported, or a mode
                missing for a metric the run does not tune; the message says what to pass.
        """
        metric, mode = self._metric_and_mode(metric, mode)
        reduce = _scope(scope)
        trials, rows = self._snapshot()
        infeasible = self.constraints.infeasible(trials)
        values: dict[int, list[float]] = {}
        seen = False
        for row in rows:
            if metric in row:
                seen = True
                value = finite(row[metric])
                if value is not None and row["trial_id"] not in infeasible:
                    values.setdefault(row["trial_id"], []).append(value)
        if not seen and rows:
            known = sorted({key for row in rows for key in row} - set(RESULT_KEYS))
            raise ValueError(f"no trial reported {metric!r}; the reported keys are {known}")
        scores = {trial_id: reduce(series, mode) for trial_id, series in values.items()}
        if not scores:
            return None
        sign = 1 if mode == "min" else -1
        best_id = min(scores, key=lambda trial_id: (sign * scores[trial_id], trial_id))
        return next(trial for trial in trials if trial.trial_id == best_id)

    def forecast(self, metric: str | None = None, horizon: int | None = None) -> pd.DataFrame:
        """Where each unfinished trial's learning curve is heading: one row per RUNNING,
        PAUSED or PENDING trial that has results, indexed by `trial_id`, with `predicted`
        (the metric at the trial's horizon), `low` and `high` (an 80 % interval; NaN for a
        curve of one point and no finished trial to learn from) and `horizon`.

        The horizon is the scheduler's `max_t` if it has one, else the iteration of
        `stop={"training_iteration": N}`, else the length of the longest trial that ran in
        full (a run loaded from disk knows only the last); a trial already past it is
        forecast where it is. Each curve is fitted by a weighted ensemble of power-law,
        exponential and log-linear curves, informed by the finished trials' curves (see
        `nbtune.forecast`).

        Args:
            metric: the reported value to forecast (default: the tuned metric; a run of
                several metrics needs one named).
            horizon: the iteration to forecast instead.

        Raises:
            ValueError: the run has no metric, or several and none is named, or `horizon`
                is not a whole number >= 1.
        """
        if metric is None:
            if is_several(self.metric):
                raise ValueError(
                    f"this experiment tunes several metrics ({', '.join(self.metric)}); pass "
                    "forecast(metric=...) to name the one to forecast"
                )
            metric = self._require_metric()
        if horizon is not None and (
            isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1
        ):
            raise ValueError(f"horizon={horizon!r}: pass a whole number of iterations >= 1")
        from nbtune import forecast  # numpy: imported here so that `import nbtune` stays light

        trials, rows = self._snapshot()
        if horizon is None:
            horizon = view_horizon(self, trials)
        return forecast.forecast_frame(trials, rows, metric, horizon)

    def _metric_and_mode(self, metric: str | None, mode: str | None) -> tuple[str, str]:
        """`metric` and `mode` checked, or the tuned metric's where they are not given."""
        if metric is None:
            metric = self._require_metric()
        tuned = dict(zip(names(self.metric), modes(self.metric, self.mode), strict=True))
        mode = mode if mode is not None else tuned.get(metric)
        if mode is None:
            raise ValueError(f"{metric!r} is not a tuned metric: pass mode='min' or mode='max'")
        if mode not in ("min", "max"):
            raise ValueError(f"mode={mode!r}: use 'min' or 'max'")
        return metric, mode

    @property
    def best_config(self) -> dict[str, Any] | None:
        """The configuration of `best_trial`."""
        trial = self.best_trial
        return None if trial is None else dict(trial.config)

    @property
    def best_trials(self) -> list[Trial]:
        """The Pareto front: the trials no other trial beats on every metric at once, by id.

        Each trial counts with its last reported values (what it reached where it ended, or
        has reached so far if it still runs); one whose last values are not all finite is left
        out, as is one whose last result misses a constraint. In a run of one metric, it holds
        the trials whose last value is the best.
        """
        metric = self._require_metric(several=True)
        return pareto_trials(self._snapshot()[0], metric, self.mode, self.constraints)

    def to_optuna_study(self) -> optuna.Study:
        """The run as an in-memory Optuna study, for Optuna's own analysis
        (`optuna.visualization.plot_contour(study)`, `optuna.importance.get_param_importances`,
        `study.trials_dataframe()`, ...): one frozen trial per trial, numbered in trial-id
        order, with its parameters and their distributions, its values (several for several
        metrics), its intermediate values by iteration, its state (a trial cut short is
        PRUNED, an errored one FAIL, a live one RUNNING), the constraint violations of a
        finished one (where the run has constraints) and nbtune's own facts as user
        attributes. See `nbtune.optuna_study` for the details.

        Raises:
            ImportError: Optuna is not installed, with the command that installs it.
            ValueError: the run has no metric.
        """
        from nbtune.optuna_study import study_of

        metric = self._require_metric(several=True)
        trials, rows = self._snapshot()
        space = getattr(self, "space", None)
        name = getattr(self, "name", None)
        return study_of(trials, rows, metric, self.mode, space, name, self.constraints)

    def dashboard(self) -> Dashboard:
        """The dashboard of this experiment (an ipywidgets view), made on first call.

        It comes from the front end that `import nbtune` registers in `nbtune.front_end`,
        imported only now: the core itself never imports the UI.
        """
        if self._dashboard is None:
            self._dashboard = make_dashboard(self)
        return self._dashboard

    def _require_metric(self, several: bool = False) -> Any:
        """The tuned metric; with `several`, the list of tuned metrics may do.

        Raises:
            ValueError: there is none, or several where one is needed, with what to use.
        """
        if self.metric is None:
            raise ValueError("this experiment has no metric; pass metric=... to nbtune.Tuner")
        if is_several(self.metric) and not several:
            raise ValueError(
                f"this experiment tunes several metrics ({', '.join(self.metric)}), so no one "
                "trial is best; use best_trials (the Pareto front) or nbtune.plot_pareto_front"
            )
        return self.metric


SCOPES = ("last", "all", "avg", "last-5-avg", "last-10-avg")
"""How `get_best_trial` sums up a trial's values of a metric, as Ray Tune's scopes."""


def _scope(scope: Any) -> Any:
    """The function that sums up a trial's values (in order) under `mode`, for `scope`."""
    if scope == "last":
        return lambda values, mode: values[-1]
    if scope == "all":
        return lambda values, mode: min(values) if mode == "min" else max(values)
    if scope == "avg":
        return lambda values, mode: sum(values) / len(values)
    if scope in ("last-5-avg", "last-10-avg"):
        count = int(scope.split("-")[1])
        return lambda values, mode: sum(values[-count:]) / len(values[-count:])
    raise ValueError(f"scope={scope!r}: use one of {', '.join(map(repr, SCOPES))}")
