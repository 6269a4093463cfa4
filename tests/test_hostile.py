"""Hostile use: trainables and inputs that try to lose data, hang the run or kill it."""

from __future__ import annotations

import pytest
import trainables

import nbtune as nt


@pytest.mark.parametrize("trainable", [trainables.reports_in_finally, trainables.swallows_the_stop])
def test_a_trial_that_reports_after_its_stop_neither_hangs_the_run_nor_records_it(
    make_tuner, executor_class, trainable
):
    tuner = make_tuner(
        trainable,
        {"x": nt.grid([0, 1, 2])},
        metric="loss",
        max_concurrent=1,
        stop={"training_iteration": 2},
        executor=executor_class(),
    )
    tuner.start()
    assert tuner.wait(timeout=30), "the run hangs"
    assert [trial.status for trial in tuner.trials] == [nt.TrialStatus.TERMINATED] * 3
    history = tuner.history()
    assert history["training_iteration"].tolist() == [1, 2] * 3
    assert "last" not in history and "caught" not in history


def test_a_restored_run_cuts_a_torn_last_line_before_it_appends(make_tuner, recwarn):
    tuner = make_tuner(trainables.count_up, {"steps": 3}, metric="loss", num_samples=1)
    tuner.run()
    for log in ("results.jsonl", "trials.jsonl", "commands.jsonl"):
        with open(tuner.path / log, "a") as file:
            file.write('{"trial_id": 0, "training_itera')
    again = nt.Tuner.restore(tuner.path, trainables.count_up, num_samples=2, progress=False)
    again.run()
    history = nt.load(tuner.path).history()
    assert sorted(zip(history["trial_id"], history["training_iteration"], strict=True)) == [
        (trial_id, step) for trial_id in (0, 1) for step in (1, 2, 3)
    ], "the second trial's first result is not glued to the fragment"
    assert not [w for w in recwarn if "incomplete" in str(w.message)]
    for log in ("results.jsonl", "trials.jsonl", "commands.jsonl"):
        text = (tuner.path / log).read_text()
        assert text.endswith("\n") or not text, f"{log} ends in whole lines"
