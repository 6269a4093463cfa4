"""The runner's book of trials: every trial's record, and the runtime facts of each live one.

    TrialBook
      trials  id -> Trial       immutable records, journaled on disk; what snapshots show
      queue   [id, ...]         the PENDING trials, in the order they will start
      live    id -> LiveTrial   what the runner knows of a trial that is not over: its worker,
                                the decision on its way to it, what it waits for...

A trial is live from its creation until it has ended and let go of its worker (a trial told
to stop has ended, but its worker winds down a little longer). Only the runner thread touches
the book. `check()` states the invariants that tie the three together; the tests call it after
every step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from nbtune.protocol import Decision
from nbtune.schedulers._base import Exploit
from nbtune.trial import Trial, TrialStatus


@dataclass(frozen=True)
class Underway:
    """What was on its way to a trial's worker when the worker let go of it (or suspended
    it): the decision it had not yet carried out, who asked for a stop, and what the runner
    meant to do once it arrived."""

    pending: Decision | None = None
    stopped_by: str | None = None
    making_room: bool = False
    resume_on_arrival: bool = False

    @property
    def stop(self) -> bool:
        return self.pending is Decision.STOP


@dataclass
class LiveTrial:
    """The runtime facts of one trial that is not over; none is saved (a restored run starts
    them afresh). Only this module assigns them, through the named transitions below; each
    transition ends by checking what must hold of the record on its own (`check`).

    Attributes:
        on_worker: a worker holds the trial: from its launch until it ends, pauses by
            checkpoint, or is lost.
        told: the decision replied to it (PAUSE or STOP) that its worker has not yet carried
            out; a trial told to STOP no longer counts against `max_concurrent`.
        pending: the decision (PAUSE or STOP) it gets at its next report; a stop outranks a
            pause.
        stopped_by: who asked for the STOP that is pending or told (`Trial.stopped_by`).
        making_room: the pause (pending or told) gives back its worker because the run's
            concurrency was lowered; the trial goes back to the head of the queue.
        resume_on_arrival: the user resumed it while its pause was on the way.
        user_paused: the user paused it; only the user resumes it, never the scheduler.
        reporting_freely: it was told that its next results need not wait for an answer.
        replay_until: it restarted from a checkpoint older than its last result: results up
            to this iteration are already in the log and are replayed, not recorded again.
        started: a worker runs it: its silence counts towards the timeout from then on.
        heard_at: when its worker last said anything (monotonic seconds), for the timeout.
        timed_out: the error it fails with once its worker, killed for silence, is lost.
        fork_waiting: a fork the scheduler asked for, to start once this trial has ended.
    """

    trial_id: int
    on_worker: bool = False
    told: Decision | None = None
    pending: Decision | None = None
    stopped_by: str | None = None
    making_room: bool = False
    resume_on_arrival: bool = False
    user_paused: bool = False
    reporting_freely: bool = False
    replay_until: int | None = None
    started: bool = False
    heard_at: float = 0.0
    timed_out: str | None = None
    fork_waiting: Exploit | None = None

    # ----- what can happen to it ---------------------------------------------------------------

    def launched(self, replay_until: int | None, *, started: bool) -> None:
        """The trial went to the executor, and with `started` to a worker that runs it now
        (else its worker says so later: `heard`); its results up to `replay_until` (if any)
        are replayed."""
        if replay_until is not None:
            self.replay_until = max(replay_until, self.replay_until or 0)
        self.on_worker = True
        self.started = started
        self.heard_at = time.monotonic()
        self.check()

    def heard(self, *, leaving: bool) -> None:
        """Its worker said something (the first time, perhaps only that it started the
        trial); one that is `leaving` (it ended, paused, suspended, failed or was lost) sends
        no more results unasked."""
        self.started = True
        self.heard_at = time.monotonic()
        if leaving:
            self.reporting_freely = False
        self.check()

    def ask(self, decision: Decision, stopped_by: str | None = None) -> None:
        """Have the trial take `decision` at its next report; a stop outranks a pause (and
        the room that pause would have made), and the first stop asked for stands, with who
        asked for it (`stopped_by`)."""
        if self.pending is Decision.STOP:
            return
        if decision is Decision.STOP:
            self.making_room = False
            self.stopped_by = stopped_by
        self.pending = decision
        self.check()

    def told_decision(
        self, decision: Decision, stopped_by: str | None, *, reporting_freely: bool
    ) -> None:
        """Its worker was told `decision` (a STOP asked for by `stopped_by`, unless a stop
        was asked already), and whether its next results need not wait for an answer."""
        if decision is Decision.STOP and self.pending is not Decision.STOP:
            self.stopped_by = stopped_by
        if decision is not Decision.CONTINUE:
            self.told = decision
            if decision is Decision.STOP or self.pending is decision:
                self.pending = None
            if decision is Decision.STOP:
                self.making_room = False
        self.reporting_freely = reporting_freely
        self.check()

    def nudged(self) -> None:
        """Its worker was asked to make its next report wait for an answer."""
        self.reporting_freely = False
        self.check()

    def drop_pause(self) -> None:
        """Forget a pause the user asked for (not one that makes room under a lower limit)."""
        if self.pending is Decision.PAUSE and not self.making_room:
            self.pending = None
        self.check()

    def paused_by_user(self, *, running: bool) -> None:
        """The user paused it: only the user resumes it. A `running` one pauses at its next
        report, for the user rather than to make room, and stays paused once there."""
        self.user_paused = True
        if running:
            self.resume_on_arrival = self.making_room = False
            if self.told is not Decision.PAUSE:
                self.ask(Decision.PAUSE)
        self.check()

    def resumed_by_user(self, *, running: bool) -> None:
        """The user resumed it: a `running` one drops the pause it was asked for, or, told
        already, resumes as soon as it arrives paused."""
        self.user_paused = False
        if not running:
            self.resume_on_arrival = False
            self.check()
            return
        self.drop_pause()
        if self.told is Decision.PAUSE and not self.making_room:
            self.resume_on_arrival = True
        self.check()

    def resumed_in_place(self) -> None:
        """A suspended trial goes on in its worker: its silence counts from now."""
        self.heard_at = time.monotonic()
        self.check()

    def make_room(self) -> None:
        """Pause at the next report to give back its worker, under a lowered concurrency."""
        self.making_room = True
        self.ask(Decision.PAUSE)

    def keep_place(self) -> None:
        """No longer needs to make room: keep its worker."""
        if self.making_room:
            self.making_room = False
            self.drop_pause()
        self.check()

    def replayed(self, iteration: int) -> None:
        """It reported `iteration` again, after a restart; the replay ends at the last one
        the log holds."""
        if self.replay_until is not None and iteration >= self.replay_until:
            self.replay_until = None
        self.check()

    def killed_for_silence(self, error: str) -> None:
        """Its worker was killed for saying nothing too long; it fails with `error` once the
        worker is lost."""
        self.timed_out = error
        self.check()

    def fork_at_end(self, request: Exploit) -> None:
        """Start the scheduler's fork `request` once this trial has ended."""
        self.fork_waiting = request
        self.check()

    def suspended(self) -> Underway:
        """It waits inside `report()`, keeping its worker: whatever was on its way to it is
        carried out now, by the runner; return it."""
        underway = self._underway()
        self.making_room = self.resume_on_arrival = False
        self.told = self.pending = self.stopped_by = None
        self.check()
        return underway

    def let_go(self) -> Underway:
        """No worker holds it any more: what was on its way to the worker lapses; return it."""
        underway = self.suspended()
        self.on_worker = self.reporting_freely = False
        self.timed_out = None
        self.check()
        return underway

    def _underway(self) -> Underway:
        return Underway(self.pending, self.stopped_by, self.making_room, self.resume_on_arrival)

    @property
    def leaving(self) -> bool:
        """Whether the trial gives back its worker of its own accord: it was told to pause or
        stop, or will be at its next report (a pause that only makes room does not count)."""
        if self.told is not None or self.pending is Decision.STOP:
            return True
        return self.pending is Decision.PAUSE and not self.making_room

    def check(self) -> None:
        """Raise AssertionError if the record contradicts itself (whatever its trial's
        status; `TrialBook.check` checks it against the trial's record too)."""
        contradiction = self._contradiction()
        assert contradiction is None, f"{contradiction}: trial {self.trial_id}: {self}"

    def _contradiction(self) -> str | None:
        if not self.on_worker and self.told is not None:
            return "told a decision without a worker"
        if self.pending not in (None, Decision.PAUSE, Decision.STOP) or (
            self.told is Decision.CONTINUE
        ):
            return "a decision that is no pause or stop on its way"
        if self.stopped_by is not None and Decision.STOP not in (self.pending, self.told):
            return "who stops it, without a stop"
        if self.making_room and Decision.PAUSE not in (self.pending, self.told):
            return "making room without a pause"
        if self.resume_on_arrival and self.told is not Decision.PAUSE:
            return "resumed on arrival without a pause on its way"
        if not self.on_worker and (self.reporting_freely or self.timed_out is not None):
            return "reporting freely, or timed out, without a worker"
        return None


class TrialBook:
    """Every trial of a run, its queue, and one `LiveTrial` per live trial."""

    def __init__(self) -> None:
        self.trials: dict[int, Trial] = {}
        self.queue: list[int] = []
        self.live: dict[int, LiveTrial] = {}

    def __len__(self) -> int:
        return len(self.trials)

    def __getitem__(self, trial_id: int) -> Trial:
        return self.trials[trial_id]

    def __contains__(self, trial_id: object) -> bool:
        return trial_id in self.trials

    def __iter__(self) -> Iterator[Trial]:
        return iter(list(self.trials.values()))

    # ----- records ----------------------------------------------------------------------------

    def put(self, trial: Trial) -> None:
        """Store the newest record of `trial`; a new trial becomes live."""
        self.trials[trial.trial_id] = trial
        if not trial.status.is_finished:
            self.live.setdefault(trial.trial_id, LiveTrial(trial.trial_id))

    def heard(self, trial_id: int, *, leaving: bool) -> None:
        """A worker said something of `trial_id` (see `LiveTrial.heard`)."""
        live = self.live.get(trial_id)
        if live is not None:
            live.heard(leaving=leaving)

    def ended(self, trial_id: int) -> Exploit | None:
        """The trial has ended: drop what it was asked to do, and its record once its worker
        has let go; return the fork that waited for its end, if any."""
        if trial_id in self.queue:
            self.queue.remove(trial_id)
        live = self.live.get(trial_id)
        if live is None:
            return None
        fork = live.fork_waiting
        self.live[trial_id] = LiveTrial(
            trial_id, on_worker=live.on_worker, told=live.told, heard_at=live.heard_at
        )
        self._forget_if_over(trial_id)
        return fork

    def left_worker(self, trial_id: int) -> Underway:
        """The trial's worker has let go of it, or will say nothing more about it: whatever
        was on its way to that worker lapses; return it."""
        live = self.live.get(trial_id)
        if live is None:
            return Underway()
        underway = live.let_go()
        self._forget_if_over(trial_id)
        return underway

    def _forget_if_over(self, trial_id: int) -> None:
        if self.trials[trial_id].status.is_finished and not self.live[trial_id].on_worker:
            del self.live[trial_id]

    # ----- the queue --------------------------------------------------------------------------

    def enqueue(self, trial_id: int, where: str) -> None:
        """Queue a PENDING trial: "first" (a restart), "ahead" (it carries on from a checkpoint:
        before every fresh trial) or "last" (a fresh one)."""
        if where == "first":
            self.queue.insert(0, trial_id)
        elif where == "ahead":
            self.queue.insert(self._first_fresh(), trial_id)
        else:
            self.queue.append(trial_id)

    def _first_fresh(self) -> int:
        for position, trial_id in enumerate(self.queue):
            if not self.trials[trial_id].has_checkpoint:
                return position
        return len(self.queue)

    def waiting(self) -> list[Trial]:
        """The queued trials, in queue order."""
        return [self.trials[trial_id] for trial_id in self.queue]

    # ----- workers ----------------------------------------------------------------------------

    def on_worker(self) -> list[int]:
        """The trials a worker holds, in id order."""
        return sorted(trial_id for trial_id, live in self.live.items() if live.on_worker)

    def slots_taken(self) -> int:
        """Workers that count against `max_concurrent`: a trial told to stop makes room at
        once, so that the next one is on its way while it winds down."""
        return sum(live.on_worker and live.told is not Decision.STOP for live in self.live.values())

    def make_room(self, max_concurrent: int) -> None:
        """Have the most recently started trials give back their workers (by a pause that
        sends them to the head of the queue) until `max_concurrent` workers are enough; trials
        that no longer need to make room keep theirs."""
        staying = sum(not live.leaving for live in self.live.values() if live.on_worker)
        running = [
            trial
            for trial in self.trials.values()
            if trial.status is TrialStatus.RUNNING and not self.live[trial.trial_id].leaving
        ]
        running.sort(key=lambda trial: trial.started_at or 0.0, reverse=True)
        excess = max(0, staying - max_concurrent)
        for trial in running[:excess]:
            self.live[trial.trial_id].make_room()
        for trial in running[excess:]:
            self.live[trial.trial_id].keep_place()

    def on_the_clock(self) -> list[LiveTrial]:
        """The running trials whose silence counts towards a timeout: those a worker runs (not
        those still queued for one, nor those already killed for it)."""
        return [
            live
            for live in self.live.values()
            if live.on_worker
            and live.started
            and live.timed_out is None
            and self.trials[live.trial_id].status is TrialStatus.RUNNING
        ]

    # ----- invariants -------------------------------------------------------------------------

    def check(self) -> None:
        """Raise AssertionError, naming the trial, if the book contradicts itself."""
        assert len(set(self.queue)) == len(self.queue), f"a trial is queued twice: {self.queue}"
        for trial in self.trials.values():
            queued = trial.trial_id in self.queue
            pending = trial.status is TrialStatus.PENDING
            assert queued == pending, f"trial {trial.trial_id} is {trial.status}, queued={queued}"
            live = self.live.get(trial.trial_id)
            if trial.status.is_finished:
                assert live is None or _winds_down(live), f"trial {trial.trial_id}: {live}"
                continue
            assert live is not None, f"live trial {trial.trial_id} has no runtime record"
            _check_live(trial, live)
        assert set(self.live) <= set(self.trials), "runtime records of unknown trials"


def _winds_down(live: LiveTrial) -> bool:
    """What is left of an ended trial: only its worker, winding down."""
    return live.on_worker and live.pending is None and not live.user_paused


def _check_live(trial: Trial, live: LiveTrial) -> None:
    name = f"trial {trial.trial_id} ({trial.status}, paused_by={trial.paused_by}): {live}"
    running = trial.status is TrialStatus.RUNNING
    suspended = trial.suspended
    live.check()
    assert live.trial_id == trial.trial_id, name
    assert live.on_worker or not (running or suspended), f"no worker holds {name}"
    assert running or live.pending is None, f"a decision pending for a trial not running: {name}"
    assert not live.making_room or running, f"making room while not running: {name}"
    assert live.replay_until is None or live.replay_until > trial.iteration, name
