"""The TrialRunner: the one event loop that owns every trial of a run.

    searcher --suggest--> +-------------------------------+ <--commands-- Tuner (any thread)
                          |  TrialRunner (its own thread) |
    scheduler <-decide--> |  step():                      | --start/reply--> executor
                          |   1. run queued commands      |
                          |   2. fill free worker slots   | <----poll------- (workers)
                          |   3. look after the workers   |
                          |  handle(events):              |
                          |   4. results, pauses, endings |
                          +-------------------------------+
                             |  calls go down only
            +----------------+-------------+------------------+
            v                v             v                  v
       RunControl        RunEnd         Clocks       (the runner's decisions)
     (user commands)  (the run's end)  (timeouts)
            |                |
            v                v
        Admission: which trial starts next, and where
            |
            v
        Ledger: record, pause, end, checkpoints kept, replies  --> storage, then EventBus
            |
            v
        TrialBook: records, queue, one LiveTrial per live trial (the only writer of both)

Only the runner thread changes a trial (it replaces the immutable `Trial` under a lock); other
threads read snapshots, or send commands that the loop runs between two batches of events.
The runner keeps the loop, the worker events and the decision on each result; each part below
owns its state, and a part that needs the runner to act (a scheduler asking to resume a trial)
leaves a request that the runner carries out, rather than calling back up. What crosses to the
workers is in `nbtune.protocol`. The worker hears the decision on its result first, so that it
goes on while the runner writes the result to disk; subscribers hear of a result only once it
is on disk. The loop blocks in `executor.poll()` when there is nothing to do; a command wakes
it at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from nbtune.admission import Admission
from nbtune.book import TrialBook
from nbtune.clocks import Clocks
from nbtune.code_hash import code_hash
from nbtune.constraints import UNCONSTRAINED, Constraints
from nbtune.control import RunControl
from nbtune.ending import RunEnd
from nbtune.errors import RunEndedError
from nbtune.events import EventBus, TrialResult, TrialRetried
from nbtune.executors._base import Executor
from nbtune.ledger import Ledger
from nbtune.protocol import (
    Decision,
    WorkerDone,
    WorkerEvent,
    WorkerFailed,
    WorkerLost,
    WorkerPaused,
    WorkerResult,
    WorkerStarted,
    WorkerSuspended,
)
from nbtune.resources import TrialResources
from nbtune.run_state import RunFlags, RunState
from nbtune.schedulers._base import Exploit, Scheduler, Stop
from nbtune.search._base import Searcher
from nbtune.space import SearchSpace
from nbtune.stopping import StopCriteria
from nbtune.storage import ExperimentStorage
from nbtune.trial import Trial, TrialStatus


class TrialRunner:
    """Runs one experiment: asks the searcher, obeys the scheduler, drives the executor.

    Create it, call `run()` on a thread of its own, talk to it with `call()` from anywhere;
    read it from any thread through `snapshot()`, `trial()`, `state` and `wait()`.
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
        finish_in_s: float | None = None,
        space_version: int = 0,
        fail_fast: bool = False,
        max_failures: int = 0,
        max_consecutive_failures: int | None = None,
        hold_on_failures: bool = False,
        trial_timeout_s: float | None = None,
        keep_checkpoints: int | None = 2,
        resources: TrialResources | None = None,
        constraints: Constraints = UNCONSTRAINED,
        chdir_to_trial_dir: bool = True,
    ) -> None:
        self.trainable = trainable
        self.searcher = searcher
        self.scheduler = scheduler
        self.executor = executor
        self.metric = metric
        self.should_stop = should_stop
        self.fail_fast = fail_fast
        self.max_failures = max_failures
        self.book = TrialBook()
        self.flags = RunFlags()
        self.clocks = Clocks(self.book, time_budget_s, trial_timeout_s)
        if finish_in_s is not None:
            self.clocks.finish_in(finish_in_s)
        self.ledger = Ledger(
            book=self.book,
            flags=self.flags,
            storage=storage,
            bus=bus,
            executor=executor,
            searcher=searcher,
            scheduler=scheduler,
            should_stop=should_stop,
            space=space,
            metric=metric,
            mode=mode,
            keep_checkpoints=keep_checkpoints,
            constraints=constraints,
        )
        self.admission = Admission(
            ledger=self.ledger,
            flags=self.flags,
            executor=executor,
            searcher=searcher,
            scheduler=scheduler,
            resources=resources or TrialResources(),
            max_concurrent=max_concurrent,
            clocks=self.clocks,
            code=code_hash(trainable),
            chdir_to_trial_dir=chdir_to_trial_dir,
        )
        self.ending = RunEnd(
            ledger=self.ledger,
            flags=self.flags,
            admission=self.admission,
            max_consecutive_failures=max_consecutive_failures,
            hold_on_failures=hold_on_failures,
        )
        self.ledger.space_version = self.admission.space_version = space_version
        self.control = RunControl(
            ledger=self.ledger, admission=self.admission, ending=self.ending, flags=self.flags
        )

        self._lock = threading.RLock()
        self._done = threading.Event()
        self._commands: queue.SimpleQueue[tuple[Callable[[], Any], Future]] = queue.SimpleQueue()
        self._closed = False

    @property
    def storage(self) -> ExperimentStorage:
        return self.ledger.storage

    @property
    def results(self) -> list[Mapping[str, Any]]:
        return self.ledger.results

    def carry_on(self, trials: Sequence[Trial], results: Sequence[Mapping[str, Any]]) -> None:
        """Take over a stopped or crashed run's trials and results (see `Ledger.carry_on`)."""
        self.ledger.carry_on(trials, results)

    # ----- what other threads may read ------------------------------------------------------

    def snapshot(self) -> tuple[tuple[Trial, ...], list[Mapping[str, Any]]]:
        """Every trial's record and every result so far, consistent with each other."""
        with self._lock:
            return tuple(self.book.trials.values()), self.ledger.results[:]

    def trial(self, trial_id: Any) -> Trial:
        """The current record of trial `trial_id` (TrialNotFoundError if there is none)."""
        with self._lock:
            return self.control.trial(trial_id)

    def suggested_trials(self) -> int:
        """How many of the run's trials its searcher suggested."""
        with self._lock:
            return sum(trial.origin == "searcher" for trial in self.book.trials.values())

    @property
    def best_result(self) -> Mapping[str, Any] | None:
        return self.ledger.best_result

    @property
    def max_concurrent(self) -> int:
        return self.admission.max_concurrent

    @property
    def state(self) -> RunState:
        """The run's state; PAUSED while it goes on with nothing running and nothing to start
        by itself (see `RunEnd.holds_every_trial`)."""
        with self._lock:
            if not self._done.is_set() and self.ending.holds_every_trial():
                return RunState.PAUSED
            return self.ending.state

    @property
    def error(self) -> str | None:
        return self.ending.error

    @property
    def held_by(self) -> str | None:
        """Why the run starts no trial by itself, if it holds (see `RunFlags.held_by`)."""
        return self.flags.held_by

    @property
    def crash(self) -> BaseException | None:
        return self.ending.crash

    @property
    def ended(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ends (or `timeout` seconds pass); return whether it ended."""
        return self._done.wait(timeout)

    # ----- talking to the runner from other threads -------------------------------------------

    def call(self, command: Callable[[], Any]) -> Future:
        """Run `command` on the runner thread between two batches of events; return its future."""
        future: Future = Future()
        self._commands.put((command, future))
        self.executor.wakeup()
        if self._closed:
            self._refuse_commands()
        return future

    def apply_command(
        self, name: str, arguments: Mapping[str, Any], command: Callable[[RunControl], Any]
    ) -> Any:
        """Run a user's `command` on the run's `RunControl` (runner thread only), logged as
        `name(**arguments)`; once it has taken effect, save the searcher's and scheduler's
        state with what it changed."""
        result = self.control.apply_command(name, arguments, lambda: command(self.control))
        self.ledger.save_state()
        return result

    def _refuse_commands(self) -> None:
        while not self._commands.empty():
            _, future = self._commands.get_nowait()
            if future.set_running_or_notify_cancel():
                future.set_exception(RunEndedError(f"the run has ended ({self.ending.state})"))

    def request_stop(
        self,
        state: RunState | str = RunState.STOPPED,
        error: str | None = None,
        *,
        hold: bool = False,
        stopped_by: str = "user",
    ) -> None:
        """End the run (see `RunEnd.request`); runner thread only."""
        self.ending.request(RunState(state), error, hold=hold, stopped_by=stopped_by)
        self._apply_scheduler_requests()

    def add_trial(self, config: Mapping[str, Any]) -> int:
        """Queue a hand-picked configuration; return its id. Runner thread only."""
        return self.admission.add_trial(config)

    # ----- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """The runner thread's body: loop until every trial is done or the run is stopped."""
        try:
            self.executor.open(self.trainable, self.admission.max_concurrent)
            try:
                self.clocks.start()
                self.admission.plan()
                while not self.step():
                    self.handle(self.executor.poll(self.clocks.poll_timeout()))
            finally:
                self.executor.close()
        except BaseException as exc:
            self.ending.failed(exc)
        finally:
            self._finish()

    def step(self) -> bool:
        """Everything the loop does between two polls: run the commands, mind the run's time
        budget, start trials, look after the running ones. Returns whether the run is over."""
        with self._lock:
            self._run_commands()
            if self.clocks.budget_spent():
                self.request_stop(RunState.FINISHED, stopped_by=self.clocks.deadline_by)
            if self.flags.ending is None:
                self._fill_slots()
            if self.admission.too_late and not self.book.on_worker():
                self.request_stop(RunState.FINISHED, stopped_by=self.clocks.deadline_by)
            if self.ending.is_over():
                self.ending.over()
                return True
            self._look_after_workers()
            return False

    def handle(self, events: Sequence[WorkerEvent]) -> None:
        """Take in what the workers said, in order."""
        with self._lock:
            for event in events:
                self._handle(event)
                self._apply_scheduler_requests()

    def _run_commands(self) -> None:
        while not self._commands.empty():
            command, future = self._commands.get_nowait()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(command())
            except Exception as exc:
                future.set_exception(exc)
            self._apply_scheduler_requests()

    def _fill_slots(self) -> None:
        """Start trials while there is room (a trial told to stop makes room already)."""
        while self.admission.has_room():
            if self.admission.fill_queue():
                self._apply_scheduler_requests()
            trial = self.admission.choose()
            if trial is None:
                return
            self.admission.launch(trial)

    def _look_after_workers(self) -> None:
        """Give up on trials that ignore the run's end; nudge and time out the others; free a
        worker that a scheduler's pause holds when the run needs it."""
        if self.flags.ending and self.clocks.grace_over(self.flags.ending_since):
            self.ending.give_up_on_the_running()
            self._apply_scheduler_requests()
            return
        self.admission.release_a_held_worker()
        self._end_if_stuck()
        self.ledger.nudge_free_trials()
        self._time_out_silent_trials()
        if self.clocks.directory_check_due():
            self.storage.check()

    def _end_if_stuck(self) -> None:
        """When only trials the scheduler holds paused are left, tell it that nothing else
        will come (HyperBand then judges a bracket that the run will never fill); if it
        resumes none of them, the run ends, saying why."""
        paused = self.ending.stuck_on()
        if not paused:
            return
        self.scheduler.on_queue_empty()
        if not self._apply_scheduler_requests():
            self.ending.end_stuck(paused)

    def _time_out_silent_trials(self) -> None:
        """Kill each trial silent for too long (or write it off) and count it as a failure.

        A killed trial fails once the executor reports it lost, so that its retry never meets
        what is left of the killed attempt.
        """
        for live in self.clocks.silent_too_long():
            killable = self.executor.can_kill_trial or self.executor.can_kill_worker
            error = self.clocks.timeout_error(killed=killable)
            if killable:
                live.killed_for_silence(error)
                self.executor.kill(live.trial_id)
            else:
                self.executor.forget(live.trial_id)
                self._on_failure(live.trial_id, error, error, "")

    # ----- worker events ----------------------------------------------------------------------

    def _handle(self, event: WorkerEvent) -> None:
        trial_id = event.trial_id
        self.book.heard(trial_id, leaving=not isinstance(event, (WorkerResult, WorkerStarted)))
        if isinstance(event, WorkerResult):
            self._on_result(event)
        elif isinstance(event, WorkerDone):
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
        self.ledger.ship_output(trial.trial_id, event.output)
        if trial.status is not TrialStatus.RUNNING:
            self.ledger.stop_if_waiting(event)
            return
        if self.ledger.replayed(trial, event):
            return
        found = self.ledger.problem_in(event.metrics)
        if found is not None:
            self.ledger.stop_if_waiting(event)
            self._fail(trial, found)
            return
        row = trial.next_result(event.timestamp, event.metrics)
        trial = trial.with_result(row, self.metric, self.ledger.mode, returned=event.returned)
        if event.checkpoint is not None:
            trial = self.ledger.with_checkpoint(trial, event.checkpoint)
        decision, stopped_by = self._decide(trial, row)
        if event.waits:
            self.ledger.reply(trial, decision, stopped_by)
        elif decision is not Decision.CONTINUE:
            self.book.live[trial.trial_id].ask(decision, stopped_by)
        self.ledger.log_result(row, returned=event.returned)
        self.ledger.record(trial, journal=event.checkpoint is not None)
        if event.checkpoint is not None:
            self.ledger.keep_checkpoint(trial, row)
        self.searcher.on_result(trial.trial_id, row)
        self.ledger.bus.publish(TrialResult(trial.trial_id, row, event.returned))
        waits_on_scheduler = self._apply_scheduler_requests() or decision is Decision.PAUSE
        if event.waits:
            self.ledger.end_if_stopped(trial.trial_id, decision)
        self.ledger.save_state(now_and_then=not waits_on_scheduler)

    def _decide(self, trial: Trial, row: Mapping[str, Any]) -> tuple[Decision, str | None]:
        """The decision on a result, and who asked for a STOP (see `LiveTrial.stopped_by`;
        None when the scheduler stops the trial at its budget's end): a run that ends comes
        first, then the user's commands, stop criteria, the scheduler.

        The scheduler hears of every result, even one whose fate the user already decided.
        """
        live = self.book.live[trial.trial_id]
        if self.flags.ending is not None:
            return self.flags.ending_decision()
        verdict = self.scheduler.on_result(trial, row)
        pending = live.pending
        if pending is Decision.STOP:
            return Decision.STOP, live.stopped_by
        if self.should_stop(trial.trial_id, row):
            return Decision.STOP, "stop criteria"
        if pending is None and verdict is Decision.STOP:
            return Decision.STOP, None if self.scheduler.at_budget_end(row) else "scheduler"
        return pending or verdict, None

    def _on_done(self, trial_id: int, output: str, stopped_by: str | None = None) -> None:
        """The trial's worker is done with it: a running trial ended, of its own accord unless
        `stopped_by` killed it."""
        self.book.left_worker(trial_id)
        self.ledger.ship_output(trial_id, output)
        trial = self.book[trial_id]
        if trial.status is TrialStatus.RUNNING:
            self.ledger.end(trial, TrialStatus.TERMINATED, stopped_by=stopped_by)

    def _on_paused(self, event: WorkerPaused) -> None:
        """The trial saved a checkpoint and left its worker."""
        trial_id = event.trial_id
        underway = self.book.left_worker(trial_id)
        trial = self.book[trial_id]
        if trial.status is not TrialStatus.RUNNING:
            return
        trial = self.ledger.with_checkpoint(trial, event.checkpoint)
        if underway.stop:
            self.ledger.end(trial, TrialStatus.TERMINATED, stopped_by=underway.stopped_by)
        else:
            self.ledger.to_paused(trial, "checkpoint")
        self.ledger.keep_checkpoint(self.book[trial_id], trial.last_result)
        if not underway.stop and (underway.resume_on_arrival or underway.making_room):
            self.control.resume_trial(trial_id)

    def _on_suspended(self, event: WorkerSuspended) -> None:
        """The trial cannot checkpoint: it waits in its worker for a resume or a stop."""
        trial_id = event.trial_id
        underway = self.book.live[trial_id].suspended()
        trial = self.book[trial_id]
        if trial.status is not TrialStatus.RUNNING:
            return
        if underway.making_room:
            self.ledger.reply(trial, Decision.CONTINUE)
            return
        self.ledger.to_paused(trial, "suspend")
        if underway.stop:
            self.control.stop_trial(trial_id, stopped_by=underway.stopped_by)
        elif self.flags.ending is not None:
            self.ending.leave_suspended(self.book[trial_id])
        elif underway.resume_on_arrival:
            self.control.resume_trial(trial_id)

    def _on_lost(self, event: WorkerLost) -> None:
        """A lost worker: a failure of its trial (or its timeout), unless a bystander's or one
        the user asked to stop (a forced stop kills the worker)."""
        live = self.book.live.get(event.trial_id)
        timed_out = live.timed_out if live is not None else None
        if live is not None and timed_out is None and live.pending is Decision.STOP:
            self._on_done(event.trial_id, "", live.stopped_by)
            return
        error = timed_out or f"WorkerLost: {event.error}"
        self._on_failure(event.trial_id, error, event.error, "", bystander=event.bystander)

    def _on_failure(
        self, trial_id: int, error: str, traceback: str, output: str, *, bystander: bool = False
    ) -> None:
        underway = self.book.left_worker(trial_id)
        self.ledger.ship_output(trial_id, output)
        trial = self.book[trial_id]
        if not trial.holds_worker:
            return
        if self.flags.ending is not None and self.flags.holds_trials:
            self.ledger.to_paused(trial, trial.waits_by)
            return
        if bystander and self.flags.ending is None:
            if underway.stop:
                self.ledger.end(trial, TrialStatus.TERMINATED, stopped_by=underway.stopped_by)
            else:
                self.ledger.restart_first(trial)
            return
        if trial.attempts > self.max_failures or self.flags.ending is not None or underway.stop:
            self._fail(trial, error, traceback)
            return
        self.storage.append_error(
            trial_id, f"attempt {trial.attempts} (retried): {traceback or error}\n"
        )
        self.ledger.restart_first(trial, attempts=trial.attempts + 1)
        self.ledger.bus.publish(TrialRetried(trial_id, trial.attempts + 1, error))

    def _fail(self, trial: Trial, error: str, traceback: str = "") -> None:
        """End the trial as ERROR; with `fail_fast`, the run ends with it."""
        self.ledger.end(trial, TrialStatus.ERROR, error, traceback)
        self.ending.after_failure()
        if self.fail_fast:
            self.request_stop(
                RunState.FAILED,
                f"trial {trial.trial_id} failed ({error}); fail_fast=True",
                stopped_by="fail fast",
            )

    # ----- the scheduler's requests -----------------------------------------------------------

    def _apply_scheduler_requests(self) -> bool:
        """Carry out what the scheduler asked beyond its decision on one trial; say if it asked.

        Requests about trials that ended meanwhile lapse, and a trial the user paused stays
        paused until the user resumes it.
        """
        requests = self.scheduler.take_requests()
        for request in requests:
            if isinstance(request, Exploit):
                self.admission.fork_when_replaced_ends(request)
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
        if requests:
            self._apply_scheduler_requests()
        return bool(requests)

    def _finish(self) -> None:
        self._closed = True
        self._refuse_commands()
        self.ending.finish()
        self._done.set()
