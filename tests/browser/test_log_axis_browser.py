"""The learning curves on a log scale as plotly.js draws them in Chromium: what the y axis says."""

from __future__ import annotations

import pytest
from ui.test_data import run_of

from nbtune.ui.data import history_data
from nbtune.ui.figures import history_figure

pytestmark = pytest.mark.browser

Y_LABELS = (
    "() => [...document.querySelectorAll('.yaxislayer-above .ytick text')].map(t => t.textContent)"
)


def drawn_y_labels(browser, figure) -> list[str]:
    """The y axis' tick labels of `figure` drawn in a page of its own, bottom to top."""
    page = browser.new_page()
    try:
        page.set_content(figure.to_html(include_plotlyjs=True, full_html=True))
        page.wait_for_selector(".yaxislayer-above .ytick text")
        return page.evaluate(Y_LABELS)
    finally:
        page.close()


@pytest.mark.parametrize(
    "losses",
    [[1.0, 0.6, 0.3, 0.15, 0.1], [0.9, 0.5, 0.35], [50.0, 3.0, 0.2, 0.01, 0.002]],
    ids=["one decade", "within a decade", "five decades"],
)
def test_on_a_log_scale_every_tick_says_its_whole_number(browser, losses):
    trials, rows = run_of([losses])
    figure = history_figure(history_data(trials, rows, "loss", "min"), log_y=True)
    labels = drawn_y_labels(browser, figure)
    values = [float(label) for label in labels]
    assert len(values) >= 2, labels
    assert values == sorted(values), f"read bottom to top, the labels grow: {labels}"
    assert min(values) >= min(losses) / 10 and max(values) <= max(losses) * 10, labels
