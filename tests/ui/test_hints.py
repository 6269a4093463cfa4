"""The dashboard's hints at the edges of the space, and their "widen" buttons."""

from __future__ import annotations

import threading

from test_control import result_of

import nbtune as nt
from nbtune.ui.hints import SpaceHints

HIGH_LRS = [0.009, 0.008, 0.007, 0.0065]
POINTS = [{"lr": lr} for lr in [*HIGH_LRS, 0.005, 0.001, 0.0002]]


def test_a_crowded_edge_shows_a_line_whose_button_widens_the_space(make_tuner, log):
    finish = threading.Event()

    def train(config):
        nt.report(loss=-config["lr"])
        finish.wait(30)

    tuner = make_tuner(
        train,
        {"lr": nt.loguniform(1e-4, 1e-2)},
        metric="loss",
        num_samples=len(POINTS) + 1,
        points_to_evaluate=POINTS,
        max_concurrent=len(POINTS),
        executor=nt.ThreadExecutor(),
        callbacks=[log],
    )
    tuner.start(display=False)
    for trial_id in range(len(POINTS)):
        log.wait_for(result_of(trial_id, 1))
    dashboard = tuner.dashboard()
    assert dashboard.ready.wait(30)
    try:
        dashboard.redraw()
        hints = dashboard.hints
        assert hints.shown == [("lr", "high")]
        assert hints.widget.layout.display == ""
        (line,) = hints.widget.children
        button, text = line.children
        assert "4 of the 5 best trials have lr in the highest 10%" in text.value
        button.click()
        assert dashboard.command_error == ""
        assert tuner.space.domains() == {"lr": nt.loguniform(1e-4, 0.1)}
        hints.draw(live=True)
        assert hints.shown == [], "the widened range no longer crowds its edge"
        assert hints.widget.layout.display == "none"
    finally:
        finish.set()
        assert tuner.wait(30)
        dashboard.close()


def test_a_run_that_has_ended_shows_no_hint(make_tuner):
    tuner = make_tuner(
        lambda config: nt.report(loss=-config["lr"]),
        {"lr": nt.loguniform(1e-4, 1e-2)},
        metric="loss",
        num_samples=len(POINTS),
        points_to_evaluate=POINTS,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    assert tuner.space_hints(), "the best trials do crowd an edge"
    hints = SpaceHints(tuner, act=lambda command, *args: command(*args))
    hints.draw(live=False)
    assert hints.shown == [] and hints.widget.children == (), "nothing is left to widen"
    assert hints.widget.layout.display == "none"
