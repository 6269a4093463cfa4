"""The experiment directory: logs that only grow, files replaced whole, and reading it back."""

from __future__ import annotations

import numpy as np
import pytest

from nbtune import storage as storage_module
from nbtune.storage import (
    ExperimentReader,
    ExperimentStorage,
    checkpoint_dir,
    dumps,
    error_file,
    loads,
    output_file,
    trial_folder,
    write_atomically,
)
from nbtune.trial import Trial, TrialStatus


@pytest.fixture
def storage(tmp_path):
    store = ExperimentStorage(tmp_path / "exp")
    store.create({"name": "exp", "metric": "loss", "mode": "min"})
    yield store
    store.close()


def test_the_directory_is_private_to_its_owner(storage):
    assert storage.path.stat().st_mode & 0o777 == 0o700


def test_a_trials_files_are_where_the_layout_says(storage):
    experiment = storage.path
    assert trial_folder(experiment, 3) == experiment / "trials" / "3"
    assert checkpoint_dir(experiment, 3) == experiment / "trials" / "3" / "checkpoints"
    assert error_file(experiment, 3) == experiment / "trials" / "3" / "error.txt"
    assert output_file(experiment, 3) == experiment / "trials" / "3" / "output.log"

    assert storage.checkpoint_dir(3) == checkpoint_dir(experiment, 3), "made by the writer"
    storage.append_error(3, "attempt 1: boom\n")
    storage.append_output(3, "hello\n")
    assert error_file(experiment, 3).read_text() == "attempt 1: boom\n"
    assert output_file(experiment, 3).read_text() == "hello\n"


def test_a_run_pulled_without_a_trials_folder_makes_it_as_a_trial_writes(storage):
    """A remote store keeps no empty folder: a run pulled before any trial file was synced has
    no `trials` folder, and its restore must still write a checkpoint or an error."""
    (storage.path / "trials").rmdir()
    assert storage.checkpoint_dir(0) == checkpoint_dir(storage.path, 0)
    (storage.path / "trials" / "0" / "checkpoints").rmdir()
    (storage.path / "trials" / "0").rmdir()
    (storage.path / "trials").rmdir()
    storage.append_error(1, "attempt 1: boom\n")
    assert error_file(storage.path, 1).read_text() == "attempt 1: boom\n"
    assert (storage.path / "trials").stat().st_mode & 0o777 == 0o700


def test_odd_values_survive_the_journal():
    value = {"n": np.int64(3), "f": np.float32(0.5), "fn": len, "nan": float("nan")}
    back = loads(dumps(value), trust=True)
    assert back["n"] == 3
    assert back["f"] == 0.5
    assert back["fn"] is len
    assert loads(dumps(value))["fn"].load() is len, "kept pickled unless trusted"
    assert back["nan"] != back["nan"]


def test_an_atomic_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "state.pkl"
    write_atomically(target, b"old")
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pkl"]


def test_the_reader_replays_results_over_the_journal(storage):
    trial = Trial(trial_id=0, config={"lr": 0.1})
    storage.record_trial(trial)
    storage.record_trial(trial.evolve(status=TrialStatus.RUNNING))
    for iteration, loss in enumerate([0.5, 0.2, 0.3], start=1):
        storage.append_result({"trial_id": 0, "training_iteration": iteration, "loss": loss})
    reader = ExperimentReader(storage.path)
    [back] = reader.trials(reader.results(), "loss", "min")
    assert back.status is TrialStatus.RUNNING
    assert back.iteration == 3
    assert back.best_value == 0.2
    assert back.last_result["loss"] == 0.3


def test_a_torn_last_line_is_skipped_with_a_warning(storage):
    storage.append_result({"trial_id": 0, "training_iteration": 1, "loss": 0.5})
    storage.close()
    with open(storage.path / "results.jsonl", "a") as file:
        file.write('{"trial_id": 0, "training_it')
    with pytest.warns(UserWarning, match="skipped its last line, which is incomplete"):
        rows = ExperimentReader(storage.path).results()
    assert rows == [{"trial_id": 0, "training_iteration": 1, "loss": 0.5}]
    storage.open_logs()


def test_compaction_keeps_the_same_story(storage, monkeypatch):
    monkeypatch.setattr(storage_module, "_COMPACT_EVERY", 3)
    trials = {i: Trial(trial_id=i, config={"i": i}) for i in range(4)}
    for i in range(4):
        storage.record_trial(trials[i], trials.values)
    trials[1] = trials[1].evolve(status=TrialStatus.ERROR, error="boom")
    storage.record_trial(trials[1], trials.values)
    assert (storage.path / "trials.json").exists()
    back = ExperimentReader(storage.path).trials([], "loss", "min")
    assert [t.status for t in back] == [TrialStatus.PENDING, TrialStatus.ERROR] + [
        TrialStatus.PENDING
    ] * 2
    assert back[1].error == "boom"


def test_a_folder_without_an_experiment(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no nbtune experiment"):
        ExperimentReader(tmp_path)
