"""The ledger of a run: what the runner writes down, and what it tells a worker.

Every change to a trial's record goes through here: a result recorded (on disk before anyone
hears of it), a trial paused, restarted or ended, a checkpoint kept or let go, a decision
replied to a worker with the results it may send before the next answer. The ledger keeps
the run's result log in memory too, and its best result.

    runner / control / admission / the run's end
              |  record, to_paused, end, stop, reply, keep_checkpoint
              v
           Ledger ---> TrialBook (records, queue, live facts)
              |------> storage (journal, result log)  ---> then the EventBus
              |------> scheduler and searcher (told of every end)
              '------> executor (replies)

It calls nothing above it: what the scheduler asks in return (a resume, a stop, a fork) waits
in the scheduler's requests until the runner carries them out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nbtune import objectives
from nbtune.book import TrialBook
from nbtune.constraints import UNCONSTRAINED, Constraints
from nbtune.events import EventBus, TrialCompleted, TrialErrored, TrialOutput, TrialPaused
from nbtune.executors._base import Executor
from nbtune.metrics import finite, problem
from nbtune.protocol import Decision, WorkerResult
from nbtune.retention import CheckpointRetention
from nbtune.run_state import RunFlags
from nbtune.schedulers._base import Scheduler
from nbtune.search._base import Searcher
from nbtune.space import SearchSpace
from nbtune.stopping import StopCriteria
from nbtune.storage import ExperimentStorage
from nbtune.trial import Trial, TrialStatus, better_of

_SAVE_STATE_EVERY_S = 1.0
_MAX_FREE_STEPS = 8
"""At most this many results of a trial go unanswered in a row, so that a trial that reports
in a tight loop cannot queue up more results than the runner keeps up with."""


class Ledger:
    """Writes a run's trials down and answers their workers; runner thread only."""

    def __init__(
        self,
        *,
        book: TrialBook,
        flags: RunFlags,
        storage: ExperimentStorage,
        bus: EventBus,
        executor: Executor,
        searcher: Searcher,
        scheduler: Scheduler,
        should_stop: StopCriteria,
        space: SearchSpace,
        metric: str | list[str] | None,
        mode: str | list[str],
        keep_checkpoints: int | None,
        constraints: Constraints = UNCONSTRAINED,
    ) -> None:
        self.book = book
        self.flags = flags
        self.storage = storage
        self.bus = bus
        self.executor = executor
        self.searcher = searcher
        self.scheduler = scheduler
        self.should_stop = should_stop
        self.space = space
        self.space_version = 0
        """How many times the search space changed (`Tuner.update_space`)."""
        self.metric = metric
        self.mode = mode
        self.constraints = constraints
        self.retention = CheckpointRetention(
            keep_checkpoints, objectives.single(metric), mode, storage.checkpoint_dir
        )
        self.results: list[Mapping[str, Any]] = []
        self.best_result: Mapping[str, Any] | None = None
        self.failure_streak: list[int] = []
        """The trials that failed last, one after the other, with the same kind of error."""
        self._best_of: dict[int, tuple[float, Mapping[str, Any]]] = {}
        """Each trial's best feasible result by the metric (its returned one, once it
        returned)."""
        self._infeasible: set[int] = set()
        """The trials whose last result misses a constraint: none of their results is best."""
        self._state_saved_at = -math.inf

    # ----- records ----------------------------------------------------------------------------

    def carry_on(self, trials: Sequence[Trial], results: Sequence[Mapping[str, Any]]) -> None:
        """Take over a stopped or crashed run's trials and results (before `run()`).

        Finished trials stay as they were. Every other one goes back to the queue, to start
        again from its latest checkpoint (or from scratch): the results it reported after that
        checkpoint are already in the log, so when it reports them again they are replayed
        silently rather than recorded twice. Those the scheduler holds, and those the user
        paused (or had asked to pause at their next report), stay PAUSED.
        """
        rows_of: dict[int, dict[int, Mapping[str, Any]]] = {}
        for row in results:
            self.taken_in(row)
            rows_of.setdefault(row["trial_id"], {})[row["training_iteration"]] = row
        for trial in trials:
            if trial.returned and trial.trial_id in rows_of:
                last = rows_of[trial.trial_id][max(rows_of[trial.trial_id])]
                self._rank_by(last)
        held = self.scheduler.restore(trials)
        for trial in trials:
            self.retention.restored(trial.trial_id, rows_of.get(trial.trial_id, {}))
            if trial.status.is_finished:
                self.book.put(trial)
                continue
            restarted = self.restarted(trial, journal=False, started_at=None)
            if trial.trial_id in held or trial.user_paused:
                paused = restarted.evolve(status=TrialStatus.PAUSED, paused_by=trial.waits_by)
                self.book.put(paused)
                if trial.user_paused:
                    self.book.live[trial.trial_id].paused_by_user(running=False)
                continue
            self.book.enqueue(trial.trial_id, "last")

    def record(self, trial: Trial, *, journal: bool = True) -> None:
        """Store the trial's newest record (journaled on disk unless `journal` is False)."""
        self.book.put(trial)
        if journal:
            self.storage.record_trial(trial, self.book.trials.values)

    def log_result(self, row: Mapping[str, Any], *, returned: bool = False) -> None:
        """Append a result to the log, on disk first; a `returned` one ranks its trial."""
        self.storage.append_result(row)
        self.taken_in(row)
        if returned:
            self._rank_by(row)

    def taken_in(self, row: Mapping[str, Any]) -> None:
        """A result already on disk joins the run's results (and may be its best, if it and
        its trial's last result satisfy the constraints)."""
        self.results.append(row)
        if objectives.single(self.metric) is None:
            return
        trial_id = row["trial_id"]
        feasible = self.constraints.feasible(row)
        flipped = feasible == (trial_id in self._infeasible)
        if flipped:
            (self._infeasible.discard if feasible else self._infeasible.add)(trial_id)
        value = finite(row.get(self.metric)) if feasible else None
        held = self._best_of.get(trial_id)
        improved = value is not None and (
            held is None or better_of(held[0], value, self.mode) != held[0]
        )
        if improved:
            self._best_of[trial_id] = value, row
        if flipped:
            self._find_best()
        elif improved:
            self._keep_if_best(value, row)

    def _rank_by(self, row: Mapping[str, Any]) -> None:
        """The trial of `row` returned it as its score: it ranks the trial, not the best of
        its results before it."""
        single = objectives.single(self.metric)
        value = finite(row.get(single)) if single and self.constraints.feasible(row) else None
        trial_id = row["trial_id"]
        if value is None:
            self._best_of.pop(trial_id, None)
        else:
            self._best_of[trial_id] = value, row
        if self.best_result is not None and self.best_result["trial_id"] == trial_id:
            self._find_best()
        elif value is not None and trial_id not in self._infeasible:
            self._keep_if_best(value, row)

    def _find_best(self) -> None:
        """The run's best result, found again among the feasible trials' bests."""
        self.best_result = None
        for trial_id, (value, row) in self._best_of.items():
            if trial_id not in self._infeasible:
                self._keep_if_best(value, row)

    def _keep_if_best(self, value: float, row: Mapping[str, Any]) -> None:
        best = None if self.best_result is None else self.best_result[self.metric]
        if best is None or better_of(best, value, self.mode) != best:
            self.best_result = row

    def problem_in(self, metrics: Mapping[str, Any]) -> str | None:
        """What makes a reported result unusable (a tuned metric missing or not a number, a
        scheduler's `time_attr` likewise), in one line; None for a good one."""
        for name in objectives.names(self.metric):
            found = problem(metrics, name, "the metric")
            if found is not None:
                return found
        return self.scheduler.check_result(metrics)

    def ship_output(self, trial_id: int, output: str) -> None:
        """Keep what the trial printed, and say so on the bus."""
        if output:
            self.storage.append_output(trial_id, output)
            self.bus.publish(TrialOutput(trial_id, output))

    def restarted(
        self,
        trial: Trial,
        *,
        journal: bool = True,
        status: TrialStatus = TrialStatus.PENDING,
        paused_by: str | None = None,
        **changes: Any,
    ) -> Trial:
        """`trial` back to PENDING (or `status`), to start again at its next launch from its
        latest checkpoint, or from scratch."""
        restarted = trial.evolve(status=status, paused_by=paused_by, **changes)
        self.record(restarted, journal=journal)
        return restarted

    def restart_first(self, trial: Trial, **changes: Any) -> None:
        """Queue `trial` first, to start again from its latest checkpoint; a trial the user
        paused waits paused instead."""
        restarted = self.restarted(trial, **changes, **runtime_banked(trial))
        if self.book.live[trial.trial_id].user_paused:
            self.to_paused(restarted, restarted.waits_by)
        else:
            self.book.enqueue(trial.trial_id, "first")

    def retry(self, trial: Trial, *, from_scratch: bool = False) -> None:
        """Queue a failed trial again under its id, one attempt more (its errors stay in
        error.txt): from its latest checkpoint, or `from_scratch`; the results it logged are
        replayed, not recorded twice. The scheduler and the searcher take it as a new trial."""
        changes: dict[str, Any] = {"error": None, "attempts": trial.attempts + 1}
        if from_scratch:
            changes.update(checkpoint=None, checkpoint_iteration=None)
        retried = self.restarted(trial, **changes)
        self.book.enqueue(trial.trial_id, "ahead" if retried.has_checkpoint else "first")
        self.failure_streak = []
        self.scheduler.on_trial_add(retried)
        self.searcher.on_trial_add(retried.trial_id, retried.config)

    def to_paused(self, trial: Trial, paused_by: str) -> None:
        """Record the trial PAUSED (`paused_by` says how it waits) and say so on the bus."""
        paused = trial.evolve(status=TrialStatus.PAUSED, paused_by=paused_by)
        self.record(paused.evolve(**runtime_banked(trial)))
        self.bus.publish(TrialPaused(trial.trial_id))

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
            user_paused=False,
            stopped_by=stopped_by,
            **runtime_banked(trial),
        )
        self.record(trial)
        self._count_failures(trial)
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
            return
        self.storage.append_error(
            trial.trial_id, f"attempt {trial.attempts}: {traceback or error}\n"
        )
        self.scheduler.on_trial_error(trial)
        self.searcher.on_complete(trial.trial_id, last, error=True)
        self.bus.publish(TrialErrored(trial.trial_id, error or "", traceback))

    def _count_failures(self, trial: Trial) -> None:
        """Extend the streak of trials that failed alike (the same error type), or start it
        afresh; a trial that ends well ends it."""
        if trial.status is not TrialStatus.ERROR:
            self.failure_streak = []
            return
        if self.failure_streak and error_kind(self.book[self.failure_streak[-1]]) != error_kind(
            trial
        ):
            self.failure_streak = []
        self.failure_streak.append(trial.trial_id)

    def stop(self, trial: Trial, *, stopped_by: str | None, force: bool = False) -> None:
        """End a trial that has not ended: a running one at its next report (at once with
        `force`, where the executor can kill it), any other one now."""
        if trial.status is TrialStatus.RUNNING:
            self.book.live[trial.trial_id].ask(Decision.STOP, stopped_by)
            if force and self.executor.can_kill_trial:
                self.executor.kill(trial.trial_id)
            return
        if trial.suspended:
            self.reply(trial, Decision.STOP)
        self.end(trial, TrialStatus.TERMINATED, stopped_by=stopped_by)

    # ----- checkpoints ------------------------------------------------------------------------

    def with_checkpoint(self, trial: Trial, path: str) -> Trial:
        """`trial` with its latest checkpoint, taken at its current iteration; the path is kept
        relative to the experiment directory, so that the directory can move."""
        absolute = Path(path)
        relative = (
            absolute.relative_to(self.storage.path)
            if absolute.is_relative_to(self.storage.path)
            else absolute
        )
        return trial.evolve(checkpoint=str(relative), checkpoint_iteration=trial.iteration)

    def keep_checkpoint(self, trial: Trial, row: Mapping[str, Any]) -> None:
        """Keep the trial's new checkpoint (taken at `row`), and delete those that fall out of
        `keep_checkpoints` unless a trial's record still points to them."""
        in_use = [self.absolute(t.checkpoint) for t in self.book if t.checkpoint is not None]
        path = Path(self.absolute(trial.checkpoint))
        self.retention.stored(trial.trial_id, path, trial.checkpoint_iteration, row, in_use)

    def absolute(self, checkpoint: str | None) -> str | None:
        return None if checkpoint is None else str(self.storage.path / checkpoint)

    # ----- answering workers ------------------------------------------------------------------

    def reply(self, trial: Trial, decision: Decision, stopped_by: str | None = None) -> None:
        """Send the decision on a result that waits for it (or to a suspended trial), and how
        many next results need not wait (see `nbtune.session.TrialSession.report`); a STOP
        records who asked for it (`stopped_by`: None when the scheduler stops the trial at
        its budget's end), unless a stop was asked for already."""
        free_steps = self._free_steps(trial) if decision is Decision.CONTINUE else 0
        live = self.book.live[trial.trial_id]
        live.told_decision(decision, stopped_by, reporting_freely=free_steps > 0)
        self.executor.reply(trial.trial_id, decision, free_steps)

    def _free_steps(self, trial: Trial) -> int:
        """How many results the trial may send after this one without waiting for an answer:
        none while the runner has something to tell it or replays its results, else as many
        as neither the scheduler nor the stop criteria can act on."""
        trial_id = trial.trial_id
        if self.must_answer(trial_id) or self.book.live[trial_id].replay_until is not None:
            return 0
        free_steps = self.scheduler.free_steps(trial), self.should_stop.free_steps(trial.iteration)
        return min(*free_steps, _MAX_FREE_STEPS)

    def must_answer(self, trial_id: int) -> bool:
        """Whether the trial's next result must wait: the runner will not answer CONTINUE."""
        return (
            self.flags.ending is not None
            or self.book.live[trial_id].pending is not None
            or self.book[trial_id].status is not TrialStatus.RUNNING
        )

    def replayed(self, trial: Trial, event: WorkerResult) -> bool:
        """Whether this result repeats one the log already holds (a trial carried on from a
        checkpoint older than its last result); it is counted but not recorded again."""
        live = self.book.live[trial.trial_id]
        if live.replay_until is None:
            return False
        iteration = trial.iteration + 1
        live.replayed(iteration)
        trial = trial.evolve(iteration=iteration)
        if event.checkpoint is not None:
            trial = self.with_checkpoint(trial, event.checkpoint)
        self.record(trial, journal=event.checkpoint is not None)
        if event.checkpoint is not None:
            self.keep_checkpoint(trial, {})
        if event.waits:
            ending = self.flags.ending is not None
            decision, stopped_by = (
                self.flags.ending_decision() if ending else (Decision.CONTINUE, None)
            )
            self.reply(trial, decision, stopped_by)
            self.end_if_stopped(trial.trial_id, decision)
        return True

    def end_if_stopped(self, trial_id: int, decision: Decision) -> None:
        """A trial told to stop has ended: its results are all in, and its worker is taken
        for the next trial while it winds down (it holds the run open until then)."""
        if decision is Decision.STOP:
            stopped_by = self.book.live[trial_id].stopped_by
            self.end(self.book[trial_id], TrialStatus.TERMINATED, stopped_by=stopped_by)

    def stop_if_waiting(self, event: WorkerResult) -> None:
        """Stop a trial the run is done with; one that does not wait is nudged (see
        `nudge_free_trials`)."""
        if event.waits:
            self.reply(self.book[event.trial_id], Decision.STOP)

    def nudge_free_trials(self) -> None:
        """Make the next report of each trial that need not wait, but that the runner now
        has something to tell (a pause, a stop, the run's end), wait for the answer."""
        for trial_id, live in list(self.book.live.items()):
            if live.reporting_freely and self.must_answer(trial_id):
                live.nudged()
                self.executor.nudge(trial_id)

    # ----- what restore needs -----------------------------------------------------------------

    def saved_state(self) -> dict[str, Any]:
        """What `restore` needs beyond the trial journal: the searcher and the scheduler."""
        return {
            "searcher": self.searcher,
            "scheduler": self.scheduler,
            "space": self.space,
            "space_version": self.space_version,
        }

    def save_state(self, *, now_and_then: bool = False) -> None:
        """Save the searcher and scheduler: at once, or `now_and_then` (at most once a
        second), so that a restored run finds them about as new as the trial journal."""
        now = time.monotonic()
        if now_and_then and now - self._state_saved_at < _SAVE_STATE_EVERY_S:
            return
        self._state_saved_at = now
        self.storage.write_state(self.saved_state())


def runtime_banked(trial: Trial) -> dict[str, Any]:
    """The changes that close a stretch of running: its time added up, no start time."""
    if trial.started_at is None or trial.status is not TrialStatus.RUNNING:
        return {}
    return {
        "runtime_s": trial.runtime_s + max(0.0, time.time() - trial.started_at),
        "started_at": None,
    }


def error_kind(trial: Trial) -> str:
    """The type of the error that ended `trial` ("ValueError", "WorkerLost", ...)."""
    return (trial.error or "").partition(":")[0]
