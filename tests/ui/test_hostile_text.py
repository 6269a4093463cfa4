"""Text that trials hold reaches the browser as text, and in bounded amounts: a metric or a
configuration holding plotly's markup (links, bold) is shown, not drawn, and a 20 KB string
parameter costs the dashboard's widgets a few hundred bytes per trial, not megabytes."""

from __future__ import annotations

import json

import ipywidgets as widgets
import pytest

import nbtune as nt
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.pareto import pareto_data, pareto_figure
from nbtune.ui.table import CONFIG_WIDTH, HOVER_CHARS, TableView, page_state, table_page

LINK = "<a href='https://example.com'>click</a>"
BIG = "x" * 20_000


def _markup(text: str) -> list[str]:
    """plotly's tags in `text`, but the line breaks nbtune puts there itself."""
    return [tag for tag in ("<a ", "<a>", "<b>", "<i>", "<span", "<sup") if tag in text]


@pytest.mark.parametrize("count", [2, 3, 4])
def test_the_pareto_chart_shows_metric_names_and_configs_as_text(count):
    metrics = [f"<b>m{index}</b>" for index in range(count)]
    trials = [
        Trial(i, {"url": LINK, "note": BIG}, status=TrialStatus.TERMINATED).evolve(
            last_result={name: float(i + position) for position, name in enumerate(metrics)}
        )
        for i in range(3)
    ]
    figure = pareto_figure(pareto_data(trials, metrics, ["min"] * count))
    drawn = figure.to_json().replace("\\u002f", "/")
    assert _markup(drawn) == [], "no tag of a metric name or a config value reaches plotly"
    assert "&lt;b&gt;m0&lt;/b&gt;" in drawn and ("&lt;a href" in drawn or count > 3)
    assert len(drawn) < 20_000, "a hover text holds a bounded part of the configuration"


def test_a_cell_of_the_table_holds_at_most_its_width_and_the_hover_a_bounded_config():
    trials = [Trial(0, {"note": BIG, "lr": 0.1}, status=TrialStatus.RUNNING)]
    state = page_state(table_page(trials, None, TableView(), live=True))
    row = state["rows"][0]
    assert len(row["cells"]["config/note"]) == CONFIG_WIDTH
    assert row["cells"]["config/note"].endswith("…")
    assert row["cells"]["config/lr"] == "0.1"
    assert len(row["config"]) == HOVER_CHARS and row["config"].endswith("…")


@pytest.mark.parametrize("size", [20_000])
def test_a_big_string_parameter_costs_the_widgets_little(make_tuner, size):
    small, big = _dashboard_bytes(make_tuner, 1), _dashboard_bytes(make_tuner, size)
    extra = {name: big[name] - small.get(name, 0) for name in big}
    assert sum(extra.values()) < 20 * 2_000, f"bytes of widget state a {size} B value adds: {extra}"


def _dashboard_bytes(make_tuner, size: int) -> dict[str, int]:
    """The bytes of widget state, by kind of widget, of a dashboard that has drawn each of
    its tabs, for a run of 20 trials with a string parameter of `size` characters."""

    def train(config):
        for step in range(1, 4):
            nt.report(loss=len(config["note"]) / step + config["lr"])

    space = {"note": nt.choice(["x" * size, "y" * size]), "lr": nt.uniform(0, 1)}
    tuner = make_tuner(
        train, space, metric="loss", num_samples=20, seed=0, executor=nt.ThreadExecutor()
    )
    tuner.run(display=False)
    before = set(widgets.Widget.widgets)
    dashboard = tuner.dashboard()
    assert dashboard.ready.wait(30)
    try:
        for index, _ in enumerate(dashboard.tab_names):  # each tab draws when shown
            dashboard.tabs.selected_index = index
            dashboard.redraw()
        assert dashboard.failures == {}
        shown = [w for key, w in list(widgets.Widget.widgets.items()) if key not in before]
        sent = {type(widget).__name__: 0 for widget in shown}
        for widget in shown:
            sent[type(widget).__name__] += _state_bytes(widget)
    finally:
        dashboard.close()
    return sent


def _state_bytes(widget: widgets.Widget) -> int:
    """The bytes of a widget's state as a page that shows it receives them, but the code of
    its front end (plotly's bundle, the same whatever the run)."""
    state, _, buffers = widgets.widget._remove_buffers(widget.get_state())
    data = {key: value for key, value in state.items() if key not in ("_esm", "_css")}
    return len(json.dumps(data, default=str)) + sum(len(buffer) for buffer in buffers)
