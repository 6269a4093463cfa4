"""Ticks as the charts place them (their labels: tests/ui/test_numbers.py)."""

from __future__ import annotations

import pytest

from nbtune.ui.ticks import integer_ticks, log_ticks, nice_ticks


def test_nice_ticks_are_round_and_cover_the_range():
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(-3.0, 7.0) == [-2.0, 0.0, 2.0, 4.0, 6.0]
    assert nice_ticks(2.5, 2.5) == [2.5]


def test_integer_ticks_are_whole_numbers_only():
    assert integer_ticks(1, 3) == [1, 2, 3], "no 1.5"
    assert integer_ticks(1, 2) == [1, 2]
    many = integer_ticks(0, 1000)
    assert len(many) <= 9 and all(isinstance(tick, int) for tick in many)
    assert integer_ticks(5, 5) == [5]


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (1e-4, 1e-1, [1e-4, 1e-3, 1e-2, 1e-1]),
        (1.0, 8.0, [1.0, 2.0, 5.0]),
        (1e-9, 1e3, [1e-9, 1e-6, 0.001, 1.0, 1000.0]),
        (3.0, 3.0, [3.0]),
    ],
)
def test_log_ticks_are_powers_of_ten_or_their_multiples(low, high, ticks):
    assert log_ticks(low, high) == ticks
