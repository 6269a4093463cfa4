"""Bad input fails early, in one line that says what to change, and harms nothing recorded."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
import trainables

import nbtune as nt


def run(tuner):
    tuner.start()
    assert tuner.wait(60)
    return tuner


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"mode": "minimize"}, ValueError, "mode='minimize': use 'min' or 'max'"),
        ({"num_samples": 0}, ValueError, "num_samples=0: pass a whole number >= 1"),
        ({"max_concurrent": -1}, ValueError, "max_concurrent=-1: pass a whole number >= 1"),
        ({"time_budget_s": 0}, ValueError, "time_budget_s=0: pass a positive number"),
        ({"trial_timeout_s": 0}, ValueError, "trial_timeout_s=0: pass a positive number"),
        ({"trial_timeout_s": "1m"}, ValueError, "trial_timeout_s='1m': pass a positive number"),
        ({"seed": -3}, ValueError, "seed=-3: pass a whole number >= 0"),
        ({"max_failures": -1}, ValueError, "max_failures=-1: pass a whole number >= 0"),
        ({"name": "a/b"}, ValueError, "name='a/b': use one folder name of letters, digits"),
        ({"metric": 3}, TypeError, "metric=3: pass the name of a reported value"),
        ({"stop": "soon"}, TypeError, "stop='soon': pass a dict like"),
    ],
)
def test_bad_arguments_are_refused_when_the_tuner_is_built(
    make_tuner, runs, options, error, message
):
    with pytest.raises(error, match=f"^{message}"):
        make_tuner(trainables.count_up, **options)
    assert not runs.exists(), "nothing may be written for a refused tuner"


def test_an_invalid_domain_is_refused_where_it_is_written():
    with pytest.raises(ValueError, match="low must be > 0 for a log scale"):
        nt.loguniform(0, 1)


def test_a_trainable_that_is_not_one(make_tuner):
    with pytest.raises(TypeError, match="pass a function train.config. or a subclass of"):
        make_tuner(42)


def test_an_unpicklable_trainable_is_named(make_tuner):
    lock = threading.Lock()

    def train(config):
        with lock:
            nt.report(loss=0.0)

    with pytest.raises(TypeError, match="the trainable 'train' cannot be sent to worker processes"):
        make_tuner(train)
    run(make_tuner(train, executor=nt.ThreadExecutor()))


def test_a_sample_from_that_raises_is_caught_before_any_worker_starts(make_tuner, runs):
    space = {"a": nt.sample_from(lambda config: config["missing"])}
    with pytest.raises(ValueError, match="sample_from for 'a' raised KeyError"):
        make_tuner(trainables.count_up, space)
    assert not runs.exists()


@pytest.mark.parametrize("below", ["", "runs"])
def test_a_storage_path_where_a_file_stands_is_refused_naming_the_file(tmp_path, below):
    file = tmp_path / "notes.txt"
    file.write_text("keep me")
    storage_path = file / below if below else file
    named = "" if not below else f": {str(file)!r}"
    message = f"storage_path={str(storage_path)!r}{named} is a file, not a folder; pass a folder"
    with pytest.raises(NotADirectoryError, match=message):
        nt.Tuner(trainables.count_up, {"steps": 1}, storage_path=storage_path)
    assert file.read_text() == "keep me"


def test_a_lambda_gets_a_default_name_that_is_a_folder_name(make_tuner):
    tuner = make_tuner(lambda config: nt.report(loss=1.0), name=None, executor=nt.ThreadExecutor())
    assert tuner.name.startswith("lambda-")
    tuner.run()
    assert tuner.state == "finished"


def test_a_second_run_with_the_same_name_is_refused_unless_told(make_tuner):
    first = run(make_tuner(trainables.count_up, name="same", metric="loss"))
    with pytest.raises(
        FileExistsError,
        match="already holds an experiment; pass resume=True to carry it on, pick another name",
    ):
        make_tuner(trainables.count_up, name="same")
    assert len(nt.load(first.path).history()) == 5, "the first run is untouched"
    second = run(make_tuner(trainables.count_up, {"steps": 2}, name="same", overwrite=True))
    assert len(nt.load(second.path).history()) == 2


@pytest.mark.parametrize(
    ("trainable", "message"),
    [
        (trainables.no_metric, "the trial reported accuracy but not the metric 'loss'; call "),
        (
            trainables.text_metric,
            "the metric 'loss' must be a number, but the trial reported loss='low' (str); "
            "report an int or a float there, and anything else under another name",
        ),
        (
            trainables.bool_metric,
            "'loss' must be a number, but the trial reported loss=True (bool)",
        ),
        (trainables.list_metric, "the trial reported loss=[0.1, 0.2] (list); report an int"),
        (trainables.array_metric, "the trial reported loss=array([0.5]) (ndarray); report an int"),
        (trainables.reserved_key, "nbtune sets 'training_iteration'; rename your metric"),
        (
            trainables.returns_text,
            "the trainable returned 'done' (str); return a number (the metric's final value) or a "
            "dict of metrics, or call nbtune.report(...)",
        ),
        (
            trainables.positional_number,
            "nbtune.report(0.5): pass the metrics by name, report(loss=...), or as one dict, "
            "report({'loss': ...}); a checkpoint goes in checkpoint=...",
        ),
        (
            trainables.key_twice,
            "nbtune.report: 'loss' is given both in the dict and as a keyword; pass it once",
        ),
        (
            trainables.unpicklable_checkpoint,
            "nbtune.report(checkpoint=...): the checkpoint cannot be pickled (TypeError: "
            "cannot pickle '_thread.lock' object); checkpoint plain data",
        ),
    ],
)
def test_bad_reports_end_the_trial_with_a_clear_error(make_tuner, trainable, message):
    tuner = run(make_tuner(trainable, metric="loss"))
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.ERROR
    assert message in trial.error
    assert "\n" not in trial.error
    assert tuner.history().empty


def test_a_returned_number_needs_a_metric_to_be_recorded_under(make_tuner):
    tuner = run(make_tuner(trainables.returns_number))
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.ERROR
    assert trial.error == (
        "TypeError: the trainable returned 0.5, but the experiment has no metric to record it "
        "under: pass metric=... to nbtune.Tuner (or return a dict of metrics)"
    )
    assert len(tuner.history()) == 2, "what it reported before it returned is kept"


def test_a_time_attr_that_is_not_a_number_fails_the_run_naming_it_and_its_type(make_tuner):
    tuner = make_tuner(trainables.text_time, metric="loss", scheduler=nt.ASHA(9, time_attr="epoch"))
    with pytest.raises(RuntimeError) as raised:
        tuner.run()
    assert (
        "ASHA's time_attr 'epoch' must be a number, but the trial reported epoch='first' "
        "(str); report an int or a float there, and anything else under another name"
    ) in str(raised.value)
    assert tuner.status.state == "failed"


OUTSIDE_A_TRIAL = """
import nbtune as nt
for call in (lambda: nt.report(loss=1.0), nt.get_checkpoint):
    try:
        call()
    except RuntimeError as error:
        print(error)
"""


def test_report_outside_a_trial():
    """In a process of its own: a trial that another test left running on a thread of this
    one (an abandoned hung trial) would make it "another thread than the trial's"."""
    out = subprocess.run(
        [sys.executable, "-c", OUTSIDE_A_TRIAL], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(out) == 2
    assert all("only work inside a trial" in line for line in out), out


def test_an_unknown_trial_id(make_tuner):
    tuner = run(make_tuner(trainables.count_up, num_samples=3))
    with pytest.raises(nt.TrialNotFoundError, match="there is no trial 7; its trials are 0 to 2"):
        tuner.get_trial(7)


def test_using_a_tuner_in_the_wrong_order(make_tuner):
    tuner = make_tuner(trainables.count_up)
    with pytest.raises(RuntimeError, match="has not started; call tuner.start"):
        tuner.wait()
    run(tuner)
    with pytest.raises(RuntimeError, match="was already started; make a new Tuner"):
        tuner.start()


def test_best_needs_a_metric(make_tuner):
    tuner = run(make_tuner(trainables.count_up))
    with pytest.raises(ValueError, match="pass metric=... to nbtune.Tuner"):
        _ = tuner.best_result


def test_nan_and_inf_are_recorded_but_never_the_best(make_tuner):
    tuner = run(make_tuner(trainables.odd_values, metric="loss"))
    losses = tuner.history()["loss"].tolist()
    assert len(losses) == 4 and math.isnan(losses[0]) and losses[1:] == [math.inf, 0.5, -math.inf]
    assert tuner.best_result["loss"] == 0.5
    assert tuner.dataframe().loc[0, "best_loss"] == 0.5


def test_load_or_restore_of_a_folder_that_holds_no_experiment(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no nbtune experiment .no experiment.json."):
        nt.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="holds no nbtune experiment"):
        nt.Tuner.restore(tmp_path / "missing", trainables.count_up)


def test_a_corrupted_state_file_spares_the_results(make_tuner):
    tuner = run(make_tuner(trainables.count_up, metric="loss"))
    (tuner.path / "state.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="state.pkl cannot be read .* the results are intact"):
        nt.Tuner.restore(tuner.path, trainables.count_up)
    assert len(nt.load(tuner.path).history()) == 5


def test_a_directory_from_a_newer_nbtune_is_refused(make_tuner):
    tuner = run(make_tuner(trainables.count_up, metric="loss"))
    spec_file = tuner.path / "experiment.json"
    spec = json.loads(spec_file.read_text())
    assert spec["format_version"] == 1
    spec_file.write_text(json.dumps({**spec, "format_version": 99}))
    with pytest.raises(ValueError, match="written by a newer nbtune .format 99; this one reads up"):
        nt.load(tuner.path)


def test_the_run_stops_with_a_clear_error_when_its_directory_is_removed(make_tuner, log, tmp_path):
    tuner = make_tuner(trainables.chatty_forever, {"interval": 0.01}, callbacks=[log])
    tuner.start()
    log.wait_for(lambda event: isinstance(event, nt.events.TrialOutput))
    removed = tmp_path / "removed"
    tuner.path.rename(removed)  # gone at once from where the run writes, as rm -rf ends
    shutil.rmtree(removed)
    with pytest.raises(RuntimeError, match="was removed while the run went on; the run stopped"):
        tuner.wait(30)
    assert tuner.state == "failed"
    assert not tuner.path.exists(), "nothing is written where the experiment was"


def test_a_full_disk_stops_the_run_with_a_clear_error_and_harms_nothing(runs):
    """The driver may write files of at most 32 kB (RLIMIT_FSIZE): the result log fills up."""
    driver = textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (32_000, 32_000))
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import nbtune as nt, trainables
        space = {{"steps": 300, "interval": 0, "x": nt.grid([0, 1])}}
        tuner = nt.Tuner(trainables.steps, space, metric="loss", max_concurrent=2,
                         name="full", storage_path={str(runs)!r}, seed=0, progress=False)
        try:
            tuner.run()
        except RuntimeError as exc:
            print(exc)
        print(tuner.state)
    """)
    done = subprocess.run(
        [sys.executable, "-c", driver], capture_output=True, text=True, timeout=120
    )
    run = runs / "full"
    error, state = done.stdout.splitlines()
    assert state == "failed", done.stderr
    assert error == (
        f"the nbtune run 'full' failed: ExperimentWriteError: could not write results.jsonl in "
        f"{run}: File too large; what is on disk is intact: free some space, then carry the run "
        f"on with nbtune.Tuner.restore({str(run)!r}, trainable)"
    )
    log = (run / "results.jsonl").read_bytes()
    assert 0 < len(log) <= 32_000 and log.endswith(b"\n"), "no torn line"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        written = nt.load(run).history()
        json.loads((run / "trials.json").read_text())
    assert len(written) == log.count(b"\n")

    tuner = nt.Tuner.restore(run, trainables.steps, progress=False)
    tuner.run()
    history = tuner.history()
    assert (tuner.dataframe()["status"] == "TERMINATED").all()
    keys = list(zip(history["trial_id"], history["training_iteration"], strict=True))
    assert len(keys) == len(set(keys)) == 600, "carried on after space was freed, nothing twice"
