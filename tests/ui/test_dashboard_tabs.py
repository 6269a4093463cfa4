"""The dashboard's header, table and views in real runs (threads, no browser): what a long
run, a stopped run and a run of several metrics show."""

from __future__ import annotations

import threading
import time
from xml.etree import ElementTree

import pytest

import nbtune as nt
from nbtune.events import TrialResult
from nbtune.ui.data import TRIAL_COLORS, trial_color
from nbtune.ui.summary import summary_html
from nbtune.ui.views import TrialSeries

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def held(make_tuner, log):
    """Starts a run whose trials report (and checkpoint) every 10 ms until `finish` is set;
    returns (tuner, finish). The run is stopped at the end of the test."""
    finish = threading.Event()
    started = []

    def train(config):
        checkpoint = nt.get_checkpoint()
        step = checkpoint["step"] if checkpoint else 0
        while not finish.is_set():
            step += 1
            nt.report(loss=config["x"] / step, checkpoint={"step": step})
            finish.wait(0.01)

    def start(**options):
        tuner = make_tuner(train, {"x": nt.uniform(0, 1)}, executor=nt.ThreadExecutor(), **options)
        tuner.subscribe(log)
        tuner.start(display=False)
        started.append(tuner)
        return tuner

    yield start, finish
    finish.set()
    for tuner in started:
        if tuner.live:
            tuner.stop()
        tuner.wait(30)


def reported(log, *trial_ids):
    return lambda _: {e.trial_id for e in log.of(TrialResult)} >= set(trial_ids)


def test_after_stop_all_the_header_says_how_many_of_the_planned_trials_ran(held, log):
    start, _ = held
    tuner = start(metric="loss", num_samples=20, max_concurrent=4)
    log.wait_for(reported(log, 0, 1, 2, 3))
    dashboard = tuner.dashboard()
    assert dashboard.ready.wait(30)
    try:
        dashboard.redraw()
        assert "<b>0 / 20</b> trials done" in dashboard.done.value
        dashboard.stop_all.click()
        assert tuner.wait(30) and tuner.state == "stopped"
        dashboard.redraw()
        assert "<b>4 of 20</b> planned trials ran · stopped" in dashboard.done.value
        assert (dashboard.progress.value, dashboard.progress.max) == (4, 20)
    finally:
        dashboard.close()
    later = nt.load(tuner.path).dashboard()
    try:
        assert "<b>4</b> trials ran · stopped" in later.done.value, "the plan is not on disk"
    finally:
        later.close()


def test_a_resumed_trial_without_a_worker_says_it_waits_for_one(held, log):
    start, _ = held
    tuner = start(metric="loss", num_samples=3, max_concurrent=1)
    log.wait_for(reported(log, 0))
    dashboard = tuner.dashboard()
    assert dashboard.ready.wait(30)
    try:
        tuner.pause(0)
        log.wait_for(reported(log, 1))
        tuner.resume(0)
        trial = tuner.get_trial(0)
        assert trial.status is nt.TrialStatus.PENDING, "trial 1 holds the only worker"
        dashboard.redraw()
        rows = dashboard.table.table["rows"]
        assert [row["id"] for row in rows][:2] == [1, 0], "running first, then pending"
        note = rows[1]["note"]
        assert note == f"waits for a worker · resumes from iter {trial.checkpoint_iteration}"
        dashboard.table._handle_custom_msg({"type": "filter", "status": "error"}, [])
        dashboard.redraw()
        assert dashboard.table.table["rows"] == []
        total = len(tuner.trials)
        assert (
            dashboard.table.table["empty"] == f"no error trials (of {total}): show all to see them"
        )
    finally:
        dashboard.close()


def test_several_metrics_show_each_one_in_the_table_and_colour_the_summary(make_tuner):
    def train(config):
        for step in range(1, 4):
            nt.report(loss=config["x"] / step, ms=(1 - config["x"]) * 10 + step)

    tuner = make_tuner(
        train,
        {"x": nt.grid([i / 12 for i in range(12)])},
        metric=["loss", "ms"],
        mode=["min", "min"],
        executor=nt.ThreadExecutor(),
    )
    tuner.run(display=False)
    front = {trial.trial_id for trial in tuner.best_trials}
    dashboard = tuner.dashboard()
    try:
        dashboard.view = dashboard.view.sorted_by("id")
        dashboard.redraw()
        state = dashboard.table.table
        keys = [column["key"] for column in state["columns"]]
        assert {"last/loss", "last/ms", "pareto"} <= set(keys) and "best" not in keys
        marked = {row["id"] for row in state["rows"] if row["cells"]["pareto"] == "★"}
        assert marked == front and len(front) == 12, "every trial trades one for the other"
        assert all(row["cells"]["last/ms"] for row in state["rows"])
    finally:
        dashboard.close()

    svg = summary_html(tuner, tuner.state)
    root = ElementTree.fromstring(svg[svg.index("<svg") : svg.index("</svg>") + 6])
    strokes = [
        line.get("stroke")
        for line in root.iter(f"{SVG}polyline")
        if line.find(f"{SVG}title") is not None
    ]
    coloured = [stroke for stroke in strokes if stroke in TRIAL_COLORS]
    assert len(coloured) == 10, f"the ten first of the front in their colours: {strokes}"


def test_the_trial_tab_shows_a_local_time_and_a_curve_and_the_dataframe_tab_is_styled(
    make_tuner,
):
    def train(config):
        for step in range(1, 6):
            nt.report(loss=config["x"] / step, note=None if step % 2 else "even")

    tuner = make_tuner(
        train, {"x": nt.grid([1.0, 2.0])}, metric="loss", executor=nt.ThreadExecutor()
    )
    tuner.run(display=False)
    stamp = tuner.get_trial(1).last_result["timestamp"]
    dashboard = tuner.dashboard()
    try:
        dashboard.table._handle_custom_msg({"type": "select", "trial_id": 1}, [])
        dashboard.tabs.selected_index = dashboard.tab_names.index("trial")
        dashboard.redraw()
        shown = dashboard.trial_view.value
        assert time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) in shown
        assert "e+09" not in shown
        svg = shown[shown.index("<svg") : shown.index("</svg>") + 6]
        root = ElementTree.fromstring(svg)
        line = [p for p in root.iter(f"{SVG}polyline") if p.get("stroke") == trial_color(1)]
        assert len(line) == 1 and len(line[0].get("points").split()) == 5, "its 5 values"
        assert "loss · last 0.4 (iter 5)" in svg

        dashboard.tabs.selected_index = dashboard.tab_names.index("dataframe")
        dashboard.redraw()
        frame = dashboard.frame.value
        assert (
            "class='nbtune-frame'" in frame and "&lt;NA&gt;" not in frame and ">nan<" not in frame
        )
        assert ">None<" not in frame
        assert 'border="1"' not in frame
    finally:
        dashboard.close()


class CountingRows(list):
    """Result rows that count how many of them are read."""

    reads = 0

    def __getitem__(self, index):
        self.reads += 1
        return super().__getitem__(index)


def test_the_trial_tab_reads_only_the_results_added_since_its_last_redraw():
    series = TrialSeries()
    rows = CountingRows(
        {"trial_id": i % 4, "training_iteration": i // 4 + 1, "loss": float(i)} for i in range(4000)
    )
    assert series.read(rows, 1, ["loss"])["loss"][0][:3] == [1, 2, 3]
    rows.reads = 0
    rows.append({"trial_id": 1, "training_iteration": 1001, "loss": 0.5})
    xs, ys = series.read(rows, 1, ["loss"])["loss"]
    assert rows.reads == 1, "one new row read, not 4001"
    assert (len(xs), xs[-1], ys[-1]) == (1001, 1001, 0.5)
    rows.append({"trial_id": 1, "training_iteration": 998, "loss": 9.0})
    xs, ys = series.read(rows, 1, ["loss"])["loss"]
    assert (xs[-2:], ys[-1]) == ([997, 998], 9.0), "started again from iteration 998"
    assert series.read(rows, 2, ["loss"])["loss"][0][0] == 1, "another trial: read anew"
