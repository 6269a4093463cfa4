"""The trials table: one line per trial, sortable by any column, filtered by status, paged.

    snapshot --> table_page(...) --> TablePage (plain data: columns, the page's rows)
                                         |
                     TrialTableWidget (one anywidget model: the table is drawn in the browser;
                     clicks on a header, a row or its buttons come back as messages)
                     or, where no anywidget front end draws it, StaticTable (HTML + a few
                     core widgets for sorting, filtering, paging and the trial's buttons)

What to show is computed here in Python, once, for both: the browser only draws the page it is
given, so a run of 1,000 trials costs it one page of rows, and the fallback shows the same page.
"""

from __future__ import annotations

import html
import math
import pathlib
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anywidget
import ipywidgets as widgets
import traitlets

from nbtune.constraints import UNCONSTRAINED, Constraints
from nbtune.metrics import finite, format_value
from nbtune.objectives import is_several, pareto_trials
from nbtune.objectives import names as metric_names
from nbtune.space import SearchSpace
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.data import clipped, config_text, trial_color

STATUS_COLORS = {
    "PENDING": "#9e9e9e",
    "RUNNING": "#1f77b4",
    "PAUSED": "#ff9f1c",
    "TERMINATED": "#2ca02c",
    "ERROR": "#d62728",
}
ACTIONS = ("pause", "resume", "stop")
STATUS_FILTERS = ("all", "running", "pending", "paused", "terminated", "error")
CONFIG_WIDTH = 48
"""Characters of a value shown in a cell of the table; more of it is on hover."""
HOVER_CHARS = 1000
"""Characters of a trial's configuration on hover over its line, and of a value in the trial
tab: enough to read, bounded so that a huge value costs the browser little at each redraw."""
STATUS_ORDER = {"RUNNING": 0, "PAUSED": 0, "PENDING": 1, "TERMINATED": 2, "ERROR": 2}
"""How sorting by status orders the trials (the table's default): the running and paused ones
first, then those waiting, then those that ended, each by id."""
FRONT_MARK = "★"
"""What the "Pareto" column shows for a trial on the Pareto front of several metrics."""

Command = Callable[[str, int], None]
"""Called with ("pause" | "resume" | "stop", trial_id) when a row's button is clicked."""


def badge(status: str) -> str:
    """A status as a small coloured label."""
    return (
        f'<span style="background:{STATUS_COLORS[status]};color:white;border-radius:4px;'
        f'padding:1px 6px;font-size:11px">{status.lower()}</span>'
    )


def short(value: Any, limit: int = CONFIG_WIDTH) -> str:
    """A value in a cell of the table or the trial tab: `nbtune.metrics.format_value`, cut to
    `limit` characters (the last one "…"), and a missing one (None) left blank."""
    return "" if value is None else clipped(format_value(value), limit)


def text_formatters(frame: Any) -> dict[str, Callable[[Any], str]]:
    """`DataFrame.to_html(formatters=...)` that cut each text column's values to a cell's
    width (pandas writes them whole, however long)."""
    texts = [name for name, dtype in frame.dtypes.items() if getattr(dtype, "kind", "") in "OSU"]
    return dict.fromkeys(texts, _clip_cell)


def blank_missing_text(frame: Any) -> Any:
    """`frame` with the missing values of its nullable columns (text, `Int64`, `boolean`)
    blank: pandas writes their NA as "<NA>", whatever `na_rep` says."""
    nullable = [
        name
        for name, dtype in frame.dtypes.items()
        if getattr(dtype, "na_value", None) is not None and dtype.name != "category"
    ]
    if not nullable:
        return frame
    blanks = {name: frame[name].astype(object).where(frame[name].notna(), "") for name in nullable}
    return frame.assign(**blanks)


def _clip_cell(value: Any) -> str:
    """A value of a text column (pandas writes a missing one as its `na_rep` before this)."""
    return clipped(str(value), CONFIG_WIDTH)


@dataclass(frozen=True)
class Column:
    """A column of the table: `key` is what sorting names, `label` its heading."""

    key: str
    label: str
    numeric: bool = True


@dataclass(frozen=True)
class TableRow:
    """One trial's line: display text by column key, its full config, the actions it allows."""

    trial_id: int
    status: str
    cells: Mapping[str, str]
    config: str
    actions: tuple[str, ...]
    note: str = ""
    """Why the trial waits, next to its status: "resumes from iter 12", "holds its worker"."""
    infeasible: str = ""
    """What the trial's last result misses of the run's constraints ("latency_ms 12 > 10");
    empty for a trial that satisfies them (or has no result yet)."""


@dataclass(frozen=True)
class TablePage:
    """What the table shows now."""

    columns: tuple[Column, ...]
    rows: tuple[TableRow, ...]
    page: int
    pages: int
    matching: int
    unstarted: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)
    empty: str = ""
    """What the table says in place of its lines when it has none: "no paused trials"."""


@dataclass(frozen=True)
class TableView:
    """How the user looks at the table: sort column and direction, status filter, page.

    By default it sorts by status (`STATUS_ORDER`): what runs, and what the user paused, is on
    the first page however many trials have ended.
    """

    sort: str = "status"
    descending: bool = False
    status: str = "all"
    page: int = 0
    page_size: int = 20

    def sorted_by(self, key: str) -> TableView:
        """Sort by `key`; sorting again by the same key reverses. Back to the first page."""
        descending = not self.descending if key == self.sort else False
        return TableView(key, descending, self.status, 0, self.page_size)

    def filtered(self, status: str) -> TableView:
        if status not in STATUS_FILTERS:
            raise ValueError(f"status filter {status!r}: use one of {', '.join(STATUS_FILTERS)}")
        return TableView(self.sort, self.descending, status, 0, self.page_size)

    def turned(self, step: int) -> TableView:
        return TableView(self.sort, self.descending, self.status, self.page + step, self.page_size)


def table_page(
    trials: Sequence[Trial],
    metric: str | Sequence[str] | None,
    view: TableView,
    live: bool,
    planned: int | None = None,
    mode: str | Sequence[str] = "min",
    constraints: Constraints = UNCONSTRAINED,
) -> TablePage:
    """The page of `trials` that `view` shows, with a column per parameter.

    With one metric, its last and best values have a column each; with several (a list, each
    with its mode in `mode`), each metric's last value has one, and a "Pareto" column marks the
    trials on their Pareto front. `planned` is how many trials the run will have in all, where
    known: those the searcher has not suggested yet are counted as `unstarted` (shown as
    pending, under the table). A trial whose last result misses one of the `constraints` is
    marked (`TableRow.infeasible`).
    """
    front = (
        {trial.trial_id for trial in pareto_trials(trials, metric, mode, constraints)}
        if is_several(metric)
        else set()
    )
    columns = _columns(trials, metric)
    values = [_values(trial, metric, columns, front) for trial in trials]
    chosen = [
        (trial, row)
        for trial, row in zip(trials, values, strict=True)
        if view.status == "all" or trial.status.value.lower() == view.status
    ]
    key = view.sort if any(column.key == view.sort for column in columns) else "id"
    sort_key = _status_key if key == "status" else _sort_key
    chosen.sort(key=lambda pair: sort_key(pair[1].get(key)), reverse=view.descending)
    if view.descending:
        missing = [pair for pair in chosen if _missing(pair[1].get(key))]
        chosen = [pair for pair in chosen if not _missing(pair[1].get(key))] + missing
    pages = max(1, math.ceil(len(chosen) / view.page_size))
    page = min(max(0, view.page), pages - 1)
    shown = chosen[page * view.page_size : (page + 1) * view.page_size]
    counts = status_counts(trials)
    unstarted = 0 if planned is None else max(0, planned - len(trials))
    if unstarted:
        counts["PENDING"] = counts.get("PENDING", 0) + unstarted
    rows = tuple(_row(trial, row, columns, live, constraints) for trial, row in shown)
    empty = "" if chosen else _empty(view.status, len(trials), unstarted)
    return TablePage(tuple(columns), rows, page, pages, len(chosen), unstarted, counts, empty)


def _empty(status: str, total: int, unstarted: int) -> str:
    """What an empty table says: that the filter matches nothing, or that no trial exists yet."""
    if status == "all":
        return "no trials yet" + (f": {unstarted} planned" if unstarted else "")
    if not total:
        return f"no {status} trials: no trials yet"
    return f"no {status} trials (of {total}): show all to see them"


def status_counts(trials: Sequence[Trial]) -> dict[str, int]:
    """How many trials are in each status, by its name."""
    counts: dict[str, int] = {}
    for trial in trials:
        counts[trial.status.value] = counts.get(trial.status.value, 0) + 1
    return counts


def _columns(trials: Sequence[Trial], metric: str | Sequence[str] | None) -> list[Column]:
    names: dict[str, bool] = {}
    for trial in trials:
        for name, value in SearchSpace.flatten(trial.config).items():
            numeric = finite(value) is not None and not isinstance(value, bool)
            names[name] = names.get(name, True) and numeric
    if is_several(metric):
        metric_columns = [Column(f"last/{name}", f"last {name}") for name in metric_names(metric)]
        metric_columns.append(Column("pareto", "Pareto", numeric=False))
    elif metric is not None:
        metric_columns = [Column("last", f"last {metric}"), Column("best", f"best {metric}")]
    else:
        metric_columns = []
    return [
        Column("status", "status", numeric=False),
        Column("id", "id"),
        *(Column(f"config/{name}", name, numeric) for name, numeric in names.items()),
        *metric_columns,
        Column("iteration", "iter"),
        Column("runtime", "runtime s"),
        Column("stopped_by", "stopped by", numeric=False),
    ]


def _values(
    trial: Trial,
    metric: str | Sequence[str] | None,
    columns: Sequence[Column],
    front: Collection[int] = (),
) -> dict[str, Any]:
    config = SearchSpace.flatten(trial.config)
    values: dict[str, Any] = {
        "status": trial.status.value,
        "id": trial.trial_id,
        "last": trial.last_result.get(metric) if isinstance(metric, str) else None,
        "best": trial.best_value,
        "pareto": FRONT_MARK if trial.trial_id in front else None,
        "iteration": trial.iteration,
        "runtime": _runtime(trial),
        "stopped_by": trial.stopped_by or "",
    }
    for column in columns:
        if column.key.startswith("config/"):
            values[column.key] = config.get(column.key.removeprefix("config/"))
        elif column.key.startswith("last/"):
            values[column.key] = trial.last_result.get(column.key.removeprefix("last/"))
    return values


def _row(
    trial: Trial,
    values: Mapping[str, Any],
    columns: Sequence[Column],
    live: bool,
    constraints: Constraints,
) -> TableRow:
    cells = {column.key: _cell(column.key, values.get(column.key)) for column in columns}
    if live and pausing(trial):
        cells["status"] = "pausing"
    config = clipped(config_text(trial.config), HOVER_CHARS)
    feasible = constraints.trial_feasible(trial.last_result) is not False
    return TableRow(
        trial.trial_id,
        trial.status.value,
        cells,
        config,
        possible_actions(trial) if live else (),
        waiting_note(trial) if live else "",
        "" if feasible else constraints.describe(trial.last_result),
    )


def pausing(trial: Trial) -> bool:
    """Whether the user paused a trial that runs on until its next report: its line says so
    at once, since a report may be minutes away."""
    return trial.status is TrialStatus.RUNNING and trial.user_paused


def waiting_note(trial: Trial) -> str:
    """Why a trial that is not running waits, and how it goes on: a pending trial that ran
    before (resumed, or restarted after a failure), or a paused one; "" for the others (a
    pending trial that never ran simply waits for its turn). A trial the user paused that
    runs on until its next report says so."""
    if pausing(trial):
        return "pauses at its next report"
    if trial.status is TrialStatus.PENDING:
        if trial.has_checkpoint:
            return f"waits for a worker · resumes from iter {trial.checkpoint_iteration}"
        if trial.attempts > 1:
            return f"waits for a worker · attempt {trial.attempts}, from the start"
        if trial.iteration:
            return "waits for a worker · starts over (no checkpoint)"
        return ""
    if trial.status is TrialStatus.PAUSED:
        if trial.paused_by == "suspend":
            return "holds its worker (cannot checkpoint)"
        if trial.paused_by == "checkpoint" and trial.has_checkpoint:
            return f"at iter {trial.checkpoint_iteration}, worker freed"
        if trial.paused_by == "queue" or not trial.iteration:
            return "not started yet"
    return ""


def _cell(key: str, value: Any) -> str:
    if key == "runtime" and isinstance(value, float):
        return f"{value:.1f}"
    if key == "status":
        return str(value).lower()
    return short(value)


def _missing(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _status_key(status: Any) -> int:
    return STATUS_ORDER.get(status, len(STATUS_ORDER))


def _sort_key(value: Any) -> tuple:
    """Numbers by value, then text, missing values last."""
    if _missing(value):
        return (2, 0.0, "")
    number = finite(value) if not isinstance(value, bool) else None
    if number is not None:
        return (0, number, "")
    return (1, 0.0, str(value))


def _runtime(trial: Trial) -> float:
    """Seconds the trial has run, the current stretch included."""
    running = trial.status is TrialStatus.RUNNING and trial.started_at is not None
    return trial.runtime_s + (max(0.0, time.time() - trial.started_at) if running else 0.0)


def possible_actions(trial: Trial) -> tuple[str, ...]:
    """The buttons a trial's line offers, in their fixed order."""
    if pausing(trial):
        return ("resume", "stop")
    if trial.status in (TrialStatus.PENDING, TrialStatus.RUNNING):
        return ("pause", "stop")
    if trial.status is TrialStatus.PAUSED:
        return ("resume", "stop")
    return ()


def page_state(page: TablePage) -> dict[str, Any]:
    """A page as the browser's table reads it (plain JSON)."""
    return {
        "columns": [{"key": c.key, "label": c.label, "numeric": c.numeric} for c in page.columns],
        "rows": [
            {
                "id": row.trial_id,
                "status": row.status,
                "color": STATUS_COLORS[row.status],
                "swatch": trial_color(row.trial_id),
                "cells": dict(row.cells),
                "config": row.config,
                "actions": list(row.actions),
                "note": row.note,
                "infeasible": row.infeasible,
            }
            for row in page.rows
        ],
        "page": page.page,
        "pages": page.pages,
        "footer": _footer(page),
        "empty": page.empty,
    }


def _footer(page: TablePage) -> str:
    parts = [f"page {page.page + 1} of {page.pages}", f"{page.matching} trial(s)"]
    if page.unstarted:
        parts.append(f"{page.unstarted} more planned, not started yet")
    return " · ".join(parts)


class TrialTableWidget(anywidget.AnyWidget):
    """The table as one widget model, drawn by `table.js` in the browser.

    The browser sends `{"type": "rendered", "dark": bool}` when it draws the table and whenever
    the notebook's theme changes, `{"type": "sort", "key": ...}`, `{"type": "filter", ...}`,
    `{"type": "page", "step": ±1}`, `{"type": "select", "trial_id": id | None}`,
    `{"type": "action", "action": ..., "trial_id": ...}`, and `{"type": "hover", ...}` only
    where the learning curves are not a live chart it can highlight itself (see `charts`).
    """

    _esm = pathlib.Path(__file__).with_name("table.js")
    _css = pathlib.Path(__file__).with_name("table.css")
    table = traitlets.Dict().tag(sync=True)
    sort = traitlets.Unicode(TableView.sort).tag(sync=True)
    descending = traitlets.Bool(False).tag(sync=True)
    status = traitlets.Unicode("all").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    highlighted = traitlets.Int(-1).tag(sync=True)
    charts = traitlets.Dict().tag(sync=True)
    """The model ids of the dashboard's live charts (plotly FigureWidgets), by tab: the
    browser's table sizes them to the dashboard's width, and highlights the curve of the trial
    under the mouse without asking the kernel."""


class StaticTable:
    """The table without anywidget: an HTML table and core widgets to steer it.

    Made only when the browser does not draw `TrialTableWidget` (a front end without
    anywidget), so the usual dashboard does not pay for these widgets.
    """

    def __init__(self, send: Callable[[Mapping[str, Any]], None]) -> None:
        self._send = send
        self.body = widgets.HTML()
        self.sort = widgets.Dropdown(description="sort by", layout=widgets.Layout(width="220px"))
        self.descending = widgets.ToggleButton(description="descending", value=False)
        self.status = widgets.Dropdown(options=STATUS_FILTERS, description="show")
        self.previous = widgets.Button(description="◀", layout=widgets.Layout(width="40px"))
        self.next = widgets.Button(description="▶", layout=widgets.Layout(width="40px"))
        self.trial = widgets.Dropdown(description="trial", layout=widgets.Layout(width="160px"))
        self.buttons = {
            action: widgets.Button(description=action.capitalize()) for action in ACTIONS
        }
        self._drawing = False
        self.sort.observe(lambda c: self._changed({"type": "sort", "key": c["new"]}), "value")
        self.descending.observe(lambda c: self._changed({"type": "descending"}), "value")
        self.status.observe(
            lambda c: self._changed({"type": "filter", "status": c["new"]}), "value"
        )
        self.trial.observe(
            lambda c: self._changed({"type": "select", "trial_id": c["new"]}), "value"
        )
        self.previous.on_click(lambda _: self._changed({"type": "page", "step": -1}))
        self.next.on_click(lambda _: self._changed({"type": "page", "step": 1}))
        for action, button in self.buttons.items():
            button.on_click(lambda _, action=action: self._act(action))
        self.widget = widgets.VBox(
            [
                widgets.HBox([self.sort, self.descending, self.status, self.previous, self.next]),
                self.body,
                widgets.HBox([self.trial, *self.buttons.values()]),
            ]
        )

    def clickable(self) -> list[widgets.Widget]:
        return [
            self.sort,
            self.descending,
            self.status,
            self.previous,
            self.next,
            self.trial,
            *self.buttons.values(),
        ]

    def _changed(self, message: Mapping[str, Any]) -> None:
        if not self._drawing:
            self._send(message)

    def _act(self, action: str) -> None:
        if self.trial.value is not None:
            self._send({"type": "action", "action": action, "trial_id": self.trial.value})

    def draw(self, state: Mapping[str, Any], view: TableView, selected: int | None) -> None:
        self._drawing = True
        try:
            keys = [(column["label"], column["key"]) for column in state["columns"]]
            if list(self.sort.options) != keys:
                self.sort.options = keys
            self.sort.value = view.sort if any(k == view.sort for _, k in keys) else "id"
            self.descending.value = view.descending
            self.status.value = view.status
            ids = [row["id"] for row in state["rows"]]
            self.trial.options = [(f"trial {i}", i) for i in ids]
            self.trial.value = selected if selected in ids else None
            row = next((r for r in state["rows"] if r["id"] == self.trial.value), None)
            for action, button in self.buttons.items():
                button.disabled = row is None or action not in row["actions"]
            self.body.value = static_table_html(state)
        finally:
            self._drawing = False


def static_table_html(state: Mapping[str, Any]) -> str:
    """A page of the table as plain HTML (also what the run's summary shows)."""
    head = "".join(
        f"<th style='padding:2px 8px;text-align:left'>{html.escape(c['label'])}</th>"
        for c in state["columns"]
    )
    lines = []
    for row in state["rows"]:
        cells = []
        for column in state["columns"]:
            text = html.escape(row["cells"].get(column["key"], ""))
            if column["key"] == "status":
                text = badge(row["status"]) + _note_html(row.get("note", ""))
            align = "right" if column["numeric"] else "left"
            cells.append(f'<td style="text-align:{align};padding:1px 8px">{text}</td>')
        missed = row.get("infeasible", "")
        title = html.escape(f"infeasible: {missed}\n{row['config']}" if missed else row["config"])
        faded = ' style="opacity:.55"' if missed else ""
        lines.append(f'<tr title="{title}"{faded}>{"".join(cells)}</tr>')
    if not state["rows"] and state.get("empty"):
        lines.append(
            f'<tr><td colspan="{len(state["columns"])}" style="padding:6px 8px;opacity:.7">'
            f"<i>{html.escape(state['empty'])}</i></td></tr>"
        )
    return (
        '<table class="nbtune-static-table" style="border-collapse:collapse;white-space:nowrap">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"
        f"<div style='font-size:11px;opacity:.7'>{html.escape(state['footer'])}</div>"
    )


def _note_html(note: str) -> str:
    return f" <span style='font-size:11px;opacity:.75'>{html.escape(note)}</span>" if note else ""


FRAME_ROWS = 60
"""Lines of the dataframe tab: the first this many trials (the DataFrame has them all)."""
FRAME_STYLE = (
    "<style>"
    ".nbtune-frame{border-collapse:collapse;white-space:nowrap;font-size:12px;"
    "font-family:var(--jp-ui-font-family,sans-serif);color:var(--jp-ui-font-color1,inherit)}"
    ".nbtune-frame th{text-align:left;font-weight:600;padding:2px 8px;position:sticky;top:0;"
    "background:var(--jp-layout-color1,transparent);"
    "border-bottom:1px solid var(--jp-border-color1,rgba(128,128,128,.5))}"
    ".nbtune-frame td{padding:1px 8px;"
    "border-bottom:1px solid var(--jp-border-color3,rgba(128,128,128,.2))}"
    ".nbtune-frame .nbtune-number{text-align:right;font-variant-numeric:tabular-nums}"
    ".nbtune-frame tbody tr:hover td{background:var(--jp-layout-color2,rgba(128,128,128,.12))}"
    ".nbtune-frame-note{font-size:11px;opacity:.7;margin-top:2px}"
    "</style>"
)
"""The dataframe tab's look: the table's own (fonts, light rules), in the notebook's theme
colours (JupyterLab's CSS variables, which follow a dark theme), greys that read on either
where those are missing."""


def frame_html(frame: Any, max_rows: int = FRAME_ROWS) -> str:
    """A DataFrame (`Tuner.dataframe()`) as the dataframe tab shows it: a missing value blank
    (None, NaN and pandas' <NA> alike), values by `format_value` (four significant digits),
    numbers right-aligned, text cut to a cell's width (`CONFIG_WIDTH`), light
    rules, the notebook's fonts and theme; its first `max_rows` lines, and how many more there
    are."""
    numeric = [_numeric_dtype(dtype) for dtype in frame.dtypes]
    right = ' class="nbtune-number"'
    head = "".join(
        f"<th{right if number else ''}>{html.escape(str(name))}</th>"
        for name, number in zip(frame.columns, numeric, strict=True)
    )
    lines = []
    for values in frame.head(max_rows).itertuples(index=False, name=None):
        cells = []
        for value, number in zip(values, numeric, strict=True):
            text = html.escape(_frame_cell(value))
            cells.append(f"<td{right if number else ''}>{text}</td>")
        lines.append(f"<tr>{''.join(cells)}</tr>")
    more = len(frame) - max_rows
    note = (
        f"<div class='nbtune-frame-note'>the first {max_rows} of {len(frame)} trials; "
        "tuner.dataframe() has them all</div>"
        if more > 0
        else ""
    )
    return (
        f"{FRAME_STYLE}<table class='nbtune-frame'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(lines)}</tbody></table>{note}"
    )


def _numeric_dtype(dtype: Any) -> bool:
    """Whether a column holds numbers (not booleans): its cells are right-aligned."""
    return getattr(dtype, "kind", "") in "iuf"


def _frame_cell(value: Any) -> str:
    """A cell of the dataframe tab, cut to a cell's width (the trial tab shows a value whole):
    blank if missing."""
    return "" if _missing_scalar(value) else clipped(format_value(value), CONFIG_WIDTH)


def _missing_scalar(value: Any) -> bool:
    """None, NaN, pandas' NA or NaT; never a list or an array of them."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return False
