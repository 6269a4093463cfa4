"""What the live dashboard shows once its run has ended: every tab the final state, whether it
was open during the run or is opened only afterwards."""

from __future__ import annotations

import threading

import nbtune as nt
from nbtune.events import TrialResult


def test_every_tab_shows_the_final_state_after_the_end(make_tuner, log):
    go_on = threading.Event()

    def train(config):
        for step in range(1, 41):
            nt.report(loss=config["x"] / step)
            if step == 5:
                go_on.wait(30)

    tuner = make_tuner(
        train, {"x": nt.uniform(0, 1)}, metric="loss", num_samples=2, executor=nt.ThreadExecutor()
    )
    tuner.subscribe(log)
    tuner.start(display=False)
    dashboard = tuner.dashboard()
    try:
        assert dashboard.ready.wait(30)
        log.wait_for(lambda _: {e.trial_id for e in log.of(TrialResult)} == {0, 1})
        dashboard.selected = 0
        dashboard.tabs.selected_index = dashboard.tab_names.index("trial")
        dashboard.redraw()
        assert "iteration 40" not in dashboard.trial_view.value
        go_on.set()
        assert tuner.wait(30)
        dashboard._thread.join(30)

        assert "iteration 40" in dashboard.trial_view.value, "the open tab shows the end"
        assert "running" not in dashboard.trial_view.value
        for name in ("best so far", "importance", "dataframe"):
            dashboard.tabs.selected_index = dashboard.tab_names.index(name)
            if name in dashboard.charts:
                chart = dashboard.charts[name]
                assert chart.figure is not None, f"the {name} tab opened after the end draws"
                assert chart.figure.data, f"the {name} tab opened after the end draws"
            else:
                assert "trial_id" in dashboard.frame.value
    finally:
        dashboard.close()
