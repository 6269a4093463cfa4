"""Numbers as every view shows them: `nbtune.metrics.format_number`, the one place."""

from __future__ import annotations

import io
import math

import pytest

from nbtune.events import ExperimentDone, TrialAdded, TrialResult
from nbtune.metrics import format_number, format_value
from nbtune.progress import ProgressLine
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.data import config_text, describe
from nbtune.ui.summary import best_html
from nbtune.ui.table import TableView, short, table_page
from nbtune.ui.ticks import NUMBER_FORMAT


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.30000000000000004, "0.3"),
        (3.14159265, "3.142"),
        (123456.0, "1.235e+05"),
        (0.000123456, "0.0001235"),
        (-2.5, "-2.5"),
        (42, "42"),
        (1.0, "1"),
        (math.nan, "nan"),
        (-math.inf, "-inf"),
    ],
)
def test_a_number_keeps_four_significant_digits(value, text):
    assert format_number(value) == text


def test_plotly_writes_numbers_the_same_way():
    assert NUMBER_FORMAT == ".4~g", "d3-format for four significant digits, no trailing zeros"


def test_any_value_is_shown_as_text():
    assert format_value(0.123456) == "0.1235"
    assert format_value(12345) == "12345", "a whole number is never rounded"
    assert format_value("relu") == "relu"
    assert format_value(None) == "None"
    assert format_value(True) == "True"


def test_a_missing_value_leaves_a_table_cell_blank():
    assert short(None) == ""
    assert short(0.123456) == "0.1235"


def test_the_summary_shows_the_best_value_with_four_digits():
    best = Trial(0, {"lr": 0.0123456}, TrialStatus.TERMINATED, best_value=0.987654321)
    assert best_html([best], "loss", "min") == ("best loss = <b>0.9877</b> (trial 0: lr=0.01235)")


def test_the_progress_line_shows_the_best_value_as_the_dashboard_does():
    stream = io.StringIO()
    line = ProgressLine("run", "loss", "min", stream=stream, interval_s=3600)
    line(TrialAdded(0, {}))
    line(TrialResult(0, {"loss": 0.123456789, "training_iteration": 1}))
    line(ExperimentDone("finished"))
    assert "best loss=0.1235 (trial 0)" in stream.getvalue()


def test_a_configuration_reads_the_same_in_the_table_the_header_and_the_hover_texts():
    config = {"lr": 0.0123456, "net": {"layers": 2}, "activation": None}
    line = "lr=0.01235, net/layers=2, activation=None"
    assert config_text(config) == line, "a None chosen from a choice() is shown, not blanked"
    trial = Trial(0, config, TrialStatus.TERMINATED, best_value=0.5)
    assert table_page([trial], "loss", TableView(), live=False).rows[0].config == line
    assert best_html([trial], "loss", "min") == f"best loss = <b>0.5</b> (trial 0: {line})"
    assert describe(trial).endswith("<br>" + line)
