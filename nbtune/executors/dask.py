"""Trials as tasks on a Dask cluster (`distributed`), one machine or many.

    runner thread (driver)                         Dask worker (any machine)
    ----------------------                         -------------------------
    start(launch) -- client.submit(key=...) -----> _run_on_worker(trainable, launch, bytes)
    accept thread <-- TCP connect(address, key) -- (once per worker thread, then kept open)
    poll() <----------------------------------> Hello(launch key, pid) / Ack(wanted)
    poll() <----------------------------------- WorkerResult(..., checkpoint=Shipped(...))
      stores the checkpoint on the driver's disk
    reply(trial, decision) ---- Reply --------> report() returns, or ends the trial
    poll() <----------------------------------- WorkerDone, WorkerPaused or WorkerFailed
    future callback: the task failed ---------> WorkerLost

Why a TCP line back to the driver rather than Dask's own messaging: a report must wait for
the runner's decision, and a round trip through the scheduler (structured events one way,
a `distributed.Event` or `Queue` the other) costs milliseconds and loads the scheduler with
every result, while a direct authenticated connection (`multiprocessing.connection`, a fresh
key per run) costs a fraction of a millisecond and is the very protocol the loky executor
speaks (`_lines`). The driver listens on the address from which it reaches the scheduler,
which workers can reach as well in the usual layouts (a laptop or a login node next to the
cluster); a worker that cannot connect fails its task, and the trial is reported lost.

The trainable travels inline with each task when it is small; a large one (arrays it captures,
`with_parameters` objects) is scattered to every worker once per run, its large buffers out
of band (pickle protocol 5), and unpickled once per worker: its arrays are read-only views of
what Dask received.

Checkpoints make no shared-disk assumption. A resumed trial's checkpoint travels with its
task (as an argument, or scattered first when large); a checkpoint the trial writes stays on
the worker's local disk and is shipped to the driver, which writes it where the runner
expects it: small ones inline with the result, large ones fetched from the worker through
Dask (`client.run`), so that they never clog the line that carries reports; a result with
a large checkpoint waits for the driver's Ack, so that its trial cannot end and clean up its
scratch folder before the checkpoint is fetched. A trial's artifact folder
(`nbtune.get_trial_dir()`) is in that scratch folder too: what it gained since the last
shipment (new files, and files changed) travels the same way with each checkpoint and with
the trial's last message (done, failed or paused), and the driver merges it into the
experiment's `trials/<id>/artifacts/`.

A running Dask task cannot be cancelled (dask/distributed#4694): `kill` restarts the worker
process that runs the trial (its other tasks, if it runs several at once, are lost and
retried), which needs a nanny; without one it warns and the trial stops at its next report.
When a worker dies, Dask may run its task again elsewhere: the launch key in the handshake
recognises the copy and refuses it, and the trial is reported lost once, for the runner to
retry from its checkpoint.
"""

from __future__ import annotations

import itertools
import pickle
import tempfile
import threading
import uuid
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cloudpickle

from nbtune.artifacts import Shipment, merge
from nbtune.checkpoint import pack, size_of, unpack
from nbtune.executors._base import Executor
from nbtune.executors._lines import TrialLines, connect, greet, hang_up, load_trainable
from nbtune.protocol import (
    NUDGE,
    Ack,
    Decision,
    Reply,
    TrialLaunch,
    WorkerDone,
    WorkerEvent,
    WorkerFailed,
    WorkerLost,
    WorkerPaused,
    WorkerResult,
)
from nbtune.session import answer
from nbtune.trainable import run_trial

try:
    import distributed
except ModuleNotFoundError:  # pragma: no cover - exercised in a subprocess by the tests
    raise ModuleNotFoundError(
        "nbtune.DaskExecutor needs Dask's 'distributed' package: pip install 'nbtune[dask]'"
    ) from None

INLINE_CHECKPOINT_BYTES = 1 << 20
"""Checkpoints up to this size travel inline (with the task, or with the result)."""

_ARTIFACTS = "artifacts"
"""A trial's artifact folder in its scratch folder on the worker."""


@dataclass(frozen=True)
class Shipped:
    """A checkpoint a worker wrote on its own disk, on its way to the driver's.

    Attributes:
        name: its name (`checkpoint_000007.pkl`, or a directory `checkpoint_000007`), kept
            on the driver.
        data: its bytes (a directory's as a tar archive, see `nbtune.checkpoint.pack`), or
            None when it is large: then the driver fetches `path` from
            `worker` through Dask.
        worker: the Dask address of the worker that holds it.
        path: where it is on that worker.
    """

    name: str
    data: bytes | None
    worker: str
    path: str


@dataclass(frozen=True)
class _WithArtifacts:
    """A worker event and, shipped with it, what the trial's artifact folder gained since
    the last shipment (see `nbtune.artifacts.Shipment`)."""

    event: WorkerEvent
    artifacts: Shipped


class _ShippingChannel:
    """The trial's line to the runner, shipping each checkpoint it writes to the driver, and
    with it (and when the trial ends) the new files of its artifact folder."""

    def __init__(self, connection: Any, worker: str, scratch: Path) -> None:
        self._connection = connection
        self._worker = worker
        self._scratch = scratch
        self._shipment = Shipment(scratch / _ARTIFACTS)

    def send(self, event: WorkerEvent) -> None:
        checkpointed = isinstance(event, WorkerResult) and event.checkpoint is not None
        paused = isinstance(event, WorkerPaused)
        ends = paused or isinstance(event, (WorkerDone, WorkerFailed))
        artifacts = self._ship_artifacts() if checkpointed or ends else None
        message: Any = event
        if checkpointed or paused:
            message = replace(event, checkpoint=self._ship(event.checkpoint))
        self._connection.send(message if artifacts is None else _WithArtifacts(message, artifacts))
        if artifacts is not None and artifacts.data is None:
            answer(self._connection)  # fetched: the trial may end and clean up
        if paused or (checkpointed and message.checkpoint.data is None):
            answer(self._connection)  # the driver holds it now: the task may clean up

    def _ship_artifacts(self) -> Shipped | None:
        """What the artifact folder gained since the last shipment; None if nothing."""
        archive = self._shipment.pack(self._scratch / "artifacts.tar")
        return None if archive is None else self._ship(str(archive))

    def recv(self) -> Any:
        return self._connection.recv()

    def poll(self) -> bool:
        return self._connection.poll()

    def _ship(self, path: str) -> Shipped:
        local = Path(path)
        data = pack(local) if size_of(local) <= INLINE_CHECKPOINT_BYTES else None
        return Shipped(local.name, data, self._worker, path)


def _run_on_worker(
    payload: bytes,
    launch: TrialLaunch,
    checkpoint: bytes | None,
    launch_key: int,
    address: tuple[str, int],
    authkey: bytes,
) -> bool:
    """The task: run one trial, in a scratch folder of the worker's own disk.

    Returns whether it ran; False for a copy of a launch the runner no longer wants.
    """
    connection = connect(address, authkey)
    try:
        if not greet(connection, launch_key):
            return False
        worker = distributed.get_worker().address
        with tempfile.TemporaryDirectory(prefix=f"nbtune-trial{launch.trial_id}-") as scratch:
            local = _on_local_disk(launch, checkpoint, Path(scratch))
            trainable = _load(payload)
            run_trial(trainable, local, _ShippingChannel(connection, worker, Path(scratch)))
        return True
    except (OSError, EOFError):
        hang_up()
        raise


@dataclass(frozen=True, eq=False)
class _Scattered:
    """A large trainable's pickle, scattered to every worker once per run: the pickle stream
    and, out of band, the large buffers in it (arrays), which Dask sends without copies."""

    stream: bytes
    buffers: tuple[Any, ...]


def _payload(client: distributed.Client, trainable: Any) -> bytes | distributed.Future:
    """The trainable's pickle: inline with each task when small, else scattered once to every
    worker (`broadcast=True`) and loaded once per worker and run."""
    buffers: list[pickle.PickleBuffer] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < INLINE_CHECKPOINT_BYTES:
            return True
        buffers.append(buffer)
        return False

    stream = cloudpickle.dumps(trainable, protocol=5, buffer_callback=out_of_band)
    size = len(stream) + sum(buffer.raw().nbytes for buffer in buffers)
    if size <= INLINE_CHECKPOINT_BYTES:
        return cloudpickle.dumps(trainable)
    import numpy as np

    arrays = tuple(np.frombuffer(buffer.raw(), dtype=np.uint8) for buffer in buffers)
    scattered = _Scattered(stream, arrays)
    return client.scatter(scattered, broadcast=True, hash=False)


_loaded: weakref.WeakKeyDictionary[_Scattered, Any] = weakref.WeakKeyDictionary()
_loaded_lock = threading.Lock()


def _load(payload: bytes | _Scattered) -> Any:
    """The trainable, unpickled once per worker process and run; its arrays read-only.

    A scattered one is kept while the worker holds the scattered payload, which it drops once
    the run has ended (the driver releases it), so one run's data does not outlive it.
    """
    if isinstance(payload, bytes):
        return load_trainable(payload)
    with _loaded_lock:
        trainable = _loaded.get(payload)
        if trainable is None:
            buffers = [memoryview(array).toreadonly() for array in payload.buffers]
            trainable = pickle.loads(payload.stream, buffers=buffers)
            _loaded[payload] = trainable
        return trainable


def _on_local_disk(launch: TrialLaunch, checkpoint: bytes | None, scratch: Path) -> TrialLaunch:
    """`launch` with its checkpoint written into `scratch`, new ones written there too, and its
    artifact folder there; the trial works in that folder only if it has the worker's
    process to itself (a worker of one thread), and else where the worker does (the driver's
    working directory is on another machine)."""
    path = None
    if checkpoint is not None:
        path = unpack(checkpoint, scratch / Path(launch.checkpoint_path).name)
    in_its_folder = launch.working_dir is not None and launch.working_dir == launch.artifact_dir
    alone = distributed.get_worker().state.nthreads == 1
    folder = str(scratch / _ARTIFACTS)
    return replace(
        launch,
        checkpoint_path=path and str(path),
        checkpoint_dir=str(scratch),
        artifact_dir=folder,
        working_dir=folder if in_its_folder and alone else None,
    )


class DaskExecutor(Executor):
    """Runs each trial as a task on a Dask cluster.

    Args:
        client: a `distributed.Client` of the cluster; by default one is connected to
            `address`, or else the current default client (the latest made) is used.
        address: the scheduler's address (`"tcp://host:8786"`), when no client is given.
        resources_per_trial: what one trial needs, e.g. `{"cpu": 1, "gpu": 1}`; each
            amount becomes a Dask worker resource of the same name (any case) that the
            cluster declares (`dask worker --resources "GPU=1"`). A "cpu" that no worker
            declares is what a worker thread gives anyway, so it is left out; any other
            name the cluster lacks is an error, raised when the run opens.
    """

    can_kill_trial = True
    isolates_trials = True
    schedules_resources = True
    captures_output = True
    announces_start = True

    def __init__(
        self,
        client: distributed.Client | None = None,
        *,
        address: str | None = None,
        resources_per_trial: Mapping[str, float] | None = None,
    ) -> None:
        if client is not None and address is not None:
            raise ValueError("DaskExecutor: pass a client or an address, not both")
        self.client = client or _client_for(address)
        self.resources_per_trial = dict(resources_per_trial or {})
        self._lines: TrialLines | None = None
        self._keys = itertools.count()
        self._done: deque[tuple[int, int, distributed.Future]] = deque()

    def use_resources(self, resources: Mapping[str, float]) -> None:
        """The Tuner's `resources_per_trial`, unless this executor was given its own."""
        if not self.resources_per_trial:
            self.resources_per_trial = dict(resources)

    def open(self, trainable: Callable | type, max_workers: int) -> None:
        client = self.client
        self._resources = _dask_resources(self.resources_per_trial, _declared_resources(client))
        self._payload = _payload(client, trainable)
        host = distributed.utils.get_ip(distributed.comm.get_address_host(client.scheduler.address))
        self._lines = TrialLines("AF_INET", (host, 0), translate=self._receive)
        self._launches: dict[int, TrialLaunch] = {}
        self._futures: dict[int, distributed.Future] = {}
        self._task_keys: dict[int, str] = {}
        self._done.clear()

    def start(self, launch: TrialLaunch) -> None:
        launch_key = next(self._keys)
        self._launches[launch.trial_id] = launch
        self._lines.expect(launch_key, launch.trial_id)
        task_key = f"nbtune-trial-{launch.trial_id}-{uuid.uuid4().hex[:12]}"
        self._task_keys[launch.trial_id] = task_key
        future = self.client.submit(
            _run_on_worker,
            self._payload,
            launch,
            self._checkpoint_for(launch),
            launch_key,
            self._lines.address,
            self._lines.authkey,
            key=task_key,
            pure=False,
            retries=0,
            resources=self._resources or None,
        )
        self._futures[launch_key] = future
        future.add_done_callback(lambda done: self._task_done(launch_key, launch.trial_id, done))

    def update_trainable(self, trainable: Callable | type) -> None:
        """Tasks submitted from now on carry `trainable` (scattered anew when large); those
        already submitted keep theirs."""
        self._payload = _payload(self.client, trainable)

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        self._lines.reply(trial_id, Reply(decision, free_steps))

    def nudge(self, trial_id: int) -> None:
        self._lines.reply(trial_id, NUDGE)

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        return self._lines.poll(timeout) + self._collect_failed_tasks()

    def wakeup(self) -> None:
        lines = self._lines
        if lines is not None:
            lines.wakeup()

    def kill(self, trial_id: int) -> None:
        """Restart the worker process that runs the trial; it comes back lost."""
        worker = self._worker_running(self._task_keys.get(trial_id))
        if worker is None:
            return
        try:
            self.client.restart_workers([worker])
        except Exception as exc:
            warnings.warn(
                f"DaskExecutor cannot restart worker {worker} ({type(exc).__name__}: {exc}); "
                f"trial {trial_id} stops at its next report",
                stacklevel=2,
            )

    def abandon(self) -> None:
        """Cancel what has not started and restart the workers that run this run's trials."""
        futures = list(self._futures.values())
        self.client.cancel(futures)
        running = {self._worker_running(key) for key in self._task_keys.values()} - {None}
        if running:
            self.client.restart_workers(sorted(running), raise_for_error=False)

    def close(self) -> None:
        if self._lines is None:
            return
        self._lines.close()
        self._lines = None
        self.client.cancel(list(self._futures.values()))
        self._futures.clear()
        self._payload = None  # a scattered trainable leaves the workers' memory

    # ----- the driver's side of the checkpoints ---------------------------------------------

    def _checkpoint_for(self, launch: TrialLaunch) -> bytes | distributed.Future | None:
        """The bytes of the checkpoint the trial resumes from, scattered first when large."""
        if launch.checkpoint_path is None:
            return None
        data = pack(launch.checkpoint_path)
        if len(data) <= INLINE_CHECKPOINT_BYTES:
            return data
        return self.client.scatter(data, hash=False)

    def _receive(self, message: WorkerEvent | _WithArtifacts) -> WorkerEvent:
        """Store what a worker shipped on the driver's disk: artifacts, then a checkpoint."""
        if isinstance(message, _WithArtifacts):
            self._receive_artifacts(message.event.trial_id, message.artifacts)
            message = message.event
        return self._receive_checkpoint(message)

    def _receive_artifacts(self, trial_id: int, shipped: Shipped) -> None:
        """Write the files into the trial's artifact folder; a failure costs a warning, not the
        trial (its results and checkpoint still count)."""
        try:
            merge(self._fetch(shipped), Path(self._launches[trial_id].artifact_dir))
        except Exception as exc:
            warnings.warn(
                f"trial {trial_id}: its artifacts could not be shipped from {shipped.worker} "
                f"({type(exc).__name__}: {exc})",
                stacklevel=2,
            )
        finally:
            if shipped.data is None:
                self._lines.reply(trial_id, Ack(True))

    def _receive_checkpoint(self, event: WorkerEvent) -> WorkerEvent:
        """Store a shipped checkpoint on the driver's disk; the runner sees its path there."""
        trial_id = event.trial_id
        if isinstance(event, WorkerResult) and isinstance(event.checkpoint, Shipped):
            stored = self._store_or_none(trial_id, event.checkpoint)
            if event.checkpoint.data is None:
                self._lines.reply(trial_id, Ack(True))
            return replace(event, checkpoint=stored)
        if not isinstance(event, WorkerPaused):
            return event
        try:
            return replace(event, checkpoint=self._store(trial_id, event.checkpoint))
        except Exception as exc:
            return WorkerFailed(trial_id, f"its checkpoint could not be fetched: {exc!r}", "")
        finally:
            self._lines.reply(trial_id, Ack(True))

    def _store_or_none(self, trial_id: int, shipped: Shipped) -> str | None:
        """The stored checkpoint of a result; None if its worker died before it was fetched
        (the trial is then reported lost, and resumes from its previous checkpoint)."""
        try:
            return self._store(trial_id, shipped)
        except Exception:
            return None

    def _store(self, trial_id: int, shipped: Shipped) -> str:
        folder = Path(self._launches[trial_id].checkpoint_dir)
        return str(unpack(self._fetch(shipped), folder / shipped.name))

    def _fetch(self, shipped: Shipped) -> bytes:
        """The bytes of what a worker shipped: inline, or fetched from its disk through Dask."""
        if shipped.data is not None:
            return shipped.data
        return self.client.run(pack, shipped.path, workers=[shipped.worker])[shipped.worker]

    # ----- tasks that failed ------------------------------------------------------------------

    def _task_done(self, launch_key: int, trial_id: int, future: distributed.Future) -> None:
        self._done.append((launch_key, trial_id, future))
        self.wakeup()

    def _collect_failed_tasks(self) -> list[WorkerEvent]:
        """Trials whose task failed before they connected (a connected one sees EOF instead):
        the worker died and Dask gave up on the task, or the task could not reach the driver."""
        events: list[WorkerEvent] = []
        while self._done:
            launch_key, trial_id, future = self._done.popleft()
            self._futures.pop(launch_key, None)
            if future.status == "finished" or not self._lines.withdraw(launch_key):
                continue
            events.append(WorkerLost(trial_id, f"its Dask task failed: {_failure(future)}"))
        return events

    def _worker_running(self, task_key: str | None) -> str | None:
        """The address of the worker that runs task `task_key`, if one does."""
        if task_key is None:
            return None
        for worker, keys in self.client.processing().items():
            if task_key in keys:
                return worker
        return None


def _client_for(address: str | None) -> distributed.Client:
    """A client of the scheduler at `address`, or the default client (the latest made)."""
    if address is not None:
        try:
            return distributed.Client(address)
        except OSError as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"DaskExecutor: no Dask scheduler at {address!r} ({reason})") from None
    try:
        return distributed.default_client()
    except ValueError:
        raise ValueError(
            "DaskExecutor needs a Dask cluster: pass DaskExecutor(client), or the scheduler's "
            "address: DaskExecutor(address='tcp://host:8786') (%tune: --address)"
        ) from None


def _failure(future: distributed.Future) -> str:
    if future.status == "cancelled":
        return "cancelled"
    return repr(future.exception())


def _declared_resources(client: distributed.Client) -> set[str]:
    workers = client.scheduler_info()["workers"].values()
    return {name for worker in workers for name in worker.get("resources", {})}


def _dask_resources(wanted: Mapping[str, float], declared: set[str]) -> dict[str, float]:
    """`resources_per_trial` in the cluster's own names (`{"gpu": 1}` -> `{"GPU": 1}`)."""
    by_lower = {name.lower(): name for name in declared}
    resources = {}
    for name, amount in wanted.items():
        if not amount:
            continue
        declared_name = by_lower.get(name.lower())
        if declared_name is not None:
            resources[declared_name] = amount
        elif name.lower() != "cpu":
            have = ", ".join(sorted(declared)) or "none"
            raise ValueError(
                f"resources_per_trial={dict(wanted)!r}: no Dask worker declares a {name!r} "
                f"resource (declared: {have}); start workers with --resources "
                f'"{name.upper()}=N", or drop it'
            )
    return resources
