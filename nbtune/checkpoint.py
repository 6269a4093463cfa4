"""Checkpoints on disk: a pickled object, or a directory of files a framework wrote.

A trial passes either to `nbtune.report(checkpoint=...)`. A plain object is pickled into
`checkpoint_000007.pkl`; a `Checkpoint.from_directory(path)` has its files copied into a
directory `checkpoint_000007/` of the trial's checkpoint folder before the result goes out.
The number is the iteration the checkpoint was taken at, so that retention, `get_checkpoint`
and a restored run can tell, from the folder alone, which checkpoint belongs to which result.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle

from nbtune.storage import checkpoint_iteration_of, stored_checkpoints, write_atomically


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint that is a directory of files (`torch.save`, `booster.save_model`,
    `keras.Model.save`, a Lightning `.ckpt`...).

    Report one with `nbtune.report(..., checkpoint=nbtune.Checkpoint.from_directory(folder))`;
    its files are copied, so the trial may reuse `folder`. `nbtune.get_checkpoint()` in a
    resumed trial, and `tuner.get_checkpoint(...)` afterwards, give back a `Checkpoint` whose
    `path` is a local directory holding those files.

    Attributes:
        path: the directory.
    """

    path: Path

    @classmethod
    def from_directory(cls, path: str | os.PathLike) -> Checkpoint:
        """A checkpoint of the files in `path` (a directory that exists).

        Raises:
            ValueError: `path` is not a directory.
        """
        folder = Path(path)
        if not folder.is_dir():
            raise ValueError(
                f"Checkpoint.from_directory({str(path)!r}): no such directory; save the model's "
                "files into a folder first (e.g. torch.save(state, folder / 'model.pt'))"
            )
        return cls(folder.resolve())

    def to_directory(self, path: str | os.PathLike) -> Path:
        """Copy the checkpoint's files into `path` (made if need be); return it."""
        target = Path(path)
        shutil.copytree(self.path, target, dirs_exist_ok=True)
        return target

    def __fspath__(self) -> str:
        return str(self.path)


def save(checkpoint: Any, folder: Path, iteration: int) -> Path:
    """Store what a trial reported as its checkpoint at `iteration`; return where it is.

    Either way the checkpoint appears whole or not at all: it is written under a temporary
    name, then renamed.

    Raises:
        TypeError: a plain object that cannot be pickled.
    """
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"checkpoint_{iteration:06d}"
    if isinstance(checkpoint, Checkpoint):
        return _save_directory(checkpoint.path, folder / name)
    try:
        payload = cloudpickle.dumps(checkpoint)
    except Exception as exc:
        raise TypeError(
            f"nbtune.report(checkpoint=...): the checkpoint cannot be pickled "
            f"({type(exc).__name__}: {str(exc).splitlines()[0]}); checkpoint plain data "
            "(dicts, arrays, a model's state_dict) or a nbtune.Checkpoint.from_directory(folder)"
        ) from exc
    path = folder / f"{name}.pkl"
    write_atomically(path, payload)
    return path


def _save_directory(source: Path, target: Path) -> Path:
    _check_copyable(source)
    temporary = target.with_name(target.name + ".tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        shutil.copytree(source, temporary)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    remove(target)
    os.replace(temporary, target)
    return target


def _check_copyable(source: Path) -> None:
    """Refuse, in one line and before copying anything, a folder that cannot be copied whole:
    one holding a special file (a FIFO, a socket, a device), a link to nothing, a link out of
    the folder, or a link to a folder that contains it (which copies forever).

    Links to files and folders elsewhere inside it are fine: they are copied as what they point to.
    """
    root = os.path.realpath(source)
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = os.path.join(folder, name)
            shown = os.path.relpath(path, root)
            if os.path.islink(path):
                _check_link(path, shown, root)
            elif not (os.path.isdir(path) or stat.S_ISREG(os.lstat(path).st_mode)):
                raise _refused(source, f"{shown!r} is not a regular file or folder")


def _check_link(path: str, shown: str, root: str) -> None:
    target = os.path.realpath(path)
    source = Path(root)
    if not os.path.exists(target):
        raise _refused(source, f"{shown!r} is a link to nothing")
    if os.path.commonpath([root, target]) != root:
        raise _refused(source, f"{shown!r} is a link out of the folder (to {target})")
    if os.path.isdir(target):
        parent = os.path.dirname(path)
        if os.path.commonpath([target, parent]) == target:
            raise _refused(source, f"{shown!r} is a link to a folder that contains it")
    elif not stat.S_ISREG(os.stat(target).st_mode):
        raise _refused(source, f"{shown!r} is not a regular file or folder")


def _refused(source: Path, why: str) -> ValueError:
    return ValueError(
        f"nbtune.report(checkpoint=Checkpoint.from_directory({str(source)!r})): {why}; "
        "save only the model's files in the folder (copy what a link points to)"
    )


def load(path: str | os.PathLike) -> Any:
    """A stored checkpoint as the trial reported it: the object, or a `Checkpoint`."""
    location = Path(path)
    if location.is_dir():
        return Checkpoint(location)
    with open(location, "rb") as file:
        return cloudpickle.load(file)


iteration_of = checkpoint_iteration_of
"""The iteration a stored checkpoint was taken at, read from its name (None if the name is not
a checkpoint's); the storage knows the names, as it reads them back for a restore."""

stored = stored_checkpoints
"""The checkpoints stored in a trial's checkpoint folder, by iteration."""


def size_of(path: Path) -> int:
    """Bytes on disk of a checkpoint file or directory (0 if it is gone); what retention
    deletes while it is being counted counts as gone."""
    try:
        status = path.lstat()
        if not stat.S_ISDIR(status.st_mode):
            return status.st_size
        with os.scandir(path) as entries:
            return sum(size_of(Path(entry.path)) for entry in entries)
    except FileNotFoundError:
        return 0


def remove(path: Path) -> None:
    """Delete a stored checkpoint, file or directory; one already gone is fine."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def pack(path: str | os.PathLike) -> bytes:
    """A stored checkpoint as bytes, to travel to another machine: a file's own bytes, a
    directory as an uncompressed tar archive."""
    location = Path(path)
    if not location.is_dir():
        return location.read_bytes()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(location, arcname=".")
    return buffer.getvalue()


def unpack(data: bytes, path: Path) -> Path:
    """Write what `pack` made at `path` (a directory when `path` names one, by having no
    `.pkl` suffix), whole or not at all; return `path`."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.suffix == ".pkl":
        write_atomically(path, data)
        return path
    temporary = path.with_name(path.name + ".tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
            archive.extractall(temporary, filter="data")
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    remove(path)
    os.replace(temporary, path)
    return path
