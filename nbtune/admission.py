"""Admission: which trial starts next, and where.

A trial starts when the run has room for it: fewer trials hold workers than `max_concurrent`,
the machine's CPUs and GPUs hold one more (`resources_per_trial`), and its GPUs are free. The
searcher fills the queue (one trial ahead, or every planned trial for a scheduler that shares
time among them), the scheduler picks from it, and the launch sends the trial to a worker,
from its latest checkpoint or from scratch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from nbtune.artifacts import current_directory
from nbtune.book import TrialBook
from nbtune.clocks import Clocks
from nbtune.code_hash import code_hash
from nbtune.events import TrialAdded, TrialStarted
from nbtune.executors._base import Executor
from nbtune.horizon import horizon_of, scheduler_max_t
from nbtune.ledger import Ledger
from nbtune.protocol import Decision, TrialLaunch
from nbtune.resources import TrialResources
from nbtune.run_state import RunFlags
from nbtune.schedulers._base import Exploit, Scheduler
from nbtune.search._base import Searcher
from nbtune.storage import artifact_dir
from nbtune.trial import Trial, TrialStatus


class Admission:
    """Creates, queues and launches a run's trials; runner thread only."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        flags: RunFlags,
        executor: Executor,
        searcher: Searcher,
        scheduler: Scheduler,
        resources: TrialResources,
        max_concurrent: int,
        clocks: Clocks,
        code: str | None = None,
        chdir_to_trial_dir: bool = True,
    ) -> None:
        self.ledger = ledger
        self.book: TrialBook = ledger.book
        self.flags = flags
        self.executor = executor
        self.searcher = searcher
        self.scheduler = scheduler
        self.resources = resources
        self.max_concurrent = max_concurrent
        self.clocks = clocks
        self.code = code
        self.chdir = chdir_to_trial_dir
        """Trials run in their artifact folders (see `_working_dir`)."""
        """The hash of the trainable's code, recorded on each trial at its launch."""
        self.space_version = 0
        """Which search space new trials come from (see `Trial.space_version`)."""
        self.too_late = False
        """The next trial would not finish before the run's deadline, so none starts."""
        self.searcher_waits = False
        """The searcher had nothing to give at its last ask (a `ConcurrencyLimiter` at its cap)."""

    # ----- the plan ---------------------------------------------------------------------------

    def plan(self) -> None:
        """Tell the scheduler how many trials the run plans (unless a deadline may end it
        sooner), and whether its searcher learns from them."""
        planned = self.searcher.planned_trials if self.clocks.deadline is None else None
        self.scheduler.plan(planned, model_based=self.searcher.learns)

    def extend(self, num_samples: int) -> None:
        """Let the searcher suggest `num_samples` more trials, and tell the scheduler."""
        self.searcher.extend(num_samples)
        self.plan()

    def update_trainable(self, trainable: Any) -> None:
        """Launch `trainable` from now on, each trial recording its code's hash; the trials
        on workers keep theirs."""
        self.executor.update_trainable(trainable)
        self.code = code_hash(trainable)

    def set_max_concurrent(self, max_concurrent: int) -> None:
        """Change how many trials run at once; above the new limit, the most recently started
        trials give back their workers at their next report (see `TrialBook.make_room`)."""
        self.max_concurrent = max_concurrent
        self.executor.resize(max_concurrent)
        self.book.make_room(max_concurrent)

    # ----- new trials -------------------------------------------------------------------------

    def add_trial(
        self, config: Mapping[str, Any], *, parent: Trial | None = None, origin: str = "user"
    ) -> int:
        """Create a PENDING trial and queue it; return its id.

        A trial forked from `parent` starts from the parent's latest checkpoint, and waits
        ahead of fresh trials.
        """
        trial = Trial(
            trial_id=len(self.book),
            config=dict(config),
            origin=origin,
            space_version=self.space_version,
        )
        if parent is not None:
            trial = trial.evolve(
                parent=parent.trial_id,
                checkpoint=parent.checkpoint,
                checkpoint_iteration=parent.checkpoint_iteration,
                iteration=parent.checkpoint_iteration,
            )
        self.ledger.record(trial)
        self.book.enqueue(trial.trial_id, "last" if parent is None else "ahead")
        self.scheduler.on_trial_add(trial)
        if origin != "searcher":
            self.searcher.on_trial_add(trial.trial_id, trial.config)
        self.ledger.save_state(now_and_then=True)
        self.ledger.bus.publish(TrialAdded(trial.trial_id, trial.config))
        return trial.trial_id

    def fork_when_replaced_ends(self, request: Exploit) -> None:
        """Fork for the scheduler; the fork waits for the trial it replaces to end, so the
        population never grows."""
        replaced = self.book.trials.get(request.replaces) if request.replaces is not None else None
        if replaced is not None and not replaced.status.is_finished:
            self.book.live[replaced.trial_id].fork_at_end(request)
            return
        self.add_trial(request.config, parent=self.book[request.source], origin="scheduler")

    def fill_queue(self) -> bool:
        """Queue the searcher's next trial when none waits (every trial it plans, for a
        scheduler that shares time among them); return whether the queue is still empty, in
        which case the scheduler has been told (it may ask to resume a trial)."""
        queue_all = self.scheduler.shares_time and self.searcher.planned_trials is not None
        while not self.searcher.is_finished and (queue_all or not self.book.queue):
            config = self.searcher.suggest(len(self.book))
            self.searcher_waits = config is None
            if config is None:
                break
            self.add_trial(config, origin="searcher")
            if not queue_all:
                break
        if self.book.queue:
            return False
        self.scheduler.on_queue_empty()
        return True

    def choose(self) -> Trial | None:
        """Take the trial the scheduler picks from the queue, if any, and if it would finish
        before the run's deadline (see `too_late`)."""
        waiting = self.book.waiting()
        chosen = self.scheduler.choose_trial_to_run(waiting) if waiting else None
        self.too_late = chosen is not None and not self.clocks.can_finish(chosen, self.horizon())
        if chosen is None or self.too_late:
            return None
        self.book.queue.remove(chosen.trial_id)
        return chosen

    def horizon(self) -> int | None:
        """How many iterations a trial runs at most, if anything says (`nbtune.horizon`)."""
        max_t = scheduler_max_t(self.scheduler)
        return horizon_of(self.book.trials.values(), max_t, self.ledger.should_stop.iteration_limit)

    # ----- room -------------------------------------------------------------------------------

    def has_room(self) -> bool:
        """Whether one more trial may start: the run is not held, and it fits under
        `max_concurrent`, under what the machine's CPUs and GPUs hold, with its GPUs free."""
        if self.flags.paused_all or self.flags.held_by:
            return False
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

    def release_a_held_worker(self) -> None:
        """A trial that the scheduler paused without a checkpoint of that step waits in its
        worker (suspended). When every worker is taken and another trial waits to run, one such
        trial gives its worker back: it stays PAUSED, to resume from its latest checkpoint (or
        from scratch) and repeat the steps since, whose results are replayed, not recorded."""
        if self.flags.ending is not None or self.flags.paused_all:
            return
        if self.book.slots_taken() < self.max_concurrent:
            return
        if not self.book.queue and self.searcher.is_finished:
            return
        held = [
            self.book[trial_id]
            for trial_id, live in self.book.live.items()
            if self.book[trial_id].suspended and not live.user_paused
        ]
        if held:
            trial = held[0]
            self.ledger.reply(trial, Decision.STOP)
            self.ledger.restarted(trial, status=TrialStatus.PAUSED, paused_by=trial.waits_by)

    def starts_none(self) -> bool:
        """Whether no new trial starts while the paused ones stay paused: the searcher has
        nothing left (or nothing now), or trials the user suspended hold every worker."""
        if self.searcher.is_finished or self.searcher_waits:
            return True
        held = [live for live in self.book.live.values() if live.on_worker]
        return len(held) >= self.max_concurrent and all(live.user_paused for live in held)

    # ----- the launch -------------------------------------------------------------------------

    def launch(self, trial: Trial) -> None:
        """Send the trial to a worker, then journal it as running (a crash in between leaves
        it pending, which is just as true: it has reported nothing yet).

        The trial starts from its latest checkpoint (or from scratch): results it logged after
        that checkpoint will be replayed, not recorded twice.
        """
        restart = trial.checkpoint_iteration or 0
        gpus = self._free_gpus() or None
        live = self.book.live[trial.trial_id]
        replay_until = trial.iteration if trial.iteration > restart else None
        live.launched(replay_until, started=not self.executor.announces_start)
        trial = trial.evolve(
            status=TrialStatus.RUNNING,
            iteration=restart,
            started_at=time.time(),
            gpus=gpus,
            code=self.code,
        )
        folder = _absolute(artifact_dir(self.ledger.storage.path, trial.trial_id))
        self.executor.start(
            TrialLaunch(
                trial_id=trial.trial_id,
                config=trial.config,
                iteration=restart,
                checkpoint_path=_absolute(self.ledger.absolute(trial.checkpoint)),
                checkpoint_dir=_absolute(self.ledger.storage.checkpoint_dir(trial.trial_id)),
                capture_output=self.executor.captures_output,
                metric=self.ledger.metric,
                threads=self._threads(),
                gpus=gpus if self.resources.gpu and not self.executor.schedules_resources else None,
                artifact_dir=folder,
                working_dir=self._working_dir(folder),
            )
        )
        self.ledger.record(trial)
        self.ledger.bus.publish(TrialStarted(trial.trial_id, trial.checkpoint_iteration))

    def _working_dir(self, artifact_folder: str) -> str | None:
        """Where a trial in a process of its own works: its artifact folder, or else where the
        notebook does now; a trial on a thread of the driver stays where the driver is."""
        if not self.executor.isolates_trials:
            return None
        return artifact_folder if self.chdir else current_directory()

    def _threads(self) -> int | None:
        """The thread pools of a trial in a process of its own: its CPUs, or an even share."""
        if not self.executor.isolates_trials:
            return None
        return self.resources.threads(self.executor.cpus(), self.max_concurrent)


def _absolute(path: str | os.PathLike | None) -> str | None:
    """A path for the worker, absolute: a trial changes its working directory (to its
    artifact folder) before it saves or loads a checkpoint."""
    return None if path is None else os.path.abspath(path)
