"""What one trial may use of the machine: CPU threads and GPUs.

    Tuner(resources_per_trial={"cpu": 2, "gpu": 1})
      -> TrialResources: checked against what the executor has, once, when the Tuner is built
      -> at each launch, the runner picks the trial's GPUs among those not taken
      -> the worker, before any code of the trainable runs, caps BLAS/OpenMP pools at the
         trial's CPUs (threadpoolctl and the usual environment variables) and sets
         CUDA_VISIBLE_DEVICES to its GPUs

A GPU is shared by fractions: two trials of `gpu=0.5` run on one. How many trials run at once is
the smallest of `max_concurrent` and what the GPUs allow.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
"""The environment variables that size the thread pools of BLAS, OpenMP and NumExpr."""


@dataclass(frozen=True)
class TrialResources:
    """What each trial asks for: `cpu` threads (None: an even share of the machine) and `gpu`
    devices (a fraction shares one)."""

    cpu: float | None = None
    gpu: float = 0.0

    @classmethod
    def parse(cls, resources: Mapping[str, Any] | None) -> TrialResources:
        """`resources_per_trial` as given to the Tuner.

        Amounts are numbers (NumPy's too) that are finite and above 0; a GPU fraction above 1
        must be whole.

        Raises:
            ValueError: an unknown name, or an amount that is not a finite number > 0, or a
                GPU amount like 1.5.
        """
        if resources is None:
            return cls()
        if not isinstance(resources, Mapping):
            raise ValueError(
                f"resources_per_trial={resources!r}: pass a dict like {{'cpu': 2, 'gpu': 1}}"
            )
        unknown = set(resources) - {"cpu", "gpu"}
        if unknown:
            raise ValueError(
                f"resources_per_trial: unknown resource {sorted(unknown)[0]!r}; use 'cpu' and "
                "'gpu' (other Dask worker resources go to DaskExecutor(resources_per_trial=...))"
            )
        cpu, gpu = resources.get("cpu"), resources.get("gpu", 0)
        for name, amount in (("cpu", cpu), ("gpu", gpu)):
            if amount is None or (name == "gpu" and _is_number(amount) and amount == 0):
                continue
            if not (_is_number(amount) and math.isfinite(amount) and amount > 0):
                raise ValueError(
                    f"resources_per_trial[{name!r}]={amount!r}: pass a finite number > 0"
                )
        cpu = None if cpu is None else _plain(cpu)
        gpu = float(gpu or 0)
        if gpu > 1 and gpu != int(gpu):
            raise ValueError(
                f"resources_per_trial['gpu']={gpu!r}: a trial takes a fraction of one GPU or "
                "whole GPUs (0.5, 1, 2), not 1.5"
            )
        return cls(cpu=cpu, gpu=float(gpu))

    def threads(self, cpus: int, max_concurrent: int) -> int:
        """The size of each trial's thread pools: its CPUs, or an even share of `cpus`."""
        share = self.cpu if self.cpu is not None else cpus // max_concurrent
        return max(1, int(share))

    def check(self, cpus: int, gpus: Iterable[str]) -> None:
        """Raise a one-line ValueError if one trial can never fit on what there is."""
        if self.cpu is not None and self.cpu > cpus:
            raise ValueError(
                f"resources_per_trial asks {self.cpu:g} CPUs per trial, but there are {cpus}"
            )
        found = list(gpus)
        if self.gpu > len(found) or (self.gpu and not found):
            have = ", ".join(found) or "none found"
            raise ValueError(
                f"resources_per_trial asks {self.gpu:g} GPU per trial, but the executor has "
                f"{len(found)} ({have}); pass LokyExecutor(gpus=[...]) or ask for fewer"
            )

    def at_once(self, cpus: int, gpus: int) -> int | None:
        """How many trials the machine holds at once; None if the resources set no bound."""
        bounds = []
        if self.cpu is not None:
            bounds.append(int(cpus // self.cpu))
        if self.gpu:
            per_gpu = int(min(1 / self.gpu, _MOST_SHARES) + 1e-9) if self.gpu < 1 else 0
            bounds.append(int(gpus // self.gpu) if self.gpu >= 1 else gpus * per_gpu)
        return max(1, min(bounds)) if bounds else None

    def pick(self, gpus: Iterable[str], taken: Iterable[str]) -> str | None:
        """GPUs for one more trial, as CUDA_VISIBLE_DEVICES reads them ("0" or "0,1"), given
        the ids that the running trials hold (an id once per share); None if they do not fit,
        "" if the trial asks for none."""
        if not self.gpu:
            return ""
        used: dict[str, float] = {gpu: 0.0 for gpu in gpus}
        share = min(self.gpu, 1.0)
        for ids in taken:
            for gpu in filter(None, ids.split(",")):
                used[gpu] = used.get(gpu, 0.0) + share
        room = [gpu for gpu, load in used.items() if load + share <= 1.0 + 1e-9]
        count = max(1, int(self.gpu))
        if len(room) < count:
            return None
        if share < 1:
            room.sort(key=lambda gpu: -used[gpu])
        return ",".join(room[:count])


_MOST_SHARES = 1e9
"""More trials than this never share one GPU (a bound for tiny fractions)."""


def _is_number(amount: Any) -> bool:
    return isinstance(amount, numbers.Real) and not isinstance(amount, bool)


def _plain(amount: numbers.Real) -> int | float:
    """`amount` as a Python int or float (a NumPy scalar is stored and printed as one)."""
    return int(amount) if isinstance(amount, numbers.Integral) else float(amount)


def gpu_ids(gpus: Any, where: str = "LokyExecutor") -> list[str]:
    """The GPU ids that `gpus` names: a list of ids (`["0", "1"]`, `[0, 1]`, UUIDs such as
    `"GPU-8f1c..."`), or one string of them separated by commas, as CUDA_VISIBLE_DEVICES
    spells them (`"0,1"`, `""` for none).

    Raises:
        ValueError: in one line, for anything else: a count (`gpus=2`), an id with a comma
            inside, an empty or negative id ("-1" hides every GPU from CUDA: pass `[]`), an id
            listed twice.
    """
    refusal = f"{where}(gpus={gpus!r}): "
    if isinstance(gpus, str):
        ids = [gpu.strip() for gpu in gpus.split(",")] if gpus.strip() else []
    elif isinstance(gpus, Iterable) and not isinstance(gpus, (Mapping, bytes)):
        ids = []
        for gpu in gpus:
            is_index = isinstance(gpu, numbers.Integral) and not isinstance(gpu, bool)
            if not (isinstance(gpu, str) or is_index):
                raise ValueError(f"{refusal}{gpu!r} is not a GPU id; pass strings like '0'")
            if isinstance(gpu, str) and "," in gpu:
                split = [part.strip() for part in gpu.split(",")]
                raise ValueError(f"{refusal}{gpu!r} is not one GPU id; pass {split!r}")
            ids.append(str(gpu).strip())
    else:
        raise ValueError(
            f"{refusal}pass the GPU ids, as a list (['0', '1']) or a string ('0,1'), or [] for none"
        )
    for gpu in ids:
        if not gpu:
            raise ValueError(f"{refusal}an empty GPU id; pass the ids, like '0,1'")
        if gpu.startswith("-"):
            raise ValueError(f"{refusal}{gpu!r} is not a GPU id; pass gpus=[] for none")
        if ids.count(gpu) > 1:
            raise ValueError(f"{refusal}GPU {gpu!r} is listed twice")
    return ids


def visible_gpus() -> list[str]:
    """The GPUs of this machine: the kernel's CUDA_VISIBLE_DEVICES if set, else those that
    `nvidia-smi -L` lists; none if neither says.

    CUDA_VISIBLE_DEVICES is read as CUDA reads it: the devices listed before the first that
    cannot be one (an empty or negative entry), so "-1" (or "") means none.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        found: list[str] = []
        for gpu in (entry.strip() for entry in visible.split(",")):
            if not gpu or gpu.startswith("-"):
                break
            if gpu not in found:
                found.append(gpu)
        return found
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listing = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(index) for index, line in enumerate(listing.splitlines()) if line.strip()]


@contextlib.contextmanager
def limits(threads: int, gpus: str | None) -> Iterator[None]:
    """Run a trial with its thread pools capped at `threads` and, unless `gpus` is None, its
    CUDA_VISIBLE_DEVICES set to `gpus`; the worker's environment comes back afterwards."""
    from threadpoolctl import threadpool_limits

    wanted = dict.fromkeys(THREAD_VARIABLES, str(threads))
    if gpus is not None:
        wanted["CUDA_VISIBLE_DEVICES"] = gpus
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
