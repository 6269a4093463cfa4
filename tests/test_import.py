import subprocess
import sys

import pytest


def heavy_modules_after(code: str) -> str:
    """Run `code` in a fresh interpreter; the heavy libraries it imported, comma-separated."""
    code += (
        "\nimport sys\n"
        "heavy = [m for m in ('ipywidgets', 'plotly', 'IPython', 'optuna', 'distributed', "
        "'sklearn') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize(
    "code",
    [
        "import nbtune",
        "import nbtune.registry, nbtune.search.optuna; nbtune.registry.names('searcher')",
    ],
    ids=["nbtune", "optuna-search-module"],
)
def test_importing_nbtune_leaves_the_ui_libraries_optuna_and_sklearn_alone(code):
    assert heavy_modules_after(code) == ""


def test_optuna_loads_when_an_optuna_search_is_made():
    pytest.importorskip("optuna")
    assert heavy_modules_after("import nbtune; nbtune.OptunaSearch()") == "optuna"


def test_dask_executor_loads_on_first_use_and_says_how_to_install_it():
    code = (
        "import sys, nbtune\n"
        "nbtune.DaskExecutor\n"
        "print('distributed' in sys.modules)\n"
        "sys.modules['distributed'] = None\n"
        "del sys.modules['nbtune.executors.dask'], nbtune.DaskExecutor\n"
        "try:\n"
        "    nbtune.DaskExecutor\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "True",
        "nbtune.DaskExecutor needs Dask's 'distributed' package: pip install 'nbtune[dask]'",
    ]


def test_the_dashboards_plotly_import_leaves_nbformat_for_the_first_show():
    """The Tuner's background import of plotly skips nbformat (jsonschema's format checkers
    take seconds to import); a figure shown through a mime renderer still gets it."""
    pytest.importorskip("plotly")
    pytest.importorskip("nbformat")
    code = (
        "import sys\n"
        "from nbtune.ui.dashboard import import_plotly\n"
        "import_plotly()\n"
        "print('nbformat' in sys.modules)\n"
        "import plotly.graph_objects as go, plotly.io as pio\n"
        "pio.show(go.Figure(), renderer='plotly_mimetype')\n"
        "print('nbformat' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert [lines[0], lines[-1]] == ["False", "True"]


def test_every_public_name_is_the_object_its_module_defines():
    import importlib

    import nbtune

    names = [name for name in nbtune.__all__ if name not in ("__version__", "timeline")]
    assert {"Tuner", "report", "load", "runs", "plot_rank"} <= set(names)
    for name in names:
        module = importlib.import_module(nbtune._HOME[name])
        assert getattr(nbtune, name) is getattr(module, name), name
    assert set(names) <= set(dir(nbtune)), "a notebook completes them"
