"""A trial's own folder, trials/<id>/artifacts/: where it works and what it leaves there."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import nbtune as nt
from nbtune.storage import ExperimentReader


def saves_relative_model(config):
    """Writes my_model/weights.txt by a relative path, waits until the other trial has written
    its own (so both are running at once), then reports what its file holds."""
    Path("my_model").mkdir(exist_ok=True)
    Path("my_model/weights.txt").write_text(str(config["x"]))
    trials = nt.get_trial_dir().parent.parent
    other = trials / str(1 - nt.get_trial_id()) / "artifacts" / "my_model" / "weights.txt"
    shared = Path(config["notebook"]) / "my_model" / "weights.txt"
    deadline = time.monotonic() + 60
    while not (other.exists() or shared.exists()) and time.monotonic() < deadline:
        time.sleep(0.01)
    nt.report(loss=config["x"], held=Path("my_model/weights.txt").read_text(), cwd=os.getcwd())


def test_two_trials_saving_the_same_relative_folder_at_once_keep_their_own(
    make_tuner, tmp_path, monkeypatch
):
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    monkeypatch.chdir(notebook)
    space = {"x": nt.grid([10, 20]), "notebook": str(notebook)}
    tuner = make_tuner(saves_relative_model, space, metric="loss")
    tuner.run()
    frame = tuner.dataframe().set_index("trial_id")
    assert frame["error"].isna().all(), frame["error"].tolist()
    assert frame.loc[0, "held"] == "10" and frame.loc[1, "held"] == "20", "no file mixed"
    assert not (notebook / "my_model").exists(), "nothing written in the notebook's folder"
    for trial_id in (0, 1):
        folder = tuner.path / "trials" / str(trial_id) / "artifacts"
        assert frame.loc[trial_id, "cwd"] == str(folder.resolve())
        assert list(tuner.artifacts(trial_id)) == ["my_model/weights.txt"]
    assert os.getcwd() == str(notebook), "the notebook stays where it was"


def reports_where_it_works(config):
    Path("note.txt").write_text("hello")
    nt.get_trial_dir().joinpath("plot.svg").write_text("<svg/>")
    nt.report(loss=1.0, cwd=os.getcwd(), folder=str(nt.get_trial_dir()))


def test_chdir_to_trial_dir_false_keeps_the_notebook_s_folder_and_restore_keeps_it_so(
    make_tuner, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    tuner = make_tuner(reports_where_it_works, metric="loss", chdir_to_trial_dir=False)
    tuner.run()
    row = tuner.dataframe().iloc[0]
    assert row["cwd"] == str(tmp_path)
    assert (tmp_path / "note.txt").exists()
    assert row["folder"] == str((tuner.path / "trials/0/artifacts").resolve())
    assert list(tuner.artifacts(0)) == ["plot.svg"]
    assert ExperimentReader(tuner.path).spec()["chdir_to_trial_dir"] is False
    restored = nt.Tuner.restore(tuner.path, reports_where_it_works, progress=False)
    assert restored.chdir_to_trial_dir is False


def test_threads_share_the_notebook_s_folder_but_each_trial_has_its_own(
    make_tuner, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    tuner = make_tuner(
        reports_where_it_works, {"x": nt.grid([1, 2])}, metric="loss", executor=nt.ThreadExecutor()
    )
    tuner.run()
    frame = tuner.dataframe()
    assert set(frame["cwd"]) == {str(tmp_path)}, "a thread cannot change its own directory alone"
    assert list(frame["folder"]) == [
        str((tuner.path / f"trials/{i}/artifacts").resolve()) for i in (0, 1)
    ]


def test_get_trial_dir_outside_a_trial_is_a_one_line_error():
    with pytest.raises(RuntimeError, match=r"only work inside a trial") as error:
        nt.get_trial_dir()
    assert "\n" not in str(error.value)


def writes_a_few_files(config):
    folder = nt.get_trial_dir()
    (folder / "tables").mkdir()
    (folder / "tables" / "scores.csv").write_text("epoch,loss\n0,1.0\n")
    (folder / "b.png").write_bytes(b"\x89PNG")
    (folder / "a.txt").write_text(str(config["x"]))
    nt.report(loss=config["x"])


def test_artifacts_are_listed_sorted_and_relative_from_the_tuner_and_from_load(make_tuner):
    tuner = make_tuner(writes_a_few_files, {"x": nt.grid([1, 2])}, metric="loss")
    tuner.run()
    listed = tuner.artifacts(1)
    assert list(listed) == ["a.txt", "b.png", "tables/scores.csv"]
    assert listed.folder == tuner.path / "trials" / "1" / "artifacts"
    assert listed.paths()[0].read_text() == "2"
    loaded = nt.load(tuner.path).artifacts(1)
    assert loaded == listed and "tables/scores.csv" in loaded
    with pytest.raises(nt.TrialNotFoundError, match=r"^there is no trial 7; it has 2$"):
        tuner.artifacts(7)


def test_a_trial_that_writes_nothing_has_no_artifacts(make_tuner):
    tuner = make_tuner(lambda config: nt.report(loss=1.0), metric="loss")
    tuner.run()
    assert tuner.artifacts(0) == ()


def reads_a_relative_data_file(config):
    with open("data.csv") as data:
        nt.report(loss=len(data.read()))


def test_a_relative_data_file_not_found_says_why_in_the_trial_s_error(
    make_tuner, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").write_text("x\n1\n")
    tuner = make_tuner(reads_a_relative_data_file, metric="loss")
    tuner.run()
    error = tuner.get_trial(0).error
    assert error.startswith("FileNotFoundError")
    assert "trials/0/artifacts/" in error and "chdir_to_trial_dir=False" in error
    fixed = make_tuner(reads_a_relative_data_file, metric="loss", chdir_to_trial_dir=False)
    fixed.run()
    assert fixed.get_trial(0).error is None


def keeps_a_diary(config):
    """Appends a line to diary.txt (relative) at each step and checkpoints every step."""
    checkpoint = nt.get_checkpoint()
    for step in range(checkpoint + 1 if checkpoint is not None else 0, 40):
        with open("diary.txt", "a") as diary:
            diary.write(f"step {step}\n")
        nt.report(loss=float(step), checkpoint=step)


def test_a_restored_trial_goes_on_in_the_folder_it_had(make_tuner, stop_midway):
    tuner = make_tuner(keeps_a_diary, metric="loss")
    stop_midway(tuner, iteration=2)
    diary = tuner.path / "trials" / "0" / "artifacts" / "diary.txt"
    written = diary.read_text()
    assert written.startswith("step 0\nstep 1\n")
    restored = nt.Tuner.restore(tuner.path, keeps_a_diary, progress=False)
    restored.run()
    assert diary.read_text().startswith(written), "the files before the stop are kept"
    assert diary.read_text().endswith("step 39\n")
    assert list(nt.load(tuner.path).artifacts(0)) == ["diary.txt"]


def writes_before_each_checkpoint(config):
    """On a Dask worker: a small file and a large one (fetched through Dask, not inline) before
    its checkpoint; another file after it, shipped when the trial ends."""
    Path("small.txt").write_text(f"trial {nt.get_trial_id()}")
    Path("large.bin").write_bytes(b"x" * (3 << 20))
    nt.report(loss=1.0, checkpoint={"step": 1}, cwd=os.getcwd())
    Path("after.txt").write_text("end")
    nt.report(loss=0.5)


def test_dask_workers_ship_a_trial_s_artifacts_to_the_experiment_s_folder(make_tuner, dask_client):
    tuner = make_tuner(
        writes_before_each_checkpoint,
        {"x": nt.grid([1, 2])},
        metric="loss",
        executor=nt.DaskExecutor(dask_client),
    )
    tuner.run()
    frame = tuner.dataframe()
    assert frame["error"].isna().all(), frame["error"].tolist()
    for trial_id, cwd in zip(frame["trial_id"], frame["cwd"], strict=True):
        assert not cwd.startswith(str(tuner.path.resolve())), "the worker's own disk"
        assert cwd.endswith("artifacts")
        listed = tuner.artifacts(trial_id)
        assert list(listed) == ["after.txt", "large.bin", "small.txt"]
        assert (listed.folder / "small.txt").read_text() == f"trial {trial_id}"
        assert (listed.folder / "large.bin").stat().st_size == 3 << 20
    assert not list(tuner.path.glob("trials/*/.incoming-*")), "no leftovers"


def test_a_folder_whose_trial_wrote_a_link_is_still_carried_on(make_tuner):
    def links(config):
        os.symlink("/etc/hostname", "hostname")
        nt.report(loss=1.0)

    tuner = make_tuner(links, metric="loss", num_samples=2)
    tuner.run()
    restored = nt.Tuner.restore(tuner.path, links, progress=False)
    assert restored.path == tuner.path
    assert list(tuner.artifacts(0)) == ["hostname"]
