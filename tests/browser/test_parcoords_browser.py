"""The parallel coordinates in JupyterLab: drawn by the browser with the plotly.js the page
already holds (no FigureWidget of their own), a line per trial, from the first opening of their
tab during a live run; a page without plotly.js gets it from the kernel.

How soon the chart shows after the tab's click is measured by benchmarks/dashboard_browser.py.
"""

from __future__ import annotations

from functools import partial

import pytest
from waiting import eventually

pytestmark = pytest.mark.browser

TRIALS = 6
CELLS = (
    "import time\nimport nbtune as nt",
    "def train(config):\n"
    "    for step in range(1, 100_000):\n"
    "        time.sleep(0.1)\n"
    "        nt.report(loss=config['lr'] * 10 + 1 / step)",
    "tuner = nt.Tuner(\n"
    "    train,\n"
    "    space={'lr': nt.loguniform(1e-4, 1e-1), 'units': nt.randint(8, 64),\n"
    "           'optimizer': nt.choice(['sgd', 'adam'])},\n"
    f"    metric='loss', num_samples={TRIALS}, max_concurrent={TRIALS}, seed=0,\n"
    "    name='parcoords', overwrite=True,\n"
    ")\n"
    "tuner.start()",
    "tuner.wait()",
)
# The parallel coordinates where they show: their lines (one per trial) and how they are drawn.
SHOWN = """root => {
  const el = root.querySelector(
    '.widget-tab-contents > :not(.lm-mod-hidden) .js-plotly-plot');
  const trace = el && el._fullData && el._fullData[0];
  if (!trace || trace.type !== 'parcoords' || !el.querySelector('.main-svg')) return null;
  return {
    lines: trace._length,
    axes: trace.dimensions.map((d) => d.label),
    browserDrawn: el.classList.contains('nbtune-browser-chart'),
    width: el._fullLayout.width,
    room: el.parentElement.clientWidth,
  };
}"""


def test_the_parameters_tab_of_a_live_run_draws_a_line_per_trial(code_notebook, open_notebook):
    notebook = open_notebook(code_notebook("parcoords.ipynb", CELLS))
    notebook.wait_for_idle_kernel()
    notebook.run_all()
    root = notebook.output(".nbtune-dashboard").first
    running = root.locator(".nbtune-table tr[data-trial]").filter(
        has=notebook.page.locator(".nbtune-badge", has_text="running")
    )
    eventually(lambda: running.count() == TRIALS, f"{TRIALS} trials running", 60)
    root.locator(".lm-TabBar-tab").filter(has_text="parallel coordinates").click()

    shown = eventually(
        lambda: (lambda s: s and s["lines"] == TRIALS and s)(root.evaluate(SHOWN)),
        "the parallel coordinates with a line per trial",
        30,
    )
    notebook.screenshot("parcoords", scroll_to=root.locator(".nbtune-browser-chart"))
    assert shown["axes"] == ["lr (log)", "units", "optimizer", "loss"]
    assert shown["browserDrawn"], "drawn with the page's plotly.js, not a FigureWidget's own"
    assert abs(shown["width"] - shown["room"]) <= 20, f"as wide as its place: {shown}"
    assert notebook.widget_placeholders() == 0
    assert "— running" in root.locator(".widget-html-content").first.text_content()
    root.get_by_role("button", name="Stop all").click()
    notebook.wait_until_all_ran(timeout=60)


def test_a_page_without_plotly_js_gets_it_from_the_kernel(code_notebook, open_notebook):
    cells = (
        "import plotly.graph_objects as go\n"
        "from nbtune.ui.browser_chart import BrowserChart\n"
        "chart = BrowserChart()\n"
        "axes = [{'label': 'x', 'values': [1, 2, 3]}, {'label': 'y', 'values': [3, 1, 2]}]\n"
        "chart.show(go.Figure(go.Parcoords(dimensions=axes)))\n"
        "chart",
    )
    notebook = open_notebook(code_notebook("alone.ipynb", cells))
    notebook.run_all_and_wait()
    chart = notebook.output(".nbtune-browser-chart")
    chart.wait_for(timeout=30_000)
    lines = "el => el._fullData && el.querySelector('.main-svg') && el._fullData[0]._length"
    eventually(lambda: chart.evaluate(lines) == 3, "the chart drawn, a line per row", 30)
    assert notebook.page.evaluate("() => typeof window.Plotly.react") == "function"
    assert notebook.widget_placeholders() == 0


DASHBOARDS = 6
MANY = (
    "import nbtune as nt",
    "def train(config):\n"
    "    for step in range(1, 4):\n"
    "        nt.report(loss=config['lr'] * 10 + 1 / step)",
    *(
        f"tuner{n} = nt.Tuner(train, space={{'lr': nt.loguniform(1e-4, 1e-1), 'units': "
        f"nt.randint(8, 64)}}, metric='loss', num_samples=4, seed={n}, name='run{n}', "
        "overwrite=True)\n"
        f"tuner{n}.start()"
        for n in range(DASHBOARDS)
    ),
    "\n".join(f"tuner{n}.wait()" for n in range(DASHBOARDS)),
)
# Whether the shown parallel coordinates draw their lines: plotly.js draws them with WebGL in
# canvases, whose contexts the page may have taken back.
DRAWN_WITH_WEBGL = """root => {
  const el = root.querySelector(
    '.widget-tab-contents > :not(.lm-mod-hidden) .nbtune-browser-chart');
  const canvases = el ? [...el.querySelectorAll('canvas')] : [];
  const contexts = canvases.map((c) => c.getContext('webgl') || c.getContext('experimental-webgl'));
  return !!el && el.dataset.stale === 'false' && contexts.length > 0
    && contexts.every((gl) => gl && !gl.isContextLost());
}"""


def test_each_of_six_dashboards_draws_its_parallel_coordinates_when_their_tab_opens(
    code_notebook, open_notebook
):
    """Each dashboard draws its parallel coordinates ahead, with WebGL contexts of their own (3),
    of which the page keeps about 16 and takes back the least used: a chart that lost its
    contexts is drawn again when its tab opens, or when it comes back into view."""
    notebook = open_notebook(code_notebook("many.ipynb", MANY))
    notebook.wait_for_idle_kernel()
    notebook.run_all_and_wait()
    dashboards = notebook.output(".nbtune-dashboard")
    eventually(lambda: dashboards.count() == DASHBOARDS, f"{DASHBOARDS} dashboards", 60)
    charts = notebook.output(".nbtune-browser-chart canvas")
    eventually(lambda: charts.count() == 3 * DASHBOARDS, "each chart drawn ahead", 60)
    lost = [line for line in notebook.console if "Oldest context will be lost" in line]
    assert lost, "the charts drawn ahead hold more WebGL contexts than the page keeps"
    for n in range(DASHBOARDS):
        dashboard = dashboards.nth(n)
        dashboard.locator(".lm-TabBar-tab").filter(has_text="parallel coordinates").click()
        eventually(partial(dashboard.evaluate, DRAWN_WITH_WEBGL), f"chart {n} drawn", 30)
    # six shown charts hold more contexts than the page keeps: the first ones lost theirs
    for n in range(DASHBOARDS):
        dashboard = dashboards.nth(n)
        dashboard.locator(".nbtune-browser-chart").scroll_into_view_if_needed()
        eventually(partial(dashboard.evaluate, DRAWN_WITH_WEBGL), f"chart {n} drawn again", 30)
