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

import importlib
import multiprocessing

from nbtune import front_end

# imported now, not on first use: importing the module `nbtune.timeline` (the dashboard does)
# would make it `nbtune.timeline`, hiding the function
from nbtune.timeline import timeline as timeline

__version__ = "0.1.0"

_PUBLIC = {
    "nbtune.analysis": ["ExperimentAnalysis", "load"],
    "nbtune.artifacts": ["Artifacts"],
    "nbtune.campaign": ["runs"],
    "nbtune.checkpoint": ["Checkpoint"],
    "nbtune.errors": ["IllegalTransitionError", "RunEndedError", "TrialNotFoundError"],
    "nbtune.events": ["EventBus"],
    "nbtune.executors": ["Executor", "LokyExecutor", "ThreadExecutor"],
    "nbtune.executors.dask": ["DaskExecutor"],
    "nbtune.parameters": ["with_parameters"],
    "nbtune.schedulers": [
        "ASHA",
        "PBT",
        "Decision",
        "FIFOScheduler",
        "HyperBand",
        "MedianStopping",
        "Scheduler",
    ],
    "nbtune.search": [
        "ConcurrencyLimiter",
        "OptunaSearch",
        "RandomSearch",
        "Repeater",
        "Searcher",
    ],
    "nbtune.session": ["get_checkpoint", "get_trial_dir", "get_trial_id", "report"],
    "nbtune.space": [
        "choice",
        "grid",
        "lograndint",
        "loguniform",
        "qlograndint",
        "qloguniform",
        "qrandint",
        "qrandn",
        "quniform",
        "randint",
        "randn",
        "sample_from",
        "uniform",
    ],
    "nbtune.trainable": ["Trainable"],
    "nbtune.trial": ["Trial", "TrialStatus"],
    "nbtune.tuner": ["Tuner"],
    # the front end (plotly, ipywidgets; Optuna for its charts)
    "nbtune.ui": [
        "plot_best_so_far",
        "plot_history",
        "plot_param_importance",
        "plot_param_scatter",
        "plot_parallel_coordinates",
        "plot_pareto_front",
    ],
    "nbtune.ui.optuna_charts": [
        "plot_contour",
        "plot_edf",
        "plot_hypervolume_history",
        "plot_rank",
    ],
    "nbtune.ui.compare": ["compare"],
    "nbtune.ui.browse": ["browse"],
    "nbtune.ui.timeline": ["plot_timeline"],
}
"""Where each public name lives. Each is imported on first use, so that a worker process,
which imports nbtune to run its trials, loads only what a worker needs (`nbtune.session`, the
executors' worker side), not the Tuner, the searchers or the analysis: a worker starts on
0.13 s of CPU instead of 0.21 (see `_import_the_drivers_side`)."""

_HOME = {name: module for module, names in _PUBLIC.items() for name in names}


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'nbtune' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def _import_the_drivers_side() -> None:
    """In the process that builds Tuners, import what `Tuner(...)` needs with nbtune, as a
    notebook's first cell does: a Tuner built later, in the cell that starts its run, starts
    its workers 0.15 s sooner. A process that multiprocessing or loky started (nbtune's
    workers, a Dask worker) leaves it for the first use: it runs trials."""
    if multiprocessing.current_process().name == "MainProcess":
        importlib.import_module("nbtune.tuner")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})


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
_import_the_drivers_side()


def load_ipython_extension(ipython) -> None:
    """`%load_ext nbtune` registers the `%tune` magic; IPython is imported only then."""
    from nbtune.magic import load_ipython_extension as load

    load(ipython)


__all__ = sorted({*_HOME, "__version__", "timeline"} - {"DaskExecutor"})
"""What `from nbtune import *` takes: every public name but `DaskExecutor`, which needs
`nbtune[dask]`."""
