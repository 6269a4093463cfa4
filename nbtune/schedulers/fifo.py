"""First in, first out: every trial runs to its end, in the order it was queued."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nbtune.protocol import Decision
from nbtune.schedulers._base import Scheduler
from nbtune.trial import Trial


class FIFOScheduler(Scheduler):
    """Never stops or pauses a trial early; the default scheduler."""

    def on_result(self, trial: Trial, result: Mapping[str, Any]) -> Decision:
        return Decision.CONTINUE

    def next_decision_at(self, trial: Trial) -> float:
        return math.inf
