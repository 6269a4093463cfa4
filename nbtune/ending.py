"""The end of a run: asked for (by the user, the time budget, fail_fast, an interrupt), or
reached (nothing left to run, or a run stuck on trials its scheduler never resumes), and
its outcome written down.

A run asked to end starts no trial; its running trials stop at their next report, or pause
there when the run holds them for `restore`; trials that ignore it for `STOP_GRACE_S` are
given up on. Once no worker holds a trial, the loop ends and `finish` writes the outcome.
"""

from __future__ import annotations

import time
from typing import Any

from nbtune import environment
from nbtune.admission import Admission
from nbtune.events import ExperimentDone
from nbtune.ledger import Ledger, error_kind
from nbtune.protocol import Decision
from nbtune.run_state import RunFlags, RunState
from nbtune.trial import Trial, TrialStatus


class RunEnd:
    """When and how a run ends, and its outcome; runner thread only, except `holds_every_trial`
    (under the runner's lock)."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        flags: RunFlags,
        admission: Admission,
        max_consecutive_failures: int | None = None,
        hold_on_failures: bool = False,
    ) -> None:
        self.ledger = ledger
        self.max_consecutive_failures = max_consecutive_failures
        self.hold_on_failures = hold_on_failures
        self.book = ledger.book
        self.flags = flags
        self.admission = admission
        self.state = RunState.RUNNING
        self.error: str | None = None
        self.crash: BaseException | None = None
        self.ended_at: float | None = None

    # ----- asked to end -----------------------------------------------------------------------

    def request(
        self,
        state: RunState = RunState.STOPPED,
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
        `Trial.stopped_by`). `Pause all` before it holds them too.
        """
        flags = self.flags
        if flags.ending is not None:
            return
        flags.ending = RunState(state)
        flags.ended_by = stopped_by
        flags.ending_since = time.monotonic()
        flags.holds_trials = hold or flags.paused_all
        self.error = error
        for trial in self.book:
            if trial.suspended:
                self.leave_suspended(trial)

    def leave_suspended(self, trial: Trial) -> None:
        """A suspended trial of a run that ends: released and held, or ended."""
        if not self.flags.holds_trials:
            self.ledger.stop(trial, stopped_by=self.flags.ended_by)
            return
        self.ledger.reply(trial, Decision.STOP)
        self.ledger.record(trial.evolve(paused_by=trial.waits_by))

    def after_failure(self) -> None:
        """When `max_consecutive_failures` trials in a row have failed alike, start no more:
        hold the run, saying why, where a user can fix the trainable and resume it (a
        notebook), else end it `failed` with that line."""
        streak, limit = self.ledger.failure_streak, self.max_consecutive_failures
        if limit is None or len(streak) < limit or self.flags.held_by or self.flags.ending:
            return
        kind = error_kind(self.book[streak[-1]])
        names = ", ".join(map(str, streak[-limit:]))
        what = f"{len(streak)} trials in a row failed with {kind} (trials {names})"
        if self.hold_on_failures:
            self.flags.held_by = (
                f"{what}: no trial starts; fix the trainable (see their errors), then "
                "resume the run (Resume all, tuner.resume_all())"
            )
            return
        self.request(RunState.FAILED, f"{what}; the run ended", stopped_by="failures")

    def give_up_on_the_running(self) -> None:
        """Trials that ignored the end for the grace period end where they are (or, held,
        wait PAUSED)."""
        for trial_id in self.book.on_worker():
            trial = self.book[trial_id]
            if trial.status is not TrialStatus.RUNNING:
                self.book.left_worker(trial_id)
            elif self.flags.holds_trials:
                self.book.left_worker(trial_id)
                self.ledger.to_paused(trial, trial.waits_by)
            else:
                stopped_by = self.book.live[trial_id].stopped_by or self.flags.ended_by
                self.ledger.end(trial, TrialStatus.TERMINATED, stopped_by=stopped_by)
                self.book.left_worker(trial_id)

    # ----- reached ----------------------------------------------------------------------------

    def is_over(self) -> bool:
        """No worker holds a trial, and the run was asked to end or has nothing left to run."""
        if self.book.on_worker():
            return False
        if self.flags.ending is not None:
            return True
        if self.book.queue or not self.admission.searcher.is_finished:
            return False
        return all(trial.status is not TrialStatus.PAUSED for trial in self.book)

    def stuck_on(self) -> list[Trial]:
        """The trials the run is stuck on, if it is: only trials that the scheduler holds
        PAUSED are left (a user's pause waits for the user), no worker holds anything but
        suspended trials, and nothing else will start."""
        searcher = self.admission.searcher
        if self.flags.ending is not None or self.book.queue or not searcher.is_finished:
            return []
        paused = [
            self.book[trial_id]
            for trial_id in self.book.live
            if self.book[trial_id].status is TrialStatus.PAUSED
        ]
        if not paused or any(self.book.live[t.trial_id].user_paused for t in paused):
            return []
        if not all(self.book[trial_id].suspended for trial_id in self.book.on_worker()):
            return []
        return paused

    def end_stuck(self, paused: list[Trial]) -> None:
        """End the run, saying why: the scheduler resumes none of the `paused` trials it
        holds. They stay PAUSED, for `Tuner.restore` to carry on."""
        names = ", ".join(str(trial.trial_id) for trial in paused)
        scheduler = type(self.admission.scheduler).__name__
        self.request(
            RunState.FAILED,
            f"the run cannot go on: {scheduler} holds trials {names} paused and resumes none of "
            "them; nothing else is left to run",
            hold=True,
        )

    def holds_every_trial(self) -> bool:
        """Whether the run goes on but nothing runs and nothing will start by itself: Pause all
        holds it and no trial runs any more (a trial added meanwhile waits), or every
        unfinished trial is PAUSED and no new one starts (see `Admission.starts_none`)."""
        if self.state is not RunState.RUNNING or self.flags.ending is not None:
            return False
        if self.flags.paused_all or self.flags.held_by:
            return all(trial.status is not TrialStatus.RUNNING for trial in self.book)
        unfinished = [trial for trial in self.book if not trial.status.is_finished]
        paused = all(trial.status is TrialStatus.PAUSED for trial in unfinished)
        return bool(unfinished) and paused and self.admission.starts_none()

    # ----- the outcome ------------------------------------------------------------------------

    def over(self) -> None:
        """The loop has ended: the run ends in the state it was asked for, or finished."""
        self.state = self.flags.ending or RunState.FINISHED

    def failed(self, exc: BaseException) -> None:
        """The runner itself failed (not a trial)."""
        if self.crash is None:
            self.crash = exc
            self.state = RunState.FAILED
            self.error = f"{type(exc).__name__}: {exc}"

    def finish(self) -> None:
        """Write the outcome down with the final state of every trial, and say so on the bus;
        the environment, recorded on a thread of its own, is in the folder before it closes.

        The user's pauses end with the run (`Trial.user_paused`): a restore carries on every
        unfinished trial of a run that ended, while one whose driver died keeps them."""
        self.ended_at = time.time()
        environment.settle(self.ledger.storage.path)
        for trial in self.book:
            if trial.user_paused:
                self.ledger.record(trial.evolve(user_paused=False))
        try:
            self.ledger.storage.finish(
                self.ledger.saved_state(), self.book.trials.values(), self.outcome()
            )
        except Exception as exc:
            self.failed(exc)
        self.ledger.bus.publish(ExperimentDone(self.state, self.error))

    def outcome(self) -> dict[str, Any]:
        return {"state": self.state.value, "error": self.error, "ended_at": self.ended_at}
