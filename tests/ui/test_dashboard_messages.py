"""The dashboard outside a browser: the messages its table sends, failures that stay in their
part, the static fallback, and the state a reloaded page reads back."""

from __future__ import annotations

import threading
import time

import pytest
import trainables
from waiting import eventually

import nbtune as nt
from nbtune.events import TrialPaused, TrialResult
from nbtune.ui import dashboard as dashboard_module
from nbtune.ui import fallback, figures

SPACE = {"lr": nt.loguniform(1e-4, 1e-1), "width": nt.uniform(0, 1), "kind": nt.choice(["a", "b"])}


@pytest.fixture
def held_run(make_tuner, log):
    """A live run of four trials on threads, two at a time, each reporting every 20 ms until
    `finish` is set; yields (tuner, dashboard, finish) once two trials have reported."""
    finish = threading.Event()

    def train(config):
        checkpoint = nt.get_checkpoint()
        step = checkpoint["step"] if checkpoint else 0
        while not finish.is_set():
            step += 1
            nt.report(loss=config["width"] / step + config["lr"], checkpoint={"step": step})
            finish.wait(0.02)

    tuner = make_tuner(
        train,
        SPACE,
        metric="loss",
        num_samples=4,
        max_concurrent=2,
        executor=nt.ThreadExecutor(),
    )
    tuner.subscribe(log)
    tuner.start(display=False)
    log.wait_for(lambda _: len({e.trial_id for e in log.of(TrialResult)}) == 2)
    dashboard = tuner.dashboard()
    assert dashboard.ready.wait(30)
    yield tuner, dashboard, finish
    finish.set()
    tuner.stop()
    tuner.wait(30)
    dashboard.close()


def send(dashboard, message):
    """A message from the browser's table, through the widget's own message handler."""
    dashboard.table._handle_custom_msg(message, [])


def test_the_table_s_messages_sort_filter_select_and_act(held_run, log):
    tuner, dashboard, _ = held_run
    dashboard.redraw()
    assert dashboard.visible_ids() == [0, 1]
    assert "2 more planned, not started yet" in dashboard.table.table["footer"]
    assert dashboard.table.sort == "status", "running trials first by default"
    send(dashboard, {"type": "sort", "key": "id"})
    send(dashboard, {"type": "sort", "key": "id"})
    dashboard.redraw()
    assert dashboard.visible_ids() == [1, 0], "sorting by the same column reverses"
    assert (dashboard.table.sort, dashboard.table.descending) == ("id", True)
    send(dashboard, {"type": "action", "action": "pause", "trial_id": 0})
    log.wait_for(lambda e: isinstance(e, TrialPaused) and e.trial_id == 0)
    send(dashboard, {"type": "filter", "status": "paused"})
    dashboard.redraw()
    assert dashboard.visible_ids() == [0]
    send(dashboard, {"type": "select", "trial_id": 1})
    dashboard.tabs.selected_index = dashboard.tab_names.index("trial")
    dashboard.redraw()
    assert "<b>trial 1</b>" in dashboard.trial_view.value
    send(dashboard, {"type": "action", "action": "explode", "trial_id": 1})
    send(dashboard, {"type": "page", "step": 7})
    dashboard.redraw()
    assert tuner.get_trial(1).status is nt.TrialStatus.RUNNING, "odd messages do nothing"


def test_a_click_shows_in_the_table_while_a_chart_is_being_drawn(held_run, monkeypatch):
    _, dashboard, _ = held_run
    drawing, release = threading.Event(), threading.Event()
    history_figure = figures.history_figure

    def slow(*args, **kwargs):
        drawing.set()
        release.wait(30)
        return history_figure(*args, **kwargs)

    monkeypatch.setattr(figures, "history_figure", slow)
    dashboard.pacer.ask()
    assert drawing.wait(30), "the refresh thread draws the learning curves"
    try:
        send(dashboard, {"type": "action", "action": "pause", "trial_id": 0})
        line = next(row for row in dashboard.table.table["rows"] if row["id"] == 0)
        assert line["cells"]["status"] in ("pausing", "paused"), line
        assert line["actions"] == ["resume", "stop"]
        send(dashboard, {"type": "sort", "key": "id"})
        assert dashboard.table.sort == "id", "a sort shows before the chart is drawn too"
    finally:
        release.set()


def test_a_chart_that_fails_shows_one_line_and_the_rest_goes_on(held_run, monkeypatch):
    _, dashboard, _ = held_run
    calls = []

    def broken(data, figure=None, **options):
        calls.append(1)
        raise KeyError("xaxis2\nand a long story")

    monkeypatch.setattr(figures, "parameter_scatter_figure", broken)
    dashboard.tabs.selected_index = dashboard.tab_names.index("parameters")
    for _ in range(20):
        dashboard.redraw()
    assert len(calls) == 1, ("tried again only after RETRY_AFTER_S", dashboard.failures)
    message = dashboard.message.value
    assert message.count("nbtune-error") == 1
    assert "the parameters could not be drawn: KeyError: xaxis2 (tried" in message
    assert "and a long story" not in message.split("</summary>")[0], "one line"
    assert "Traceback" in message, "the traceback is folded under it"
    before = dashboard.table.table["rows"][0]["cells"]["iteration"]
    eventually(
        lambda: (
            dashboard.redraw() or dashboard.table.table["rows"][0]["cells"]["iteration"] != before
        ),
        "the table still draws",
    )

    monkeypatch.setattr(dashboard_module, "RETRY_AFTER_S", 0.0)
    monkeypatch.undo()
    dashboard.failures["parameters"] = (-1e9, *dashboard.failures["parameters"][1:])
    dashboard.redraw()
    assert "nbtune-error" not in dashboard.message.value, "it recovers once drawing works"
    assert len(dashboard.figures["parameters"].data) > 0


def test_a_reloaded_page_reads_the_chart_as_it_is_now(held_run):
    _, dashboard, _ = held_run
    dashboard.redraw()
    figure = dashboard.figures["learning curves"]
    dashboard.redraw()
    state = figure.get_state()
    assert len(state["_widget_data"]) == 2, "what the browser fetches on a reload"
    assert [trace["name"] for trace in state["_widget_data"]] == [t.name for t in figure.data]
    assert all(len(trace["y"]) >= 1 for trace in state["_widget_data"]), "with their points"
    assert state["_widget_layout"]["title"] == figure.layout.title.to_plotly_json()


def test_without_a_front_end_that_draws_it_the_dashboard_turns_static(held_run, monkeypatch):
    _, dashboard, _ = held_run
    monkeypatch.setattr(fallback, "RENDER_GRACE_S", 0.1)
    bundle = dashboard._repr_mimebundle_()
    assert bundle["text/plain"].startswith("nbtune dashboard of "), "no widget repr"
    assert "VBox" not in bundle["text/plain"]
    eventually(lambda: dashboard.static_charts, "the fallback")
    assert dashboard.static_table.widget in dashboard.widget.children
    assert dashboard.table not in dashboard.widget.children
    eventually(lambda: "nbtune-static-table" in dashboard.static_table.body.value, "the table")
    chart = dashboard.charts["learning curves"]
    eventually(lambda: chart._output is not None and chart._output.outputs, "a static chart")
    (output,) = chart._output.outputs
    spec = output["data"]["application/vnd.plotly.v1+json"]
    assert spec["data"] and spec["layout"]["title"], "plotly's own output, no widget"


def test_a_browser_that_draws_the_table_keeps_the_widgets_and_gives_its_theme(held_run):
    _, dashboard, _ = held_run
    send(dashboard, {"type": "rendered", "dark": True})
    dashboard._shown_at = time.monotonic() - 3600
    dashboard._check_front_end()
    assert (dashboard.rendered, dashboard.dark, dashboard.static_charts) == (True, True, False)


def test_a_front_end_that_draws_the_table_but_not_a_chart_gets_static_charts(held_run, monkeypatch):
    _, dashboard, _ = held_run
    send(dashboard, {"type": "rendered", "dark": False})
    monkeypatch.setattr(fallback, "RENDER_GRACE_S", 0.1)
    dashboard._repr_mimebundle_()
    eventually(lambda: dashboard.static_charts, "static charts")
    assert dashboard.static_table is None, "the table, which the browser drew, stays"
    assert dashboard.table in dashboard.widget.children


def test_a_chart_the_browser_drew_stays_live(held_run, monkeypatch):
    _, dashboard, _ = held_run
    send(dashboard, {"type": "rendered", "dark": False})
    dashboard.redraw()
    figure = dashboard.figures["learning curves"]
    layout = {"layout_delta": {"xaxis": {"range": [0, 1]}}, "layout_edit_id": 0}
    figure.set_state({"_js2py_layoutDelta": layout})
    monkeypatch.setattr(fallback, "RENDER_GRACE_S", 0.0)
    dashboard._shown_at = time.monotonic() - 3600
    dashboard._check_front_end()
    assert not dashboard.static_charts
    assert dashboard.figures["learning curves"] is figure


def test_once_a_table_was_drawn_a_late_one_keeps_its_widgets(held_run, monkeypatch):
    """A page drawing several dashboards at once (Run All, a loaded machine) draws the last
    ones' tables late: its front end is slow, not unable, and gets no fallback for it."""
    tuner, drawn, _ = held_run
    monkeypatch.setattr(fallback, "RENDER_GRACE_S", 0.0)
    send(drawn, {"type": "rendered", "dark": False})
    late = dashboard_module.Dashboard(tuner)  # another dashboard of the run
    assert late.ready.wait(30)
    late._shown_at = time.monotonic() - 60
    late._check_front_end()
    assert (late.static_table, late.static_charts) == (None, False)
    late._shown_at = time.monotonic() - fallback.DRAWN_BEFORE_GRACE_S
    late._check_front_end()
    assert late.static_charts and late.static_table is not None, "a page that went away"
    late.close()


def test_once_a_chart_was_drawn_a_late_one_stays_live(held_run, monkeypatch):
    tuner, drawn, _ = held_run
    monkeypatch.setattr(fallback, "RENDER_GRACE_S", 0.0)
    send(drawn, {"type": "rendered", "dark": False})
    drawn.redraw()
    layout = {"layout_delta": {"xaxis": {"range": [0, 1]}}, "layout_edit_id": 0}
    drawn.figures["learning curves"].set_state({"_js2py_layoutDelta": layout})
    late = dashboard_module.Dashboard(tuner)  # another dashboard of the run
    assert late.ready.wait(30)
    send(late, {"type": "rendered", "dark": False})
    late.redraw()
    late._shown_at = time.monotonic()
    late.shared.made_at["learning curves"] = time.monotonic() - 60
    late._check_front_end()
    assert not late.static_charts
    late.shared.made_at["learning curves"] = time.monotonic() - fallback.DRAWN_BEFORE_GRACE_S
    late._check_front_end()
    assert late.static_charts and late.static_table is None
    late.close()


def test_the_errors_tab_shows_each_failed_trial_with_its_traceback(make_tuner):
    tuner = make_tuner(
        trainables.fail_at,
        {"fail_at": nt.grid([2, 3])},
        metric="loss",
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    dashboard = tuner.dashboard()
    assert dashboard.ready.wait(30)
    dashboard.tabs.selected_index = dashboard.tab_names.index("errors")
    dashboard.redraw()
    shown = dashboard.errors.value
    assert shown.count("<details>") == 2
    assert "trial 1: ValueError: boom at step 3" in shown
    assert "Traceback" in shown and "raise ValueError" in shown, "error.txt, read from disk"
    dashboard.close()
