"""A trial's artifacts: the files it writes into its own folder, `trials/<id>/artifacts/`.

A trial finds the folder with `nbtune.get_trial_dir()` and, unless told otherwise, runs in it
(`working_in`), so that a relative `my_model/` saved by two trials at once lands in two
folders. `listing` is what `tuner.artifacts(trial_id)` and `nbtune.load(path).artifacts(...)`
return. On Dask the folder is on the worker's disk: `Shipment` packs what changed since its
last shipment, and `merge` writes it into the experiment's folder on the driver.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path


class Artifacts(tuple):
    """The files of a trial's artifact folder: their names relative to it (`"plot.png"`,
    `"my_model/weights.pt"`, with `/`), sorted; `folder` is where they are.

    A tuple of strings, so `"plot.png" in tuner.artifacts(3)` works; open one with
    `artifacts.folder / name`, or all of them with `paths()`.
    """

    folder: Path

    def __new__(cls, folder: Path, names: list[str]) -> Artifacts:
        listed = super().__new__(cls, sorted(names))
        listed.folder = folder
        return listed

    def paths(self) -> list[Path]:
        """The files' full paths, in the same order."""
        return [self.folder / name for name in self]

    def __repr__(self) -> str:
        return f"Artifacts({str(self.folder)!r}, {list(self)!r})"


def listing(folder: Path) -> Artifacts:
    """The files under `folder` (none if it does not exist); links are listed, not followed."""
    names = [
        Path(root, name).relative_to(folder).as_posix()
        for root, _, files in os.walk(folder)
        for name in files
    ]
    return Artifacts(folder, names)


@contextlib.contextmanager
def working_in(folder: Path) -> Iterator[None]:
    """Run the block with `folder` as the process's working directory, then go back to the one
    before: a reused worker process starts its next trial where it was.

    A process whose directory was removed under it stays in `folder`.
    """
    before = current_directory()
    os.chdir(folder)
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                os.chdir(before)


def current_directory() -> str | None:
    """The process's working directory; None if it was removed."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


def relative_path_hint(exc: BaseException, trial_id: int) -> str:
    """A line to add to the error of a trial that ran in its own folder and did not find a
    file by a relative path (most likely one meant from the notebook's folder); "" otherwise."""
    name = getattr(exc, "filename", None)
    if not isinstance(exc, FileNotFoundError) or not isinstance(name, (str, os.PathLike)):
        return ""
    if os.path.isabs(name):
        return ""
    return (
        f" (the trial ran in its own folder, trials/{trial_id}/artifacts/, so relative paths "
        "start there: give data files absolute paths, or pass "
        "nbtune.Tuner(chdir_to_trial_dir=False))"
    )


class Shipment:
    """What a trial on a remote worker wrote into its artifact folder since the last shipment:
    files that are new, or whose size or time of change differ, as an uncompressed tar archive.
    Files the trial deleted stay in the driver's copy."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._sent: dict[str, tuple[int, int]] = {}

    def pack(self, into: Path) -> Path | None:
        """Write the archive of what changed to `into`; None (nothing written) if nothing did."""
        changed = {}
        for name in listing(self.folder):
            info = (self.folder / name).lstat()
            stamp = (info.st_size, info.st_mtime_ns)
            if self._sent.get(name) != stamp:
                changed[name] = stamp
        if not changed:
            return None
        with tarfile.open(into, mode="w") as archive:
            for name in changed:
                archive.add(self.folder / name, arcname=name, recursive=False)
        self._sent.update(changed)
        return into


def merge(data: bytes, folder: Path) -> None:
    """Write a `Shipment`'s archive into the trial's artifact folder on the driver, each file
    whole (extracted next to the folder, then moved in), over the older copy."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    incoming = Path(tempfile.mkdtemp(prefix=".incoming-", dir=folder.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
            archive.extractall(incoming, filter="data")
        for root, _, files in os.walk(incoming):
            for name in files:
                source = Path(root, name)
                target = folder / source.relative_to(incoming)
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.replace(source, target)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
