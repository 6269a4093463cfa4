"""The static SVG of the learning curves: well-formed, in range, escaped, no script."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import pytest
from ui.test_data import run_of

from nbtune.trial import Trial, TrialStatus
from nbtune.ui.data import FEATURED_CURVES, TRIAL_COLORS, history_data
from nbtune.ui.static import MAX_SVG_POINTS, learning_curves_svg

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ElementTree.Element:
    root = ElementTree.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def points_of(polyline: ElementTree.Element) -> list[tuple[float, float]]:
    return [tuple(map(float, pair.split(","))) for pair in polyline.get("points").split()]


def curves_of(losses, statuses=None, metric="loss"):
    trials, rows = run_of(losses, statuses)
    return history_data(trials, rows, metric, "min")


def test_one_polyline_per_curve_inside_the_picture_in_the_trials_colours():
    data = curves_of([[3.0, 2.0, 1.5], [2.5, 1.0], [4.0]], {1: TrialStatus.PAUSED})
    root = parse(learning_curves_svg(data, width=500, height=250))
    assert (root.get("width"), root.get("height")) == ("500", "250")
    lines = root.findall(f"{SVG}polyline[@points]")
    curves = [line for line in lines if line.find(f"{SVG}title") is not None]
    assert [line.get("stroke") for line in curves] == list(TRIAL_COLORS[:3])
    assert [len(points_of(line)) for line in curves] == [3, 2, 1]
    for line in lines:
        assert all(0 <= x <= 500 and 0 <= y <= 250 for x, y in points_of(line))
    first = points_of(curves[0])
    assert first[0][1] < first[-1][1], "a falling loss goes down the picture (y grows)"
    assert curves[1].get("stroke-dasharray"), "the paused trial is dashed"
    assert curves[1].find(f"{SVG}title").text.startswith("trial 1 · paused\nlr=0.2")
    texts = [text.text for text in root.iter(f"{SVG}text")]
    assert "loss by iteration" in texts and "trial 2" in texts
    assert "iteration" in texts, "the axes are named"


def test_past_ten_curves_the_rest_are_faint_and_unlabelled():
    data = curves_of([[float(30 - i), float(29 - i)] for i in range(30)])
    root = parse(learning_curves_svg(data, dark=True))
    curves = [line for line in root.iter(f"{SVG}polyline") if line.find(f"{SVG}title") is not None]
    coloured = [line for line in curves if line.get("stroke") in TRIAL_COLORS]
    assert len(curves) == 30 and len(coloured) == FEATURED_CURVES
    assert curves[-1] in coloured, "the coloured ones are drawn last, on top"
    labels = [
        text.text for text in root.iter(f"{SVG}text") if (text.text or "").startswith("trial")
    ]
    assert labels == [f"trial {i}" for i in range(20, 30)]
    assert root.get("fill") == "#e6e6e6", "light ink on a dark page"


def test_long_curves_are_thinned_and_an_errored_one_ends_in_a_cross():
    data = curves_of([[1.0 / i for i in range(1, 501)], [1.0, 2.0]], {1: TrialStatus.ERROR})
    root = parse(learning_curves_svg(data))
    long, errored = [
        line for line in root.iter(f"{SVG}polyline") if line.find(f"{SVG}title") is not None
    ]
    assert MAX_SVG_POINTS // 2 < len(points_of(long)) <= MAX_SVG_POINTS
    cross = root.find(f"{SVG}path")
    assert cross is not None and cross.get("stroke") == errored.get("stroke")


def test_hostile_names_stay_text_and_nothing_runs():
    hostile = "<script>alert(1)</script>"
    trial = Trial(0, {hostile: hostile}).evolve(status=TrialStatus.RUNNING)
    rows = [{"trial_id": 0, "training_iteration": 1, "timestamp": 1.0, hostile: 0.5}]
    trial = trial.with_result(rows[0], hostile, "min")
    svg = learning_curves_svg(history_data([trial], rows, hostile, "min"))
    root = parse(svg)
    assert not [element for element in root.iter() if "script" in element.tag]
    assert "<script>" not in svg
    assert f"{hostile} by iteration" in [text.text for text in root.iter(f"{SVG}text")]
    assert hostile in root.find(f"{SVG}polyline/{SVG}title").text


def test_no_curve_yet_says_what_it_waits_for():
    root = parse(learning_curves_svg(curves_of([[]])))
    assert not root.findall(f"{SVG}polyline")
    assert "waiting for a first value of loss" in [text.text for text in root.iter(f"{SVG}text")]


def test_a_picture_too_small_for_its_axes_is_refused():
    with pytest.raises(ValueError, match=r"width=100, height=320\): make it at least 240 x 160"):
        learning_curves_svg(curves_of([[1.0]]), width=100)
    small = parse(learning_curves_svg(curves_of([[1.0]] * 10), width=240, height=160))
    labels = [text for text in small.iter(f"{SVG}text") if (text.text or "").startswith("trial")]
    assert 0 < len(labels) < 10, "as many labels as fit"
    assert all(float(text.get("y")) <= 160 for text in labels)
