"""The notebook front end: the live dashboard and the plots. Imports ipywidgets and plotly."""

from nbtune.ui.figures import (
    plot_best_so_far,
    plot_history,
    plot_parallel_coordinates,
    plot_param_importance,
    plot_param_scatter,
)
from nbtune.ui.pareto import plot_pareto_front

__all__ = [
    "plot_best_so_far",
    "plot_history",
    "plot_parallel_coordinates",
    "plot_param_importance",
    "plot_param_scatter",
    "plot_pareto_front",
]
