"""plotly's import without nbformat: seconds less for the dashboard's first chart.

plotly's renderers (`plotly.io._renderers`, which `FigureWidget` imports) import nbformat at
import time, only to check its version when a figure is shown through a mime renderer
(`fig.show()` in a notebook). nbformat imports jsonschema, whose format checkers import
`rfc3987_syntax` where `jsonschema[format-nongpl]` is installed (Jupyter's server installs it):
that builds an Earley parser at import, 1 to 2 s of CPU. Here the renderers are imported with
nbformat left for that first `show()`, so that importing plotly on the dashboard's thread does
not take the CPU from a run's first workers as they start, nor delay the first chart.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

_DEFERRED = "nbformat"


class _OnFirstUse:
    """Stands for a module that is imported when one of its attributes is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        module: ModuleType = importlib.import_module(self._name)
        return getattr(module, attribute)


def import_renderers() -> None:
    """Import plotly's renderers, their nbformat imported only when a figure is first shown.

    Nothing changes where plotly's renderers or nbformat are imported already, or where this
    plotly has no `_plotly_utils.optional_imports._not_importable` (then plotly imports as
    usual); without nbformat installed, `show()` says so as plotly's own import would."""
    if "plotly.io._renderers" in sys.modules or _DEFERRED in sys.modules:
        return
    try:
        from _plotly_utils import optional_imports

        skipped = optional_imports._not_importable
    except (ImportError, AttributeError):
        return
    if _DEFERRED in skipped:
        return
    skipped.add(_DEFERRED)
    try:
        import plotly.io._renderers as renderers
    finally:
        skipped.discard(_DEFERRED)
    if getattr(renderers, _DEFERRED, "absent") is None and importlib.util.find_spec(_DEFERRED):
        setattr(renderers, _DEFERRED, _OnFirstUse(_DEFERRED))
