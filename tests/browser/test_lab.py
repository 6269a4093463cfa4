"""Smoke test of the browser fixtures: widgets render in JupyterLab, a click reaches the kernel."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

pytestmark = pytest.mark.browser

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
POINTS = 10


def write_notebook(path: Path, *sources: str) -> Path:
    """Write a notebook of code cells that asks for the `python3` kernel (no kernel dialog)."""
    notebook = new_notebook(
        cells=[new_code_cell(source) for source in sources],
        metadata={"kernelspec": KERNELSPEC},
    )
    nbformat.write(notebook, path)
    return path


def wait_for_file(path: Path, timeout: float) -> str:
    """Poll until `path` exists; return its text."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} not written within {timeout} s"
        time.sleep(0.05)
    return path.read_text()


def test_widgets_render_and_a_click_reaches_the_kernel(lab_dir, open_notebook):
    from playwright.sync_api import expect

    marker = lab_dir / "clicked.txt"
    notebook_path = write_notebook(
        lab_dir / "smoke.ipynb",
        "import os, sys\n"
        "import ipywidgets as widgets\n"
        "import plotly.graph_objects as go\n"
        "from IPython.display import display",
        "status = widgets.HTML('not clicked')\n"
        "button = widgets.Button(description='Click me')\n"
        "def on_click(_):\n"
        f"    target = {str(marker)!r}\n"
        "    with open(target + '.part', 'w') as f:\n"
        "        f.write(sys.executable)\n"
        "    os.replace(target + '.part', target)  # the test never sees half a file\n"
        "    status.value = 'clicked!'\n"
        "button.on_click(on_click)\n"
        "display(widgets.HBox([button, status]))",
        f"figure = go.FigureWidget(go.Scatter(x=list(range({POINTS})), "
        f"y=[i * i for i in range({POINTS})]))\n"
        "figure",
    )
    t0 = time.monotonic()
    timings = {}

    nb = open_notebook(notebook_path)
    nb.wait_for_idle_kernel()
    timings["kernel idle"] = time.monotonic() - t0
    nb.run_all()
    nb.wait_until_all_ran()
    timings["all cells ran"] = time.monotonic() - t0

    button = nb.output("button.jupyter-button").filter(has_text="Click me")
    expect(button).to_be_visible()
    plot = nb.output(".js-plotly-plot")
    expect(plot).to_be_visible()
    assert plot.evaluate("g => g.data[0].x.length") == POINTS
    assert nb.widget_placeholders() == 0
    timings["widgets rendered"] = time.monotonic() - t0

    assert not marker.exists()
    clicked_at = time.monotonic()
    button.click()
    kernel_python = wait_for_file(marker, timeout=30)
    timings["click handled (s after click)"] = time.monotonic() - clicked_at
    assert Path(kernel_python).resolve() == Path(sys.executable).resolve(), (
        "the notebook ran on another interpreter than the test environment's"
    )
    expect(nb.output(".widget-html")).to_contain_text("clicked!")

    shot = nb.screenshot("rendered", scroll_to=button)
    assert shot.stat().st_size > 0
    assert nb.console_errors() == []
    print(f"screenshot: {shot}")
    print(", ".join(f"{what} {seconds:.2f} s" for what, seconds in timings.items()))
