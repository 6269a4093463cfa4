"""PyTorch Lightning reports through nbtune's callback, checkpoints its trainer, stops when a
scheduler says so, and pauses and resumes at any epoch with nothing repeated or missed.

Skipped where torch is not installed (plain `make test`): `make test-lightning` installs it."""

from __future__ import annotations

import pytest

pytest.importorskip("lightning")

import networks
from epoch_callbacks import EpochCallbackSuite


class TestLightningCallback(EpochCallbackSuite):
    library = "lightning"
    trainable = staticmethod(networks.lightning_fits)
    checkpoint_file = "checkpoint.ckpt"
    default_names = frozenset({"train_loss", "val_loss"})
