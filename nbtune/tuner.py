"""The Tuner: the user's handle on one experiment."""

from __future__ import annotations

import contextvars
import copy
import datetime
import os
import re
import secrets
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbtune import environment, front_end, objectives, remote
from nbtune.analysis import ExperimentAnalysis, load
from nbtune.arguments import positive_seconds, seconds_until, whole_number
from nbtune.constraints import Constraints
from nbtune.control import RunControl
from nbtune.define_by_run import DefineByRunSpace, search_space
from nbtune.errors import TrialNotFoundError
from nbtune.events import Event, EventBus
from nbtune.executors._base import Executor
from nbtune.executors.loky import LokyExecutor
from nbtune.front_end import SummarySlot
from nbtune.progress import ProgressLine
from nbtune.remote import RemoteRun
from nbtune.resources import TrialResources
from nbtune.results import ResultsView
from nbtune.run_state import RunState
from nbtune.runner import TrialRunner
from nbtune.schedulers._base import Scheduler
from nbtune.schedulers.fifo import FIFOScheduler
from nbtune.search._base import Searcher
from nbtune.search.random import RandomSearch
from nbtune.space import SearchSpace
from nbtune.steering import COMMAND_TIMEOUT_S, Steering, concurrency
from nbtune.stopping import StopCriteria, StopFunction
from nbtune.storage import (
    ExperimentReader,
    ExperimentStorage,
    check_private,
    check_unlocked,
)
from nbtune.trainable_check import check_trainable, trainable_name
from nbtune.trial import Trial, TrialStatus

_NAME = re.compile(r"[\w.\-]+")
_NAME_MAX_BYTES = 255


@dataclass(frozen=True)
class TunerStatus:
    """How a run stands: its state, whether it is live, and its trials counted by status."""

    state: str
    live: bool
    counts: Mapping[str, int]
    max_concurrent: int
    reason: str | None = None
    """Why the run holds (trials that kept failing alike) or failed; None otherwise."""

    def __getattr__(self, name: str) -> int:
        if name.upper() in TrialStatus.__members__:
            return self.counts.get(name.upper(), 0)
        raise AttributeError(name)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {status.lower()}" for status, n in sorted(self.counts.items()))
        because = f"; {self.reason}" if self.reason else ""
        return f"<{self.state}{' (live)' if self.live else ''}: {counts or 'no trials'}{because}>"


class Tuner(ResultsView, Steering):
    """Tunes `trainable` over `space`, on a background thread, in parallel worker processes.

    `start()` returns at once and the run goes on while you work; `wait()` blocks until it
    ends; `run()` does both. `dataframe()`, `history()` and `best_*` work at any time, mid-run
    included: each is a consistent snapshot.

    Args:
        trainable: a function `train(config)` that calls `nbtune.report(...)`, or a subclass of
            `nbtune.Trainable`.
        space: the search space, a (nested) dict of domains (`nbtune.uniform`, ...) and
            constants; or a define-by-run function `space(trial)` that calls
            `trial.suggest_float/suggest_int/suggest_categorical` (`nbtune.define_by_run`).
        metric: the reported value to optimise, e.g. "loss"; or several at once, e.g.
            `["loss", "latency_ms"]`: then `best_trials` is the Pareto front, and a scheduler
            that compares trials needs a metric of its own (`ASHA(metric="loss", mode="min")`).
        mode: "min" or "max"; with several metrics, one per metric (`["min", "min"]`).
        constraints: bounds on reported keys, `{"latency_ms": (None, 10), "acc": (0.9, None)}`
            (None for an open side): the best trials are taken among those whose last result
            satisfies them, and `OptunaSearch` steers towards them (`nbtune.constraints`).
        num_samples: how many configurations to sample; grid values multiply it.
        max_concurrent: how many trials run at once (default: the number of CPUs).
        name: the experiment's name and directory under `storage_path` (default: the
            trainable's name and the time).
        seed: makes the sampled configurations reproducible (default: a random seed, recorded
            in the experiment's spec).
        searcher: what to try next (default: `RandomSearch`, random and grid search).
        scheduler: what running trials do after each result (default: `FIFOScheduler`).
        executor: where trials run (default: `LokyExecutor`, worker processes).
        stop: per-trial stop criteria: `{"training_iteration": 10}`, `{"loss": 0.01}`, or a
            function `(trial_id, result) -> bool`.
        time_budget_s: end the whole experiment after this many seconds (see `set_time_budget`).
        finish_by: finish the experiment by then: seconds from its start, or a `datetime`
            (see `finish_by`).
        storage_path: the folder that holds experiment directories, or a URL (`s3://b/runs`,
            `gs://`, `az://`, `file://`, `memory://`): the run is written in a local cache
            folder and synced there (see README, "Remote storage").
        storage_options: passed to fsspec for a URL storage_path (credentials, endpoint).
        sync_period_s: how often a remote run is synced (also at every pause, stop, end and
            kept checkpoint): what a crash can lose remotely is at most that much.
        callbacks: functions called with every `nbtune.events` event, on the runner thread;
            they must return quickly. A callback that has a `setup(tuner)` method has it
            called once by `start()`, before the first event, with this Tuner: its name, path,
            metric, mode and (for a run carried on) its trials, e.g. to find a logger's
            earlier records.
        fail_fast: end the run when the first trial fails (after its retries).
        max_consecutive_failures: when this many trials in a row fail with the same type of
            error (a bug, most likely), no more start: in a notebook the run holds, saying why
            in `status` and the dashboard, until you fix the trainable and resume it
            (`resume_all`); in a script it ends `failed` with that line. None never stops.
        max_failures: start a failing trial again, from its latest checkpoint, up to this many
            times before it ends as ERROR; a crashed worker counts as a failure (trials that
            only lost their worker because another died with it, on Dask, restart without
            counting).
        trial_timeout_s: a trial that reports nothing for this many seconds (since a worker
            started it, not counting the time it waited for one, or since its last report) is
            killed where the executor can, or else abandoned in its worker, and counts as a
            failure (retried as `max_failures` allows).
        keep_checkpoints: how many checkpoints each trial keeps on disk: its latest and its
            best by the metric (the default, 2), its latest and its N best (N > 2), only its
            latest (1), or all of them (None). One still needed (to resume a paused trial, to
            start a fork) is never deleted.
        resources_per_trial: what each trial uses, e.g. `{"cpu": 2, "gpu": 1}`: its BLAS and
            OpenMP thread pools are capped at its CPUs (by default each trial gets an even
            share of the machine's, `os.cpu_count() // max_concurrent`), and it sees only its
            own GPUs through CUDA_VISIBLE_DEVICES (`gpu=0.5`: two trials share one); no more
            trials run at once than the resources hold. A request that can never fit is an
            error here. On Dask these are the cluster's worker resources.
        progress: print a progress line on stderr (default: yes, except in a notebook).
        overwrite: replace an existing experiment of the same name instead of refusing.
        resume: carry on the experiment of the same name, if there is one (see `restore`).
        points_to_evaluate: configurations to run first, e.g. `[{"lr": 0.01}]`; they count
            toward `num_samples`, a parameter they leave out is drawn, and a model-based
            searcher learns from them as from its own.
        warm_start: an earlier run (its folder, e.g. "nbtune-runs/earlier", or an
            `ExperimentAnalysis`) whose finished trials the searcher learns from before its
            first suggestion; random search never runs one of their configurations again.
        chdir_to_trial_dir: run each trial with its own folder (`nbtune.get_trial_dir()`,
            `trials/<id>/artifacts/`) as its working directory, as Ray Tune does, so relative
            paths it writes do not mix with other trials'; relative paths it reads start there
            too. False: trials work where the notebook does. Only where a trial has a process
            of its own: on `ThreadExecutor` (and on Dask workers of several threads) trials
            work where their process does.
    """

    def __init__(
        self,
        trainable: Callable[[dict[str, Any]], Any] | type,
        space: Mapping[str, Any] | Callable[[Any], Mapping[str, Any] | None] | None = None,
        *,
        metric: str | Sequence[str] | None = None,
        mode: str | Sequence[str] = "min",
        constraints: Mapping[str, tuple[float | None, float | None]] | None = None,
        num_samples: int = 1,
        max_concurrent: int | None = None,
        name: str | None = None,
        seed: int | None = None,
        searcher: Searcher | None = None,
        scheduler: Scheduler | None = None,
        executor: Executor | None = None,
        stop: Mapping[str, float] | StopFunction | None = None,
        time_budget_s: float | None = None,
        finish_by: float | datetime.datetime | None = None,
        storage_path: str | os.PathLike = "nbtune-runs",
        callbacks: Iterable[Callable[[Event], None]] = (),
        fail_fast: bool = False,
        max_failures: int = 0,
        max_consecutive_failures: int | None = 3,
        trial_timeout_s: float | None = None,
        keep_checkpoints: int | None = 2,
        resources_per_trial: Mapping[str, float] | None = None,
        progress: bool | None = None,
        overwrite: bool = False,
        resume: bool = False,
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        warm_start: str | os.PathLike | ExperimentAnalysis | None = None,
        storage_options: Mapping[str, Any] | None = None,
        sync_period_s: float = 5.0,
        chdir_to_trial_dir: bool = True,
    ) -> None:
        check_trainable(trainable)
        metric, mode = objectives.checked(metric, mode)
        self.num_samples = whole_number("num_samples", num_samples)
        self.max_concurrent = concurrency(max_concurrent or os.cpu_count())
        self.time_budget_s = positive_seconds("time_budget_s", time_budget_s)
        if finish_by is not None:
            seconds_until("finish_by", finish_by)
        self._finish_by = finish_by
        self.trial_timeout_s = positive_seconds("trial_timeout_s", trial_timeout_s)
        self.keep_checkpoints = _checkpoints_to_keep(keep_checkpoints)
        self.chdir_to_trial_dir = bool(chdir_to_trial_dir)
        self.trainable = trainable
        self.metric = metric
        self.mode = mode
        self.constraints = Constraints.parse(constraints)
        self.name = _checked_name(
            name or f"{_folder_name(trainable_name(trainable))}-{time.strftime('%Y%m%d-%H%M%S')}"
        )
        self.path, self._remote = _run_location(
            storage_path, storage_options, sync_period_s, self.name, resume, overwrite
        )
        self.overwrite = overwrite
        if os.path.lexists(self.path):
            check_private(self.path)
            check_unlocked(self.path)
        self._previous = _previous_run(self.path) if resume else None
        saved = {} if self._previous is None else self._previous.state()
        self.space = saved["space"] if space is None and "space" in saved else search_space(space)
        self.seed = secrets.randbits(31) if seed is None else whole_number("seed", seed, minimum=0)
        self.space.config(0, self.seed)
        self.points_to_evaluate = _checked_points(self.space, points_to_evaluate)
        self.warm_start = _earlier_trials(warm_start)
        self._early_trials: list[dict[str, Any]] = []
        self._space_version = saved.get("space_version", 0)
        self.searcher = saved.get("searcher") or searcher or RandomSearch()
        self.searcher.use_constraints(self.constraints)
        self.scheduler = saved.get("scheduler") or scheduler or FIFOScheduler()
        if self._previous is None:
            self.scheduler.setup(metric, mode, self.seed)
        self.executor = executor or LokyExecutor()
        self.resources = TrialResources.parse(resources_per_trial)
        self.resources_per_trial = dict(resources_per_trial or {}) or None
        if self.executor.schedules_resources and resources_per_trial:
            self.executor.use_resources(resources_per_trial)
        elif not self.executor.schedules_resources:
            self.resources.check(self.executor.cpus(), self.executor.gpus())
        self.should_stop = StopCriteria(stop, metric, mode)
        self.fail_fast = fail_fast
        self.max_failures = whole_number("max_failures", max_failures, minimum=0)
        self.max_consecutive_failures = (
            None
            if max_consecutive_failures is None
            else whole_number("max_consecutive_failures", max_consecutive_failures)
        )
        _check_free_name(self)
        check_trainable(trainable, self.executor)
        self.bus = EventBus()
        self.callbacks = tuple(callbacks)
        for callback in self.callbacks:
            self.bus.subscribe(callback)
        self.progress = not _in_notebook() if progress is None else progress
        self._runner: TrialRunner | None = None
        self._retry_errored = False
        self._thread: threading.Thread | None = None
        self._summary: SummarySlot | None = None
        self.executor.prepare(self.max_concurrent)  # its workers start while the user goes on
        if _in_notebook():
            front_end.preload()

    # ----- running ----------------------------------------------------------------------------

    def start(self, display: bool | None = None) -> None:
        """Start the run on a background thread and return at once.

        Args:
            display: show the live dashboard under the cell (default: in a notebook). It is
                `dashboard()`, from the front end that `import nbtune` registers.
        """
        if self._runner is not None:
            raise RuntimeError(f"tuner {self.name!r} was already started; make a new Tuner")
        storage = _create_storage(self)
        if self._previous is None:
            self.searcher.setup(self.space, self.metric, self.mode, self.num_samples, self.seed)
            self.searcher.learn_from(self.warm_start)
            if self.points_to_evaluate:
                self.searcher.evaluate_first(self.points_to_evaluate)
        if self.progress:
            self.bus.subscribe(ProgressLine(self.name, self.metric, self.mode))
        self._runner = TrialRunner(
            trainable=self.trainable,
            searcher=self.searcher,
            scheduler=self.scheduler,
            executor=self.executor,
            storage=storage,
            bus=self.bus,
            metric=self.metric,
            mode=self.mode,
            max_concurrent=self.max_concurrent,
            should_stop=self.should_stop,
            space=self.space,
            time_budget_s=self.time_budget_s,
            space_version=self._space_version,
            finish_in_s=None
            if self._finish_by is None
            else seconds_until("finish_by", self._finish_by),
            fail_fast=self.fail_fast,
            max_failures=self.max_failures,
            max_consecutive_failures=self.max_consecutive_failures,
            hold_on_failures=_in_notebook(),
            trial_timeout_s=self.trial_timeout_s,
            keep_checkpoints=self.keep_checkpoints,
            resources=self.resources,
            constraints=self.constraints,
            chdir_to_trial_dir=self.chdir_to_trial_dir,
        )
        if self._previous is not None:
            results = self._previous.results()
            trials = self._previous.trials(results, self.metric, self.mode, trust=True)
            self.searcher.restore(trials)
            self._runner.carry_on(trials, results)
        _set_up_callbacks(self)
        if self._retry_errored:
            self._runner.apply_command("retry", {"trials": "errored"}, _retry_errored)
        for config in self._early_trials:
            self._runner.add_trial(config)
        self._runner.ledger.save_state()  # a driver killed from now on restores without space=
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._runner.run,), name="nbtune-runner", daemon=True
        )
        self._thread.start()
        if _in_notebook() if display is None else display:
            self._summary = self.dashboard().show()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ends (or `timeout` seconds pass); return whether it ended.

        Ctrl-C (the notebook's Interrupt) while waiting stops the run so that it can be carried
        on: every running trial pauses at its next report (by checkpoint where it can), the
        state is saved, the workers are released, and a line says how to `restore` it. A second
        Ctrl-C ends the trials at once (they restart from their latest checkpoints). An
        interrupt while the run goes on in the background does not touch it.

        In a notebook whose run shows its dashboard, the first `wait()` that sees the end puts a
        static summary (best trials as a table) under the dashboard, which a saved notebook
        keeps; without a `wait()`, the first cell run after the end does it.

        Raises:
            RuntimeError: if the runner itself failed (not a trial: those end as ERROR).
        """
        runner = self._started_runner()
        try:
            ended = runner.wait(timeout)
        except KeyboardInterrupt:
            ended = _stop_after_interrupt(self, runner)
        if not ended:
            return False
        if self._summary is not None:
            self._summary.fill()
        if runner.crash is not None:
            raise RuntimeError(f"the nbtune run {self.name!r} failed: {runner.error}") from (
                runner.crash
            )
        return True

    def run(self, display: bool | None = None) -> None:
        """Start the run and wait for it to end (`display` as for `start`)."""
        self.start(display)
        self.wait()

    @classmethod
    def restore(
        cls, path: str | os.PathLike, trainable: Callable[[dict[str, Any]], Any] | type, **options
    ) -> Tuner:
        """Carry on a stopped or crashed run from its directory, e.g. "nbtune-runs/demo", or
        its URL, e.g. "s3://bucket/runs/demo" (with `storage_options=`, on any machine).

        Finished trials stay as they were; every other one starts again from its latest
        checkpoint (or from scratch), and its results already in the log are not recorded
        twice; the searcher and scheduler go on from their saved state. The metric, mode,
        budget, concurrency and seed come from the run's spec unless given in `options`
        (which take any `Tuner` argument, e.g. `stop=` or `callbacks=`, which are not saved).
        Call `start()` or `run()` on the result; with `retry_errored=True`, the trials that
        failed run again too (see `retry`).

        A folder moved, copied or renamed carries on where it is now, under its new name; a
        damaged one, with what can be read (see `ExperimentReader`). A run saves its state
        (`state.pkl`: space, searcher, scheduler) as it starts, before any trial; a folder
        without one (an older nbtune's driver killed right after `start()`) carries on with a
        fresh searcher and scheduler: pass `space=` (and `searcher=`, `scheduler=` if the run
        had its own).

        Runs written by older nbtunes are carried on too. One that this nbtune cannot carry on
        is refused in one line (ValueError) before anything in its folder is written.

        The directory's pickled state runs code when loaded: only restore runs you trust.
        """
        folder, storage_path = _restore_location(path, options)
        reader = ExperimentReader(folder)
        spec = reader.spec()
        retry_errored = options.pop("retry_errored", False)
        options = {**{k: spec[k] for k in _RESTORED if k in spec}, **options}
        fresh = not reader.has_state
        if fresh and options.get("space") is None:
            raise ValueError(
                f"{folder} has no state.pkl (its driver died before saving it): carry its trials "
                f"on with nbtune.Tuner.restore({str(folder)!r}, trainable, space=...)"
            )
        tuner = cls(trainable, name=folder.name, storage_path=storage_path, resume=True, **options)
        if fresh:  # set up as a new run's are; `start` catches them up with the trials
            tuner.scheduler.setup(tuner.metric, tuner.mode, tuner.seed)
            tuner.searcher.setup(
                tuner.space, tuner.metric, tuner.mode, tuner.num_samples, tuner.seed
            )
        tuner._retry_errored = retry_errored
        return tuner

    def add_trial(self, config: Mapping[str, Any]) -> int:
        """Queue a hand-picked configuration (it must name every parameter); return its id.

        Before `start()`, the trial waits to run first, ahead of the searcher's. A model-based
        searcher learns from it as from its own trials.
        """
        self.space.check_config(config)
        config = copy.deepcopy(dict(config))
        if self._runner is None:
            self._early_trials.append(config)
            return self._trials_before_start() + len(self._early_trials) - 1
        return self._command("add_trial", lambda control: control.add_trial(config), config=config)

    def _trials_before_start(self) -> int:
        """How many trials the run has when it starts: those of the run it carries on."""
        if self._previous is None:
            return 0
        return len(self._previous.trials(self._previous.results(), self.metric, self.mode))

    @property
    def status(self) -> TunerStatus:
        """Counts of trials by status, and whether the run is live."""
        counts = Counter(trial.status.value for trial in self._snapshot()[0])
        runner = self._runner
        if runner is None:
            return TunerStatus(self.state, False, dict(counts), self.max_concurrent)
        reason = runner.held_by or (runner.error if runner.ended else None)
        return TunerStatus(self.state, self.live, dict(counts), runner.max_concurrent, reason)

    @property
    def live(self) -> bool:
        """Whether the run has started and not yet ended."""
        runner = self._runner
        return runner is not None and not runner.ended

    @property
    def planned_trials(self) -> int | None:
        """How many trials the searcher plans in all, `extend` and a restored run's extra
        samples included: `num_samples` times the grid for `RandomSearch` (points to evaluate
        among them), times `repeat` under a `Repeater`. None before the run starts, or if the
        searcher cannot say. Trials added by hand, forked or made by a scheduler come on top
        (their `origin` is not "searcher").

        Once the run has ended, nothing more starts in it: it is the number of trials the
        searcher did suggest, so that a run stopped early shows no pending trials that will
        never run (`Tuner.restore` plans the rest again).
        """
        runner = self._runner
        if runner is None:
            return None
        if runner.ended:
            return runner.suggested_trials()
        return self.searcher.planned_trials

    @property
    def environment(self) -> dict[str, Any] | None:
        """Where the run was made: `python`, `platform`, `hostname`, `packages` (name ->
        version) and `git` (`commit`, `dirty`; None outside a repository), as recorded in its
        folder when it was created (see `nbtune.environment`); None before it starts."""
        started = self._runner is not None or self._previous is not None
        return environment.read(self.path) if started else None

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call `callback(event)` for every event from now on; returns an unsubscribe function."""
        return self.bus.subscribe(callback)

    @property
    def state(self) -> RunState:
        """ "pending" (not started), "running", "paused" (live, but nothing runs and nothing
        starts by itself: after `pause_all`, or once each trial is paused by hand and no new
        one starts in their place), "finished", "stopped" or "failed"."""
        runner = self._runner
        return RunState.PENDING if runner is None else runner.state

    @property
    def trials(self) -> list[Trial]:
        """Every trial's current record, by id."""
        return list(self._snapshot()[0])

    def get_trial(self, trial_id: int) -> Trial:
        """The current record of trial `trial_id`.

        Raises:
            TrialNotFoundError: if there is no such trial (yet).
        """
        runner = self._runner
        if runner is None:
            raise TrialNotFoundError(f"there is no trial {trial_id!r}; the run has not started")
        return runner.trial(trial_id)

    # ----- results ----------------------------------------------------------------------------

    def _snapshot(self) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]]]:
        runner = self._runner
        if runner is None:
            return (), ()
        return runner.snapshot()

    def _best_row(self) -> Mapping[str, Any] | None:
        self._require_metric()
        return None if self._runner is None else self._runner.best_result

    def __repr__(self) -> str:
        trials = self._snapshot()[0]
        return f"<nbtune.Tuner {self.name!r}: {self.state}, {len(trials)} trials>"

    # ----- helpers ----------------------------------------------------------------------------

    def _started_runner(self) -> TrialRunner:
        if self._runner is None:
            raise RuntimeError(f"tuner {self.name!r} has not started; call tuner.start() first")
        return self._runner


def _run_folder(path: str | os.PathLike) -> Path:
    """The folder `path` names, as given where it says it ("runs/x"), else made absolute ("."
    or "runs/x/.." name a folder too), so that messages show the path the user wrote."""
    given = Path(path)
    if given.name in ("", ".", ".."):
        return Path(os.path.abspath(path))
    return given


def _run_location(
    storage_path: Any,
    storage_options: Mapping[str, Any] | None,
    sync_period_s: Any,
    name: str,
    resume: bool,
    overwrite: bool,
) -> tuple[Path, RemoteRun | None]:
    """The run's folder; for a URL, its local cache folder and the remote run it mirrors."""
    if not remote.is_url(storage_path):
        if storage_options:
            raise ValueError(
                f"storage_options=... is for a URL storage_path, e.g. 's3://bucket/runs'; "
                f"{str(storage_path)!r} is a local folder: leave storage_options out"
            )
        return _checked_storage_path(storage_path) / name, None
    run = remote.open_run(
        storage_path, storage_options, name, sync_period_s, resume=resume, overwrite=overwrite
    )
    return run.folder, run


def _restore_location(path: Any, options: Mapping[str, Any]) -> tuple[Path, Any]:
    """The folder a restore reads (a URL's run pulled into its cache folder first), and the
    storage_path the restored run is kept under."""
    if remote.is_url(path):
        return remote.restore_folder(path, options.get("storage_options"))
    folder = _run_folder(path)
    return folder, folder.parent


def _retry_errored(control: RunControl) -> list[int]:
    return control.retry("errored")


_RESTORED = (
    "metric",
    "mode",
    "num_samples",
    "max_concurrent",
    "seed",
    "keep_checkpoints",
    "resources_per_trial",
    "constraints",
    "chdir_to_trial_dir",
)
"""The Tuner's arguments that its run's spec records, which `restore` takes from there."""


def _spec_of(tuner: Tuner) -> dict[str, Any]:
    """What a new run's folder records of it (`experiment.json`), for `restore` and `load`."""
    return {
        "name": tuner.name,
        "metric": tuner.metric,
        "mode": tuner.mode,
        "num_samples": tuner.num_samples,
        "max_concurrent": tuner.max_concurrent,
        "seed": tuner.seed,
        "keep_checkpoints": tuner.keep_checkpoints,
        "resources_per_trial": tuner.resources_per_trial,
        "constraints": tuner.constraints.to_spec(),
        "chdir_to_trial_dir": tuner.chdir_to_trial_dir,
        "parameter_names": list(tuner.space.parameter_names),
        "trainable": trainable_name(tuner.trainable),
        "created_at": time.time(),
    }


def _checked_name(name: Any) -> str:
    """`name` if it is one plain folder name: not a path, not '.' or '..' (which overwrite
    would take for the runs folder or its parent), no newline, short enough for the system."""
    plain = isinstance(name, str) and _NAME.fullmatch(name) and name not in (".", "..")
    if not plain or len(name.encode()) > _NAME_MAX_BYTES:
        raise (ValueError if isinstance(name, str) else TypeError)(
            f"name={name!r}: use one folder name of letters, digits, '_', '-' and '.' "
            f"(not '.' or '..'), at most {_NAME_MAX_BYTES} bytes"
        )
    return name


def _folder_name(text: str) -> str:
    """`text` with what a folder name may not hold left out ("<lambda>" -> "lambda")."""
    return re.sub(r"[^\w.\-]+", "", text).strip(".") or "run"


def _checked_storage_path(storage_path: Any) -> Path:
    """`storage_path` as a Path, refused in one line where a file stands in its way."""
    if not isinstance(storage_path, (str, os.PathLike)):
        raise TypeError(f"storage_path={storage_path!r}: pass a folder's path, e.g. 'nbtune-runs'")
    path = Path(storage_path)
    for folder in (path, *path.parents):
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():
                where = "" if folder == path else f": {str(folder)!r}"
                raise NotADirectoryError(
                    f"storage_path={str(path)!r}{where} is a file, not a folder; pass a folder "
                    "(one that does not exist yet is made)"
                )
            break
    return path


def _checked_points(
    space: SearchSpace | DefineByRunSpace, points: Sequence[Mapping[str, Any]] | None
) -> list[dict[str, Any]]:
    """`points_to_evaluate` as a list of configs, each naming only parameters of the space and
    giving only values their domains can give."""
    if points is None:
        return []
    if isinstance(points, Mapping) or not isinstance(points, Sequence):
        raise TypeError("points_to_evaluate: pass a list of dicts, e.g. [{'lr': 0.01}]")
    known = set(space.parameter_names)
    checked = []
    for point in points:
        if not isinstance(point, Mapping):
            raise TypeError(f"points_to_evaluate: {point!r} is not a dict of parameter values")
        unknown = sorted(set(space.flatten(point)) - known)
        if unknown and isinstance(space, SearchSpace):
            raise ValueError(
                f"points_to_evaluate: {unknown[0]!r} is not a parameter of the search space; "
                f"use {', '.join(sorted(known))}"
            )
        if isinstance(space, SearchSpace):
            space.check_values(point, "points_to_evaluate")
        checked.append(copy.deepcopy(dict(point)))
    return checked


def _earlier_trials(warm_start: str | os.PathLike | ExperimentAnalysis | None) -> list[Trial]:
    """The trials of the run to warm-start from (none without one)."""
    if warm_start is None:
        return []
    analysis = warm_start if isinstance(warm_start, ExperimentAnalysis) else load(warm_start)
    return list(analysis.snapshot()[0])


def _previous_run(path: Path) -> ExperimentReader | None:
    """The run at `path` to carry on, or None if there is none. It is read in full first
    (`ExperimentReader.check_restorable`): one this nbtune cannot carry on is refused in one
    line before anything in its folder is written."""
    if not ExperimentStorage(path).exists:
        return None
    reader = ExperimentReader(path)
    reader.check_restorable()
    return reader


def _checkpoints_to_keep(value: Any) -> int | None:
    if value is None:
        return None
    return whole_number("keep_checkpoints", value, alternative=", or None to keep them all")


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (without importing IPython to find out)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return getattr(shell, "kernel", None) is not None


def _stop_after_interrupt(tuner: Tuner, runner: TrialRunner) -> bool:
    """The first Ctrl-C pauses every trial and stops the run; a second ends them at once."""
    try:
        runner.call(lambda: runner.request_stop(hold=True)).result(COMMAND_TIMEOUT_S)
        print(
            f"nbtune: interrupted; {tuner.name!r} pauses its trials at their next report and "
            "stops (interrupt again to end them at once)",
            file=sys.stderr,
            flush=True,
        )
        runner.wait()
    except KeyboardInterrupt:
        runner.call(lambda: runner.request_stop(hold=True))
        tuner.executor.abandon()
        runner.wait()
    print(
        f"nbtune: {tuner.name!r} stopped; carry it on with nbtune.Tuner.restore("
        f"{str(tuner._remote.url if tuner._remote else tuner.path)!r}, "
        f"{trainable_name(tuner.trainable)})",
        file=sys.stderr,
    )
    return True


def _set_up_callbacks(tuner: Tuner) -> None:
    """Call `setup(tuner)` on each callback that has one, once the run's trials (those
    it carries on) are known and before any event.

    A setup that raises stops the start: the directory is released (and, for a new run,
    which has recorded nothing, removed) and the error goes to the caller, so that running
    the cell again works."""
    try:
        for callback in tuner.callbacks:
            setup = getattr(callback, "setup", None)
            if callable(setup):
                setup(tuner)
    except BaseException:
        runner, tuner._runner = tuner._runner, None
        if runner is not None:
            runner.storage.close()
        if tuner._previous is None:
            shutil.rmtree(tuner.path, ignore_errors=True)
            if tuner._remote is not None:
                tuner._remote.store.remove(tuner.name)
        raise


def _check_free_name(tuner: Tuner) -> None:
    """Refuse to write over an experiment unless told to, and ever to remove a folder
    that is not one (or a link to one)."""
    replaceable = ExperimentStorage(tuner.path).exists and not tuner.path.is_symlink()
    if tuner.overwrite and os.path.lexists(tuner.path) and not replaceable:
        raise FileExistsError(
            f"{tuner.path} is not the folder of an nbtune experiment; overwrite=True "
            "replaces only such a folder: pick another name=..., or remove it yourself"
        )
    if tuner.overwrite or tuner._previous is not None or not ExperimentStorage(tuner.path).exists:
        return
    raise FileExistsError(
        f"{tuner.path} already holds an experiment; pass resume=True to carry it on, "
        "pick another name=..., or pass overwrite=True to replace it"
    )


def _grow_budget(tuner: Tuner, storage: ExperimentStorage) -> None:
    """A resumed run asked for more samples than it had: the searcher may suggest more. The
    spec records that budget, and the constraints the run now has (`restore(constraints=)`)."""
    spec = tuner._previous.spec()
    more = tuner.num_samples - spec["num_samples"]
    if more > 0:
        tuner.searcher.extend(more * tuner.space.grid_size)
    constraints = tuner.constraints.to_spec()
    if more > 0 or spec.get("constraints", {}) != constraints:
        budget = max(tuner.num_samples, spec["num_samples"])
        storage.write_spec({**spec, "num_samples": budget, "constraints": constraints})


def _create_storage(tuner: Tuner) -> ExperimentStorage:
    _check_free_name(tuner)
    storage = ExperimentStorage(tuner.path) if tuner._remote is None else tuner._remote.storage()
    if tuner._previous is not None:
        _grow_budget(tuner, storage)
        storage.open_logs()
        return storage
    if tuner.overwrite and tuner.path.exists():
        check_unlocked(tuner.path)
        environment.settle(tuner.path)
        shutil.rmtree(tuner.path)
    storage.create(_spec_of(tuner))
    environment.record_soon(tuner.path)
    return storage
