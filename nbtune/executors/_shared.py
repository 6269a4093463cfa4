"""Large arrays travel to worker processes once per run, as read-only memory maps.

    runner (open)                                  worker process
    -------------                                  --------------
    RunData(): a run-private folder (/dev/shm,
      or on disk: see `_root_for`)
    dumps(trainable): each large ndarray reached --> payload with a small reference per array
      -> written once to <folder>/<token>.npy,         load_trainable(payload): the reference
         on a thread of its own                        unpickles as the array this worker
    close(): the folder is removed                     mapped before, or else (once the file
                                                        is there) np.load(path, mmap_mode="r")

The pickler sees every object the trainable reaches: a closure's cell, a global of
`__main__`, a `functools.partial`'s arguments, `nbtune.with_parameters` objects, the arrays
inside pandas objects (their blocks pickle as ndarrays). An ndarray of at least
`MAP_MIN_BYTES` (without Python objects in it) is written once as a `.npy` file and pickled
as a reference, as joblib's memmapping reducers do for its arguments; so workers share the
file's pages (the page cache, or shared memory under /dev/shm) instead of each holding a copy.
The arrays a trial gets are read-only (`np.load(mmap_mode="r")`): copy one to change it.

A reference names its array by a token that stays the same from one run to the next as long
as the driver's array is the same object with the same content and layout (checked by a CRC
of its bytes, its shape, strides and dtype), so a worker kept warm across runs reuses what it
mapped already. On Linux a mapped file lives on after its folder is removed, until the last
worker lets it go.

Where the files go: `NBTUNE_TEMP_FOLDER` (or joblib's `JOBLIB_TEMP_FOLDER`) if set; else
shared memory when it is large (2 GB free or more, joblib's rule) and the array leaves half of
it free; else the temporary folder on disk, whose pages the workers share through the page
cache just the same. A 64 MB /dev/shm (Docker's, Kubernetes' and Binder's default) is never
filled. A folder is named for its driver's process id: loky's resource tracker removes it if
the driver is killed alone, and the next run (of any driver) removes those of drivers that
are gone, tracker and all (a kernel kill reaches the whole process group).
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
import weakref
import zlib
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import cloudpickle
from loky.backend import resource_tracker

MAP_MIN_BYTES = 1 << 20
"""Arrays from this size on travel as memory maps; smaller ones are pickled inline."""

_MAPPED_KEPT = 8
"""How many mapped arrays a worker keeps for runs to come (the most recently used)."""


SHARED_MEMORY = "/dev/shm"
SHARED_MEMORY_MIN_BYTES = 2 * 10**9
"""Shared memory with less free than this is left alone, as joblib does (`_get_temp_dir`)."""

_FOLDER_PREFIX = "nbtune-run-"
_FOLDER_NAME = re.compile(rf"{_FOLDER_PREFIX}(\d+)-")


def _chosen_folder() -> str | None:
    """The folder the user chose for the arrays, if any."""
    return os.environ.get("NBTUNE_TEMP_FOLDER") or os.environ.get("JOBLIB_TEMP_FOLDER") or None


def _shared_memory_free() -> int:
    """Bytes free in shared memory; 0 where there is none that this process may write."""
    if not (os.path.isdir(SHARED_MEMORY) and os.access(SHARED_MEMORY, os.W_OK)):
        return 0
    try:
        stats = os.statvfs(SHARED_MEMORY)
    except OSError:
        return 0
    return stats.f_bavail * stats.f_frsize


def _temp_root() -> str:
    """Where a run's arrays go by default: the folder the user chose, else shared memory where
    there is plenty, else the temporary folder."""
    chosen = _chosen_folder()
    if chosen is not None:
        return chosen
    if _shared_memory_free() >= SHARED_MEMORY_MIN_BYTES:
        return SHARED_MEMORY
    return tempfile.gettempdir()


def _root_for(nbytes: int, pending: int) -> str:
    """Where an array of `nbytes` goes, `pending` bytes being on their way to shared memory:
    the default root, unless that is shared memory and the array would take more than half
    of what is free there."""
    root = _temp_root()
    if root == SHARED_MEMORY and nbytes + pending > _shared_memory_free() // 2:
        return tempfile.gettempdir()
    return root


def _remove_stale_folders() -> None:
    """Remove the run folders, wherever they may be, whose driver process is gone (killed with
    its process group, loky's resource tracker too); before shared memory's free space is
    measured, which such a folder may be taking."""
    for root in {SHARED_MEMORY, tempfile.gettempdir(), _chosen_folder()}:
        with contextlib.suppress(OSError, TypeError):
            for name in os.listdir(root):
                match = _FOLDER_NAME.match(name)
                if match is not None and not process_alive(int(match.group(1))):
                    shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def process_alive(pid: int) -> bool:
    """Whether process `pid` of this host runs (a zombie does not: it is only waiting to be
    reaped). On Windows, where `os.kill` would end it, every process is taken to run."""
    if pid == os.getpid() or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0] != "Z"
    return True


class _Known:
    """The driver's record of an array it has written: its token while its bytes and layout
    stay."""

    __slots__ = ("array", "crc", "layout", "token")

    def __init__(self, array: Any, crc: int, layout: tuple, token: str) -> None:
        self.array = weakref.ref(array)
        self.crc = crc
        self.layout = layout
        self.token = token


_known: dict[int, _Known] = {}
_known_lock = threading.Lock()


def _token_for(array: Any) -> str:
    """A name for `array`'s content, the same as last run's if it is the same object with
    the same bytes, shape, strides and dtype (a new one otherwise: an array reshaped in place
    keeps its bytes)."""
    crc = zlib.crc32(_bytes_of(array))
    layout = (array.shape, array.strides, array.dtype)
    with _known_lock:
        known = _known.get(id(array))
        if (
            known is not None
            and known.array() is array
            and known.crc == crc
            and known.layout == layout
        ):
            return known.token
        token = uuid.uuid4().hex
        try:
            _known[id(array)] = _Known(array, crc, layout, token)
            weakref.finalize(array, _known.pop, id(array), None)
        except TypeError:  # an array subclass without weak references: no reuse across runs
            pass
        return token


def _bytes_of(array: Any) -> memoryview:
    import numpy as np

    return memoryview(np.ascontiguousarray(array)).cast("B")


def _is_large_array(obj: Any) -> bool:
    np = sys.modules.get("numpy")
    return (
        np is not None
        and type(obj) in (np.ndarray, np.memmap)
        and obj.nbytes >= MAP_MIN_BYTES
        and not obj.dtype.hasobject
    )


class RunData:
    """A run's folder of mapped arrays: created here, removed by `close()` (or when it is
    collected, or at the interpreter's exit).

    Files are written on a thread of their own, so that the payload is ready once the arrays
    are named: a warm worker that mapped them in an earlier run starts at once, while a new
    one waits for each file it lacks (it appears whole, by a rename).
    """

    def __init__(self) -> None:
        self._folders: dict[str, str] = {}
        self._written: dict[str, str] = {}
        self._to_shared_memory: list[tuple[Any, int]] = []
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="nbtune-data")
        self._remove: weakref.finalize | None = None

    @property
    def folder(self) -> str:
        """The run's folder in the default root, made when the first array needs it (most runs
        have none)."""
        return self._folder_in(_temp_root())

    def _folder_in(self, root: str) -> str:
        """The run's folder in `root`, made when first needed."""
        folder = self._folders.get(root)
        if folder is None:
            folder = tempfile.mkdtemp(prefix=f"{_FOLDER_PREFIX}{os.getpid()}-", dir=root)
            resource_tracker.register(folder, "folder")
            self._folders[root] = folder
            if self._remove is not None:
                self._remove.detach()
            self._remove = weakref.finalize(self, _remove_folders, list(self._folders.values()))
        return folder

    def dumps(self, obj: Any) -> bytes:
        """`obj` pickled (cloudpickle), each large array in it written once to the folder."""
        buffer = io.BytesIO()
        _MappingPickler(buffer, self).dump(obj)
        return buffer.getvalue()

    def path_of(self, array: Any) -> tuple[str, str]:
        """The token and path of `array`'s file, on its way there if this run has not yet
        written it."""
        token = _token_for(array)
        path = self._written.get(token)
        if path is None:
            if not self._folders:
                _remove_stale_folders()
            self._to_shared_memory = [(f, n) for f, n in self._to_shared_memory if not f.done()]
            pending = sum(n for _, n in self._to_shared_memory)
            root = _root_for(array.nbytes, pending)
            path = os.path.join(self._folder_in(root), f"{token}.npy")
            written = self._writer.submit(_write, array, path)
            if root == SHARED_MEMORY:
                self._to_shared_memory.append((written, array.nbytes))
            self._written[token] = path
        return token, path

    def wait(self) -> None:
        """Block until every file is written (for tests and benchmarks)."""
        self._writer.submit(lambda: None).result()

    def close(self) -> None:
        """Remove the folder; workers keep what they have mapped until they let it go."""
        self._writer.shutdown(wait=True, cancel_futures=True)
        if self._remove is not None:
            self._remove()


def _remove_folders(folders: list[str]) -> None:
    """Remove a run's folders and tell loky's resource tracker, which removes the folders of a
    driver that dies without doing so itself (killed), as it does for joblib's."""
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(Exception):
            resource_tracker.unregister(folder, "folder")


def _write(array: Any, path: str) -> None:
    """Write `array` to `path` as a `.npy` file that appears whole, or else an `.error` file
    that appears whole (a worker waiting for the array reads it at once)."""
    import numpy as np

    part = f"{path}.part"
    try:
        with open(part, "wb") as file:
            np.save(file, array, allow_pickle=False)
        os.replace(part, path)
    except Exception as exc:
        with contextlib.suppress(OSError):
            os.remove(part)
        with contextlib.suppress(OSError):
            with open(f"{path}.error.part", "w") as file:
                file.write(f"{type(exc).__name__}: {exc}")
            os.replace(f"{path}.error.part", f"{path}.error")


class _MappingPickler(cloudpickle.CloudPickler):
    """cloudpickle, with each large ndarray replaced by a reference to its file."""

    def __init__(self, file: io.BytesIO, run: RunData) -> None:
        super().__init__(file)
        self._run = run

    def reducer_override(self, obj: Any) -> Any:
        if _is_large_array(obj):
            token, path = self._run.path_of(obj)
            return _mapped, (token, path)
        return super().reducer_override(obj)


class _SizingPickler(cloudpickle.CloudPickler):
    """cloudpickle into nowhere, large arrays left out: whether an object pickles, cheaply."""

    def reducer_override(self, obj: Any) -> Any:
        if _is_large_array(obj):
            return _mapped, ("", "")
        return super().reducer_override(obj)


class _Nowhere(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return len(memoryview(data))


def check_picklable(obj: Any) -> None:
    """Raise what pickling `obj` for a worker would raise, without copying its large arrays."""
    _SizingPickler(_Nowhere()).dump(obj)


# ----- the worker's side -------------------------------------------------------------------------

_mapped_arrays: OrderedDict[str, Any] = OrderedDict()
_mapped_lock = threading.Lock()


def _mapped(token: str, path: str) -> Any:
    """The array behind a reference: the one this worker mapped already, or its file mapped."""
    import numpy as np

    with _mapped_lock:
        array = _mapped_arrays.get(token)
        if array is None:
            _wait_for(path)
            array = np.load(path, mmap_mode="r", allow_pickle=False)
            _mapped_arrays[token] = array
            while len(_mapped_arrays) > _MAPPED_KEPT:
                _mapped_arrays.popitem(last=False)
        else:
            _mapped_arrays.move_to_end(token)
        return array


def _wait_for(path: str) -> None:
    """Wait until the driver has written `path`; raise if it could not, or the run is over."""
    pause = 0.001
    while not os.path.exists(path):
        with contextlib.suppress(FileNotFoundError), open(f"{path}.error") as error:
            raise OSError(f"nbtune could not write an array for the workers: {error.read()}")
        if not os.path.isdir(os.path.dirname(path)):
            raise FileNotFoundError(f"{path}: its run has ended")
        time.sleep(pause)
        pause = min(2 * pause, 0.02)


def release_pages() -> None:
    """Take the pages of the arrays this worker keeps mapped out of its resident set, when a
    run ends; the maps stay valid and their files' pages stay in memory (shared, or the page
    cache), so the next run that reads them faults them back in, reading nothing from disk.

    loky recycles a worker whose resident set grew by more than 300 MB over a task (its
    memory leak check, which counts mapped pages); without this, a warm worker that read a
    large array would be replaced after every run, and its maps with it.
    """
    with _mapped_lock:
        for array in _mapped_arrays.values():
            pages = getattr(array, "_mmap", None)
            with contextlib.suppress(AttributeError, OSError, ValueError):
                pages.madvise(mmap.MADV_DONTNEED)
