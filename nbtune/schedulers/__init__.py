"""Trial schedulers: what a running trial does after each result, and what runs next."""

from nbtune.protocol import Decision
from nbtune.schedulers._base import Exploit, Resume, Scheduler, Stop
from nbtune.schedulers.asha import ASHA
from nbtune.schedulers.fifo import FIFOScheduler
from nbtune.schedulers.hyperband import HyperBand
from nbtune.schedulers.median_stopping import MedianStopping
from nbtune.schedulers.pbt import PBT

__all__ = [
    "ASHA",
    "PBT",
    "Decision",
    "Exploit",
    "FIFOScheduler",
    "HyperBand",
    "MedianStopping",
    "Resume",
    "Scheduler",
    "Stop",
]
