"""Weights & Biases: one W&B run per trial, grouped by the experiment.

    import nbtune as nt
    from nbtune.integrations.wandb import WandbLogger

    tuner = nt.Tuner(train, space, metric="loss", callbacks=[WandbLogger(project="sweeps")])

Each trial that starts gets a W&B run named `trial_<id>` in the group of its experiment (the
Tuner's name unless `group=` says otherwise): its config (nested as it is), every metric of
every result at its `training_iteration` as the step, its end (exit code 0 for a trial that
ended normally or was stopped, 1 with its error in the summary for one that failed, and for
one still open when the run stopped, 1 with the run marked as preempted) and its best
checkpoint as a `model` artifact. A trial that is retried, or paused and resumed, goes on in
its open run; one carried on by `Tuner.restore` goes on in the same W&B run too: a trial's run
id is made of the experiment's key and the trial's id, and runs start with `resume="allow"`.
Everything is written on the logger's own thread (see `nbtune.integrations._logging_thread`),
with W&B's console capture, system metrics and messages off; `WANDB_MODE=offline` logs to
files that `wandb sync` uploads later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

try:
    import wandb
except ModuleNotFoundError:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "nbtune.integrations.wandb needs Weights & Biases: pip install 'nbtune[wandb]'"
    ) from None

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

STATUS_KEY = "nbtune/status"
"""The summary key of a run's end: "completed", "failed" or "cut short"."""
ERROR_KEY = "nbtune/error"
"""The summary key of a failed trial's error (its first line)."""
ARTIFACT_TYPE = "model"
_PLAIN = (bool, int, float, str, type(None))


class WandbLogger(QueuedLogger):
    """Logs every trial of a run to Weights & Biases, as a run of the experiment's group.

    Args:
        project: the W&B project (default: W&B's own, `WANDB_PROJECT` or its default).
        entity: the W&B user or team (default: W&B's own).
        group: the group of the trials' runs (default: the Tuner's name).
        tags: tags for every trial's run.
        log_checkpoint: log each finished trial's best checkpoint as a `model` artifact.
        flush_timeout_s: how long the end of the run waits for the logger to catch up.
    """

    def __init__(
        self,
        project: str | None = None,
        entity: str | None = None,
        *,
        group: str | None = None,
        tags: Sequence[str] | None = None,
        log_checkpoint: bool = True,
        flush_timeout_s: float = 60.0,
    ) -> None:
        super().__init__(flush_timeout_s=flush_timeout_s)
        if isinstance(tags, str):
            raise ValueError(
                f"WandbLogger(tags={tags!r}): pass a list of tags, e.g. tags=[{tags!r}]"
            )
        self.project = project
        self.entity = entity
        self.group = group
        self.tags = [str(tag) for tag in tags or ()]
        self.log_checkpoint = log_checkpoint
        self.run_ids: dict[int, str] = {}
        """Each trial's W&B run id, by trial id (the same in a restored run)."""

    def _open(self, experiment: ExperimentFacts) -> _WandbRun:
        return _WandbRun(self, experiment)


class _WandbRun(LogWriter):
    """One run's W&B logging, on its logging thread: a W&B run per trial it has started."""

    def __init__(self, logger: WandbLogger, experiment: ExperimentFacts) -> None:
        self.logger = logger
        self._experiment = experiment
        self._configs = {i: trial.config for i, trial in experiment.trials.items()}
        self._rows = {i: dict(rows) for i, rows in experiment.rows.items()}
        self._runs: dict[int, Any] = {}

    def write(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, TrialResult):
                step = int(event.result["training_iteration"])
                self._rows.setdefault(event.trial_id, {})[step] = event.result
                run = self._runs.get(event.trial_id)
                if run is not None:
                    run.log(metrics_of(event.result), step=step)
            elif isinstance(event, TrialAdded):
                self._configs[event.trial_id] = event.config
            elif isinstance(event, TrialStarted):
                self._start(event.trial_id)
            elif isinstance(event, TrialRetried) and event.trial_id in self._runs:
                self._runs[event.trial_id].summary["nbtune/attempts"] = event.attempt
            elif isinstance(event, TrialCompleted):
                self._end(event.trial_id, "completed", 0)
            elif isinstance(event, TrialErrored):
                self._end(event.trial_id, "failed", 1, event.error)

    def _start(self, trial_id: int) -> None:
        if trial_id in self._runs:
            return  # retried, or resumed in this session: its run is still open
        run_id = f"nbtune-{self._experiment.key}-{trial_id}"
        self._runs[trial_id] = wandb.init(
            project=self.logger.project,
            entity=self.logger.entity,
            group=self.logger.group or self._experiment.name,
            job_type="trial",
            name=f"trial_{trial_id}",
            tags=self.logger.tags or None,
            config=_config(self._configs.get(trial_id, {})),
            id=run_id,
            resume="allow",
            reinit="create_new",
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True),
        )
        self.logger.run_ids[trial_id] = run_id

    def _end(self, trial_id: int, status: str, exit_code: int, error: str | None = None) -> None:
        run = self._runs.pop(trial_id, None)
        if run is None:
            return
        run.summary[STATUS_KEY] = status
        if error is not None:
            run.summary[ERROR_KEY] = error
        if self.logger.log_checkpoint:
            self._log_best_checkpoint(trial_id, run)
        run.finish(exit_code=exit_code)

    def _log_best_checkpoint(self, trial_id: int, run: Any) -> None:
        rows = self._rows.get(trial_id, {})
        path = self._experiment.best_checkpoint(trial_id, rows)
        if path is None:
            return
        artifact = wandb.Artifact(
            f"checkpoint-{run.id}",
            type=ARTIFACT_TYPE,
            metadata={"trial_id": trial_id, "checkpoint": path.name},
        )
        if path.is_dir():
            artifact.add_dir(str(path), name=path.name)
        else:
            artifact.add_file(str(path))
        run.log_artifact(artifact, aliases=["best"])

    def close(self, done: ExperimentDone | None) -> None:
        """Runs still open when the run ends were cut short (a restore carries them on)."""
        for trial_id in sorted(self._runs):
            run = self._runs.pop(trial_id)
            run.summary[STATUS_KEY] = "cut short"
            run.mark_preempting()
            run.finish(exit_code=1)


def _config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config as W&B takes it: nested dicts kept, values other than numbers, text, bools and
    None as their text."""
    return {
        str(key): _config(value) if isinstance(value, Mapping) else _plain(value)
        for key, value in config.items()
    }


def _plain(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    number = getattr(value, "item", None)  # a NumPy scalar
    if callable(number) and getattr(value, "shape", None) == ():
        return number()
    return str(value)
