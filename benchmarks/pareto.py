"""What the Pareto front costs: `best_trials`, and one redraw of the dashboard's pareto tab.

The dashboard recomputes the front on every redraw of its pareto tab (up to ~10 a second), on
its refresh thread, and the progress line on the runner thread each time it prints; so the
front must stay cheap as runs grow. Each point is compared with the front found so far only
(see `nbtune.objectives.non_dominated`), so the cost grows with trials x front size: small
for random trade-offs (a front of tens), largest when every trial is on the front.

Prints one JSON line per (figure, trials, metrics, layout):

    figure      "best_trials" (the front of the trials' last values) or "pareto_redraw"
                (`pareto_data` + `pareto_figure` into a FigureWidget, as the tab does)
    trials      how many trials
    metrics     2 or 3
    layout      "random" (uniform values) or "all_on_front" (every trial on the front)
    front       the front's size
    ms          median of 5 timings

Usage:
    python benchmarks/pareto.py
    python benchmarks/pareto.py --quick     # small sizes: a smoke test
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import time

from nbtune.objectives import pareto_trials
from nbtune.trial import Trial, TrialStatus

NAMES = ("loss", "latency_ms", "memory_mb")


def trials_of(count: int, metrics: int, layout: str, seed: int = 0) -> list[Trial]:
    rng = random.Random(seed)
    trials = []
    for trial_id in range(count):
        if layout == "random":
            point = [rng.random() for _ in range(metrics)]
        else:  # on the plane (or line) where the values sum to 1: no point beats another
            cuts = sorted(rng.random() for _ in range(metrics - 1))
            point = [b - a for a, b in zip([0.0, *cuts], [*cuts, 1.0], strict=True)]
        result = dict(zip(NAMES, point, strict=False))
        trials.append(
            Trial(trial_id, {"x": point[0]}, TrialStatus.TERMINATED).evolve(last_result=result)
        )
    return trials


def redraw(trials: list[Trial], names: list[str], figure) -> None:
    """What the dashboard's pareto tab does on each redraw."""
    from nbtune.ui.pareto import pareto_data, pareto_figure

    pareto_figure(pareto_data(trials, names, "min"), figure)


def median_ms(action, repeats: int = 5) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(timings), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    args = parser.parse_args()
    import plotly.graph_objects as go

    sizes = (100, 500) if args.quick else (100, 1000, 5000)
    for count in sizes:
        for metrics in (2, 3):
            names = list(NAMES[:metrics])
            for layout in ("random", "all_on_front"):
                trials = trials_of(count, metrics, layout)
                front = len(pareto_trials(trials, names, "min"))
                figure = go.FigureWidget()
                figures = {
                    "best_trials": functools.partial(pareto_trials, trials, names, "min"),
                    "pareto_redraw": functools.partial(redraw, trials, names, figure),
                }
                for name, action in figures.items():
                    line = {
                        "figure": name,
                        "trials": count,
                        "metrics": metrics,
                        "layout": layout,
                        "front": front,
                        "ms": median_ms(action),
                    }
                    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
