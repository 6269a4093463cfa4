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

import ast
import importlib
import multiprocessing
from pathlib import Path
from typing import TYPE_CHECKING

from nbtune import front_end

# imported now, not on first use: importing the module `nbtune.timeline` (the dashboard does)
# would make it `nbtune.timeline`, hiding the function
from nbtune.timeline import timeline as timeline

__version__ = "0.1.0"

if TYPE_CHECKING:  # the public names, each imported on first use (see `_public_names`)
    from nbtune.analysis import ExperimentAnalysis, load
    from nbtune.artifacts import Artifacts
    from nbtune.campaign import runs
    from nbtune.checkpoint import Checkpoint
    from nbtune.errors import IllegalTransitionError, RunEndedError, TrialNotFoundError
    from nbtune.events import EventBus
    from nbtune.executors import Executor, LokyExecutor, ThreadExecutor
    from nbtune.executors.dask import DaskExecutor
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
    from nbtune.session import get_checkpoint, get_trial_dir, get_trial_id, report
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
    from nbtune.trainable import Trainable
    from nbtune.trial import Trial, TrialStatus
    from nbtune.tuner import Tuner
    from nbtune.ui import (  # the front end (plotly, ipywidgets)
        plot_best_so_far,
        plot_history,
        plot_parallel_coordinates,
        plot_param_importance,
        plot_param_scatter,
        plot_pareto_front,
    )
    from nbtune.ui.browse import browse
    from nbtune.ui.compare import compare
    from nbtune.ui.optuna_charts import plot_contour, plot_edf, plot_hypervolume_history, plot_rank
    from nbtune.ui.timeline import plot_timeline


def _public_names() -> dict[str, str]:
    """Each public name and the module it lives in, read from the imports above, which type
    checkers and editors see. Each is imported on first use, so that a worker process, which
    imports nbtune to run its trials, loads only what a worker needs (`nbtune.session`, the
    executors' worker side), not the Tuner, the searchers or the analysis: a worker starts on
    0.13 s of CPU instead of 0.21 (see `_import_the_drivers_side`)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    imports = next(node for node in tree.body if isinstance(node, ast.If)).body
    return {alias.name: node.module for node in imports for alias in node.names}


_HOME = _public_names()


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
