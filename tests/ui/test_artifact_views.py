"""The trial tab's artifacts: the widget each kind of file gets, the limits, and when the tab
reads a trial's folder again."""

from __future__ import annotations

import base64
import struct
import threading
import zlib

import ipywidgets as widgets
import plotly.graph_objects as go
import pytest

import nbtune as nt
from nbtune.events import TrialResult
from nbtune.ui.artifacts import IMAGE_MAX_BYTES, artifact_kind, artifact_widget

PLOTLY = "application/vnd.plotly.v1+json"


def png(width=2, height=1):
    """A real PNG of `width` x `height` black pixels."""

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\0" + b"\0" * width for _ in range(height)))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def shown(path):
    kind = artifact_kind(path.name)
    return None if kind is None else artifact_widget(path, kind)


def test_each_kind_of_file_gets_the_widget_that_shows_it(tmp_path):
    (tmp_path / "curve.png").write_bytes(png())
    image = shown(tmp_path / "curve.png")
    assert isinstance(image, widgets.Image) and image.format == "png"
    assert image.value == png()
    (tmp_path / "photo.JPEG").write_bytes(b"\xff\xd8\xff\xe0 a jpeg")
    assert shown(tmp_path / "photo.JPEG").format == "jpeg"

    svg = "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script><circle r='3'/></svg>"
    (tmp_path / "shape.svg").write_text(svg)
    drawn = shown(tmp_path / "shape.svg").value
    assert drawn.startswith("<img ") and "<script" not in drawn, "an image: its scripts never run"
    assert base64.b64encode(svg.encode()).decode() in drawn

    go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2])).write_json(tmp_path / "figure.json")
    figure = shown(tmp_path / "figure.json")
    assert isinstance(figure, widgets.Output), "plotly's own output, no FigureWidget"
    spec = figure.outputs[0]["data"][PLOTLY]
    assert spec["data"][0]["y"] == [3, 1, 2]

    (tmp_path / "settings.json").write_text('{"lr": 0.1}')
    assert shown(tmp_path / "settings.json") is None, "a JSON file that is no figure is listed"
    (tmp_path / "model.pt").write_bytes(b"weights")
    assert shown(tmp_path / "model.pt") is None


def test_a_csv_table_shows_its_first_rows_escaped(tmp_path):
    rows = "\n".join(f"{i},<b>{i}</b>" for i in range(250))
    (tmp_path / "scores.csv").write_text("epoch,note\n" + rows + "\n")
    table = shown(tmp_path / "scores.csv").value
    assert "its first 200 rows" in table
    assert table.count("<tr") == 201, "a header and 200 rows"
    assert "&lt;b&gt;199&lt;/b&gt;" in table and "<b>199" not in table
    assert ">200<" not in table


def test_a_file_over_its_limit_is_one_line_saying_so(tmp_path):
    (tmp_path / "huge.png").write_bytes(png() + b"\0" * IMAGE_MAX_BYTES)
    line = shown(tmp_path / "huge.png")
    assert isinstance(line, widgets.HTML)
    assert line.value == "<i>huge.png: 5.0 MB, too large to show here (over 5.0 MB)</i>"


def names_shown(dashboard):
    """The file names the trial tab's artifacts show, drawn or listed."""
    names = []
    for part in dashboard.artifacts.widget.children:
        if isinstance(part, widgets.VBox):
            names.append(part.children[0].value.removeprefix("<i>").removesuffix("</i>"))
        elif part.value.startswith("<i>other files:</i>"):
            names.extend(part.value.removeprefix("<i>other files:</i> ").split(", "))
    return names


@pytest.fixture
def steps(make_tuner, log):
    """A live run of one trial on a thread that writes a file and reports at each step it is
    let take; yields (tuner, dashboard, step): step() lets it take the next step and waits
    for its result."""
    go_on = threading.Semaphore(0)
    finish = threading.Event()

    def train(config):
        folder = nt.get_trial_dir()
        (folder / "a.csv").write_text("x,y\n1,2\n")
        nt.report(loss=1.0, checkpoint=1)
        go_on.acquire()
        (folder / "b.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
        nt.report(loss=0.5)
        go_on.acquire()
        nt.report(loss=0.25, checkpoint=3)
        finish.wait(30)

    tuner = make_tuner(train, metric="loss", executor=nt.ThreadExecutor())
    tuner.subscribe(log)
    tuner.start(display=False)
    dashboard = tuner.dashboard()
    assert dashboard.ready.wait(30)

    def step(iteration):
        if iteration > 1:
            go_on.release()
        log.wait_for(
            lambda e: isinstance(e, TrialResult) and e.result["training_iteration"] == iteration
        )

    yield tuner, dashboard, step
    go_on.release(2)
    finish.set()
    assert tuner.wait(30)
    dashboard.close()


def test_the_trial_tab_reads_the_folder_again_at_a_checkpoint_not_at_every_result(steps):
    tuner, dashboard, step = steps
    step(1)
    dashboard.tabs.selected_index = dashboard.tab_names.index("trial")
    dashboard.redraw()
    assert names_shown(dashboard) == ["a.csv"]
    table = dashboard.artifacts.widget.children[1].children[1]
    assert "<td>1</td>" in table.value
    step(2)
    dashboard.redraw()
    assert tuner.artifacts(0) == ("a.csv", "b.svg")
    assert names_shown(dashboard) == ["a.csv"], "a result without a checkpoint reads nothing"
    step(3)
    dashboard.redraw()
    assert names_shown(dashboard) == ["a.csv", "b.svg"]


def test_the_trial_tab_reads_the_folder_again_when_opened(steps):
    tuner, dashboard, step = steps
    step(1)
    dashboard.tabs.selected_index = dashboard.tab_names.index("trial")
    dashboard.redraw()
    (tuner.artifacts(0).folder / "c.png").write_bytes(png())
    dashboard.redraw()
    assert names_shown(dashboard) == ["a.csv"]
    dashboard.tabs.selected_index = dashboard.tab_names.index("dataframe")
    dashboard.redraw()
    dashboard.tabs.selected_index = dashboard.tab_names.index("trial")
    dashboard.redraw()
    assert names_shown(dashboard) == ["a.csv", "c.png"]
    assert isinstance(dashboard.artifacts.widget.children[2].children[1], widgets.Image)


def test_a_loaded_run_shows_the_artifacts_of_the_trial_picked(make_tuner):
    def train(config):
        (nt.get_trial_dir() / f"only-{config['x']}.txt").write_text("")
        nt.report(loss=config["x"])

    tuner = make_tuner(train, {"x": nt.grid([1, 2])}, metric="loss")
    tuner.run()
    dashboard = nt.load(tuner.path).dashboard()
    try:
        dashboard.tabs.selected_index = dashboard.tab_names.index("trial")
        dashboard.redraw()
        assert names_shown(dashboard) == ["only-1.txt"], "the best trial, until one is picked"
        dashboard.table._handle_custom_msg({"type": "select", "trial_id": 1}, [])
        assert names_shown(dashboard) == ["only-2.txt"]
    finally:
        dashboard.close()
