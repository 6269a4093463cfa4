"""TensorBoard: each trial's metrics as scalars, and its config in the HParams view.

    import nbtune as nt
    from nbtune.integrations.tensorboard import TensorBoardLogger

    tuner = nt.Tuner(train, space, metric="loss", callbacks=[TensorBoardLogger()])
    # then: tensorboard --logdir nbtune-runs

The layout is Ray Tune's: `<logdir>/<experiment name>/trial_<id>/` holds a trial's event
files: a scalar per metric (nested results "/"-joined) against `training_iteration`, and its
HParams session (its config when it starts, SUCCESS or FAILURE when it ends; a trial still
open when the run stops has no end yet, and a restore continues it). The experiment's own
folder holds the HParams config: every parameter and every metric, written when the run ends.
`logdir` defaults to the Tuner's `storage_path`, so the event files sit in the experiment's
directory. Only the `tensorboard` package is needed (not TensorFlow); everything is written on
the logger's own thread (see `nbtune.integrations._logging_thread`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from nbtune.events import (
    Event,
    ExperimentDone,
    TrialAdded,
    TrialCompleted,
    TrialErrored,
    TrialPaused,
    TrialResult,
    TrialStarted,
)
from nbtune.integrations._logging_thread import (
    ExperimentFacts,
    LogWriter,
    QueuedLogger,
    metrics_of,
)
from nbtune.metrics import number
from nbtune.space import flatten_config

_TYPES = {bool: api_pb2.DATA_TYPE_BOOL, float: api_pb2.DATA_TYPE_FLOAT64}


class TensorBoardLogger(QueuedLogger):
    """Writes every trial's results as TensorBoard scalars, and its config as HParams.

    Args:
        logdir: the folder to write under (default: the Tuner's `storage_path`); each
            experiment gets a folder of its name there.
        flush_timeout_s: how long the end of the run waits for the logger to catch up.
    """

    def __init__(
        self, logdir: str | os.PathLike | None = None, *, flush_timeout_s: float = 60.0
    ) -> None:
        super().__init__(flush_timeout_s=flush_timeout_s)
        self.logdir = None if logdir is None else Path(logdir)

    @property
    def folder(self) -> Path | None:
        """The latest run's folder of event files, once its logging has started."""
        writer = self._writer
        return writer.folder if isinstance(writer, _TensorBoardRun) else None

    def _open(self, experiment: ExperimentFacts) -> _TensorBoardRun:
        return _TensorBoardRun(self.logdir, experiment)


class _TensorBoardRun(LogWriter):
    """One run's event files, written on its logging thread."""

    def __init__(self, logdir: Path | None, experiment: ExperimentFacts) -> None:
        self._experiment = experiment
        self.folder = (logdir or experiment.path.parent) / experiment.name
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._writers: dict[int, EventFileWriter] = {}
        self._configs = {i: trial.config for i, trial in experiment.trials.items()}
        self._sessions = {
            trial_id
            for trial_id in experiment.trials
            if any(self._trial_folder(trial_id).glob("events.out.tfevents.*"))
        }
        """Trials whose HParams session has started: in this run, or in the one restored."""
        self._metric_names = {
            name
            for rows in experiment.rows.values()
            for row in rows.values()
            for name in metrics_of(row)
        }

    def _trial_folder(self, trial_id: int) -> Path:
        return self.folder / f"trial_{trial_id}"

    def _writer(self, trial_id: int) -> EventFileWriter:
        writer = self._writers.get(trial_id)
        if writer is None:
            folder = self._trial_folder(trial_id)
            folder.mkdir(exist_ok=True, mode=0o700)
            writer = self._writers[trial_id] = EventFileWriter(str(folder))
        return writer

    def write(self, events: list[Event]) -> None:
        touched = set()
        for event in events:
            trial_id = getattr(event, "trial_id", None)
            if isinstance(event, TrialAdded):
                self._configs[trial_id] = event.config
            elif isinstance(event, TrialStarted):
                self._start(trial_id)
                touched.add(trial_id)
            elif isinstance(event, TrialResult):
                self._scalars(trial_id, event.result)
                touched.add(trial_id)
            elif isinstance(event, (TrialCompleted, TrialErrored)):
                success = isinstance(event, TrialCompleted)
                self._end(trial_id, api_pb2.STATUS_SUCCESS if success else api_pb2.STATUS_FAILURE)
            elif isinstance(event, TrialPaused):
                self._release(trial_id)
        for trial_id in touched & self._writers.keys():
            self._writers[trial_id].flush()

    def _start(self, trial_id: int) -> None:
        """A trial's HParams session starts with its first start (not again on a resume)."""
        if trial_id in self._sessions:
            return
        self._sessions.add(trial_id)
        info = plugin_data_pb2.SessionStartInfo(start_time_secs=time.time())
        for name, value in flatten_config(self._configs.get(trial_id, {})).items():
            _set_value(info.hparams[name], value)
        self._add(self._writer(trial_id), metadata.SESSION_START_INFO_TAG, session_start_info=info)

    def _scalars(self, trial_id: int, row: Mapping[str, Any]) -> None:
        metrics = metrics_of(row)
        self._metric_names.update(metrics)
        values = [summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in metrics.items()]
        self._writer(trial_id).add_event(
            event_pb2.Event(
                wall_time=row.get("timestamp", time.time()),
                step=int(row["training_iteration"]),
                summary=summary_pb2.Summary(value=values),
            )
        )

    def _end(self, trial_id: int, status: int) -> None:
        if trial_id not in self._sessions:
            return
        info = plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=time.time())
        self._add(self._writer(trial_id), metadata.SESSION_END_INFO_TAG, session_end_info=info)
        self._release(trial_id)

    def _release(self, trial_id: int) -> None:
        """Close a trial's event file while it does not run (a thread and a file each)."""
        writer = self._writers.pop(trial_id, None)
        if writer is not None:
            writer.close()

    def close(self, done: ExperimentDone | None) -> None:
        for trial_id in list(self._writers):
            self._release(trial_id)
        writer = EventFileWriter(str(self.folder))
        try:
            self._add(writer, metadata.EXPERIMENT_TAG, experiment=self._hparams_config())
        finally:
            writer.close()

    def _hparams_config(self) -> api_pb2.Experiment:
        """Every parameter (typed by the values seen) and every metric, for the HParams view."""
        values: dict[str, Any] = {}
        for config in self._configs.values():
            values.update(flatten_config(config))
        hparams = [
            api_pb2.HParamInfo(name=name, type=_type_of(values.get(name)))
            for name in dict.fromkeys([*self._experiment.parameter_names, *values])
        ]
        metrics = [
            api_pb2.MetricInfo(name=api_pb2.MetricName(tag=name))
            for name in sorted(self._metric_names)
        ]
        return api_pb2.Experiment(
            hparam_infos=hparams, metric_infos=metrics, time_created_secs=time.time()
        )

    @staticmethod
    def _add(writer: EventFileWriter, tag: str, **data: Any) -> None:
        """Write one HParams plugin record (`experiment`, `session_start_info`, ...)."""
        content = metadata.create_summary_metadata(plugin_data_pb2.HParamsPluginData(**data))
        value = summary_pb2.Summary.Value(tag=tag, metadata=content, tensor=metadata.NULL_TENSOR)
        writer.add_event(
            event_pb2.Event(wall_time=time.time(), summary=summary_pb2.Summary(value=[value]))
        )


def _type_of(value: Any) -> int:
    if isinstance(value, bool):
        return _TYPES[bool]
    return _TYPES[float] if number(value) is not None else api_pb2.DATA_TYPE_STRING


def _set_value(field: Any, value: Any) -> None:
    """An HParams value: a bool, a number, or else text."""
    if isinstance(value, bool):
        field.bool_value = value
    elif number(value) is not None:
        field.number_value = float(number(value))
    else:
        field.string_value = str(value)
