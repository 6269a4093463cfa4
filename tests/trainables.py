"""Trainables shared by the tests; in a module of their own so worker processes can import them."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np

import nbtune as nt


def quadratic(config):
    """The README's example: resumes from its checkpoint, 20 epochs."""
    ckpt = nt.get_checkpoint()
    start = ckpt["epoch"] + 1 if ckpt else 0
    for epoch in range(start, 20):
        loss = (config["lr"] - 0.01) ** 2 + 1 / (epoch + 1) + config["layers"] * 1e-3
        nt.report(loss=loss, checkpoint={"epoch": epoch})


def count_up(config):
    """Reports loss = 1 / step for `steps` steps (every `interval` s), plus the worker's pid."""
    for step in range(1, config.get("steps", 5) + 1):
        time.sleep(config.get("interval", 0))
        nt.report(loss=1.0 / step, pid=os.getpid())


def fail_at(config):
    """Reports until step `fail_at`, then raises."""
    for step in range(1, 10):
        if step == config["fail_at"]:
            raise ValueError(f"boom at step {step}")
        nt.report(loss=float(step))


def chatty(config):
    print("hello from the trial")
    nt.report(loss=0.0)


def forever(config):
    """Reports every `interval` seconds until it is stopped."""
    step = 0
    while True:
        step += 1
        nt.report(loss=1.0 / step, pid=os.getpid())
        time.sleep(config.get("interval", 0.01))


def chatty_forever(config):
    """Prints and reports every `interval` seconds until it is stopped: its output goes to
    the trial's `output.log` all along."""
    step = 0
    while True:
        step += 1
        print(f"step {step}")
        nt.report(loss=1.0 / step)
        time.sleep(config.get("interval", 0.01))


def no_metric(config):
    nt.report(accuracy=0.5)


def text_metric(config):
    nt.report(loss="low")


def reserved_key(config):
    nt.report(loss=1.0, training_iteration=5)


def returns_number(config):
    """Reports twice, then returns its score, as an Optuna objective does."""
    nt.report(loss=0.9)
    nt.report(loss=0.8)
    return np.float32(config.get("score", 0.5))


def returns_dict(config):
    return {"loss": config["x"] * 2}


def silent(config):
    time.sleep(config.get("seconds", 30))
    nt.report(loss=0.0)


class Counter(nt.Trainable):
    """A class trainable that counts; its checkpoint is the count."""

    def setup(self, config):
        self.count = 0
        self.scale = config["scale"]

    def step(self):
        self.count += 1
        return {"loss": self.scale / self.count, "count": self.count}

    def save_checkpoint(self):
        return {"count": self.count}

    def load_checkpoint(self, checkpoint):
        self.count = checkpoint["count"]


class FinishesAtThree(Counter):
    def step(self):
        result = dict(super().step())
        result["done"] = self.count == 3
        return result


def steps(config):
    """`steps` results every `interval` s; checkpoints each one if `checkpoint` is set.

    With `hold_at`, the step of that number waits until the file `config["gate"]` exists."""
    checkpoint = nt.get_checkpoint()
    start = checkpoint["step"] if checkpoint else 0
    for step in range(start + 1, config["steps"] + 1):
        time.sleep(config.get("interval", 0.01))
        while step == config.get("hold_at") and not os.path.exists(config["gate"]):
            time.sleep(0.005)
        saved = {"step": step} if config.get("checkpoint") else None
        nt.report(loss=config.get("lr", 1.0) / step, step=step, pid=os.getpid(), checkpoint=saved)


def first_version(config):
    """`steps` results every `interval` s, each saying `version=1`; checkpoints each one if
    `checkpoint` is set. `second_version` is the same with `version=2`: a trainable fixed
    mid-run (`Tuner.update_trainable`)."""
    _versioned(config, 1)


def second_version(config):
    _versioned(config, 2)


def _versioned(config, version):
    checkpoint = nt.get_checkpoint()
    start = checkpoint["step"] if checkpoint else 0
    for step in range(start + 1, config["steps"] + 1):
        time.sleep(config.get("interval", 0.01))
        saved = {"step": step} if config.get("checkpoint") else None
        nt.report(loss=1.0 / step, step=step, version=version, checkpoint=saved)


def waits_for_go(config):
    """`steps` results with a checkpoint each; the first `free` of them at once, each next one
    only once the file `go` exists: a trial caught before a report for as long as a test
    needs."""
    checkpoint = nt.get_checkpoint()
    start = checkpoint["step"] if checkpoint else 0
    for step in range(start + 1, config["steps"] + 1):
        while step > config["free"] and not os.path.exists(config["go"]):
            time.sleep(0.01)
        nt.report(loss=1.0 / step, step=step, checkpoint={"step": step})


class OnDemand(Counter):
    """Checkpoints only when nbtune asks (on pause), never on its own."""

    checkpoint_every = 0

    def step(self):
        time.sleep(self.config.get("interval", 0.01))
        return super().step()


def hangs_at(config):
    """Reports (with a checkpoint) every `interval` s, but before step `hang_at` it goes silent
    for `hang_s` seconds."""
    checkpoint = nt.get_checkpoint()
    start = checkpoint["step"] if checkpoint else 0
    for step in range(start + 1, config["steps"] + 1):
        time.sleep(config["hang_s"] if step == config["hang_at"] else config["interval"])
        nt.report(loss=1.0 / step, step=step, checkpoint={"step": step})


def fails_once(config):
    """Checkpoints every step; on its first attempt (no marker file yet) it fails at step 5."""
    checkpoint = nt.get_checkpoint()
    start = checkpoint["step"] if checkpoint else 0
    for step in range(start + 1, config["steps"] + 1):
        if step == 5 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            raise RuntimeError("flaky at step 5")
        nt.report(loss=1.0 / step, step=step, checkpoint={"step": step})


def slow_after_first(config):
    """Reports (with a checkpoint) at once, then computes for a long time before the next."""
    checkpoint = nt.get_checkpoint()
    step = checkpoint["step"] if checkpoint else 0
    while step < 3:
        step += 1
        nt.report(loss=1.0 / step, step=step, checkpoint={"step": step})
        time.sleep(config["seconds"])


def odd_values(config):
    """NaN and infinity are recorded like any value; they never count as the best."""
    for value in (float("nan"), float("inf"), 0.5, float("-inf")):
        nt.report(loss=value)


def list_metric(config):
    nt.report(loss=[0.1, 0.2])


def bool_metric(config):
    nt.report(loss=True)


def array_metric(config):
    """A 1-element array is not a scalar: it is refused as the metric."""
    nt.report(loss=np.array([0.5]))


def text_time(config):
    nt.report(loss=1.0, epoch="first")


def positional_number(config):
    nt.report(0.5)


def key_twice(config):
    nt.report({"loss": 0.5}, loss=0.4)


def returns_text(config):
    return "done"


class Scalar:
    """A stand-in for a torch or JAX scalar: a number behind `.item()`."""

    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


class Ratio:
    """A number that only converts through `__float__`."""

    def __float__(self):
        return 0.25


def every_kind(config):
    """One value of each kind a trainable may report, under its kind's name."""
    nt.report(
        **{f"np_{name}": getattr(np, name)(3) for name in config["widths"]},
        zero_d=np.array(0.5, dtype=np.float32),
        np_bool=np.bool_(True),
        item=Scalar(np.int16(7)),
        ratio=Ratio(),
        nested={"a": [np.float32(0.5), (np.int8(1),)]},
        text=np.str_("fine"),
        one_element=np.array([0.5]),
    )


def reports_in_forms(config):
    """The forms of `report`: a mapping, keywords, both, and a mapping with a checkpoint."""
    nt.report({"loss": 0.4})
    nt.report(loss=0.3)
    nt.report({"loss": 0.2}, accuracy=0.9)
    nt.report({"loss": 0.1}, checkpoint={"step": 4})


def typed_curve(config):
    """`learning_curve`'s loss reported as `config["type"]` ("float", "float32", "float64"),
    with the step `t` as an int or an np.int64; the loss is rounded to float32 first, so that
    every type holds the same number."""
    numpy_types = config["type"] != "float"
    make = getattr(np, config["type"]) if numpy_types else float
    for t in range(1, config["max_t"] + 1):
        loss = float(np.float32(config["q"] * (1 + 1 / t)))
        nt.report(loss=make(loss), t=np.int64(t) if numpy_types else t)


def unpicklable_checkpoint(config):
    import threading

    nt.report(loss=1.0, checkpoint={"lock": threading.Lock()})


def learning_curve(config):
    """Loss `q * (1 + 1/t)` at step t up to `max_t`, checkpointed each step (or every
    `checkpoint_every` steps): the lower q, the better the trial at every step, so a
    scheduler's choices can be computed by hand.

    A trial whose q is not `config["free"]` waits before its first step until the file
    `config["gate"]` exists, when the config names one.
    """
    checkpoint = nt.get_checkpoint()
    start = checkpoint["t"] if checkpoint else 0
    gate = config.get("gate")
    while start == 0 and gate and config["q"] != config.get("free") and not os.path.exists(gate):
        time.sleep(0.005)
    for t in range(start + 1, config.get("max_t", 9) + 1):
        time.sleep(config.get("interval", 0))
        due = t % config.get("checkpoint_every", 1) == 0
        nt.report(loss=config["q"] * (1 + 1 / t), t=t, checkpoint={"t": t} if due else None)


def accumulate(config):
    """Adds `lr` to a running value each step (carried in the checkpoint); loss = -value, so a
    higher lr is better. Reports the value it started from, to check where a fork began."""
    checkpoint = nt.get_checkpoint() or {"t": 0, "value": 0.0}
    value, started_from = checkpoint["value"], checkpoint["value"]
    for t in range(checkpoint["t"] + 1, config.get("max_t", 10) + 1):
        time.sleep(config.get("interval", 0))
        value += config["lr"]
        nt.report(
            loss=-value,
            value=value,
            started_from=started_from,
            t=t,
            checkpoint={"t": t, "value": value},
        )


BIG = bytes(range(256)) * 8192
"""2 MiB: more than a Dask checkpoint may carry inline."""


def big_checkpoint(config):
    """Checkpoints `BIG` each step; reports whether the checkpoint it resumed from was intact."""
    checkpoint = nt.get_checkpoint()
    intact = checkpoint is not None and checkpoint["data"] == BIG
    start = checkpoint["step"] if checkpoint else 0
    for step in range(start + 1, config["steps"] + 1):
        nt.report(loss=1.0 / step, resumed_intact=intact, checkpoint={"step": step, "data": BIG})


def repeated(config):
    """(x - 0.5)^2 plus a tenth of the trial's index in its Repeater group (a stand-in for
    seed noise), over `steps` checkpointed results every `interval` s."""
    checkpoint = nt.get_checkpoint()
    start = checkpoint["step"] if checkpoint else 0
    loss = (config["x"] - 0.5) ** 2 + config["__trial_index__"] / 10
    for step in range(start + 1, config.get("steps", 1) + 1):
        time.sleep(config.get("interval", 0))
        nt.report(loss=loss, checkpoint={"step": step})


def model_files(config):
    """Saves its "model" as files, a directory checkpoint at every step, and resumes from it.

    loss = |step - best_at|; the first attempt (one that starts without a checkpoint) raises at
    step `fail_at`, if given.
    """
    checkpoint = nt.get_checkpoint()
    step = int((checkpoint.path / "step.txt").read_text()) if checkpoint else 0
    while step < config["steps"]:
        step += 1
        time.sleep(config.get("interval", 0.01))
        if step == config.get("fail_at") and checkpoint is None:
            raise RuntimeError(f"flaky at step {step}")
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "step.txt").write_text(str(step))
            Path(folder, "weights.bin").write_bytes(bytes(config.get("bytes", 100)))
            nt.report(
                loss=abs(step - config.get("best_at", 0)),
                checkpoint=nt.Checkpoint.from_directory(folder),
            )


def resources_seen(config):
    """Reports, every `interval` s for `steps` steps, the GPUs and thread pools it was given."""
    from threadpoolctl import threadpool_info

    blas = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    for step in range(config.get("steps", 3)):
        time.sleep(config.get("interval", 0.05))
        nt.report(
            loss=float(step),
            gpus=os.environ.get("CUDA_VISIBLE_DEVICES", "unset"),
            omp=int(os.environ.get("OMP_NUM_THREADS", "0")),
            blas=blas[0] if blas else -1,
        )


def reports_in_finally(config):
    """Reports until it is stopped, then reports once more from a `finally:` block."""
    step = 0
    try:
        while True:
            step += 1
            nt.report(loss=1.0 / step)
    finally:
        nt.report(loss=0.0, last=True)


def swallows_the_stop(config):
    """Catches everything `report` raises, the stop included, and reports on."""
    for step in range(1, 6):
        try:
            nt.report(loss=1.0 / step)
        except BaseException:
            nt.report(loss=0.0, caught=True)


class LoadsNowhere:
    """Pickles in the worker, but its pickle raises wherever it is loaded."""

    def __reduce__(self):
        return _refuse_to_load, ()


def _refuse_to_load():
    raise RuntimeError("this value cannot be loaded here")


def _circular():
    loop = {"a": 1}
    loop["self"] = loop
    return loop


ODD_VALUES = {
    "huge_int": lambda: {"loss": 10**400},
    "huge_extra": lambda: {"loss": 0.5, "count": -(10**5000)},
    "tuple_keys": lambda: {"loss": 0.5, "table": {(1, 2): 3}},
    "circular": lambda: {"loss": 0.5, "loop": _circular()},
    "int_and_text_key": lambda: {"loss": 0.5, "by_id": {1: "a", "1": "b"}},
}


def reports_odd(config):
    """Reports a plain result, then the odd one named by `config["odd"]` (or a value that
    cannot be loaded outside the worker), then a plain one again."""
    nt.report(loss=1.0)
    odd = config["odd"]
    nt.report(ODD_VALUES[odd]() if odd in ODD_VALUES else {"loss": 0.5, "blob": LoadsNowhere()})
    nt.report(loss=0.25)


LOOKALIKES = {
    "marker": {"__pickle__": "hello"},
    "escape": {"__dict__": [1, 2]},
    "nested": {"a": {"__pickle__": "x", "b": 1}, "list": [{"__dict__": "y"}]},
}


def reports_lookalikes(config):
    """Reports dicts shaped like nbtune's own markers for pickled values, and an array."""
    nt.report(loss=0.5, grid=np.eye(2), **LOOKALIKES)


class WritesWhenLoaded:
    """Its pickle creates the file `path` wherever it is loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def leaves_every_file(config):
    """Prints, checkpoints and then fails: it leaves output.log, a checkpoint and error.txt."""
    print("a line for output.log")
    nt.report(loss=1.0, checkpoint={"step": 1})
    raise RuntimeError("a line for error.txt")


def uses_a_pool(config):
    """Runs a task in a process pool of its own, started by `config["method"]`."""
    import multiprocessing

    with multiprocessing.get_context(config["method"]).Pool(1) as pool:
        nt.report(loss=float(pool.apply(abs, (-2,))))


def _report_refused():
    """What `nbtune.report` says where it cannot report (None if it reported)."""
    try:
        nt.report(loss=0.0)
    except RuntimeError as exc:
        return str(exc)
    return None


def reports_from_a_fork(config):
    """A forked child tries to report (and writes what it was told to `config["said"]`)."""
    pid = os.fork()
    if pid == 0:
        try:
            with open(config["said"], "w") as file:
                file.write(_report_refused() or "reported")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    nt.report(loss=1.0)


def reports_from_a_thread(config):
    """A helper thread tries to report; the trial reports what it was told."""
    import threading

    said = []
    helper = threading.Thread(target=lambda: said.append(_report_refused()))
    helper.start()
    helper.join()
    nt.report(loss=1.0, said=said[0] or "reported")


def uses_joblib(config):
    """Computes with joblib.Parallel on two processes, as scikit-learn's n_jobs=2 does."""
    from joblib import Parallel, delayed

    squares = Parallel(n_jobs=2)(delayed(abs)(-x) for x in range(4))
    nt.report(loss=float(sum(squares)))


def holds_memory(config):
    """Fills `mb` megabytes, keeps them, and reports its pid and environment `steps` times."""
    ballast = bytearray(config["mb"] * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])
    for step in range(config.get("steps", 2)):
        nt.report(
            loss=float(step),
            pid=os.getpid(),
            gpus=os.environ.get("CUDA_VISIBLE_DEVICES", "unset"),
            held=len(ballast),
        )


def dies_at(config):
    """Reports every `interval` s; at step `die_at` its process is killed (SIGKILL)."""
    import signal

    for step in range(1, config["steps"] + 1):
        if step == config.get("die_at"):
            os.kill(os.getpid(), signal.SIGKILL)
        nt.report(loss=1.0 / step, step=step, pid=os.getpid())
        time.sleep(config.get("interval", 0.01))


def boosts(config):
    """Trains XGBoost or LightGBM (`library`) on breast cancer data for `rounds` rounds in all,
    reporting through nbtune's callback; `nap` s per round leave time to pause it. With
    `summary`, it returns a dict of the booster's rounds (without the metric) at the end."""
    from sklearn.datasets import load_breast_cancer

    features, labels = load_breast_cancer(return_X_y=True)
    napping = _Napper(config.get("nap", 0.0))
    if config["library"] == "xgboost":
        import xgboost as xgb

        from nbtune.integrations.xgboost import ReportCallback, resume_kwargs

        report = ReportCallback(config.get("metrics"), checkpoint_every=config.get("every"))
        train_set = xgb.DMatrix(features[:400], labels[:400])
        booster = xgb.train(
            {"objective": "binary:logistic", "eval_metric": ["logloss", "error"], "nthread": 1},
            train_set,
            evals=[(train_set, "train"), (xgb.DMatrix(features[400:], labels[400:]), "validation")],
            verbose_eval=False,
            callbacks=[napping.xgboost(), report],
            **resume_kwargs(num_boost_round=config["rounds"]),
        )
        return {"rounds_run": booster.num_boosted_rounds()} if config.get("summary") else None
    import lightgbm as lgb

    from nbtune.integrations.lightgbm import ReportCallback, resume_kwargs

    train_set = lgb.Dataset(features[:400], labels[:400])
    booster = lgb.train(
        {"objective": "binary", "metric": ["binary_logloss"], "verbose": -1, "num_threads": 1},
        train_set,
        valid_sets=[train_set, lgb.Dataset(features[400:], labels[400:], reference=train_set)],
        valid_names=["train", "validation"],
        callbacks=[
            napping,
            ReportCallback(config.get("metrics"), checkpoint_every=config.get("every")),
        ],
        **resume_kwargs(num_boost_round=config["rounds"]),
    )
    return {"rounds_run": booster.current_iteration()} if config.get("summary") else None


class _Napper:
    """Sleeps `seconds` after each round: a LightGBM callback; `.xgboost()` for XGBoost."""

    order = 10

    def __init__(self, seconds):
        self.seconds = seconds

    def __call__(self, env=None):
        time.sleep(self.seconds)

    def xgboost(self):
        import xgboost as xgb

        napper = self

        class Nap(xgb.callback.TrainingCallback):
            def after_iteration(self, model, epoch, evals_log):
                napper()
                return False

        return Nap()


def conditional_space(trial):
    """A define-by-run space: an SVC's C or a forest's depth, by the classifier drawn."""
    classifier = trial.suggest_categorical("classifier", ["SVC", "RF"])
    if classifier == "SVC":
        trial.suggest_float("svc_c", 1e-3, 1e3, log=True)
    else:
        trial.suggest_int("rf_depth", 2, 32, log=True)
    return {"n_jobs": 1}


def conditional_score(config):
    """Best near C = 1 for an SVC; deeper forests are worse."""
    if config["classifier"] == "SVC":
        nt.report(loss=float(np.log10(config["svc_c"]) ** 2))
    else:
        nt.report(loss=float(config["rf_depth"]) / 4)
