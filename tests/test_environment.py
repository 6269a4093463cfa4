"""The environment recorded with each run: `tuner.environment`, `nbtune.load(path).environment`."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys

import pytest
import trainables

import nbtune as nt
from nbtune import environment

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd, *args):
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repository(tmp_path):
    """A git repository with one commit of a tracked file, `notes.txt`."""
    folder = tmp_path / "project"
    folder.mkdir()
    git(folder, "init", "-q")
    git(folder, "config", "user.email", "test@example.com")
    git(folder, "config", "user.name", "test")
    (folder / "notes.txt").write_text("first\n")
    git(folder, "add", "notes.txt")
    git(folder, "commit", "-q", "-m", "first")
    return folder


def run_in(folder, make_tuner, name="run"):
    tuner = make_tuner(
        trainables.count_up,
        {"x": nt.grid([1, 2])},
        metric="loss",
        name=name,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    return tuner


def test_a_run_records_where_it_was_made(make_tuner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tuner = make_tuner(
        trainables.count_up, {"x": nt.grid([1, 2])}, metric="loss", executor=nt.ThreadExecutor()
    )
    assert tuner.environment is None, "nothing is recorded before the run starts"
    tuner.run()

    recorded = nt.load(tuner.path).environment
    assert recorded == tuner.environment
    assert recorded == json.loads((tuner.path / "environment.json").read_text())
    assert recorded["python"] == platform.python_version()
    assert recorded["platform"] == platform.platform()
    assert recorded["hostname"]
    packages = recorded["packages"]
    assert packages["nbtune"] == nt.__version__
    for name in ("numpy", "pandas", "cloudpickle"):
        assert packages[name] == importlib.metadata.version(name)
    assert "definitely-not-installed" not in packages
    assert recorded["git"] is None, f"{tmp_path} is in no repository"


@needs_git
def test_the_commit_and_whether_the_tree_was_dirty(make_tuner, repository, monkeypatch):
    monkeypatch.chdir(repository)
    clean = run_in(repository, make_tuner, "clean")
    commit = git(repository, "rev-parse", "HEAD")
    assert nt.load(clean.path).environment["git"] == {"commit": commit, "dirty": False}

    (repository / "notes.txt").write_text("changed\n")
    dirty = run_in(repository, make_tuner, "dirty")
    assert nt.load(dirty.path).environment["git"] == {"commit": commit, "dirty": True}
    assert environment.code_version(dirty.environment) == commit[:12] + "+dirty"


def test_a_run_without_git_or_with_a_damaged_record_goes_on(make_tuner, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    tuner = run_in(tmp_path, make_tuner)
    assert tuner.state == "finished"
    assert tuner.environment["git"] is None

    (tuner.path / "environment.json").write_text("{torn")
    assert nt.load(tuner.path).environment is None
    (tuner.path / "environment.json").unlink()
    assert nt.load(tuner.path).environment is None, "a run made before environments were kept"


def test_capturing_imports_none_of_the_packages_it_names():
    code = (
        "import sys\n"
        "from nbtune import environment\n"
        "before = set(sys.modules)\n"
        "found = environment.capture()['packages']\n"
        "print(sorted(found))\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found, imported = out.stdout.splitlines()
    assert "'pandas'" in found and "'scikit-learn'" in found, "installed here, and recorded"
    modules = {name.strip("'").split(".")[0] for name in imported.strip("[]").split(", ")}
    assert not modules & {"numpy", "pandas", "sklearn", "scipy", "torch", "optuna", "lightgbm"}


def test_packages_are_read_again_after_an_install(tmp_path, monkeypatch):
    """A package installed while the kernel runs shows in the next run's environment."""
    assert "fake-tuning-lib" not in environment.capture(tmp_path)["packages"]
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(environment, "PACKAGES", (*environment.PACKAGES, "fake-tuning-lib"))
    environment._packages.cache_clear()
    assert "fake-tuning-lib" not in environment.capture(tmp_path)["packages"]
    info = site / "fake_tuning_lib-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-tuning-lib\nVersion: 1.2.3\n")
    assert environment.capture(tmp_path)["packages"]["fake-tuning-lib"] == "1.2.3"
