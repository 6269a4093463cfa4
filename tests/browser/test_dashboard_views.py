"""The dashboard in real browsers during a live run: every tab, the table, reloads, a front end
without anywidget, the dark theme.

The notebook is written by each test: a run of 8 trials over 3 parameters (loguniform,
uniform, choice), 4 at a time, reporting every 0.2 s. Trials with momentum < 0.3 end after 10
reports, the others run until the test presses "Stop all", so the run is live throughout and
the table holds running, finished and planned trials. The dashboard is shown with 3 trials a
page, so the table has two pages. The last cell, `tuner.wait()`, is busy while the test clicks
(the reload test leaves it out).

Screenshots of each step go to the artefact folder (see conftest.py).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from waiting import eventually

pytestmark = pytest.mark.browser

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
CELLS = (
    "import time\n\nimport nbtune as nt\nfrom nbtune.ui.dashboard import Dashboard",
    "def train(config):\n"
    "    steps = 10 if config['momentum'] < 0.3 else 3000\n"
    "    for step in range(1, steps + 1):\n"
    "        time.sleep(0.2)\n"
    "        penalty = 0.1 if config['optimizer'] == 'adam' else 0.0\n"
    "        loss = (100 * config['lr'] + config['momentum']) / step + penalty\n"
    "        nt.report(loss=loss, acc=1 / (1 + loss))",
    "tuner = nt.Tuner(\n"
    "    train,\n"
    "    space={\n"
    "        'lr': nt.loguniform(1e-4, 1e-1),\n"
    "        'momentum': nt.uniform(0.0, 0.99),\n"
    "        'optimizer': nt.choice(['sgd', 'adam']),\n"
    "    },\n"
    "    metric='loss',\n"
    "    num_samples=8,\n"
    "    max_concurrent=4,\n"
    "    seed=0,\n"
    "    name='views',\n"
    "    overwrite=True,\n"
    ")\n"
    "tuner.start(display=False)\n"
    "dashboard = Dashboard(tuner, page_size=3)\n"
    "dashboard.show();",
    "tuner.wait()\nprint(tuner.state)",
)
CHARTS = ("learning curves", "best so far", "parallel coordinates", "parameters", "importance")
VIEWS = {"trial": "configuration", "dataframe": "trial_id", "errors": "no failed trials"}
RENDER_TIMEOUT = 60  # s; the first chart: plotly's first import and FigureWidget in the kernel
TAB_TIMEOUT = 20
PRESS_S = 0.08
"""How long a person's click holds the mouse button down (typically 50-150 ms)."""
CONSOLE_ERRORS = re.compile(r"widget|plotly|nbtune|anywidget|Error setting state", re.IGNORECASE)
"""Console errors that concern the dashboard (Notebook 7 logs a few of its own)."""

TRACES = "el => (el.data || []).length"
POINTS = "el => Math.max(0, ...(el.data || []).map(trace => (trace.x || []).length))"
# One snapshot of the table, read in one go: the kernel redraws it ten times a second.
TABLE = """root => ({
  where: (root.querySelector('.nbtune-where') || {}).textContent || '',
  rows: [...root.querySelectorAll('.nbtune-table tbody tr[data-trial]')].map(tr => ({
    id: Number(tr.dataset.trial),
    status: tr.querySelector('td[data-key="status"]').textContent,
    lr: Number(tr.querySelector('td[data-key="config/lr"]').textContent),
  })),
})"""

# The chart's colours as the browser computes them: "rgb(r, g, b)" or "rgba(r, g, b, a)".
CHART_COLORS = """el => {
  const rgb = (color) => {
    const probe = document.createElement('span');
    probe.style.color = color;
    document.body.appendChild(probe);
    const computed = getComputedStyle(probe).color;
    probe.remove();
    return computed;
  };
  const layout = el._fullLayout;
  return {paper: rgb(layout.paper_bgcolor), plot: rgb(layout.plot_bgcolor),
          font: rgb(layout.font.color)};
}"""

# Before each frame the page paints, note the text of every ipywidgets error box it shows
# ("Click to show javascript error."): one painted even for a frame is one a user saw.
WATCH_ERROR_BOXES = """() => {
  const watch = (window.__nbtuneErrorBoxes = {frames: 0, seen: []}), seen = watch.seen;
  const look = () => {
    watch.frames += 1;
    for (const box of document.querySelectorAll('.jupyter-widgets-error-widget')) {
      const shown = box.getClientRects().length && box.offsetWidth && box.offsetHeight;
      if (shown && !seen.includes(box.innerText)) seen.push(box.innerText);
    }
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
}"""
ERROR_BOXES_SEEN = "() => window.__nbtuneErrorBoxes"

SHOWN_TWICE = (
    *CELLS[:2],
    CELLS[2].replace(
        "tuner.start(display=False)\ndashboard = Dashboard(tuner, page_size=3)\ndashboard.show();",
        "tuner.start()",
    ),
    "tuner.dashboard()",
)
"""The run started as a user starts it (`start()` shows `tuner.dashboard()` under its cell),
then its dashboard shown again in the next cell: a second view of the same widgets."""


def write_live_notebook(
    folder: Path, wait: bool = True, cells: tuple[str, ...] | None = None
) -> Path:
    """The run's notebook (`cells`, by default CELLS); without `wait`, no `tuner.wait()`
    cell: the kernel stays idle."""
    path = folder / "views.ipynb"
    cells = cells or (CELLS if wait else CELLS[:-1])
    notebook = new_notebook(
        cells=[new_code_cell(source) for source in cells], metadata={"kernelspec": KERNELSPEC}
    )
    nbformat.write(notebook, path)
    return path


def is_light(color: str) -> bool:
    """Whether a computed CSS colour ("rgb(...)" or "rgba(...)") is a light, opaque one."""
    numbers = [float(n) for n in re.findall(r"[\d.]+", color)]
    red, green, blue = numbers[:3]
    alpha = numbers[3] if len(numbers) > 3 else 1.0
    return alpha > 0.5 and (0.299 * red + 0.587 * green + 0.114 * blue) / 255 > 0.5


class DashboardPage:
    """The one dashboard of a notebook page, as a user sees and clicks it."""

    def __init__(self, notebook: Any, name: str, nth: int = 0) -> None:
        """`notebook` is the conftest's `LabNotebook` showing the run's notebook; `nth` picks
        one of several views of dashboards, in page order."""
        self.notebook = notebook
        self.name = name
        self.page = notebook.page
        self.root = notebook.output(".nbtune-dashboard").nth(nth)
        self.tabs = self.root.locator(".jupyter-widget-tab")
        self.panel = self.tabs.locator(".widget-tab-contents > :not(.lm-mod-hidden)")

    def wait_until_shown(self, table: str = ".nbtune-table tr[data-trial]") -> None:
        self.root.locator(table).first.wait_for(timeout=RENDER_TIMEOUT * 1000)

    def title(self) -> str:
        heading = self.root.locator(".widget-html-content", has_text=f"nbtune · {self.name}")
        return heading.inner_text()

    def open_tab(self, tab: str) -> None:
        label = self.root.locator(".lm-TabBar-tab").filter(
            has=self.page.locator(".lm-TabBar-tabLabel", has_text=re.compile(f"^{tab}$"))
        )
        label.click()
        eventually(lambda: "lm-mod-current" in label.get_attribute("class"), f"{tab!r} shown")

    def chart(self, script: str) -> Any:
        """`script(el)` on the visible tab's chart element, or None while it has none.

        Run on the dashboard's root in one call: a static chart is a new element at each
        redraw, so a handle on the chart itself would soon point at a detached one.
        """
        return self.root.evaluate(
            f"""root => {{
              const el = root.querySelector(
                '.widget-tab-contents > :not(.lm-mod-hidden) .js-plotly-plot');
              return el && el._fullLayout ? ({script})(el) : null;
            }}"""
        )

    def wait_for_traces(self, timeout: float = TAB_TIMEOUT) -> None:
        """Wait until the visible tab's chart draws at least one trace."""
        eventually(lambda: self.chart(TRACES), "a chart with traces", timeout)

    def table(self) -> dict[str, Any]:
        return self.root.evaluate(TABLE)

    def press(self, selector: str) -> None:
        """Click the element `selector` finds in the dashboard as a person does: the mouse
        button held down for `PRESS_S`. (Playwright's own click releases at once.)"""
        box = self.root.evaluate(
            "(root, selector) => { const b = root.querySelector(selector).getBoundingClientRect();"
            " return {x: b.x + b.width / 2, y: b.y + b.height / 2}; }",
            selector,
        )
        self.page.mouse.move(box["x"], box["y"])
        self.page.mouse.down()
        time.sleep(PRESS_S)
        self.page.mouse.up()

    def problems(self) -> list[str]:
        """Whatever says that something broke: a part of the dashboard that failed to draw, a
        widget that failed to show, an error, a traceback or stderr text in any cell."""
        found = [
            f"dashboard: {line}"
            for line in self.root.locator("details.nbtune-error summary").all_inner_texts()
        ]
        if self.notebook.widget_placeholders():
            found.append("a 'Loading widget...' or 'Error displaying widget' placeholder")
        if "Traceback" in self.root.inner_text():
            found.append("a traceback shown in the dashboard")
        return found + self.notebook.output_problems()

    def assert_clean(self, step: str) -> None:
        problems = self.problems()
        assert not problems, f"{step}:\n  " + "\n  ".join(problems)

    def stop_run(self) -> None:
        """Press "Stop all" and wait until the title says the run stopped."""
        self.root.get_by_role("button", name="Stop all").click()
        self.root.locator(".widget-html-content", has_text="— stopped").wait_for(timeout=30_000)


def start_live_run(
    open_notebook, lab_dir: Path, app: str = "lab", wait: bool = True, **kwargs: Any
) -> DashboardPage:
    notebook = open_notebook(write_live_notebook(lab_dir, wait), app=app, **kwargs)
    notebook.wait_for_idle_kernel()
    notebook.run_all()
    return DashboardPage(notebook, "views")


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_every_tab_draws_during_a_live_run(app, lab_dir, open_notebook):
    dashboard = start_live_run(open_notebook, lab_dir, app)
    notebook = dashboard.notebook
    dashboard.wait_until_shown()
    for tab in CHARTS:
        dashboard.open_tab(tab)
        dashboard.wait_for_traces()
        notebook.screenshot(f"{app}-{tab.replace(' ', '-')}", scroll_to=dashboard.tabs)
        dashboard.assert_clean(f"the {tab!r} tab")
    dashboard.open_tab("parameters")
    dashboard.panel.get_by_label("metric", exact=True).select_option("acc")
    eventually(
        lambda: dashboard.chart("el => el._fullLayout.title.text") == "acc (last) by parameter",
        "the parameters tab redrawn for the metric picked",
        TAB_TIMEOUT,
    )
    dashboard.assert_clean("a metric picked")
    for tab, text in VIEWS.items():
        dashboard.open_tab(tab)
        dashboard.panel.get_by_text(text).first.wait_for(timeout=TAB_TIMEOUT * 1000)
        notebook.screenshot(f"{app}-{tab}", scroll_to=dashboard.tabs)
        dashboard.assert_clean(f"the {tab!r} tab")
    assert "— running" in dashboard.title(), "every tab was drawn while the run was live"

    dashboard.stop_run()
    notebook.wait_until_all_ran(timeout=60)
    dashboard.assert_clean("the end of the run")
    assert [line for line in notebook.console_errors() if CONSOLE_ERRORS.search(line)] == []


def test_the_table_filters_pages_sorts_and_selects_during_a_live_run(lab_dir, open_notebook):
    dashboard = start_live_run(open_notebook, lab_dir)
    notebook = dashboard.notebook
    dashboard.wait_until_shown()
    table = dashboard.root.locator(".nbtune-table")
    for status in ("terminated", "running"):
        dashboard.root.locator("select.nbtune-filter").select_option(status)
        eventually(
            lambda status=status: {row["status"] for row in dashboard.table()["rows"]} == {status},
            f"only {status} trials shown",
        )
    notebook.screenshot("running-only", scroll_to=table)
    dashboard.root.locator("select.nbtune-filter").select_option("all")

    eventually(lambda: dashboard.table()["where"].startswith("page 1 of 2"), "two pages")
    first_page = dashboard.table()["rows"]
    order = {"running": 0, "paused": 0, "pending": 1}
    ranks = [(order.get(row["status"].split()[0], 2), row["id"]) for row in first_page]
    assert ranks == sorted(ranks), "live trials first, then by id"
    dashboard.root.locator('.nbtune-page[data-step="1"]').click()
    eventually(lambda: dashboard.table()["where"].startswith("page 2 of 2"), "the next page")

    def sorted_by_lr(descending: bool) -> bool:
        shown = dashboard.table()
        rates = [row["lr"] for row in shown["rows"]]
        return shown["where"].startswith("page 1 of") and rates == sorted(rates, reverse=descending)

    dashboard.press('th[data-key="config/lr"]')
    eventually(lambda: sorted_by_lr(descending=False), "sorted by lr, back on page 1", 10)
    assert [row["id"] for row in dashboard.table()["rows"]] != first_page, "the order changed"
    assert dashboard.root.locator('th[data-key="config/lr"]').inner_text().endswith("▲")
    dashboard.press('th[data-key="config/lr"]')
    eventually(lambda: sorted_by_lr(descending=True), "sorted by lr, reversed", 10)
    notebook.screenshot("sorted-by-lr", scroll_to=table)

    dashboard.open_tab("trial")
    for row in dashboard.table()["rows"][-2:]:
        dashboard.press(f'tr[data-trial="{row["id"]}"] td[data-key="config/optimizer"]')
        shown = dashboard.panel.get_by_text(f"trial {row['id']}", exact=True)
        shown.wait_for(timeout=10_000)
    notebook.screenshot("trial-view", scroll_to=dashboard.tabs)
    assert "— running" in dashboard.title(), "the table was used while the run was live"
    dashboard.assert_clean("after filtering, paging, sorting and selecting")

    dashboard.stop_run()
    notebook.wait_until_all_ran(timeout=60)
    dashboard.assert_clean("the end of the run")


def test_a_reloaded_page_draws_the_charts_again(lab_dir, open_notebook):
    # No busy cell here (the next test has one): the page restores its widgets as usual.
    dashboard = start_live_run(open_notebook, lab_dir, wait=False)
    notebook = dashboard.notebook
    notebook.wait_until_all_ran()
    dashboard.wait_until_shown()
    dashboard.wait_for_traces(RENDER_TIMEOUT)
    notebook.save()
    notebook.reload()
    notebook.wait_for_idle_kernel()
    dashboard.wait_until_shown()
    dashboard.wait_for_traces(RENDER_TIMEOUT)
    points = dashboard.chart(POINTS)
    eventually(lambda: (dashboard.chart(POINTS) or 0) > points, "the reloaded chart grows")
    assert dashboard.chart(TRACES) >= 4, "a curve per trial started before the reload"
    notebook.screenshot("reloaded", scroll_to=dashboard.tabs)
    eventually(lambda: not dashboard.problems(), "no broken widget after the reload", 15)

    dashboard.stop_run()
    notebook.wait_for_idle_kernel()
    dashboard.assert_clean("the end of the run")


def test_a_page_reloaded_while_a_cell_waits_on_the_run_gets_its_dashboard_back(
    lab_dir, open_notebook
):
    # The kernel answers the reloaded page's comm_info_request on its shell channel thread
    # and each widget's request_state on the subshell, past the busy `tuner.wait()`.
    dashboard = start_live_run(open_notebook, lab_dir)
    notebook = dashboard.notebook
    dashboard.wait_until_shown()
    notebook.save()
    notebook.reload()
    dashboard.wait_until_shown()
    assert dashboard.root.get_by_role("button", name="Stop all").is_visible()
    assert "— running" in dashboard.title(), "back while the run (and the cell) goes on"
    notebook.screenshot("reloaded-while-busy", scroll_to=dashboard.root)
    dashboard.stop_run()
    notebook.wait_for_idle_kernel()


def test_a_dashboard_shown_again_in_another_cell_draws_and_steers_the_run_too(
    lab_dir, open_notebook
):
    notebook = open_notebook(write_live_notebook(lab_dir, cells=SHOWN_TWICE))
    notebook.wait_for_idle_kernel()
    notebook.run_all()
    notebook.wait_until_all_ran()
    first, again = DashboardPage(notebook, "views"), DashboardPage(notebook, "views", nth=1)
    for view in (first, again):
        view.wait_until_shown()
        view.wait_for_traces(RENDER_TIMEOUT)
        points = view.chart(POINTS)
        eventually(lambda v=view, p=points: (v.chart(POINTS) or 0) > p, "a chart that grows")
    shown = [{row["id"] for row in view.table()["rows"]} for view in (again, first)]
    assert shown[0] and shown[0] <= shown[1], "one table in two views (read again, then first)"
    notebook.screenshot("shown-twice", scroll_to=again.tabs)
    eventually(lambda: not again.problems(), "no broken widget in either view", 15)

    again.stop_run()
    first.root.locator(".widget-html-content", has_text="— stopped").wait_for(timeout=30_000)
    notebook.wait_for_idle_kernel()
    first.assert_clean("the end of the run")


def test_without_anywidget_the_dashboard_shows_static_charts(
    lab_dir, open_notebook, lab_server_without_anywidget
):
    notebook = open_notebook(write_live_notebook(lab_dir), server=lab_server_without_anywidget)
    notebook.wait_for_idle_kernel()
    notebook.page.evaluate(WATCH_ERROR_BOXES)
    notebook.run_all()
    dashboard = DashboardPage(notebook, "views")
    disabled = notebook.page.evaluate(
        "() => JSON.parse(document.getElementById('jupyter-config-data').textContent)"
        ".disabledExtensions"
    )
    assert "anywidget" in disabled, "the front end has no anywidget"

    dashboard.wait_until_shown(table=".nbtune-static-table tbody tr")
    assert dashboard.root.locator(".nbtune-table").count() == 0
    watched = notebook.page.evaluate(ERROR_BOXES_SEEN)
    assert watched["frames"] > 0, "the page was watched while it drew"
    assert watched["seen"] == [], f"no error box while the dashboard waited to fall back: {watched}"
    dashboard.wait_for_traces(RENDER_TIMEOUT)
    points = dashboard.chart(POINTS)
    eventually(lambda: (dashboard.chart(POINTS) or 0) > points, "the static chart redrawn")
    notebook.screenshot("static-learning-curves", scroll_to=dashboard.tabs)
    for tab in CHARTS[1:]:
        dashboard.open_tab(tab)
        dashboard.wait_for_traces()
        notebook.screenshot(f"static-{tab.replace(' ', '-')}", scroll_to=dashboard.tabs)
    eventually(lambda: not dashboard.problems(), "nothing broken once static", 15)
    assert "— running" in dashboard.title(), "the static charts were drawn while the run was live"

    dashboard.stop_run()
    notebook.wait_until_all_ran(timeout=60)
    dashboard.assert_clean("the end of the run")


def test_the_charts_follow_the_dark_theme(lab_dir, open_notebook):
    dashboard = start_live_run(open_notebook, lab_dir)
    notebook = dashboard.notebook
    dashboard.wait_until_shown()
    dashboard.wait_for_traces(RENDER_TIMEOUT)
    notebook.change_theme("JupyterLab Dark")

    def colors() -> dict[str, str]:
        return dashboard.chart(CHART_COLORS)

    def dark() -> bool:
        shown = colors()
        return (
            not is_light(shown["paper"]) and not is_light(shown["plot"]) and is_light(shown["font"])
        )

    try:
        eventually(dark, "a dark chart: neither its paper nor its plot area light, its font light")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the chart shows {colors()}") from None
    finally:
        notebook.screenshot("dark", scroll_to=dashboard.tabs)
    dashboard.stop_run()
    notebook.wait_until_all_ran(timeout=60)
    dashboard.assert_clean("the end of the run")
