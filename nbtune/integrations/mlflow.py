"""MLflow: one run per trial, nested under a run for the experiment.

    import nbtune as nt
    from nbtune.integrations.mlflow import MLflowLogger

    tuner = nt.Tuner(train, space, metric="loss", callbacks=[MLflowLogger("sqlite:///mlflow.db")])

The experiment's run (named after the Tuner) holds a run per trial that started: its config
as params, every metric of every result at its `training_iteration` as the step, its end as
the status (FINISHED for a trial that ended normally or was stopped, FAILED with its error for
one that failed, KILLED for one still open when the run stopped), and its best checkpoint
as artifacts under `best_checkpoint/`. A trial that is retried, paused and resumed, or carried
on by `Tuner.restore`, goes on in its own run: the runs are tagged with the experiment's key
and the trial's id, and a restored run looks them up by those tags. The key comes from the
experiment's spec (the name it was created with and when), not from its folder's path: a
folder moved or renamed and carried on goes on in the same runs. Everything is written on
the logger's own thread (see `nbtune.integrations._logging_thread`).
"""

from __future__ import annotations

import hashlib
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import mlflow
from mlflow import MlflowClient
from mlflow.entities import Metric, Param

from nbtune.events import (
    Event,
    ExperimentDone,
    TrialAdded,
    TrialCompleted,
    TrialErrored,
    TrialResult,
    TrialRetried,
    TrialStarted,
)
from nbtune.integrations._logging_thread import (
    ExperimentFacts,
    LogWriter,
    QueuedLogger,
    metrics_of,
)
from nbtune.space import flatten_config
from nbtune.storage import ExperimentReader

KEY_TAG = "nbtune.experiment_key"
TRIAL_TAG = "nbtune.trial_id"
PARENT_TAG = "mlflow.parentRunId"
ERROR_TAG = "error"
CHECKPOINT_PATH = "best_checkpoint"
"""The artifact folder of a trial's best checkpoint."""

_RUN_STATUS = {"finished": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}
_MAX_PARAM = 6000
_MAX_TAG = 5000
_PARAMS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000
_MAX_KEY = 250
"""MLflow's longest metric or param name."""
_UNSAFE = re.compile(r"[^\w./\- :]")
"""What MLflow refuses in a metric or param name (replaced by "_")."""


class MLflowLogger(QueuedLogger):
    """Logs every trial of a run to MLflow, as a nested run under one for the experiment.

    Args:
        tracking_uri: where to log, e.g. "sqlite:///mlflow.db" or "http://host:5000"
            (default: MLflow's own, `MLFLOW_TRACKING_URI` or its default).
        experiment_name: the MLflow experiment (made if missing; default: the Tuner's name).
        tags: tags for every run, the experiment's and the trials'.
        log_checkpoint: log each finished trial's best checkpoint as artifacts.
        flush_timeout_s: how long the end of the run waits for the logger to catch up.
        timeout_s: how long a tracking server (an http or https `tracking_uri`) may take to
            answer the logger's first request before the logger gives up on the run: one that
            refuses connections fails it at once, instead of after MLflow's own retries
            (minutes), which the end of the run would wait for.
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment_name: str | None = None,
        *,
        tags: Mapping[str, Any] | None = None,
        log_checkpoint: bool = True,
        flush_timeout_s: float = 60.0,
        timeout_s: float = 10.0,
    ) -> None:
        super().__init__(flush_timeout_s=flush_timeout_s)
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.tags = {str(k): str(v) for k, v in (tags or {}).items()}
        self.log_checkpoint = log_checkpoint
        self.timeout_s = timeout_s

    @property
    def parent_run_id(self) -> str | None:
        """The latest run's MLflow run, once the logger has found or made it."""
        writer = self._writer
        return writer.parent_run_id if isinstance(writer, _MLflowRun) else None

    @property
    def run_ids(self) -> dict[int, str]:
        """The latest run's trials' MLflow runs, by trial id."""
        writer = self._writer
        return writer.run_ids if isinstance(writer, _MLflowRun) else {}

    def _open(self, experiment: ExperimentFacts) -> _MLflowRun:
        return _MLflowRun(self, experiment)


class _MLflowRun(LogWriter):
    """One run's MLflow records, written on its logging thread."""

    def __init__(self, logger: MLflowLogger, experiment: ExperimentFacts) -> None:
        self.tags = logger.tags
        self.log_checkpoint = logger.log_checkpoint
        self._experiment = experiment
        _check_answers(logger.tracking_uri or mlflow.get_tracking_uri(), logger.timeout_s)
        self._client = MlflowClient(logger.tracking_uri)
        name = logger.experiment_name or experiment.name
        found = self._client.get_experiment_by_name(name)
        self._experiment_id = found.experiment_id if found else self._client.create_experiment(name)
        self._configs = {i: trial.config for i, trial in experiment.trials.items()}
        self._rows = {i: dict(rows) for i, rows in experiment.rows.items()}
        self._open_runs: set[int] = set()
        self._key = experiment_key(experiment)
        self._find_earlier_runs(self._key)
        if self.parent_run_id is None and self._key != experiment.key:
            self._find_earlier_runs(experiment.key)  # logged by an nbtune that keyed by path
            for run_id in filter(None, [self.parent_run_id, *self.run_ids.values()]):
                self._client.set_tag(run_id, KEY_TAG, self._key)
        if self.parent_run_id is None:
            self.parent_run_id = self._client.create_run(
                self._experiment_id, run_name=experiment.name, tags=self._parent_tags()
            ).info.run_id
        else:
            self._client.update_run(self.parent_run_id, status="RUNNING")

    def _find_earlier_runs(self, key: str) -> None:
        """Take up the runs that an earlier session of this very experiment logged (those of
        a restored run), found by the experiment's key among their tags."""
        self.parent_run_id = None
        self.run_ids = {}
        token = None
        while True:
            page = self._client.search_runs(
                [self._experiment_id],
                filter_string=f"tags.`{KEY_TAG}` = '{key}'",
                max_results=1000,
                page_token=token,
            )
            for run in page:
                trial_id = run.data.tags.get(TRIAL_TAG)
                if trial_id is None:
                    self.parent_run_id = run.info.run_id
                else:
                    self.run_ids[int(trial_id)] = run.info.run_id
            token = page.token
            if not token:
                return

    def _parent_tags(self) -> dict[str, str]:
        experiment = self._experiment
        return {
            **self.tags,
            KEY_TAG: self._key,
            "nbtune.path": str(experiment.path),
            "nbtune.metric": str(experiment.metric),
            "nbtune.mode": str(experiment.mode),
        }

    def write(self, events: list[Event]) -> None:
        pending: dict[int, list[Metric]] = {}
        for event in events:
            if isinstance(event, TrialResult):
                self._rows.setdefault(event.trial_id, {})[event.result["training_iteration"]] = (
                    event.result
                )
                if event.trial_id in self.run_ids:
                    pending.setdefault(event.trial_id, []).extend(_metrics(event.result))
                continue
            self._log_metrics(pending)
            pending = {}
            self._handle(event)
        self._log_metrics(pending)

    def _handle(self, event: Event) -> None:
        if isinstance(event, TrialAdded):
            self._configs[event.trial_id] = event.config
        elif isinstance(event, TrialStarted):
            self._start(event.trial_id)
        elif isinstance(event, TrialRetried) and event.trial_id in self.run_ids:
            self._client.set_tag(self.run_ids[event.trial_id], "nbtune.attempts", event.attempt)
        elif isinstance(event, TrialCompleted):
            self._end(event.trial_id, "FINISHED")
        elif isinstance(event, TrialErrored):
            self._end(event.trial_id, "FAILED", event.error, event.traceback)

    def _start(self, trial_id: int) -> None:
        run_id = self.run_ids.get(trial_id)
        if run_id is not None:
            self._client.update_run(run_id, status="RUNNING")
        else:
            run_id = self._client.create_run(
                self._experiment_id,
                run_name=f"trial_{trial_id}",
                tags={
                    **self.tags,
                    KEY_TAG: self._key,
                    TRIAL_TAG: str(trial_id),
                    PARENT_TAG: self.parent_run_id,
                },
            ).info.run_id
            self.run_ids[trial_id] = run_id
            params = _params(self._configs.get(trial_id, {}))
            for start in range(0, len(params), _PARAMS_PER_BATCH):
                self._client.log_batch(run_id, params=params[start : start + _PARAMS_PER_BATCH])
        self._open_runs.add(trial_id)

    def _log_metrics(self, pending: Mapping[int, list[Metric]]) -> None:
        for trial_id, metrics in pending.items():
            for start in range(0, len(metrics), _METRICS_PER_BATCH):
                batch = metrics[start : start + _METRICS_PER_BATCH]
                self._client.log_batch(self.run_ids[trial_id], metrics=batch)

    def _end(
        self, trial_id: int, status: str, error: str | None = None, traceback: str = ""
    ) -> None:
        run_id = self.run_ids.get(trial_id)
        if run_id is None:
            return
        if error is not None:
            self._client.set_tag(run_id, ERROR_TAG, error[:_MAX_TAG])
            self._client.log_text(run_id, traceback or error, "error.txt")
        if self.log_checkpoint:
            self._log_best_checkpoint(trial_id, run_id)
        self._client.set_terminated(run_id, status)
        self._open_runs.discard(trial_id)

    def _log_best_checkpoint(self, trial_id: int, run_id: str) -> None:
        path = self._experiment.best_checkpoint(trial_id, self._rows.get(trial_id, {}))
        if path is None:
            return
        if path.is_dir():
            self._client.log_artifacts(run_id, str(path), f"{CHECKPOINT_PATH}/{path.name}")
        else:
            self._client.log_artifact(run_id, str(path), CHECKPOINT_PATH)
        self._client.set_tag(run_id, "nbtune.best_checkpoint", path.name)

    def close(self, done: ExperimentDone | None) -> None:
        """Runs still open when the run ends were cut short (a restore carries them on)."""
        for trial_id in sorted(self._open_runs):
            self._client.set_terminated(self.run_ids[trial_id], "KILLED")
        self._open_runs.clear()
        if self.parent_run_id is None:
            return
        status = "KILLED" if done is None else _RUN_STATUS.get(done.state, "FAILED")
        if done is not None and done.error:
            self._client.set_tag(self.parent_run_id, ERROR_TAG, done.error[:_MAX_TAG])
        self._client.set_terminated(self.parent_run_id, status)


def _metrics(row: Mapping[str, Any]) -> list[Metric]:
    """A result row's metrics, at its step and time (MLflow counts milliseconds)."""
    step = int(row["training_iteration"])
    timestamp = int(row.get("timestamp", time.time()) * 1000)
    return [Metric(_safe(k), v, timestamp, step) for k, v in metrics_of(row).items()]


def _params(config: Mapping[str, Any]) -> list[Param]:
    """A config as MLflow params: flattened with "/", values as text (cut to MLflow's limit)."""
    return [Param(_safe(k), str(v)[:_MAX_PARAM]) for k, v in flatten_config(config).items()]


def experiment_key(experiment: ExperimentFacts) -> str:
    """What names the experiment among others in MLflow, wherever its folder is now: its spec's
    name and creation time, hashed (the path-based `experiment.key` for a spec without them)."""
    spec = ExperimentReader(experiment.path).spec()
    if "created_at" not in spec or "name" not in spec:
        return experiment.key
    return hashlib.sha1(f"{spec['name']}\n{spec['created_at']}".encode()).hexdigest()[:16]


def _safe(name: str) -> str:
    """`name` as MLflow takes a metric or param name: its refused characters and the path
    parts it refuses ("", ".", "..") as "_", and a name over 250 characters cut, with a hash
    of the whole name after it, so that two long names stay apart."""
    parts = _UNSAFE.sub("_", name).split("/")
    safe = "/".join("_" if part in ("", ".", "..") else part for part in parts)
    if len(safe) <= _MAX_KEY:
        return safe
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    return f"{safe[: _MAX_KEY - len(digest) - 1]}-{digest}"


def _check_answers(uri: str, timeout: float) -> None:
    """Raise a one-line ConnectionError if the tracking server at `uri` (http or https) does
    not answer within `timeout` seconds; any HTTP answer will do."""
    if urlsplit(uri).scheme not in ("http", "https"):
        return
    try:
        urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout).close()
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConnectionError(
            f"the MLflow tracking server at {uri} does not answer ({reason}); start it, or "
            "pass MLflowLogger the tracking_uri of one that runs"
        ) from None
