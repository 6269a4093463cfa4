"""The summary's slot in an in-process IPython shell: a failure never reaches the user's cell."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from trainables import count_up
from traitlets.config import Config

import nbtune as nt
from nbtune.ui import summary


@pytest.fixture
def shell():
    """An IPython shell without a kernel (nor a history file): cells run and fire events."""
    config = Config()
    config.HistoryManager.enabled = False
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()


def broken_summary(source, state):
    raise KeyError("a bug in the summary")


def test_a_summary_that_fails_is_logged_not_raised_into_the_cell(
    shell, make_tuner, monkeypatch, caplog
):
    tuner = make_tuner(count_up, {"steps": 2}, metric="loss", executor=nt.ThreadExecutor())
    tuner.start(display=False)
    assert tuner.wait(30)
    hooks = len(shell.events.callbacks["post_run_cell"])
    monkeypatch.setattr(summary, "summary_html", broken_summary)

    with capture_output() as shown:
        summary.SummarySlot(tuner, shell)
        cell = shell.run_cell("1 + 1")

    assert cell.success and cell.result == 2, "the cell ran as if nothing happened"
    assert [output.data["text/html"] for output in shown.outputs] == [""], "the slot stays empty"
    assert "could not show the summary of 'run0'" in caplog.text
    assert "KeyError: 'a bug in the summary'" in caplog.text
    assert len(shell.events.callbacks["post_run_cell"]) == hooks, "and the hook is gone"


def test_the_summary_draws_the_learning_curves_without_a_script(make_tuner):
    def train(config):
        for step in range(1, 6):
            nt.report(loss=config["x"] / step / 3)

    tuner = make_tuner(
        train, {"x": nt.grid([1.0, 2.0, 4.0])}, metric="loss", executor=nt.ThreadExecutor()
    )
    tuner.run()
    text = summary.summary_html(tuner, tuner.state)
    svg = text[text.index("<svg") : text.index("</svg>") + len("</svg>")]
    root = ElementTree.fromstring(svg)
    svg_ns = "{http://www.w3.org/2000/svg}"
    curves = [
        line for line in root.iter(f"{svg_ns}polyline") if line.find(f"{svg_ns}title") is not None
    ]
    assert len(curves) == 3, "one curve per trial, each titled with its trial"
    assert "<script" not in text
    assert "0.06667" in text and "0.066666" not in text, "4 significant digits"


def test_the_summary_table_leaves_missing_text_blank(make_tuner):
    tuner = make_tuner(count_up, {"steps": 2}, metric="loss", executor=nt.ThreadExecutor())
    tuner.run()
    assert tuner.dataframe()["error"].isna().all(), "no trial failed: the error column is empty"
    text = summary.summary_html(tuner, tuner.state)
    assert "<table" in text
    assert "&lt;NA&gt;" not in text and "<NA>" not in text
