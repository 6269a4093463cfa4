"""What the dashboard costs: kernel responsiveness, runner throughput, redraw time.

Prints one JSON line per figure:

    python benchmarks/ui.py [--seconds 8]

1. `kernel_ping`: with the dashboard displayed in a real kernel and 2 workers producing about
   1,000 results a second, the round trip of a trivial cell (`1+1`), median and p95.
   Target: p95 < 50 ms.
2. `runner_throughput`: results per second of that run, with and without the dashboard.
   Target: with at least 90 % of without.
3. `widget_updates`: redraws per second of the dashboard meanwhile, and the comm messages per
   second they send (one per widget that changed; a plotly update is several). Target: about
   10 redraws a second at most.
4. `redraw_ms`: one redraw of each dashboard tab for an experiment of 1,000 trials and 50,000
   results, after the first drawing. Target: < 100 ms.
5. `chart_ms` (one line per chart; `--charts` prints these alone, in seconds, without a
   kernel): for 64 trials of 100 results each (3 parameters: a log-scale one, an integer one,
   a categorical one), the data extraction and drawing into a new, empty `LiveFigure`
   (`first_ms`, the tab's first drawing; target < 1,000 ms), then a redraw after every trial
   reported once more (`redraw_ms`) and one with nothing new (`idle_redraw_ms`), and the
   update messages those redraws sent. `widget_ms` is making the empty `LiveFigure` (the
   process's first one imports plotly's widget code: ipywidgets, anywidget).
6. `svg_ms`: building the static SVG of those learning curves (`learning_curves_svg`), and
   its size. Target: < 100 ms.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import tempfile
import textwrap
import time
from collections.abc import Callable

from jupyter_client.manager import start_new_kernel

import nbtune as nt

RUN = """
    import time, nbtune as nt
    def chatty(config):
        while True:
            time.sleep(0.002)
            nt.report(loss=config["x"] * time.time() % 1.0)
    tuner = nt.Tuner(chatty, {{"x": nt.grid([1.0, 2.0])}}, metric="loss", max_concurrent=2,
                     name="ui-{display}", overwrite=True)
    tuner.start(display={display})
"""


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


class Kernel:
    def __init__(self, cwd: str) -> None:
        self.manager, self.client = start_new_kernel(kernel_name="python3", cwd=cwd)

    def execute(self, code: str) -> tuple[str, float]:
        """Run `code` and wait for its reply; return (stdout, seconds)."""
        started = time.perf_counter()
        msg_id = self.client.execute(textwrap.dedent(code))
        stdout = ""
        while True:
            msg = self.client.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") == msg_id:
                if msg["msg_type"] == "stream":
                    stdout += msg["content"]["text"]
                if msg["msg_type"] == "error":
                    raise RuntimeError("\n".join(msg["content"]["traceback"]))
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    return stdout, time.perf_counter() - started
            elif msg["msg_type"] == "comm_msg":
                self.comm_msgs += 1

    comm_msgs = 0

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                msg = self.client.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            if msg["msg_type"] == "comm_msg":
                self.comm_msgs += 1

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def live_run(display: bool, seconds: float) -> dict:
    """A 2-worker run of about 1,000 results/s in a kernel; pings while it goes on."""
    with tempfile.TemporaryDirectory() as folder:
        kernel = Kernel(folder)
        try:
            kernel.execute(RUN.format(display=display))
            kernel.drain(3.0)
            kernel.comm_msgs = 0
            count = "print(len(tuner.history()), getattr(tuner._dashboard, 'redraws', 0))"
            start_counts, _ = kernel.execute(count)
            began = time.perf_counter()
            pings = []
            while time.perf_counter() - began < seconds:
                pings.append(kernel.execute("1+1")[1] * 1e3)
                kernel.drain(0.1)
            end_counts, _ = kernel.execute(count + "; tuner.stop()")
            elapsed = time.perf_counter() - began
            (results, redraws) = (
                int(end) - int(start)
                for start, end in zip(start_counts.split(), end_counts.split(), strict=True)
            )
            return {
                "results_per_s": results / elapsed,
                "redraws_per_s": redraws / elapsed,
                "comm_msgs_per_s": kernel.comm_msgs / elapsed,
                "ping_median_ms": statistics.median(pings),
                "ping_p95_ms": _percentile(pings, 0.95),
            }
        finally:
            kernel.close()


def noop(config):
    for step in range(50):
        nt.report(loss=config["x"] / (step + 1))


def redraw_times() -> dict[str, float]:
    from nbtune.ui.dashboard import Dashboard

    with tempfile.TemporaryDirectory() as folder:
        tuner = nt.Tuner(
            noop,
            {"x": nt.uniform(0, 1)},
            metric="loss",
            num_samples=1000,
            max_concurrent=2,
            storage_path=folder,
            name="big",
            progress=False,
        )
        tuner.run(display=False)
        dashboard = Dashboard(nt.load(tuner.path))
        times = {}
        for index, tab in enumerate(dashboard.tab_names):
            dashboard.tabs.selected_index = index
            started = time.perf_counter()
            dashboard.redraw()
            times[tab] = round((time.perf_counter() - started) * 1e3, 1)
        return times


def synthetic_run(trials: int, results: int) -> tuple[list, list[dict]]:
    """Trials and result rows as a runner holds them: `trials` trials of `results` results,
    over a log-scale, an integer and a categorical parameter."""
    from nbtune.trial import Trial, TrialStatus

    made, rows = [], []
    for trial_id in range(trials):
        config = {"lr": 10 ** -(1 + trial_id % 40 / 10), "units": 8 * (1 + trial_id % 5)}
        config["opt"] = ("sgd", "adam", "rmsprop")[trial_id % 3]
        trial = Trial(trial_id, config, status=TrialStatus.RUNNING)
        for step in range(1, results + 1):
            loss = config["lr"] * 10 + 1 / step + trial_id / 1000
            rows.append(
                {
                    "trial_id": trial_id,
                    "training_iteration": step,
                    "timestamp": 1000.0 + step + trial_id / 100,
                    "loss": loss,
                }
            )
            trial = trial.with_result(rows[-1], "loss", "min")
        made.append(trial)
    return made, rows


def one_more_result(trials: list, rows: list[dict]) -> tuple[list, list[dict]]:
    """Every trial reports once more."""
    more = [
        {**rows[-1], "trial_id": trial.trial_id, "training_iteration": trial.iteration + 1}
        for trial in trials
    ]
    trials = [
        trial.with_result(row, "loss", "min") for trial, row in zip(trials, more, strict=True)
    ]
    return trials, sorted(rows + more, key=lambda row: row["timestamp"])


def chart_times(trials: int = 64, results: int = 100) -> list[dict]:
    """First drawing and redraws of each chart into a live FigureWidget, and the SVG's build."""
    from nbtune.ui import data, figures
    from nbtune.ui.static import learning_curves_svg

    log_scale = frozenset({"lr"})
    charts: dict[str, Callable] = {
        "learning curves": lambda t, r, f: figures.history_figure(
            data.history_data(t, r, "loss", "min"), f
        ),
        "best so far": lambda t, r, f: figures.best_so_far_figure(
            data.best_so_far_data(r, "loss", "min"), f
        ),
        "parallel coordinates": lambda t, r, f: figures.parallel_coordinates_figure(
            data.parameter_data(t, "loss", log_scale), f
        ),
        "parameters": lambda t, r, f: figures.parameter_scatter_figure(
            data.parameter_data(t, "loss", log_scale), f
        ),
        "importance": lambda t, r, f: figures.importance_figure(
            data.importance_data(t, "loss", "min"), f
        ),
    }
    before = synthetic_run(trials, results)
    after = one_more_result(*before)
    lines = [
        {"figure": "chart_ms", "chart": chart, "trials": trials, "results_per_trial": results}
        | _draw_times(draw, before, after)
        for chart, draw in charts.items()
    ]
    svg: list[str] = []
    svg_ms = _ms(lambda: svg.append(learning_curves_svg(data.history_data(*after, "loss", "min"))))
    lines.append(
        {
            "figure": "svg_ms",
            "trials": trials,
            "results_per_trial": results + 1,
            "value_ms": round(svg_ms, 1),
            "kilobytes": round(len(svg[0]) / 1024, 1),
            "target_ms": 100,
            "passed": svg_ms < 100,
        }
    )
    return lines


def _draw_times(draw: Callable, before: tuple, after: tuple) -> dict:
    """A new `LiveFigure` (the dashboard's FigureWidget), `draw` into it from `before`, then
    twice from `after`."""
    from nbtune.ui.live import LiveFigure

    started = time.perf_counter()
    figure = LiveFigure()
    widget_ms = (time.perf_counter() - started) * 1e3
    first_ms = _ms(lambda: draw(*before, figure))
    sent = []
    figure.observe(lambda change: change["new"] and sent.append(1), "_py2js_update")
    redraw_ms = _ms(lambda: draw(*after, figure))
    redraw_messages = len(sent)
    idle_redraw_ms = _ms(lambda: draw(*after, figure))
    return {
        "widget_ms": round(widget_ms, 1),
        "first_ms": round(first_ms, 1),
        "redraw_ms": round(redraw_ms, 1),
        "idle_redraw_ms": round(idle_redraw_ms, 1),
        "update_messages": [redraw_messages, len(sent) - redraw_messages],
        "target_first_ms": 1000,
        "passed": first_ms < 1000,
    }


def _ms(action: Callable[[], object]) -> float:
    """Milliseconds `action()` takes."""
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1e3


def main(seconds: float) -> None:
    with_dashboard = live_run(True, seconds)
    without = live_run(False, seconds)
    print(
        json.dumps(
            {
                "figure": "kernel_ping",
                "median_ms": round(with_dashboard["ping_median_ms"], 2),
                "p95_ms": round(with_dashboard["ping_p95_ms"], 2),
                "target_p95_ms": 50,
                "passed": with_dashboard["ping_p95_ms"] < 50,
            }
        ),
        flush=True,
    )
    ratio = with_dashboard["results_per_s"] / without["results_per_s"]
    print(
        json.dumps(
            {
                "figure": "runner_throughput",
                "with_dashboard": round(with_dashboard["results_per_s"]),
                "without": round(without["results_per_s"]),
                "ratio": round(ratio, 3),
                "target_ratio": ">= 0.9",
                "passed": ratio >= 0.9,
            }
        ),
        flush=True,
    )
    print(
        json.dumps(
            {
                "figure": "widget_updates",
                "redraws_per_s": round(with_dashboard["redraws_per_s"], 1),
                "comm_msgs_per_s": round(with_dashboard["comm_msgs_per_s"], 1),
                "comm_msgs_per_s_without": round(without["comm_msgs_per_s"], 1),
                "target_redraws_per_s": "<= 10",
                "passed": with_dashboard["redraws_per_s"] <= 10.5,
            }
        ),
        flush=True,
    )
    for line in chart_times():
        print(json.dumps(line), flush=True)
    times = redraw_times()
    print(
        json.dumps(
            {
                "figure": "redraw_ms",
                "trials": 1000,
                "results": 50000,
                **times,
                "target_ms": 100,
                "passed": max(times.values()) < 100,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument(
        "--charts", action="store_true", help="only the charts' figures (no kernel, seconds)"
    )
    arguments = parser.parse_args()
    if arguments.charts:
        for line in chart_times():
            print(json.dumps(line), flush=True)
    else:
        main(arguments.seconds)
