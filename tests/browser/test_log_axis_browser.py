"""Log scales as plotly.js draws them in Chromium: what the learning curves' y axis and a
log-scale parameter's panel say."""

from __future__ import annotations

import pytest
from ui.test_data import run_of, scored_trials

from nbtune.ui.data import history_data, parameter_data
from nbtune.ui.figures import history_figure, parameter_scatter_figure

pytestmark = pytest.mark.browser

LABELS = "(axis) => [...document.querySelectorAll(`.${axis}tick text`)].map(t => t.textContent)"


def drawn_labels(browser, figure, axis: str) -> list[float]:
    """The tick labels of `figure`'s `axis` ("y", "x") drawn in a page of its own, in the
    order of the axis, read as numbers."""
    page = browser.new_page()
    try:
        page.set_content(figure.to_html(include_plotlyjs=True, full_html=True))
        page.wait_for_selector(f".{axis}tick text")
        labels = page.evaluate(LABELS, axis)
    finally:
        page.close()
    assert len(labels) >= 2, labels
    return [float(label) for label in labels]


def assert_whole_numbers(values: list[float], low: float, high: float) -> None:
    assert values == sorted(values), f"along the axis, the labels grow: {values}"
    assert min(values) >= low / 10 and max(values) <= high * 10, values


@pytest.mark.parametrize(
    "losses",
    [[1.0, 0.6, 0.3, 0.15, 0.1], [0.9, 0.5, 0.35], [50.0, 3.0, 0.2, 0.01, 0.002]],
    ids=["one decade", "within a decade", "five decades"],
)
def test_on_a_log_scale_every_tick_says_its_whole_number(browser, losses):
    trials, rows = run_of([losses])
    figure = history_figure(history_data(trials, rows, "loss", "min"), log_y=True)
    assert_whole_numbers(drawn_labels(browser, figure, "y"), min(losses), max(losses))


def test_a_log_scale_parameter_s_panel_says_whole_numbers(browser):
    rates = [0.011, 0.02, 0.04, 0.09]
    trials = scored_trials([{"lr": rate} for rate in rates], lambda config: config["lr"])
    figure = parameter_scatter_figure(parameter_data(trials, "score", log_scale={"lr"}))
    assert_whole_numbers(drawn_labels(browser, figure, "x"), min(rates), max(rates))
