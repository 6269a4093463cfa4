"""What the MLflow and TensorBoard loggers share: a thread of their own, fed by a queue.

    runner thread                      logging thread (one per logger)
    -------------                      -------------------------------
    bus.publish(event) --> logger(event): queue.put(event)
                                       take every event waiting, in order
                                       write them as a batch (MLflow, TensorBoard files)
    ExperimentDone     --> waits until the thread has written everything (flush_timeout_s)

Each run gets a thread, a queue and a writer of its own (`LogWriter`, made by the logger's
`_open`): a logger passed to the next Tuner while its earlier run is still being written (its
store hangs) starts the new run at once, and the two never share state.

The runner pays one `put` per event; the logger's own store (a database, a server, a disk)
never slows a trial. A logger whose store fails says so once, in a warning on the "nbtune"
logger, and logs nothing more of that run; the run goes on and loses nothing of its own.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbtune.events import Event, ExperimentDone
from nbtune.metrics import number
from nbtune.objectives import single
from nbtune.retention import best_stored
from nbtune.space import flatten_config
from nbtune.storage import ExperimentReader, checkpoint_dir
from nbtune.trial import Trial

if TYPE_CHECKING:
    from nbtune.tuner import Tuner

logger = logging.getLogger("nbtune")

_BATCH = 1000
"""At most this many events are written in one batch."""
_NOT_METRICS = frozenset({"trial_id", "training_iteration", "timestamp"})
"""Keys of a result row that are not metrics: its trial, its step and its time."""


@dataclass(frozen=True)
class ExperimentFacts:
    """What a logger needs to know of the experiment, taken from the Tuner at `setup`.

    Attributes:
        name: the experiment's name.
        path: its directory (absolute).
        metric: the tuned metric (or metrics, or None).
        mode: "min"/"max" (or one per metric).
        parameter_names: the search space's parameters, "/"-joined where nested.
        key: names this experiment among others of the same name (its path and creation
            time, hashed), so that a restored run finds what it logged before.
        trials: the trials a restored run carries on, by id (empty for a new run).
        rows: the results those trials logged before, by trial id and iteration.
    """

    name: str
    path: Path
    metric: str | Sequence[str] | None
    mode: str | Sequence[str]
    parameter_names: tuple[str, ...]
    key: str
    trials: Mapping[int, Trial] = field(default_factory=dict)
    rows: Mapping[int, dict[int, Mapping[str, Any]]] = field(default_factory=dict)

    @classmethod
    def of(cls, tuner: Tuner) -> ExperimentFacts:
        path = Path(tuner.path).resolve()
        reader = ExperimentReader(path)
        created = reader.spec().get("created_at", "")
        trials = {trial.trial_id: trial for trial in tuner.trials}
        rows: dict[int, dict[int, Mapping[str, Any]]] = {}
        for row in reader.results() if trials else ():
            rows.setdefault(row["trial_id"], {})[row["training_iteration"]] = row
        return cls(
            name=tuner.name,
            path=path,
            metric=tuner.metric,
            mode=tuner.mode,
            parameter_names=tuple(tuner.space.parameter_names),
            key=hashlib.sha1(f"{path}\n{created}".encode()).hexdigest()[:16],
            trials=trials,
            rows=rows,
        )

    def best_checkpoint(self, trial_id: int, rows: Mapping[int, Mapping[str, Any]]) -> Path | None:
        """The trial's best checkpoint on disk, as `tuner.get_checkpoint(id, "best")` finds
        it: of those kept, the one taken at its best result (`rows`, by iteration)."""
        directory = checkpoint_dir(self.path, trial_id)
        return best_stored(directory, rows, single(self.metric), self.mode)


def metrics_of(row: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of a result row, nested dicts flattened with "/", without the row's trial,
    step and time; NaN and infinities included, text and bools left out."""
    found = {}
    for key, value in flatten_config(row).items():
        value = number(value)
        if value is not None and key not in _NOT_METRICS:
            found[key] = float(value)
    return found


class _Flush:
    """A marker in the queue: set once everything queued before it is written."""

    def __init__(self) -> None:
        self.written = threading.Event()


class LogWriter:
    """What a logger writes of one run: made by the logger's `_open` on that run's logging
    thread, and used there only, so it needs no lock. Each run has its own, so a run whose
    store hangs keeps its writer to itself and never touches the next run's."""

    def write(self, events: list[Event]) -> None:
        """Write `events`, in order."""
        raise NotImplementedError

    def close(self, done: ExperimentDone | None) -> None:
        """Close what was opened; `done` is the run's end, or None for `close()`."""
        raise NotImplementedError


class QueuedLogger:
    """Base of the callbacks that log a run elsewhere; subclasses write on the logging thread.

    Pass an instance to `Tuner(..., callbacks=[...])`: the Tuner calls `setup`, then the
    logger for every event. Subclasses implement `_open`, which runs on the logging thread
    and returns the run's `LogWriter`.

    Args:
        flush_timeout_s: how long the end of the run waits for the logger to catch up, so
            that `tuner.run()` returns with everything logged.
    """

    def __init__(self, *, flush_timeout_s: float = 60.0) -> None:
        self.flush_timeout_s = flush_timeout_s
        self._run: _RunLog | None = None
        self._warned_unset = False

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped this logger in its latest run, if one did."""
        return None if self._run is None else self._run.failure

    @property
    def _writer(self) -> LogWriter | None:
        """The latest run's writer, once its logging thread has opened it."""
        return None if self._run is None else self._run.writer

    # ----- on the runner thread -----------------------------------------------------------------

    def setup(self, tuner: Tuner) -> None:
        """Learn the experiment and start its logging thread (the Tuner calls this).

        A logger serves runs one after another. If it is still writing an earlier run, this
        waits for it for at most `HANDOVER_S` seconds; then that run goes on being written
        in the background, on its own thread and with its own writer (a store that hangs
        holds it, not the new run), and a warning says so.
        """
        earlier = self._run
        if earlier is not None and not earlier.close(HANDOVER_S):
            logger.warning(
                "nbtune: %s is still writing run %r after %g s (does its store answer?); "
                "the new run logs on a thread of its own, and that one is left to finish in "
                "the background (abandoned if it never does)",
                type(self).__name__,
                earlier.name,
                HANDOVER_S,
            )
        self._run = _RunLog(type(self).__name__, self._open, ExperimentFacts.of(tuner))

    def __call__(self, event: Event) -> None:
        run = self._run
        if run is None:
            self._warn_unset()
            return
        run.put(event)
        if isinstance(event, ExperimentDone) and not run.flush(self.flush_timeout_s):
            logger.warning(
                "nbtune: %s is still writing after %g s; call its flush() to wait for it",
                type(self).__name__,
                self.flush_timeout_s,
            )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything received so far is written; return False on a timeout."""
        return True if self._run is None else self._run.flush(timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Write what is queued, close the logger's files or runs, and end its thread; return
        False if it has not ended within `timeout`. The end of a run does this already."""
        return True if self._run is None else self._run.close(timeout)

    def _warn_unset(self) -> None:
        if not self._warned_unset:
            self._warned_unset = True
            logger.warning(
                "nbtune: %s was not set up; pass it as Tuner(..., callbacks=[logger]), "
                "not to tuner.subscribe()",
                type(self).__name__,
            )

    def _open(self, experiment: ExperimentFacts) -> LogWriter:
        """Get ready to log `experiment` (find or make its records); on the logging thread."""
        raise NotImplementedError


HANDOVER_S = 1.0
"""How long `setup` waits for a logger to finish writing its earlier run."""


class _RunLog:
    """One run's logging: its queue, its thread, its writer and what stopped it."""

    def __init__(
        self, owner: str, open_: Callable[[ExperimentFacts], LogWriter], experiment: ExperimentFacts
    ) -> None:
        self.owner = owner
        self.name = experiment.name
        self.failure: BaseException | None = None
        self.writer: LogWriter | None = None
        self._open = open_
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._ending = threading.Lock()
        self._ended = False
        self._thread = threading.Thread(
            target=self._work, args=(experiment,), name=f"nbtune-{owner}", daemon=True
        )
        self._thread.start()

    # ----- on the runner thread, or any other -----------------------------------------------------

    def put(self, event: Event) -> None:
        if self._ended:
            return
        if self.failure is None or isinstance(event, ExperimentDone):
            self._queue.put(event)

    def flush(self, timeout: float | None) -> bool:
        marker = _Flush()
        with self._ending:
            if self._ended:
                return True
            self._queue.put(marker)
        return marker.written.wait(timeout)

    def close(self, timeout: float | None) -> bool:
        with self._ending:
            if self._ended:
                return True
            self._queue.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ----- on the logging thread ---------------------------------------------------------------

    def _work(self, experiment: ExperimentFacts) -> None:
        self._guarded(self._open_writer, experiment)
        events = self._queue
        if self.failure is not None:
            self._wind_up(_waiting(events))
            return
        while True:
            items = [events.get()]
            while len(items) < _BATCH and not events.empty():
                items.append(events.get_nowait())
            batch: list[Event] = []
            for position, item in enumerate(items):
                if isinstance(item, Event):
                    batch.append(item)
                    if not isinstance(item, ExperimentDone):
                        continue
                if batch and self.failure is None:
                    self._guarded(self._write, batch)
                batch = []
                if isinstance(item, _Flush):
                    item.written.set()
                    continue
                self._guarded(self._close, item)
                self._wind_up(items[position + 1 :])
                return
            if batch and self.failure is None:
                self._guarded(self._write, batch)

    def _open_writer(self, experiment: ExperimentFacts) -> None:
        self.writer = self._open(experiment)

    def _write(self, events: list[Event]) -> None:
        assert self.writer is not None
        self.writer.write(events)

    def _close(self, done: ExperimentDone | None) -> None:
        if self.writer is not None:
            self.writer.close(done)

    def _wind_up(self, items: Iterable[Any]) -> None:
        """The thread ends: answer every flush among `items` and still queued, and take no
        more (a flush from now on returns at once)."""
        _release(items)
        with self._ending:
            self._ended = True
        while not self._queue.empty():
            _release([self._queue.get_nowait()])

    def _guarded(self, step: Callable[[Any], None], argument: Any) -> None:
        """Run one step of the logger's work; the first error is reported, and any after it
        (closing what a failed store left open) is not."""
        try:
            step(argument)
        except Exception as exc:
            if self.failure is not None:
                return
            self.failure = exc
            first_line = (str(exc).strip().splitlines() or [""])[0]
            logger.warning(
                "nbtune: %s failed (%s: %s); it logs nothing more of this run, which goes on",
                self.owner,
                type(exc).__name__,
                first_line,
            )


def _release(items: Iterable[Any]) -> None:
    """Release whoever waits for a flush among `items` (the logging thread has ended)."""
    for item in items:
        if isinstance(item, _Flush):
            item.written.set()


def _waiting(events: queue.SimpleQueue) -> Iterator[Any]:
    """The items queued until the run's end or `close()`."""
    while True:
        item = events.get()
        if item is None or isinstance(item, ExperimentDone):
            return
        yield item
