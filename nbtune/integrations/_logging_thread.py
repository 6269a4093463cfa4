"""What the MLflow and TensorBoard loggers share: a thread of their own, fed by a queue.

    runner thread                      logging thread (one per logger)
    -------------                      -------------------------------
    bus.publish(event) --> logger(event): queue.put(event)
                                       take every event waiting, in order
                                       write them as a batch (MLflow, TensorBoard files)
    ExperimentDone     --> waits until the thread has written everything (flush_timeout_s)

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


class QueuedLogger:
    """Base of the callbacks that log a run elsewhere; subclasses write on the logging thread.

    Pass an instance to `Tuner(..., callbacks=[...])`: the Tuner calls `setup`, then the
    logger for every event. Subclasses implement `_open`, `_write` and `_close`, which run on
    the logging thread only, so they need no lock.

    Args:
        flush_timeout_s: how long the end of the run waits for the logger to catch up, so
            that `tuner.run()` returns with everything logged.
    """

    def __init__(self, *, flush_timeout_s: float = 60.0) -> None:
        self.flush_timeout_s = flush_timeout_s
        self.failure: BaseException | None = None
        """The error that stopped this logger, if one did."""
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._ending = threading.Lock()
        self._ended = False
        self._warned_unset = False

    # ----- on the runner thread -----------------------------------------------------------------

    def setup(self, tuner: Tuner) -> None:
        """Learn the experiment and start the logging thread (the Tuner calls this). A logger
        serves runs one after another: if it is still writing an earlier one, this waits."""
        self.close()
        self.failure = None
        self._queue = queue.SimpleQueue()
        self._ended = False
        self._thread = threading.Thread(
            target=self._work,
            args=(self._queue, ExperimentFacts.of(tuner)),
            name=f"nbtune-{type(self).__name__}",
            daemon=True,
        )
        self._thread.start()

    def __call__(self, event: Event) -> None:
        if self._thread is None:
            self._warn_unset()
            return
        if self._ended:
            return
        if self.failure is None or isinstance(event, ExperimentDone):
            self._queue.put(event)
        if isinstance(event, ExperimentDone) and not self.flush(self.flush_timeout_s):
            logger.warning(
                "nbtune: %s is still writing after %g s; call its flush() to wait for it",
                type(self).__name__,
                self.flush_timeout_s,
            )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything received so far is written; return False on a timeout."""
        marker = _Flush()
        with self._ending:
            if self._thread is None or self._ended:
                return True
            self._queue.put(marker)
        return marker.written.wait(timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Write what is queued, close the logger's files or runs, and end its thread; return
        False if it has not ended within `timeout`. The end of a run does this already."""
        thread = self._thread
        with self._ending:
            if thread is None or self._ended:
                return True
            self._queue.put(None)
        thread.join(timeout)
        return not thread.is_alive()

    def _warn_unset(self) -> None:
        if not self._warned_unset:
            self._warned_unset = True
            logger.warning(
                "nbtune: %s was not set up; pass it as Tuner(..., callbacks=[logger]), "
                "not to tuner.subscribe()",
                type(self).__name__,
            )

    # ----- on the logging thread ---------------------------------------------------------------

    def _work(self, events: queue.SimpleQueue, experiment: ExperimentFacts) -> None:
        self._guarded(self._open, experiment)
        if self.failure is not None:
            self._wind_up(events, _waiting(events))
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
                self._wind_up(events, items[position + 1 :])
                return
            if batch and self.failure is None:
                self._guarded(self._write, batch)

    def _wind_up(self, events: queue.SimpleQueue, items: Iterable[Any]) -> None:
        """The thread ends: answer every flush among `items` and still in `events`, and take
        no more (a flush from now on returns at once)."""
        _release(items)
        with self._ending:
            self._ended = True
        while not events.empty():
            _release([events.get_nowait()])

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
                type(self).__name__,
                type(exc).__name__,
                first_line,
            )

    def _open(self, experiment: ExperimentFacts) -> None:
        """Get ready to log `experiment` (find or make its records)."""
        raise NotImplementedError

    def _write(self, events: list[Event]) -> None:
        """Write `events`, in order."""
        raise NotImplementedError

    def _close(self, done: ExperimentDone | None) -> None:
        """Close what `_open` opened; `done` is the run's end, or None for `close()`."""
        raise NotImplementedError


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
