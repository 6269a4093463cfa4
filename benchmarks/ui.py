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
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import tempfile
import textwrap
import time

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
    from nbtune.ui.dashboard import _TABS, Dashboard

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
        for index, tab in enumerate(_TABS):
            dashboard.tabs.selected_index = index
            started = time.perf_counter()
            dashboard.redraw()
            times[tab] = round((time.perf_counter() - started) * 1e3, 1)
        return times


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
    main(parser.parse_args().seconds)
