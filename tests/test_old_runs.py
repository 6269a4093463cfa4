"""Runs written by older nbtunes (tests/data/old_runs/<commit>/, made by make_runs.py there)
are carried on to their end by today's nbtune: every on-disk format and every pickled
searcher and scheduler this project has written reads back."""

from __future__ import annotations

import shutil
from pathlib import Path

import cloudpickle
import pytest

import nbtune as nt
from nbtune.storage import check_unlocked

OLD_RUNS = Path(__file__).parent / "data" / "old_runs"
STEPS = 4
RUNS = sorted(path for path in OLD_RUNS.glob("*/*") if (path / "experiment.json").exists())


def train(config):
    """make_runs.py's trainable: four steps of a falling loss, a checkpoint at each."""
    start = nt.get_checkpoint() or 0
    for step in range(start, STEPS):
        nt.report(loss=config["lr"] / (step + 1), checkpoint=step + 1)


def test_there_is_an_old_run_of_each_kind():
    names = {(run.parent.name, run.name) for run in RUNS}
    commits = {commit for commit, _ in names}
    assert len(commits) >= 5
    for kind in ("random-fifo", "random-asha", "random-hyperband", "random-pbt", "optuna-asha"):
        assert sum(name == kind for _, name in names) >= 4, kind


@pytest.mark.parametrize("old", RUNS, ids=lambda run: f"{run.parent.name}-{run.name}")
def test_an_old_run_is_restored_and_finishes(old, tmp_path):
    run = tmp_path / old.name
    shutil.copytree(old, run)
    paused = nt.load(run).dataframe()
    assert "PAUSED" in set(paused["status"]), "the fixture holds a paused trial"

    tuner = nt.Tuner.restore(run, train, executor=nt.ThreadExecutor(), progress=False)
    tuner.run(display=False)

    assert tuner.state == "finished"
    frame = tuner.dataframe()
    assert (frame["status"] == "TERMINATED").all(), frame[["trial_id", "status", "error"]]
    history = tuner.history()
    for trial_id, iterations in history.groupby("trial_id")["training_iteration"]:
        steps = iterations.tolist()
        first = steps[0]  # a PBT fork goes on from its donor's checkpoint
        assert steps == list(range(first, first + len(steps))), f"trial {trial_id}: {steps}"
        assert steps[-1] <= STEPS, f"trial {trial_id}: {steps}"
    assert set(paused["trial_id"]) <= set(history["trial_id"]), "the old run's trials are kept"
    assert nt.load(run).state == "finished"
    check_unlocked(run)


class _FailsToCatchUp(nt.RandomSearch):
    """A searcher whose restore fails, as an older one that lacked an attribute did."""

    def restore(self, trials):
        raise AttributeError("'RandomSearch' object has no attribute '_points'")


def test_a_restore_that_fails_changes_nothing_and_leaves_the_folder_free(tmp_path):
    run = tmp_path / "random-fifo"
    shutil.copytree(OLD_RUNS / "d51197c" / "random-fifo", run)
    state = cloudpickle.loads((run / "state.pkl").read_bytes())
    state["searcher"].__class__ = _FailsToCatchUp
    (run / "state.pkl").write_bytes(cloudpickle.dumps(state))
    before = _contents(run)
    assert "outcome.json" in before

    for attempt in range(2):  # the second is refused the same way, not as "in use"
        with pytest.raises(ValueError) as refused:
            nt.Tuner.restore(run, train, executor=nt.ThreadExecutor(), progress=False).start()
        message = str(refused.value)
        assert "\n" not in message
        assert message.startswith(f"{run} cannot be carried on"), message
        assert "AttributeError" in message and f"nbtune.load({str(run)!r})" in message
        assert _contents(run) == before, f"attempt {attempt}: nothing written or deleted"


def _contents(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` but the lock file, by relative path."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != ".lock"
    }
