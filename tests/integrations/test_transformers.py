"""Hugging Face's Trainer reports through nbtune's callback, checkpoints, stops when a scheduler
says so, and pauses and resumes at any epoch with nothing repeated or missed.

A one-layer BERT built from its config (nothing downloaded) learns, on CPU, whether a random
sequence of token ids starts with a low one. Skipped where torch or transformers is not
installed (plain `make test`): `make test-lightning` installs them."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_control import event_of, result_of

import nbtune as nt
from nbtune.events import TrialPaused

LOSS = {"loss": "eval_loss", "epoch": "epoch"}


def _examples(count, seed):
    import torch

    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 100, (count, 8), generator=generator)
    return [
        {
            "input_ids": row,
            "attention_mask": torch.ones(8, dtype=torch.long),
            "labels": int(row[0] < 50),
        }
        for row in ids
    ]


def fits(config):
    """Trains the tiny BERT for `epochs` epochs in all, evaluating after each, reporting through
    the callback (`metrics`, `every`) and resuming through `resume_kwargs` unless `resumable`
    is False; `nap` s per epoch leave time to pause it. Once `train()` returns, it writes the
    epochs run to `epochs_file`, if given."""
    import transformers

    from nbtune.integrations.transformers import ReportCallback, resume_kwargs

    class Nap(transformers.TrainerCallback):
        def on_epoch_end(self, args, state, control, **kwargs):
            time.sleep(config.get("nap", 0.0))

    transformers.set_seed(0)
    model = transformers.BertForSequenceClassification(
        transformers.BertConfig(
            num_hidden_layers=1,
            hidden_size=32,
            num_attention_heads=2,
            intermediate_size=37,
            vocab_size=100,
            num_labels=2,
        )
    )
    with tempfile.TemporaryDirectory() as output_dir:
        args = transformers.TrainingArguments(
            output_dir,
            eval_strategy="epoch",
            save_strategy="no",
            logging_strategy="epoch",
            num_train_epochs=config["epochs"],
            per_device_train_batch_size=16,
            per_device_eval_batch_size=32,
            learning_rate=1e-3,
            seed=0,
            report_to="none",
            disable_tqdm=True,
            use_cpu=True,
        )
        trainer = transformers.Trainer(
            model,
            args,
            train_dataset=_examples(64, 1),
            eval_dataset=_examples(32, 2),
            callbacks=[
                Nap(),
                ReportCallback(config.get("metrics", LOSS), checkpoint_every=config.get("every")),
            ],
        )
        kwargs = resume_kwargs(trainer) if config.get("resumable", True) else {}
        trainer.train(**kwargs)
        if config.get("epochs_file"):
            Path(config["epochs_file"]).write_text(str(round(trainer.state.epoch)))


def tuner_of(make_tuner, space, metric="loss", **options):
    return make_tuner(fits, space, metric=metric, mode="min", **options)


def test_every_epoch_is_reported_under_the_name_picked(make_tuner):
    tuner = tuner_of(make_tuner, {"epochs": 6, "every": 5})
    tuner.run()
    history = tuner.history()
    assert tuner.get_trial(0).error is None
    assert list(history["training_iteration"]) == list(range(1, 7))
    assert list(history["epoch"]) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "iteration k is epoch k"
    checkpoint = tuner.get_checkpoint(0, which="latest")
    assert isinstance(checkpoint, nt.Checkpoint)
    assert tuner.get_trial(0).checkpoint_iteration == 5, "every 5 evaluations"
    names = {path.name for path in checkpoint.path.iterdir()}
    assert {"trainer_state.json", "optimizer.pt", "scheduler.pt", "rng_state.pth"} <= names
    assert "model.safetensors" in names, "the Trainer's own checkpoint"


def test_by_default_every_metric_of_the_evaluation_is_reported(make_tuner):
    tuner = tuner_of(make_tuner, {"epochs": 2, "metrics": None}, metric="eval_loss")
    tuner.run()
    assert {"eval_loss", "eval_runtime", "epoch"} <= set(tuner.history().columns)
    assert tuner.get_checkpoint(0, which="latest") is None, "no checkpoint was asked for"


def test_a_paused_trial_resumes_at_the_next_epoch_of_the_same_training(make_tuner, log):
    space = {"epochs": 10, "nap": nt.grid([0.1, 0.0])}
    tuner = tuner_of(make_tuner, space, callbacks=[log], max_concurrent=1)
    tuner.start()
    log.wait_for(result_of(0, 3), timeout=120)
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0), timeout=120)
    assert tuner.get_trial(0).paused_by == "checkpoint", "the callback checkpointed the pause"
    tuner.resume(0)
    assert tuner.wait(240)
    paused = tuner.history().query("trial_id == 0")
    unpaused = tuner.history().query("trial_id == 1")
    assert list(paused["training_iteration"]) == list(range(1, 11)), "none repeated or missed"
    assert list(paused["epoch"]) == [float(epoch) for epoch in range(1, 11)]
    assert list(paused["loss"]) == pytest.approx(list(unpaused["loss"]), rel=1e-5), (
        "the same training as unpaused"
    )


def test_a_scheduler_s_stop_ends_train_after_that_evaluation(make_tuner, tmp_path):
    epochs = tmp_path / "epochs"
    space = {"epochs": 30, "epochs_file": str(epochs)}
    tuner = tuner_of(make_tuner, space, stop={"training_iteration": 3})
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.TERMINATED, trial.error
    assert trial.error is None
    assert list(tuner.history()["training_iteration"]) == [1, 2, 3]
    assert epochs.read_text() == "3", "train() returned after epoch 3"


def test_a_metric_the_trainer_does_not_compute_is_a_one_line_error(make_tuner):
    tuner = tuner_of(make_tuner, {"epochs": 2, "metrics": {"loss": "eval_auc"}})
    tuner.run()
    error = tuner.get_trial(0).error
    assert error.startswith(
        "ValueError: transformers.ReportCallback(metrics=...): 'eval_auc' is not among the "
        "evaluation results ("
    )
    assert "eval_loss" in error, "names the ones there are"
    assert error.endswith("); name one of those")


def test_checkpoints_without_resume_kwargs_are_a_one_line_error(make_tuner):
    tuner = tuner_of(make_tuner, {"epochs": 2, "every": 1, "resumable": False})
    tuner.run()
    assert tuner.get_trial(0).error == (
        "ValueError: transformers.ReportCallback(checkpoint_every=...): the callback saves the "
        "Trainer's checkpoints; call trainer.train(**resume_kwargs(trainer))"
    )


def resumes_from_a_checkpoint_of_its_own(config):
    """Checkpoints a folder of its own making and fails; started again from that checkpoint
    (`max_failures=1`), it asks `resume_kwargs` to continue from it."""
    import transformers

    from nbtune.integrations.transformers import ReportCallback, resume_kwargs

    if nt.get_checkpoint() is None:
        nt.report(step=1, checkpoint=nt.Checkpoint.from_directory(tempfile.mkdtemp()))
        raise RuntimeError("fails, to be started again from its checkpoint")
    model = transformers.BertForSequenceClassification(
        transformers.BertConfig(
            num_hidden_layers=1,
            hidden_size=8,
            num_attention_heads=2,
            intermediate_size=8,
            vocab_size=10,
        )
    )
    with tempfile.TemporaryDirectory() as output_dir:
        args = transformers.TrainingArguments(output_dir, report_to="none", use_cpu=True)
        trainer = transformers.Trainer(model, args, callbacks=[ReportCallback()])
        resume_kwargs(trainer)


def test_resume_kwargs_refuses_a_checkpoint_the_callback_did_not_write(make_tuner):
    tuner = make_tuner(resumes_from_a_checkpoint_of_its_own, max_failures=1)
    tuner.run()
    assert tuner.get_trial(0).error == (
        "ValueError: transformers.resume_kwargs(): the trial's checkpoint holds no "
        "trainer_state.json (it was not written by transformers.ReportCallback); resume from "
        "your own checkpoint by hand"
    )


def test_resume_kwargs_needs_the_callback_in_the_trainer(tmp_path):
    import transformers

    from nbtune.integrations.transformers import resume_kwargs

    model = transformers.BertForSequenceClassification(
        transformers.BertConfig(
            num_hidden_layers=1,
            hidden_size=8,
            num_attention_heads=2,
            intermediate_size=8,
            vocab_size=10,
        )
    )
    args = transformers.TrainingArguments(str(tmp_path), report_to="none", use_cpu=True)
    trainer = transformers.Trainer(model, args)
    with pytest.raises(ValueError, match=r"^transformers.resume_kwargs\(trainer\): the Trainer "):
        resume_kwargs(trainer)


@pytest.mark.parametrize("every", [0, -1, 1.5, True, "5"])
def test_checkpoint_every_is_a_whole_number_of_evaluations(every):
    from nbtune.integrations.transformers import ReportCallback

    with pytest.raises(ValueError, match=r"checkpoint_every=.*: pass a whole number of steps"):
        ReportCallback(checkpoint_every=every)
