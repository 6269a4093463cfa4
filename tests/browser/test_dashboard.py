"""The dashboard in a real JupyterLab in Chromium: it renders, grows, and its buttons steer.

Every click happens while the notebook's last cell (`tuner.wait()`) is busy: the buttons are
served on a kernel subshell.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from waiting import eventually

import nbtune as nt

pytestmark = pytest.mark.browser
NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "live_dashboard.ipynb"


def trial_status(run: Path, trial_id: int) -> str | None:
    """The trial's status as the kernel's runner last wrote it to disk."""
    if not (run / "experiment.json").exists():
        return None
    return nt.load(run).dataframe().set_index("trial_id")["status"].get(trial_id)


def test_the_dashboard_renders_grows_and_its_buttons_steer_the_run(lab_dir, open_notebook):
    shutil.copy(NOTEBOOK, lab_dir / NOTEBOOK.name)
    run = lab_dir / "nbtune-runs" / "live-dashboard"
    notebook = open_notebook(lab_dir / NOTEBOOK.name)
    notebook.wait_for_idle_kernel()
    notebook.run_all()
    page = notebook.page

    chart = page.locator(".js-plotly-plot").first
    chart.wait_for(timeout=60_000)
    assert notebook.widget_placeholders() == 0, "no 'Loading widget...' left"
    traces = "el => el.data.length"
    points = "el => Math.max(...el.data.map(trace => (trace.x || []).length))"
    eventually(lambda: chart.evaluate(traces) == 2, "one trace per trial")
    first = chart.evaluate(points)
    eventually(lambda: chart.evaluate(points) > first, "the chart grows")

    page.locator('button[title="Pause trial 0"]').click()
    eventually(lambda: trial_status(run, 0) == "PAUSED", "trial 0 paused (on the kernel's disk)")
    resume = page.locator('button[title="Resume trial 0"]')
    resume.wait_for(state="visible", timeout=10_000)
    notebook.screenshot("dashboard-paused", scroll_to=chart)
    resume.click()
    eventually(lambda: trial_status(run, 0) in ("PENDING", "RUNNING"), "trial 0 resumed")

    assert not (run / "trials.json").exists(), "the last cell, tuner.wait(), is still busy"
    page.get_by_role("button", name="Stop all").click()
    eventually(
        lambda: (
            (run / "trials.json").exists()
            and set(nt.load(run).dataframe()["status"]) == {"TERMINATED"}
        ),
        "the run stopped",
    )
    page.locator(".widget-html-content", has_text="— stopped").wait_for(timeout=10_000)
    header = page.locator(".widget-html-content", has_text="planned trials ran · stopped")
    assert header.inner_text().startswith("2 of 2 planned"), "how many ran, not 'k / k'"
    notebook.wait_until_all_ran(timeout=60)
    launching_cell = page.locator(".jp-CodeCell", has=chart)
    summary = launching_cell.locator(".nbtune-summary")
    summary.wait_for(state="attached", timeout=10_000)
    assert "best loss" in summary.text_content(), "wait() filled the summary under the dashboard"
    assert not summary.is_visible(), "hidden while the live dashboard shows the same"
    notebook.screenshot("dashboard-stopped", scroll_to=chart)
