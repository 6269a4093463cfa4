"""The timeline of a run: when each trial ran, on which worker, how each stretch ended.

    nbtune.timeline.timeline(run) -> DataFrame       the stretches, from the journal (core)
    timeline_data(frame, by) -> TimelineData         what to draw (no plotly: tests read it)
    timeline_figure(data, figure=None, dark=False)   draws it, in place into a FigureWidget
    plot_timeline(run, by="worker", dark=False)      after the run (or during it)
    TimelineTab                                      the dashboard's "timeline" tab

One row per worker slot (or per trial), one bar per stretch of running, coloured by how it
ended; a pause is the gap between two bars of a trial, and a fork a dotted link from its
parent's stretch to its own first. plotly is imported when something is drawn, not with this
module: the dashboard makes its tabs before plotly is loaded.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from nbtune.metrics import format_number
from nbtune.timeline import HOWS, JournalTimeline, timeline
from nbtune.trial import Trial
from nbtune.ui.views import ChartTab, LiveFigures, Look

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from nbtune.front_end import DashboardSource

HOW_COLORS = {
    "running": "#636efa",
    "paused": "#ffa15a",
    "terminated": "#00cc96",
    "stopped": "#ab63fa",
    "error": "#ef553b",
    "lost": "#7f7f7f",
}
"""Each bar's colour, by how its stretch ended (`nbtune.timeline.HOWS`)."""
LINK_COLOR = "rgba(120, 120, 120, 0.8)"
BY = ("worker", "trial")
"""What a row of the timeline is."""
_ROW_PX = 24
_MAX_HEIGHT = 900


@dataclass(frozen=True)
class Bars:
    """The stretches that ended one way, as horizontal bars.

    Attributes:
        rows: each bar's row (its worker, or its trial), as the row's label.
        starts: seconds since the run's first stretch began.
        lengths: seconds each ran.
        labels: hover text (HTML-escaped).
    """

    how: str
    rows: tuple[str, ...]
    starts: tuple[float, ...]
    lengths: tuple[float, ...]
    trial_ids: tuple[int, ...]
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Link:
    """A fork: from its parent's stretch (the last one that began before the child's first,
    at its end or at the child's start, whichever is first) to the child's first stretch."""

    parent: int
    child: int
    x0: float
    row0: str
    x1: float
    row1: str


@dataclass(frozen=True)
class TimelineData:
    """What the timeline shows.

    Attributes:
        by: what a row is, "worker" or "trial".
        rows: the rows' labels, top to bottom.
        bars: one `Bars` per way a stretch can end, in the order of `HOWS` (some empty).
        links: the forks whose parent and child both ran.
        origin: the epoch time of x = 0, the start of the first stretch (None: none yet).
    """

    by: str
    rows: tuple[str, ...]
    bars: tuple[Bars, ...]
    links: tuple[Link, ...]
    origin: float | None

    @property
    def segments(self) -> int:
        return sum(len(bars.rows) for bars in self.bars)


def timeline_data(frame: pd.DataFrame, by: str = "worker") -> TimelineData:
    """The stretches of `frame` (as `nbtune.timeline.timeline` returns it) as bars in rows.

    A stretch whose end is not known (NaT: it was running when a run read from disk was last
    written) is drawn up to the latest time the frame knows.

    Raises:
        ValueError: `by` is neither "worker" nor "trial".
    """
    if by not in BY:
        raise ValueError(f"by={by!r}: draw the timeline by 'worker' or by 'trial'")
    starts = [_seconds(value) for value in frame["start"]]
    ends = [_seconds(value) for value in frame["end"]]
    known = [t for t in (*starts, *ends) if t is not None]
    origin = min(starts) if starts else None
    latest = max(known) if known else 0.0
    ends = [latest if end is None else end for end in ends]
    row_of = _row_labels(frame, by)
    grouped: dict[str, list[tuple[str, float, float, int, str]]] = {how: [] for how in HOWS}
    for index, (record, start, end) in enumerate(
        zip(frame.to_dict("records"), starts, ends, strict=True)
    ):
        bar = (row_of[index], start - origin, max(0.0, end - start), record["trial_id"])
        grouped[str(record["how"])].append((*bar, _label(record, start - origin, end - start)))
    bars = tuple(
        Bars(how, *(tuple(column) for column in zip(*grouped[how], strict=True)))
        if grouped[how]
        else Bars(how, (), (), (), (), ())
        for how in HOWS
    )
    rows = tuple(sorted(set(row_of), key=_row_order))
    links = _links(frame, row_of, starts, ends, origin) if origin is not None else ()
    return TimelineData(by, rows, bars, links, origin)


def _seconds(value: Any) -> float | None:
    """A timestamp as epoch seconds; None for NaT."""
    return None if _missing(value) else value.timestamp()


def _missing(value: Any) -> bool:
    """Whether a cell of the frame is empty (None, NaN, NaT or <NA>)."""
    import pandas as pd

    return bool(pd.isna(value))


def _row_labels(frame: pd.DataFrame, by: str) -> list[str]:
    column = frame["worker"] if by == "worker" else frame["trial_id"]
    return [f"{by} {value}" for value in column]


def _row_order(label: str) -> int:
    return int(label.rsplit(" ", 1)[1])


def _label(record: Mapping[str, Any], start: float, length: float) -> str:
    """Hover text: the trial, its attempt and worker, when it ran, how it ended."""
    how = str(record["how"])
    if not _missing(record["stopped_by"]):
        how += f" by {record['stopped_by']}"
    parent = record["parent"]
    forked = "" if _missing(parent) else f" · forked from trial {parent}"
    lines = (
        f"trial {record['trial_id']} · attempt {record['attempt']} · worker "
        f"{record['worker']}{forked}",
        f"{format_number(start)} s to {format_number(start + length)} s "
        f"({format_number(length)} s): {how}",
    )
    return "<br>".join(html.escape(line, quote=False) for line in lines)


def _links(
    frame: pd.DataFrame,
    row_of: Sequence[str],
    starts: Sequence[float],
    ends: Sequence[float],
    origin: float,
) -> tuple[Link, ...]:
    parents = frame["parent"].tolist()
    stretches: dict[int, list[int]] = {}
    for index, trial_id in enumerate(frame["trial_id"].tolist()):
        stretches.setdefault(trial_id, []).append(index)
    links = []
    for child, (index, *_) in stretches.items():
        parent = parents[index]
        if _missing(parent):
            continue
        before = [i for i in stretches.get(int(parent), []) if starts[i] <= starts[index]]
        if not before:
            continue
        source = before[-1]
        links.append(
            Link(
                int(parent),
                child,
                min(ends[source], starts[index]) - origin,
                row_of[source],
                starts[index] - origin,
                row_of[index],
            )
        )
    return tuple(links)


def timeline_figure(
    data: TimelineData, figure: go.Figure | None = None, *, dark: bool = False
) -> go.Figure:
    """Draw `data` into `figure` (updated in place, in one batch) or a new figure: a bar
    trace per way a stretch ends (in `HOWS` order, each in its `HOW_COLORS`), then the forks'
    links ("fork")."""
    import plotly.graph_objects as go

    from nbtune.ui.figures import _keep_traces, _layout, _notes, apply_theme, drawing

    figure = figure if figure is not None else go.Figure()
    with drawing(figure):
        apply_theme(figure, dark)
        _keep_traces(figure, len(HOWS) + 1, _trace)
        for trace, bars in zip(figure.data, data.bars, strict=False):
            trace.update(
                y=bars.rows,
                base=bars.starts,
                x=bars.lengths,
                customdata=bars.trial_ids,
                hovertext=bars.labels,
                showlegend=bool(bars.rows),
            )
        x, y = [], []
        for link in data.links:
            x += [link.x0, link.x1, None]
            y += [link.row0, link.row1, None]
        figure.data[-1].update(x=x, y=y, showlegend=bool(data.links))
        workers = len({row for bars in data.bars for row in bars.rows})
        trials = len({t for bars in data.bars for t in bars.trial_ids})
        on = f": {trials} trials on {workers} workers" if data.by == "worker" else ""
        _layout(
            figure,
            title=f"timeline by {data.by}{on}",
            height=min(_MAX_HEIGHT, max(320, 120 + _ROW_PX * len(data.rows))),
            barmode="overlay",
            xaxis={"title": "seconds since the start", "rangemode": "tozero"},
            yaxis={
                "type": "category",
                "categoryorder": "array",
                "categoryarray": list(data.rows),
                "autorange": "reversed",
            },
            annotations=_notes(not data.rows, "waiting for a first trial to start"),
        )
    return figure


def _trace(index: int) -> Any:
    import plotly.graph_objects as go

    if index < len(HOWS):
        how = HOWS[index]
        return go.Bar(
            orientation="h",
            name=how,
            marker={"color": HOW_COLORS[how]},
            hovertemplate="%{hovertext}<extra></extra>",
            width=0.6,
        )
    return go.Scatter(
        name="fork",
        mode="lines+markers",
        line={"color": LINK_COLOR, "dash": "dot", "width": 1.5},
        marker={"size": 6, "color": LINK_COLOR},
        hoverinfo="skip",
    )


def plot_timeline(run: Any, *, by: str = "worker", dark: bool = False) -> go.Figure:
    """When each trial ran: one row per worker slot (`by="worker"`) or per trial
    (`by="trial"`), one bar per stretch of running coloured by how it ended, pauses as gaps,
    forks as dotted links. `run`: a Tuner, `nbtune.load(...)` or an experiment's directory;
    `dark` for the dark theme. The data is `nbtune.timeline(run)`.

    Raises:
        ValueError: `by` is neither "worker" nor "trial".
        TypeError: `run` is none of those.
    """
    if by not in BY:
        raise ValueError(f"by={by!r}: draw the timeline by 'worker' or by 'trial'")
    return timeline_figure(timeline_data(timeline(run), by), dark=dark)


class TimelineTab(ChartTab):
    """The dashboard's "timeline" tab: the chart, and a toggle of what a row is. It reads the
    run's journal as it grows (only the new lines at each redraw).

    Args:
        source: the dashboard's source; its `path` holds the journal.
        changed: called when the user changes the toggle.
        shared: the dashboard's live charts (see `ChartTab`).
    """

    def __init__(
        self, source: DashboardSource, changed: Any, shared: LiveFigures | None = None
    ) -> None:
        super().__init__("timeline", changed, shared)
        self.source = source
        self.journal = JournalTimeline(source.path)
        self.by = widgets.ToggleButtons(
            options=list(BY),
            value="worker",
            description="rows",
            style={"button_width": "80px", "description_width": "initial"},
        )
        self.by.observe(lambda _: changed(), names="value")
        self.widget.children = [widgets.HBox([self.by]), self.holder]

    def controls(self) -> list[widgets.Widget]:
        return [self.by]

    def _plot(
        self,
        figure: Any,
        trials: Sequence[Trial],
        rows: Sequence[Mapping[str, Any]],
        metric: Any,
        mode: Any,
        look: Look,
    ) -> None:
        now = time.time() if self.source.live else None
        frame = self.journal.read().frame(rows, now)
        timeline_figure(timeline_data(frame, self.by.value), figure, dark=look.dark)
