"""The machinery both loggers share: the runner only enqueues, a slow store never slows the
run, a failing one says so once, and `flush` waits until everything is written."""

from __future__ import annotations

import logging
import threading

import trainables

import nbtune as nt
from nbtune.events import ExperimentDone, TrialResult
from nbtune.integrations._logging_thread import LogWriter, QueuedLogger


class GatedLogger(QueuedLogger):
    """Writes events to a list, but only once `gate` is open: a store as slow as need be."""

    def __init__(self, fail_on_result: bool = False, **options):
        super().__init__(**options)
        self.gate = threading.Event()
        self.written = []
        self.writes = 0
        self.closed_with = []
        self.writer_threads = set()
        self.fail_on_result = fail_on_result

    def _open(self, experiment):
        self.experiment = experiment
        return GatedWriter(self)


class GatedWriter(LogWriter):
    """A run's writer for `GatedLogger`: notes everything on the logger."""

    def __init__(self, logger):
        self.logger = logger

    def write(self, events):
        self.logger.writer_threads.add(threading.current_thread().name)
        self.logger.writes += 1
        self.logger.gate.wait()
        if self.logger.fail_on_result and any(isinstance(e, TrialResult) for e in events):
            raise OSError("disk full\nsecond line")
        self.logger.written.extend(events)

    def close(self, done):
        self.logger.closed_with.append(done)


def run(make_tuner, logger, **options):
    tuner = make_tuner(
        trainables.count_up,
        {"steps": 5, "x": nt.grid([1, 2])},
        metric="loss",
        executor=nt.ThreadExecutor(),
        callbacks=[logger],
        **options,
    )
    tuner.run()
    return tuner


def test_a_slow_store_does_not_hold_the_run_back_and_flush_waits_for_it(make_tuner, caplog):
    logger = GatedLogger(flush_timeout_s=0.2)
    with caplog.at_level(logging.WARNING, logger="nbtune"):
        tuner = run(make_tuner, logger)
    assert tuner.state == "finished"
    assert len(tuner.history()) == 10
    assert not any(isinstance(e, TrialResult) for e in logger.written), "nothing written yet"
    assert any("still writing after 0.2 s" in r.getMessage() for r in caplog.records)

    logger.gate.set()
    assert logger.flush(30)
    results = [e.result["training_iteration"] for e in logger.written if isinstance(e, TrialResult)]
    assert sorted(results) == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5], "every result, once"
    assert isinstance(logger.written[-1], ExperimentDone)
    assert logger.closed_with == [logger.written[-1]], "closed once, at the run's end"
    assert logger.experiment.name == tuner.name
    assert logger.flush(0), "a logger whose run has ended has nothing left to wait for"


def test_a_failing_store_says_so_once_and_is_not_tried_again(make_tuner, caplog):
    logger = GatedLogger(fail_on_result=True)
    logger.gate.set()
    with caplog.at_level(logging.WARNING, logger="nbtune"):
        tuner = run(make_tuner, logger)
    assert tuner.state == "finished"
    assert len(tuner.history()) == 10, "the run lost nothing"
    failures = [r.getMessage() for r in caplog.records if "GatedLogger failed" in r.getMessage()]
    assert failures == [
        "nbtune: GatedLogger failed (OSError: disk full); it logs nothing more of this run, "
        "which goes on"
    ]
    writes = logger.writes
    assert isinstance(logger.failure, OSError)
    assert logger.closed_with and isinstance(logger.closed_with[0], ExperimentDone), (
        "still closed, to release what it holds"
    )
    assert logger.flush(5)
    assert logger.writes == writes


def test_the_runner_thread_only_enqueues(make_tuner):
    logger = GatedLogger()
    logger.gate.set()
    run(make_tuner, logger)
    assert logger.writer_threads == {"nbtune-GatedLogger"}


def test_a_logger_given_to_subscribe_instead_of_callbacks_says_how_to_pass_it(make_tuner, caplog):
    logger = GatedLogger()
    tuner = make_tuner(
        trainables.count_up, {"steps": 2}, metric="loss", executor=nt.ThreadExecutor()
    )
    tuner.subscribe(logger)
    with caplog.at_level(logging.WARNING, logger="nbtune"):
        tuner.run()
    messages = [r.getMessage() for r in caplog.records if "was not set up" in r.getMessage()]
    assert messages == [
        "nbtune: GatedLogger was not set up; pass it as Tuner(..., callbacks=[logger]), "
        "not to tuner.subscribe()"
    ]
    assert logger.written == []


def test_one_logger_serves_runs_one_after_another(make_tuner):
    logger = GatedLogger()
    logger.gate.set()
    first = run(make_tuner, logger)
    second = run(make_tuner, logger)
    assert logger.experiment.name == second.name != first.name
    done = [e for e in logger.written if isinstance(e, ExperimentDone)]
    assert len(done) == 2 and len(logger.closed_with) == 2
    results = [e for e in logger.written if isinstance(e, TrialResult)]
    assert len(results) == 20, "both runs' results"
