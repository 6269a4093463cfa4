"""The notebook front end: the live dashboard and the plots. Imports ipywidgets and plotly.

The plots are imported on first use, so that showing a dashboard does not wait for plotly:
its charts are made on the dashboard's own thread.
"""

from __future__ import annotations

from typing import Any

_PLOTS = {
    "plot_best_so_far": "nbtune.ui.figures",
    "plot_history": "nbtune.ui.figures",
    "plot_parallel_coordinates": "nbtune.ui.figures",
    "plot_param_importance": "nbtune.ui.figures",
    "plot_param_scatter": "nbtune.ui.figures",
    "plot_pareto_front": "nbtune.ui.pareto",
}

__all__ = sorted(_PLOTS)


def __getattr__(name: str) -> Any:
    if name not in _PLOTS:
        raise AttributeError(f"module 'nbtune.ui' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_PLOTS[name]), name)
