"""Random commands from several threads at a live run: the run's invariants always hold."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import trainables
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import nbtune as nt
from nbtune.events import TrialResult, TrialStarted

DOCUMENTED = (nt.IllegalTransitionError, nt.TrialNotFoundError, nt.RunEndedError)
trial_ids = st.integers(min_value=0, max_value=7)


class LiveRun(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        self.last_iteration: dict[int, int] = {}
        self.violations: list[str] = []
        self.results = 0
        self.progress = threading.Condition()
        space = {
            "steps": 12,
            "interval": 0.01,
            "checkpoint": nt.choice([True, False]),
            "x": nt.uniform(0, 1),
        }
        self.tuner = nt.Tuner(
            trainables.steps,
            space,
            num_samples=6,
            max_concurrent=2,
            name="live",
            storage_path=self.folder,
            progress=False,
            callbacks=[self.check_order],
        )
        self.tuner.start()
        self.senders = ThreadPoolExecutor(3)
        self.sent = []

    def check_order(self, event):
        if isinstance(event, TrialStarted):
            status = self.tuner.status
            if status.running > status.max_concurrent:
                self.violations.append(f"{status.running} running, limit {status.max_concurrent}")
        if isinstance(event, TrialResult):
            with self.progress:
                self.results += 1
                self.progress.notify_all()
            iteration = event.result["training_iteration"]
            previous = self.last_iteration.get(event.trial_id)
            if previous is not None and iteration != previous + 1:
                self.violations.append(f"trial {event.trial_id}: {previous} then {iteration}")
            self.last_iteration[event.trial_id] = iteration

    def send(self, command, *args):
        self.sent.append(self.senders.submit(command, *args))

    @rule(results=st.integers(1, 8))
    def let_it_run(self, results):
        """Let the run report a few more results (or give up after a second, if it is held)."""
        with self.progress:
            target = self.results + results
            self.progress.wait_for(lambda: self.results >= target, timeout=1)

    @rule(trial_id=trial_ids)
    def pause(self, trial_id):
        self.send(self.tuner.pause, trial_id)

    @rule(trial_id=trial_ids)
    def resume(self, trial_id):
        self.send(self.tuner.resume, trial_id)

    @rule(trial_id=trial_ids)
    def stop(self, trial_id):
        self.send(self.tuner.stop, trial_id)

    @rule()
    def pause_all(self):
        self.send(self.tuner.pause_all)

    @rule()
    def resume_all(self):
        self.send(self.tuner.resume_all)

    @rule(x=st.floats(0, 1))
    def add_trial(self, x):
        self.send(self.tuner.add_trial, {"steps": 5, "interval": 0.003, "checkpoint": True, "x": x})

    @rule(limit=st.integers(1, 3))
    def set_max_concurrent(self, limit):
        self.send(self.tuner.set_max_concurrent, limit)

    @rule(trial_id=trial_ids)
    def fork(self, trial_id):
        self.send(self.tuner.fork, trial_id, {"x": 0.5})

    @invariant()
    def results_in_order_and_no_trial_starts_above_the_limit(self):
        assert self.violations == []

    def teardown(self):
        try:
            for sent in self.sent:
                error = sent.exception(timeout=30)
                assert error is None or isinstance(error, DOCUMENTED), repr(error)
            if self.tuner.status.live:
                self.tuner.resume_all()
            assert self.tuner.wait(60), "the run must end once nothing is held"
            self.check_the_record()
        finally:
            self.senders.shutdown()
            shutil.rmtree(self.folder)

    def check_the_record(self):
        frame = self.tuner.dataframe()
        assert set(frame["status"]) <= {"TERMINATED", "ERROR"}
        assert (frame["status"] == "TERMINATED").all(), frame["error"].dropna().tolist()
        history = self.tuner.history()
        for _, its in history.groupby("trial_id")["training_iteration"]:
            assert its.tolist() == list(range(its.iloc[0], its.iloc[0] + len(its)))
        repeated = history[history["step"] != history["training_iteration"]]
        assert repeated.empty, "a resumed trial repeated or skipped work:\n" + repeated.to_string()
        lines = (self.folder / "live" / "results.jsonl").read_text().splitlines()
        on_disk = [(row["trial_id"], row["training_iteration"]) for row in map(json.loads, lines)]
        assert len(on_disk) == len(set(on_disk)) == len(history), "each result on disk once"
        assert self.violations == []


LiveRun.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLiveRun = LiveRun.TestCase
