"""`%tune` in a real kernel: each command, its effect on the run, and its one-line errors."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from kernels import Kernel

from nbtune import registry

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


SETUP = """
    import contextlib
    import os
    import threading
    import time
    import nbtune as nt
    %load_ext nbtune

    def train(config):
        # Reports until it is stopped; checkpoints every step, so it pauses by checkpoint.
        checkpoint = nt.get_checkpoint()
        step = checkpoint["step"] if checkpoint else 0
        while True:
            step += 1
            nt.report(loss=config["lr"] / step, checkpoint={"step": step})
            threading.Event().wait(0.01)

    space = {"lr": nt.grid([0.1, 0.2]), "model": {"layers": nt.choice([1, 2])}}

    def wait_until(tuner, condition, timeout=30):
        # Block until condition() holds, checking it again at each event of the run.
        changed = threading.Event()
        unsubscribe = tuner.subscribe(lambda event: changed.set())
        deadline = time.monotonic() + timeout
        try:
            while True:
                changed.clear()
                if condition():
                    return
                if not changed.wait(max(0, deadline - time.monotonic())):
                    raise TimeoutError(f"still {statuses(tuner)} after {timeout} s")
        finally:
            unsubscribe()

    def statuses(tuner):
        return {trial.trial_id: trial.status.value for trial in tuner.trials}

    def reported(tuner, *trial_ids):
        # Whether these trials exist and each has reported at least once.
        iterations = {trial.trial_id: trial.iteration for trial in tuner.trials}
        return all(iterations.get(trial_id, 0) >= 1 for trial_id in trial_ids)

    def stop_every_run():
        # End the runs the last test launched, so that the next one has the workers.
        for tuner in get_ipython().magics_manager.registry["TuneMagics"].runs.values():
            with contextlib.suppress(nt.RunEndedError):
                tuner.stop()
            assert tuner.wait(30)
"""


@pytest.fixture(scope="module")
def shared_kernel(tmp_path_factory):
    """One kernel for the whole file (each test launches its own runs), working in a tmp dir."""
    started = Kernel(tmp_path_factory.mktemp("notebook"))
    started.check(SETUP)
    yield started
    started.shutdown()


@pytest.fixture
def kernel(shared_kernel):
    yield shared_kernel
    shared_kernel.check("stop_every_run()")


# ----- launching ------------------------------------------------------------------------------


def test_launch_starts_the_run_in_the_background_and_binds_the_tuner(kernel):
    cell = kernel.run(
        "%tune train --space space --samples 2 --metric loss --mode min --scheduler fifo "
        "--searcher random --executor thread --concurrency 3 --seed 7 --time-budget 60 "
        "--fail-fast --stop training_iteration=4 --storage runs --name launch --as t"
    )
    assert cell.ok, cell.stderr
    assert any(WIDGET_VIEW in data for data in cell.displays), "the dashboard shows"

    assert kernel.check("""
        print(t.name, t.metric, t.mode, t.num_samples, t.max_concurrent, t.seed)
        print(t.time_budget_s, t.fail_fast)
        print(type(t.scheduler).__name__, type(t.searcher).__name__, type(t.executor).__name__)
        print(t.wait(30), t.status, t.path.as_posix())
        print(t.dataframe()["training_iteration"].tolist())
    """).splitlines() == [
        "launch loss min 2 3 7",
        "60.0 True",
        "FIFOScheduler RandomSearch ThreadExecutor",
        "True <finished: 4 terminated> runs/launch",
        "[4, 4, 4, 4]",
    ]


def test_launch_with_asha_by_name_cuts_weak_trials_at_its_rungs(kernel):
    cell = kernel.run(
        "%tune train --space space --samples 20 --metric loss --mode min --scheduler asha "
        "--concurrency 2 --name sweep --as t"
    )
    assert cell.ok, cell.stderr

    made = kernel.check(
        "print(type(t.scheduler).__name__, t.scheduler.max_t, t.scheduler.grace_period)"
    )
    assert made == "ASHA 100 1\n", "Ray Tune's ASHAScheduler default max_t"

    assert kernel.check("""
        def cut(trial):
            # Ended before max_t: only ASHA ends a trial early here (no --stop, no user stop).
            return trial.status.value == "TERMINATED" and trial.iteration < t.scheduler.max_t
        wait_until(t, lambda: any(cut(trial) for trial in t.trials))
        print(sorted({trial.config["lr"] for trial in t.trials if cut(trial)}))
        print({trial.iteration for trial in t.trials if cut(trial)} <= {1, 3, 9, 27, 81})
    """).splitlines() == ["[0.2]", "True"], "lr=0.2 does worse at every step: cut at a rung"


def test_options_in_call_form_and_a_budget_from_stop(kernel):
    cell = kernel.run(
        '%tune train --space space --metric loss --scheduler "asha(max_t=27, grace_period=2)" '
        "--executor thread() --name options --no-display --as t"
    )
    assert cell.ok, cell.stderr
    kernel.check(
        "%tune train --space space --metric loss --scheduler hyperband "
        "--stop training_iteration=9 --executor thread --name budget --no-display --as b"
    )
    assert kernel.check("""
        print(type(t.scheduler).__name__, t.scheduler.max_t, t.scheduler.grace_period)
        print(type(t.executor).__name__)
        print(type(b.scheduler).__name__, b.scheduler.max_t)
    """).splitlines() == [
        "ASHA 27 2",
        "ThreadExecutor",
        "HyperBand 9",
    ], "the options as written; HyperBand's brackets fit the trials' 9 iterations, not 81"


def test_launch_binds_tuner_by_default_and_stop_ends_the_run(kernel):
    cell = kernel.run("%tune train --space space --name plain --no-display")
    assert cell.ok and cell.displays == [] and cell.result is None, cell
    assert kernel.check("print(_tuner.name, _tuner.state, type(_tuner.executor).__name__)") == (
        "plain running LokyExecutor\n"
    ), "the cell returned while the run goes on, in worker processes by default"

    assert kernel.run("%tune stop").ok
    assert kernel.check("print(_tuner.wait(30), _tuner.state)") == "True stopped\n"


def test_a_taken_name_is_refused_unless_overwrite(kernel):
    kernel.check("%tune train --space space --name taken --no-display --as first")
    kernel.check("first.stop(); first.wait(30)")

    refused = kernel.run("%tune train --space space --name taken --no-display --as second")
    assert refused.stderr == (
        "UsageError: %tune: nbtune-runs/taken already holds an experiment; pass resume=True to "
        "carry it on, pick another name=..., or pass overwrite=True to replace it\n"
    )
    assert kernel.check("print('second' in globals())") == "False\n", "nothing was bound"

    kernel.check("%tune train --space space --name taken --no-display --as second --overwrite")
    assert kernel.check("print(second.state)") == "running\n"


def test_restore_carries_on_a_stopped_run(kernel):
    kernel.check("%tune train --space space --name comeback --no-display --as first")
    kernel.check("""
        wait_until(first, lambda: reported(first, 0))
        first.pause(0)
        wait_until(first, lambda: statuses(first)[0] == "PAUSED")
        first.stop(); first.wait(30)
    """)
    cell = kernel.run("%tune restore nbtune-runs/comeback train --no-display --as again")
    assert cell.ok, cell.stderr
    carried_on = kernel.check("""
        wait_until(again, lambda: again.get_trial(0).iteration > first.get_trial(0).iteration)
        print(again.name, again.get_trial(0).status)
    """)
    assert carried_on == "comeback RUNNING\n", "trial 0, paused when the run stopped, goes on"
    assert kernel.run("%tune stop").ok, "the restored run is the latest: commands act on it"
    assert kernel.check("print(again.wait(30), again.state)") == "True stopped\n"

    missing = kernel.run("%tune restore nowhere train")
    assert missing.stderr == (
        "UsageError: %tune restore: nowhere holds no nbtune experiment (no experiment.json); "
        "check the path, e.g. nbtune-runs/<name>\n"
    )


# ----- steering -------------------------------------------------------------------------------


def test_pause_and_resume_trials_or_all_of_them(kernel):
    kernel.check("""
        %tune train --space space --samples 2 --concurrency 2 --name steer --no-display --as t
        wait_until(t, lambda: reported(t, 0, 1))
    """)

    kernel.check("%tune pause 0")
    assert (
        kernel.check("""
        wait_until(t, lambda: statuses(t)[0] == "PAUSED" and reported(t, 2))
        print(t.get_trial(0).paused_by)
    """)
        == "checkpoint\n"
    ), "trial 0 saved a checkpoint and freed its worker for trial 2"

    kernel.check("%tune pause 1 2")
    kernel.check("""
        wait_until(t, lambda: statuses(t)[1] == statuses(t)[2] == "PAUSED" and reported(t, 3))
    """)

    kernel.check("%tune resume 0")
    kernel.check('wait_until(t, lambda: statuses(t)[0] == "RUNNING")')

    kernel.check("%tune pause all")
    kernel.check("wait_until(t, lambda: set(statuses(t).values()) == {'PAUSED'})")

    kernel.check("%tune resume all")
    assert (
        kernel.check("""
        wait_until(t, lambda: t.status.running == 2)
        print(t.status)
    """)
        == "<running (live): 2 pending, 2 running>\n"
    )


def test_pause_resume_and_stop_say_what_they_did(kernel):
    kernel.check("""
        %tune train --space space --samples 2 --concurrency 1 --name ack --no-display --as t
        wait_until(t, lambda: reported(t, 0))
    """)
    assert kernel.run("%tune add lr=0.3 model/layers=1").result == "1", "trial 0 holds the worker"
    assert kernel.run("%tune add lr=0.4 model/layers=1").result == "2"
    assert kernel.check("%tune pause 1 2") == "paused trials 1, 2\n", "waiting: at once"
    assert kernel.check("%tune resume 1") == "trial 1 waits for a worker\n", "0 holds it"
    assert kernel.check("%tune stop 2") == "stopped trial 2\n", "a paused trial: at once"
    assert kernel.check("%tune pause 0") in (
        "trial 0 pauses at its next report\n",
        "paused trial 0\n",  # if its next report came before the line was written
    )
    kernel.check('wait_until(t, lambda: statuses(t)[0] == "PAUSED")')
    assert kernel.check("%tune pause 0") == "trial 0: nothing to pause\n"
    assert kernel.check("%tune stop").startswith("the run 'ack' ")
    assert kernel.check("t.wait(30)") == ""


def test_stop_a_trial_or_force_it_or_end_the_run(kernel):
    kernel.check("""
        %tune train --space space --samples 2 --concurrency 2 --name halt --no-display --as t
        wait_until(t, lambda: reported(t, 0, 1))
    """)

    kernel.check("%tune stop 0")
    kernel.check('wait_until(t, lambda: statuses(t)[0] == "TERMINATED")')
    assert kernel.run("%tune pause 0").stderr == (
        "UsageError: %tune pause: trial 0 has ended (TERMINATED); only a pending or running "
        "trial can be paused\n"
    )

    forced = kernel.run("%tune stop 1 --force")
    assert forced.ok and forced.stderr == "", "its worker is killed, without a warning"
    kernel.check('wait_until(t, lambda: statuses(t)[1] == "TERMINATED")')

    kernel.check("%tune stop")
    assert kernel.check("print(t.wait(30), t.state)") == "True stopped\n"
    assert kernel.run("%tune resume 2").stderr == (
        "UsageError: %tune resume: the run 'halt' has ended (stopped); start a new Tuner (or "
        "Tuner.restore) to go on\n"
    )


def test_add_fork_concurrency_and_extend(kernel):
    kernel.check("""
        %tune train --space space --concurrency 1 --name grow --no-display --as t
        wait_until(t, lambda: reported(t, 0))
    """)

    added = kernel.run("%tune add lr=0.02 model/layers=2")
    assert added.result == "1", "add returns the new trial's id (the 2nd grid point waits)"
    assert kernel.check("print(t.get_trial(1).config)") == "{'lr': 0.02, 'model': {'layers': 2}}\n"

    forked = kernel.run("%tune fork 0 lr=0.005")
    assert forked.result == "2"
    assert (
        kernel.check("""
        fork, parent = t.get_trial(2), t.get_trial(0)
        print(fork.parent, fork.config == {"lr": 0.005, "model": parent.config["model"]})
    """)
        == "0 True\n"
    )

    kernel.check("%tune concurrency 4")
    assert (
        kernel.check("""
        wait_until(t, lambda: t.status.running == 4)
        print(t.status.max_concurrent)
    """)
        == "4\n"
    ), "trials 0 to 3 (the 2nd grid point) now run at once"

    kernel.check("%tune extend 3")
    assert kernel.check("print(t.searcher.planned_trials)") == "5\n", "2 grid points, then 3 more"


def test_space_searches_the_parameters_it_names_anew(kernel):
    kernel.check("""
        ranged = {"lr": nt.uniform(0.1, 0.2), "model": {"layers": nt.choice([1, 2])}}
        %tune train --space ranged --samples 50 --stop training_iteration=3 --executor thread \
            --name respace --no-display --as t
        wait_until(t, lambda: reported(t, 0))
    """)
    kernel.check("%tune space lr=loguniform(1e-3,1e-2) model/width=64")
    assert kernel.check("print(t.space)") == (
        "SearchSpace({'lr': loguniform(0.001, 0.01), 'model': {'layers': choice([1, 2]), "
        "'width': 64}})\n"
    )
    assert (
        kernel.check("""
        wait_until(t, lambda: any(trial.space_version == 1 for trial in t.trials))
        new = [trial.config for trial in t.trials if trial.space_version == 1]
        print(all(0.001 <= c["lr"] < 0.01 and c["model"]["width"] == 64 for c in new))
    """)
        == "True\n"
    )


def test_commands_act_on_the_latest_run_or_the_one_named_by_run(kernel):
    kernel.check("""
        %tune train --space space --executor thread --name older --no-display --as older
        %tune train --space space --executor thread --name newer --no-display --as newer
        wait_until(older, lambda: reported(older, 0))
        wait_until(newer, lambda: reported(newer, 0))
    """)

    kernel.check("%tune pause 0")
    kernel.check('wait_until(newer, lambda: statuses(newer)[0] == "PAUSED")')
    assert kernel.check("print(statuses(older)[0])") == "RUNNING\n"

    kernel.check("%tune pause 0 --run older")
    kernel.check('wait_until(older, lambda: statuses(older)[0] == "PAUSED")')

    kernel.check("%tune stop --run older")
    assert kernel.check("print(older.wait(30), newer.state)") == "True running\n"

    unknown = kernel.run("%tune status --run nowhere")
    assert unknown.stderr.startswith("UsageError: %tune: no run named 'nowhere'; there are ")


# ----- inspecting -----------------------------------------------------------------------------


def test_status_df_best_and_wait(kernel):
    kernel.check(
        "%tune train --space space --metric loss --seed 0 --stop training_iteration=3 "
        "--executor thread --name inspect --no-display --as t"
    )
    assert kernel.run("%tune wait --timeout 30").result == "True"
    assert kernel.run("%tune status").result == "<finished: 2 terminated>"

    assert kernel.check("""
        frame = %tune df
        history = %tune df --history
        print(frame.equals(t.dataframe()), frame["training_iteration"].tolist())
        print(history.equals(t.history()), len(history))
    """).splitlines() == ["True [3, 3]", "True 6"]

    assert kernel.check("""
        best = %tune best
        print(best == {"config": t.best_config, "result": t.best_result})
        print(best["config"]["lr"], best["result"]["loss"])
    """).splitlines() == ["True", "0.1 0.03333333333333333"]
    layers = kernel.check('print(t.best_config["model"]["layers"])').strip()
    assert kernel.run("%tune best").result.splitlines() == [
        "best loss = 0.03333 · trial 0, iteration 3",
        f"config: lr=0.1, model/layers={layers}",
    ], "a short summary, four significant digits"


def test_help_and_docstring_show_the_usage(kernel):
    shown = kernel.run("%tune --help")
    assert shown.ok and "usage: %tune TRAINABLE [--space NAME] [options]" in shown.stdout
    for line in (
        "  %tune pause [-h] [--run NAME] ID [ID ...]",
        "  %tune stop [-h] [--run NAME] [--force] [ID ...]",
        *(f"  {row}" for row in registry.describe().splitlines()),
        '  --scheduler "asha(max_t=27, grace_period=2)"    --executor "loky(max_workers=4)"',
    ):
        assert line in shown.stdout.splitlines()

    assert "usage: %tune TRAINABLE" in kernel.run("%tune?").page, "%tune? shows the same text"
    assert kernel.run("%tune fork -h").stdout.startswith(
        "usage: %tune fork [-h] [--run NAME] ID [KEY=VALUE ...]"
    )


# ----- mistakes: one line (and the usage when an argument is wrong), never a traceback --------

USAGE = "usage: %tune TRAINABLE [--space NAME] [options]"
COMMANDS = (
    "pause, resume, stop, fork, add, concurrency, space, extend, retry, status, df, best, wait"
)

MISTAKES = {
    "%tune": [f"%tune: name a trainable to launch, or a command: {COMMANDS}", USAGE],
    "%tune pasue 3": [
        "%tune: 'pasue' is neither a command nor a name defined in the notebook; "
        f"did you mean 'pause'? commands: {COMMANDS}",
        USAGE,
    ],
    "%tune --space space": ["%tune: the following arguments are required: TRAINABLE", USAGE],
    "%tune train --space nowhere": ["%tune: 'nowhere' is not defined in the notebook"],
    "%tune retry 0": [
        "%tune retry: trial 0 did not fail (RUNNING); retry runs failed trials again "
        "(tuner.retry('errored') for all of them)"
    ],
    "%tune retry soon": ["%tune retry: retry soon: pass errored, or trial ids"],
    "%tune space lr=lottery(1)": [
        "%tune space: argument KEY=DOMAIN: 'lottery' is not a domain; use one of uniform, "
        "loguniform, quniform, qloguniform, randint, qrandint, lograndint, qlograndint, randn, "
        "qrandn, choice, grid",
        "usage: %tune space [-h] [--run NAME] KEY=DOMAIN [KEY=DOMAIN ...]",
    ],
    "%tune space lr=uniform(0.1,0.2)": [
        "%tune space: RandomSearch walks a grid point by point over the run, so a space with a "
        "grid cannot change mid-run; sample those values with choice(...), or start a new Tuner"
    ],
    "%tune train --scheduler lottery": [
        "%tune: unknown scheduler 'lottery'; use one of: fifo, asha, hyperband, median, pbt"
    ],
    "%tune train --scheduler asha(max_t=27": [
        "%tune: argument --scheduler: 'asha(max_t=27' is not NAME or NAME(KEY=VALUE, ...) with "
        "literal values; quote it whole, e.g. \"asha(max_t=27, time_attr='epoch')\"",
        USAGE,
    ],
    "%tune train --scheduler asha(27)": [
        "%tune: argument --scheduler: 'asha(27)' is not NAME or NAME(KEY=VALUE, ...) with "
        "literal values; quote it whole, e.g. \"asha(max_t=27, time_attr='epoch')\"",
        USAGE,
    ],
    "%tune train --metric loss --scheduler asha(max_tt=27)": [
        "%tune: ASHA: got an unexpected keyword argument 'max_tt'; it takes max_t, "
        "grace_period, reduction_factor, brackets, time_attr, bootstrap_count, metric, mode"
    ],
    "%tune train --metric loss --scheduler asha(max_t=0)": [
        "%tune: ASHA(max_t=0): pass a positive number"
    ],
    "%tune train --executor ray": ["%tune: unknown executor 'ray'; use one of: loky, thread, dask"],
    "%tune train --executor dask": [
        "%tune: DaskExecutor needs a Dask cluster: pass DaskExecutor(client), or the "
        "scheduler's address: DaskExecutor(address='tcp://host:8786') (%tune: --address)"
    ],
    "%tune train --address tcp://127.0.0.1:1": ["%tune: --address goes with --executor dask"],
    "%tune train --executor \"dask(address='tcp://127.0.0.1:1')\" --address tcp://127.0.0.1:2": [
        "%tune: the address is given twice: keep --address or dask(address=...)"
    ],
    "%tune train --mode best": [
        "%tune: argument --mode: invalid choice: 'best' (choose from 'min', 'max')",
        USAGE,
    ],
    "%tune train --as 2t": ["%tune: argument --as: '2t' is not a Python variable name", USAGE],
    "%tune pause": [
        "%tune pause: the following arguments are required: ID",
        "usage: %tune pause [-h] [--run NAME] ID [ID ...]",
    ],
    "%tune pause 99": ["%tune pause: there is no trial 99; its trials are 0 to 1"],
    "%tune pause x": [
        "%tune pause: argument ID: 'x' is not a trial id (a number, or all)",
        "usage: %tune pause [-h] [--run NAME] ID [ID ...]",
    ],
    "%tune add lr": [
        "%tune add: argument KEY=VALUE: 'lr' is not KEY=VALUE (e.g. lr=0.01, act=relu, "
        "model/layers=2)",
        "usage: %tune add [-h] [--run NAME] KEY=VALUE [KEY=VALUE ...]",
    ],
    "%tune add lr=0.1 lr=0.2": ["%tune add: lr is set twice"],
    "%tune add lr=0.1 model=1 model/layers=2": ["%tune add: model/layers is set, but so is model"],
    "%tune add lr=0.1": ["%tune add: config does not fit the search space: missing 'model/layers'"],
    "%tune add act='relu": ["%tune: No closing quotation"],
    "%tune fork 0 =0.1": [
        "%tune fork: argument KEY=VALUE: '=0.1' is not KEY=VALUE (e.g. lr=0.01, act=relu, "
        "model/layers=2)",
        "usage: %tune fork [-h] [--run NAME] ID [KEY=VALUE ...]",
    ],
    "%tune fork 0 momentum=0.9": [
        "%tune fork: fork(0, ...): 'momentum' is not a parameter of the search space; use lr, "
        "model/layers"
    ],
    "%tune concurrency 0": ["%tune concurrency: max_concurrent=0: pass a whole number >= 1"],
    '%tune train --executor "loky(max_workers=-1)"': [
        "%tune: LokyExecutor(max_workers=-1): pass a whole number >= 1"
    ],
    "%tune train --metric loss --searcher \"optuna(sampler='tpe')\"": [
        "%tune: OptunaSearch(sampler='tpe'): pass an Optuna sampler object, e.g. "
        "optuna.samplers.TPESampler(seed=0), or none for TPE seeded with the Tuner's seed"
    ],
    '%tune train --metric loss --scheduler "pbt(perturbation_interval=2, '
    "hyperparam_mutations={'lr': []})\"": [
        "%tune: PBT(hyperparam_mutations=...): {'lr': []}: give at least one value to draw from"
    ],
    "%tune train --stop training_iteration=1e309": [
        "%tune: stop['training_iteration']=inf: the threshold must be a finite number; leave "
        "the key out to have no limit"
    ],
    "%tune train --metric loss --scheduler asha --stop training_iteration=1e309": [
        "%tune: stop['training_iteration']=inf: the threshold must be a finite number; leave "
        "the key out to have no limit"
    ],
    "%tune concurrency two": [
        "%tune concurrency: argument N: invalid int value: 'two'",
        "usage: %tune concurrency [-h] [--run NAME] N",
    ],
}


@pytest.mark.parametrize("call", MISTAKES)
def test_a_mistake_is_one_line_with_the_usage(kernel, call):
    kernel.check("""
        %tune train --space space --executor thread --name mistakes --overwrite --no-display
        wait_until(_tuner, lambda: reported(_tuner, 0, 1))
    """)
    cell = kernel.run(call)
    assert not cell.ok, "the cell fails, so that Run All stops there"
    assert cell.stderr.splitlines() == [f"UsageError: {MISTAKES[call][0]}", *MISTAKES[call][1:]]


def test_the_line_reaches_nbtune_as_typed_and_runs_no_code(kernel):
    kernel.check("""
        %tune train --space space --executor thread --name verbatim --overwrite --no-display
        wait_until(_tuner, lambda: reported(_tuner, 0, 1))
    """)
    cell = kernel.run("%tune add lr={__import__('os').mkdir('expanded')} model/layers=$x")
    assert len(cell.stderr.splitlines()) <= 1
    kernel.check("import os; assert not os.path.exists('expanded')")


def test_deeply_nested_options_are_one_usage_error(kernel):
    nested = "[" * 100_000 + "]" * 100_000
    cell = kernel.run(f'%tune train --scheduler "asha(max_t={nested})"')
    assert cell.stderr.startswith("UsageError: %tune: argument --scheduler: ")
    assert len(cell.stderr.splitlines()) == 2, "the error and the usage"


def test_a_command_before_any_launch_says_to_launch_first(tmp_path):
    fresh = Kernel(tmp_path)
    try:
        cell = fresh.run("%load_ext nbtune\n%tune status")
    finally:
        fresh.shutdown()
    assert cell.stderr.splitlines() == [
        "UsageError: %tune: no run was launched with %tune yet; launch one first",
        USAGE,
    ]


OLD_RUN = Path(__file__).parent / "data" / "old_runs" / "d51197c" / "random-fifo"
OLD_TRAIN = """
    def old_train(config):
        # The trainable of tests/data/old_runs: four steps, a checkpoint (the step) at each.
        start = nt.get_checkpoint() or 0
        for step in range(start, 4):
            nt.report(loss=config["lr"] / (step + 1), checkpoint=step + 1)
"""


def test_restore_carries_on_a_run_of_an_older_nbtune(kernel):
    kernel.check(OLD_TRAIN)
    kernel.check(f"import shutil; shutil.copytree({str(OLD_RUN)!r}, 'old/random-fifo')")
    cell = kernel.run("%tune restore old/random-fifo old_train --no-display --as old")
    assert cell.ok, cell.stderr
    assert kernel.check("print(old.wait(30), old.state, old.status.counts)") == (
        "True finished {'TERMINATED': 3}\n"
    )


def test_restore_of_a_run_that_cannot_go_on_is_one_line_and_changes_nothing(kernel):
    kernel.check(OLD_TRAIN)
    kernel.check(f"""
        import cloudpickle, shutil
        shutil.copytree({str(OLD_RUN)!r}, 'stuck/random-fifo')

        class Forgetful(nt.RandomSearch):
            def restore(self, trials):
                raise AttributeError("'RandomSearch' object has no attribute '_points'")

        with open('stuck/random-fifo/state.pkl', 'rb') as file:
            state = cloudpickle.load(file)
        state['searcher'].__class__ = Forgetful
        with open('stuck/random-fifo/state.pkl', 'wb') as file:
            cloudpickle.dump(state, file)
    """)
    for _ in range(2):
        cell = kernel.run("%tune restore stuck/random-fifo old_train --no-display")
        assert cell.stderr.splitlines() == [
            "UsageError: %tune restore: stuck/random-fifo cannot be carried on by this nbtune "
            "(AttributeError: 'RandomSearch' object has no attribute '_points'); nothing in it "
            "was changed: nbtune.load('stuck/random-fifo') reads its results, and a new run "
            "learns from them with warm_start='stuck/random-fifo'"
        ]
    assert kernel.check("print(nt.load('stuck/random-fifo').state)") == "stopped\n"


def test_restore_of_a_read_only_folder_is_one_line(tmp_path):
    """The kernel runs as another user than root (whom no permission stops)."""
    if os.geteuid() != 0:
        pytest.skip("giving the kernel another user needs root")
    shared = Path(tempfile.mkdtemp(prefix="nbtune-read-only-"))
    try:
        run = shared / "random-fifo"
        shutil.copytree(OLD_RUN, run)
        for path in [shared, *shared.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
            path.chmod(0o500 if path.is_dir() else 0o400)
        fresh = Kernel(tmp_path)
        try:
            fresh.check(SETUP)
            fresh.check(OLD_TRAIN)
            fresh.check(f"os.setgid({NOBODY}); os.setuid({NOBODY})")
            cell = fresh.run(f"%tune restore {run} old_train --no-display")
        finally:
            fresh.shutdown()
    finally:
        shutil.rmtree(shared)
    assert cell.stderr.splitlines() == [
        f"UsageError: %tune restore: {run} cannot be written (no permission to write {run}); "
        f"copy it to a folder of yours and carry the copy on, or read it with "
        f"nbtune.load({str(run)!r})"
    ]


NOBODY = 65534


def test_the_readme_lists_the_names_the_magic_accepts():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert registry.describe(markdown=True) in readme, "paste registry.describe(markdown=True)"
