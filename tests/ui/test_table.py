"""The trials table's page, computed in Python for the browser's table and its HTML fallback."""

from __future__ import annotations

import math

import pytest

from nbtune.trial import Trial, TrialStatus
from nbtune.ui.table import TableView, frame_html, page_state, static_table_html, table_page


def trial(trial_id, status="RUNNING", best=None, **config):
    return Trial(
        trial_id=trial_id,
        config=config,
        status=TrialStatus(status),
        best_value=best,
        last_result={} if best is None else {"loss": best},
        iteration=0 if best is None else 3,
    )


TRIALS = [
    trial(0, "TERMINATED", 0.5, lr=0.1, layers=2, kind="a"),
    trial(1, "RUNNING", 0.25, lr=0.01, layers=3, kind="b"),
    trial(2, "PAUSED", None, lr=0.001, layers=1, kind="a"),
    trial(3, "ERROR", 0.75, lr=0.3, layers=2, kind="b"),
]


BY_ID = TableView(sort="id")


def ids(page):
    return [row.trial_id for row in page.rows]


def test_a_column_per_parameter_and_the_metric_last_and_best():
    page = table_page(TRIALS, "loss", BY_ID, live=True)
    keys = [column.key for column in page.columns]
    assert keys == [
        "status",
        "id",
        "config/lr",
        "config/layers",
        "config/kind",
        "last",
        "best",
        "iteration",
        "runtime",
        "stopped_by",
    ]
    assert {c.key for c in page.columns if not c.numeric} == {"status", "config/kind", "stopped_by"}
    assert page.rows[1].cells["best"] == "0.25" and page.rows[2].cells["best"] == ""
    assert page.rows[0].config == "lr=0.1, layers=2, kind=a", "the whole config, for the hover"


@pytest.mark.parametrize(
    ("key", "ascending", "descending"),
    [
        ("best", [1, 0, 3, 2], [3, 0, 1, 2]),
        ("config/lr", [2, 1, 0, 3], [3, 0, 1, 2]),
        ("config/kind", [0, 2, 1, 3], [1, 3, 0, 2]),
    ],
)
def test_any_column_sorts_and_again_reverses_ties_by_id_missing_last(key, ascending, descending):
    view = TableView().sorted_by(key)
    assert ids(table_page(TRIALS, "loss", view, live=True)) == ascending
    again = view.sorted_by(key)
    assert again.descending
    assert ids(table_page(TRIALS, "loss", again, live=True)) == descending


def test_sorting_or_filtering_goes_back_to_the_first_page():
    many = [trial(i, "RUNNING", float(i)) for i in range(45)]
    view = TableView(page_size=20).turned(2)
    page = table_page(many, "loss", view, live=True)
    assert (page.page, page.pages, ids(page)[0]) == (2, 3, 40)
    assert table_page(many, "loss", view.sorted_by("best"), live=True).page == 0
    assert view.filtered("running").page == 0
    assert table_page(many, "loss", TableView(page=9), live=True).page == 2, "clamped"


def test_the_status_filter_keeps_one_status_and_refuses_unknown_ones():
    page = table_page(TRIALS, "loss", TableView().filtered("paused"), live=True)
    assert ids(page) == [2] and page.matching == 1
    with pytest.raises(ValueError, match="use one of all, running"):
        TableView().filtered("sleeping")


def test_actions_keep_their_order_and_a_finished_or_read_only_trial_has_none():
    page = table_page(TRIALS, "loss", BY_ID, live=True)
    assert [row.actions for row in page.rows] == [(), ("pause", "stop"), ("resume", "stop"), ()]
    read_only = table_page(TRIALS, "loss", BY_ID, live=False)
    assert all(row.actions == () for row in read_only.rows)


def test_planned_trials_not_started_yet_count_as_pending():
    page = table_page(TRIALS, "loss", TableView(), live=True, planned=12)
    assert page.unstarted == 8
    assert page.counts["PENDING"] == 8
    assert "8 more planned, not started yet" in page_state(page)["footer"]


def test_floats_show_four_significant_digits_and_nan_sorts_last():
    odd = [trial(0, best=1 / 3, lr=math.pi), trial(1, best=math.nan, lr=1.0)]
    page = table_page(odd, "loss", TableView().sorted_by("best").sorted_by("best"), live=True)
    assert ids(page) == [0, 1]
    assert page.rows[0].cells["best"] == "0.3333" and page.rows[0].cells["config/lr"] == "3.142"


def test_the_html_fallback_escapes_what_trials_hold():
    hostile = [trial(0, best=1.0, name="<script>alert(1)</script>")]
    text = static_table_html(page_state(table_page(hostile, "loss", TableView(), live=True)))
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_by_default_running_and_paused_trials_come_first_then_pending_then_ended():
    statuses = ["TERMINATED"] * 40 + ["RUNNING", "PENDING", "PAUSED", "ERROR"] * 6
    many = [trial(i, status, float(i)) for i, status in enumerate(statuses)]
    page = table_page(many, "loss", TableView(), live=True)
    first = [row.status for row in page.rows]
    assert first == ["RUNNING", "PAUSED"] * 6 + ["PENDING"] * 6 + ["TERMINATED"] * 2
    assert ids(page)[:3] == [40, 42, 44], "each group by id"
    assert page_state(page)["columns"][0]["key"] == "status"
    by_id = table_page(many, "loss", TableView().sorted_by("id"), live=True)
    assert ids(by_id) == list(range(20)), "the user's own sort wins"
    back = table_page(many, "loss", TableView().sorted_by("status"), live=True)
    last = table_page(many, "loss", TableView(page=3).sorted_by("status").turned(3), live=True)
    assert ids(back) == list(range(20)), "sorting by status again puts the ended ones first"
    assert {row.status for row in last.rows} == {"RUNNING", "PAUSED"}, "and the running last"


def test_a_filter_that_matches_nothing_says_so_in_the_table():
    page = table_page(TRIALS, "loss", TableView().filtered("pending"), live=True)
    state = page_state(page)
    assert state["rows"] == []
    assert state["empty"] == "no pending trials (of 4): show all to see them"
    assert "no pending trials (of 4)" in static_table_html(state)
    assert page_state(table_page([], "loss", TableView(), live=True))["empty"] == "no trials yet"
    assert page_state(table_page(TRIALS, "loss", TableView(), live=True))["empty"] == ""


def test_a_trial_waiting_again_says_why_and_how_it_goes_on():
    resumed = Trial(5, {"lr": 0.1}, iteration=12, checkpoint="c", checkpoint_iteration=12)
    retried = Trial(6, {"lr": 0.1}, attempts=2)
    fresh = Trial(7, {"lr": 0.1})
    suspended = Trial(8, {"lr": 0.1}, status=TrialStatus.PAUSED, paused_by="suspend", iteration=3)
    page = table_page([resumed, retried, fresh, suspended], "loss", BY_ID, live=True)
    notes = [row["note"] for row in page_state(page)["rows"]]
    assert notes == [
        "waits for a worker · resumes from iter 12",
        "waits for a worker · attempt 2, from the start",
        "",
        "holds its worker (cannot checkpoint)",
    ]
    assert "resumes from iter 12" in static_table_html(page_state(page))
    ended = table_page([resumed], "loss", BY_ID, live=False)
    assert ended.rows[0].note == "", "a run that has ended waits for nothing"


def test_a_running_trial_the_user_paused_says_pausing_until_its_next_report():
    pausing = Trial(1, {"lr": 0.1}, status=TrialStatus.RUNNING, iteration=3, user_paused=True)
    paused = Trial(2, {"lr": 0.1}, status=TrialStatus.PAUSED, iteration=3, user_paused=True)
    page = page_state(table_page([pausing, paused], "loss", BY_ID, live=True))
    first, second = page["rows"]
    assert (first["cells"]["status"], first["note"]) == ("pausing", "pauses at its next report")
    assert first["actions"] == ["resume", "stop"], "its Pause is done: Resume takes it back"
    assert second["cells"]["status"] == "paused"
    still = table_page([pausing], "loss", TableView(status="running"), live=True)
    assert ids(still) == [1], "it still runs: the running filter keeps it"
    ended = table_page([pausing], "loss", BY_ID, live=False)
    assert ended.rows[0].cells["status"] == "running", "a run read back shows what it recorded"


def test_several_metrics_have_a_column_each_and_the_pareto_front_is_marked():
    def scored(trial_id, loss, latency):
        return Trial(trial_id, {"lr": 0.1}, iteration=2, last_result={"loss": loss, "ms": latency})

    trials = [scored(0, 0.5, 10.0), scored(1, 0.2, 30.0), scored(2, 0.6, 40.0)]
    page = table_page(trials, ["loss", "ms"], BY_ID, live=True, mode=["min", "min"])
    columns = {column.key: column.label for column in page.columns}
    assert "best" not in columns and "last" not in columns, "no empty best column"
    assert (columns["last/loss"], columns["last/ms"], columns["pareto"]) == (
        "last loss",
        "last ms",
        "Pareto",
    )
    cells = [row.cells for row in page.rows]
    assert [(c["last/loss"], c["last/ms"], c["pareto"]) for c in cells] == [
        ("0.5", "10", "★"),
        ("0.2", "30", "★"),
        ("0.6", "40", ""),
    ]
    front_first = table_page(trials, ["loss", "ms"], TableView().sorted_by("pareto"), True)
    assert ids(front_first)[-1] == 2
    assert ids(table_page(trials, ["loss", "ms"], BY_ID.sorted_by("last/ms"), True)) == [0, 1, 2]


def test_the_dataframe_tab_leaves_missing_values_blank_and_draws_light_rules():
    import pandas as pd

    frame = pd.DataFrame(
        {
            "trial_id": [0, 1],
            "loss": [1 / 3, math.nan],
            "stopped_by": pd.array([None, "user"], dtype="string"),
            "parent": pd.array([pd.NA, 0], dtype="Int64"),
            "config/act": ["<relu>", None],
        }
    )
    text = frame_html(frame)
    assert "NA" not in text and "nan" not in text and "None" not in text
    assert "0.3333" in text and "0.333333" not in text
    assert "&lt;relu&gt;" in text and "<relu>" not in text
    assert 'border="1"' not in text and "class='nbtune-frame'" in text
    assert "var(--jp-ui-font-family" in text and "var(--jp-border-color" in text, "theme aware"
    number = '<td class="nbtune-number">'
    assert f"<tr>{number}0</td>{number}0.3333</td><td></td>{number}</td>" in text
    assert f"<tr>{number}1</td>{number}</td><td>user</td>{number}0</td><td></td></tr>" in text
    long = frame_html(pd.DataFrame({"x": range(70)}))
    assert long.count("<tr>") == 61 and "the first 60 of 70 trials" in long
