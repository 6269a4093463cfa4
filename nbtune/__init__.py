"""nbtune: hyperparameter tuning you can watch and steer from a Jupyter notebook.

import nbtune as nt

def train(config):
    for epoch in range(20):
        nt.report(loss=(config["lr"] - 0.01) ** 2 + 1 / (epoch + 1))

tuner = nt.Tuner(train, space={"lr": nt.loguniform(1e-4, 1e-1)}, metric="loss",
                 num_samples=10)
tuner.run()
tuner.dataframe()
"""

from nbtune import front_end
from nbtune.analysis import ExperimentAnalysis, load
from nbtune.campaign import runs
from nbtune.checkpoint import Checkpoint
from nbtune.errors import IllegalTransitionError, RunEndedError, TrialNotFoundError
from nbtune.events import EventBus
from nbtune.executors import Executor, LokyExecutor, ThreadExecutor
from nbtune.parameters import with_parameters
from nbtune.schedulers import (
    ASHA,
    PBT,
    Decision,
    FIFOScheduler,
    HyperBand,
    MedianStopping,
    Scheduler,
)
from nbtune.search import ConcurrencyLimiter, OptunaSearch, RandomSearch, Repeater, Searcher
from nbtune.session import get_checkpoint, get_trial_id, report
from nbtune.space import (
    choice,
    grid,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)
from nbtune.timeline import timeline
from nbtune.trainable import Trainable
from nbtune.trial import Trial, TrialStatus
from nbtune.tuner import Tuner

__version__ = "0.1.0"

_FRONT_END = {
    "plot_best_so_far",
    "plot_history",
    "plot_param_importance",
    "plot_param_scatter",
    "plot_parallel_coordinates",
    "plot_pareto_front",
}

_OPTUNA_CHARTS = {"plot_contour", "plot_edf", "plot_hypervolume_history", "plot_rank"}
"""Optuna's charts of a run (`nbtune.ui.optuna_charts`), drawn through `to_optuna_study()`."""


def _notebook_dashboard() -> front_end.DashboardFactory:
    """The ipywidgets dashboard: the front end that `Tuner.start()` shows in a notebook and
    `.dashboard()` returns, imported when the first dashboard is made, not by `import nbtune`."""
    from nbtune.ui.dashboard import Dashboard

    return Dashboard


def _notebook_preload() -> None:
    """What the dashboard imports on its own thread: plotly's FigureWidget, seconds."""
    from nbtune.ui.dashboard import import_plotly

    import_plotly()


front_end.register(_notebook_dashboard, _notebook_preload)


def load_ipython_extension(ipython) -> None:
    """`%load_ext nbtune` registers the `%tune` magic; IPython is imported only then."""
    from nbtune.magic import load_ipython_extension as load

    load(ipython)


def __getattr__(name: str):
    """The front end (plotly, ipywidgets; Optuna for its charts) and Dask load on first use,
    so `import nbtune` stays light."""
    if name in _FRONT_END:
        import nbtune.ui

        return getattr(nbtune.ui, name)
    if name in _OPTUNA_CHARTS:
        from nbtune.ui import optuna_charts

        return getattr(optuna_charts, name)
    if name == "compare":
        from nbtune.ui.compare import compare

        return compare
    if name == "browse":
        from nbtune.ui.browse import browse

        return browse
    if name == "plot_timeline":
        from nbtune.ui.timeline import plot_timeline

        return plot_timeline
    if name == "DaskExecutor":
        from nbtune.executors.dask import DaskExecutor

        return DaskExecutor
    raise AttributeError(f"module 'nbtune' has no attribute {name!r}")


__all__ = [
    "ASHA",
    "PBT",
    "Checkpoint",
    "ConcurrencyLimiter",
    "Decision",
    "EventBus",
    "Executor",
    "ExperimentAnalysis",
    "FIFOScheduler",
    "HyperBand",
    "IllegalTransitionError",
    "LokyExecutor",
    "MedianStopping",
    "OptunaSearch",
    "RandomSearch",
    "Repeater",
    "RunEndedError",
    "Scheduler",
    "Searcher",
    "ThreadExecutor",
    "Trainable",
    "Trial",
    "TrialNotFoundError",
    "TrialStatus",
    "Tuner",
    "__version__",
    "browse",
    "choice",
    "compare",
    "get_checkpoint",
    "get_trial_id",
    "grid",
    "load",
    "lograndint",
    "loguniform",
    "plot_best_so_far",
    "plot_contour",
    "plot_edf",
    "plot_history",
    "plot_hypervolume_history",
    "plot_parallel_coordinates",
    "plot_param_importance",
    "plot_param_scatter",
    "plot_pareto_front",
    "plot_rank",
    "plot_timeline",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "report",
    "runs",
    "sample_from",
    "timeline",
    "uniform",
    "with_parameters",
]
