"""Keras runs on its JAX back end here, in this process and in the worker processes, which
start with this environment (Keras reads KERAS_BACKEND once, when it is first imported)."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "jax"
