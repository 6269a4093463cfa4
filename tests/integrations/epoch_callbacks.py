"""What nbtune's callbacks for training libraries that count epochs (Keras, Lightning) must do,
as one suite that each library's test module runs by subclassing `EpochCallbackSuite`."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import networks
import pytest
from test_control import event_of, result_of

import nbtune as nt
from nbtune.events import TrialPaused


class EpochCallbackSuite:
    """Subclasses name the library and its trainable (see `networks`)."""

    library: str
    """The integration's module name: `nbtune.integrations.<library>`."""
    trainable: Callable
    """Fits a tiny network for `epochs` epochs in all, reporting through the callback."""
    checkpoint_file: str
    """The file the callback's checkpoints hold."""
    default_names: frozenset[str]
    """The results the library names itself, all reported when `metrics` is not given."""

    def tuner(self, make_tuner, space, metric="loss", **options):
        """A Tuner of the trainable: `space` holds `epochs`, and any of `metrics` (by default
        `val_loss` as `loss`), `every` (None) and `nap` (0)."""
        space = {"metrics": {"loss": "val_loss"}, "every": None, "nap": 0, **space}
        return make_tuner(type(self).trainable, space, metric=metric, mode="min", **options)

    def test_every_epoch_is_reported_under_the_name_picked(self, make_tuner):
        tuner = self.tuner(make_tuner, {"epochs": 12, "every": 5})
        tuner.run()
        history = tuner.history()
        assert list(history["training_iteration"]) == list(range(1, 13))
        assert history["loss"].is_monotonic_decreasing, "the validation loss of each epoch"
        checkpoint = tuner.get_checkpoint(0, which="latest")
        assert isinstance(checkpoint, nt.Checkpoint)
        assert tuner.get_trial(0).checkpoint_iteration == 10, "every 5 epochs"
        assert (checkpoint.path / self.checkpoint_file).is_file(), "in the library's format"

    def test_by_default_every_result_is_reported_under_the_library_s_name(self, make_tuner):
        tuner = self.tuner(make_tuner, {"epochs": 3, "metrics": None}, metric="val_loss")
        tuner.run()
        assert self.default_names <= set(tuner.history().columns)
        assert tuner.get_checkpoint(0, which="latest") is None, "no checkpoint was asked for"

    def test_a_paused_trial_resumes_at_the_next_epoch_of_the_same_training(self, make_tuner, log):
        space = {"epochs": 20, "nap": nt.grid([0.05, 0.0])}
        tuner = self.tuner(make_tuner, space, callbacks=[log], max_concurrent=1)
        tuner.start()
        log.wait_for(result_of(0, 4), timeout=120)
        tuner.pause(0)
        log.wait_for(event_of(TrialPaused, 0), timeout=120)
        assert tuner.get_trial(0).paused_by == "checkpoint", "the callback checkpointed the pause"
        tuner.resume(0)
        assert tuner.wait(240)
        paused = tuner.history().query("trial_id == 0")
        unpaused = tuner.history().query("trial_id == 1")
        assert list(paused["training_iteration"]) == list(range(1, 21)), "none repeated or missed"
        assert list(paused["loss"]) == pytest.approx(list(unpaused["loss"]), rel=1e-5), (
            "the same training as unpaused"
        )

    def test_a_scheduler_s_stop_ends_the_training_cleanly(self, make_tuner):
        tuner = self.tuner(make_tuner, {"epochs": 50}, stop={"training_iteration": 5})
        tuner.run()
        trial = tuner.get_trial(0)
        assert trial.status is nt.TrialStatus.TERMINATED, trial.error
        assert trial.error is None
        assert list(tuner.history()["training_iteration"]) == [1, 2, 3, 4, 5]

    def test_a_metric_the_library_does_not_compute_is_a_one_line_error(self, make_tuner):
        tuner = self.tuner(make_tuner, {"epochs": 3, "metrics": {"loss": "val_auc"}})
        tuner.run()
        error = tuner.get_trial(0).error
        assert error.startswith(
            f"ValueError: {self.library}.ReportCallback(metrics=...): 'val_auc' is not among "
            "the evaluation results ("
        )
        assert "val_loss" in error, "names the ones there are"
        assert error.endswith("); name one of those")
        assert "\n" not in error

    def test_resume_kwargs_refuses_a_checkpoint_the_callback_did_not_write(self, make_tuner):
        tuner = make_tuner(
            networks.resumes_from_a_checkpoint_of_its_own,
            {"library": self.library},
            max_failures=1,
        )
        tuner.run()
        error = tuner.get_trial(0).error
        assert error.startswith(
            f"ValueError: {self.library}.resume_kwargs(): the trial's checkpoint holds no "
        )
        assert error.endswith("resume from your own checkpoint by hand")
        assert "\n" not in error

    @pytest.mark.parametrize("every", [0, -1, 1.5, True, "5"])
    def test_checkpoint_every_is_a_whole_number_of_epochs(self, every):
        module = importlib.import_module(f"nbtune.integrations.{self.library}")
        with pytest.raises(ValueError, match=r"checkpoint_every=.*: pass a whole number of steps"):
            module.ReportCallback(checkpoint_every=every)
