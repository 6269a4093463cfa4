"""The TrialRunner: the one event loop that owns every trial of a run.

    searcher --suggest--> +-------------------------------+ <--commands-- Tuner (any thread)
                          |  TrialRunner (its own thread) |     (carried out by RunControl)
    scheduler <-decide--> |  step():                      |
                          |   1. run queued commands      | --start/reply--> executor
                          |   2. fill free worker slots   |
                          |   3. look after the workers   |
                          |  handle(events):              | <----poll------- (workers)
                          |   4. results, pauses, endings |
                          +-------------------------------+
                           | TrialBook: records, queue,   | append, then publish
                           | one LiveTrial per live trial |        v
                           +------------------------------+  storage (disk) --> EventBus
                                                              --> progress, dashboard, callbacks

Only the runner thread changes a trial (it replaces the immutable `Trial` under a lock); other
threads read snapshots, or send commands that the loop runs between two batches of events.
Every fact about a trial lives in the runner's `TrialBook` (`nbtune.book`): its record, its
place in the queue, and one `LiveTrial` of runtime facts while it is live. What the user can
ask of a trial is in `nbtune.control`; what crosses to the workers, in `nbtune.protocol`.
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

from nbtune import objectives
from nbtune.book import LiveTrial, TrialBook
from nbtune.control import RunControl
from nbtune.errors import RunEndedError
from nbtune.events import (
    EventBus,
    ExperimentDone,
    TrialAdded,
    TrialCompleted,
    TrialErrored,
    TrialOutput,
    TrialPaused,
    TrialResult,
    TrialRetried,
    TrialStarted,
)
from nbtune.executors._base import Executor
from nbtune.metrics import problem
from nbtune.protocol import (
    Decision,
    TrialLaunch,
    WorkerDone,
    WorkerEvent,
    WorkerFailed,
    WorkerLost,
    WorkerPaused,
    WorkerResult,
    WorkerSuspended,
)
from nbtune.resources import TrialResources
from nbtune.retention import CheckpointRetention
from nbtune.schedulers._base import Exploit, Scheduler, Stop
from nbtune.search._base import Searcher
from nbtune.space import SearchSpace
from nbtune.stopping import StopCriteria
from nbtune.storage import ExperimentStorage
from nbtune.trial import Trial, TrialStatus, better_of

_IDLE_POLL_S = 1.0
_STOP_GRACE_S = 10.0
_SAVE_STATE_EVERY_S = 1.0
_CHECK_DIRECTORY_EVERY_S = 0.5
"""How often the loop makes sure that the experiment directory is still there."""
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
        metric: str | list[str] | None,
        mode: str | list[str],
        max_concurrent: int,
        should_stop: StopCriteria,
        space: SearchSpace,
        time_budget_s: float | None = None,
        fail_fast: bool = False,
        max_failures: int = 0,
        trial_timeout_s: float | None = None,
        keep_checkpoints: int | None = 2,
        resources: TrialResources | None = None,
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
        self.space = space
        self.time_budget_s = time_budget_s
        self.fail_fast = fail_fast
        self.max_failures = max_failures
        self.trial_timeout_s = trial_timeout_s
        self.resources = resources or TrialResources()

        self.state = "running"
        self.error: str | None = None
        self.crash: BaseException | None = None
        self.ended_at: float | None = None
        self.done = threading.Event()
        self.lock = threading.RLock()
        self.book = TrialBook()
        self.trials = self.book.trials
        self.control = RunControl(self)
        self.retention = CheckpointRetention(
            keep_checkpoints, objectives.single(metric), mode, storage.checkpoint_dir
        )
        self.results: list[Mapping[str, Any]] = []
        self.best_result: Mapping[str, Any] | None = None

        self._best_value: float | None = None
        self._commands: queue.SimpleQueue[tuple[Callable[[], Any], Future]] = queue.SimpleQueue()
        self._stopping: str | None = None
        self._stopped_by = "user"
        self._searcher_waits = False
        """The searcher had nothing to give at its last ask (a `ConcurrencyLimiter` at its cap)."""
        self._stopping_since = 0.0
        self._holds_trials = False
        self._closed = False
        self._state_saved_at = -math.inf
        self._directory_checked_at = -math.inf

    def carry_on(self, trials: Sequence[Trial], results: Sequence[Mapping[str, Any]]) -> None:
        """Take over a stopped or crashed run's trials and results (before `run()`).

        Finished trials stay as they were. Every other one goes back to the queue, to start
        again from its latest checkpoint (or from scratch): the results it reported after that
        checkpoint are already in the log, so when it reports them again they are replayed
        silently rather than recorded twice. Those the scheduler holds stay PAUSED.
        """
        rows_of: dict[int, dict[int, Mapping[str, Any]]] = {}
        for row in results:
            self.results.append(row)
            self._track_best(row)
            rows_of.setdefault(row["trial_id"], {})[row["training_iteration"]] = row
        held = self.scheduler.restore(trials)
        for trial in trials:
            self.retention.restored(trial.trial_id, rows_of.get(trial.trial_id, {}))
            if trial.status.is_finished:
                self.book.put(trial)
                continue
            restarted = self._restarted(trial, journal=False, started_at=None)
            if trial.trial_id in held:
                paused = restarted.evolve(status=TrialStatus.PAUSED, paused_by=trial.waits_by)
                self.book.put(paused)
                continue
            self.book.enqueue(trial.trial_id, "last")

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
        self,
        state: str = "stopped",
        error: str | None = None,
        *,
        hold: bool = False,
        stopped_by: str = "user",
    ) -> None:
        """End the run: no trial starts any more, running ones stop at their next report.

        Trials paused by checkpoint stay PAUSED, to be resumed by `Tuner.restore`. With `hold`,
        running trials pause instead of ending, and suspended ones give back their worker and
        stay PAUSED, so that `restore` carries every one of them on; without it, suspended
        trials cannot be saved, so they end here, recorded as stopped by `stopped_by` (see
        `Trial.stopped_by`).
        """
        if self._stopping is not None:
            return
        self._stopping = state
        self._stopped_by = stopped_by
        self._stopping_since = time.monotonic()
        self.error = error
        self._holds_trials = hold or self.control.paused_all  # pause_all() first keeps them
        for trial in self.book:
            if trial.paused_by == "suspend":
                self._leave_suspended(trial)

    def _leave_suspended(self, trial: Trial) -> None:
        """A suspended trial of a run that ends: released and held, or ended."""
        if not self._holds_trials:
            self.control.stop_trial(trial.trial_id, stopped_by=self._stopped_by)
            return
        self.reply(trial, Decision.STOP)
        self.record(trial.evolve(paused_by=trial.waits_by))

    def holds_every_trial(self) -> bool:
        """Whether the run goes on but nothing runs and nothing will start by itself: Pause all
        holds it and no trial runs any more (a trial added meanwhile waits), or every
        unfinished trial is PAUSED and no new one starts (see `_starts_none`). Any thread
        may ask."""
        with self.lock:
            if self.state != "running" or self._stopping is not None or self.done.is_set():
                return False
            if self.control.paused_all:
                return all(trial.status is not TrialStatus.RUNNING for trial in self.book)
            unfinished = [trial for trial in self.book if not trial.status.is_finished]
            paused = all(trial.status is TrialStatus.PAUSED for trial in unfinished)
            return bool(unfinished) and paused and self._starts_none()

    def _starts_none(self) -> bool:
        """Whether no new trial starts while the paused ones stay paused: the searcher has
        nothing left (or nothing now), or trials the user suspended hold every worker."""
        if self.searcher.is_finished or self._searcher_waits:
            return True
        held = [live for live in self.book.live.values() if live.on_worker]
        return len(held) >= self.max_concurrent and all(live.user_paused for live in held)

    # ----- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """The runner thread's body: loop until every trial is done or the run is stopped."""
        try:
            self.executor.open(self.trainable, self.max_concurrent)
            try:
                self._plan()
                self._loop()
            finally:
                self.executor.close()
        except BaseException as exc:
            self.crash = exc
            self.state = "failed"
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._finish()

    def extend(self, num_samples: int) -> None:
        """Let the searcher suggest `num_samples` more trials, and tell the scheduler."""
        self.searcher.extend(num_samples)
        self._plan()

    def _plan(self) -> None:
        """Tell the scheduler how many trials the run plans (unless a time budget may end it
        sooner), and whether its searcher learns from them."""
        planned = self.searcher.planned_trials if self.time_budget_s is None else None
        self.scheduler.plan(planned, model_based=self.searcher.learns)

    def _loop(self) -> None:
        deadline = None if self.time_budget_s is None else time.monotonic() + self.time_budget_s
        while not self.step(deadline):
            self.handle(self.executor.poll(self._poll_timeout(deadline)))

    def step(self, deadline: float | None = None) -> bool:
        """Everything the loop does between two polls: run the commands, mind the run's
        `deadline`, start trials, look after the running ones. Returns whether the run is over.
        """
        with self.lock:
            self._run_commands()
            if deadline is not None and time.monotonic() >= deadline:
                self.request_stop("finished", stopped_by="time budget")
            if self._stopping is None:
                self._fill_slots()
            if self._is_over():
                self.state = self._stopping or "finished"
                return True
            self._look_after_workers()
            return False

    def handle(self, events: Sequence[WorkerEvent]) -> None:
        """Take in what the workers said, in order."""
        with self.lock:
            for event in events:
                self._handle(event)

    def _is_over(self) -> bool:
        """No worker holds a trial, and the run was stopped or has nothing left to run."""
        if self.book.on_worker():
            return False
        if self._stopping is not None:
            return True
        if self.book.queue or not self.searcher.is_finished:
            return False
        return all(trial.status is not TrialStatus.PAUSED for trial in self.book)

    def _look_after_workers(self) -> None:
        """Give up on trials that ignore the run's end; nudge and time out the others; free a
        worker that a scheduler's pause holds when the run needs it."""
        if self._stopping and time.monotonic() - self._stopping_since > _STOP_GRACE_S:
            self._abandon_running()
            return
        self._release_a_held_worker()
        self._end_if_stuck()
        self._nudge_free_trials()
        self._time_out_silent_trials()
        now = time.monotonic()
        if now - self._directory_checked_at >= _CHECK_DIRECTORY_EVERY_S:
            self._directory_checked_at = now
            self.storage.check()

    def _release_a_held_worker(self) -> None:
        """A trial that the scheduler paused without a checkpoint of that step waits in its
        worker (suspended). When every worker is taken and another trial waits to run, one such
        trial gives its worker back: it stays PAUSED, to resume from its latest checkpoint (or
        from scratch) and repeat the steps since, whose results are replayed, not recorded."""
        if self._stopping is not None or self.control.paused_all:
            return
        if self.book.slots_taken() < self.max_concurrent:
            return
        if not self.book.queue and self.searcher.is_finished:
            return
        held = [
            self.book[trial_id]
            for trial_id, live in self.book.live.items()
            if self.book[trial_id].paused_by == "suspend" and not live.user_paused
        ]
        if held:
            trial = held[0]
            self.reply(trial, Decision.STOP)
            self._restarted(trial, status=TrialStatus.PAUSED, paused_by=trial.waits_by)

    def _end_if_stuck(self) -> None:
        """End the run, saying why, when only trials that the scheduler holds paused are left
        and it resumes none of them (a user's pause waits for the user). They stay PAUSED,
        for `Tuner.restore` to carry on."""
        if self._stopping is not None or self.book.queue or not self.searcher.is_finished:
            return
        paused = [
            self.book[trial_id]
            for trial_id in self.book.live
            if self.book[trial_id].status is TrialStatus.PAUSED
        ]
        if not paused or any(self.book.live[t.trial_id].user_paused for t in paused):
            return
        if any(self.book[trial_id].paused_by != "suspend" for trial_id in self.book.on_worker()):
            return
        names = ", ".join(str(trial.trial_id) for trial in paused)
        self.request_stop(
            "failed",
            f"the run cannot go on: {type(self.scheduler).__name__} holds trials {names} paused "
            "and resumes none of them; nothing else is left to run",
            hold=True,
        )

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
                future.set_result(command())
            except Exception as exc:
                future.set_exception(exc)

    # ----- starting trials --------------------------------------------------------------------

    def _fill_slots(self) -> None:
        """Start trials while there is room (a trial told to stop makes room already)."""
        while not self.control.paused_all and self._has_room():
            trial = self._next_trial()
            if trial is None:
                return
            self._launch(trial)

    def _has_room(self) -> bool:
        """Whether one more trial may start: under `max_concurrent`, under what the machine's
        CPUs and GPUs hold (`resources_per_trial`), and with its GPUs free."""
        limit = self.max_concurrent
        if not self.executor.schedules_resources:
            fits = self.resources.at_once(self.executor.cpus(), len(self.executor.gpus()))
            limit = min(limit, fits or limit)
        return self.book.slots_taken() < limit and self._free_gpus() is not None

    def _free_gpus(self) -> str | None:
        """The GPUs for the next trial ("" when it asks for none); None if too few are free.
        A trial told to stop holds its GPUs until its worker lets go of it."""
        if self.executor.schedules_resources or not self.resources.gpu:
            return ""
        taken = [self.book[trial_id].gpus or "" for trial_id in self.book.on_worker()]
        return self.resources.pick(self.executor.gpus(), taken)

    def _next_trial(self) -> Trial | None:
        self._ask_searcher()
        if not self.book.queue:
            self.scheduler.on_queue_empty()
            self._apply_scheduler_requests()
        waiting = self.book.waiting()
        chosen = self.scheduler.choose_trial_to_run(waiting) if waiting else None
        if chosen is not None:
            self.book.queue.remove(chosen.trial_id)
        return chosen

    def _ask_searcher(self) -> None:
        """Queue the searcher's next trial when none waits; for a scheduler that shares time
        among its trials, every trial the searcher plans (where it can say how many)."""
        queue_all = self.scheduler.shares_time and self.searcher.planned_trials is not None
        while not self.searcher.is_finished and (queue_all or not self.book.queue):
            config = self.searcher.suggest(len(self.book))
            self._searcher_waits = config is None
            if config is None:
                return
            self.add_trial(config, origin="searcher")
            if not queue_all:
                return

    def add_trial(
        self, config: Mapping[str, Any], *, parent: Trial | None = None, origin: str = "user"
    ) -> int:
        """Create a PENDING trial and queue it; return its id. Runner thread only.

        A trial forked from `parent` starts from the parent's latest checkpoint, and waits
        ahead of fresh trials.
        """
        trial = Trial(trial_id=len(self.book), config=dict(config), origin=origin)
        if parent is not None:
            trial = trial.evolve(
                parent=parent.trial_id,
                checkpoint=parent.checkpoint,
                checkpoint_iteration=parent.checkpoint_iteration,
                iteration=parent.checkpoint_iteration,
            )
        self.record(trial)
        self.book.enqueue(trial.trial_id, "last" if parent is None else "ahead")
        self.scheduler.on_trial_add(trial)
        if origin != "searcher":
            self.searcher.on_trial_add(trial.trial_id, trial.config)
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

    def _launch(self, trial: Trial) -> None:
        """Send the trial to a worker, then journal it as running (a crash in between leaves
        it pending, which is just as true: it has reported nothing yet).

        The trial starts from its latest checkpoint (or from scratch): results it logged after
        that checkpoint will be replayed, not recorded twice.
        """
        restart = trial.checkpoint_iteration or 0
        live = self.book.live[trial.trial_id]
        if trial.iteration > restart:
            live.replay_until = max(trial.iteration, live.replay_until or 0)
        gpus = self._free_gpus() or None
        trial = trial.evolve(
            status=TrialStatus.RUNNING, iteration=restart, started_at=time.time(), gpus=gpus
        )
        live.on_worker = True
        live.heard_at = time.monotonic()
        self.executor.start(
            TrialLaunch(
                trial_id=trial.trial_id,
                config=trial.config,
                iteration=trial.checkpoint_iteration or 0,
                checkpoint_path=self._absolute(trial.checkpoint),
                checkpoint_dir=str(self.storage.checkpoint_dir(trial.trial_id)),
                capture_output=self.executor.captures_output,
                metric=self.metric,
                threads=self._threads(),
                gpus=gpus if self.resources.gpu and not self.executor.schedules_resources else None,
            )
        )
        self.record(trial)
        self.bus.publish(TrialStarted(trial.trial_id, trial.checkpoint_iteration))

    def _threads(self) -> int | None:
        """The thread pools of a trial in a process of its own: its CPUs, or an even share."""
        if not self.executor.isolates_trials:
            return None
        return self.resources.threads(self.executor.cpus(), self.max_concurrent)

    def _absolute(self, checkpoint: str | None) -> str | None:
        return None if checkpoint is None else str(self.storage.path / checkpoint)

    # ----- worker events ----------------------------------------------------------------------

    def _handle(self, event: WorkerEvent) -> None:
        trial_id = event.trial_id
        self.book.facts(trial_id).heard_at = time.monotonic()
        if isinstance(event, WorkerResult):
            self._on_result(event)
            return
        self.book.facts(trial_id).reporting_freely = False
        if isinstance(event, WorkerDone):
            self._on_done(trial_id, event.output)
        elif isinstance(event, WorkerPaused):
            self._on_paused(event)
        elif isinstance(event, WorkerSuspended):
            self._on_suspended(event)
        elif isinstance(event, WorkerFailed):
            self._on_failure(trial_id, event.error, event.traceback, event.output)
        elif isinstance(event, WorkerLost):
            self._on_lost(event)

    def _on_result(self, event: WorkerResult) -> None:
        trial = self.book[event.trial_id]
        self._ship_output(trial.trial_id, event.output)
        if trial.status is not TrialStatus.RUNNING:
            self._stop_if_waiting(event)
            return
        if self._replayed(trial, event):
            return
        problem = self._check_metrics(event.metrics)
        if problem is not None:
            self._stop_if_waiting(event)
            self.end(trial, TrialStatus.ERROR, problem, traceback="")
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
            self.reply(trial, decision)
        elif decision is not Decision.CONTINUE:
            live = self.book.live[trial.trial_id]
            live.ask(decision, live.stopped_by)
        self.storage.append_result(row)
        self.results.append(row)
        self.record(trial, journal=event.checkpoint is not None)
        if event.checkpoint is not None:
            self._retain(trial, row)
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
        live = self.book.live[trial.trial_id]
        if live.replay_until is None:
            return False
        iteration = trial.iteration + 1
        if iteration >= live.replay_until:
            live.replay_until = None
        trial = trial.evolve(iteration=iteration)
        if event.checkpoint is not None:
            trial = self._with_checkpoint(trial, event.checkpoint)
        self.record(trial, journal=event.checkpoint is not None)
        if event.checkpoint is not None:
            self._retain(trial, {})
        if event.waits:
            ending = self._stopping is not None
            decision = self._ending_decision(live) if ending else Decision.CONTINUE
            self.reply(trial, decision)
            self._end_if_stopped(trial.trial_id, decision)
        return True

    def _decide(self, trial: Trial, row: Mapping[str, Any]) -> Decision:
        """A run that ends comes first, then the user's commands, stop criteria, the scheduler;
        a STOP records who asked for it (`LiveTrial.stopped_by`), none when the scheduler stops
        the trial at its budget's end.

        The scheduler hears of every result, even one whose fate the user already decided.
        """
        live = self.book.live[trial.trial_id]
        if self._stopping is not None:
            return self._ending_decision(live)
        verdict = self.scheduler.on_result(trial, row)
        pending = live.pending
        if pending is Decision.STOP:
            return Decision.STOP
        if self.should_stop(trial.trial_id, row):
            return _stop(live, "stop criteria")
        if pending is None and verdict is Decision.STOP:
            if self.scheduler.at_budget_end(row):
                return _stop(live, None)
            return _stop(live, "scheduler")
        return pending or verdict

    def _ending_decision(self, live: LiveTrial) -> Decision:
        """What a trial does at its report once the run ends: pause if held, else stop (for
        the run's reason, unless a stop was asked for it already)."""
        if self._holds_trials:
            return Decision.PAUSE
        if live.pending is Decision.STOP:
            return Decision.STOP
        return _stop(live, self._stopped_by)

    def reply(self, trial: Trial, decision: Decision) -> None:
        """Send the decision on a result that waits for it (or to a suspended trial), and how
        many next results need not wait (see `nbtune.session.TrialSession.report`)."""
        trial_id = trial.trial_id
        live = self.book.live[trial_id]
        if decision is not Decision.CONTINUE:
            live.told = decision
            if decision is Decision.STOP or live.pending is decision:
                live.pending = None
        free_steps = self._free_steps(trial) if decision is Decision.CONTINUE else 0
        live.reporting_freely = free_steps > 0
        self.executor.reply(trial_id, decision, free_steps)

    def _end_if_stopped(self, trial_id: int, decision: Decision) -> None:
        """A trial told to stop has ended: its results are all in, and its worker is taken
        for the next trial while it winds down (it holds the run open until then)."""
        if decision is Decision.STOP:
            stopped_by = self.book.live[trial_id].stopped_by
            self.end(self.book[trial_id], TrialStatus.TERMINATED, stopped_by=stopped_by)

    def _stop_if_waiting(self, event: WorkerResult) -> None:
        """Stop a trial the run is done with; one that does not wait is nudged (see
        `_nudge_free_trials`)."""
        if event.waits:
            self.reply(self.book[event.trial_id], Decision.STOP)

    def _free_steps(self, trial: Trial) -> int:
        """How many results the trial may send after this one without waiting for an answer:
        none while the runner has something to tell it or replays its results, else as many
        as neither the scheduler nor the stop criteria can act on."""
        trial_id = trial.trial_id
        if self._must_answer(trial_id) or self.book.live[trial_id].replay_until is not None:
            return 0
        free_steps = self.scheduler.free_steps(trial), self.should_stop.free_steps(trial.iteration)
        return min(*free_steps, _MAX_FREE_STEPS)

    def _must_answer(self, trial_id: int) -> bool:
        """Whether the trial's next result must wait: the runner will not answer CONTINUE."""
        return (
            self._stopping is not None
            or self.book.live[trial_id].pending is not None
            or self.book[trial_id].status is not TrialStatus.RUNNING
        )

    def _nudge_free_trials(self) -> None:
        """Make the next report of each trial that need not wait, but that the runner now
        has something to tell (a pause, a stop, the run's end), wait for the answer."""
        for trial_id, live in list(self.book.live.items()):
            if live.reporting_freely and self._must_answer(trial_id):
                live.reporting_freely = False
                self.executor.nudge(trial_id)

    def _check_metrics(self, metrics: Mapping[str, Any]) -> str | None:
        for name in objectives.names(self.metric):
            found = problem(metrics, name, "the metric")
            if found is not None:
                return found
        return self.scheduler.check_result(metrics)

    def _track_best(self, row: Mapping[str, Any]) -> None:
        if objectives.single(self.metric) is None:
            return
        value = better_of(self._best_value, row.get(self.metric), self.mode)
        if value != self._best_value:
            self._best_value = value
            self.best_result = row

    def _on_done(self, trial_id: int, output: str, stopped_by: str | None = None) -> None:
        """The trial's worker is done with it: a running trial ended, of its own accord unless
        `stopped_by` killed it."""
        self.book.left_worker(trial_id)
        self._ship_output(trial_id, output)
        trial = self.book[trial_id]
        if trial.status is TrialStatus.RUNNING:
            self.end(trial, TrialStatus.TERMINATED, stopped_by=stopped_by)

    def _on_paused(self, event: WorkerPaused) -> None:
        """The trial saved a checkpoint and left its worker."""
        trial_id = event.trial_id
        live = self.book.facts(trial_id)
        requeue, resume, stop = live.making_room, live.resume_on_arrival, live.pending
        stopped_by = live.stopped_by
        self.book.left_worker(trial_id)
        trial = self.book[trial_id]
        if trial.status is not TrialStatus.RUNNING:
            return
        trial = self._with_checkpoint(trial, event.checkpoint)
        if stop is Decision.STOP:
            self.end(trial, TrialStatus.TERMINATED, stopped_by=stopped_by)
        else:
            self.to_paused(trial, "checkpoint")
        self._retain(self.book[trial_id], trial.last_result)
        if stop is not Decision.STOP and (resume or requeue):
            self.control.resume_trial(trial_id)

    def _on_suspended(self, event: WorkerSuspended) -> None:
        """The trial cannot checkpoint: it waits in its worker for a resume or a stop."""
        trial_id = event.trial_id
        live = self.book.facts(trial_id)
        requeue, resume, stop = live.making_room, live.resume_on_arrival, live.pending
        stopped_by = live.stopped_by
        live.making_room = live.resume_on_arrival = False
        live.told = live.pending = live.stopped_by = None
        trial = self.book[trial_id]
        if trial.status is not TrialStatus.RUNNING:
            return
        if requeue:
            self.reply(trial, Decision.CONTINUE)
            return
        self.to_paused(trial, "suspend")
        if stop is Decision.STOP:
            self.control.stop_trial(trial_id, stopped_by=stopped_by)
        elif self._stopping is not None:
            self._leave_suspended(self.book[trial_id])
        elif resume:
            self.control.resume_trial(trial_id)

    def _restarted(
        self,
        trial: Trial,
        *,
        journal: bool = True,
        status: TrialStatus = TrialStatus.PENDING,
        paused_by: str | None = None,
        **changes: Any,
    ) -> Trial:
        """`trial` back to PENDING (or `status`), to start again at its next launch from its
        latest checkpoint, or from scratch (see `_launch`)."""
        restarted = trial.evolve(status=status, paused_by=paused_by, **changes)
        self.record(restarted, journal=journal)
        return restarted

    def to_paused(self, trial: Trial, paused_by: str) -> None:
        """Record the trial PAUSED (`paused_by` says how it waits) and say so on the bus."""
        paused = trial.evolve(status=TrialStatus.PAUSED, paused_by=paused_by)
        self.record(paused.evolve(**_runtime_banked(trial)))
        self.bus.publish(TrialPaused(trial.trial_id))

    def _on_lost(self, event: WorkerLost) -> None:
        """A lost worker: a failure of its trial (or its timeout), unless a bystander's or one
        the user asked to stop (a forced stop kills the worker)."""
        live = self.book.facts(event.trial_id)
        timed_out = live.timed_out
        if timed_out is None and live.pending is Decision.STOP:
            self._on_done(event.trial_id, "", live.stopped_by)
            return
        error = timed_out or f"WorkerLost: {event.error}"
        self._on_failure(event.trial_id, error, event.error, "", bystander=event.bystander)

    def _on_failure(
        self, trial_id: int, error: str, traceback: str, output: str, *, bystander: bool = False
    ) -> None:
        live = self.book.facts(trial_id)
        stop_asked, stopped_by = live.pending is Decision.STOP, live.stopped_by
        self.book.left_worker(trial_id)
        self._ship_output(trial_id, output)
        trial = self.book[trial_id]
        if not _holds_worker(trial):
            return
        if self._stopping is not None and self._holds_trials:
            self.to_paused(trial, trial.waits_by)
            return
        if bystander and self._stopping is None:
            if stop_asked:
                self.end(trial, TrialStatus.TERMINATED, stopped_by=stopped_by)
            else:
                self._restart_first(trial)
            return
        if trial.attempts > self.max_failures or self._stopping is not None or stop_asked:
            self.end(trial, TrialStatus.ERROR, error, traceback)
            return
        self.storage.append_text(
            trial_id, "error.txt", f"attempt {trial.attempts} (retried): {traceback or error}\n"
        )
        self._restart_first(trial, attempts=trial.attempts + 1)
        self.bus.publish(TrialRetried(trial_id, trial.attempts + 1, error))

    def _restart_first(self, trial: Trial, **changes: Any) -> None:
        """Queue `trial` first, to start again from its latest checkpoint (see `_restarted`);
        a trial the user paused waits paused instead."""
        restarted = self._restarted(trial, **changes, **_runtime_banked(trial))
        if self.book.live[trial.trial_id].user_paused:
            self.to_paused(restarted, restarted.waits_by)
        else:
            self.book.enqueue(trial.trial_id, "first")

    def end(
        self,
        trial: Trial,
        status: TrialStatus,
        error: str | None = None,
        traceback: str = "",
        *,
        stopped_by: str | None = None,
    ) -> None:
        """End the trial (TERMINATED or ERROR) and tell the scheduler, the searcher and the bus;
        `stopped_by` says who cut a TERMINATED trial short (`Trial.stopped_by`)."""
        stopped_by = stopped_by if status is TrialStatus.TERMINATED else None
        trial = trial.evolve(
            status=status,
            error=error,
            paused_by=None,
            stopped_by=stopped_by,
            **_runtime_banked(trial),
        )
        self.record(trial)
        waiting_fork = self.book.ended(trial.trial_id)
        if waiting_fork is not None:
            self.scheduler.request(waiting_fork)
        last = trial.last_result or None
        if status is TrialStatus.TERMINATED:
            self.scheduler.on_trial_complete(trial)
            if trial.cut_short:
                self.searcher.on_pruned(trial.trial_id)
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
            self.request_stop(
                "failed",
                f"trial {trial.trial_id} failed ({error}); fail_fast=True",
                stopped_by="fail fast",
            )

    # ----- trials that hang ---------------------------------------------------------------------

    def _first_trial_deadline(self) -> float | None:
        timed = self.book.on_the_clock() if self.trial_timeout_s is not None else []
        if not timed:
            return None
        return min(live.heard_at for live in timed) + self.trial_timeout_s

    def _time_out_silent_trials(self) -> None:
        """Kill each trial silent for too long (or write it off) and count it as a failure.

        A killed trial fails once the executor reports it lost, so that its retry never meets
        what is left of the killed attempt.
        """
        if self.trial_timeout_s is None:
            return
        now = time.monotonic()
        for live in self.book.on_the_clock():
            if now - live.heard_at < self.trial_timeout_s:
                continue
            killable = self.executor.can_kill_trial or self.executor.can_kill_worker
            error = (
                f"TrialTimeout: no report for {self.trial_timeout_s:g} s (trial_timeout_s); "
                f"the trial was {'killed' if killable else 'abandoned in its worker'}"
            )
            if killable:
                live.timed_out = error
                self.executor.kill(live.trial_id)
            else:
                self.executor.forget(live.trial_id)
                self._on_failure(live.trial_id, error, error, "")

    def _abandon_running(self) -> None:
        """Trials that ignored the stop for the grace period end where they are."""
        for trial_id in self.book.on_worker():
            trial = self.book[trial_id]
            if trial.status is not TrialStatus.RUNNING:
                self.book.left_worker(trial_id)
            elif self._holds_trials:
                self.book.left_worker(trial_id)
                self.to_paused(trial, trial.waits_by)
            else:
                stopped_by = self.book.live[trial_id].stopped_by or self._stopped_by
                self.end(trial, TrialStatus.TERMINATED, stopped_by=stopped_by)
                self.book.left_worker(trial_id)

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
            trial = self.book.trials.get(request.trial_id)
            if trial is None or trial.status.is_finished:
                continue
            if isinstance(request, Stop):
                self.control.stop_trial(request.trial_id, stopped_by="scheduler")
            elif (
                trial.status is not TrialStatus.PENDING
                and not self.book.live[request.trial_id].user_paused
            ):
                self.control.resume_trial(request.trial_id)
        return bool(requests)

    def _fork_when_replaced_ends(self, request: Exploit) -> None:
        """Fork for the scheduler; the fork waits for the trial it replaces to end, so the
        population never grows."""
        replaced = self.book.trials.get(request.replaces) if request.replaces is not None else None
        if replaced is not None and not replaced.status.is_finished:
            self.book.live[replaced.trial_id].fork_waiting = request
            return
        self.add_trial(
            request.config, parent=self.control.trial(request.source), origin="scheduler"
        )

    def _ship_output(self, trial_id: int, output: str) -> None:
        if output:
            self.storage.append_text(trial_id, "output.log", output)
            self.bus.publish(TrialOutput(trial_id, output))

    # ----- bookkeeping ------------------------------------------------------------------------

    def record(self, trial: Trial, *, journal: bool = True) -> None:
        """Store the trial's newest record (journaled on disk unless `journal` is False)."""
        self.book.put(trial)
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

    def _retain(self, trial: Trial, row: Mapping[str, Any]) -> None:
        """Keep the trial's new checkpoint (taken at `row`), and delete those that fall out of
        `keep_checkpoints` unless a trial's record still points to them."""
        in_use = [self._absolute(t.checkpoint) for t in self.book if t.checkpoint is not None]
        path = Path(self._absolute(trial.checkpoint))
        self.retention.stored(trial.trial_id, path, trial.checkpoint_iteration, row, in_use)

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


def _runtime_banked(trial: Trial) -> dict[str, Any]:
    """The changes that close a stretch of running: its time added up, no start time."""
    if trial.started_at is None or trial.status is not TrialStatus.RUNNING:
        return {}
    return {
        "runtime_s": trial.runtime_s + max(0.0, time.time() - trial.started_at),
        "started_at": None,
    }


def _stop(live: LiveTrial, stopped_by: str | None) -> Decision:
    """A STOP for the trial of `live`, asked for by `stopped_by` (None: its budget's end)."""
    live.stopped_by = stopped_by
    return Decision.STOP


def _holds_worker(trial: Trial) -> bool:
    return trial.status is TrialStatus.RUNNING or trial.paused_by == "suspend"
