"""The dashboard over a busy run in JupyterLab: its chart stays a live FigureWidget, the page
does not pile up DOM nodes, and hovering a trial's line highlights its curve in the browser.

Holding the mouse on a line draws the highlight again only when something else drew (the
highlight's own drawing once drew it again, and again, keeping the page busy all the time).

The run: 32 trials, 4 at a time, each reporting every 20 ms; seven in eight end after 40
reports, the others (trials 1, 9, 17, 25) run until the test stops the run. The test looks
once the run has lasted past the dashboard's grace for a chart to be drawn: a chart it wrongly
took for one the browser cannot draw would be static by then.
"""

from __future__ import annotations

import pytest
from waiting import eventually

from nbtune.ui.dashboard import CHART_GRACE, RENDER_GRACE_S

pytestmark = pytest.mark.browser

CELLS = (
    "import time\nimport nbtune as nt",
    "def train(config):\n"
    "    steps = 100_000 if nt.get_trial_id() % 8 == 1 else 40\n"
    "    for step in range(1, steps + 1):\n"
    "        time.sleep(0.02)\n"
    "        nt.report(loss=config['x'] / step + config['lr'])",
    "tuner = nt.Tuner(\n"
    "    train, space={'x': nt.uniform(0, 1), 'lr': nt.loguniform(1e-4, 1e-1)},\n"
    "    metric='loss', num_samples=32, max_concurrent=4, seed=2, name='scale', overwrite=True,\n"
    ")\n"
    "tuner.start()",
    "tuner.wait()",
)
MAX_NODES = 15_000
"""DOM nodes alive in the whole page (JupyterLab's own: about 9,000) after the run's first 20
trials ended, after a forced garbage collection. A chart redrawn as a new static figure each
second left every old one in the page (3,000 to 4,000 nodes a redraw)."""

LOOK_AFTER_S = RENDER_GRACE_S * CHART_GRACE + 5
FINISHED = """(root, seconds) => { const done = root.textContent.match(/(\\d+) \\/ 32 trials done/);
  const running = root.textContent.match(/running · (\\d+) s/);
  return !!done && Number(done[1]) >= 20 && !!running && Number(running[1]) >= seconds; }"""
HOVERED = "root => { const line = root.querySelector('tr[data-trial]:hover');"
HOVERED += " return line ? line.dataset.trial : null; }"
# The learning curves' line widths and opacities, by trace name.
STYLES = """root => {
  const el = root.querySelector('.widget-tab-contents > :not(.lm-mod-hidden) .js-plotly-plot');
  return el ? Object.fromEntries((el.data || []).map(t => [t.name,
    {width: (t.line || {}).width, opacity: t.opacity === undefined ? 1 : t.opacity}])) : {};
}"""

# From now on, count the learning curves' drawings: the kernel's (its updates), the
# highlight's (a restyle of every curve's opacity, width and colour) and what starts one in the
# browser (the mouse entering or leaving a line).
COUNT_DRAWINGS = """root => {
  const el = root.querySelector('.widget-tab-contents > :not(.lm-mod-hidden) .js-plotly-plot');
  const count = window.nbtuneDrawings = {kernel: 0, highlight: 0, mouse: 0};
  const ours = (data) => Object.keys(data).filter((key) => !key.startsWith('_')).sort().join()
    === 'line.color,line.width,opacity';
  el.on('plotly_restyle', ([data]) => { count[ours(data) ? 'highlight' : 'kernel'] += 1; });
  el.on('plotly_update', () => { count.kernel += 1; });
  for (const kind of ['mouseenter', 'mouseleave']) {
    root.addEventListener(kind, (event) => {
      if (event.target.matches && event.target.matches('tr[data-trial]')) count.mouse += 1;
    }, true);
  }
}"""
DRAWINGS = "() => ({...window.nbtuneDrawings})"


def dom_nodes(page) -> int:
    """DOM nodes alive in the page, attached or not, after a full garbage collection."""
    devtools = page.context.new_cdp_session(page)
    devtools.send("HeapProfiler.collectGarbage")
    devtools.send("Performance.enable")
    metrics = devtools.send("Performance.getMetrics")["metrics"]
    return int(next(m["value"] for m in metrics if m["name"] == "Nodes"))


def test_a_busy_run_keeps_a_live_chart_a_flat_page_and_highlights_in_the_browser(
    code_notebook, open_notebook
):
    notebook = open_notebook(code_notebook("scale.ipynb", CELLS))
    notebook.wait_for_idle_kernel()
    notebook.run_all()
    root = notebook.output(".nbtune-dashboard").first
    root.locator(".nbtune-table tr[data-trial]").first.wait_for(timeout=60_000)
    eventually(lambda: root.evaluate(STYLES), "the learning curves drawn", 60)
    eventually(lambda: root.evaluate(FINISHED, LOOK_AFTER_S), "20 trials ended, time passed", 120)

    assert root.locator(".jp-RenderedPlotly").count() == 0, "the chart is still a FigureWidget"
    charts = root.locator(".js-plotly-plot:not(.nbtune-browser-chart)")
    assert charts.count() == 1, "one chart in the page, besides the one the browser draws ahead"
    assert root.locator(".nbtune-browser-chart").count() == 1
    nodes = dom_nodes(notebook.page)
    assert nodes < MAX_NODES, f"{nodes} DOM nodes alive in the page"

    line = root.locator(".nbtune-table tr[data-trial]").filter(
        has=notebook.page.locator(".nbtune-badge", has_text="running")
    )
    line.first.locator('td[data-key="iteration"]').hover()

    def bold_under_the_mouse() -> str | None:
        """The trial whose line is under the mouse, once its curve is drawn bold (the table
        may shift under a still mouse as the run goes on)."""
        trial = root.evaluate(HOVERED)
        style = root.evaluate(STYLES).get(f"trial {trial}", {})
        return f"trial {trial}" if trial is not None and style.get("width") == 3.5 else None

    own = eventually(bold_under_the_mouse, "the curve of the trial under the mouse drawn bold")
    others = [style for name, style in root.evaluate(STYLES).items() if name != own]
    assert others and all(style["opacity"] < 0.5 for style in others), "the others faint"
    root.evaluate(COUNT_DRAWINGS)
    eventually(lambda: root.evaluate(DRAWINGS)["kernel"] >= 4, "four drawings from the kernel")
    drawn = root.evaluate(DRAWINGS)
    causes = drawn["kernel"] + drawn["mouse"]
    assert drawn["highlight"] <= 2 * causes + 2, f"the highlight drawn again by itself: {drawn}"
    notebook.screenshot("hover", scroll_to=charts)
    notebook.page.mouse.move(0, 0)
    eventually(
        lambda: all(s["width"] < 3.5 and s["opacity"] == 1 for s in root.evaluate(STYLES).values()),
        "every curve back to its own style",
    )

    root.get_by_role("button", name="Stop all").click()
    notebook.wait_until_all_ran(timeout=60)
