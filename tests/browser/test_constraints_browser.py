"""A constrained run's dashboard in a real browser: the table fades the trials that miss a
constraint and says why on hover, and the parameters tab switches to the metric's contour."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from test_dashboard_views import KERNELSPEC, TAB_TIMEOUT, DashboardPage
from waiting import eventually

pytestmark = pytest.mark.browser

CELLS = (
    "import nbtune as nt\n\n\n"
    "def train(config):\n"
    "    x, y = config['x'], config['y']\n"
    "    nt.report(loss=(x - 2) ** 2 + (y - 1) ** 2, sum=x + y)",
    "tuner = nt.Tuner(\n"
    "    train,\n"
    "    {'x': nt.uniform(-3, 3), 'y': nt.uniform(-3, 3)},\n"
    "    metric='loss',\n"
    "    constraints={'sum': (None, 1)},\n"
    "    num_samples=12,\n"
    "    seed=3,\n"
    "    executor=nt.ThreadExecutor(),\n"
    "    name='constrained',\n"
    "    overwrite=True,\n"
    ")\n"
    "tuner.run(display=False)\n"
    "tuner.dashboard().show();",
)
INFEASIBLE_ROWS = """root => [...root.querySelectorAll('.nbtune-table tr.nbtune-infeasible')].map(
  tr => ({title: tr.title, opacity: getComputedStyle(tr.querySelector('td')).opacity}))"""


def test_infeasible_rows_are_faded_and_the_parameters_tab_draws_a_contour(lab_dir, open_notebook):
    path = lab_dir / "constrained.ipynb"
    nbformat.write(
        new_notebook(
            cells=[new_code_cell(source) for source in CELLS], metadata={"kernelspec": KERNELSPEC}
        ),
        path,
    )
    notebook = open_notebook(path)
    notebook.wait_for_idle_kernel()
    notebook.run_all_and_wait()
    dashboard = DashboardPage(notebook, "constrained")
    dashboard.wait_until_shown()
    rows = dashboard.root.evaluate(INFEASIBLE_ROWS)
    assert rows, "some trials of this seed miss the bound"
    assert all(row["title"].startswith("infeasible: sum ") for row in rows)
    assert all(float(row["opacity"]) < 1 for row in rows)

    dashboard.open_tab("parameters")
    dashboard.wait_for_traces()
    dashboard.root.get_by_role("button", name="contour").click()
    kinds = "el => el.data.map(trace => trace.type)"
    eventually(lambda: dashboard.chart(kinds) == ["contour", "scatter"], "a contour", TAB_TIMEOUT)
    notebook.screenshot("contour", scroll_to=dashboard.tabs)
    dashboard.assert_clean("the contour view")
