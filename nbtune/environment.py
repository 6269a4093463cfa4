"""The environment a run was made in, recorded as `environment.json` in its folder.

    {"python": "3.11.9", "platform": "Linux-6.8-x86_64-with-glibc2.39", "hostname": "box",
     "packages": {"nbtune": "0.1.0", "numpy": "2.4.6", ...},
     "git": {"commit": "e50d75e...", "dirty": false} or null}

`packages` names nbtune and those of `PACKAGES` that are installed, read from their metadata
(`importlib.metadata`): none of them is imported. `git` describes the repository that holds the
current working directory (a notebook's own folder, in Jupyter), or is None outside one, where
git is missing or slow (it runs with a short timeout). Capturing never fails a run: what cannot
be read is left out. A run records it on a thread of its own (`record_soon`), off its start.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from nbtune.storage import write_atomically

FILE = "environment.json"
PACKAGES = (
    "numpy",
    "pandas",
    "scipy",
    "scikit-learn",
    "torch",
    "tensorflow",
    "keras",
    "jax",
    "xgboost",
    "lightgbm",
    "catboost",
    "optuna",
    "transformers",
    "lightning",
    "pytorch-lightning",
    "statsmodels",
    "polars",
    "ray",
    "dask",
    "distributed",
    "cloudpickle",
    "joblib",
    "loky",
)
"""The packages recorded (besides nbtune) when installed: those a trial's results depend on."""
GIT_TIMEOUT_S = 2.0
"""How long git may take to answer before the run goes on without it."""


def capture(cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """The environment of this process, with the git state of `cwd` (default: the current
    working directory). Costs a few milliseconds: package versions are read once per process
    (again when a folder of `sys.path` changes, as an install changes it) and git runs its two
    commands at once."""
    python, system, hostname = _machine()
    return {
        "python": python,
        "platform": system,
        "hostname": hostname,
        "packages": {"nbtune": _nbtune_version(), **dict(_packages(_path_key()))},
        "git": git_state(os.getcwd() if cwd is None else cwd),
    }


def record(folder: str | os.PathLike, cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """Capture the environment and write it to `folder`/environment.json; return it. A write
    that fails is let go (the run matters more than its record of the environment)."""
    environment = capture(cwd)
    with contextlib.suppress(OSError):
        write_atomically(Path(folder) / FILE, json.dumps(environment, indent=2).encode())
    return environment


def record_soon(folder: str | os.PathLike) -> None:
    """`record` the environment (of the current working directory, as it is now) on a thread
    of its own: git and the packages' metadata take from a few to tens of milliseconds, which a
    run's start need not wait for. `read` and `settle` wait for it; so does the interpreter's
    exit (the thread is not a daemon), so that the record is never lost."""
    key = os.path.abspath(folder)
    thread = threading.Thread(
        target=_record_then_forget, args=(folder, os.getcwd(), key), name="nbtune-environment"
    )
    with _recording_lock:
        _recording[key] = thread
    thread.start()


def settle(folder: str | os.PathLike) -> None:
    """Wait until the environment of `folder` is recorded, if `record_soon` is recording it."""
    with _recording_lock:
        thread = _recording.get(os.path.abspath(folder))
    if thread is not None:
        thread.join()


def _record_then_forget(folder: str | os.PathLike, cwd: str, key: str) -> None:
    try:
        record(folder, cwd)
    finally:
        with _recording_lock:
            if _recording.get(key) is threading.current_thread():
                del _recording[key]


_recording: dict[str, threading.Thread] = {}
_recording_lock = threading.Lock()


def read(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The environment recorded in `folder` (once `record_soon` has written it); None for a
    run recorded without one (made by an older nbtune) or whose file is damaged."""
    settle(folder)
    try:
        environment = json.loads((Path(folder) / FILE).read_text())
    except (OSError, ValueError):
        return None
    return environment if isinstance(environment, dict) else None


def code_version(environment: dict[str, Any] | None) -> str | None:
    """The git commit in short, "+dirty" when the working tree had changes; None outside git."""
    git = (environment or {}).get("git")
    if not isinstance(git, dict) or not isinstance(git.get("commit"), str):
        return None
    return git["commit"][:12] + ("+dirty" if git.get("dirty") else "")


def git_state(cwd: str | os.PathLike) -> dict[str, Any] | None:
    """`{"commit", "dirty"}` of the git repository that holds `cwd` (dirty: a tracked file
    differs from the commit); None outside a repository, without git, or if git is slow."""
    commands = (["rev-parse", "HEAD"], ["status", "--porcelain", "--untracked-files=no"])
    try:
        processes = [
            subprocess.Popen(
                ["git", *command],
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for command in commands
        ]
    except OSError:
        return None
    outputs = []
    for process in processes:
        try:
            out, _ = process.communicate(timeout=GIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            out = None
        outputs.append(out if process.returncode == 0 else None)
    commit, status = outputs
    if not commit or status is None:
        return None
    return {"commit": commit.strip(), "dirty": bool(status.strip())}


def _nbtune_version() -> str | None:
    """The version of the nbtune that runs (its `__version__`, which a source checkout has
    too), else of the one installed."""
    version = getattr(sys.modules.get("nbtune"), "__version__", None)
    if isinstance(version, str):
        return version
    try:
        return importlib.metadata.version("nbtune")
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def _machine() -> tuple[str, str, str]:
    return platform.python_version(), platform.platform(), socket.gethostname()


def _path_key() -> tuple[tuple[str, int], ...]:
    """`sys.path` with each folder's modification time: it changes when a package is
    installed, removed or upgraded there."""
    key = []
    for entry in sys.path:
        try:
            key.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            key.append((entry, 0))
    return tuple(key)


@functools.lru_cache(maxsize=4)
def _packages(path_key: tuple[tuple[str, int], ...]) -> tuple[tuple[str, str], ...]:
    found = []
    for name in PACKAGES:
        try:
            found.append((name, importlib.metadata.version(name)))
        except (importlib.metadata.PackageNotFoundError, ValueError):
            continue
    return tuple(found)
