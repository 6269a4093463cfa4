"""What every training library's callback does: pick the evaluation results to report under
the user's names, report them after each step, checkpoint every few steps and on a pause."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nbtune.arguments import is_whole_number
from nbtune.checkpoint import Checkpoint
from nbtune.session import checkpoint_on_pause, get_checkpoint, report

MetricNames = Mapping[str, str] | Sequence[str] | str | None
"""`{"loss": "validation-logloss"}` (report the library's `validation-logloss` as `loss`),
`["validation-logloss"]` or `"validation-logloss"` (under its own name), None (every one)."""

SaveModel = Callable[[Path], None]
"""Writes the model's files into the folder it is given."""


class Reporter:
    """Reports one step's evaluation results; `library` names the callback in errors."""

    def __init__(self, library: str, metrics: MetricNames, checkpoint_every: int | None) -> None:
        self._library = library
        self._wanted = _wanted(library, metrics)
        if checkpoint_every is not None and (
            isinstance(checkpoint_every, bool)
            or not isinstance(checkpoint_every, int)
            or checkpoint_every < 1
        ):
            raise ValueError(
                f"{library}.ReportCallback(checkpoint_every={checkpoint_every!r}): pass a whole "
                "number of steps >= 1, or None for no regular checkpoints"
            )
        self._every = checkpoint_every
        self._scratch = Path(tempfile.mkdtemp(prefix="nbtune-model-"))
        weakref.finalize(self, shutil.rmtree, self._scratch, True)

    def report(self, results: Mapping[str, float], step: int, save: SaveModel | None) -> None:
        """Report `results` of the library's `step` (counted from 1 over the whole training,
        a resumed one included), with a checkpoint if one is due; with `save` None, without
        any (a pause then waits in the worker)."""
        metrics = self._pick(results)
        checkpoint_on_pause(None if save is None else lambda: self._checkpoint(save))
        due = save is not None and self._every is not None and step % self._every == 0
        report(metrics, checkpoint=self._checkpoint(save) if due else None)

    def _checkpoint(self, save: SaveModel) -> Checkpoint:
        shutil.rmtree(self._scratch, ignore_errors=True)
        self._scratch.mkdir(mode=0o700)
        save(self._scratch)
        return Checkpoint.from_directory(self._scratch)

    def _pick(self, results: Mapping[str, float]) -> dict[str, float]:
        if self._wanted is None:
            return dict(results)
        for theirs in self._wanted.values():
            if theirs not in results:
                known = ", ".join(sorted(results)) or "none"
                raise ValueError(
                    f"{self._library}.ReportCallback(metrics=...): {theirs!r} is not among the "
                    f"evaluation results ({known}); name one of those"
                )
        return {ours: results[theirs] for ours, theirs in self._wanted.items()}


def _wanted(library: str, metrics: MetricNames) -> dict[str, str] | None:
    if metrics is None:
        return None
    if isinstance(metrics, str):
        return {metrics: metrics}
    if isinstance(metrics, Mapping):
        pairs = dict(metrics)
    elif isinstance(metrics, Sequence):
        pairs = {name: name for name in metrics}
    else:
        pairs = {}
    if not pairs or not all(isinstance(v, str) and isinstance(k, str) for k, v in pairs.items()):
        raise ValueError(
            f"{library}.ReportCallback(metrics={metrics!r}): pass names of evaluation results, "
            "e.g. metrics={'loss': 'validation-logloss'} or ['validation-logloss']"
        )
    return pairs


def model_folder(library: str, model_file: str) -> Path | None:
    """The folder of the checkpoint this trial resumes from, holding `model_file`; None on a
    fresh start."""
    checkpoint = get_checkpoint()
    if checkpoint is None:
        return None
    folder = getattr(checkpoint, "path", None)
    if folder is None or not (Path(folder) / model_file).is_file():
        raise ValueError(
            f"{library}.resume_kwargs(): the trial's checkpoint holds no {model_file} (it was not "
            f"written by {library}.ReportCallback); resume from your own checkpoint by hand"
        )
    return Path(folder)


def total_rounds(library: str, num_boost_round: Any) -> int:
    """`num_boost_round`, checked: the rounds the whole training runs, resumed or not."""
    if not is_whole_number(num_boost_round):
        raise ValueError(
            f"{library}.resume_kwargs(num_boost_round={num_boost_round!r}): pass the whole "
            "training's number of rounds, a whole number"
        )
    return num_boost_round
