"""Trial schedulers: what a running trial does after each result, and what runs next."""

from nbtune.schedulers._base import Decision, Scheduler
from nbtune.schedulers.fifo import FIFOScheduler

__all__ = ["Decision", "FIFOScheduler", "Scheduler"]
