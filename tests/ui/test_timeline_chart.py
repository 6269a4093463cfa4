"""The timeline chart: its data and traces for a real run with a pause and a fork,
`nbtune.plot_timeline`, and the dashboard's "timeline" tab, outside a kernel."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
import trainables
from waiting import EventLog

import nbtune as nt
from nbtune.events import TrialCompleted, TrialPaused, TrialResult, TrialStarted
from nbtune.timeline import HOWS
from nbtune.ui.timeline import HOW_COLORS, timeline_data, timeline_figure

LONG = 3000


def event_of(kind, trial_id):
    return lambda e: isinstance(e, kind) and e.trial_id == trial_id


def result_of(trial_id, iteration):
    return lambda e: (
        isinstance(e, TrialResult)
        and e.trial_id == trial_id
        and e.result["training_iteration"] >= iteration
    )


@pytest.fixture(scope="module")
def paused_and_forked(tmp_path_factory):
    """A finished run: trial 0 paused and resumed, trial 1 stopped by hand, trial 2 forked
    from trial 1."""
    log = EventLog()
    space = {"steps": nt.grid([15, LONG]), "checkpoint": True}
    tuner = nt.Tuner(
        trainables.steps,
        space,
        metric="loss",
        name="chart",
        storage_path=tmp_path_factory.mktemp("runs"),
        progress=False,
        max_concurrent=2,
        executor=nt.ThreadExecutor(),
        callbacks=[log],
    )
    tuner.start(display=False)
    log.wait_for(result_of(0, 3))
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0))
    tuner.resume(0)
    log.wait_for(result_of(1, 5))
    child = tuner.fork(1, {"steps": 10})
    log.wait_for(event_of(TrialStarted, child))
    tuner.stop(1)
    log.wait_for(event_of(TrialCompleted, child))
    assert tuner.wait(30)
    return tuner


def seconds_since(frame, column):
    origin = frame["start"].min()
    return ((frame[column] - origin).dt.total_seconds()).tolist()


def test_the_data_has_a_bar_per_stretch_in_its_row_and_a_link_per_fork(paused_and_forked):
    tuner = paused_and_forked
    frame = nt.timeline(tuner)
    assert sorted(frame["trial_id"]) == [0, 0, 1, 2]
    data = timeline_data(frame, by="trial")
    assert data.rows == ("trial 0", "trial 1", "trial 2")
    assert [bars.how for bars in data.bars] == list(HOWS)
    by_how = {bars.how: bars for bars in data.bars}
    assert by_how["paused"].rows == ("trial 0",)
    assert sorted(by_how["terminated"].rows) == ["trial 0", "trial 2"]
    assert by_how["stopped"].rows == ("trial 1",)
    assert data.segments == len(frame)
    starts, ends = seconds_since(frame, "start"), seconds_since(frame, "end")
    paused = frame.index[frame["how"] == "paused"][0]
    assert by_how["paused"].starts == pytest.approx((starts[paused],), abs=1e-6)
    assert by_how["paused"].lengths == pytest.approx((ends[paused] - starts[paused],), abs=1e-6)
    assert "trial 0 · attempt 1" in by_how["paused"].labels[0]

    (link,) = data.links
    parent = frame.index[frame["trial_id"] == 1][0]
    child = frame.index[frame["trial_id"] == 2][0]
    assert (link.parent, link.child, link.row0, link.row1) == (1, 2, "trial 1", "trial 2")
    assert link.x1 == pytest.approx(starts[child], abs=1e-6)
    assert link.x0 == pytest.approx(min(ends[parent], starts[child]), abs=1e-6)

    by_worker = timeline_data(frame, by="worker")
    assert by_worker.rows == ("worker 0", "worker 1")
    workers = dict(zip(frame.index, frame["worker"], strict=True))
    assert (by_worker.links[0].row0, by_worker.links[0].row1) == (
        f"worker {workers[parent]}",
        f"worker {workers[child]}",
    )


def test_the_figure_draws_a_bar_trace_per_way_of_ending_and_the_forks(paused_and_forked):
    figure = nt.plot_timeline(paused_and_forked, by="trial")
    bars, fork = figure.data[: len(HOWS)], figure.data[-1]
    assert [trace.name for trace in bars] == list(HOWS)
    assert all(trace.type == "bar" and trace.orientation == "h" for trace in bars)
    assert [trace.marker.color for trace in bars] == [HOW_COLORS[how] for how in HOWS]
    shown = {trace.name: trace for trace in bars if trace.showlegend}
    assert set(shown) == {"paused", "terminated", "stopped"}
    assert shown["paused"].y == ("trial 0",) and shown["stopped"].y == ("trial 1",)
    assert shown["stopped"].customdata == (1,)
    assert fork.name == "fork" and fork.y == ("trial 1", "trial 2", None)
    assert figure.layout.yaxis.categoryarray == ("trial 0", "trial 1", "trial 2")
    assert figure.layout.title.text == "timeline by trial"
    loaded = nt.plot_timeline(paused_and_forked.path, by="worker")
    assert loaded.layout.title.text == "timeline by worker: 3 trials on 2 workers"
    assert sum(len(trace.y) for trace in loaded.data[: len(HOWS)]) == 4


def test_the_figure_is_updated_in_place_and_an_empty_run_says_what_it_waits_for(make_tuner):
    tuner = make_tuner(trainables.steps, {"steps": 3})
    figure = go.FigureWidget()
    timeline_figure(timeline_data(nt.timeline(tuner)), figure)
    assert figure.layout.annotations[0].visible
    traces = figure.data
    tuner.run(display=False)
    timeline_figure(timeline_data(nt.timeline(tuner)), figure)
    assert figure.data[2] is traces[2], "the traces are kept"
    assert figure.data[2].y == ("worker 0",) and not figure.layout.annotations[0].visible


def test_a_bad_row_kind_is_refused_in_one_line(paused_and_forked):
    with pytest.raises(
        ValueError, match=r"^by='slot': draw the timeline by 'worker' or by 'trial'$"
    ):
        nt.plot_timeline(paused_and_forked, by="slot")


def test_the_live_dashboard_has_a_timeline_tab_that_grows_with_the_run(make_tuner, log):
    space = {"steps": nt.grid([LONG, 5])}
    tuner = make_tuner(trainables.steps, space, metric="loss", executor=nt.ThreadExecutor())
    tuner.subscribe(log)
    tuner.start(display=False)
    dashboard = tuner.dashboard()
    try:
        log.wait_for(event_of(TrialCompleted, 1))
        assert dashboard.ready.wait(30)
        dashboard.tabs.selected_index = dashboard.tab_names.index("timeline")
        dashboard.redraw()
        figure = dashboard.figures["timeline"]
        by_how = {trace.name: trace for trace in figure.data}
        assert by_how["running"].customdata == (0,), "trial 0 runs on"
        assert by_how["terminated"].customdata == (1,)
        first = by_how["running"].x[0]
        log.wait_for(result_of(0, len(log.of(TrialResult, 0)) + 3))
        dashboard.redraw()
        assert by_how["running"].x[0] > first, "a running stretch grows until now"
        dashboard.charts["timeline"].by.value = "trial"
        dashboard.redraw()
        assert figure.layout.yaxis.categoryarray == ("trial 0", "trial 1")
        tuner.stop()
        assert tuner.wait(30)
        dashboard.redraw()
        assert dashboard.failures == {}
    finally:
        tuner.stop()
        dashboard.close()


def test_a_loaded_run_without_a_metric_draws_its_timeline_tab(make_tuner):
    tuner = make_tuner(trainables.steps, {"steps": 3}, executor=nt.ThreadExecutor())
    tuner.run(display=False)
    dashboard = nt.load(tuner.path).dashboard()
    dashboard.tabs.selected_index = dashboard.tab_names.index("timeline")
    dashboard.redraw()
    figure = dashboard.figures["timeline"]
    assert {trace.name: trace.y for trace in figure.data}["terminated"] == ("worker 0",)
    assert dashboard.failures == {}
