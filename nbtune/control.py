"""What the user, and a scheduler's requests, can ask of a live run: pause, resume, stop, fork,
add a trial, how many trials run at once, and the run's end.

Every method runs on the runner thread: the Tuner sends it through `TrialRunner.call`, and
the runner calls it itself for the scheduler. A trial that holds a worker hears of a command
at its next report; one that holds none is changed at once. Commands work through the parts
below them (the ledger, admission, the book); what the scheduler asks in return waits in its
requests, which the runner carries out after each command.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from nbtune.admission import Admission
from nbtune.ending import RunEnd
from nbtune.errors import IllegalTransitionError, TrialNotFoundError
from nbtune.events import CommandApplied, TrialResumed
from nbtune.ledger import Ledger
from nbtune.protocol import Decision
from nbtune.run_state import RunFlags
from nbtune.trial import Trial, TrialStatus


class RunControl:
    """The commands of one run, carried out on its parts."""

    def __init__(
        self, *, ledger: Ledger, admission: Admission, ending: RunEnd, flags: RunFlags
    ) -> None:
        self._ledger = ledger
        self._admission = admission
        self._clocks = admission.clocks
        self._ending = ending
        self._book = ledger.book
        self._flags = flags

    @property
    def paused_all(self) -> bool:
        """Whether the whole experiment is held: no trial starts."""
        return self._flags.paused_all

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
            self._ledger.storage.append_command(name, arguments, error)
            self._ledger.bus.publish(CommandApplied(name, dict(arguments), error))

    def trial(self, trial_id: Any) -> Trial:
        """The trial with `trial_id`, or a TrialNotFoundError that lists the valid ids."""
        book = self._book
        if isinstance(trial_id, int) and not isinstance(trial_id, bool) and trial_id in book:
            return book[trial_id]
        known = f"its trials are 0 to {len(book) - 1}" if len(book) else "no trials yet"
        raise TrialNotFoundError(f"there is no trial {trial_id!r}; {known}")

    def pause_trial(self, trial_id: int) -> None:
        """Pause a trial: a running one at its next report, a waiting one at once.

        The trial stays paused until the user resumes it: the scheduler cannot resume it, nor
        does a restore of the run (the pause is journaled before it is acknowledged).
        """
        trial = self.trial(trial_id)
        if trial.status.is_finished:
            raise IllegalTransitionError(
                f"trial {trial_id} has ended ({trial.status}); only a pending or running trial "
                "can be paused"
            )
        self._book.live[trial_id].paused_by_user(running=trial.status is TrialStatus.RUNNING)
        trial = trial.evolve(user_paused=True)
        if trial.status is TrialStatus.PENDING:
            self._book.queue.remove(trial_id)
            self._ledger.to_paused(trial, trial.waits_by)
        else:
            self._ledger.record(trial)

    def resume_trial(self, trial_id: int) -> None:
        """Resume a paused trial: in its worker if suspended, else from its checkpoint."""
        trial = self.trial(trial_id)
        live = self._book.live.get(trial_id)
        running = trial.status is TrialStatus.RUNNING
        if live is not None:
            live.resumed_by_user(running=running)
        if running:
            if trial.user_paused:
                self._ledger.record(trial.evolve(user_paused=False))
            return
        trial = trial.evolve(user_paused=False)
        if trial.status is not TrialStatus.PAUSED:
            raise IllegalTransitionError(
                f"trial {trial_id} is {trial.status}; only a paused trial can be resumed"
            )
        if trial.suspended:
            trial = trial.evolve(status=TrialStatus.RUNNING, paused_by=None, started_at=time.time())
            self._ledger.record(trial)
            self._ledger.reply(trial, Decision.CONTINUE)
            live.resumed_in_place()
        else:
            self._ledger.record(trial.evolve(status=TrialStatus.PENDING, paused_by=None))
            self._book.enqueue(trial_id, "ahead" if trial.has_checkpoint else "first")
        self._ledger.bus.publish(TrialResumed(trial_id))

    def stop_trial(
        self, trial_id: int, force: bool = False, stopped_by: str | None = "user"
    ) -> None:
        """End a trial (TERMINATED, results kept): a running one at its next report.

        `stopped_by` says who asked (`Trial.stopped_by`): the user, unless the runner stops it
        for the scheduler or for the run's end.
        """
        trial = self.trial(trial_id)
        if trial.status.is_finished:
            raise IllegalTransitionError(f"trial {trial_id} has already ended ({trial.status})")
        self._ledger.stop(trial, stopped_by=stopped_by, force=force)

    def pause_all(self) -> None:
        """Hold the whole experiment: every trial pauses and none starts."""
        self._flags.paused_all = True
        for trial in self._book:
            if trial.status in (TrialStatus.PENDING, TrialStatus.RUNNING):
                self.pause_trial(trial.trial_id)

    def resume_all(self) -> None:
        """Let the experiment go on: every paused trial resumes, new ones may start."""
        self._flags.paused_all = False
        self._flags.held_by = None
        for trial in self._book:
            live = self._book.live.get(trial.trial_id)
            told_to_pause = live is not None and live.told is Decision.PAUSE
            if trial.status is TrialStatus.PAUSED or told_to_pause:
                self.resume_trial(trial.trial_id)
            if live is not None:
                live.drop_pause()

    def add_trial(self, config: Mapping[str, Any]) -> int:
        """Queue a hand-picked configuration; return its id."""
        return self._admission.add_trial(config)

    def fork(self, trial_id: int, config: Mapping[str, Any]) -> int:
        """Start a new trial with `config` from trial `trial_id`'s latest checkpoint."""
        parent = self.trial(trial_id)
        if not parent.has_checkpoint:
            raise IllegalTransitionError(
                f"trial {trial_id} has no checkpoint to fork from; its trainable must pass "
                "checkpoint=... to nbtune.report (or implement save_checkpoint)"
            )
        return self._admission.add_trial(config, parent=parent, origin="fork")

    def set_max_concurrent(self, max_concurrent: int) -> None:
        """Change how many trials run at once.

        Above the new limit, the most recently started trials give back their workers at their
        next report: by checkpoint, going back to the head of the queue. A trial that cannot
        checkpoint keeps its worker until it ends.
        """
        self._admission.set_max_concurrent(max_concurrent)

    def update_space(self, space: Any) -> None:
        """Trials made from now on sample `space`; those made before keep their configs."""
        self._admission.searcher.update_space(space)
        self._ledger.space = space
        self._ledger.space_version += 1
        self._admission.space_version = self._ledger.space_version

    def update_trainable(self, trainable: Any) -> None:
        """Trials launched from now on (new, retried or resumed from a checkpoint) run
        `trainable`; those on a worker keep theirs."""
        self._admission.update_trainable(trainable)

    def set_time_budget(self, seconds: float) -> None:
        """The run ends `seconds` after it started (at once, if they have passed)."""
        self._clocks.set_time_budget(seconds)
        self._admission.plan()

    def finish_in(self, seconds: float) -> None:
        """The run ends `seconds` from now."""
        self._clocks.finish_in(seconds)
        self._admission.plan()

    def retry(self, which: Any, *, from_scratch: bool = False) -> list[int]:
        """Run failed trials again under their ids: "errored" (every ERROR trial) or a list
        of ids; return the ids. A trial that did not fail is refused in one line."""
        if which == "errored":
            chosen = [trial for trial in self._book if trial.status is TrialStatus.ERROR]
        else:
            chosen = [self.trial(trial_id) for trial_id in which]
        for trial in chosen:
            if trial.status is not TrialStatus.ERROR:
                raise IllegalTransitionError(
                    f"trial {trial.trial_id} did not fail ({trial.status}); retry runs failed "
                    "trials again (tuner.retry('errored') for all of them)"
                )
        self._flags.held_by = None
        for trial in chosen:
            self._ledger.retry(trial, from_scratch=from_scratch)
        return [trial.trial_id for trial in chosen]

    def stop_run(self) -> None:
        """End the whole run gracefully (see `RunEnd.request`)."""
        self._ending.request()

    def extend(self, num_samples: int) -> None:
        """Let the searcher suggest `num_samples` more trials."""
        self._admission.extend(num_samples)
