"""WandbLogger logs a run to W&B in offline mode (no server), read back from the run files W&B
writes: a run per trial in the experiment's group with its config, every metric at every step,
its end and its best checkpoint; retries and a restored run carry on in the same W&B runs."""

from __future__ import annotations

import json
import logging
import pickle
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trainables

import nbtune as nt

wandb = pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2  # noqa: E402

from nbtune.integrations.wandb import WandbLogger  # noqa: E402


@pytest.fixture
def wandb_dir(tmp_path, monkeypatch):
    """W&B in offline mode, writing its runs, artifacts and settings under `tmp_path`. W&B
    reads its environment once per process, when it is set up: it is torn down after each
    test, so that the next one starts it again with its own."""
    folder = tmp_path / "wandb-files"
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(folder))
    for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    folder.mkdir()
    wandb.teardown()
    yield folder
    wandb.teardown()


# ----- reading W&B's offline run files back ---------------------------------------------------

_BLOCK = 32 * 1024
_FULL, _LAST = 1, 4


def records(path):
    """The records of a `.wandb` file: W&B's header, then LevelDB's log format (32 KiB blocks
    of chunks, each with a 7-byte header: checksum, length, kind)."""
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    position, pieces = 7, b""
    while position + 7 <= len(data):
        left = _BLOCK - position % _BLOCK
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        if left < 7 or (length == 0 and kind == 0):
            position += left  # the block's padding
            continue
        pieces += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            pieces = b""
            yield record


@dataclass
class RunFile:
    """What one session of a W&B run wrote (a resumed run writes a file per session)."""

    run_id: str = ""
    name: str = ""
    group: str = ""
    tags: list = field(default_factory=list)
    config: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    """(step, {metric: value}) in order."""
    summary: dict = field(default_factory=dict)
    artifacts: list = field(default_factory=list)
    preempting: bool = False
    exit_code: int | None = None


def _key(item):
    return item.key or "/".join(item.nested_key)


def read_run(path):
    run = RunFile()
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.run_id, run.name, run.group = (
                record.run.run_id,
                record.run.display_name,
                record.run.run_group,
            )
            run.tags = list(record.run.tags)
            for item in record.run.config.update:
                if item.key != "_wandb":
                    run.config[item.key] = json.loads(item.value_json)
        elif kind == "history":
            values = {_key(i): json.loads(i.value_json) for i in record.history.item}
            metrics = {k: v for k, v in values.items() if not k.startswith("_")}
            run.history.append((values["_step"], metrics))
        elif kind == "summary":
            for item in record.summary.update:
                run.summary[_key(item)] = json.loads(item.value_json)
        elif kind == "artifact":
            run.artifacts.append(record.artifact)
        elif kind == "preempting":
            run.preempting = True
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run


def runs_in(folder):
    """Every W&B run written under `folder`, by run id: its sessions' files, in order. W&B's
    service writes a run's file after `finish` returns: tearing it down waits for that."""
    wandb.teardown()
    found = {}
    for path in sorted(Path(folder).glob("wandb/offline-run-*/run-*.wandb")):
        run = read_run(path)
        found.setdefault(run.run_id, []).append(run)
    return found


def trial_runs(folder, logger):
    """Each trial's run (its one session), by trial id."""
    found = runs_in(folder)
    assert set(found) == set(logger.run_ids.values()), "a W&B run per trial, no other"
    by_trial = {}
    for trial_id, run_id in logger.run_ids.items():
        (by_trial[trial_id],) = found[run_id]
    return by_trial


def steps(run, metric="loss"):
    return [(step, values[metric]) for step, values in run.history if metric in values]


# ----- the tests ------------------------------------------------------------------------------


def valley(config):
    """Loss (epoch - 5)², checkpointed every epoch: the best checkpoint is not the latest."""
    for epoch in range(10):
        nt.report(loss=float((epoch - 5) ** 2), extra={"depth": epoch}, checkpoint={"at": epoch})


def test_each_trial_is_a_run_of_the_group_with_config_metrics_and_its_best_checkpoint(
    make_tuner, wandb_dir
):
    logger = WandbLogger(project="nbtune-tests", tags=["a", "b"])
    space = {"lr": nt.grid([0.1, 0.2]), "nested": {"width": 3}}
    tuner = make_tuner(
        valley, space, metric="loss", executor=nt.ThreadExecutor(), callbacks=[logger]
    )
    tuner.run()
    assert logger.failure is None

    runs = trial_runs(wandb_dir, logger)
    assert sorted(runs) == [0, 1]
    history = tuner.history()
    for trial_id, run in runs.items():
        assert run.name == f"trial_{trial_id}"
        assert run.group == tuner.name, "grouped by the experiment"
        assert run.tags == ["a", "b"]
        assert run.config == {"lr": tuner.get_trial(trial_id).config["lr"], "nested": {"width": 3}}
        rows = history[history["trial_id"] == trial_id]
        expected = list(zip(rows["training_iteration"], rows["loss"], strict=True))
        assert steps(run) == expected, "every result, at its step"
        assert [step for step, _ in steps(run, "extra/depth")] == list(range(1, 11))
        assert all("training_iteration" not in values for _, values in run.history)
        assert run.summary["nbtune/status"] == "completed"
        assert run.exit_code == 0

        (artifact,) = run.artifacts
        assert artifact.type == "model"
        assert "best" in artifact.aliases
        (content,) = artifact.manifest.contents
        assert content.path == "checkpoint_000006.pkl", "the best, at loss 0, not the latest"
        staged = Path(content.local_path).read_bytes()
        assert pickle.loads(staged) == tuner.get_checkpoint(trial_id, "best")


def test_a_group_given_names_the_group(make_tuner, wandb_dir):
    logger = WandbLogger(group="my-sweep", log_checkpoint=False)
    tuner = make_tuner(valley, {"lr": 0.1}, metric="loss", callbacks=[logger])
    tuner.run()
    (run,) = trial_runs(wandb_dir, logger).values()
    assert run.group == "my-sweep"
    assert run.artifacts == [], "log_checkpoint=False"


def test_a_failed_trial_ends_its_run_with_exit_code_1_and_its_error(make_tuner, wandb_dir):
    logger = WandbLogger()
    tuner = make_tuner(
        trainables.fail_at, {"fail_at": nt.grid([3, 99])}, metric="loss", callbacks=[logger]
    )
    tuner.run()
    assert logger.failure is None

    runs = trial_runs(wandb_dir, logger)
    failed, completed = runs[0], runs[1]
    assert failed.exit_code == 1
    assert failed.summary["nbtune/status"] == "failed"
    assert failed.summary["nbtune/error"] == "ValueError: boom at step 3"
    assert [step for step, _ in steps(failed)] == [1, 2]
    assert completed.exit_code == 0
    assert [step for step, _ in steps(completed)] == list(range(1, 10))


def test_a_retried_trial_goes_on_in_the_same_run(make_tuner, wandb_dir, tmp_path):
    logger = WandbLogger()
    space = {"steps": 8, "marker": str(tmp_path / "failed-once")}
    tuner = make_tuner(
        trainables.fails_once,
        space,
        metric="loss",
        max_failures=1,
        executor=nt.ThreadExecutor(),
        callbacks=[logger],
    )
    tuner.run()
    (run,) = trial_runs(wandb_dir, logger).values()
    assert run.summary["nbtune/attempts"] == 2
    assert [step for step, _ in steps(run)] == list(range(1, 9))
    assert run.exit_code == 0


def test_a_stopped_run_cuts_its_runs_short_and_restore_resumes_the_same_w_and_b_runs(
    make_tuner, wandb_dir, stop_midway
):
    space = {"steps": 12, "interval": 0.02, "checkpoint": True, "x": nt.grid([0, 1])}
    first = WandbLogger(log_checkpoint=False)
    tuner = make_tuner(trainables.steps, space, metric="loss", callbacks=[first])
    stop_midway(tuner, iteration=3)
    (cut,) = runs_in(wandb_dir)[first.run_ids[0]]
    assert cut.summary["nbtune/status"] == "cut short"
    assert cut.preempting and cut.exit_code == 1
    paused_at = tuner.get_trial(0).iteration

    second = WandbLogger(log_checkpoint=False)
    again = nt.Tuner.restore(tuner.path, trainables.steps, progress=False, callbacks=[second])
    again.run()
    assert again.get_trial(0).status is nt.TrialStatus.TERMINATED
    assert second.run_ids[0] == first.run_ids[0], "the same W&B run"

    sessions = runs_in(wandb_dir)[first.run_ids[0]]
    assert len(sessions) == 2, "the first session's file, then the resumed one's"
    logged = [step for session in sessions for step, _ in steps(session)]
    assert sorted(logged) == list(range(1, 13)), f"paused at {paused_at}: each step once"
    assert sessions[-1].summary["nbtune/status"] == "completed"
    assert sessions[-1].exit_code == 0


def test_a_w_and_b_that_fails_warns_once_and_the_run_records_everything(
    make_tuner, wandb_dir, caplog
):
    logger = WandbLogger(project="bad/project/name?")
    tuner = make_tuner(
        trainables.quadratic,
        {"lr": nt.grid([0.01, 0.1]), "layers": 2},
        metric="loss",
        executor=nt.ThreadExecutor(),
        callbacks=[logger],
    )
    with caplog.at_level(logging.WARNING, logger="nbtune"):
        tuner.run()
    assert tuner.state == "finished"
    assert len(tuner.history()) == 2 * 20, "every result recorded"
    assert logger.failure is not None
    warnings = [r for r in caplog.records if "WandbLogger failed" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert logger.flush(5), "a failed logger still answers a flush"


def test_tags_are_a_list():
    with pytest.raises(ValueError, match=r"WandbLogger\(tags='a'\): pass a list of tags"):
        WandbLogger(tags="a")
