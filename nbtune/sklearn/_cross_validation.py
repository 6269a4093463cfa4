"""The trainable of a search: one candidate cross-validated in a worker, reporting as it goes.

    kernel: TuneSearchCV.fit_async                  worker process
    ------------------------------                  --------------
    CrossValidation(estimator, X, y, splits, ...)   the Tuner's trainable: pickled once per run,
            |                                       sent once to each worker, unpickled there
            +---- config (one candidate) -------->  __call__(config)
                                                      by fold:  fit + score fold k; report
                                                      by epoch: every fold one epoch further
                                                                (partial_fit, or more trees
                                                                by warm_start); report
                  <---- report: scores so far ----    the scheduler may stop it there

Every result carries all the folds' scores and times so far (`split<k>_test_<scorer>`,
`split<k>_fit_time`, ...), how many of its fits failed (`fits_failed`, the last error as
`fit_error`) and the tuned running mean `mean_test_<scorer>`: whichever report a scheduler
stops a candidate at, its last result is all that `cv_results_` needs.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.utils import _safe_indexing
from sklearn.utils.metaestimators import _safe_split
from sklearn.utils.validation import _num_samples
from threadpoolctl import threadpool_limits

from nbtune.session import get_trial_id, report, report_score

GROWING_PARAMS = ("n_estimators", "max_iter")
"""What grows, epoch by epoch, in a warm-started estimator without `partial_fit`: the number
of trees (forests, gradient boosting) or of iterations (histogram gradient boosting)."""


def growth_of(estimator: Any) -> str:
    """How `estimator` trains one epoch further: "partial_fit", or the parameter that
    warm_start raises.

    Raises:
        ValueError: if it can do neither, so early_stopping=True cannot apply to it.
    """
    if hasattr(estimator, "partial_fit"):
        return "partial_fit"
    params = estimator.get_params()
    if "warm_start" in params:
        for name in GROWING_PARAMS:
            if isinstance(params.get(name), int):
                return name
    raise ValueError(
        f"early_stopping=True needs an estimator with partial_fit, or with warm_start and "
        f"n_estimators or max_iter; {type(estimator).__name__} has neither: pass "
        "early_stopping=False (a scheduler then stops candidates between folds)"
    )


@dataclass
class FoldScores:
    """One fold of one candidate: its scores by scorer name and its times in seconds."""

    test: dict[str, Any]
    train: dict[str, Any]
    fit_time: float
    score_time: float
    error: str | None = None
    """What failed, as the last lines of its traceback say it ("ValueError: ...")."""


@dataclass(frozen=True)
class CrossValidation:
    """Cross-validates the candidate `config` of `estimator` on the data it closes over.

    Attributes:
        estimator: the unfitted template, cloned for every fold.
        X, y: the data; `fit_params` are indexed per fold like them where they have one
            entry per sample.
        splits: (train, test) index arrays, one pair per fold, fixed in the kernel so that
            every candidate sees the same folds.
        scorers: scorer by name; `metric` names the one whose mean the Tuner tunes.
        error_score: the score of a fit that fails, or "raise".
        return_train_score: also score each fold's training data.
        epochs: None to report once per fold; else report after each of `epochs` epochs,
            every fold trained one epoch further each time (`growth_of`).
        classes: every class of `y`, which a classifier's first `partial_fit` needs.
        threads: how many threads the estimator's native code (OpenMP, BLAS) may use, as
            joblib limits it in its workers: the CPUs shared by the candidates that run at
            once, so that they do not oversubscribe the machine; None for no limit.
        tail: where the search's last candidates begin (a trial id), when candidates start
            in id order and nothing stops one early: those fit their folds `tail_folds` at a
            time, on threads, so that the workers that run out of candidates are not left
            idle while the last ones finish (joblib's searches share out folds, not
            candidates); their reports still come fold by fold, in order. None: never.
        tail_folds: how many folds a last candidate fits at once.
    """

    estimator: Any
    X: Any
    y: Any
    splits: Sequence[tuple[np.ndarray, np.ndarray]]
    scorers: Mapping[str, Callable]
    metric: str
    fit_params: Mapping[str, Any]
    error_score: Any
    return_train_score: bool
    epochs: int | None = None
    classes: np.ndarray | None = None
    threads: int | None = None
    tail: int | None = None
    tail_folds: int = 1

    def __call__(self, config: dict[str, Any]) -> None:
        try:
            with threadpool_limits(self.threads):
                if self.epochs is None:
                    self._by_fold(config)
                else:
                    self._by_epoch(config)
        except Exception:
            if self._raises:
                _report_exception(self.metric)
            raise

    @property
    def _raises(self) -> bool:
        return isinstance(self.error_score, str) and self.error_score == "raise"

    def _by_fold(self, config: dict[str, Any]) -> None:
        """Fit and score the folds one by one, reporting after each, so that a scheduler can
        drop a poor candidate after one or two folds (a last candidate fits several at once,
        see `tail`)."""
        fit = functools.partial(self._fit_new, config)
        at_once = self.tail_folds if self.tail is not None and get_trial_id() >= self.tail else 1
        if at_once <= 1:
            folds = []
            for k in range(len(self.splits)):
                folds.append(self._fit_and_score(k, fit))
                self._report(folds, last=k == len(self.splits) - 1)
            return
        pool = ThreadPoolExecutor(at_once, thread_name_prefix="nbtune-fold")
        try:
            futures = [pool.submit(self._fit_and_score, k, fit) for k in range(len(self.splits))]
            folds = []
            for future in futures:
                folds.append(future.result())
                self._report(folds, last=len(folds) == len(futures))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _by_epoch(self, config: dict[str, Any]) -> None:
        """Train every fold one epoch further at a time, reporting the folds' scores after
        each epoch; fit times add up over the epochs."""
        growing = [_Growing(self, config) for _ in self.splits]
        fit_times = np.zeros(len(self.splits))
        for epoch in range(self.epochs):
            folds = [self._fit_and_score(k, grow) for k, grow in enumerate(growing)]
            for k, fold in enumerate(folds):
                fit_times[k] += fold.fit_time
                fold.fit_time = float(fit_times[k])
            self._report(folds, last=epoch == self.epochs - 1)

    def _report(self, folds: list[FoldScores], *, last: bool) -> None:
        """Report the folds' scores so far; the last report, over every fold of the final
        model, is the candidate's score (`report_score`): it ranks the candidate, as
        scikit-learn's `mean_test_score` does, not the running mean of the first folds."""
        (report_score if last else report)(fold_result(folds, self.metric))

    def _fit_new(self, config: Mapping[str, Any], X: Any, y: Any, params: dict) -> Any:
        return self._candidate(config).fit(X, y, **params)

    def _candidate(self, config: Mapping[str, Any]) -> Any:
        return clone(self.estimator).set_params(**clone(dict(config), safe=False))

    def _fit_and_score(self, k: int, fit: Callable[[Any, Any, dict], Any]) -> FoldScores:
        """Fit with `fit(X_train, y_train, fit_params)` on fold `k` and score the result.

        As in scikit-learn, a fit that fails scores `error_score` with a FitFailedWarning and
        counts as a failed fit, a scoring that fails scores it with a UserWarning, and
        error_score="raise" raises either.
        """
        train, test = self.splits[k]
        X_train, y_train = _safe_split(self.estimator, self.X, self.y, train)
        X_test, y_test = _safe_split(self.estimator, self.X, self.y, test, train)
        started = time.perf_counter()
        try:
            estimator = fit(X_train, y_train, self._fit_params(train))
        except Exception as exc:
            self._raise_or_warn(f"the fit of fold {k} failed", FitFailedWarning)
            failed = self._failed_scores()
            train = failed if self.return_train_score else {}
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            return FoldScores(failed, train, time.perf_counter() - started, 0.0, error)
        fit_time = time.perf_counter() - started
        test_scores = self._score(estimator, X_test, y_test)
        score_time = time.perf_counter() - started - fit_time
        train_scores = self._score(estimator, X_train, y_train) if self.return_train_score else {}
        return FoldScores(test_scores, train_scores, fit_time, score_time)

    def _score(self, estimator: Any, X: Any, y: Any) -> dict[str, Any]:
        try:
            return {name: scorer(estimator, X, y) for name, scorer in self.scorers.items()}
        except Exception:
            self._raise_or_warn("scoring failed", UserWarning)
            return self._failed_scores()

    def _failed_scores(self) -> dict[str, Any]:
        return dict.fromkeys(self.scorers, self.error_score)

    def _raise_or_warn(self, what: str, category: type[Warning]) -> None:
        """Re-raise the exception being handled if error_score="raise", else warn with its
        traceback (it lands in the trial's output.log)."""
        if self._raises:
            raise
        message = f"{what}; it scores error_score={self.error_score!r}:\n{traceback.format_exc()}"
        warnings.warn(message, category, stacklevel=3)

    def _fit_params(self, indices: np.ndarray) -> dict[str, Any]:
        """The fit parameters for the rows `indices`: per-sample ones (sample_weight) indexed,
        the others as they are."""
        n_samples = _num_samples(self.X)
        return {
            name: _safe_indexing(value, indices) if _per_sample(value, n_samples) else value
            for name, value in self.fit_params.items()
        }


class _Growing:
    """One fold's estimator under early stopping, trained one epoch further at each call."""

    def __init__(self, search: CrossValidation, config: Mapping[str, Any]) -> None:
        self.search = search
        self.config = config
        self.estimator: Any = None
        self.growth = ""
        self.final = 0
        self.epoch = 0

    def __call__(self, X: Any, y: Any, params: dict[str, Any]) -> Any:
        if self.estimator is None:
            self._make()
        self.epoch += 1
        if self.growth == "partial_fit":
            classes = {} if self.search.classes is None else {"classes": self.search.classes}
            return self.estimator.partial_fit(X, y, **classes, **params)
        size = max(1, round(self.final * self.epoch / self.search.epochs))
        return self.estimator.set_params(**{self.growth: size}).fit(X, y, **params)

    def _make(self) -> None:
        self.estimator = self.search._candidate(self.config)
        self.growth = growth_of(self.estimator)
        if self.growth != "partial_fit":
            self.final = self.estimator.get_params()[self.growth]
            self.estimator.set_params(warm_start=True)


RAISED = "fit_exception"
"""The key of the result that carries, pickled, what a fit raised under error_score="raise"."""
RAISED_TRACEBACK = "fit_traceback"
"""The key of the result that carries that exception's traceback in the worker, as text."""


def _report_exception(metric: str) -> None:
    """Report the exception being handled (with a NaN score, as every result has the tuned
    metric), so that the search raises that very exception in the kernel, as scikit-learn
    raises one from a joblib worker. One that cannot be pickled is not reported (the search
    then raises a ValueError that quotes it)."""
    raised = {RAISED: sys.exc_info()[1], RAISED_TRACEBACK: traceback.format_exc()}
    with contextlib.suppress(TypeError, ValueError):
        report({f"mean_test_{metric}": float("nan"), **raised})


def fold_result(folds: Sequence[FoldScores], metric: str) -> dict[str, Any]:
    """What a trial reports: the tuned mean over the folds so far, and every fold's figures."""
    mean = float(np.mean([fold.test[metric] for fold in folds]))
    result: dict[str, Any] = {f"mean_test_{metric}": mean}
    errors = [fold.error for fold in folds if fold.error is not None]
    result["fits_failed"] = len(errors)
    if errors:
        result["fit_error"] = errors[-1]
    for k, fold in enumerate(folds):
        result.update({f"split{k}_test_{name}": value for name, value in fold.test.items()})
        result.update({f"split{k}_train_{name}": value for name, value in fold.train.items()})
        result[f"split{k}_fit_time"] = fold.fit_time
        result[f"split{k}_score_time"] = fold.score_time
    return result


def _per_sample(value: Any, n_samples: int) -> bool:
    try:
        return _num_samples(value) == n_samples
    except TypeError:
        return False
