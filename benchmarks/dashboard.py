"""How fast the dashboard shows up, and how much it weighs, in a real kernel.

Prints one JSON line per figure:

    python benchmarks/dashboard.py [--repeat 3]

The run has 64 trials of 100 reports, 4 at a time; its Tuner is built in the cell before the
one that starts it, which runs `--pause` s later (default `NEXT_CELL_S`: a user reading the
cell); meanwhile the Tuner starts its workers and imports the dashboard and plotly (on a
loaded machine that takes longer than 3 s: pass a longer pause). `start_with_dashboard_at_once_s`
is the `start()` cell run at once after the Tuner's (Run All), while that import goes on.

1. `start_with_dashboard_s`: how long the cell `tuner.start()` takes to return with the
   dashboard shown (a fresh kernel with nbtune imported; median over `--repeat` kernels).
   Target: < 0.3 s. `start_without_dashboard_s` is the same cell with `display=False`.
2. `first_table_value_s`, `first_chart_s`: from the run's first result (the bus's
   `TrialResult`) to the table's state holding a value of the metric, and to the learning
   curves' figure holding a curve: read in the kernel, where a widget's message goes out as
   its state changes. Target: < 1 s each. `first_chart_slow_start_s` is the chart's figure
   for trials that wait `SLOW_START_S` before their first report (loading data, say): the
   dashboard draws its chart before any result, and the chart waited for the browser's answer
   to that drawing, which no browser gives here (nor a page whose chart is not drawn yet).
3. `first_result_at_once_s`: in those Run All kernels, from the Tuner's cell (from just
   before `nt.Tuner(...)`: its workers start as it is built) to the run's first result.
   Target: < 0.5 s.
4. `widget_models`: widget models in the kernel once every tab of the run has been drawn
   (the old dashboard had 654 for its table alone). For information.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from ui import Kernel

SETUP = """
    import time, warnings, nbtune as nt, ipywidgets
    from nbtune.events import TrialResult
    first = {"tuner": time.perf_counter()}
    def note(event):
        if isinstance(event, TrialResult):
            first.setdefault("result", time.perf_counter())
    def train(config):
        time.sleep(SLOW_START_S)
        for step in range(1, 200):
            nt.report(loss=config["x"] / step + config["lr"])
            time.sleep(0.02)
    tuner = nt.Tuner(train, {"x": nt.uniform(0, 1), "lr": nt.loguniform(1e-4, 1e-1),
                             "kind": nt.choice(["a", "b"])},
                     metric="loss", num_samples=64, max_concurrent=4, name="bench",
                     overwrite=True, callbacks=[note])
"""

START = """
    began = time.perf_counter()
    tuner.start(display={display})
    print(time.perf_counter() - began)
"""

SLOW_START_S = 1.5
"""How long the trials of `first_chart_slow_start_s` wait before their first report."""

NEXT_CELL_S = 3.0
"""How long after the Tuner's cell the user runs the cell that starts it."""

FIRST_RESULT = """
    while "result" not in first:
        time.sleep(0.005)
    print(first["result"] - first["tuner"])
"""

FIRST_DRAWN = """
    dashboard = tuner.dashboard()
    dashboard.ready.wait(60)
    table = chart = None
    while table is None or chart is None:
        now = time.perf_counter()
        rows = dashboard.table.table.get("rows", [])
        if table is None and any(row["cells"].get("last") not in (None, "") for row in rows):
            table = now
        figure = dashboard.figures.get("learning curves")
        if chart is None and figure is not None and figure.data:
            chart = now
        time.sleep(0.005)
    print(table - first["result"], chart - first["result"])
"""

MODELS = """
    for index in range(len(dashboard.tab_names)):
        dashboard.tabs.selected_index = index
        dashboard.redraw()
    tuner.stop()
    tuner.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        print(len(ipywidgets.Widget.widgets))
"""


def one_kernel(display: bool, pause_s: float, slow_start_s: float = 0.0) -> dict:
    """One run in a fresh kernel: its Tuner built in a cell, started `pause_s` later, its
    trials waiting `slow_start_s` before their first report."""
    with tempfile.TemporaryDirectory() as folder:
        kernel = Kernel(folder)
        try:
            kernel.execute(f"SLOW_START_S = {slow_start_s}")
            kernel.execute(SETUP)
            time.sleep(pause_s)
            started, _ = kernel.execute(START.format(display=display))
            figures = {"start_s": float(started)}
            if not pause_s:
                result, _ = kernel.execute(FIRST_RESULT)
                figures["first_result_from_tuner_s"] = float(result)
            if display and pause_s:
                drawn, _ = kernel.execute(FIRST_DRAWN)
                table, chart = (float(seconds) for seconds in drawn.split())
                models, _ = kernel.execute(MODELS)
                figures |= {"first_table_value_s": table, "first_chart_s": chart}
                figures["widget_models"] = int(models)
            else:
                kernel.execute("tuner.stop(); tuner.wait()")
            return figures
        finally:
            kernel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--pause",
        type=float,
        default=NEXT_CELL_S,
        help="seconds between the Tuner's cell and the start() cell (default: %(default)s)",
    )
    args = parser.parse_args()
    shown = [one_kernel(True, args.pause) for _ in range(args.repeat)]
    hidden = [one_kernel(False, args.pause) for _ in range(args.repeat)]
    at_once = [one_kernel(True, 0) for _ in range(args.repeat)]
    slow = [one_kernel(True, args.pause, SLOW_START_S) for _ in range(args.repeat)]

    def line(figure, values, target=None, unit="s"):
        median = statistics.median(values)
        passed = None if target is None else median < target
        print(
            json.dumps(
                {
                    "figure": figure,
                    "value": round(median, 4),
                    "unit": unit,
                    "target": None if target is None else f"< {target}",
                    "passed": passed,
                    "runs": [round(v, 4) for v in values],
                }
            )
        )

    line("start_with_dashboard_s", [run["start_s"] for run in shown], 0.3)
    line("start_without_dashboard_s", [run["start_s"] for run in hidden])
    line("start_with_dashboard_at_once_s", [run["start_s"] for run in at_once])
    line("first_result_at_once_s", [run["first_result_from_tuner_s"] for run in at_once], 0.5)
    line("first_table_value_s", [run["first_table_value_s"] for run in shown], 1.0)
    line("first_chart_s", [run["first_chart_s"] for run in shown], 1.0)
    line("first_chart_slow_start_s", [run["first_chart_s"] for run in slow], 1.0)
    line("widget_models", [run["widget_models"] for run in shown], unit="models")


if __name__ == "__main__":
    main()
