"""The errors nbtune raises for things a user can fix; each message says what to change."""

from __future__ import annotations


class TrialNotFoundError(LookupError):
    """A trial id that the experiment does not have."""


class IllegalTransitionError(RuntimeError):
    """A trial was asked to do what its status does not allow (resume a finished trial, ...)."""


class RunEndedError(RuntimeError):
    """A command was sent to a run that has already ended."""


class ExperimentWriteError(OSError):
    """The experiment directory could not be written (disk full, file too large, ...)."""
