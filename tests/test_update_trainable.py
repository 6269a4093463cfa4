"""`Tuner.update_trainable`: a trainable fixed mid-run runs every trial launched from then on;
a bad one is refused in one line and changes nothing. (Every executor swapping it, running
trials keeping their code: tests/executors/test_conformance.py, test_tuner_conformance.py.)"""

from __future__ import annotations

import json
import threading

import pytest
import trainables
from kernels import WAIT_UNTIL_HELD, Kernel
from test_control import result_of

import nbtune as nt
from nbtune.code_hash import code_hash


def test_a_run_held_by_a_typo_carries_on_with_the_fixed_trainable(tmp_path):
    kernel = Kernel(tmp_path)
    try:
        kernel.check(WAIT_UNTIL_HELD)
        held = kernel.check("""
            import nbtune as nt, threading

            def train(config):
                nt.report(loss=config["x"] * scael)

            tuner = nt.Tuner(train, {"x": nt.grid([1, 2, 3])}, metric="loss", max_concurrent=1,
                             max_consecutive_failures=2)
            tuner.start(display=False)
            wait_until_held(tuner)
            print(tuner.status.total, tuner.status.error)
        """)
        assert held == "2 2\n", "two trials failed alike: the run holds, starting no third"
        fixed = kernel.check("""
            def train(config):
                nt.report(loss=config["x"] * 0.5)

            tuner.update_trainable(train)
            print(tuner.retry("errored"))
            tuner.resume_all()
            print(tuner.wait(60), tuner.state)
            frame = tuner.dataframe()
            from nbtune.code_hash import code_hash
            print(frame["status"].tolist(), frame["attempts"].tolist())
            print((frame["code"] == code_hash(train)).all(), frame["loss"].tolist())
        """)
        assert fixed == (
            "[0, 1]\n"
            "True finished\n"
            "['TERMINATED', 'TERMINATED', 'TERMINATED'] [2, 2, 1]\n"
            "True [0.5, 1.0, 1.5]\n"
        )
    finally:
        kernel.shutdown()


def test_a_trainable_that_cannot_be_sent_to_the_workers_is_refused_and_nothing_changes(
    make_tuner, log
):
    tuner = make_tuner(trainables.forever, {"interval": 0.01}, metric="loss", callbacks=[log])
    tuner.start()
    log.wait_for(result_of(0, 1))
    lock = threading.Lock()

    def holds_a_lock(config):
        with lock:
            nt.report(loss=0.0)

    with pytest.raises(TypeError) as refused:
        tuner.update_trainable(holds_a_lock)
    assert str(refused.value) == (
        "the trainable 'holds_a_lock' cannot be sent to worker processes (TypeError: cannot "
        "pickle '_thread.lock' object); create that object inside the trainable, or pass "
        "executor=nbtune.ThreadExecutor()"
    )
    with pytest.raises(TypeError, match=r"^trainable=42: pass a function train\(config\)"):
        tuner.update_trainable(42)

    assert tuner.trainable is trainables.forever
    later = tuner.add_trial({"interval": 0.01})
    log.wait_for(result_of(later, 1))
    tuner.stop()
    assert tuner.wait(30)
    assert set(tuner.dataframe()["code"]) == {code_hash(trainables.forever)}
    commands = (tuner.path / "commands.jsonl").read_text().splitlines()
    assert "update_trainable" not in {json.loads(line)["command"] for line in commands}


def test_before_start_it_simply_replaces_the_trainable(make_tuner):
    tuner = make_tuner(trainables.first_version, {"steps": 2}, metric="loss")
    tuner.update_trainable(trainables.second_version)
    tuner.run()
    assert tuner.history()["version"].tolist() == [2, 2]
    assert tuner.dataframe()["code"].tolist() == [code_hash(trainables.second_version)]
