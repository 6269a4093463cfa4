"""A static HTML summary of a run: what a saved notebook keeps when widgets cannot show.

Widgets need a live kernel (or saved widget state) to render; a reopened notebook, GitHub or
nbviewer show this instead. The dashboard's header uses the same pieces.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from nbtune.results import ResultsView, trials_frame
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.table import badge


def title_html(name: str, state: str, elapsed_s: float | None = None) -> str:
    elapsed = "" if elapsed_s is None else f" · {elapsed_s:.0f} s"
    return f"<b>nbtune · {html.escape(name)}</b> — {state}{elapsed}"


def counts_html(trials: Sequence[Trial]) -> str:
    counts = {status: 0 for status in TrialStatus}
    for trial in trials:
        counts[trial.status] += 1
    shown = " ".join(f"{badge(s.value)} {n}" for s, n in counts.items() if n)
    return shown or "no trials yet"


def best_html(trials: Sequence[Trial], metric: str | None, mode: str) -> str:
    scored = [trial for trial in trials if trial.best_value is not None]
    if metric is None or not scored:
        return ""
    pick = min if mode == "min" else max
    best = pick(scored, key=lambda trial: trial.best_value)
    config = html.escape(", ".join(f"{k}={v}" for k, v in best.config.items()))
    value = f"<b>{best.best_value:.6g}</b>"
    return f"best {html.escape(metric)} = {value} (trial {best.trial_id}: {config})"


def summary_html(source: ResultsView, state: str, top: int = 10) -> str:
    """The run's title, trial counts, best result and its `top` best trials as a table."""
    trials, _ = source._snapshot()
    frame = trials_frame(trials, source.metric, source.mode)
    if source.metric is not None:
        frame = frame.sort_values(f"best_{source.metric}", ascending=source.mode == "min")
    parts = [
        title_html(str(getattr(source, "name", "")), state),
        counts_html(trials),
        best_html(trials, source.metric, source.mode),
        frame.head(top).to_html(index=False, na_rep=""),
    ]
    return "<div class='nbtune-summary'>" + "<br>".join(p for p in parts if p) + "</div>"


def show_summary(source: ResultsView, state: str) -> None:
    """Display the static summary under the running cell (call it from the cell's thread)."""
    from IPython.display import HTML, display

    display(HTML(summary_html(source, state)))
