"""`TuneSearchCV`: scikit-learn's randomized search, run by an nbtune Tuner.

    fit(X, y) = fit_async(X, y) + wait()

    fit_async: check the arguments, fix the folds and scorers, draw the candidates, start a
               Tuner on `CrossValidation` (the data inside it): the dashboard shows, the cell
               returns
    wait:      block until the Tuner ends (Ctrl-C or Stop ends it early, results kept), build
               `cv_results_` from its trials, pick the best, refit it on all the data

It subclasses scikit-learn's `BaseSearchCV` for what a fitted search offers (predict,
predict_proba, decision_function, score, transform, classes_, tags) and replaces its `fit`,
which would run the candidates with joblib.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import secrets
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.exceptions import FitFailedWarning
from sklearn.metrics import check_scoring, get_scorer
from sklearn.model_selection import check_cv
from sklearn.model_selection._search import BaseSearchCV
from sklearn.utils import check_random_state, indexable

from nbtune.metrics import Pickled
from nbtune.schedulers import ASHA
from nbtune.schedulers._base import Scheduler
from nbtune.search._base import Searcher
from nbtune.sklearn._cross_validation import (
    RAISED,
    RAISED_TRACEBACK,
    CrossValidation,
    growth_of,
)
from nbtune.sklearn._distributions import Candidates, sample_candidates, search_space
from nbtune.sklearn._results import cv_results, evaluated, failed_fits
from nbtune.trial import TrialStatus
from nbtune.tuner import Tuner

DEFAULT_EPOCHS = 10
"""`max_iters` under early_stopping=True when none is given (as in tune-sklearn)."""


class TuneSearchCV(BaseSearchCV):
    """Randomized search over hyperparameters with cross-validation, in nbtune worker
    processes, with the live dashboard, its pause and stop buttons, and early stopping.

    It follows scikit-learn's `RandomizedSearchCV`: the same arguments mean the same, the
    same `random_state` draws the same candidates (with the default searcher), and the fitted
    attributes are the same. What it adds: `fit_async` returns at once and `wait` collects the
    results; a scheduler may drop a candidate after any fold; `search.tuner` is the Tuner.

    Args:
        estimator: the scikit-learn estimator to tune, cloned for every fit.
        param_distributions: a dict (or a list of dicts) of parameter name -> list (a uniform
            choice), scipy.stats distribution, or nbtune domain (`nbtune.loguniform`, ...).
        n_trials: how many candidates to try (`n_iter` in `RandomizedSearchCV`).
        scoring: None (the estimator's `score`), a scorer name or callable, or several as a
            list or a dict of name -> scorer; then `refit` names the one that picks the best.
        cv: folds as scikit-learn takes them: a number, a splitter, or an iterable of splits.
        refit: refit the best candidate on all the data: True, the name of a scorer, a
            callable `cv_results_ -> best_index_`, or False.
        error_score: the score of a fold whose fit fails, or "raise" to end the search with
            the exception the fit raised (its traceback in the worker as its cause).
        return_train_score: also score every fold's training data.
        random_state: draws the candidates (an int, a RandomState, or None), and seeds the
            Tuner.
        max_concurrent: how many candidates run at once (default: the number of CPUs).
        n_jobs: scikit-learn's name for `max_concurrent`, taken as joblib takes it: a number
            of candidates at once, -1 for one per CPU, -2 for all CPUs but one, ...; give one
            of the two (or both the same).
        verbose: above 0, print the Tuner's one-line progress report as it goes, in a
            notebook too (default 0: only outside a notebook, where the dashboard is absent).
        pre_dispatch: accepted for scikit-learn's sake and has no effect: nbtune hands a
            candidate to a worker only when one is free, so nothing is dispatched ahead.
        scheduler: an nbtune scheduler; it hears each candidate's mean score after every fold
            (or epoch), e.g. `nbtune.ASHA(max_t=5)` with cv=5 drops poor candidates early.
            Default: FIFO, or ASHA over the epochs when `early_stopping=True`.
        searcher: an nbtune searcher (e.g. `nbtune.OptunaSearch()`) instead of scikit-learn's
            random sampling; it then samples `param_distributions` as an nbtune space.
        early_stopping: for estimators with `partial_fit`, or `warm_start` and `n_estimators`
            or `max_iter`: report after each of `max_iters` epochs (one `partial_fit`, or a
            share of the trees or iterations more), on every fold at once, so a scheduler can
            stop a candidate mid-training. Without it, a report follows each fold.
        max_iters: how many epochs under early stopping (default 10).
        name: the experiment's name (default: the estimator's class, the time and a random
            suffix); fitting again with the same name replaces that experiment.
        storage_path: the folder of experiment directories (default "nbtune-runs").
        display: show the live dashboard under the cell (default: in a notebook).

    Attributes:
        cv_results_, best_estimator_, best_params_, best_score_, best_index_, n_splits_,
            refit_time_, scorer_, multimetric_: as in `RandomizedSearchCV`; a candidate that a
            scheduler stopped early has NaN for the folds it skipped and ranks last.
        run_path_: the experiment directory of the fit (`nbtune.load(run_path_)` reads it).
        tuner: the Tuner of the latest fit (not kept when the search is pickled).
    """

    def __init__(
        self,
        estimator: Any,
        param_distributions: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        n_trials: int = 10,
        scoring: Any = None,
        cv: Any = 5,
        refit: bool | str | Callable = True,
        error_score: Any = np.nan,
        return_train_score: bool = False,
        random_state: Any = None,
        max_concurrent: int | None = None,
        n_jobs: int | None = None,
        verbose: int = 0,
        pre_dispatch: Any = "2*n_jobs",
        scheduler: Scheduler | None = None,
        searcher: Searcher | None = None,
        early_stopping: bool = False,
        max_iters: int | None = None,
        name: str | None = None,
        storage_path: str | os.PathLike | None = None,
        display: bool | None = None,
    ) -> None:
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.n_trials = n_trials
        self.scoring = scoring
        self.cv = cv
        self.refit = refit
        self.error_score = error_score
        self.return_train_score = return_train_score
        self.random_state = random_state
        self.max_concurrent = max_concurrent
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.pre_dispatch = pre_dispatch
        self.scheduler = scheduler
        self.searcher = searcher
        self.early_stopping = early_stopping
        self.max_iters = max_iters
        self.name = name
        self.storage_path = storage_path
        self.display = display

    # ----- running --------------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None, *, groups: Any = None, **fit_params: Any) -> TuneSearchCV:
        """Run the search and refit the best candidate, blocking as scikit-learn's does.

        The dashboard shows under the cell while it runs. Ctrl-C (the notebook's Interrupt)
        or its Stop button end the search early: the candidates evaluated so far make
        `cv_results_` and the best of them is refit.
        """
        return self.fit_async(X, y, groups=groups, **fit_params).wait()

    def fit_async(
        self, X: Any, y: Any = None, *, groups: Any = None, **fit_params: Any
    ) -> TuneSearchCV:
        """Start the search and return at once; `search.tuner` runs it in the background.

        Call `wait()` to collect the results (or `search.tuner.stop()` then `wait()` to end
        it early). The data are pickled into the Tuner's trainable once and sent once to each
        worker process, not once per candidate.
        """
        self._forget_fit()
        at_once = candidates_at_once(self.n_jobs, self.max_concurrent)
        X, y, groups = indexable(X, y, groups)
        scorers = self._scorers()
        metric = self._metric(scorers)
        epochs = self._epochs()
        cv = check_cv(self.cv, y, classifier=is_classifier(self.estimator))
        splits = tuple(cv.split(X, y, groups))
        trainable = CrossValidation(
            estimator=self.estimator,
            X=X,
            y=y,
            splits=splits,
            scorers=scorers,
            metric=metric,
            fit_params=fit_params,
            error_score=self.error_score,
            return_train_score=self.return_train_score,
            epochs=epochs,
            classes=np.unique(y) if epochs and is_classifier(self.estimator) else None,
            threads=_threads_per_candidate(at_once),
        )
        self._tuner = self._make_tuner(trainable, metric, epochs or len(splits), at_once)
        self._fit_data = (X, y, fit_params)
        self._reports = epochs or len(splits)
        self._tuner.start(self.display)
        return self

    def wait(self) -> TuneSearchCV:
        """Block until the search ends, then set `cv_results_`, `best_*` and refit.

        Ctrl-C while waiting (or the dashboard's Stop) ends the search: what was evaluated so
        far is kept and the best of it refit.

        Raises:
            Exception: with error_score="raise", what a fit raised (a ValueError that quotes
                it if it could not be sent from its worker).
            ValueError: if no candidate could be scored at all.
        """
        tuner = self.tuner
        tuner.wait()
        if not hasattr(self, "_fit_data"):  # an earlier wait() collected the results
            return self
        X, y, fit_params = self._fit_data
        del self._fit_data
        self._collect(tuner)
        if self.refit:
            self._refit(X, y, fit_params)
        return self

    @property
    def tuner(self) -> Tuner:
        """The Tuner that runs the search: its `dataframe()`, `dashboard()`, `pause`, `stop`."""
        try:
            return self._tuner
        except AttributeError:
            pass
        if hasattr(self, "run_path_"):
            raise AttributeError(
                "a TuneSearchCV that was pickled keeps no Tuner; read its run with "
                f"nbtune.load({str(self.run_path_)!r})"
            )
        raise AttributeError(
            "this TuneSearchCV has not started; call fit(X, y) or fit_async(X, y) first"
        )

    def __getstate__(self) -> dict[str, Any]:
        """A fitted search pickles (joblib.dump) without its live Tuner, whose run stays on
        disk at `run_path_`; a running one does not pickle."""
        if hasattr(self, "_fit_data"):
            raise TypeError("a TuneSearchCV pickles once wait() (or fit) has returned")
        state = super().__getstate__()
        state.pop("_tuner", None)
        return state

    # ----- what fit_async sets up -------------------------------------------------------------

    def _forget_fit(self) -> None:
        """Drop what an earlier fit set (`best_estimator_`, ...), as a new fit replaces it all."""
        for name in [name for name in vars(self) if name.endswith("_") and name[0] != "_"]:
            delattr(self, name)

    def _scorers(self) -> dict[str, Callable]:
        """Scorers by name: {"score": ...} for one, the names of `scoring` for several."""
        scoring = self.scoring
        if isinstance(scoring, (list, tuple, set)):
            return {name: get_scorer(name) for name in scoring}
        if isinstance(scoring, Mapping):
            return {name: check_scoring(self.estimator, s) for name, s in scoring.items()}
        return {"score": check_scoring(self.estimator, scoring)}

    @property
    def _multimetric(self) -> bool:
        return isinstance(self.scoring, (list, tuple, set, Mapping))

    def _metric(self, scorers: Mapping[str, Callable]) -> str:
        """The scorer whose mean the Tuner tunes: the one `refit` names, else the first."""
        if not self._multimetric:
            return "score"
        if isinstance(self.refit, str) and self.refit in scorers:
            return self.refit
        if self.refit is not False and not callable(self.refit):
            raise ValueError(
                "For multi-metric scoring, the parameter refit must be set to a scorer key or "
                f"a callable; refit={self.refit!r}: pass one of {sorted(scorers)} or False"
            )
        return next(iter(scorers))

    def _epochs(self) -> int | None:
        """Epochs per candidate under early stopping, None without (one report per fold)."""
        if not self.early_stopping:
            if self.max_iters is not None:
                raise ValueError(f"max_iters={self.max_iters!r} needs early_stopping=True")
            return None
        growth_of(self.estimator)
        return DEFAULT_EPOCHS if self.max_iters is None else self.max_iters

    def _make_tuner(
        self, trainable: CrossValidation, metric: str, reports: int, at_once: int
    ) -> Tuner:
        """A Tuner that maximises the candidates' mean score, with copies of the scheduler
        and searcher, so that fitting twice starts afresh each time."""
        seed = _seed(self.random_state)
        if self.searcher is None:
            candidates = sample_candidates(self.param_distributions, self.n_trials, seed)
            searcher, num_samples = Candidates(candidates), len(candidates)
        else:
            searcher, num_samples = copy.deepcopy(self.searcher), self.n_trials
        scheduler = copy.deepcopy(self.scheduler)
        if scheduler is None and self.early_stopping:
            scheduler = ASHA(max_t=reports)
        if self.searcher is None and scheduler is None and trainable.epochs is None:
            # candidates start in order and run all their folds: the last ones share them out
            tail = max(0, num_samples - at_once)
            trainable = dataclasses.replace(trainable, tail=tail, tail_folds=at_once)
        options = {} if self.storage_path is None else {"storage_path": self.storage_path}
        return Tuner(
            trainable,
            search_space(self.param_distributions),
            metric=f"mean_test_{metric}",
            mode="max",
            num_samples=num_samples,
            max_concurrent=at_once,
            progress=True if self.verbose and self.verbose > 0 else None,
            name=self.name or _run_name(self.estimator),
            seed=seed % 2**31,
            searcher=searcher,
            scheduler=scheduler,
            fail_fast=isinstance(self.error_score, str) and self.error_score == "raise",
            overwrite=self.name is not None,
            **options,
        )

    # ----- what wait sets ---------------------------------------------------------------------

    def _collect(self, tuner: Tuner) -> None:
        """`cv_results_`, `best_index_`, `best_params_`, `best_score_`, `scorer_` and the like
        from the Tuner's trials."""
        trials = tuner.trials
        self._raise_for_failures(trials)
        scorers = self._scorers()
        metric = self._metric(scorers)
        done = evaluated(trials)
        if not done:
            raise ValueError(
                f"no candidate was scored (the search {tuner.name!r} ended {tuner.state}); "
                "see search.tuner.dataframe()"
            )
        self.n_splits_ = len(tuner.trainable.splits)
        self.run_path_ = tuner.path
        _warn_for_failed_fits(tuner, *failed_fits(done, self.n_splits_))
        results = cv_results(
            done, list(scorers), self.n_splits_, self._reports, self.return_train_score
        )
        self.multimetric_ = self._multimetric
        self.scorer_ = scorers if self.multimetric_ else scorers["score"]
        self.cv_results_ = results
        if self.refit or not self.multimetric_:
            self.best_index_ = self._best_index(results, metric)
            self.best_params_ = results["params"][self.best_index_]
            if not callable(self.refit):
                self.best_score_ = float(results[f"mean_test_{metric}"][self.best_index_])

    def _best_index(self, results: dict[str, Any], metric: str) -> int:
        if callable(self.refit):
            return int(self.refit(results))
        return int(results[f"rank_test_{metric}"].argmin())

    def _raise_for_failures(self, trials: Sequence[Any]) -> None:
        """With error_score="raise", a fit that failed ends the search with its error: the
        exception itself where the worker could send it, with its traceback there as the
        cause (as joblib does), else a ValueError that quotes it."""
        if not (isinstance(self.error_score, str) and self.error_score == "raise"):
            return
        for trial in sorted(trials, key=lambda t: t.trial_id):
            raised = _exception_in(trial.last_result)
            if raised is not None:
                remote = RemoteTraceback(str(trial.last_result.get(RAISED_TRACEBACK, "")))
                raise raised from remote
        failed = [t for t in trials if t.status is TrialStatus.ERROR]
        if failed:
            raise ValueError(
                f"the fit of candidate {dict(failed[0].config)} failed (error_score='raise'): "
                f"{failed[0].error}"
            )

    def _refit(self, X: Any, y: Any, fit_params: Mapping[str, Any]) -> None:
        """Fit the best candidate on all the data, here in the kernel, as scikit-learn does."""
        self.best_estimator_ = clone(self.estimator).set_params(
            **clone(self.best_params_, safe=False)
        )
        started = time.perf_counter()
        if y is None:
            self.best_estimator_.fit(X, **fit_params)
        else:
            self.best_estimator_.fit(X, y, **fit_params)
        self.refit_time_ = time.perf_counter() - started
        if hasattr(self.best_estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.best_estimator_.feature_names_in_


def _warn_for_failed_fits(tuner: Tuner, errors: Counter[str], total: int) -> None:
    """Say that fits failed, and why, as scikit-learn does: a warning, or an error if all did.

    A fold's error is counted under the last one its candidate met, so the counts are exact
    when each candidate fails in one way; the full tracebacks are in the trials' output.log.
    """
    failed = sum(errors.values())
    if not failed:
        return
    details = "\n".join(f"{n} fits failed with: {error}" for error, n in errors.most_common())
    where = f"(tracebacks in the trials' output.log under {tuner.path})"
    if failed == total:
        raise ValueError(f"All the {total} fits failed {where}:\n{details}")
    warnings.warn(
        f"{failed} fits failed out of a total of {total}; their scores are error_score "
        f"{where}:\n{details}",
        FitFailedWarning,
        stacklevel=3,
    )


class RemoteTraceback(Exception):
    """The traceback, in its worker, of an exception a fit raised: shown as its cause."""

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0]}"""'


def _exception_in(result: Mapping[str, Any]) -> BaseException | None:
    """The exception a fit raised, if `result` carries one that unpickles here."""
    pickled = result.get(RAISED)
    if not isinstance(pickled, Pickled):
        return None
    try:
        raised = pickled.load()
    except Exception:
        return None
    return raised if isinstance(raised, BaseException) else None


def candidates_at_once(n_jobs: Any, max_concurrent: int | None) -> int:
    """How many candidates run at once: `n_jobs` as joblib reads it (-1 for every CPU, -2 for
    all but one, ...), or `max_concurrent`, or one per CPU.

    Raises:
        ValueError: for an n_jobs that is not a nonzero whole number, or that disagrees with
            max_concurrent.
    """
    cpus = os.cpu_count() or 1
    if n_jobs is None:
        return max_concurrent or cpus
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
        raise ValueError(
            f"n_jobs={n_jobs!r}: pass how many candidates run at once, or -1 for one per CPU "
            "(-2 for all CPUs but one, ...)"
        )
    jobs = int(n_jobs) if n_jobs > 0 else max(1, cpus + 1 + int(n_jobs))
    if max_concurrent is not None and max_concurrent != jobs:
        raise ValueError(
            f"n_jobs={n_jobs!r} and max_concurrent={max_concurrent!r} disagree: they say the "
            "same thing, so pass one of them"
        )
    return jobs


def _threads_per_candidate(max_concurrent: int | None) -> int:
    """The CPUs each of the candidates that run at once may use: joblib's rule for the native
    threads of its workers, so two candidates on two cores do not run four OpenMP threads."""
    cpus = os.cpu_count() or 1
    return max(1, cpus // (max_concurrent or cpus))


def _seed(random_state: Any) -> int:
    """An int seed from scikit-learn's `random_state`: the int itself, one drawn from a
    RandomState, or a fresh one for None (drawn once, so candidates and Tuner agree)."""
    if random_state is None:
        return secrets.randbits(31)
    if isinstance(random_state, (int, np.integer)):
        return int(random_state)
    return int(check_random_state(random_state).randint(2**31))


def _run_name(estimator: Any) -> str:
    return f"{type(estimator).__name__}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
