"""The trials table's page, computed in Python for the browser's table and its HTML fallback."""

from __future__ import annotations

import math

import pytest

from nbtune.trial import Trial, TrialStatus
from nbtune.ui.table import TableView, page_state, static_table_html, table_page


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


def ids(page):
    return [row.trial_id for row in page.rows]


def test_a_column_per_parameter_and_the_metric_last_and_best():
    page = table_page(TRIALS, "loss", TableView(), live=True)
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
    page = table_page(TRIALS, "loss", TableView(), live=True)
    assert [row.actions for row in page.rows] == [(), ("pause", "stop"), ("resume", "stop"), ()]
    read_only = table_page(TRIALS, "loss", TableView(), live=False)
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
