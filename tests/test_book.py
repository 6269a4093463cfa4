"""The runner's TrialBook under every order of commands and worker events, without processes.

A Hypothesis state machine plays the workers by the protocol (a worker reports, obeys the
decision it is told, suspends, returns, fails or dies) and the user (pause, resume, stop, fork,
add, concurrency, pause all, end the run), in any order, against a real `TrialRunner` with a
real experiment directory. After every step the book's invariants hold, the runner's workers
are exactly the ones the test plays, no result is lost or recorded twice, and checkpoint
retention never deletes a checkpoint that a trial still points to.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import nbtune as nt
from nbtune.book import LiveTrial, TrialBook
from nbtune.events import EventBus
from nbtune.executors import Executor
from nbtune.protocol import (
    Decision,
    TrialLaunch,
    WorkerDone,
    WorkerFailed,
    WorkerLost,
    WorkerPaused,
    WorkerResult,
    WorkerSuspended,
)
from nbtune.runner import TrialRunner
from nbtune.schedulers import Resume
from nbtune.space import SearchSpace
from nbtune.stopping import StopCriteria
from nbtune.storage import ExperimentStorage
from nbtune.trial import Trial, TrialStatus

REFUSED = (nt.IllegalTransitionError, nt.TrialNotFoundError)
trial_ids = st.integers(min_value=0, max_value=6)
LOSSES = {
    "falling": lambda iteration: 1 / iteration,
    "flat": lambda iteration: 1.0,
    "nan": lambda iteration: float("nan"),
}
"""How a played trial's loss goes: a falling loss makes each new checkpoint the best, so that
retention would delete the older ones that a fork or a restart may still need."""


@dataclass
class Worker:
    """One trial as its worker sees it."""

    launch: TrialLaunch
    iteration: int
    free_steps: int = 0
    waits_for_reply: bool = False
    nudged: bool = False
    told: Decision | None = None
    can_checkpoint: bool = True


class PausesAtThird(nt.FIFOScheduler):
    """Pauses each trial at its third result, and resumes those it paused once no trial
    waits: its pauses suspend trials that have no checkpoint of that step, which must give
    back their workers when the run needs them."""

    def __init__(self) -> None:
        super().__init__()
        self.paused: set[int] = set()

    def on_result(self, trial, result):
        if result["training_iteration"] != 3:
            return Decision.CONTINUE
        self.paused.add(trial.trial_id)
        return Decision.PAUSE

    def on_queue_empty(self) -> None:
        for trial_id in sorted(self.paused):
            self.request(Resume(trial_id))
        self.paused.clear()


class PlayedWorkers(Executor):
    """An executor whose workers the test plays: it keeps what the runner sent each one, and
    fails the test when the runner breaks the protocol (a reply nobody waits for)."""

    can_kill_trial = True
    pickles_trainable = False

    def __init__(self) -> None:
        self.workers: dict[int, Worker] = {}

    def open(self, trainable, max_workers):
        pass

    def start(self, launch: TrialLaunch) -> None:
        assert launch.trial_id not in self.workers, f"trial {launch.trial_id} started twice"
        self.workers[launch.trial_id] = Worker(launch, launch.iteration)

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        worker = self.workers[trial_id]
        assert worker.waits_for_reply, f"a reply to trial {trial_id}, which waits for none"
        worker.waits_for_reply = False
        worker.nudged = False
        worker.free_steps = free_steps
        worker.told = None if decision is Decision.CONTINUE else decision

    def nudge(self, trial_id: int) -> None:
        self.workers[trial_id].nudged = True

    def kill(self, trial_id: int) -> None:
        """A killed worker dies whenever the test says so (`worker_dies`)."""

    def poll(self, timeout):
        return []

    def wakeup(self) -> None:
        pass

    def close(self) -> None:
        pass


class BookUnderFire(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        storage = ExperimentStorage(self.folder / "run")
        storage.create({"name": "run", "metric": "loss", "mode": "min"})
        space = SearchSpace({"x": nt.uniform(0, 1)})
        searcher = nt.RandomSearch()
        searcher.setup(space, "loss", "min", 4, 0)
        scheduler = PausesAtThird()
        scheduler.setup("loss", "min")
        self.executor = PlayedWorkers()
        self.runner = TrialRunner(
            trainable=lambda config: None,
            searcher=searcher,
            scheduler=scheduler,
            executor=self.executor,
            storage=storage,
            bus=EventBus(),
            metric="loss",
            mode="min",
            max_concurrent=2,
            should_stop=StopCriteria({"training_iteration": 6}, "loss", "min"),
            space=space,
            max_failures=1,
        )
        self.runner.step()

    def teardown(self) -> None:
        self.runner.storage.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # ----- the workers ------------------------------------------------------------------------

    def _worker(self, data, ready) -> Worker | None:
        candidates = sorted(tid for tid, worker in self.executor.workers.items() if ready(worker))
        if not candidates:
            return None
        return self.executor.workers[data.draw(st.sampled_from(candidates))]

    def _say(self, event, *, leaves: bool) -> None:
        if leaves:
            self.executor.workers.pop(event.trial_id)
        self.runner.handle([event])
        self.runner.step()

    def _checkpoint(self, worker: Worker) -> str:
        """Store a checkpoint of the worker's trial, as a worker does before it reports it."""
        folder = Path(worker.launch.checkpoint_dir)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"checkpoint_{worker.iteration:06d}.pkl"
        path.write_bytes(b"model")
        return str(path)

    @rule(data=st.data(), checkpoint=st.booleans(), value=st.sampled_from(sorted(LOSSES)))
    def report(self, data, checkpoint, value):
        worker = self._worker(data, lambda w: not w.waits_for_reply and w.told is None)
        if worker is None:
            return
        worker.iteration += 1
        waits = worker.free_steps == 0 or worker.nudged
        worker.free_steps = 0 if waits else worker.free_steps - 1
        worker.waits_for_reply = waits
        path = self._checkpoint(worker) if checkpoint else None
        loss = LOSSES[value](worker.iteration)
        result = WorkerResult(worker.launch.trial_id, {"loss": loss}, path, "", time.time(), waits)
        self._say(result, leaves=False)

    @rule(data=st.data(), by_checkpoint=st.booleans())
    def obey(self, data, by_checkpoint):
        worker = self._worker(data, lambda w: w.told is not None)
        if worker is None:
            return
        trial_id = worker.launch.trial_id
        if worker.told is Decision.STOP:
            self._say(WorkerDone(trial_id), leaves=True)
        elif by_checkpoint:
            self._say(WorkerPaused(trial_id, self._checkpoint(worker)), leaves=True)
        else:
            worker.told = None
            worker.waits_for_reply = True
            self._say(WorkerSuspended(trial_id), leaves=False)

    @rule(data=st.data(), failed=st.booleans())
    def trainable_ends(self, data, failed):
        worker = self._worker(data, lambda w: not w.waits_for_reply and w.told is None)
        if worker is None:
            return
        trial_id = worker.launch.trial_id
        event = WorkerFailed(trial_id, "ValueError: boom", "") if failed else WorkerDone(trial_id)
        self._say(event, leaves=True)

    @rule(data=st.data(), bystander=st.booleans())
    def worker_dies(self, data, bystander):
        worker = self._worker(data, lambda w: True)
        if worker is None:
            return
        trial_id = worker.launch.trial_id
        self._say(WorkerLost(trial_id, "killed", bystander=bystander), leaves=True)

    # ----- the user ---------------------------------------------------------------------------

    def _command(self, command, *args) -> None:
        with contextlib.suppress(REFUSED):
            command(*args)
        self.runner.step()

    @rule(trial_id=trial_ids)
    def pause(self, trial_id):
        self._command(self.runner.control.pause_trial, trial_id)

    @rule(trial_id=trial_ids)
    def resume(self, trial_id):
        self._command(self.runner.control.resume_trial, trial_id)

    @rule(trial_id=trial_ids, force=st.booleans())
    def stop(self, trial_id, force):
        self._command(self.runner.control.stop_trial, trial_id, force)

    @rule(trial_id=trial_ids)
    def fork(self, trial_id):
        self._command(self.runner.control.fork, trial_id, {"x": 0.5})

    @rule()
    def add(self):
        self._command(self.runner.add_trial, {"x": 0.25})

    @rule(limit=st.integers(min_value=1, max_value=3))
    def concurrency(self, limit):
        self._command(self.runner.control.set_max_concurrent, limit)

    @rule()
    def pause_all(self):
        self._command(self.runner.control.pause_all)

    @rule()
    def resume_all(self):
        self._command(self.runner.control.resume_all)

    @precondition(lambda self: self.runner.flags.ending is None)
    @rule(hold=st.booleans())
    def end_run(self, hold):
        self._command(lambda: self.runner.request_stop(hold=hold))

    # ----- what always holds ------------------------------------------------------------------

    @invariant()
    def the_book_is_consistent(self):
        self.runner.book.check()

    @invariant()
    def only_a_trial_cut_short_says_who_stopped_it(self):
        for trial in self.runner.book:
            if trial.status is TrialStatus.TERMINATED:
                assert trial.stopped_by in (None, "user", "stop criteria"), trial
                assert trial.stopped_by != "stop criteria" or trial.iteration >= 6, trial
            else:
                assert trial.stopped_by is None, (trial.trial_id, trial.status, trial.stopped_by)

    @invariant()
    def the_runner_knows_exactly_the_workers_that_hold_trials(self):
        assert self.runner.book.on_worker() == sorted(self.executor.workers)

    @invariant()
    def every_checkpoint_a_trial_points_to_is_on_disk(self):
        for trial in self.runner.book:
            if trial.checkpoint is not None:
                path = self.runner.storage.path / trial.checkpoint
                assert path.exists(), f"trial {trial.trial_id} lost {trial.checkpoint}"

    @invariant()
    def no_result_is_lost_or_recorded_twice(self):
        logged: dict[int, list[int]] = {}
        for row in self.runner.results:
            logged.setdefault(row["trial_id"], []).append(row["training_iteration"])
        for trial_id, iterations in logged.items():
            trial = self.runner.book[trial_id]
            first = 1 if trial.parent is None else iterations[0]
            assert iterations == list(range(first, first + len(iterations))), (trial_id, iterations)
            assert trial.iteration <= iterations[-1]


TestBookUnderFire = BookUnderFire.TestCase
TestBookUnderFire.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_check_names_the_trial_whose_record_contradicts_the_book():
    book = TrialBook()
    book.put(Trial(trial_id=0, config={}, status=TrialStatus.RUNNING))
    try:
        book.check()
    except AssertionError as error:
        assert "no worker holds trial 0" in str(error)
    else:
        raise AssertionError("a running trial without a worker passed the check")


def test_a_stop_outranks_a_pause_and_a_pause_that_makes_room_is_not_dropped():
    live = LiveTrial(0)
    live.ask(Decision.STOP)
    live.ask(Decision.PAUSE)
    assert live.pending is Decision.STOP
    room = LiveTrial(1, making_room=True, pending=Decision.PAUSE)
    room.drop_pause()
    assert room.pending is Decision.PAUSE
    assert not room.leaving, "a pause that makes room is the runner's, not the trial's"


def test_a_transition_refuses_to_leave_the_record_contradicting_itself():
    idle = LiveTrial(0)
    with pytest.raises(AssertionError, match="told a decision without a worker: trial 0"):
        idle.told_decision(Decision.PAUSE, None, reporting_freely=False)


def test_a_worker_that_lets_go_hands_back_what_was_on_its_way():
    live = LiveTrial(0)
    live.launched(replay_until=None, started=True)
    live.paused_by_user(running=True)
    live.told_decision(Decision.PAUSE, None, reporting_freely=False)
    live.resumed_by_user(running=True)
    underway = live.let_go()
    assert underway.resume_on_arrival and not underway.stop
    assert (live.on_worker, live.told, live.pending, live.resume_on_arrival) == (
        False,
        None,
        None,
        False,
    )
    assert not live.user_paused, "the user's resume stands"
