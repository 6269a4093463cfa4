"""A static HTML summary of a run: what a saved notebook keeps when widgets cannot show.

Widgets need a live kernel (or saved widget state) to render; a reopened notebook, GitHub or
nbviewer show this instead. The dashboard's header uses the same pieces.
"""

from __future__ import annotations

import dataclasses
import html
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from nbtune.constraints import UNCONSTRAINED, Constraints
from nbtune.front_end import DashboardSource
from nbtune.metrics import finite, format_number
from nbtune.objectives import is_several, pareto_trials, primary
from nbtune.results import trials_frame
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.data import (
    FEATURED_CURVES,
    HistoryData,
    clipped,
    config_text,
    history_data,
    ranked,
)
from nbtune.ui.static import learning_curves_svg
from nbtune.ui.table import (
    HOVER_CHARS,
    badge,
    blank_missing_text,
    status_counts,
    text_formatters,
)

logger = logging.getLogger("nbtune")


def title_html(
    name: str, state: str, elapsed_s: float | None = None, eta_s: float | None = None
) -> str:
    """The run's name, state, seconds since it started and, while it runs, about how long it
    has left (`Tuner.eta_s`)."""
    elapsed = "" if elapsed_s is None else f" · {elapsed_s:.0f} s"
    left = "" if eta_s is None else f" · about {duration_text(eta_s)} left"
    return f"<b>nbtune · {html.escape(name)}</b> — {state}{elapsed}{left}"


def duration_text(seconds: float) -> str:
    """A duration as people say it: "40 s", "12 min", "3.5 h"."""
    if seconds < 90:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def done_html(done: int, planned: int | None, ended: str | None = None) -> str:
    """The header's progress in words: "3 / 20 trials done" while the run goes on; once it has
    `ended` (its state: "finished", "stopped", ...), how many trials ran (`ran_count`) of how
    many it planned, "4 of 20 planned trials ran · stopped", or without a known plan
    (`planned` None) "4 trials ran · stopped"."""
    if ended is None:
        return f"<b>{done} / {planned}</b> trials done&nbsp;"
    of = "" if planned is None else f" of {planned}"
    what = "planned trials ran" if planned is not None else "trials ran"
    return f"<b>{done}{of}</b> {what} · {html.escape(ended)}&nbsp;"


def ran_count(trials: Sequence[Trial]) -> int:
    """How many of `trials` ran at all: reported, spent time running, or failed (a trial
    stopped in the queue when the run ended never ran)."""
    return sum(
        trial.iteration > 0 or trial.runtime_s > 0 or trial.status is TrialStatus.ERROR
        for trial in trials
    )


def counts_html(counts: Mapping[str, int]) -> str:
    """Trial counts by status (`status_counts`), as badges in the order of a trial's life."""
    shown = " ".join(
        f"{badge(status.value)} {counts[status.value]}"
        for status in TrialStatus
        if counts.get(status.value)
    )
    return shown or "no trials yet"


def best_html(
    trials: Sequence[Trial], metric: Any, mode: Any, constraints: Constraints = UNCONSTRAINED
) -> str:
    """The header's best: the best trial's value and config, among the trials that satisfy
    the `constraints` ("best feasible loss"); the Pareto front with several metrics."""
    if is_several(metric):
        return front_html(trials, metric, mode, constraints)
    infeasible = constraints.infeasible(trials)
    scored = ranked([trial for trial in trials if trial.trial_id not in infeasible], mode)
    if metric is None or not scored:
        return ""
    best = scored[0]
    config = html.escape(clipped(config_text(best.config), HOVER_CHARS))
    value = f"<b>{format_number(best.best_value)}</b>"
    feasible = "feasible " if constraints else ""
    return f"best {feasible}{html.escape(metric)} = {value} (trial {best.trial_id}: {config})"


def front_html(
    trials: Sequence[Trial],
    metric: Sequence[str],
    mode: Sequence[str],
    constraints: Constraints = UNCONSTRAINED,
) -> str:
    """The header of a run of several metrics: which trials are on the Pareto front."""
    front = pareto_trials(trials, metric, mode, constraints)
    if not front:
        return ""
    ids = ", ".join(str(trial.trial_id) for trial in front)
    names = html.escape(" / ".join(metric))
    return f"Pareto front of {names}: <b>{len(front)}</b> trial(s) ({ids})"


def summary_html(source: DashboardSource, state: str, top: int = 10) -> str:
    """The run's title, trial counts, best result, its learning curves as an SVG picture (no
    script: GitHub, nbviewer and `nbconvert --to html` show it) and its `top` best trials as a
    table."""
    trials, rows = source.snapshot()
    frame = trials_frame(trials, source.metric, source.mode, constraints=source.constraints)
    if is_several(source.metric):
        frame = frame.sort_values(["pareto", "trial_id"], ascending=[False, True])
    elif source.metric is not None:
        frame = frame.sort_values(f"best_{source.metric}", ascending=source.mode == "min")
        if source.constraints:
            frame = frame.sort_values("feasible", ascending=False, kind="stable")
    parts = [
        title_html(source.name, state),
        counts_html(status_counts(trials)),
        best_html(trials, source.metric, source.mode, source.constraints),
        _curves_svg(trials, rows, source.metric, source.mode),
        blank_missing_text(frame.head(top)).to_html(
            index=False, na_rep="", float_format=format_number, formatters=text_formatters(frame)
        ),
    ]
    return "<div class='nbtune-summary'>" + "<br>".join(p for p in parts if p) + "</div>"


def _curves_svg(trials: Sequence[Trial], rows: Any, metric: Any, mode: Any) -> str:
    first, first_mode = primary(metric, mode)
    if first is None:
        return ""
    data = history_data(trials, rows, first, first_mode)
    if is_several(metric):
        data = featured_by_front(data, trials, metric, mode)
    return learning_curves_svg(data) if data.curves else ""


def featured_by_front(
    data: HistoryData, trials: Sequence[Trial], metric: Sequence[str], mode: Sequence[str]
) -> HistoryData:
    """The curves of a run of several metrics coloured as a run of one metric has them.

    `history_data` colours the best `FEATURED_CURVES` trials by their best value, which no
    trial has when there are several metrics (every curve would be faint): here the trials of
    the Pareto front come first, then the others by their last value of the first metric, and
    the front's first three are drawn bold as the best.
    """
    front = [trial.trial_id for trial in pareto_trials(trials, metric, mode)]
    first, first_mode = primary(metric, mode)
    sign = 1.0 if first_mode == "min" else -1.0
    scored = [
        (sign * value, trial.trial_id)
        for trial in trials
        if trial.trial_id not in front
        and (value := finite(trial.last_result.get(first))) is not None
    ]
    order = front + [trial_id for _, trial_id in sorted(scored)]
    drawn = [curve.trial_id for curve in data.curves]
    featured = set(drawn) if len(drawn) <= FEATURED_CURVES else set(order[:FEATURED_CURVES])
    curves = tuple(
        dataclasses.replace(curve, featured=curve.trial_id in featured) for curve in data.curves
    )
    return HistoryData(data.metric, curves, tuple(front[:3]))


SLOT_STYLE = (
    "<style>.jp-OutputArea:has(.nbtune-dashboard) > .jp-OutputArea-child:has(.nbtune-summary)"
    "{display:none}.jp-OutputArea:has(.nbtune-summary) > .jp-OutputArea-child:has(> "
    ".jp-OutputArea-output.jupyter-widgets){display:none}</style>"
)
"""Sent with the summary under a dashboard, for JupyterLab and Notebook 7: the summary hides
while the live dashboard above it shows (it would repeat it), and the dashboard's "Error
displaying widget: model not found" line hides once its widgets are gone (a notebook reopened
with a fresh kernel), so that the summary stands alone: the widget manager marks the output
it could not draw, and only that one, with the class `jupyter-widgets`. Where the page ignores
it (another front end, an untrusted notebook), both show, as before."""


class SummarySlot:
    """An output under the live dashboard that receives the static summary once the run ends.

    The dashboard's widgets do not outlive the kernel (their state is not saved in the
    notebook: each chart would add 5 MB), so the launching cell keeps this HTML instead. The
    slot is filled in place through its display id, from the kernel's main thread only: by
    `Tuner.wait()` when it sees the end, or else after the first cell that the user runs once the
    run has ended (an IPython `post_run_cell` hook, removed once it has filled the slot). Jupyter
    front ends apply such an update to the slot's own cell, so nothing shows in the cell that
    triggered it.

    Args:
        source: the live run (a `Tuner`).
        shell: the kernel's IPython shell.
    """

    def __init__(self, source: DashboardSource, shell: Any) -> None:
        from IPython.display import HTML, display

        self.source = source
        self._shell = shell
        self._handle = display(HTML(""), display_id=True)
        shell.events.register("post_run_cell", self._after_cell)

    def fill(self) -> bool:
        """Put the summary in if the run has ended; return whether the slot is filled now.

        Off the main thread it does nothing, since output sent from another thread can land
        under whichever cell runs; the hook fills the slot after the next cell instead. A
        failure is logged, never raised into the user's cell, and leaves the slot empty.
        """
        if self._handle is None:
            return True
        if self.source.live or threading.current_thread() is not threading.main_thread():
            return False
        from IPython.display import HTML

        handle, self._handle = self._handle, None
        try:
            handle.update(HTML(SLOT_STYLE + summary_html(self.source, self.source.state)))
        except Exception:
            logger.exception("nbtune: could not show the summary of %r", self.source.name)
        return True

    def _after_cell(self, result: object) -> None:
        if self.fill():
            self._shell.events.unregister("post_run_cell", self._after_cell)
