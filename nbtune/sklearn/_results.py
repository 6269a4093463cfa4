"""`cv_results_` as scikit-learn writes it, from the trials of a Tuner.

Each trial's last result holds every fold it ran (see `_cross_validation`), so the table is
built from the trials alone, at the end of a run or after an interrupt. A candidate that a
scheduler stopped early (or an interrupt cut short) has NaN for the folds it did not run, its
means are over the folds it did, and it ranks after every candidate that ran in full: a lucky
first fold never makes a best candidate.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.ma import MaskedArray

from nbtune.trial import Trial


def evaluated(trials: Sequence[Trial]) -> list[Trial]:
    """The trials that scored at least one fold, in the order they were created."""
    return sorted((t for t in trials if t.last_result), key=lambda t: t.trial_id)


def failed_fits(trials: Sequence[Trial], n_splits: int) -> tuple[Counter[str], int]:
    """The evaluated `trials`' last failed fits, counted by error, and how many fits there
    were in all."""
    rows = [trial.last_result for trial in trials]
    errors: Counter[str] = Counter()
    for row in rows:
        if row.get("fits_failed"):
            errors[row["fit_error"]] += row["fits_failed"]
    return errors, sum(f"split{k}_fit_time" in row for row in rows for k in range(n_splits))


def cv_results(
    trials: Sequence[Trial],
    scorer_names: Sequence[str],
    n_splits: int,
    reports: int,
    return_train_score: bool,
) -> dict[str, Any]:
    """The `cv_results_` of `trials` (see `evaluated`), keys in scikit-learn's order.

    Args:
        trials: the evaluated trials.
        scorer_names: "score" for one scorer, else the names of `scoring`.
        n_splits: how many folds each candidate has.
        reports: how many results a candidate that ran in full reported.
        return_train_score: add the training scores.
    """
    rows = [trial.last_result for trial in trials]
    complete = np.array([trial.iteration >= reports for trial in trials], dtype=bool)
    results: dict[str, Any] = {}
    for name in ("fit_time", "score_time"):
        _store(results, name, _splits(rows, name, n_splits))
    params = [dict(trial.config) for trial in trials]
    results.update(_param_arrays(params))
    results["params"] = params
    for name in scorer_names:
        scores = _splits(rows, f"test_{name}", n_splits)
        _store(results, f"test_{name}", scores, splits=True, complete=complete)
    if return_train_score:
        for name in scorer_names:
            _store(results, f"train_{name}", _splits(rows, f"train_{name}", n_splits), splits=True)
    return results


def _splits(rows: Sequence[Mapping[str, Any]], key: str, n_splits: int) -> np.ndarray:
    """`split<k>_<key>` of every row, candidates by folds, NaN where a fold did not run."""
    return np.array(
        [[row.get(f"split{k}_{key}", np.nan) for k in range(n_splits)] for row in rows],
        dtype=np.float64,
    ).reshape(len(rows), n_splits)


def _store(
    results: dict[str, Any],
    key: str,
    array: np.ndarray,
    splits: bool = False,
    complete: np.ndarray | None = None,
) -> None:
    """Add `split<k>_<key>` (if `splits`), `mean_<key>`, `std_<key>` and, given which candidates
    ran in full, `rank_<key>`, as scikit-learn's `_format_results` does."""
    if splits:
        for k in range(array.shape[1]):
            results[f"split{k}_{key}"] = array[:, k]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a candidate without a finite fold
        results[f"mean_{key}"] = np.nanmean(array, axis=1)
        results[f"std_{key}"] = np.nanstd(array, axis=1)
    if complete is not None:
        results[f"rank_{key}"] = rank(results[f"mean_{key}"], complete)


def rank(means: np.ndarray, complete: np.ndarray) -> np.ndarray:
    """1 for the best mean, ties sharing the lowest rank (scipy's method="min"); NaN ties with
    the worst, and candidates not run in full come after all the others."""
    value = np.where(np.isnan(means), -np.inf, means)
    order = np.lexsort((-value, ~complete))
    ranks = np.empty(len(means), dtype=np.int32)
    for place, index in enumerate(order):
        previous = order[place - 1] if place else None
        tied = previous is not None and (value[previous], complete[previous]) == (
            value[index],
            complete[index],
        )
        ranks[index] = ranks[previous] if tied else place + 1
    return ranks


def _param_arrays(params: Sequence[Mapping[str, Any]]) -> dict[str, MaskedArray]:
    """`param_<name>`: one masked array per parameter, masked where a candidate lacks it (a
    list of dicts as `param_distributions`); numeric where the values allow, as in sklearn."""
    names = dict.fromkeys(name for candidate in params for name in candidate)
    arrays = {}
    for name in names:
        values = {i: candidate[name] for i, candidate in enumerate(params) if name in candidate}
        array = MaskedArray(np.empty(len(params), dtype=_dtype(list(values.values()))), mask=True)
        for index, value in values.items():
            array[index] = value
        arrays[f"param_{name}"] = array
    return arrays


def _dtype(values: list[Any]) -> np.dtype:
    try:
        array = np.array(values)
    except ValueError:
        return np.dtype(object)
    return array.dtype if array.dtype.kind != "U" and array.ndim == 1 else np.dtype(object)
