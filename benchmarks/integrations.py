"""What nbtune's training-library callbacks cost per boosting round.

Prints one JSON line per library and setting, for example:

    {"figure": "callback_overhead", "library": "xgboost", "checkpoint_every": null,
     "ms_per_round": 0.21, "rounds": 300, ...}

Each trial trains the same booster for `ROUNDS` rounds in a warm loky worker, once without the
callback (timed inside the trial) and once with it; the overhead per round is the difference
divided by the rounds, so it counts the report's round trip to the runner and, with
`checkpoint_every`, saving the booster. Medians over `REPEATS` trials.

Usage:
    python benchmarks/integrations.py
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time

import nbtune as nt

ROUNDS = 300
REPEATS = 5


def train(config):
    from sklearn.datasets import load_breast_cancer

    features, labels = load_breast_cancer(return_X_y=True)
    callbacks = []
    if config["with_callback"]:
        module = __import__(f"nbtune.integrations.{config['library']}", fromlist=["x"])
        callbacks.append(module.ReportCallback(checkpoint_every=config["every"]))
    started = time.perf_counter()
    if config["library"] == "xgboost":
        import xgboost as xgb

        data = xgb.DMatrix(features, labels)
        xgb.train(
            {"objective": "binary:logistic", "nthread": 1, "max_depth": 2},
            data,
            ROUNDS,
            evals=[(data, "train")],
            verbose_eval=False,
            callbacks=callbacks,
        )
    else:
        import lightgbm as lgb

        data = lgb.Dataset(features, labels)
        lgb.train(
            {"objective": "binary", "verbose": -1, "num_threads": 1, "num_leaves": 4},
            data,
            ROUNDS,
            valid_sets=[data],
            valid_names=["train"],
            callbacks=callbacks,
        )
    return {"seconds": time.perf_counter() - started}


def seconds(storage: str, library: str, with_callback: bool, every: int | None) -> float:
    space = {"library": library, "with_callback": with_callback, "every": every}
    tuner = nt.Tuner(
        train,
        {**space, "repeat": nt.grid(list(range(REPEATS)))},
        max_concurrent=1,
        name=f"{library}-{with_callback}-{every}",
        storage_path=storage,
        progress=False,
    )
    tuner.run()
    return statistics.median(tuner.history()["seconds"].dropna())


def main() -> None:
    with tempfile.TemporaryDirectory() as storage:
        for library in ("xgboost", "lightgbm"):
            plain = seconds(storage, library, False, None)
            for every in (None, 10):
                reported = seconds(storage, library, True, every)
                print(
                    json.dumps(
                        {
                            "figure": "callback_overhead",
                            "library": library,
                            "checkpoint_every": every,
                            "ms_per_round": round((reported - plain) / ROUNDS * 1000, 4),
                            "plain_ms_per_round": round(plain / ROUNDS * 1000, 4),
                            "rounds": ROUNDS,
                            "repeats": REPEATS,
                        }
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
