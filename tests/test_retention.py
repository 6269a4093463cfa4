"""Which checkpoints a trial keeps on disk, told one checkpoint at a time as the runner does."""

from __future__ import annotations

import pytest

from nbtune.retention import CheckpointRetention


@pytest.fixture
def folder(tmp_path):
    return tmp_path / "checkpoints"


def store(retention, folder, losses, in_use=()):
    """Write and report one checkpoint per loss, at iterations 1, 2, ...; return what is left."""
    folder.mkdir(exist_ok=True)
    for iteration, loss in enumerate(losses, start=1):
        path = folder / f"checkpoint_{iteration:06d}.pkl"
        path.write_bytes(b"model")
        row = {"training_iteration": iteration, "loss": loss}
        retention.stored(0, path, iteration, row, [folder / name for name in in_use])
    return sorted(int(path.stem.split("_")[1]) for path in folder.iterdir())


@pytest.mark.parametrize(
    ("keep", "left"), [(1, [6]), (2, [2, 6]), (3, [2, 3, 4, 6]), (None, [1, 2, 3, 4, 5, 6])]
)
def test_the_latest_and_the_best_by_the_metric_stay(folder, keep, left):
    retention = CheckpointRetention(keep, "loss", "min", lambda trial_id: folder)
    assert store(retention, folder, [5.0, 1.0, 2.0, 3.0, 9.0, 8.0]) == left


def test_max_mode_and_values_that_are_not_finite(folder):
    retention = CheckpointRetention(2, "acc", "max", lambda trial_id: folder)
    folder.mkdir()
    for iteration, acc in enumerate([0.5, float("nan"), 0.9, float("inf"), 0.1], start=1):
        path = folder / f"checkpoint_{iteration:06d}.pkl"
        path.write_bytes(b"model")
        retention.stored(0, path, iteration, {"acc": acc}, [])
    assert sorted(path.name for path in folder.iterdir()) == [
        "checkpoint_000003.pkl",
        "checkpoint_000005.pkl",
    ], "NaN and inf never count as best"


def test_a_checkpoint_in_use_is_never_deleted(folder):
    retention = CheckpointRetention(1, "loss", "min", lambda trial_id: folder)
    in_use = ["checkpoint_000002.pkl"]
    assert store(retention, folder, [3.0, 2.0, 1.0, 0.5], in_use=in_use) == [2, 4]


def test_without_a_metric_the_most_recent_stay(folder):
    retention = CheckpointRetention(3, None, "min", lambda trial_id: folder)
    assert store(retention, folder, [1.0, 2.0, 3.0, 4.0, 5.0]) == [2, 3, 4, 5]


def test_a_restored_run_ranks_what_is_on_disk_by_the_logged_results(folder):
    first = CheckpointRetention(None, "loss", "min", lambda trial_id: folder)
    store(first, folder, [4.0, 1.0, 3.0])
    restored = CheckpointRetention(2, "loss", "min", lambda trial_id: folder)
    restored.restored(0, {i: {"loss": loss} for i, loss in enumerate([4.0, 1.0, 3.0], 1)})
    path = folder / "checkpoint_000004.pkl"
    path.write_bytes(b"model")
    restored.stored(0, path, 4, {"loss": 2.0}, [])
    assert sorted(p.name for p in folder.iterdir()) == [
        "checkpoint_000002.pkl",
        "checkpoint_000004.pkl",
    ]


def test_a_replayed_result_keeps_the_rank_its_checkpoint_had(folder):
    retention = CheckpointRetention(2, "loss", "min", lambda trial_id: folder)
    store(retention, folder, [2.0, 1.0, 3.0])
    again = folder / "checkpoint_000002.pkl"
    retention.stored(0, again, 2, {}, [])
    assert again.exists(), "still the best: its logged loss, not an unknown one"
