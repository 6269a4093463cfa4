"""How well nbtune forecasts a curve's end (`Tuner.forecast()`) and a run's end (`eta_s`).

Prints one JSON line per figure on stdout, for example:

    {"figure": "forecast_power_law", "references": 8, "median_rel_error": 0.012,
     "coverage_80": 0.85, "target": "<= 0.10 and >= 0.70", "passed": true, ...}

Curves whose end is known, each forecast from its first third (`nbtune.forecast.forecast_curve`):

    power_law     y = a + b t**-c, 2 % multiplicative noise (c in 0.3 .. 1.5)
    exponential   y = a + b exp(-c t), the same noise (c such that the curve settles at 1/8
                  to 1/2 of the horizon)
    sgd_accuracy, sgd_loss
                  scikit-learn `SGDClassifier.partial_fit` on digits, one epoch per iteration,
                  validation accuracy (mode max) and log loss (mode min), random alpha / eta0

Each family is forecast twice: alone (no finished trial: `references` 0) and as in a run where
some trials have finished (`references` 8 full curves of other configurations). The true end is
the noiseless value for the synthetic curves (`coverage_observed` counts the noisy one too),
the observed value for scikit-learn's.

ETA (`eta_fifo`, `eta_asha`): a real run (threads, 2 at a time, sleeping trainables whose
iteration time varies with their config: 24 trials of 27 iterations under FIFO, 72 under ASHA
with max_t 27, reduction factor 3); `eta_s` is read every 0.1 s, and the reading nearest half-way is
compared with the time the run really had left.

Usage:
    python benchmarks/forecast.py            # everything (about a minute)
    python benchmarks/forecast.py --quick    # fewer curves, shorter runs: a smoke test
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import nbtune as nt
from nbtune.forecast import forecast_curve

# benchmarks/sklearn.py would shadow scikit-learn: move this folder to the end of the path.
_HERE = str(Path(__file__).resolve().parent)
if _HERE in sys.path:
    sys.path.remove(_HERE)
    sys.path.append(_HERE)

HORIZON = 60
SGD_HORIZON = 30
REFERENCES = 8
MEDIAN_TARGET = 0.10
COVERAGE_TARGET = 0.70
ETA_TARGET = 0.30


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


# ----- curves ---------------------------------------------------------------------------------


def power_law(rng: np.random.Generator, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(1, horizon + 1)
    a, b, c = rng.uniform(0.05, 0.5), rng.uniform(0.5, 2.0), rng.uniform(0.3, 1.5)
    clean = a + b * t**-c
    return clean, clean * (1 + 0.02 * rng.standard_normal(horizon))


def exponential(rng: np.random.Generator, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(1, horizon + 1)
    a, b = rng.uniform(0.05, 0.5), rng.uniform(0.5, 2.0)
    c = 3.0 / (horizon * rng.uniform(0.125, 0.5))
    clean = a + b * np.exp(-c * t)
    return clean, clean * (1 + 0.02 * rng.standard_normal(horizon))


def sgd_curves(count: int, horizon: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(validation accuracy, validation log loss) by epoch of `count` random SGD runs."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import SGDClassifier
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.3, random_state=0)
    scaler = StandardScaler().fit(x_train)
    x_train, x_val = scaler.transform(x_train), scaler.transform(x_val)
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    curves = []
    for _ in range(count):
        model = SGDClassifier(
            loss="log_loss",
            alpha=10 ** rng.uniform(-5, -2),
            learning_rate="invscaling",
            eta0=10 ** rng.uniform(-3.5, -1.5),
            power_t=0.5,
            random_state=int(rng.integers(1 << 30)),
        )
        accuracy, loss = [], []
        for _ in range(horizon):
            order = rng.permutation(len(x_train))
            model.partial_fit(x_train[order], y_train[order], classes=classes)
            accuracy.append(model.score(x_val, y_val))
            loss.append(log_loss(y_val, model.predict_proba(x_val), labels=classes))
        curves.append((np.array(accuracy), np.array(loss)))
    return curves


def measure(
    name: str,
    tests: list[tuple[np.ndarray, np.ndarray]],
    references: list[np.ndarray],
    horizon: int,
) -> None:
    """Forecast each test curve (clean, observed) from its first third; print the figure."""
    cut = horizon // 3
    errors, inside, inside_observed = [], [], []
    for clean, observed in tests:
        result = forecast_curve(observed[:cut], horizon, references)
        truth = clean[-1]
        errors.append(abs(result.predicted - truth) / abs(truth))
        inside.append(result.low <= truth <= result.high)
        inside_observed.append(result.low <= observed[-1] <= result.high)
    median, coverage = float(np.median(errors)), float(np.mean(inside))
    emit(
        figure=f"forecast_{name}",
        references=len(references),
        curves=len(tests),
        at=cut,
        horizon=horizon,
        median_rel_error=round(median, 4),
        p90_rel_error=round(float(np.quantile(errors, 0.9)), 4),
        coverage_80=round(coverage, 3),
        coverage_observed=round(float(np.mean(inside_observed)), 3),
        target=f"<= {MEDIAN_TARGET} and >= {COVERAGE_TARGET}",
        passed=median <= MEDIAN_TARGET and coverage >= COVERAGE_TARGET,
    )


def curve_figures(count: int) -> None:
    for name, make in (("power_law", power_law), ("exponential", exponential)):
        rng = np.random.default_rng(7)
        tests = [make(rng, HORIZON) for _ in range(count)]
        references = [make(rng, HORIZON)[1] for _ in range(REFERENCES)]
        measure(name, tests, [], HORIZON)
        measure(name, tests, references, HORIZON)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = sgd_curves(count + REFERENCES, SGD_HORIZON, seed=3)
    for index, name in enumerate(("sgd_accuracy", "sgd_loss")):
        curves = [run[index] for run in runs]
        tests = [(curve, curve) for curve in curves[REFERENCES:]]
        measure(name, tests, [], SGD_HORIZON)
        measure(name, tests, curves[:REFERENCES], SGD_HORIZON)


# ----- the run's end --------------------------------------------------------------------------


def sleepy(config: dict[str, Any]) -> None:
    """Iterations of `config["step_s"]` seconds; a loss that falls faster for a smaller `lr`."""
    for step in range(1, config["steps"] + 1):
        time.sleep(config["step_s"])
        nt.report(loss=config["lr"] + 1.0 / step**0.5)


def eta_figure(scheduler_name: str, quick: bool) -> None:
    steps = 9 if quick else 27
    samples = (8 if quick else 24) * (3 if scheduler_name == "asha" else 1)
    scheduler = (
        nt.ASHA(max_t=steps, grace_period=1, reduction_factor=3)
        if scheduler_name == "asha"
        else None
    )
    with tempfile.TemporaryDirectory() as folder:
        tuner = nt.Tuner(
            sleepy,
            {"lr": nt.uniform(0, 1), "step_s": nt.uniform(0.01, 0.03), "steps": steps},
            metric="loss",
            mode="min",
            num_samples=samples,
            max_concurrent=2,
            seed=1,
            scheduler=scheduler,
            executor=nt.ThreadExecutor(),
            stop={"training_iteration": steps},
            storage_path=folder,
            progress=False,
        )
        began = time.monotonic()
        tuner.start(display=False)
        readings = []
        while not tuner.wait(0.1):
            readings.append((time.monotonic() - began, tuner.eta_s))
        total = time.monotonic() - began
    at, eta = min(
        (reading for reading in readings if reading[1] is not None),
        key=lambda reading: abs(reading[0] - total / 2),
    )
    error = abs(eta - (total - at)) / (total - at)
    emit(
        figure=f"eta_{scheduler_name}",
        run_s=round(total, 2),
        at_s=round(at, 2),
        eta_s=round(eta, 2),
        real_left_s=round(total - at, 2),
        rel_error=round(error, 3),
        target=f"<= {ETA_TARGET}",
        passed=error <= ETA_TARGET,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer curves, shorter runs")
    args = parser.parse_args()
    curve_figures(12 if args.quick else 40)
    for scheduler_name in ("fifo", "asha"):
        eta_figure(scheduler_name, args.quick)


if __name__ == "__main__":
    main()
