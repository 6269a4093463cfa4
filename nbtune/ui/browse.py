"""`nbtune.browse(storage_path)`: the runs of a folder as a table in a notebook.

    nbtune.runs(storage_path) --> the table (HTML) and a picker of the runs
    pick one, "Open"     --> nbtune.load(path).dashboard(), read-only, below the table
    pick two+, "Compare" --> nbtune.compare(*paths), below the table
    "Refresh"            --> the table read again (a run that went on, a new one)

Everything happens in button callbacks on the kernel's main thread: nothing runs in the
background, and what is shown below the table is replaced by setting a box's children.
"""

from __future__ import annotations

import html
import os
from typing import Any

import ipywidgets as widgets

from nbtune.analysis import load
from nbtune.campaign import COUNT_COLUMNS, runs
from nbtune.front_end import Dashboard
from nbtune.metrics import format_number
from nbtune.ui.data import clipped, config_text
from nbtune.ui.table import CONFIG_WIDTH

SHOWN = (
    "name",
    "state",
    "started",
    "duration_s",
    "trials",
    *COUNT_COLUMNS,
    "metric",
    "best",
    "best_config",
    "code_version",
)
"""The columns of `nbtune.runs()` the table shows (the frame has them all)."""


class RunBrowser:
    """The runs under `storage_path`, with a picker to open one or compare several.

    Attributes:
        frame: the `nbtune.runs()` frame shown.
        picker: the runs to act on (their paths), several with Shift or Ctrl.
        detail: the box that holds the opened dashboard or the comparison.
        widget: the whole view.
    """

    def __init__(self, storage_path: str | os.PathLike = "nbtune-runs") -> None:
        self.storage_path = storage_path
        self.frame = runs(storage_path)
        self.table = widgets.HTML()
        self.picker = widgets.SelectMultiple(description="runs", rows=8)
        self.open_button = widgets.Button(description="Open", icon="folder-open")
        self.compare_button = widgets.Button(description="Compare", icon="line-chart")
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh")
        self.message = widgets.HTML()
        self.detail = widgets.VBox()
        self._dashboard: Dashboard | None = None
        self.open_button.on_click(lambda _: self.open())
        self.compare_button.on_click(lambda _: self.compare())
        self.refresh_button.on_click(lambda _: self.refresh())
        self.picker.observe(lambda _: self._enable(), names="value")
        buttons = widgets.VBox([self.open_button, self.compare_button, self.refresh_button])
        self.widget = widgets.VBox(
            [self.table, widgets.HBox([self.picker, buttons]), self.message, self.detail]
        )
        self.widget.add_class("nbtune-browser")
        self._draw()

    @property
    def selected(self) -> tuple[str, ...]:
        """The paths of the runs picked."""
        return tuple(self.picker.value)

    def select(self, *names: str) -> None:
        """Pick the runs named `names` (as the picker would)."""
        paths = dict(zip(self.frame["name"], self.frame["path"], strict=True))
        unknown = [name for name in names if name not in paths]
        if unknown:
            raise ValueError(f"no run named {unknown[0]!r} here; the runs are {list(paths)}")
        self.picker.value = tuple(paths[name] for name in names)

    def open(self) -> Dashboard | None:
        """Show the read-only dashboard of the one run picked below the table; return it."""
        if len(self.selected) != 1:
            self._say("pick one run to open it (two or more to compare them)")
            return None
        try:
            dashboard = load(self.selected[0]).dashboard()
        except Exception as exc:
            self._say(_one_line(exc))
            return None
        self._show(dashboard.widget, dashboard)
        return dashboard

    def compare(self) -> Any:
        """Show the best-so-far curves of the runs picked (two or more); return the figure."""
        if len(self.selected) < 2:
            self._say("pick two runs or more to compare them (one to open it)")
            return None
        import plotly.graph_objects as go

        from nbtune.ui.compare import compare

        try:
            figure = compare(*self.selected)
        except Exception as exc:
            self._say(_one_line(exc))
            return None
        widget = go.FigureWidget(figure)
        self._show(widget, None)
        return widget

    def refresh(self) -> None:
        """Read the runs again; the runs picked stay picked if they are still there."""
        picked = self.selected
        self.frame = runs(self.storage_path)
        self._draw()
        self.picker.value = tuple(path for path in picked if path in set(self.frame["path"]))

    def _draw(self) -> None:
        self.table.value = runs_html(self.frame, self.storage_path)
        self.picker.options = [(_label(row), row["path"]) for _, row in self.frame.iterrows()]
        self._enable()

    def _enable(self) -> None:
        self.open_button.disabled = len(self.selected) != 1
        self.compare_button.disabled = len(self.selected) < 2

    def _show(self, widget: widgets.Widget, dashboard: Dashboard | None) -> None:
        if self._dashboard is not None:
            self._dashboard.close()
        self._dashboard = dashboard
        self.detail.children = (widget,)
        self._say("")

    def _say(self, text: str) -> None:
        self.message.value = f"<span>{html.escape(text)}</span>" if text else ""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"nbtune runs under {str(self.storage_path)!r} ({len(self.frame)})"
        return bundle


def runs_html(frame: Any, storage_path: str | os.PathLike) -> str:
    """The runs as an HTML table (text escaped and cut to a cell's width)."""
    if frame.empty:
        return f"<p>No runs under {html.escape(str(storage_path))} yet.</p>"
    shown = frame[list(SHOWN)].copy()
    shown["started"] = shown["started"].dt.strftime("%Y-%m-%d %H:%M:%S")
    formatters = {
        "duration_s": _number,
        "best": _number,
        "best_config": lambda value: clipped(_config(value), CONFIG_WIDTH),
        "name": lambda value: clipped(str(value), CONFIG_WIDTH),
    }
    return shown.to_html(index=False, na_rep="", formatters=formatters, escape=True, border=0)


def browse(storage_path: str | os.PathLike = "nbtune-runs") -> RunBrowser:
    """The runs under `storage_path` as a table in a notebook: pick one and Open shows its
    read-only dashboard (`nbtune.load(path).dashboard()`); pick two or more and Compare
    shows their best-so-far curves (`nbtune.compare`).

    Raises:
        NotADirectoryError: `storage_path` is a file, in one line.
    """
    return RunBrowser(storage_path)


def _label(row: Any) -> str:
    best = row["best"]
    best_text = "" if best != best else f", best {format_number(float(best))}"
    return clipped(f"{row['name']} ({row['state']}{best_text})", 80)


def _number(value: Any) -> str:
    return "" if value is None or value != value else format_number(float(value))


def _config(value: Any) -> str:
    return config_text(value) if isinstance(value, dict) else ""


def _one_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
