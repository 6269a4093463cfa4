"""The dashboard in an 800 px wide JupyterLab: what fits, what scrolls, what stays in sight.

The run has a metric and a parameter with long names, so that its table is wider than the
window, and more trials than the table shows at once: most end after a few reports, one in
five runs until the test stops the run. The last cell, `tuner.wait()`, is busy throughout.
"""

from __future__ import annotations

import pytest
from waiting import eventually

pytestmark = pytest.mark.browser

METRIC = "validation_cross_entropy_after_label_smoothing"
CELLS = (
    "import time\nimport nbtune as nt",
    "def train(config):\n"
    "    steps = 4 if config['x'] < 0.8 else 100_000\n"
    "    for step in range(1, steps + 1):\n"
    "        time.sleep(0.1)\n"
    f"        nt.report({METRIC}=config['x'] / step + config['learning_rate_of_the_optimizer'])",
    "tuner = nt.Tuner(\n"
    "    train,\n"
    "    space={'x': nt.uniform(0, 1),\n"
    "           'learning_rate_of_the_optimizer': nt.loguniform(1e-4, 1e-1),\n"
    "           'optimizer_with_a_long_name': nt.choice(['stochastic_gradient', 'adam'])},\n"
    f"    metric={METRIC!r}, num_samples=40, max_concurrent=4, seed=1,\n"
    "    name='layout', overwrite=True,\n"
    ")\n"
    "tuner.start()",
    "tuner.wait()",
)
WIDTH = 800

# Every plotly chart's width when it was first drawn: plotly's widget announces each drawing
# with the first event, the charts the dashboard draws itself (`BrowserChart`) with the second.
RECORD_FIRST_DRAWS = """() => {
  window.__nbtuneDraws = [];
  const record = (el) => {
    if (!window.__nbtuneDraws.some((draw) => draw.el === el)) {
      window.__nbtuneDraws.push({el, width: el._fullLayout.width});
    }
  };
  document.addEventListener('plotlywidget-after-render', (event) => record(event.detail.element));
  document.addEventListener('nbtune-chart-drawn', (event) => record(event.target));
}"""
# Those drawings of charts that show now: their width then, and the width of their place now.
FIRST_DRAWS = """() => window.__nbtuneDraws
  .filter(({el}) => el.isConnected && el.offsetParent !== null)
  .map(({el, width}) => {
    const style = getComputedStyle(el);
    const room = el.parentElement.clientWidth - parseFloat(style.marginLeft)
                 - parseFloat(style.marginRight);
    return {first: width, now: el._fullLayout.width, room: Math.floor(room)};
  })"""
PARCOORDS_SHOWN = """() => [...document.querySelectorAll('.js-plotly-plot')].some(
  el => el.offsetParent !== null && (el.data || []).some(t => t.type === 'parcoords'))"""
# Where the table and its first line's Pause button are, and how it scrolls.
TABLE_BOX = """root => {
  const scroller = root.querySelector('.nbtune-scroller');
  const box = scroller.getBoundingClientRect();
  const pause = root.querySelector(
    'tr[data-trial] button[data-action="pause"]:not(.nbtune-hidden)');
  const button = pause && pause.getBoundingClientRect();
  return {
    height: box.height, right: box.right, dashboard: root.getBoundingClientRect().right,
    lines: root.querySelectorAll('.nbtune-table tbody tr[data-trial]').length,
    scrollsDown: scroller.scrollHeight > scroller.clientHeight,
    scrollsAcross: scroller.scrollWidth > scroller.clientWidth,
    pause: button && {left: button.left, right: button.right},
  };
}"""
# Every button of the dashboard's own controls whose label does not fit in it.
CLIPPED_BUTTONS = """root => [...root.querySelectorAll('button.jupyter-button')]
  .filter(b => b.offsetParent !== null && b.scrollWidth > b.clientWidth + 1)
  .map(b => b.textContent.trim())"""


@pytest.fixture
def narrow_run(code_notebook, open_notebook):
    """The run's notebook open in an 800 px wide window, every chart's first drawing recorded,
    its cells running; yields (notebook, the dashboard's root) once the table shows."""
    notebook = open_notebook(code_notebook("layout.ipynb", CELLS))
    notebook.page.set_viewport_size({"width": WIDTH, "height": 900})
    notebook.wait_for_idle_kernel()
    notebook.page.evaluate(RECORD_FIRST_DRAWS)
    notebook.run_all()
    root = notebook.output(".nbtune-dashboard").first
    root.locator(".nbtune-table tr[data-trial]").first.wait_for(timeout=60_000)
    yield notebook, root
    root.get_by_role("button", name="Stop all").click()
    notebook.wait_until_all_ran(timeout=60)


def test_a_long_table_scrolls_in_a_bounded_box_with_its_buttons_in_sight(narrow_run):
    notebook, root = narrow_run
    eventually(lambda: root.evaluate(TABLE_BOX)["lines"] == 20, "a full page of 20 lines", 60)
    shown = root.evaluate(TABLE_BOX)
    notebook.screenshot("narrow-table", scroll_to=root.locator(".nbtune-table"))
    window = notebook.page.viewport_size["height"]
    assert shown["height"] <= 0.5 * window, f"the table is at most half the window: {shown}"
    assert shown["scrollsDown"], "its 20 lines scroll inside it"
    assert shown["scrollsAcross"], "the long names make it wider than the window: it scrolls"
    assert shown["right"] <= shown["dashboard"] + 1, f"the table keeps in its cell: {shown}"
    pause = shown["pause"]
    assert pause is not None, "a running trial's line offers Pause"
    assert pause["right"] <= shown["right"] + 1, f"Pause shows at the table's right edge: {shown}"
    assert root.evaluate(CLIPPED_BUTTONS) == [], "every button shows its whole label"


def test_charts_are_drawn_at_their_cell_s_width_from_the_first_drawing(narrow_run):
    notebook, root = narrow_run

    def drawn_to_fit() -> list[dict]:
        """The charts in sight, if every one was first drawn at about its place's width
        (within a scroll bar's width: the notebook may grow one meanwhile)."""
        draws = notebook.page.evaluate(FIRST_DRAWS)
        assert all(abs(d["first"] - d["room"]) <= 20 for d in draws), draws
        return draws

    eventually(drawn_to_fit, "the learning curves drawn", 60)
    root.locator(".lm-TabBar-tab").filter(has_text="parallel coordinates").click()
    eventually(
        lambda: (
            any(d["room"] < 700 and d["first"] for d in drawn_to_fit())
            and notebook.page.evaluate(PARCOORDS_SHOWN)
        ),
        "parallel coordinates drawn",
        60,
    )
    notebook.page.set_viewport_size({"width": WIDTH - 100, "height": 900})
    eventually(
        lambda: all(d["now"] == d["room"] for d in notebook.page.evaluate(FIRST_DRAWS)),
        "the chart follows the window's width",
    )
    notebook.screenshot("narrow-chart", scroll_to=root.locator(".js-plotly-plot").first)
