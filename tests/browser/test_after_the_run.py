"""The dashboard once its run has ended, in a real JupyterLab: every tab shows the end, the
window can grow, and the summary under it stands in for it only where its widgets are gone.

The run is short (3 trials of 60 reports, all at once, about 3 s) and the notebook waits for it
(`tuner.wait()`), as a user's notebook does: it ends before the dashboard's `RENDER_GRACE_S`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from waiting import eventually

pytestmark = pytest.mark.browser

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
REPORTS = 60
CELLS = (
    "import time\n\nimport nbtune as nt",
    "def train(config):\n"
    f"    for step in range({REPORTS}):\n"
    "        time.sleep(0.05)\n"
    "        nt.report(loss=config['x'] / (step + 1))",
    "tuner = nt.Tuner(train, {'x': nt.uniform(0, 1)}, metric='loss', num_samples=3,\n"
    "                 max_concurrent=3, seed=0, name='ended', overwrite=True)\n"
    "tuner.start()",
    "tuner.wait()",
)
TIMEOUT_MS = 60_000
CHART = """el => {
  const plotArea = el.querySelector('.draglayer .nsewdrag');
  return {traces: el.data.length, height: el.getBoundingClientRect().height,
          width: el.getBoundingClientRect().width,
          plot: plotArea ? plotArea.getBoundingClientRect().height : 0};
}"""
SHORTEST = "el => Math.min(...el.data.map(trace => (trace.x || []).length))"
INK = "el => getComputedStyle(el.querySelector('text')).fill"


def write_notebook(folder: Path) -> Path:
    path = folder / "ended.ipynb"
    notebook = new_notebook(
        cells=[new_code_cell(source) for source in CELLS], metadata={"kernelspec": KERNELSPEC}
    )
    nbformat.write(notebook, path)
    return path


def open_tab(root: Any, tab: str) -> None:
    root.locator(".lm-TabBar-tab").filter(has_text=re.compile(f"^{tab}$")).click()


def visible_chart(root: Any, script: str) -> Any:
    """`script(el)` on the chart of the tab shown, or None while it has none."""
    return root.evaluate(
        f"""root => {{
          const el = root.querySelector(
            '.widget-tab-contents > :not(.lm-mod-hidden) .js-plotly-plot');
          return el && el._fullLayout ? ({script})(el) : null;
        }}"""
    )


def grows_with_the_window(page: Any, root: Any) -> None:
    """Make the window wider and taller: the visible chart follows the width and keeps its
    height, its plot area drawn (issue 31 item 2: it collapsed to 0 px after the end)."""
    eventually(lambda: (visible_chart(root, CHART) or {}).get("plot"), "a chart drawn", 30)
    before = visible_chart(root, CHART)
    page.set_viewport_size({"width": 1100, "height": 1200})
    eventually(
        lambda: visible_chart(root, CHART)["width"] > before["width"] + 100,
        "the chart follows the wider window",
    )
    after = visible_chart(root, CHART)
    assert after["height"] == before["height"] > 100, f"nor collapses: {before} -> {after}"
    assert after["plot"] > 100, f"its plot area drawn: {before} -> {after}"


def is_light(color: str) -> bool:
    red, green, blue = (float(n) for n in re.findall(r"[\d.]+", color)[:3])
    return (0.299 * red + 0.587 * green + 0.114 * blue) / 255 > 0.5


def test_after_the_end_every_tab_shows_it_and_the_summary_hides_under_the_dashboard(
    lab_dir, open_notebook
):
    notebook = open_notebook(write_notebook(lab_dir))
    notebook.page.set_viewport_size({"width": 800, "height": 600})
    notebook.run_all_and_wait()
    root = notebook.output(".nbtune-dashboard")
    root.locator(".widget-html-content", has_text="— finished").wait_for(timeout=TIMEOUT_MS)

    eventually(lambda: visible_chart(root, SHORTEST) == REPORTS, "the open chart shows the end")
    grows_with_the_window(notebook.page, root)
    open_tab(root, "trial")
    trial = root.locator(".nbtune-trial")
    eventually(lambda: f"iteration {REPORTS}" in trial.inner_text(), "the trial tab at the end")
    assert "running" not in trial.inner_text()
    open_tab(root, "best so far")
    eventually(
        lambda: (visible_chart(root, CHART) or {}).get("plot", 0) > 100, "a tab opened after"
    )
    assert root.get_by_text("drawing…").filter(visible=True).count() == 0

    cell = notebook.page.locator(".jp-CodeCell", has=root)
    summary = cell.locator(".nbtune-summary")
    summary.wait_for(state="attached", timeout=TIMEOUT_MS)
    assert not summary.is_visible(), "no summary repeating the live dashboard above it"
    notebook.screenshot("ended", scroll_to=root)


def test_without_anywidget_a_run_that_ended_falls_back_and_its_chart_can_grow(
    lab_dir, open_notebook, lab_server_without_anywidget
):
    notebook = open_notebook(write_notebook(lab_dir), server=lab_server_without_anywidget)
    page = notebook.page
    page.set_viewport_size({"width": 800, "height": 600})
    notebook.run_all_and_wait()
    root = notebook.output(".nbtune-dashboard")
    root.locator(".widget-html-content", has_text="— finished").wait_for(timeout=TIMEOUT_MS)
    assert page.get_by_text("Click to show javascript error").filter(visible=True).count() == 0
    root.locator(".nbtune-static-table tbody tr").first.wait_for(timeout=TIMEOUT_MS)
    grows_with_the_window(page, root)
    open_tab(root, "best so far")
    eventually(lambda: (visible_chart(root, CHART) or {}).get("traces"), "a tab opened after")
    notebook.screenshot("static-ended", scroll_to=root)


def test_reopened_with_a_fresh_kernel_the_summary_stands_alone(lab_dir, open_notebook):
    path = write_notebook(lab_dir)
    notebook = open_notebook(path)
    notebook.run_all_and_wait()
    summary = notebook.output(".nbtune-summary")
    summary.wait_for(state="attached", timeout=TIMEOUT_MS)
    notebook.save()
    notebook.server.shutdown_kernels()

    reopened = open_notebook(path)
    reopened.wait_for_idle_kernel()
    summary = reopened.output(".nbtune-summary")
    summary.wait_for(timeout=TIMEOUT_MS)
    assert "best loss" in summary.inner_text()
    placeholders = reopened.page.get_by_text(re.compile("Error displaying widget|model not found"))
    eventually(lambda: placeholders.count() > 0, "the widget manager gave up on the old widget")
    assert placeholders.filter(visible=True).count() == 0, "the summary alone"
    reopened.change_theme("JupyterLab Dark")
    ink = summary.locator("svg").first.evaluate(INK)
    reopened.screenshot("reopened-dark", scroll_to=summary)
    assert is_light(ink), f"the summary's picture reads on a dark page (its text is {ink})"
