"""`nbtune.browse(storage_path)`: the runs as a table; Open one, Compare several, driven from
Python as a user's clicks would."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
import trainables

import nbtune as nt
from nbtune.ui.browse import RunBrowser


@pytest.fixture
def three_runs(make_tuner):
    tuners = []
    for name in ("alpha", "beta", "gamma"):
        tuner = make_tuner(
            trainables.steps,
            {"lr": nt.uniform(0.1, 1), "steps": 3, "interval": 0},
            metric="loss",
            num_samples=3,
            name=name,
            executor=nt.ThreadExecutor(),
        )
        tuner.run()
        tuners.append(tuner)
    return tuners


def test_the_table_lists_every_run(three_runs, runs):
    browser = nt.browse(runs)
    assert isinstance(browser, RunBrowser)
    for tuner in three_runs:
        assert f"<td>{tuner.name}</td>" in browser.table.value
    assert [path for _, path in browser.picker.options] == [str(t.path) for t in three_runs]
    assert "alpha (finished, best" in browser.picker.options[0][0]
    assert browser.open_button.disabled and browser.compare_button.disabled, "nothing picked"


def test_open_one_shows_its_read_only_dashboard(three_runs, runs):
    browser = nt.browse(runs)
    browser.select("beta")
    assert not browser.open_button.disabled and browser.compare_button.disabled
    browser.open_button.click()
    (shown,) = browser.detail.children
    dashboard = browser._dashboard
    assert shown is dashboard.widget
    assert dashboard.source.path == three_runs[1].path and not dashboard.live
    assert browser.message.value == ""

    browser.select("gamma")
    browser.open_button.click()
    assert browser._dashboard.source.path == three_runs[2].path
    assert dashboard._closing.is_set(), "the dashboard shown before is closed"


def test_compare_several_shows_their_curves(three_runs, runs):
    browser = nt.browse(runs)
    browser.select("alpha", "gamma")
    assert browser.open_button.disabled and not browser.compare_button.disabled
    browser.compare_button.click()
    (shown,) = browser.detail.children
    assert isinstance(shown, go.FigureWidget)
    assert [trace.name for trace in shown.data] == ["alpha", "gamma"]
    assert shown.data[1].y[-1] == three_runs[2].best_result["loss"]


def test_a_run_that_cannot_be_read_says_so_in_one_line(three_runs, runs):
    browser = nt.browse(runs)
    (three_runs[0].path / "experiment.json").write_text("{torn")
    browser.select("alpha")
    browser.open_button.click()
    assert browser.detail.children == ()
    assert "experiment.json" in browser.message.value and "corrupted" in browser.message.value
    browser.select("alpha", "beta")
    browser.compare_button.click()
    assert "corrupted" in browser.message.value and browser.detail.children == ()


def test_refresh_shows_a_new_run_and_keeps_the_picked(three_runs, runs, make_tuner):
    browser = nt.browse(runs)
    browser.select("beta")
    make_tuner(
        trainables.count_up, {"x": 1}, metric="loss", name="delta", executor=nt.ThreadExecutor()
    ).run()
    assert "delta" not in browser.table.value
    browser.refresh_button.click()
    assert "<td>delta</td>" in browser.table.value
    assert browser.selected == (str(three_runs[1].path),)


def test_an_empty_folder_and_a_file(tmp_path):
    browser = nt.browse(tmp_path)
    assert "No runs" in browser.table.value and browser.picker.options == ()
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="is a file"):
        nt.browse(tmp_path / "file")
    with pytest.raises(ValueError, match="no run named 'x'"):
        browser.select("x")
