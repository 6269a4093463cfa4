"""Runs kept in remote storage: an fsspec URL as `storage_path` (`s3://bucket/runs`, `gs://`,
`az://`, `file://`, `memory://`).

A remote run writes its folder locally first, exactly as a local run does, in a cache folder
(`cache_root() / <hash of the URL> / <name>`); a `Syncer` on its own thread copies it to the
store every `sync_period_s`, soon after a trial pauses or ends or a checkpoint is kept (at
least `_REST_S` after the last sync began), and when the run stops or ends (then blocking,
before the run is over). The runner thread never waits for
the network: it only takes `cut_lock` for its writes, which the syncer takes for the instant
it needs to note what the folder holds.

What the store holds after any sync, even one cut short by a crash, is what a local folder
holds after a crash: the result log, the trial journal and the command log are cut where they
were at one moment (`synced.json` records their sizes, uploaded after the logs and the
checkpoints they name, and readers cut the logs there), and the saved state and the journal
snapshot are uploaded after it, so they are never newer than the logs. A crash loses at most
what the last `sync_period_s` recorded, which `Tuner.restore` runs again.

One writer at a time: the writer keeps `lease.json` (its host, process and a heartbeat that
each sync refreshes) in the run's folder of the store; another writer is refused in one line
while the lease is fresh, and takes it over once it is stale (no heartbeat for
`max(3 x sync_period_s, 30 s)`, or its process is gone from this same host).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from nbtune.executors._shared import process_alive
from nbtune.storage import (
    ExperimentReader,
    ExperimentStorage,
    check_unlocked,
    checkpoint_iteration_of,
    private_dir,
    write_atomically,
)
from nbtune.trial import Trial, TrialStatus

CACHE_ENV = "NBTUNE_CACHE_DIR"
"""An environment variable that, when set, is the cache root instead of the user's cache dir."""

LEASE = "lease.json"
SYNCED = "synced.json"
LOGS = ("results.jsonl", "trials.jsonl", "commands.jsonl")
_FIRST = ("experiment.json", "environment.json")
"""Written once, when the run is created: uploaded before anything else."""
_AFTER_LOGS = ("state.pkl", "trials.json", "outcome.json", "summary.json")
"""Rewritten whole; uploaded after `synced.json`, so that none is newer than the logs."""
_APPENDED = ("error.txt", "output.log")
_STALE_AFTER_S = 30.0
_REST_S = 0.5
"""The least time between the starts of two syncs that requests (a trial paused, ended or
checkpointed) bring: a run whose trials end every few milliseconds would otherwise keep the
syncer walking its folder back to back, slowing the runner's own writes to it."""
_BATCH = 16
"""Files uploaded at once (in parallel where the file system can): a batch is held in memory."""
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_EXTRAS = {"s3": "nbtune[s3]", "s3a": "nbtune[s3]", "gs": "nbtune[gcs]", "gcs": "nbtune[gcs]"}
_PACKAGES = {"az": "adlfs", "abfs": "adlfs", "abfss": "adlfs"}


def is_url(path: Any) -> bool:
    """Whether `storage_path` names remote storage (`s3://...`) rather than a local folder."""
    return isinstance(path, str) and _URL.match(path) is not None


def cache_root() -> Path:
    """Where remote runs are written locally first: `$NBTUNE_CACHE_DIR`, else the user's
    cache dir (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS,
    `%LOCALAPPDATA%` on Windows) / nbtune."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "nbtune"


def split_url(url: str) -> tuple[str, str]:
    """A run's URL as the URL of its runs folder and its name: `s3://b/runs/x` -> (`s3://b/runs`,
    `x`)."""
    parent, _, name = url.rstrip("/").rpartition("/")
    if not name or parent.endswith(":/") or parent.endswith(":"):
        raise ValueError(
            f"{url!r} names no run; pass the run's URL, e.g. 's3://bucket/runs/<name>'"
        )
    return parent, name


class RemoteStore:
    """A folder of runs in an fsspec filesystem: `url` and the `storage_options` to reach it.

    Raises:
        ImportError: the protocol's fsspec backend is not installed (naming the extra).
        ValueError: an unknown protocol, or options the backend does not take.
        OSError: the bucket cannot be reached (missing, no access, no network).
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = url.rstrip("/")
        self.fs, root = _filesystem(self.url, dict(storage_options or {}))
        self.root = root.rstrip("/")
        self._check_reachable()

    def path(self, name: str, relative: str = "") -> str:
        return "/".join(part for part in (self.root, name, relative) if part)

    def url_of(self, name: str) -> str:
        return f"{self.url}/{name}"

    def folder(self, name: str, *, reading: bool = False) -> Path:
        """The local cache folder of run `name` (one for the writer, one for readers)."""
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:16]
        parts = ("read", digest) if reading else (digest,)
        folder = cache_root()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for part in parts:
            folder = private_dir(folder / part)
        return folder / name

    def exists(self, name: str) -> bool:
        self.fs.invalidate_cache()  # another process may have written since: no stale listing
        return bool(self.fs.exists(self.path(name, "experiment.json")))

    def names(self) -> list[str]:
        """The runs under the root (folders holding an `experiment.json`)."""
        self.fs.invalidate_cache()
        try:
            entries = self.fs.ls(self.root, detail=True)
        except FileNotFoundError:
            return []
        folders = [entry["name"].rstrip("/").rpartition("/")[2] for entry in entries]
        return sorted(name for name in folders if name and self.exists(name))

    def listing(self, name: str) -> dict[str, int]:
        """Every file of run `name`, by path relative to its folder, with its size."""
        base = self.path(name) + "/"
        self.fs.invalidate_cache()
        found = self.fs.find(self.path(name), detail=True)
        return {
            full[len(base) :]: info.get("size") or 0
            for full, info in found.items()
            if info.get("type") != "directory" and full.startswith(base)
        }

    def remove(self, name: str) -> None:
        if self.fs.exists(self.path(name)):
            self.fs.rm(self.path(name), recursive=True)

    def _check_reachable(self) -> None:
        """Refuse a bucket that is missing or cannot be reached, in one line, before any run
        writes locally (a file system without buckets has nothing to check)."""
        bucket = self.root.split("/")[0]
        if self.fs.root_marker or not bucket:
            return
        try:
            self.fs.ls(self.root)
        except FileNotFoundError:
            if not self.fs.exists(bucket):
                raise OSError(
                    f"{self.url}: bucket {bucket!r} does not exist or is not yours; {_HINT}"
                ) from None
        except Exception as exc:
            raise OSError(f"{self.url} cannot be reached ({_reason(exc)}); {_HINT}") from None


_HINT = "check the bucket, the credentials and the endpoint (storage_options=..., AWS_* variables)"


def _filesystem(url: str, options: dict[str, Any]) -> tuple[Any, str]:
    protocol = url.split("://")[0].lower()
    install = _EXTRAS.get(protocol) or _PACKAGES.get(protocol) or "fsspec"
    try:
        import fsspec

        return fsspec.core.url_to_fs(url, **options)
    except ImportError:
        raise ImportError(
            f"storage_path={url!r} needs fsspec's {protocol}:// backend: pip install '{install}'"
        ) from None
    except ValueError as exc:
        if "protocol" in str(exc).lower():
            raise ValueError(
                f"storage_path={url!r}: fsspec knows no protocol {protocol!r}; use s3://, gs://, "
                "az://, file:// or memory://, or a local folder"
            ) from None
        raise ValueError(f"storage_options for {url!r} are refused ({_reason(exc)})") from None
    except TypeError as exc:
        raise ValueError(f"storage_options for {url!r} are refused ({_reason(exc)})") from None


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


# ----- the lease ------------------------------------------------------------------------------


def lease_of(store: RemoteStore, name: str) -> dict[str, Any] | None:
    """The lease of run `name` as its writer last wrote it; None if there is none."""
    try:
        lease = json.loads(store.fs.cat_file(store.path(name, LEASE)))
    except FileNotFoundError:
        return None
    except ValueError:
        return None  # torn or foreign: nobody's valid lease
    return lease if isinstance(lease, dict) else None


def is_fresh(lease: Mapping[str, Any] | None) -> bool:
    """Whether `lease` is held by a live writer: refreshed lately, and (on this host) by a
    process that still exists."""
    if lease is None:
        return False
    period = lease.get("period") if isinstance(lease.get("period"), (int, float)) else 0
    heartbeat = lease.get("heartbeat") if isinstance(lease.get("heartbeat"), (int, float)) else 0
    if time.time() - heartbeat > max(3 * period, _STALE_AFTER_S):
        return False
    pid = lease.get("pid")
    elsewhere = lease.get("host") != socket.gethostname()
    return elsewhere or not isinstance(pid, int) or process_alive(pid)


def check_lease(store: RemoteStore, name: str, token: str | None = None) -> None:
    """Refuse, in one line, run `name` while another writer's lease is fresh."""
    lease = lease_of(store, name)
    if is_fresh(lease) and lease.get("token") != token:
        age = time.time() - lease.get("heartbeat", 0)
        raise FileExistsError(
            f"{store.url_of(name)} is in use by a live run on {lease.get('host')} (process "
            f"{lease.get('pid')}, seen {age:.0f} s ago); stop that run (or wait for it to end) "
            "before carrying it on or replacing it"
        )


# ----- pulling a run --------------------------------------------------------------------------


def pull(store: RemoteStore, name: str, folder: Path, *, part: str = "all") -> dict[str, Any]:
    """Copy run `name` from the store into the local `folder`, the store's version winning.

    `part` says how much: "all" (for a restore: the logs, state and the checkpoints that the
    trials not over resume from, and no other), "spec" (what a restore reads before it
    pulls it all: the spec and the state), "results" (for `load`: no checkpoints, no
    state), "summary" (for `runs`: the spec, outcome, summary and environment, and the logs
    only if the run has no summary). The logs are cut where `synced.json` says the writer's
    last whole sync left them. Returns what was copied, for a `Syncer` to go on from: each
    file's relative path with its `Syncer` key.
    """
    listing = store.listing(name)
    if "experiment.json" not in listing:
        raise FileNotFoundError(
            f"{store.url_of(name)} holds no nbtune experiment (no experiment.json); check the URL"
        )
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    private_dir(folder)
    _clear(folder)
    wanted = [rel for rel in listing if _wanted(rel, part, listing)]
    contents = store.fs.cat([store.path(name, rel) for rel in wanted]) if wanted else {}
    data = {rel: contents[store.path(name, rel)] for rel in wanted}
    sizes = json.loads(data.pop(SYNCED, b"{}") or b"{}")
    known: dict[str, Any] = {}
    for rel, content in data.items():
        if rel in LOGS and isinstance(sizes.get(rel), int):
            content = content[: sizes[rel]]
        _write(folder / rel, content)
        known[rel] = _key(rel, folder / rel, content)
    if part == "all":
        known.update(_pull_checkpoints(store, name, folder, listing))
    return known


def _wanted(rel: str, part: str, listing: Mapping[str, int]) -> bool:
    if rel == LEASE or (rel.startswith("trials/") and "/checkpoints/" in rel):
        return False
    if part == "all":
        return True
    if part == "spec":
        return rel in ("experiment.json", "state.pkl")
    if part == "results":
        return rel != "state.pkl"
    ended = "outcome.json" in listing and "summary.json" in listing
    return "/" not in rel and rel != "state.pkl" and (not ended or rel not in LOGS[:2])


def _clear(folder: Path) -> None:
    """Remove what the cache folder holds besides checkpoints (which are kept, as the store's
    are the same files): the store's version of the rest replaces it."""
    for path in sorted(folder.rglob("*"), reverse=True):
        rel = path.relative_to(folder).as_posix()
        if rel == ".lock" or "/checkpoints/" in rel or path.is_dir():
            continue
        path.unlink()


def _write(path: Path, content: bytes) -> None:
    for parent in reversed(path.parents):
        if not parent.exists():
            private_dir(parent)
    write_atomically(path, content)


def _pull_checkpoints(
    store: RemoteStore, name: str, folder: Path, listing: Mapping[str, int]
) -> dict[str, Any]:
    """Download the checkpoints that the trials not over resume from: each one's newest own
    checkpoint whose result is in the log, and a fork's starting point. Under retention
    (`keep_checkpoints` not None) also the others the store keeps of those trials (their best,
    at most `keep_checkpoints` in all): retention goes on ranking and deleting them, here and
    in the store, rather than leave them there for good."""
    reader = ExperimentReader(folder)
    spec = reader.spec()
    retained = spec.get("keep_checkpoints", 2) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the restore that follows warns of what matters
        trials = reader.trials(reader.results(), spec.get("metric"), spec.get("mode"))
    by_trial: dict[int, dict[int, str]] = {}
    for rel in listing:
        parts = rel.split("/")
        iteration = checkpoint_iteration_of(parts[3]) if len(parts) > 3 else None
        if parts[0] == "trials" and parts[2] == "checkpoints" and iteration is not None:
            by_trial.setdefault(int(parts[1]), {})[iteration] = "/".join(parts[:4])
    needed = set()
    for trial in trials:
        if trial.status.is_finished:
            continue
        stored = by_trial.get(trial.trial_id, {})
        own = {i: rel for i, rel in stored.items() if i <= trial.iteration}
        if own:
            needed.update(own.values() if retained else [own[max(own)]])
        if trial.checkpoint and not trial.checkpoint.startswith(f"trials/{trial.trial_id}/"):
            needed.add(trial.checkpoint)
    files = [rel for rel in listing if any(rel == c or rel.startswith(c + "/") for c in needed)]
    missing = [rel for rel in files if not _same_size(folder / rel, listing[rel])]
    temporary = [str(folder / f"{rel}.part") for rel in missing]
    for path in temporary:
        _write(Path(path), b"")
    if missing:
        store.fs.get([store.path(name, rel) for rel in missing], temporary)
    for rel, path in zip(missing, temporary, strict=True):
        os.chmod(path, 0o600)
        os.replace(path, folder / rel)
    return {rel: _key(rel, folder / rel) for rel in files}


def _same_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except FileNotFoundError:
        return False


def _key(rel: str, path: Path, content: bytes | None = None) -> Any:
    """What tells whether a file changed since it was copied: a log's or appended file's
    size, a checkpoint file's size and time, another file's digest."""
    if rel in LOGS or rel.endswith(_APPENDED):
        return len(content) if content is not None else path.stat().st_size
    if content is None:
        info = path.stat()
        return (info.st_size, info.st_mtime_ns)
    return hashlib.sha256(content).hexdigest()


# ----- writing a run --------------------------------------------------------------------------


class RemoteRun:
    """Run `name` in `store`, written through its local cache folder.

    Args:
        store: where the run is kept.
        name: the run's folder name there.
        sync_period_s: how often its syncer copies the cache folder to the store.
    """

    def __init__(self, store: RemoteStore, name: str, sync_period_s: float) -> None:
        self.store = store
        self.name = name
        self.sync_period_s = sync_period_s
        self.url = store.url_of(name)
        self.folder = store.folder(name)
        self.known: dict[str, Any] = {}
        """What the store holds that this run copied there or from there (see `pull`)."""

    def prepare(self, *, resume: bool, overwrite: bool) -> None:
        """Make the cache folder what the run starts from: the store's copy of the run it
        carries on (`resume`), else empty. Refused in one line while another writer holds the
        run, and (as for a local folder) if the run exists and neither `resume` nor
        `overwrite` is given."""
        check_free(self.store, self.name, self.folder)
        exists = self.store.exists(self.name)
        if not exists and self.store.fs.exists(self.store.path(self.name)):
            raise FileExistsError(
                f"{self.url} holds files but no nbtune experiment; nbtune writes only into "
                "its own runs: pick another name=..., or remove them yourself"
            )
        if exists and not (resume or overwrite):
            raise FileExistsError(
                f"{self.url} already holds an experiment; pass resume=True to carry it on, "
                "pick another name=..., or pass overwrite=True to replace it"
            )
        if exists and resume:
            self.known = pull(self.store, self.name, self.folder)
            return
        self.known = {}
        if self.folder.exists():
            shutil.rmtree(self.folder)

    def storage(self) -> RemoteExperimentStorage:
        return RemoteExperimentStorage(self)


def open_run(
    storage_path: str,
    storage_options: Mapping[str, Any] | None,
    name: str,
    sync_period_s: Any,
    *,
    resume: bool,
    overwrite: bool,
) -> RemoteRun:
    """The remote run `name` under the URL `storage_path`, its cache folder prepared (see
    `RemoteRun.prepare`)."""
    if isinstance(sync_period_s, bool) or not isinstance(sync_period_s, (int, float)):
        raise TypeError(f"sync_period_s={sync_period_s!r}: pass a positive number of seconds")
    if not sync_period_s > 0:
        raise ValueError(f"sync_period_s={sync_period_s!r}: pass a positive number of seconds")
    run = RemoteRun(RemoteStore(storage_path, storage_options), name, float(sync_period_s))
    run.prepare(resume=resume, overwrite=overwrite)
    return run


def restore_folder(url: str, storage_options: Mapping[str, Any] | None) -> tuple[Path, str]:
    """For `Tuner.restore(url, ...)`: the run's cache folder, holding what the restore reads
    first (its spec and state; the restored Tuner pulls the rest), and the URL of its runs
    folder.

    Raises:
        FileNotFoundError: the store holds no run at `url`, in one line.
    """
    parent, name = split_url(url)
    store = RemoteStore(parent, storage_options)
    folder = store.folder(name)
    check_free(store, name, folder)
    pull(store, name, folder, part="spec")
    return folder, parent


def check_free(store: RemoteStore, name: str, folder: Path) -> None:
    """Refuse in one line to take run `name` while another writer holds it: a fresh lease in
    `store`, or a live run on this machine in its cache `folder`."""
    check_lease(store, name)
    if folder.exists():
        check_unlocked(folder)


def read_copy(url: str, storage_options: Mapping[str, Any] | None, part: str) -> Path:
    """A local copy of the run at `url` for reading it (`part` as for `pull`)."""
    parent, name = split_url(url)
    store = RemoteStore(parent, storage_options)
    folder = store.folder(name, reading=True)
    pull(store, name, folder, part=part)
    return folder


class RemoteExperimentStorage(ExperimentStorage):
    """An `ExperimentStorage` in the run's cache folder, copied to the store by a `Syncer`."""

    def __init__(self, run: RemoteRun) -> None:
        super().__init__(run.folder)
        self.run = run
        self.cut_lock = threading.Lock()
        self._syncer: Syncer | None = None
        self._checkpoints: dict[int, str | None] = {}

    def create(self, spec: Mapping[str, Any]) -> None:
        """A new run replaces whatever the store holds under its name (`overwrite=True`)."""
        if self.run.store.exists(self.run.name):
            self.run.store.remove(self.run.name)
        self.run.known = {}
        super().create(spec)

    def open_logs(self) -> None:
        """Take the cache folder, then the lease in the store, then start syncing."""
        super().open_logs()
        try:
            self._syncer = Syncer(self.run, self.cut_lock)
            self._syncer.start()
        except BaseException:
            super().close()
            raise

    @contextlib.contextmanager
    def _writing(self, name: str) -> Iterator[None]:
        with self.cut_lock, super()._writing(name):
            yield

    def record_trial(
        self, trial: Trial, all_trials: Callable[[], Iterable[Trial]] | None = None
    ) -> None:
        """Journal the trial; sync soon if it paused, ended or kept a new checkpoint."""
        super().record_trial(trial, all_trials)
        new_checkpoint = self._checkpoints.get(trial.trial_id) != trial.checkpoint
        self._checkpoints[trial.trial_id] = trial.checkpoint
        paused_or_over = trial.status.is_finished or trial.status is TrialStatus.PAUSED
        if (paused_or_over or new_checkpoint) and self._syncer is not None:
            self._syncer.request()

    def close(self) -> None:
        """Close the logs, copy the folder to the store a last time and give up the lease."""
        syncer, self._syncer = self._syncer, None
        with contextlib.ExitStack() as stack:
            if syncer is not None:
                stack.callback(syncer.close)
            super().close()


class Syncer:
    """Copies a remote run's cache folder to the store, on its own daemon thread."""

    def __init__(self, run: RemoteRun, cut_lock: threading.Lock) -> None:
        self.run = run
        self._lock = cut_lock
        self._wake = threading.Event()
        self._rest = threading.Event()
        self._closing = False
        self._token = secrets.token_hex(8)
        self._warned = False
        self._lease_written_at = 0.0
        self._thread = threading.Thread(target=self._loop, name="nbtune-sync", daemon=True)

    def start(self) -> None:
        """Take the lease (refused in one line while another writer's is fresh), then sync
        every `sync_period_s`, at once the first time."""
        check_lease(self.run.store, self.run.name)
        self._write_lease()
        self._wake.set()
        self._thread.start()

    def request(self) -> None:
        """Sync as soon as the syncer is free (requests made meanwhile make one sync)."""
        self._wake.set()

    def close(self) -> None:
        """Stop the thread, sync a last time (blocking) and give up the lease.

        Raises:
            OSError: the last sync failed, in one line: the run is whole in its cache folder.
        """
        self._closing = True
        self._wake.set()
        self._rest.set()
        self._thread.join()
        try:
            self.sync()
        except Exception as exc:
            raise OSError(
                f"could not copy {self.run.folder} to {self.run.url} ({_reason(exc)}); the run "
                "is whole in that folder: copy it there yourself, or restore from the folder"
            ) from exc
        with contextlib.suppress(FileNotFoundError):
            self.run.store.fs.rm_file(self.run.store.path(self.run.name, LEASE))

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.run.sync_period_s)
            if self._closing:
                return
            self._wake.clear()
            started = time.monotonic()
            try:
                self.sync()
            except Exception as exc:
                self._warn(exc)
            self._rest.wait(min(_REST_S, self.run.sync_period_s) - (time.monotonic() - started))

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"nbtune could not sync {self.run.url} ({_reason(exc)}); it tries again every "
                f"{self.run.sync_period_s:g} s, and the run goes on in {self.run.folder}",
                stacklevel=2,
            )

    def _write_lease(self) -> None:
        lease = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "token": self._token,
            "heartbeat": time.time(),
            "period": self.run.sync_period_s,
        }
        self.run.store.fs.pipe_file(self.run.store.path(self.run.name, LEASE), _json(lease))
        self._lease_written_at = lease["heartbeat"]

    def sync(self) -> None:
        """Copy what changed since the last sync, in an order that leaves the store readable
        however far it gets (see the module's docstring), then delete in the store what this
        run deleted (checkpoints that retention dropped, an outcome that no longer holds)."""
        cut = _cut(self.run.folder, self._lock)
        known = self.run.known
        changed = [rel for rel, key in cut.keys.items() if known.get(rel) != key]
        checkpoints = [rel for rel in changed if "/checkpoints/" in rel]
        logs = [rel for rel in LOGS if rel in changed]
        self._put(cut, [rel for rel in _FIRST if rel in changed])
        self._put(cut, checkpoints)
        self._put(cut, logs)
        if logs:
            sizes = {rel: cut.keys[rel] for rel in LOGS if rel in cut.keys}
            self.run.store.fs.pipe_file(self.run.store.path(self.run.name, SYNCED), _json(sizes))
        self._put(cut, [rel for rel in _AFTER_LOGS if rel in changed])
        done = {*_FIRST, *LOGS, *_AFTER_LOGS, *checkpoints}
        self._put(cut, [rel for rel in changed if rel not in done])
        gone = [rel for rel in known if rel not in cut.keys]
        if gone:
            self.run.store.fs.rm([self.run.store.path(self.run.name, rel) for rel in gone])
        for rel in gone:
            del known[rel]
        if not self._closing:
            self._write_lease()

    def _put(self, cut: _Cut, files: list[str]) -> None:
        """Upload `files` (relative paths), each as `cut` saw it; a checkpoint that retention
        deleted since is skipped (the store's journal then resumes from an older one)."""
        store = self.run.store
        for start in range(0, len(files), _BATCH):
            payload = {}
            for rel in files[start : start + _BATCH]:
                with contextlib.suppress(FileNotFoundError):
                    payload[rel] = cut.contents.get(rel) or _read(
                        self.run.folder / rel, cut.keys[rel]
                    )
            if payload:
                store.fs.pipe({store.path(self.run.name, rel): b for rel, b in payload.items()})
            for rel in payload:
                self.run.known[rel] = cut.keys[rel]
            if time.time() - self._lease_written_at > self.run.sync_period_s:
                self._write_lease()  # a long upload keeps the lease fresh


def _read(path: Path, key: Any) -> bytes:
    """The bytes of `path` as the cut saw them: a log's first `key` bytes, else all of it."""
    with open(path, "rb") as file:
        return file.read(key) if isinstance(key, int) else file.read()


class _Cut:
    """The run's folder at one moment: each file (not the lock, not one being written) with
    its key (see `_key`), and the bytes of the files that are rewritten whole. Taken under the
    runner's write lock; a log's bytes up to its size there, or a checkpoint, do not change."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.contents: dict[str, bytes] = {}


def _cut(folder: Path, lock: threading.Lock) -> _Cut:
    """The folder as it is now: under `lock` (the runner's writes wait) only the logs' sizes
    and the files rewritten whole, the rest after. Whatever the logs name at that moment is
    on disk by then (a checkpoint is renamed in whole before its result is logged); what
    comes after, or goes (retention), is harmless: it is uploaded early, or skipped."""
    cut = _Cut()
    with lock:
        for rel in (*LOGS, *_FIRST, *_AFTER_LOGS):
            path = folder / rel
            with contextlib.suppress(FileNotFoundError):
                if rel in LOGS:
                    cut.keys[rel] = _key(rel, path)
                else:
                    cut.contents[rel] = path.read_bytes()
                    cut.keys[rel] = _key(rel, path, cut.contents[rel])
    for parent, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if not _hidden(name)]
        for name in files:
            path = Path(parent, name)
            rel = path.relative_to(folder).as_posix()
            if _hidden(name) or rel in cut.keys:
                continue
            with contextlib.suppress(FileNotFoundError):
                cut.keys[rel] = _key(rel, path)
    return cut


def _hidden(name: str) -> bool:
    """Whether a file stays local: the lock, and files and folders being written (renamed
    when whole)."""
    return name == ".lock" or name.endswith((".tmp", ".part"))


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()
