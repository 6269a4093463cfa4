"""What the user, and a scheduler's requests, can ask of a live run: pause, resume, stop, fork,
and how many trials run at once.

Every method runs on the runner thread: the Tuner sends it through `TrialRunner.call`, and
the runner calls it itself for the scheduler. A trial that holds a worker hears of a command
at its next report; one that holds none is changed at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from nbtune.errors import IllegalTransitionError, TrialNotFoundError
from nbtune.events import CommandApplied, TrialResumed
from nbtune.protocol import Decision
from nbtune.trial import Trial, TrialStatus

if TYPE_CHECKING:
    from nbtune.runner import TrialRunner


class RunControl:
    """The commands of one run, carried out on its runner."""

    def __init__(self, runner: TrialRunner) -> None:
        self._runner = runner
        self._book = runner.book
        self.paused_all = False
        """Whether the whole experiment is held: no trial starts."""

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
            self._runner.storage.append_command(name, arguments, error)
            self._runner.bus.publish(CommandApplied(name, dict(arguments), error))

    def trial(self, trial_id: Any) -> Trial:
        """The trial with `trial_id`, or a TrialNotFoundError that lists the valid ids."""
        book = self._book
        if isinstance(trial_id, int) and not isinstance(trial_id, bool) and trial_id in book:
            return book[trial_id]
        known = f"its trials are 0 to {len(book) - 1}" if len(book) else "no trials yet"
        raise TrialNotFoundError(f"there is no trial {trial_id!r}; {known}")

    def pause_trial(self, trial_id: int) -> None:
        """Pause a trial: a running one at its next report, a waiting one at once.

        The trial stays paused until the user resumes it: the scheduler cannot resume it.
        """
        trial = self.trial(trial_id)
        if trial.status.is_finished:
            raise IllegalTransitionError(
                f"trial {trial_id} has ended ({trial.status}); only a pending or running trial "
                "can be paused"
            )
        live = self._book.live[trial_id]
        live.user_paused = True
        if trial.status is TrialStatus.RUNNING:
            live.resume_on_arrival = live.making_room = False
            if live.told is not Decision.PAUSE:
                live.ask(Decision.PAUSE)
        elif trial.status is TrialStatus.PENDING:
            self._book.queue.remove(trial_id)
            self._runner.to_paused(trial, trial.waits_by)

    def resume_trial(self, trial_id: int) -> None:
        """Resume a paused trial: in its worker if suspended, else from its checkpoint."""
        trial = self.trial(trial_id)
        live = self._book.facts(trial_id)
        live.user_paused = False
        if trial.status is TrialStatus.RUNNING:
            live.drop_pause()
            if live.told is Decision.PAUSE and not live.making_room:
                live.resume_on_arrival = True
            return
        if trial.status is not TrialStatus.PAUSED:
            raise IllegalTransitionError(
                f"trial {trial_id} is {trial.status}; only a paused trial can be resumed"
            )
        live.resume_on_arrival = False
        if trial.paused_by == "suspend":
            trial = trial.evolve(status=TrialStatus.RUNNING, paused_by=None, started_at=time.time())
            self._runner.record(trial)
            self._runner.reply(trial, Decision.CONTINUE)
            live.heard_at = time.monotonic()
        else:
            self._runner.record(trial.evolve(status=TrialStatus.PENDING, paused_by=None))
            self._book.enqueue(trial_id, "ahead" if trial.has_checkpoint else "first")
        self._runner.bus.publish(TrialResumed(trial_id))

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
        executor = self._runner.executor
        if trial.status is TrialStatus.RUNNING:
            self._book.live[trial_id].ask(Decision.STOP, stopped_by)
            if force and executor.can_kill_trial:
                executor.kill(trial_id)
            return
        if trial.paused_by == "suspend":
            self._runner.reply(trial, Decision.STOP)
        self._runner.end(trial, TrialStatus.TERMINATED, stopped_by=stopped_by)

    def pause_all(self) -> None:
        """Hold the whole experiment: every trial pauses and none starts."""
        self.paused_all = True
        for trial in self._book:
            if trial.status in (TrialStatus.PENDING, TrialStatus.RUNNING):
                self.pause_trial(trial.trial_id)

    def resume_all(self) -> None:
        """Let the experiment go on: every paused trial resumes, new ones may start."""
        self.paused_all = False
        for trial in self._book:
            live = self._book.facts(trial.trial_id)
            if trial.status is TrialStatus.PAUSED or live.told is Decision.PAUSE:
                self.resume_trial(trial.trial_id)
            live.drop_pause()

    def fork(self, trial_id: int, config: Mapping[str, Any]) -> int:
        """Start a new trial with `config` from trial `trial_id`'s latest checkpoint."""
        parent = self.trial(trial_id)
        if not parent.has_checkpoint:
            raise IllegalTransitionError(
                f"trial {trial_id} has no checkpoint to fork from; its trainable must pass "
                "checkpoint=... to nbtune.report (or implement save_checkpoint)"
            )
        return self._runner.add_trial(config, parent=parent, origin="fork")

    def set_max_concurrent(self, max_concurrent: int) -> None:
        """Change how many trials run at once.

        Above the new limit, the most recently started trials give back their workers at their
        next report: by checkpoint, going back to the head of the queue. A trial that cannot
        checkpoint keeps its worker until it ends.
        """
        self._runner.max_concurrent = max_concurrent
        self._runner.executor.resize(max_concurrent)
        self._book.make_room(max_concurrent)
