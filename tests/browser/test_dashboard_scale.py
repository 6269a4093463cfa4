"""The dashboard over a busy run in JupyterLab: its chart stays a live FigureWidget, the page
does not pile up DOM nodes, and hovering a trial's line highlights its curve in the browser.

Holding the mouse on a line draws the highlight again only when something else drew (the
highlight's own drawing once drew it again, and again, keeping the page busy all the time).

The run: 32 trials, 4 at a time, each reporting every 20 ms; seven in eight end after 40
reports, the others (trials 1, 9, 17, 25) run until the test stops the run. The test looks
once the run has lasted past the dashboard's grace for a chart to be drawn: a chart it wrongly
took for one the browser cannot draw would be static by then.

A run of 60 short trials has more curves than the kernel draws one to a trace: hovering a
trial whose curve it bundled with others draws that curve alone, bold, in the browser.
"""

from __future__ import annotations

import pytest
from waiting import eventually

from nbtune.ui.fallback import CHART_GRACE, RENDER_GRACE_S

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
FIGURE_WIDGET = ".js-plotly-plot:not(.nbtune-browser-chart)"
"""A live chart the kernel draws (a FigureWidget), not the one the browser draws ahead."""
CHART = "root.querySelector('.widget-tab-contents > :not(.lm-mod-hidden) .js-plotly-plot')"
# The learning curves as the page paints them, one per trace drawn: its name, points, the
# width of its line and its opacity (computed: the page's style sheet draws the highlight).
PAINTED = f"""root => {{
  const el = {CHART};
  return el ? [...el.querySelectorAll('.scatterlayer .trace')].filter(g => g.__data__)
    .map(g => {{
      const trace = g.__data__[0].trace;
      const line = g.querySelector('path.js-line');
      return {{name: trace.name, points: (trace.x || []).length,
        width: line ? parseFloat(getComputedStyle(line).strokeWidth) : 0,
        opacity: parseFloat(getComputedStyle(g).opacity)}};
    }}) : [];
}}"""

# From now on, count the learning curves' drawings: the kernel's (its updates), the
# highlight's (its curve marked bold), what starts one in the browser (the mouse entering or
# leaving a line), and plotly's restyles (the kernel draws by updates: a restyle is the
# browser's own, which the highlight once was, of every curve).
COUNT_DRAWINGS = f"""root => {{
  const el = {CHART};
  const count = window.nbtuneDrawings = {{kernel: 0, highlight: 0, mouse: 0, restyle: 0}};
  new MutationObserver((changes) => {{
    for (const change of changes) {{
      const bold = change.target.classList.contains('nbtune-bold');
      if (bold && !(change.oldValue || '').includes('nbtune-bold')) count.highlight += 1;
    }}
  }}).observe(el, {{subtree: true, attributeFilter: ['class'], attributeOldValue: true}});
  el.on('plotly_restyle', () => {{ count.restyle += 1; }});
  el.on('plotly_update', () => {{ count.kernel += 1; }});
  for (const kind of ['mouseenter', 'mouseleave']) {{
    root.addEventListener(kind, (event) => {{
      if (event.target.matches && event.target.matches('tr[data-trial]')) count.mouse += 1;
    }}, true);
  }}
}}"""
DRAWINGS = "() => ({...window.nbtuneDrawings})"


def styles(root) -> dict[str, dict]:
    """The learning curves as painted, by trace name."""
    return {trace["name"]: trace for trace in root.evaluate(PAINTED)}


def dom_nodes(page) -> int:
    """DOM nodes alive in the page, attached or not, after a full garbage collection."""
    devtools = page.context.new_cdp_session(page)
    devtools.send("HeapProfiler.collectGarbage")
    devtools.send("Performance.enable")
    metrics = devtools.send("Performance.getMetrics")["metrics"]
    return int(next(m["value"] for m in metrics if m["name"] == "Nodes"))


def running_dashboard(notebook):
    """Run the notebook's cells, and return it with its dashboard's output."""
    notebook.wait_for_idle_kernel()
    notebook.run_all()
    return notebook, notebook.output(".nbtune-dashboard").first


def test_a_busy_run_keeps_a_live_chart_a_flat_page_and_highlights_in_the_browser(
    code_notebook, open_notebook
):
    notebook, root = running_dashboard(open_notebook(code_notebook("scale.ipynb", CELLS)))
    root.locator(".nbtune-table tr[data-trial]").first.wait_for(timeout=60_000)
    eventually(lambda: styles(root), "the learning curves drawn", 60)
    eventually(lambda: root.evaluate(FINISHED, LOOK_AFTER_S), "20 trials ended, time passed", 120)

    assert root.locator(".jp-RenderedPlotly").count() == 0, "the chart is still a FigureWidget"
    charts = root.locator(FIGURE_WIDGET)
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
        style = styles(root).get(f"trial {trial}", {})
        return f"trial {trial}" if trial is not None and style.get("width") == 3.5 else None

    own = eventually(bold_under_the_mouse, "the curve of the trial under the mouse drawn bold")
    others = [style for name, style in styles(root).items() if name != own]
    assert others and all(style["opacity"] < 0.5 for style in others), "the others faint"
    root.evaluate(COUNT_DRAWINGS)
    # A loaded browser answers slowly, and the kernel then draws less often (every few seconds).
    eventually(lambda: root.evaluate(DRAWINGS)["kernel"] >= 4, "four drawings from the kernel", 90)
    drawn = root.evaluate(DRAWINGS)
    causes = drawn["kernel"] + drawn["mouse"]
    assert drawn["highlight"] <= 2 * causes + 2, f"the highlight drawn again by itself: {drawn}"
    assert drawn["restyle"] == 0, f"the highlight made plotly draw the curves again: {drawn}"
    notebook.screenshot("hover", scroll_to=charts)
    notebook.page.mouse.move(0, 0)
    eventually(
        lambda: all(s["width"] < 3.5 and s["opacity"] == 1 for s in styles(root).values()),
        "every curve back to its own style",
    )

    root.get_by_role("button", name="Stop all").click()
    notebook.wait_until_all_ran(timeout=60)


MANY_CELLS = (
    "import time\nimport nbtune as nt",
    "def train(config):\n"
    "    steps = 100_000 if nt.get_trial_id() in (1, 2) else 5\n"
    "    for step in range(1, steps + 1):\n"
    "        time.sleep(0.01)\n"
    "        nt.report(loss=config['x'] / step + config['lr'])",
    "tuner = nt.Tuner(\n"
    "    train, space={'x': nt.uniform(0, 1), 'lr': nt.loguniform(1e-4, 1e-1)},\n"
    "    metric='loss', num_samples=60, max_concurrent=4, seed=3, name='many', overwrite=True,\n"
    ")\n"
    "tuner.start()",
    "tuner.wait()",
)
MANY_DONE = """root => { const done = root.textContent.match(/(\\d+) \\/ 60 trials done/);
  return !!done && Number(done[1]) >= 58; }"""
# The trials whose curves the kernel bundled (each bundle's points name their trial), and one
# of them that has a line in the table.
BUNDLED_LINE = f"""root => {{
  const el = {CHART};
  const bundled = new Set((el && el.data || []).filter(t => (t.name || '').startsWith('trials '))
    .flatMap(t => Array.from(t.customdata || [])).filter(id => id !== null));
  const line = [...root.querySelectorAll('.nbtune-table tr[data-trial]')]
    .find(tr => bundled.has(Number(tr.dataset.trial)));
  return line ? line.dataset.trial : null;
}}"""
# The learning curves' traces as plotly holds them: name and points.
TRACES = f"""root => {{
  const el = {CHART};
  return (el && el.data || []).map(t => ({{name: t.name, points: (t.x || []).length}}));
}}"""


def test_past_fifty_curves_a_bundled_curve_is_highlighted_alone_in_the_browser(
    code_notebook, open_notebook
):
    notebook, root = running_dashboard(open_notebook(code_notebook("many.ipynb", MANY_CELLS)))
    eventually(lambda: root.evaluate(MANY_DONE), "58 of 60 trials done", 180)
    trial = eventually(lambda: root.evaluate(BUNDLED_LINE), "a bundled trial in the table", 60)
    traces = root.evaluate(TRACES)
    assert len(traces) < 30, f"{len(traces)} traces for 60 curves: {traces}"
    assert traces[-1] == {"name": "highlight", "points": 0}, "an empty trace kept last"
    before = root.evaluate(PAINTED)

    root.locator(f'.nbtune-table tr[data-trial="{trial}"] td[data-key="iteration"]').hover()
    name = f"trial {trial}"
    bold = eventually(
        lambda: styles(root).get(name, {}).get("width") == 3.5 and styles(root)[name],
        "the bundled curve drawn bold",
    )
    assert root.evaluate(TRACES)[-1] == {"name": name, "points": 5}, "into the last trace"
    assert bold["opacity"] == 1
    others = [trace for trace in root.evaluate(PAINTED) if trace["name"] != name]
    assert others and all(trace["opacity"] < 0.5 for trace in others), "the others faint"
    notebook.screenshot("bundled-hover", scroll_to=root.locator(FIGURE_WIDGET))
    notebook.page.mouse.move(0, 0)
    eventually(
        lambda: (
            root.evaluate(TRACES)[-1] == {"name": "highlight", "points": 0}
            and root.evaluate(PAINTED) == before
        ),
        "the last trace emptied, every curve back to its own style",
    )
    root.get_by_role("button", name="Stop all").click()
    notebook.wait_until_all_ran(timeout=60)
