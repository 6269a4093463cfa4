"""The TrialRunner: the one event loop that owns every trial of a run.

    searcher --suggest--> +-------------------------------+ <--commands-- Tuner (any thread)
                          |  TrialRunner (its own thread) |
    scheduler <-decide--> |   1. run queued commands      | --start/reply--> executor
                          |   2. fill free worker slots   | <----poll------- (workers)
                          |   3. handle worker events     |
                          +-------------------------------+
                                | append, then publish
                                v
                     storage (disk) --> EventBus --> subscribers (progress, dashboard, callbacks)

Only the runner thread changes a trial (it replaces the immutable `Trial` under a lock); other
threads read snapshots, or send commands that the loop runs between two batches of events.
The worker hears the decision on its result first, so that it goes on while the runner writes
the result to disk; subscribers hear of a result only once it is on disk. The loop blocks in
`executor.poll()` when there is nothing to do; a command wakes it at once.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from nbtune.errors import IllegalTransitionError, RunEndedError, TrialNotFoundError
from nbtune.events import (
    CommandApplied,
    EventBus,
    ExperimentDone,
    TrialAdded,
    TrialCompleted,
    TrialErrored,
    TrialOutput,
    TrialPaused,
    TrialResult,
    TrialResumed,
    TrialRetried,
    TrialStarted,
)
from nbtune.executors._base import (
    Executor,
    WorkerDone,
    WorkerEvent,
    WorkerFailed,
    WorkerLost,
    WorkerPaused,
    WorkerResult,
    WorkerSuspended,
)
from nbtune.metrics import problem
from nbtune.schedulers._base import Decision, Exploit, Scheduler, Stop
from nbtune.search._base import Searcher
from nbtune.space import SearchSpace
from nbtune.stopping import StopCriteria
from nbtune.storage import ExperimentStorage
from nbtune.trainable import TrialLaunch
from nbtune.trial import Trial, TrialStatus, better_of

_IDLE_POLL_S = 1.0
_STOP_GRACE_S = 10.0
_SAVE_STATE_EVERY_S = 1.0
_MAX_FREE_STEPS = 8
"""At most this many results of a trial go unanswered in a row, so that a trial that reports
in a tight loop cannot queue up more results than the runner keeps up with."""


class TrialRunner:
    """Runs one experiment: asks the searcher, obeys the scheduler, drives the executor.

    Create it, call `run()` on a thread of its own, talk to it with `call()` from anywhere.
    """

    def __init__(
        self,
        *,
        trainable: Callable | type,
        searcher: Searcher,
        scheduler: Scheduler,
        executor: Executor,
        storage: ExperimentStorage,
        bus: EventBus,
        metric: str | None,
        mode: str,
        max_concurrent: int,
        should_stop: StopCriteria,
        space: SearchSpace,
        time_budget_s: float | None = None,
        fail_fast: bool = False,
        max_failures: int = 0,
        trial_timeout_s: float | None = None,
    ) -> None:
        self.trainable = trainable
        self.searcher = searcher
        self.scheduler = scheduler
        self.executor = executor
        self.storage = storage
        self.bus = bus
        self.metric = metric
        self.mode = mode
        self.max_concurrent = max_concurrent
        self.should_stop = should_stop
        self.time_budget_s = time_budget_s
        self.fail_fast = fail_fast
        self.max_failures = max_failures
        self.trial_timeout_s = trial_timeout_s

        self.state = "running"
        self.error: str | None = None
        self.crash: BaseException | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.done = threading.Event()
        self.lock = threading.RLock()
        self.trials: dict[int, Trial] = {}
        self.results: list[Mapping[str, Any]] = []
        self.best_result: Mapping[str, Any] | None = None
        self.space = space

        self._best_value: float | None = None
        self._queue: list[int] = []
        self._occupied: set[int] = set()
        self._ending: set[int] = set()
        self._commands: queue.SimpleQueue[tuple[Callable[[], Any], Future]] = queue.SimpleQueue()
        self._stopping: str | None = None
        self._stopping_since = 0.0
        self._closed = False
        self._state_saved_at = -math.inf
        self._paused_all = False
        self._pause_requested: set[int] = set()
        self._pausing: set[int] = set()
        self._resume_on_arrival: set[int] = set()
        self._stop_requested: set[int] = set()
        self._requeue_requested: set[int] = set()
        self._replay_until: dict[int, int] = {}
        self._heard_at: dict[int, float] = {}
        self._reporting_freely: set[int] = set()
        self._timed_out: dict[int, str] = {}
        self._hold = False
        self._user_paused: set[int] = set()
        self._forks_waiting: dict[int, Exploit] = {}

    def carry_on(self, trials: Sequence[Trial], results: Sequence[Mapping[str, Any]]) -> None:
        """Take over a stopped or crashed run's trials and results (before `run()`).

        Finished trials stay as they were. Every other one goes back to the queue, to start
        again from its latest checkpoint (or from scratch): the results it reported after that
        checkpoint are already in the log, so when it reports them again they are replayed
        silently rather than recorded twice.
        """
        for row in results:
            self.results.append(row)
            self._track_best(row)
        held = self.scheduler.restore(trials)
        for trial in trials:
            if trial.status.is_finished:
                self.trials[trial.trial_id] = trial
                continue
            restarted = self._restarted(trial, started_at=None)
            if trial.trial_id in held:
                paused_by = _paused_without_worker(trial)
                self.trials[trial.trial_id] = restarted.evolve(
                    status=TrialStatus.PAUSED, paused_by=paused_by
                )
                continue
            self.trials[trial.trial_id] = restarted
            self._queue.append(trial.trial_id)

    # ----- talking to the runner from other threads -------------------------------------------

    def call(self, command: Callable[[], Any]) -> Future:
        """Run `command` on the runner thread between two batches of events; return its future."""
        future: Future = Future()
        self._commands.put((command, future))
        self.executor.wakeup()
        if self._closed:
            self._refuse_commands()
        return future

    def _refuse_commands(self) -> None:
        while not self._commands.empty():
            _, future = self._commands.get_nowait()
            if future.set_running_or_notify_cancel():
                future.set_exception(RunEndedError(f"the run has ended ({self.state})"))

    def request_stop(
        self, state: str = "stopped", error: str | None = None, *, hold: bool = False
    ) -> None:
        """End the run: no trial starts any more, running ones stop at their next report.

        Trials paused by checkpoint stay PAUSED, to be resumed by `Tuner.restore`. With `hold`,
        running trials pause instead of ending, and suspended ones give back their worker and
        stay PAUSED, so that `restore` carries every one of them on; without it, suspended
        trials cannot be saved, so they end here.
        """
        if self._stopping is not None:
            return
        self._stopping = state
        self._stopping_since = time.monotonic()
        self.error = error
        self._hold = hold
        for trial in list(self.trials.values()):
            if trial.paused_by == "suspend":
                self._leave_suspended(trial)

    def _leave_suspended(self, trial: Trial) -> None:
        """A suspended trial of a run that ends: released and held, or ended."""
        if not self._hold:
            self.stop_trial(trial.trial_id)
            return
        self.executor.reply(trial.trial_id, Decision.STOP)
        self._set(trial.evolve(paused_by=_paused_without_worker(trial)))

    # ----- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """The runner thread's body: loop until every trial is done or the run is stopped."""
        self.started_at = time.time()
        try:
            self.executor.open(self.trainable, self.max_concurrent)
            try:
                self._loop()
            finally:
                self.executor.close()
        except BaseException as exc:
            self.crash = exc
            self.state = "failed"
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._finish()

    def _loop(self) -> None:
        deadline = None if self.time_budget_s is None else time.monotonic() + self.time_budget_s
        while True:
            self._run_commands()
            if deadline is not None and time.monotonic() >= deadline:
                self.request_stop("finished")
            if self._stopping is None:
                self._fill_slots()
            if not self._occupied and (self._stopping or self._nothing_left()):
                self.state = self._stopping or "finished"
                return
            if self._stopping and time.monotonic() - self._stopping_since > _STOP_GRACE_S:
                self._abandon_running()
                continue
            self._nudge_free_trials()
            self._time_out_silent_trials()
            self.storage.check()
            events = self.executor.poll(self._poll_timeout(deadline))
            with self.lock:
                for event in events:
                    self._handle(event)

    def _nothing_left(self) -> bool:
        """No trial waits, none is paused, and the searcher has no more to give."""
        if self._queue or not self.searcher.is_finished:
            return False
        return all(trial.status is not TrialStatus.PAUSED for trial in self.trials.values())

    def _poll_timeout(self, deadline: float | None) -> float:
        """Wake up for the run's deadline and for the first trial that may time out."""
        deadlines = [d for d in (deadline, self._first_trial_deadline()) if d is not None]
        if not deadlines:
            return _IDLE_POLL_S
        return max(0.0, min(_IDLE_POLL_S, min(deadlines) - time.monotonic()))

    def _run_commands(self) -> None:
        while not self._commands.empty():
            command, future = self._commands.get_nowait()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                with self.lock:
                    future.set_result(command())
            except Exception as exc:
                future.set_exception(exc)

    # ----- starting trials --------------------------------------------------------------------

    def _fill_slots(self) -> None:
        """Start trials while there is room; a trial told to stop makes room already, so that
        the next one is on its way while it ends."""
        while not self._paused_all and len(self._occupied - self._ending) < self.max_concurrent:
            trial = self._next_trial()
            if trial is None:
                return
            with self.lock:
                self._launch(trial)

    def _next_trial(self) -> Trial | None:
        if not self._queue and not self.searcher.is_finished:
            config = self.searcher.suggest(len(self.trials))
            if config is not None:
                with self.lock:
                    self.add_trial(config, origin="searcher")
        if not self._queue:
            with self.lock:
                self.scheduler.on_queue_empty()
                self._apply_scheduler_requests()
        waiting = [self.trials[trial_id] for trial_id in self._queue]
        chosen = self.scheduler.choose_trial_to_run(waiting) if waiting else None
        if chosen is not None:
            self._queue.remove(chosen.trial_id)
        return chosen

    def add_trial(
        self, config: Mapping[str, Any], *, parent: Trial | None = None, origin: str = "user"
    ) -> int:
        """Create a PENDING trial and queue it; return its id. Runner thread only.

        A trial forked from `parent` starts from the parent's latest checkpoint, and waits
        ahead of fresh trials.
        """
        trial = Trial(trial_id=len(self.trials), config=dict(config), origin=origin)
        if parent is not None:
            trial = trial.evolve(
                parent=parent.trial_id,
                checkpoint=parent.checkpoint,
                checkpoint_iteration=parent.checkpoint_iteration,
                iteration=parent.checkpoint_iteration,
            )
        self._set(trial)
        if parent is None:
            self._queue.append(trial.trial_id)
        else:
            self._queue.insert(self._first_fresh_in_queue(), trial.trial_id)
        self.scheduler.on_trial_add(trial)
        self._save_state_now_and_then()
        self.bus.publish(TrialAdded(trial.trial_id, trial.config))
        return trial.trial_id

    def _save_state_now_and_then(self, at_once: bool = False) -> None:
        """Save the searcher and scheduler at most once a second (and at the end of the run),
        or `at_once` when trials now wait on the scheduler's memory (it paused a trial, or asked
        to resume, stop or fork others), so that a restored run finds it as new as the trial
        journal. A trial it merely stopped needs no such haste: the journal records the end."""
        now = time.monotonic()
        if at_once or now - self._state_saved_at >= _SAVE_STATE_EVERY_S:
            self._state_saved_at = now
            self.storage.write_state(self.saved_state())

    def saved_state(self) -> dict[str, Any]:
        """What `restore` needs beyond the trial journal: the searcher and the scheduler."""
        return {"searcher": self.searcher, "scheduler": self.scheduler, "space": self.space}

    def _first_fresh_in_queue(self) -> int:
        """Where trials that carry on (resumed, forked) join the queue: ahead of fresh ones."""
        for position, trial_id in enumerate(self._queue):
            if not self.trials[trial_id].has_checkpoint:
                return position
        return len(self._queue)

    def _launch(self, trial: Trial) -> None:
        """Send the trial to a worker, then journal it as running (a crash in between leaves
        it pending, which is just as true: it has reported nothing yet)."""
        trial = trial.evolve(status=TrialStatus.RUNNING, started_at=time.time())
        self._occupied.add(trial.trial_id)
        self._heard_at[trial.trial_id] = time.monotonic()
        self.executor.start(
            TrialLaunch(
                trial_id=trial.trial_id,
                config=trial.config,
                iteration=trial.checkpoint_iteration or 0,
                checkpoint_path=self._absolute(trial.checkpoint),
                checkpoint_dir=str(self.storage.checkpoint_dir(trial.trial_id)),
                capture_output=self.executor.captures_output,
                metric=self.metric,
            )
        )
        self._set(trial)
        self.bus.publish(TrialStarted(trial.trial_id, trial.checkpoint_iteration))

    def _absolute(self, checkpoint: str | None) -> str | None:
        return None if checkpoint is None else str(self.storage.path / checkpoint)

    # ----- worker events ----------------------------------------------------------------------

    def _handle(self, event: WorkerEvent) -> None:
        self._heard_at[event.trial_id] = time.monotonic()
        if isinstance(event, WorkerResult):
            self._on_result(event)
            return
        self._reporting_freely.discard(event.trial_id)
        self._ending.discard(event.trial_id)
        if isinstance(event, WorkerDone):
            self._on_done(event)
        elif isinstance(event, WorkerPaused):
            self._on_paused(event)
        elif isinstance(event, WorkerSuspended):
            self._on_suspended(event)
        elif isinstance(event, WorkerFailed):
            self._on_failure(event.trial_id, event.error, event.traceback, event.output)
        elif isinstance(event, WorkerLost):
            self._on_lost(event)

    def _on_result(self, event: WorkerResult) -> None:
        trial = self.trials[event.trial_id]
        self._ship_output(trial.trial_id, event.output)
        if trial.status is not TrialStatus.RUNNING:
            self._stop_if_waiting(event)
            return
        if self._replayed(trial, event):
            return
        problem = self._check_metrics(event.metrics)
        if problem is not None:
            self._stop_if_waiting(event)
            self._end(trial, TrialStatus.ERROR, problem, traceback="")
            return
        row = {
            "trial_id": trial.trial_id,
            "training_iteration": trial.iteration + 1,
            "timestamp": event.timestamp,
            "time_total_s": trial.runtime_s + max(0.0, event.timestamp - trial.started_at),
            **event.metrics,
        }
        trial = trial.with_result(row, self.metric, self.mode)
        if event.checkpoint is not None:
            trial = self._with_checkpoint(trial, event.checkpoint)
        decision = self._decide(trial, row)
        if event.waits:
            self._reply(trial, decision)
        elif decision is not Decision.CONTINUE:
            self._request(trial.trial_id, decision)
        self.storage.append_result(row)
        self.results.append(row)
        self._set(trial, journal=event.checkpoint is not None)
        self._track_best(row)
        self.searcher.on_result(trial.trial_id, row)
        self.bus.publish(TrialResult(trial.trial_id, row))
        waits_on_scheduler = self._apply_scheduler_requests() or decision is Decision.PAUSE
        if event.waits:
            self._end_if_stopped(trial.trial_id, decision)
        self._save_state_now_and_then(at_once=waits_on_scheduler)

    def _replayed(self, trial: Trial, event: WorkerResult) -> bool:
        """Whether this result repeats one the log already holds (a trial carried on from a
        checkpoint older than its last result); it is counted but not recorded again."""
        until = self._replay_until.get(trial.trial_id)
        if until is None:
            return False
        iteration = trial.iteration + 1
        if iteration >= until:
            del self._replay_until[trial.trial_id]
        trial = trial.evolve(iteration=iteration)
        if event.checkpoint is not None:
            trial = self._with_checkpoint(trial, event.checkpoint)
        self._set(trial, journal=event.checkpoint is not None)
        if event.waits:
            ending = self._stopping is not None
            decision = self._ending_decision() if ending else Decision.CONTINUE
            self._reply(trial, decision)
            self._end_if_stopped(trial.trial_id, decision)
        return True

    def _decide(self, trial: Trial, row: Mapping[str, Any]) -> Decision:
        """A run that ends comes first, then the user's commands, stop criteria, the scheduler.

        The scheduler hears of every result, even one whose fate the user already decided.
        """
        trial_id = trial.trial_id
        if self._stopping is not None:
            return self._ending_decision()
        verdict = self.scheduler.on_result(trial, row)
        if trial_id in self._stop_requested or self.should_stop(trial_id, row):
            return Decision.STOP
        if trial_id in self._pause_requested:
            return Decision.PAUSE
        return verdict

    def _ending_decision(self) -> Decision:
        """What a trial does at its report once the run ends: pause if held, else stop."""
        return Decision.PAUSE if self._hold else Decision.STOP

    def _reply(self, trial: Trial, decision: Decision) -> None:
        """Send the decision on a result that waits for it, and how many next results need
        not wait (see `nbtune.session.TrialSession.report`); a pause is then on its way."""
        trial_id = trial.trial_id
        if decision is Decision.PAUSE:
            self._pause_requested.discard(trial_id)
            self._pausing.add(trial_id)
        if decision is Decision.STOP:
            self._ending.add(trial_id)
        free_steps = self._free_steps(trial) if decision is Decision.CONTINUE else 0
        if free_steps:
            self._reporting_freely.add(trial_id)
        else:
            self._reporting_freely.discard(trial_id)
        self.executor.reply(trial_id, decision, free_steps)

    def _end_if_stopped(self, trial_id: int, decision: Decision) -> None:
        """A trial told to stop has ended: its results are all in, and its worker is taken
        for the next trial while it winds down (it holds the run open until then)."""
        if decision is Decision.STOP:
            self._end(self.trials[trial_id], TrialStatus.TERMINATED)

    def _stop_if_waiting(self, event: WorkerResult) -> None:
        """Stop a trial the run is done with; one that does not wait is nudged (see
        `_nudge_free_trials`)."""
        if event.waits:
            self._reply(self.trials[event.trial_id], Decision.STOP)

    def _free_steps(self, trial: Trial) -> int:
        """How many results the trial may send after this one without waiting for an answer:
        none while the runner has something to tell it or replays its results, else as many
        as neither the scheduler nor the stop criteria can act on."""
        if self._must_answer(trial.trial_id) or trial.trial_id in self._replay_until:
            return 0
        free_steps = self.scheduler.free_steps(trial), self.should_stop.free_steps(trial.iteration)
        return min(*free_steps, _MAX_FREE_STEPS)

    def _must_answer(self, trial_id: int) -> bool:
        """Whether the trial's next result must wait: the runner will not answer CONTINUE."""
        return (
            self._stopping is not None
            or trial_id in self._pause_requested
            or trial_id in self._stop_requested
            or self.trials[trial_id].status is not TrialStatus.RUNNING
        )

    def _request(self, trial_id: int, decision: Decision) -> None:
        """A decision on a result that did not wait, taken at the trial's next report (a
        scheduler or stop criterion that acted sooner than its `free_steps` said)."""
        requests = self._stop_requested if decision is Decision.STOP else self._pause_requested
        requests.add(trial_id)

    def _nudge_free_trials(self) -> None:
        """Make the next report of each trial that need not wait, but that the runner now
        has something to tell (a pause, a stop, the run's end), wait for the answer."""
        for trial_id in [t for t in self._reporting_freely if self._must_answer(t)]:
            self._reporting_freely.discard(trial_id)
            self.executor.nudge(trial_id)

    def _check_metrics(self, metrics: Mapping[str, Any]) -> str | None:
        if self.metric is None:
            return None
        return problem(metrics, self.metric, "the metric")

    def _track_best(self, row: Mapping[str, Any]) -> None:
        if self.metric is None:
            return
        value = better_of(self._best_value, row.get(self.metric), self.mode)
        if value != self._best_value:
            self._best_value = value
            self.best_result = row

    def _on_done(self, event: WorkerDone) -> None:
        self._occupied.discard(event.trial_id)
        self._ship_output(event.trial_id, event.output)
        trial = self.trials[event.trial_id]
        if trial.status is TrialStatus.RUNNING:
            self._end(trial, TrialStatus.TERMINATED)

    def _on_paused(self, event: WorkerPaused) -> None:
        """The trial saved a checkpoint and left its worker."""
        trial_id = event.trial_id
        self._occupied.discard(trial_id)
        self._pausing.discard(trial_id)
        trial = self.trials[trial_id]
        if trial.status is not TrialStatus.RUNNING:
            return
        trial = self._with_checkpoint(trial, event.checkpoint)
        if trial_id in self._stop_requested:
            self._end(trial, TrialStatus.TERMINATED)
            return
        self._to_paused(trial, "checkpoint")
        if trial_id in self._resume_on_arrival or trial_id in self._requeue_requested:
            self._requeue_requested.discard(trial_id)
            self.resume_trial(trial_id)

    def _on_suspended(self, event: WorkerSuspended) -> None:
        """The trial cannot checkpoint: it waits in its worker for a resume or a stop."""
        trial_id = event.trial_id
        self._pausing.discard(trial_id)
        trial = self.trials[trial_id]
        if trial.status is not TrialStatus.RUNNING:
            return
        if trial_id in self._requeue_requested:
            self._requeue_requested.discard(trial_id)
            self.executor.reply(trial_id, Decision.CONTINUE)
            return
        self._to_paused(trial, "suspend")
        if trial_id in self._stop_requested:
            self.stop_trial(trial_id)
        elif self._stopping is not None:
            self._leave_suspended(self.trials[trial_id])
        elif trial_id in self._resume_on_arrival:
            self.resume_trial(trial_id)

    def _restarted(self, trial: Trial, **changes: Any) -> Trial:
        """`trial` back to PENDING, to start again from its latest checkpoint (or from scratch);
        the results it logged after that checkpoint will be replayed, not recorded twice."""
        restart = trial.checkpoint_iteration or 0
        if trial.iteration > restart:
            self._replay_until[trial.trial_id] = trial.iteration
        return trial.evolve(
            status=TrialStatus.PENDING, iteration=restart, paused_by=None, **changes
        )

    def _to_paused(self, trial: Trial, paused_by: str) -> None:
        self._set(trial.evolve(status=TrialStatus.PAUSED, paused_by=paused_by, **_ran(trial)))
        self.bus.publish(TrialPaused(trial.trial_id))

    def _on_lost(self, event: WorkerLost) -> None:
        """A lost worker: a failure of its trial (or its timeout), unless a bystander's or one
        the user asked to stop (a forced stop kills the worker)."""
        timed_out = self._timed_out.pop(event.trial_id, None)
        if timed_out is None and event.trial_id in self._stop_requested:
            self._on_done(WorkerDone(event.trial_id, ""))
            return
        error = timed_out or f"WorkerLost: {event.error}"
        self._on_failure(event.trial_id, error, event.error, "", bystander=event.bystander)

    def _on_failure(
        self, trial_id: int, error: str, traceback: str, output: str, *, bystander: bool = False
    ) -> None:
        self._occupied.discard(trial_id)
        self._pausing.discard(trial_id)
        self._ship_output(trial_id, output)
        trial = self.trials[trial_id]
        if not _holds_worker(trial):
            return
        if self._stopping is not None and self._hold:
            self._to_paused(trial, _paused_without_worker(trial))
            return
        if bystander and self._stopping is None:
            self._restart_first(trial)
            return
        if trial.attempts > self.max_failures or self._stopping is not None:
            self._end(trial, TrialStatus.ERROR, error, traceback)
            return
        self.storage.append_text(
            trial_id, "error.txt", f"attempt {trial.attempts} (retried): {traceback or error}\n"
        )
        self._retry(trial, error)

    def _retry(self, trial: Trial, error: str) -> None:
        """Start a failed trial again from its latest checkpoint, first in the queue; results it
        logged after that checkpoint are replayed, not recorded twice."""
        self._restart_first(trial, attempts=trial.attempts + 1)
        self.bus.publish(TrialRetried(trial.trial_id, trial.attempts + 1, error))

    def _restart_first(self, trial: Trial, **changes: Any) -> None:
        """Queue `trial` first, to start again from its latest checkpoint (see `_restarted`)."""
        self._set(self._restarted(trial, **changes, **_ran(trial)))
        self._queue.insert(0, trial.trial_id)
        self._timed_out.pop(trial.trial_id, None)

    def _end(
        self, trial: Trial, status: TrialStatus, error: str | None = None, traceback: str = ""
    ) -> None:
        trial = trial.evolve(status=status, error=error, paused_by=None, **_ran(trial))
        self._set(trial)
        self._forget_requests(trial.trial_id)
        waiting_fork = self._forks_waiting.pop(trial.trial_id, None)
        if waiting_fork is not None:
            self.scheduler.request(waiting_fork)
        last = trial.last_result or None
        if status is TrialStatus.TERMINATED:
            self.scheduler.on_trial_complete(trial)
            self.searcher.on_complete(trial.trial_id, last, error=False)
            self.bus.publish(TrialCompleted(trial.trial_id))
            self._apply_scheduler_requests()
            return
        self.storage.append_text(
            trial.trial_id, "error.txt", f"attempt {trial.attempts}: {traceback or error}\n"
        )
        self.scheduler.on_trial_error(trial)
        self.searcher.on_complete(trial.trial_id, last, error=True)
        self.bus.publish(TrialErrored(trial.trial_id, error or "", traceback))
        self._apply_scheduler_requests()
        if self.fail_fast:
            self.request_stop("failed", f"trial {trial.trial_id} failed ({error}); fail_fast=True")

    # ----- trials that hang ---------------------------------------------------------------------

    def _timed(self) -> list[int]:
        """Running trials on the clock: silent for `trial_timeout_s`, they fail."""
        if self.trial_timeout_s is None:
            return []
        return [
            trial_id
            for trial_id in self._occupied
            if trial_id not in self._timed_out
            and self.trials[trial_id].status is TrialStatus.RUNNING
        ]

    def _first_trial_deadline(self) -> float | None:
        timed = self._timed()
        if not timed:
            return None
        return min(self._heard_at[trial_id] for trial_id in timed) + self.trial_timeout_s

    def _time_out_silent_trials(self) -> None:
        """Kill each trial silent for too long (or write it off) and count it as a failure.

        A killed trial fails once the executor reports it lost, so that its retry never meets
        what is left of the killed attempt.
        """
        now = time.monotonic()
        for trial_id in self._timed():
            if now - self._heard_at[trial_id] < self.trial_timeout_s:
                continue
            killable = self.executor.can_kill_trial or self.executor.can_kill_worker
            error = (
                f"TrialTimeout: no report for {self.trial_timeout_s:g} s (trial_timeout_s); "
                f"the trial was {'killed' if killable else 'abandoned in its worker'}"
            )
            with self.lock:
                if killable:
                    self._timed_out[trial_id] = error
                    self.executor.kill(trial_id)
                else:
                    self.executor.forget(trial_id)
                    self._on_failure(trial_id, error, error, "")

    def _abandon_running(self) -> None:
        """Trials that ignored the stop for the grace period end where they are."""
        with self.lock:
            for trial_id in sorted(self._occupied):
                trial = self.trials[trial_id]
                if trial.status is not TrialStatus.RUNNING:
                    continue
                if self._hold:
                    self._to_paused(trial, _paused_without_worker(trial))
                else:
                    self._end(trial, TrialStatus.TERMINATED)
            self._occupied.clear()
            self._ending.clear()

    def _forget_requests(self, trial_id: int) -> None:
        for requests in (
            self._pause_requested,
            self._resume_on_arrival,
            self._stop_requested,
            self._requeue_requested,
            self._user_paused,
        ):
            requests.discard(trial_id)
        self._timed_out.pop(trial_id, None)
        if trial_id in self._queue:
            self._queue.remove(trial_id)

    def _apply_scheduler_requests(self) -> bool:
        """Carry out what the scheduler asked beyond its decision on one trial; say if it asked.

        Requests about trials that ended meanwhile lapse, and a trial the user paused stays
        paused until the user resumes it.
        """
        requests = self.scheduler.take_requests()
        for request in requests:
            if isinstance(request, Exploit):
                self._fork_when_replaced_ends(request)
                continue
            trial = self.trials.get(request.trial_id)
            if trial is None or trial.status.is_finished:
                continue
            if isinstance(request, Stop):
                self.stop_trial(request.trial_id)
            elif (
                trial.status is not TrialStatus.PENDING
                and request.trial_id not in self._user_paused
            ):
                self.resume_trial(request.trial_id)
        return bool(requests)

    def _fork_when_replaced_ends(self, request: Exploit) -> None:
        """Fork for the scheduler; the fork waits for the trial it replaces to end, so the
        population never grows."""
        replaced = self.trials.get(request.replaces) if request.replaces is not None else None
        if replaced is not None and not replaced.status.is_finished:
            self._forks_waiting[replaced.trial_id] = request
            return
        self.add_trial(request.config, parent=self.trial(request.source), origin="scheduler")

    def _ship_output(self, trial_id: int, output: str) -> None:
        if output:
            self.storage.append_text(trial_id, "output.log", output)
            self.bus.publish(TrialOutput(trial_id, output))

    # ----- commands (run on the runner thread through `call`) ---------------------------------

    def apply_command(
        self, name: str, arguments: Mapping[str, Any], command: Callable[[], Any]
    ) -> Any:
        """Run a user's command; log it, and whether it failed, on disk and on the bus."""
        error = None
        try:
            return command()
        except Exception as exc:
            error = str(exc)
            raise
        finally:
            self.storage.append_command(name, arguments, error)
            self.bus.publish(CommandApplied(name, dict(arguments), error))

    def trial(self, trial_id: Any) -> Trial:
        """The trial with `trial_id`, or a TrialNotFoundError that lists the valid ids."""
        if isinstance(trial_id, int) and not isinstance(trial_id, bool) and trial_id in self.trials:
            return self.trials[trial_id]
        known = f"its trials are 0 to {len(self.trials) - 1}" if self.trials else "no trials yet"
        raise TrialNotFoundError(f"there is no trial {trial_id!r}; {known}")

    def pause_trial(self, trial_id: int) -> None:
        """Pause a trial: a running one at its next report, a waiting one at once.

        The trial stays paused until the user resumes it: the scheduler cannot resume it.
        """
        trial = self.trial(trial_id)
        if not trial.status.is_finished:
            self._user_paused.add(trial_id)
        if trial.status is TrialStatus.RUNNING:
            self._resume_on_arrival.discard(trial_id)
            self._requeue_requested.discard(trial_id)
            if trial_id not in self._pausing:
                self._pause_requested.add(trial_id)
        elif trial.status is TrialStatus.PENDING:
            self._queue.remove(trial_id)
            self._to_paused(trial, "checkpoint" if trial.has_checkpoint else "queue")
        elif trial.status.is_finished:
            raise IllegalTransitionError(
                f"trial {trial_id} has ended ({trial.status}); only a pending or running trial "
                "can be paused"
            )

    def resume_trial(self, trial_id: int) -> None:
        """Resume a paused trial: in its worker if suspended, else from its checkpoint."""
        trial = self.trial(trial_id)
        self._user_paused.discard(trial_id)
        if trial.status is TrialStatus.RUNNING:
            self._cancel_user_pause(trial_id)
            if trial_id in self._pausing and trial_id not in self._requeue_requested:
                self._resume_on_arrival.add(trial_id)
            return
        if trial.status is not TrialStatus.PAUSED:
            raise IllegalTransitionError(
                f"trial {trial_id} is {trial.status}; only a paused trial can be resumed"
            )
        self._resume_on_arrival.discard(trial_id)
        if trial.paused_by == "suspend":
            self.executor.reply(trial_id, Decision.CONTINUE)
            self._heard_at[trial_id] = time.monotonic()
            self._set(
                trial.evolve(status=TrialStatus.RUNNING, paused_by=None, started_at=time.time())
            )
        else:
            self._set(trial.evolve(status=TrialStatus.PENDING, paused_by=None))
            position = self._first_fresh_in_queue() if trial.has_checkpoint else 0
            self._queue.insert(position, trial_id)
        self.bus.publish(TrialResumed(trial_id))

    def stop_trial(self, trial_id: int, force: bool = False) -> None:
        """End a trial (TERMINATED, results kept): a running one at its next report."""
        trial = self.trial(trial_id)
        if trial.status.is_finished:
            raise IllegalTransitionError(f"trial {trial_id} has already ended ({trial.status})")
        if trial.status is TrialStatus.RUNNING:
            self._stop_requested.add(trial_id)
            if force and self.executor.can_kill_trial:
                self.executor.kill(trial_id)
            return
        if trial.paused_by == "suspend":
            self.executor.reply(trial_id, Decision.STOP)
        self._end(trial, TrialStatus.TERMINATED)

    def pause_all(self) -> None:
        """Hold the whole experiment: every trial pauses and none starts."""
        self._paused_all = True
        for trial in list(self.trials.values()):
            if trial.status in (TrialStatus.PENDING, TrialStatus.RUNNING):
                self.pause_trial(trial.trial_id)

    def resume_all(self) -> None:
        """Let the experiment go on: every paused trial resumes, new ones may start."""
        self._paused_all = False
        for trial in list(self.trials.values()):
            if trial.status is TrialStatus.PAUSED or trial.trial_id in self._pausing:
                self.resume_trial(trial.trial_id)
            self._cancel_user_pause(trial.trial_id)

    def _cancel_user_pause(self, trial_id: int) -> None:
        """Drop a pause the user asked for (not one that makes room under a lower limit)."""
        if trial_id not in self._requeue_requested:
            self._pause_requested.discard(trial_id)

    def fork(self, trial_id: int, config: Mapping[str, Any]) -> int:
        """Start a new trial with `config` from trial `trial_id`'s latest checkpoint."""
        parent = self.trial(trial_id)
        if not parent.has_checkpoint:
            raise IllegalTransitionError(
                f"trial {trial_id} has no checkpoint to fork from; its trainable must pass "
                "checkpoint=... to nbtune.report (or implement save_checkpoint)"
            )
        return self.add_trial(config, parent=parent, origin="fork")

    def set_max_concurrent(self, max_concurrent: int) -> None:
        """Change how many trials run at once.

        Above the new limit, the most recently started trials give back their workers at their
        next report: by checkpoint, going back to the head of the queue. A trial that cannot
        checkpoint keeps its worker until it ends.
        """
        self.max_concurrent = max_concurrent
        self.executor.resize(max_concurrent)
        user_pauses = self._pause_requested - self._requeue_requested
        leaving = {*self._pausing, *user_pauses, *self._stop_requested, *self._ending}
        running = [
            trial
            for trial in self.trials.values()
            if trial.status is TrialStatus.RUNNING and trial.trial_id not in leaving
        ]
        running.sort(key=lambda trial: trial.started_at or 0.0, reverse=True)
        excess = len(self._occupied) - len(leaving & self._occupied) - max_concurrent
        for trial in running[: max(0, excess)]:
            self._requeue_requested.add(trial.trial_id)
            self._pause_requested.add(trial.trial_id)
        for trial in running[max(0, excess) :]:
            if trial.trial_id in self._requeue_requested:
                self._requeue_requested.discard(trial.trial_id)
                self._pause_requested.discard(trial.trial_id)

    # ----- bookkeeping ------------------------------------------------------------------------

    def _set(self, trial: Trial, *, journal: bool = True) -> None:
        self.trials[trial.trial_id] = trial
        if journal:
            self.storage.record_trial(trial, self.trials.values)

    def _with_checkpoint(self, trial: Trial, path: str) -> Trial:
        """`trial` with its latest checkpoint, taken at its current iteration; the path is kept
        relative to the experiment directory, so that the directory can move."""
        absolute = Path(path)
        relative = (
            absolute.relative_to(self.storage.path)
            if absolute.is_relative_to(self.storage.path)
            else absolute
        )
        return trial.evolve(checkpoint=str(relative), checkpoint_iteration=trial.iteration)

    def _finish(self) -> None:
        self.ended_at = time.time()
        self._closed = True
        self._refuse_commands()
        try:
            outcome = {"state": self.state, "error": self.error, "ended_at": self.ended_at}
            self.storage.finish(self.saved_state(), self.trials.values(), outcome)
        except Exception as exc:
            if self.crash is None:
                self.crash = exc
                self.state = "failed"
                self.error = f"{type(exc).__name__}: {exc}"
        self.bus.publish(ExperimentDone(self.state, self.error))
        self.done.set()


def _ran(trial: Trial) -> dict[str, Any]:
    """The changes that close a stretch of running: its time added up, no start time."""
    if trial.started_at is None or trial.status is not TrialStatus.RUNNING:
        return {}
    return {
        "runtime_s": trial.runtime_s + max(0.0, time.time() - trial.started_at),
        "started_at": None,
    }


def _paused_without_worker(trial: Trial) -> str:
    """How a trial waits once it has no worker: from its checkpoint, or from scratch."""
    return "checkpoint" if trial.has_checkpoint else "queue"


def _holds_worker(trial: Trial) -> bool:
    return trial.status is TrialStatus.RUNNING or trial.paused_by == "suspend"
