"""The trial tab's artifacts: what a trial wrote into its folder (`nbtune.get_trial_dir()`),
shown under its curves.

Images (PNG, JPEG, SVG) are drawn, plotly figures saved as JSON (`fig.write_json(...)`) too,
as plotly's own output (no FigureWidget: each would ship its 5 MB bundle), and CSV tables as
tables of their first `CSV_ROWS` rows; any other file is listed by name. A file over its kind's
limit is listed with one line saying so, and past `SHOWN_MAX` files the rest are only listed.

Reading the folder costs disk reads and the browser a few messages per image, so the view is
built again only when it may have changed: another trial shown, the tab opened again, or the
trial's checkpoint or status changed (a checkpoint, a pause, its end); not on every result.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from nbtune.artifacts import listing
from nbtune.storage import artifact_dir
from nbtune.trial import Trial

IMAGE_MAX_BYTES = 5_000_000
"""Largest image (PNG, JPEG, SVG) drawn; a larger one is listed."""
FIGURE_MAX_BYTES = 5_000_000
"""Largest plotly figure (JSON) drawn."""
FIGURE_HEIGHT = 360
"""Pixels high a figure without a height of its own is drawn (the front end would give it
none: its output area has no height to fill)."""
CSV_MAX_BYTES = 1_000_000
"""Largest CSV file read as a table."""
CSV_ROWS = 200
"""Rows of a CSV table shown (its first ones)."""
SHOWN_MAX = 20
"""Files drawn at most; the others are listed by name."""
LISTED_MAX = 50
"""Names of other files listed at most."""

_IMAGES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg"}


def artifact_kind(name: str) -> str | None:
    """How the trial tab shows a file: "image", "svg", "figure" (JSON, if it is a plotly
    figure), "table" (CSV), or None (listed by name)."""
    suffix = Path(name).suffix.lower()
    if suffix in _IMAGES:
        return "image"
    return {".svg": "svg", ".json": "figure", ".csv": "table"}.get(suffix)


def artifact_widget(path: Path, kind: str) -> widgets.Widget | None:
    """The widget that shows the file at `path` as `kind`; a line saying why not for a file
    over its kind's limit; None for a JSON file that is not a plotly figure."""
    size = path.stat().st_size
    limit = _LIMITS[kind]
    if size > limit:
        return widgets.HTML(
            f"<i>{html.escape(path.name)}: {_megabytes(size)}, too large to show here "
            f"(over {_megabytes(limit)})</i>"
        )
    return _DRAW[kind](path)


def _image(path: Path) -> widgets.Widget:
    return widgets.Image(
        value=path.read_bytes(),
        format=_IMAGES[path.suffix.lower()],
        layout=widgets.Layout(max_width="100%", align_self="flex-start"),
    )


def _svg(path: Path) -> widgets.Widget:
    """An SVG as an <img> of a data URL: the browser draws it without running its scripts."""
    data = base64.b64encode(path.read_bytes()).decode()
    return widgets.HTML(f"<img style='max-width:100%' src='data:image/svg+xml;base64,{data}'>")


def _figure(path: Path) -> widgets.Widget | None:
    import plotly.io

    text = path.read_text(errors="replace")
    try:
        spec = json.loads(text)
    except ValueError:
        return None
    if not (isinstance(spec, dict) and ("data" in spec or "layout" in spec)):
        return None
    figure = plotly.io.from_json(text, skip_invalid=True)
    shown = json.loads(plotly.io.to_json(figure, validate=False))
    shown.setdefault("layout", {}).setdefault("height", FIGURE_HEIGHT)
    output = widgets.Output(layout=widgets.Layout(width="100%"))
    bundle = {
        "application/vnd.plotly.v1+json": shown,
        "text/plain": f"plotly figure {path.name}",
    }
    output.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)
    return output


def _table(path: Path) -> widgets.Widget:
    import pandas as pd

    frame = pd.read_csv(path, nrows=CSV_ROWS + 1)
    note = ""
    if len(frame) > CSV_ROWS:
        frame = frame.head(CSV_ROWS)
        note = f"<i>its first {CSV_ROWS} rows</i>"
    table = frame.to_html(index=False, escape=True, border=0, classes="nbtune-artifact-table")
    return widgets.HTML(f"{note}<div style='max-height:320px;overflow:auto'>{table}</div>")


_DRAW: dict[str, Callable[[Path], widgets.Widget | None]] = {
    "image": _image,
    "svg": _svg,
    "figure": _figure,
    "table": _table,
}
_LIMITS = {
    "image": IMAGE_MAX_BYTES,
    "svg": IMAGE_MAX_BYTES,
    "figure": FIGURE_MAX_BYTES,
    "table": CSV_MAX_BYTES,
}


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


class ArtifactsView:
    """The artifacts part of the trial tab (see the module's docstring for when it redraws)."""

    def __init__(self) -> None:
        self.widget = widgets.VBox()
        self._key: tuple[Any, ...] | None = None
        self._files: tuple[Any, ...] | None = None

    def forget(self) -> None:
        """Read the folder again at the next draw (the tab was opened again)."""
        self._key = None

    def draw(self, experiment: Path, trial: Trial | None) -> None:
        """Show `trial`'s artifacts, reading its folder only if it may have changed."""
        key = None if trial is None else (trial.trial_id, trial.status, trial.checkpoint)
        if key == self._key:
            return
        self._key = key
        if trial is None:
            self._files = None
            self.widget.children = []
            return
        folder = artifact_dir(experiment, trial.trial_id)
        names = list(listing(folder))
        files = (folder, *((name, *_stamp(folder / name)) for name in names))
        if files == self._files:
            return
        self._files = files
        self.widget.children = _parts(folder, names)


def _stamp(path: Path) -> tuple[int, int]:
    """What tells a changed file: its size and time of change (0s for one gone meanwhile)."""
    try:
        info = path.stat()
    except OSError:
        return 0, 0
    return info.st_size, info.st_mtime_ns


def _parts(folder: Path, names: list[str]) -> list[widgets.Widget]:
    """The title, a titled widget per file shown, and a line listing the other files."""
    if not names:
        return []
    parts: list[widgets.Widget] = [widgets.HTML(f"<b>artifacts</b> in {html.escape(str(folder))}")]
    others = []
    for name in names:
        kind = artifact_kind(name)
        shown = None
        if kind is not None and len(parts) <= SHOWN_MAX:
            shown = _shown(folder / name, kind)
        if shown is None:
            others.append(name)
        else:
            parts.append(widgets.VBox([widgets.HTML(f"<i>{html.escape(name)}</i>"), shown]))
    if others:
        listed = ", ".join(html.escape(name) for name in others[:LISTED_MAX])
        more = f" and {len(others) - LISTED_MAX} more" if len(others) > LISTED_MAX else ""
        parts.append(widgets.HTML(f"<i>other files:</i> {listed}{more}"))
    return parts


def _shown(path: Path, kind: str) -> widgets.Widget | None:
    """The file's widget, or a line saying it could not be read (one that is being written, a
    CSV that is not one)."""
    try:
        return artifact_widget(path, kind)
    except FileNotFoundError:
        return None
    except Exception as exc:
        summary = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return widgets.HTML(
            f"<i>{html.escape(path.name)} could not be shown: {html.escape(summary)}</i>"
        )
