"""The experiment directory: everything a run records, and reading it back.

    nbtune-runs/<name>/
        experiment.json        what was run: name, metric, mode, budget, parameter names
        state.pkl              the searcher and the scheduler, pickled (for restore)
        results.jsonl          the result log: one JSON line per reported result
        trials.jsonl           the trial journal: one JSON line per change of a trial
        trials.json            a compacted snapshot of the journal, and where it stopped
        commands.jsonl         the user's commands (pause, fork, ...) in the order applied
        outcome.json           how the run ended: finished, stopped or failed (not while it runs)
        summary.json           written with the outcome: trials by status, the best (`summarize`)
        environment.json       where the run was made (`nbtune.environment`)
        trials/<id>/checkpoints/checkpoint_<iteration>.pkl
        trials/<id>/error.txt  tracebacks
        trials/<id>/output.log what the trial printed

Logs are append-only and written line by line, so each write costs the same however long the
run. Files that are rewritten (the spec, the state, the snapshot) are written to a temporary
file and renamed, so a crash leaves the old version or the new one, never half of either.
A write that fails (disk full, file too large) is undone where it started (a log is cut back
to its last whole line, a temporary file removed) and raises `ExperimentWriteError`, which
stops the run: what is on disk stays readable, and `Tuner.restore` carries the run on.
Values that are not plain data are stored pickled, and read back still pickled (`Pickled`)
unless the reader trusts the directory: reading results runs no code. `state.pkl` is a pickle
through and through; only a restore loads it, so only restore runs you trust.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import os
import re
import stat
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import cloudpickle

from nbtune.constraints import UNCONSTRAINED, Constraints
from nbtune.errors import ExperimentWriteError
from nbtune.metrics import Pickled
from nbtune.trial import Trial, TrialStatus, better_of

_COMPACT_EVERY = 1000
FORMAT_VERSION = 1
"""The layout of the experiment directory; bumped when an older nbtune could not read it.

Every run that nbtune has written since restore existed is format 1 (a spec without
`format_version`, written before it was recorded, reads as 1): files added since
(`outcome.json`, `commands.jsonl`, `trials.json`) may be missing, journal lines may lack
fields (`Trial` defaults), and the pickled searchers and schedulers fill what older ones
lack in `__setstate__`. tests/data/old_runs holds a stopped run of each version whose files
or pickles changed, and tests/test_old_runs.py carries each on to its end."""


_PICKLE = "__pickle__"
_ESCAPE = "__dict__"
_MARKERS = frozenset({_PICKLE, _ESCAPE})
"""Keys of the JSON objects that stand for something else: a pickled value
(`{"__pickle__": base64, "type": ..., "repr": ...}`), or a dict whose own keys include one of
these (`{"__dict__": [[key, value], ...]}`), so that any reported dict reads back unchanged."""


def _to_json(value: Any) -> Any:
    """JSON fallback: NumPy scalars as numbers, anything else as a pickle (a reported value as
    its worker pickled it), base64-encoded, with its type and a short repr to show."""
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "ndim", None) == 0:
        return value.item()
    pickled = value if isinstance(value, Pickled) else Pickled.of(value)
    data = base64.b64encode(pickled.data).decode("ascii")
    return {_PICKLE: data, "type": pickled.type_name, "repr": pickled.text}


def _escaped(value: Any) -> Any:
    """`value` with every dict whose keys include a marker written as a list of pairs."""
    if isinstance(value, dict):
        items = {key: _escaped(item) for key, item in value.items()}
        return (
            {_ESCAPE: [list(pair) for pair in items.items()]} if _MARKERS & items.keys() else items
        )
    if isinstance(value, (list, tuple)):
        return [_escaped(item) for item in value]
    return value


def _from_json(obj: dict, trust: bool) -> Any:
    """A JSON object back as it was written: a pickled value stays `Pickled` (unpickling runs
    code) unless `trust`; an object that merely looks like one (written by an nbtune that did
    not escape it) comes back as it is."""
    if len(obj) == 1 and isinstance(obj.get(_ESCAPE), list):
        return dict(obj[_ESCAPE])
    if not isinstance(obj.get(_PICKLE), str):
        return obj
    try:
        data = base64.b64decode(obj[_PICKLE], validate=True)
    except binascii.Error:
        return obj
    pickled = Pickled(data, obj.get("type", "object"), obj.get("repr", "(pickled)"))
    return pickled.load() if trust else pickled


def dumps(value: Any) -> str:
    """`value` as one line of JSON. Only a value with a marker key in it (rare: a pickled
    value, or a dict that looks like one) is walked again to escape what needs it."""
    text = json.dumps(value, default=_to_json, separators=(",", ":"))
    if any(f'"{marker}"' in text for marker in _MARKERS):
        text = json.dumps(_escaped(value), default=_to_json, separators=(",", ":"))
    return text


def loads(line: str, *, trust: bool = False) -> Any:
    """A value that `dumps` wrote; its pickles are unpickled only if `trust` (see `Pickled`)."""
    return json.loads(line, object_hook=functools.partial(_from_json, trust=trust))


def write_atomically(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a mix.

    The file is private to its owner, and no link is followed: a link planted where the
    temporary file goes makes the write fail; one at `path` is replaced, not written through.
    `durable` also syncs the data to the disk before the rename, which survives a power cut
    but costs milliseconds; a crashed process never leaves a torn file either way.
    """
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        with open(_private_file(temporary, os.O_WRONLY | os.O_EXCL), "wb") as file:
            file.write(data)
            if durable:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


_NO_LINK_NO_INHERIT = (
    getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)
"""Flags of every file nbtune opens in the experiment directory: follow no link, pass nothing
to child processes, no newline translation. POSIX has the first two; Windows has neither (a
process there inherits only handles marked inheritable, Python's default is not) and needs the
third."""


def _private_file(path: Path, flags: int) -> int:
    """A descriptor of `path`, created readable by its owner only if missing; never a link
    (where the system can refuse one: not on Windows, where making a link takes privileges)."""
    return os.open(path, flags | os.O_CREAT | _NO_LINK_NO_INHERIT, 0o600)


def _read_at(fd: int, size: int, offset: int) -> bytes:
    """Up to `size` bytes of the file `fd` from `offset` (`os.pread` where the system has it)."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def private_dir(path: Path) -> Path:
    """`path` as a folder of its owner's alone, made if missing; a link there is refused."""
    path.mkdir(mode=0o700, exist_ok=True)
    if path.is_symlink():
        raise PermissionError(f"{path} is a link; nbtune never writes through one")
    return path


def check_private(path: Path) -> None:
    """Refuse an experiment folder that someone else could have written: one owned by another
    user, writable by others, or holding a link (which a write would follow out of it). On
    Windows, whose files have ACLs rather than an owner's id and mode bits, only links are.

    Raises:
        PermissionError: one line that says what is wrong and what to do.
    """
    owner = os.geteuid() if hasattr(os, "geteuid") else None  # Windows: ACLs, no owner ids
    for found in [path, *_written_by_nbtune(path)]:
        info = found.lstat()
        name = "it" if found == path else found.relative_to(path)
        if stat.S_ISLNK(info.st_mode):
            problem = "is a link" if found == path else f"holds a link, {name}"
        elif owner is not None and info.st_uid != owner:
            problem = f"is owned by another user ({name})"
        elif owner is not None and stat.S_ISDIR(info.st_mode) and info.st_mode & 0o022:
            problem = f"is writable by others ({name})"
        else:
            continue
        raise PermissionError(
            f"{path} {problem}; nbtune refuses a folder that others could have written: "
            "check it, or start a new run under another name"
        )


def _written_by_nbtune(path: Path) -> Iterator[Path]:
    """Everything in the experiment folder `path` but what is inside its trials' artifact
    folders: the trials' own files (a framework's links among them), which nbtune only lists."""
    for root, folders, files in os.walk(path):
        here = Path(root)
        inside_trial = here.parent.name == "trials" and here.parent.parent == path
        for name in [*folders, *files]:
            yield here / name
        if inside_trial and "artifacts" in folders:
            folders.remove("artifacts")


class _Log:
    """An append-only log of text lines, each written whole or not at all.

    A line is written with one `os.write` (more if the system writes part of it); if that
    fails, the file is cut back to where the line began, so no torn line is left behind. A
    torn line that a killed process left at the end is cut off on opening, before anything is
    appended: else the next line would be glued to it and lost with it.
    """

    def __init__(self, path: Path) -> None:
        self._fd = _private_file(path, os.O_RDWR | os.O_APPEND)
        self.size = _whole_lines(self._fd)
        """Bytes in the file: where the next line begins."""
        os.ftruncate(self._fd, self.size)

    def append(self, line: str) -> None:
        encoded = line.encode("utf-8")
        data = memoryview(encoded)
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self.size)
            raise
        self.size += len(encoded)

    def close(self) -> None:
        """Sync to disk and close (closed even if the sync fails)."""
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)


def trial_folder(experiment: Path, trial_id: int) -> Path:
    """Trial `trial_id`'s folder in the experiment directory `experiment`: `trials/<id>`.

    This and the four below are the one place that knows a trial's part of the layout; the
    runner's writes, the dashboard's reads and the offline readers all ask them.
    """
    return experiment / "trials" / str(trial_id)


def checkpoint_dir(experiment: Path, trial_id: int) -> Path:
    """Where the checkpoints of trial `trial_id` of the experiment at `experiment` are kept."""
    return trial_folder(experiment, trial_id) / "checkpoints"


def artifact_dir(experiment: Path, trial_id: int) -> Path:
    """The trial's own folder for the files it writes (`nbtune.get_trial_dir()`), and its
    working directory while it runs (see `Tuner(chdir_to_trial_dir=...)`)."""
    return trial_folder(experiment, trial_id) / "artifacts"


def error_file(experiment: Path, trial_id: int) -> Path:
    """The trial's tracebacks, one paragraph per failed attempt."""
    return trial_folder(experiment, trial_id) / "error.txt"


def output_file(experiment: Path, trial_id: int) -> Path:
    """What the trial printed (its stdout and stderr, as its worker captured them)."""
    return trial_folder(experiment, trial_id) / "output.log"


class _Lock:
    """The one writer's hold on an experiment directory: an exclusive lock on its `.lock` file
    (`flock` on POSIX, `msvcrt.locking` on Windows), which the system drops when the holding
    process dies, however it dies.

    A second writer (another process, or another run in this one) is refused in one line
    instead of recording every result twice. The file names the holder's process. Where the
    system has neither kind of lock, the run goes on unguarded, with one warning.
    """

    def __init__(self, path: Path) -> None:
        check_writable(path)
        self._fd = _private_file(path / ".lock", os.O_RDWR)
        try:
            taken = _take(self._fd)
        except BaseException:
            os.close(self._fd)
            raise
        if not taken:
            holder = _read_at(self._fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self._fd)
            raise FileExistsError(
                f"{path} is in use by a live run (process {holder}); stop that run (or wait "
                "for it to end) before carrying it on or replacing it"
            )
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        os.write(self._fd, str(os.getpid()).encode())

    def release(self) -> None:
        os.close(self._fd)


_LOCKED_BYTE = 1 << 30
"""Where `msvcrt.locking` locks one byte of the `.lock` file: far past the holder's process
id, which Windows would otherwise refuse to let a second writer read (its locks are
mandatory). A lock past the end of a file is allowed there."""


_UNGUARDED: list[bool] = []
"""Holds one item once the process has warned that it cannot lock (once is enough)."""


def _take(fd: int) -> bool:
    """Lock the file `fd` for this process alone, without waiting; False if another holds it.

    The lock modules are imported here, not at the top: `fcntl` exists on POSIX only and
    `msvcrt` on Windows only, and `import nbtune` must work on both.
    """
    try:
        import fcntl
    except ImportError:
        pass
    else:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    try:
        import msvcrt
    except ImportError:
        if not _UNGUARDED:
            _UNGUARDED.append(True)
            warnings.warn(
                "this system has neither fcntl nor msvcrt: nbtune cannot stop a second run "
                "from writing the same experiment folder; make sure only one does",
                stacklevel=4,
            )
        return True
    os.lseek(fd, _LOCKED_BYTE, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


_WRITTEN = (".lock", "results.jsonl", "trials.jsonl", "commands.jsonl", "trials", "state.pkl")
"""What a run carried on writes in its folder, besides the folder itself."""


_NO_FOLLOW = {"follow_symlinks": False} if os.access in os.supports_follow_symlinks else {}
"""`os.access` asked about a link itself where the system can (Windows cannot)."""


def check_writable(path: Path) -> None:
    """Raise a one-line PermissionError if a run carried on could not write `path`."""
    for found in (path, *(path / name for name in _WRITTEN)):
        if os.path.lexists(found) and not os.access(found, os.W_OK, **_NO_FOLLOW):
            raise PermissionError(
                f"{path} cannot be written (no permission to write {found}); copy it to a "
                f"folder of yours and carry the copy on, or read it with nbtune.load({str(path)!r})"
            )


def check_unlocked(path: Path) -> None:
    """Raise the one-line `FileExistsError` of `_Lock` if a live run writes `path`."""
    if (path / ".lock").exists():
        _Lock(path).release()


def _whole_lines(fd: int, chunk: int = 4096) -> int:
    """The length of the file `fd` up to its last newline (0 if it has none)."""
    end = os.fstat(fd).st_size
    while end > 0:
        start = max(0, end - chunk)
        newline = _read_at(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _trial_to_record(trial: Trial) -> dict[str, Any]:
    """The trial as a journal line; its last result is in the result log already."""
    record = {f.name: getattr(trial, f.name) for f in fields(trial) if f.name != "last_result"}
    record["status"] = trial.status.value
    record["checkpoint"] = _portable_checkpoint(trial.checkpoint)
    return record


def _trial_from_record(record: Mapping[str, Any]) -> Trial:
    """A journal line back as a trial; a field it lacks (written by an older nbtune, e.g.
    `stopped_by`) takes its default, and one this nbtune does not know is left out."""
    known = {name: value for name, value in record.items() if name in _TRIAL_FIELDS}
    checkpoint = _portable_checkpoint(known.get("checkpoint"))
    return Trial(**{**known, "status": TrialStatus(record["status"]), "checkpoint": checkpoint})


_TRIAL_FIELDS = frozenset(field.name for field in fields(Trial))


class ExperimentStorage:
    """Writes one experiment's directory; the runner thread is its only writer."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    @property
    def exists(self) -> bool:
        return (self.path / "experiment.json").exists()

    def create(self, spec: Mapping[str, Any]) -> None:
        """Make the directory (readable by its owner only) and write the spec."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private_dir(self.path)
        private_dir(self.path / "trials")
        self.write_spec({"format_version": FORMAT_VERSION, **spec})
        self.open_logs()

    def write_spec(self, spec: Mapping[str, Any]) -> None:
        write_atomically(
            self.path / "experiment.json", json.dumps(spec, indent=2).encode(), durable=True
        )

    def check(self) -> None:
        """Raise if the directory was removed under the run (writes would go nowhere)."""
        if not (self.path / "experiment.json").exists():
            raise FileNotFoundError(
                f"{self.path} was removed while the run went on; the run stopped (what was "
                "reported after that is lost)"
            )

    def open_logs(self) -> None:
        """Take the directory (see `_Lock`), then open the result log and the trial journal
        for appending; the run is on again, so the outcome of an earlier one no longer holds."""
        self._lock = _Lock(self.path)
        try:
            self._results = _Log(self.path / "results.jsonl")
            self._journal = _Log(self.path / "trials.jsonl")
            self._commands = _Log(self.path / "commands.jsonl")
        except BaseException:
            self._lock.release()
            raise
        (self.path / "outcome.json").unlink(missing_ok=True)
        self._journal_lines = 0

    @contextlib.contextmanager
    def _writing(self, name: str) -> Iterator[None]:
        """Turn a failed write of `name` into one line that says what happened and what next."""
        try:
            yield
        except ExperimentWriteError:
            raise
        except OSError as exc:
            self.check()
            reason = exc.strerror or str(exc)
            raise ExperimentWriteError(
                f"could not write {name} in {self.path}: {reason}; what is on disk is intact: "
                f"free some space, then carry the run on with nbtune.Tuner.restore("
                f"{str(self.path)!r}, trainable)"
            ) from exc

    def append_result(self, row: Mapping[str, Any]) -> None:
        """Add one result to the log, before anyone hears about it."""
        with self._writing("results.jsonl"):
            self._results.append(dumps(row) + "\n")

    def record_trial(
        self, trial: Trial, all_trials: Callable[[], Iterable[Trial]] | None = None
    ) -> None:
        """Journal a trial's new state; now and then compact the journal into a snapshot.

        Args:
            trial: the trial that changed.
            all_trials: returns every trial in id order; called only when compacting.
        """
        with self._writing("trials.jsonl"):
            self._journal.append(dumps(_trial_to_record(trial)) + "\n")
        self._journal_lines += 1
        if all_trials is not None and self._journal_lines >= _COMPACT_EVERY:
            self.compact(all_trials())

    def compact(self, trials: Iterable[Trial]) -> None:
        snapshot = {
            "journal_offset": self._journal.size,
            "trials": [_trial_to_record(trial) for trial in trials],
        }
        with self._writing("trials.json"):
            write_atomically(self.path / "trials.json", dumps(snapshot).encode())
        self._journal_lines = 0

    def append_command(self, name: str, arguments: Mapping[str, Any], error: str | None) -> None:
        """Log a user's command (and its error, if it was refused) to `commands.jsonl`."""
        line = {"timestamp": time.time(), "command": name, "arguments": arguments, "error": error}
        with self._writing("commands.jsonl"):
            self._commands.append(dumps(line) + "\n")

    def write_state(self, state: Any) -> None:
        with self._writing("state.pkl"):
            write_atomically(self.path / "state.pkl", cloudpickle.dumps(state))

    def trial_dir(self, trial_id: int) -> Path:
        return trial_folder(self.path, trial_id)

    def checkpoint_dir(self, trial_id: int) -> Path:
        """The trial's checkpoint folder, made (private) if missing: its worker writes there."""
        self._made_trial_dir(trial_id)
        return private_dir(checkpoint_dir(self.path, trial_id))

    def _made_trial_dir(self, trial_id: int) -> Path:
        """The trial's folder, made (private) with the `trials` folder if missing: a run
        pulled from a remote store has no `trials` folder until the store held a trial file."""
        private_dir(self.path / "trials")
        return private_dir(self.trial_dir(trial_id))

    def append_error(self, trial_id: int, text: str) -> None:
        """Append a failed attempt's paragraph to the trial's `error_file`."""
        self._append(trial_id, error_file, text)

    def append_output(self, trial_id: int, text: str) -> None:
        """Append what the trial printed to its `output_file`."""
        self._append(trial_id, output_file, text)

    def _append(self, trial_id: int, file: Callable[[Path, int], Path], text: str) -> None:
        """Append `text` to a file of trial `trial_id`'s folder (`error_file`, say)."""
        path = file(self.path, trial_id)
        with self._writing(str(path.relative_to(self.path))):
            self._made_trial_dir(trial_id)
            with open(
                _private_file(path, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8"
            ) as file:
                file.write(text)

    def finish(self, state: Any, trials: Iterable[Trial], outcome: Mapping[str, Any]) -> None:
        """Save the state, a snapshot of the trials and how the run ended (`outcome`: its
        `state` and `error`), then close the logs whatever fails."""
        trials = list(trials)
        try:
            self.write_state(state)
            self.compact(trials)
            self._write_summary(trials, outcome)
            with self._writing("outcome.json"):
                write_atomically(self.path / "outcome.json", dumps(outcome).encode())
        finally:
            self.close()

    def _write_summary(self, trials: list[Trial], outcome: Mapping[str, Any]) -> None:
        """Write `summary.json` (see `summarize`), tied to the outcome by its `ended_at`, so
        that listing runs (`nbtune.runs`) need not read the logs. It is a cache: a spec that
        cannot be read, or a write that fails, leaves it out, and readers go back to the logs."""
        try:
            spec = json.loads((self.path / "experiment.json").read_text())
            constraints = Constraints.parse(spec.get("constraints"))
            summary = summarize(trials, spec.get("metric"), spec.get("mode"), constraints)
            summary["ended_at"] = outcome.get("ended_at")
            write_atomically(self.path / SUMMARY, dumps(summary).encode())
        except (OSError, ValueError):
            (self.path / SUMMARY).unlink(missing_ok=True)

    def close(self) -> None:
        """Sync and close every log; each is closed even if another fails."""
        with self._writing("the logs"), contextlib.ExitStack() as stack:
            stack.callback(self._lock.release)
            for log in (self._results, self._journal, self._commands):
                stack.callback(log.close)


SUMMARY = "summary.json"


def summarize(
    trials: Iterable[Trial], metric: Any, mode: Any, constraints: Constraints = UNCONSTRAINED
) -> dict[str, Any]:
    """What a list of runs shows of one: `trials`, `counts` (by status value), and for a run
    of one metric the `best` value (each feasible trial's `best_value`; ties go to the lower
    id), with its `best_trial` and `best_config`; None there in a run of several metrics or
    none."""
    counts = dict.fromkeys((status.value for status in TrialStatus), 0)
    best: Trial | None = None
    trials = list(trials)
    infeasible = constraints.infeasible(trials)
    for trial in trials:
        counts[trial.status.value] += 1
        if not isinstance(metric, str) or trial.best_value is None:
            continue
        if trial.trial_id in infeasible:
            continue
        if best is None or better_of(best.best_value, trial.best_value, mode) != best.best_value:
            best = trial
    return {
        "trials": sum(counts.values()),
        "counts": counts,
        "best": None if best is None else best.best_value,
        "best_trial": None if best is None else best.trial_id,
        "best_config": None if best is None else dict(best.config),
    }


def lock_held(path: str | os.PathLike) -> bool | None:
    """Whether a live run holds the experiment folder `path` (see `_Lock`): True, False, or
    None if that cannot be told (no `.lock`, as in a folder made before it existed, or one
    that cannot be opened). Testing takes the lock for an instant when it is free."""
    try:
        fd = os.open(Path(path) / ".lock", os.O_RDONLY | _NO_LINK_NO_INHERIT)
    except OSError:
        return None
    try:
        return not _take(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


class ExperimentReader:
    """Reads an experiment directory back, whether its run is live, finished or dead.

    A damaged directory still reads. What cannot be read is skipped with one warning per
    file, naming the file, its first bad line and how many were skipped: a log line that is
    not UTF-8, not JSON, or not a result (a trial's record); a snapshot (`trials.json`) that
    cannot be read is set aside and the trials are read from the whole journal, which holds
    every change; an outcome that cannot be read leaves the run "unfinished". A missing
    `state.pkl` (the driver died before it first saved it) reads as no saved state.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not (self.path / "experiment.json").exists():
            raise FileNotFoundError(
                f"{self.path} holds no nbtune experiment (no experiment.json); "
                "check the path, e.g. nbtune-runs/<name>"
            )
        self._warned: set[str] = set()

    def _warn(self, path: Path, message: str) -> None:
        """Warn once per file and reader: a restore reads the logs more than once."""
        if path.name not in self._warned:
            self._warned.add(path.name)
            warnings.warn(f"{path}: {message}", stacklevel=3)

    def outcome(self) -> dict[str, Any] | None:
        """How the run ended (`state`, `error`, `ended_at`), or None if it has not: it runs
        elsewhere, or its process died (or its outcome cannot be read: one warning)."""
        path = self.path / "outcome.json"
        try:
            outcome = loads(path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            return None
        except ValueError as exc:  # not UTF-8, not JSON
            outcome = exc
        if isinstance(outcome, dict) and isinstance(outcome.get("state"), str):
            return outcome
        reason = _reason(outcome) if isinstance(outcome, Exception) else "not a run's outcome"
        self._warn(path, f"cannot be read ({reason}); the run reads as unfinished")
        return None

    def summary(self) -> dict[str, Any] | None:
        """The `summarize` of the run written with its outcome, or None if there is none
        that holds: the run has not ended (or was carried on since), or ended before
        summaries were written, or its summary is damaged."""
        try:
            summary = loads((self.path / SUMMARY).read_text())
            outcome = self.outcome()
        except (OSError, ValueError):
            return None
        if not isinstance(summary, dict) or not isinstance(outcome, dict):
            return None
        return summary if summary.get("ended_at") == outcome.get("ended_at") else None

    def spec(self) -> dict[str, Any]:
        path = self.path / "experiment.json"
        try:
            spec = json.loads(path.read_bytes().decode("utf-8"))
        except ValueError as exc:  # not UTF-8, not JSON
            raise ValueError(f"{path} is corrupted ({_reason(exc)})") from None
        if not isinstance(spec, dict):
            raise ValueError(f"{path} is corrupted (not a JSON object)")
        version = spec.get("format_version", 1)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ValueError(
                f"{self.path} was written by a newer nbtune (format {version}; this one reads "
                f"up to {FORMAT_VERSION}); upgrade nbtune to read it"
            )
        return spec

    @property
    def has_state(self) -> bool:
        """Whether the run saved its searcher and scheduler (a driver killed right after
        `start()` had not yet)."""
        return (self.path / "state.pkl").exists()

    def state(self) -> dict[str, Any]:
        """The searcher, scheduler and space of the run, as last saved; empty if it saved none
        (see `has_state`): a restore then sets up a fresh searcher and scheduler."""
        if not self.has_state:
            return {}
        try:
            with open(self.path / "state.pkl", "rb") as file:
                state = cloudpickle.load(file)
            if not isinstance(state, dict):
                raise TypeError(f"a {type(state).__name__}, not the run's saved state")
        except Exception as exc:
            raise ValueError(
                f"{self.path / 'state.pkl'} cannot be read ({_reason(exc)}); the "
                f"results are intact: nbtune.load({str(self.path)!r}) still reads them"
            ) from None
        return state

    def check_restorable(self) -> None:
        """Read all that a restore reads and catch a copy of the saved searcher and scheduler
        up with the trials, writing nothing: a run that this nbtune cannot carry on is refused
        here, before its folder is taken or its outcome removed.

        Raises:
            ValueError: one line naming the folder, what failed and what to do instead.
            PermissionError: one line, if the run could not write its folder.
        """
        spec = self.spec()
        state = self.state()
        check_writable(self.path)
        try:
            with warnings.catch_warnings():
                # A torn last line is cut off when the run opens its logs: no news here.
                warnings.filterwarnings(
                    "ignore", "^.*: skipped its last line, which is incomplete$"
                )
                results = self.results()
                trials = self.trials(results, spec.get("metric"), spec.get("mode"), trust=True)
            for part in ("searcher", "scheduler"):
                if state.get(part) is not None:
                    state[part].restore(trials)
        except Exception as exc:
            raise ValueError(
                f"{self.path} cannot be carried on by this nbtune ({_reason(exc)}); nothing in "
                f"it was changed: nbtune.load({str(self.path)!r}) reads its results, and a new "
                f"run learns from them with warm_start={str(self.path)!r}"
            ) from exc

    def results(self, *, trust: bool = False) -> list[dict[str, Any]]:
        """Every result in the log. A value that was stored pickled stays `Pickled` unless
        `trust`: a restore needs none of them unpickled, and a look at the results runs no
        code."""
        return _read_lines(self.path / "results.jsonl", _result_problem, self._warn, trust=trust)

    def trials(
        self,
        results: list[dict[str, Any]],
        metric: str | list[str] | None,
        mode: Any,
        *,
        trust: bool = False,
    ) -> list[Trial]:
        """Every trial's latest record; its results are replayed from `results`.

        The journal records status changes and checkpoints; the result log is the truth for
        iterations, last results and best values (it is written first). Config values that
        were stored pickled are unpickled only if `trust` (a restore must, to run them).

        A trial that is not over resumes from a checkpoint whose result is in the log: one
        taken at a result that the log lost (its line torn when the driver died) would skip
        that result for good, so the newest one at or below its last logged iteration is taken
        instead (or none: it starts again).
        """
        offset, records = self._snapshot(trust)
        seen: dict[int, list[tuple[int, str]]] = {}
        for record in [*records.values(), *self._journal(offset, trust)]:
            records[record["trial_id"]] = record
            if isinstance(record.get("checkpoint"), str):
                iteration = record.get("checkpoint_iteration")
                if isinstance(iteration, int):
                    seen.setdefault(record["trial_id"], []).append(
                        (iteration, record["checkpoint"])
                    )
        trials = {
            trial_id: _trial_from_record({**records[trial_id], "iteration": 0, "best_value": None})
            for trial_id in sorted(records)
        }
        last = {row["trial_id"]: row["training_iteration"] for row in results}
        for row in results:
            trial = trials.get(row["trial_id"])
            if trial is not None:
                final = trial.returned and row["training_iteration"] == last[trial.trial_id]
                trials[trial.trial_id] = trial.with_result(row, metric, mode, returned=final)
        return [self._resumable(trial, seen.get(trial.trial_id, [])) for trial in trials.values()]

    def _snapshot(self, trust: bool) -> tuple[int, dict[int, dict[str, Any]]]:
        """The compacted trials and where the journal goes on after them; none (read the whole
        journal) if there is no snapshot or it cannot be read."""
        path = self.path / "trials.json"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return 0, {}
        try:
            snapshot = loads(data.decode("utf-8"), trust=trust)
            offset = snapshot["journal_offset"]
            records = {record["trial_id"]: record for record in snapshot["trials"]}
            journal = self.path / "trials.jsonl"
            size = journal.stat().st_size if journal.exists() else 0
            if not isinstance(offset, int) or not 0 <= offset <= size:
                raise ValueError(f"journal_offset {offset!r} is not in the journal")
            problem = next(filter(None, map(_record_problem, records.values())), None)
            if problem is not None:
                raise ValueError(problem)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self._warn(path, f"cannot be read ({_reason(exc)}); read the whole journal instead")
            return 0, {}
        return offset, records

    def _journal(self, offset: int, trust: bool) -> list[dict[str, Any]]:
        return _read_lines(
            self.path / "trials.jsonl", _record_problem, self._warn, offset, trust=trust
        )

    def _resumable(self, trial: Trial, seen: list[tuple[int, str]]) -> Trial:
        """`trial`, resuming from the newest checkpoint at or below its last logged iteration
        when its own latest one is past it (see `trials`) or is not there (a remote run's
        store may lack one that retention deleted before it was uploaded)."""
        if (
            trial.status.is_finished
            or trial.checkpoint is None
            or trial.checkpoint_iteration is None
            or not _is_own(trial.checkpoint, trial.trial_id)
        ):
            return trial
        there = (self.path / trial.checkpoint).exists()
        if trial.checkpoint_iteration <= trial.iteration and there:
            return trial
        own = checkpoint_dir(self.path, trial.trial_id)
        candidates = {
            iteration: _relative(path, self.path)
            for iteration, path in stored_checkpoints(own).items()
            if iteration <= trial.iteration
        }
        for iteration, checkpoint in seen:
            if iteration <= trial.iteration and (self.path / checkpoint).exists():
                candidates.setdefault(iteration, checkpoint)
        if candidates:
            newest = max(candidates)
            return trial.evolve(checkpoint=candidates[newest], checkpoint_iteration=newest)
        if trial.parent is not None:
            return trial  # a fork's starting point is its donor's: not found again here
        return trial.evolve(checkpoint=None, checkpoint_iteration=None)


_CHECKPOINT_NAME = re.compile(r"checkpoint_(\d{6,})(\.pkl)?$")
_CHECKPOINT_PATH = re.compile(r"(?:^|[\\/])(trials[\\/]\d+[\\/]checkpoints[\\/][^\\/]+)$")


def checkpoint_iteration_of(path: str | os.PathLike) -> int | None:
    """The iteration a stored checkpoint was taken at, read from its name; None if the name
    is not a checkpoint's."""
    match = _CHECKPOINT_NAME.match(Path(path).name)
    return None if match is None else int(match.group(1))


def stored_checkpoints(folder: Path) -> dict[int, Path]:
    """The checkpoints stored in a trial's checkpoint `folder`, by iteration."""
    if not folder.is_dir():
        return {}
    found = {}
    for entry in folder.iterdir():
        iteration = checkpoint_iteration_of(entry)
        if iteration is not None:
            found[iteration] = entry
    return found


def _relative(path: Path, experiment: Path) -> str:
    return path.relative_to(experiment).as_posix()


def _is_own(checkpoint: str, trial_id: int) -> bool:
    """Whether `checkpoint` (relative to the experiment) is in trial `trial_id`'s own folder."""
    return checkpoint.startswith(f"trials/{trial_id}/checkpoints/")


def _portable_checkpoint(checkpoint: Any) -> Any:
    """A journaled checkpoint path as one relative to the experiment, with "/": a path written
    on Windows, or an absolute one into the experiment where it was (a worker's), still finds
    the checkpoint once the folder has moved."""
    if not isinstance(checkpoint, str):
        return checkpoint
    match = _CHECKPOINT_PATH.search(checkpoint)
    return checkpoint if match is None else match.group(1).replace("\\", "/")


def _reason(exc: BaseException) -> str:
    """An exception as a short reason on one line."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 at byte {exc.start}"
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _result_problem(row: Any) -> str | None:
    """Why `row` is not a result of the log (None if it is one)."""
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    if not _is_int(row.get("trial_id")):
        return "no trial_id"
    if not _is_int(row.get("training_iteration")) or row["training_iteration"] < 1:
        return "no training_iteration"
    return None


def _record_problem(record: Any) -> str | None:
    """Why `record` is not a trial's record of the journal (None if it is one)."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    if not _is_int(record.get("trial_id")):
        return "no trial_id"
    try:
        _trial_from_record(record)
    except (TypeError, ValueError, KeyError) as exc:
        return f"not a trial's record ({_reason(exc)})"
    return None


def _read_lines(
    path: Path,
    problem: Callable[[Any], str | None],
    warn: Callable[[Path, str], None],
    offset: int = 0,
    *,
    trust: bool,
) -> list[dict[str, Any]]:
    """The values of a JSON-lines log from byte `offset` on. A line that cannot be read (not
    UTF-8, not JSON, or one that `problem` finds wrong) is skipped: one warning for the file
    names the first such line and the count; a torn last line alone is said to be one."""
    if not path.exists():
        return []
    with open(path, "rb") as file:
        file.seek(offset)
        lines = file.read().split(b"\n")
    values = []
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        if not line:
            continue
        try:
            value = loads(line.decode("utf-8"), trust=trust)
        except UnicodeDecodeError as exc:
            bad.append((number, _reason(exc)))
            continue
        except json.JSONDecodeError:
            bad.append((number, "incomplete" if number >= len(lines) - 2 else "not JSON"))
            continue
        found = problem(value)
        if found is None:
            values.append(value)
        else:
            bad.append((number, found))
    if len(bad) == 1 and bad[0][1] == "incomplete":
        warn(path, "skipped its last line, which is incomplete")
    elif bad:
        number, reason = bad[0]
        if offset:
            with open(path, "rb") as file:
                number += file.read(offset).count(b"\n")
        count = f"{len(bad)} lines" if len(bad) > 1 else "1 line"
        warn(
            path, f"skipped {count} that cannot be read, the first at line {number + 1} ({reason})"
        )
    return values
