"""Checkpoints as real frameworks write them: directories of files, kept in check on disk, and
the best model back at the end."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import pytest
import trainables

import nbtune as nt
from nbtune import checkpoint
from nbtune.events import TrialCompleted, TrialPaused, TrialResult
from nbtune.executors.dask import INLINE_CHECKPOINT_BYTES
from nbtune.session import TrialSession


def result_of(trial_id, iteration):
    return lambda event: (
        isinstance(event, TrialResult)
        and event.trial_id == trial_id
        and event.result["training_iteration"] >= iteration
    )


def paused(trial_id):
    return lambda event: isinstance(event, TrialPaused) and event.trial_id == trial_id


def start_then_pause(tuner, log, after):
    """Start the run, and pause trial 0 once it has reported `after` results."""
    tuner.start()
    log.wait_for(result_of(0, after))
    tuner.pause(0)
    log.wait_for(paused(0))


def stored_steps(tuner, trial_id):
    """The iterations whose checkpoints trial `trial_id` keeps on disk."""
    return sorted(checkpoint.stored(tuner.path / "trials" / str(trial_id) / "checkpoints"))


def iterations(tuner, trial_id):
    history = tuner.history()
    return history.loc[history["trial_id"] == trial_id, "training_iteration"].tolist()


def step_of(stored):
    return int((stored.path / "step.txt").read_text())


def test_a_directory_checkpoint_survives_pause_and_resume_and_comes_back(
    executor_class, make_tuner, log
):
    tuner = make_tuner(
        trainables.model_files,
        {"steps": 20, "best_at": 5},
        metric="loss",
        executor=executor_class(),
        callbacks=[log],
    )
    start_then_pause(tuner, log, after=3)
    assert isinstance(tuner.get_checkpoint(0), nt.Checkpoint)
    tuner.resume(0)
    assert tuner.wait(60)
    assert iterations(tuner, 0) == list(range(1, 21)), "no step repeated or missed"
    latest = tuner.get_checkpoint(0, "latest")
    assert isinstance(latest, nt.Checkpoint) and step_of(latest) == 20
    assert step_of(tuner.best_checkpoint) == 5, "the model of the best result"
    assert stored_steps(tuner, 0) == [5, 20], "the latest and the best, no more"
    assert tuner.dataframe().loc[0, "checkpoint_mb"] > 0


def test_a_failed_trial_retries_from_its_directory_checkpoint(executor_class, make_tuner):
    tuner = make_tuner(
        trainables.model_files,
        {"steps": 6, "fail_at": 3},
        metric="loss",
        max_failures=1,
        executor=executor_class(),
    )
    tuner.run()
    frame = tuner.dataframe()
    assert frame.loc[0, "status"] == "TERMINATED"
    assert frame.loc[0, "attempts"] == 2
    assert iterations(tuner, 0) == list(range(1, 7))


def test_a_fork_starts_from_the_parent_s_directory_checkpoint(executor_class, make_tuner, log):
    tuner = make_tuner(
        trainables.model_files,
        {"steps": 20, "best_at": 1, "interval": 0.02},
        metric="loss",
        executor=executor_class(),
        callbacks=[log],
    )
    start_then_pause(tuner, log, after=3)
    start = tuner.get_trial(0).checkpoint_iteration
    child = tuner.fork(0, {"steps": 22})
    tuner.resume(0)
    assert tuner.wait(60)
    assert iterations(tuner, child) == list(range(start + 1, 23))
    assert step_of(tuner.get_checkpoint(child)) == 22
    assert stored_steps(tuner, 0) == [1, 20], "the parent's pause checkpoint went once unused"


def test_a_restored_run_resumes_a_paused_trial_from_its_directory_checkpoint(
    executor_class, make_tuner, log
):
    tuner = make_tuner(
        trainables.model_files,
        {"steps": 20},
        metric="loss",
        executor=executor_class(),
        callbacks=[log],
    )
    start_then_pause(tuner, log, after=2)
    tuner.stop()
    assert tuner.wait(30)
    restored = nt.Tuner.restore(
        tuner.path, trainables.model_files, progress=False, executor=executor_class()
    )
    restored.run()
    assert iterations(restored, 0) == list(range(1, 21))
    assert step_of(nt.load(tuner.path).get_checkpoint(0)) == 20


@pytest.mark.parametrize(
    ("keep", "kept"),
    [(1, [10]), (2, [4, 10]), (3, [3, 4, 5, 10]), (None, list(range(1, 11)))],
)
def test_keep_checkpoints_keeps_the_latest_and_the_best(make_tuner, keep, kept):
    tuner = make_tuner(
        trainables.model_files,
        {"steps": 10, "best_at": 4, "interval": 0},
        metric="loss",
        keep_checkpoints=keep,
    )
    tuner.run()
    assert stored_steps(tuner, 0) == kept
    best_kept = 4 if 4 in kept else 10
    assert step_of(tuner.get_checkpoint(0, "best")) == best_kept, "the best of those kept"


def test_a_pickled_checkpoint_comes_back_as_the_object(make_tuner):
    tuner = make_tuner(trainables.quadratic, {"lr": 0.01, "layers": 1}, metric="loss")
    tuner.run()
    assert tuner.get_checkpoint(0) == {"epoch": 19}
    assert tuner.best_checkpoint == {"epoch": 19}, "the loss falls to the end"
    assert nt.load(tuner.path).best_checkpoint == {"epoch": 19}


def test_a_trial_without_checkpoints_has_none(make_tuner):
    tuner = make_tuner(trainables.count_up, {"steps": 2}, metric="loss")
    tuner.run()
    assert tuner.get_checkpoint(0) is None
    assert tuner.get_checkpoint(0, "best") is None
    assert tuner.dataframe().loc[0, "checkpoint_mb"] == 0


def test_bad_checkpoint_requests_say_what_to_change(make_tuner, tmp_path):
    with pytest.raises(ValueError, match=r"keep_checkpoints=0: pass a whole number >= 1"):
        make_tuner(trainables.count_up, {}, keep_checkpoints=0)
    with pytest.raises(ValueError, match=r"no such directory"):
        nt.Checkpoint.from_directory(tmp_path / "missing")
    tuner = make_tuner(trainables.count_up, {"steps": 1}, metric="loss")
    tuner.run()
    with pytest.raises(ValueError, match=r"which='worst': use 'latest' or 'best'"):
        tuner.get_checkpoint(0, "worst")
    with pytest.raises(nt.TrialNotFoundError, match=r"there is no trial 7"):
        tuner.get_checkpoint(7)


def test_a_packed_directory_unpacks_to_the_same_files(tmp_path):
    source = tmp_path / "model"
    (source / "sub").mkdir(parents=True)
    (source / "weights.bin").write_bytes(b"\x00\x01" * 1000)
    (source / "sub" / "config.json").write_text("{}")
    stored = checkpoint.save(nt.Checkpoint.from_directory(source), tmp_path / "c", 7)
    assert stored.name == "checkpoint_000007" and checkpoint.iteration_of(stored) == 7
    copy = checkpoint.unpack(checkpoint.pack(stored), tmp_path / "elsewhere" / stored.name)
    assert (copy / "weights.bin").read_bytes() == b"\x00\x01" * 1000
    assert (copy / "sub" / "config.json").read_text() == "{}"
    assert checkpoint.load(copy) == nt.Checkpoint(Path(copy))


def test_a_large_directory_checkpoint_travels_through_dask(make_tuner, log, dask_client):
    size = 2_000_000
    assert size > INLINE_CHECKPOINT_BYTES, "fetched from the worker, not carried inline"
    tuner = make_tuner(
        trainables.model_files,
        {"steps": 20, "bytes": size},
        metric="loss",
        executor=nt.DaskExecutor(dask_client),
        callbacks=[log],
    )
    start_then_pause(tuner, log, after=2)
    tuner.resume(0)
    assert tuner.wait(60)
    assert iterations(tuner, 0) == list(range(1, 21))
    latest = tuner.get_checkpoint(0)
    assert step_of(latest) == 20
    assert (latest.path / "weights.bin").stat().st_size == size


# ----- what get_checkpoint hands out, and what from_directory refuses (issue 30, item 7) -----


def scribbles_on_its_checkpoint(config):
    """`trainables.model_files`, except that a trial resumed from a checkpoint first writes
    into the folder `get_checkpoint()` gave it (a step far ahead, and a file of its own)."""
    checkpoint = nt.get_checkpoint()
    if checkpoint is not None and config.get("scribble"):
        (checkpoint.path / "step.txt").write_text("1000")
        (checkpoint.path / "mine.txt").write_text("the fork's")
    trainables.model_files(config)


def test_a_fork_that_writes_into_its_checkpoint_leaves_its_parent_s_alone(make_tuner, log):
    tuner = make_tuner(
        scribbles_on_its_checkpoint,
        {"steps": 8, "best_at": 1, "interval": 0.01, "scribble": False},
        metric="loss",
        callbacks=[log],
    )
    start_then_pause(tuner, log, after=3)
    start = tuner.get_trial(0).checkpoint_iteration
    stored = tuner.get_checkpoint(0)
    child = tuner.fork(0, {"scribble": True})
    log.wait_for(lambda e: isinstance(e, TrialCompleted) and e.trial_id == child)
    assert step_of(stored) == start and not (stored.path / "mine.txt").exists()
    tuner.resume(0)
    assert tuner.wait(60)
    assert iterations(tuner, 0) == list(range(1, 9)), "the parent resumed where it paused"


def test_get_checkpoint_hands_out_a_private_copy_that_goes_with_the_trial(tmp_path):
    source = tmp_path / "model"
    source.mkdir()
    (source / "step.txt").write_text("3")
    stored = checkpoint.save(nt.Checkpoint.from_directory(source), tmp_path / "stored", 3)
    session = TrialSession(
        0,
        channel=None,
        iteration=3,
        checkpoint_path=str(stored),
        checkpoint_dir=str(tmp_path / "new"),
        capture_output=False,
    )
    with session:
        got = session.get_checkpoint()
        assert got.path != stored and step_of(got) == 3
        assert session.get_checkpoint() == got, "the same copy for the whole trial"
        (got.path / "step.txt").write_text("99")
    assert not got.path.exists(), "removed when the trial ends"
    assert (stored / "step.txt").read_text() == "3"


def _fifo(folder):
    os.mkfifo(folder / "pipe")


def _dangling(folder):
    (folder / "gone").symlink_to(folder / "missing.bin")


def _loop(folder):
    (folder / "again").symlink_to(".")


def _outside(folder):
    (folder / "etc").symlink_to("/etc")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_fifo, r"'pipe' is not a regular file or folder"),
        (_dangling, r"'gone' is a link to nothing"),
        (_loop, r"'again' is a link to a folder that contains it"),
        (_outside, r"'etc' is a link out of the folder"),
    ],
)
def test_a_directory_checkpoint_that_cannot_be_copied_whole_is_refused_and_leaves_nothing(
    tmp_path, make, said
):
    source = tmp_path / "model"
    source.mkdir()
    (source / "weights.bin").write_bytes(bytes(1_000_000))
    (source / "inner").mkdir()
    (source / "inner" / "same.bin").symlink_to("../weights.bin")  # a link inside is fine
    make(source)
    folder = tmp_path / "checkpoints"
    with pytest.raises(ValueError, match=said) as raised:
        checkpoint.save(nt.Checkpoint.from_directory(source), folder, 4)
    assert "\n" not in str(raised.value)
    assert list(folder.iterdir()) == [], "no checkpoint_000004.tmp left"


def reports_a_fifo(config):
    with tempfile.TemporaryDirectory() as folder:
        os.mkfifo(Path(folder) / "pipe")
        nt.report(loss=1.0, checkpoint=nt.Checkpoint.from_directory(folder))


def test_a_trial_whose_directory_checkpoint_is_refused_ends_in_error_keeping_nothing(make_tuner):
    tuner = make_tuner(reports_a_fifo, metric="loss")
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.ERROR
    assert "'pipe' is not a regular file or folder" in trial.error
    assert tuner.dataframe().loc[0, "checkpoint_mb"] == 0
    assert not any((tuner.path / "trials" / "0" / "checkpoints").glob("*"))


def test_a_checkpoint_counted_while_retention_deletes_it_counts_as_gone(tmp_path):
    tree = tmp_path / "checkpoint_000001"
    done = threading.Event()

    def churn() -> None:
        for _ in range(300):
            for part in range(20):
                (tree / f"part{part // 5}").mkdir(parents=True, exist_ok=True)
                (tree / f"part{part // 5}" / f"shard{part}.bin").write_bytes(b"x" * 10)
            checkpoint.remove(tree)
        done.set()

    threading.Thread(target=churn, daemon=True).start()
    sizes = set()
    while not done.is_set():
        sizes.add(checkpoint.size_of(tree))
    assert sizes <= set(range(0, 201, 10)), "only whole files count, each once"
