"""nbtune.sklearn.TuneSearchCV: a scikit-learn estimator, RandomizedSearchCV's results, early
stopping by fold and by epoch, and the dashboard in a real kernel."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats as st
from kernels import Kernel
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_iris
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import FitFailedWarning
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.model_selection import RandomizedSearchCV
from sklearn.svm import SVC
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

import nbtune as nt
from nbtune.metrics import format_number
from nbtune.sklearn import TuneSearchCV
from nbtune.sklearn._results import rank
from nbtune.sklearn._search import candidates_at_once

X, Y = load_iris(return_X_y=True)
SVC_SPACE = {"C": st.loguniform(1e-2, 1e2), "kernel": ["rbf", "linear"]}


@pytest.fixture
def search(runs):
    """A TuneSearchCV factory that writes under the test's folder, two candidates at once."""

    def make(estimator, space, **options):
        options.setdefault("storage_path", runs)
        options.setdefault("max_concurrent", 2)
        options.setdefault("random_state", 0)
        return TuneSearchCV(estimator, space, **options)

    return make


class SlowClassifier(ClassifierMixin, BaseEstimator):
    """Predicts the majority class after `delay` seconds of fitting; `c` changes nothing, so
    every candidate scores the same."""

    def __init__(self, delay=0.0, c=1.0):
        self.delay = delay
        self.c = c

    def fit(self, X, y):
        time.sleep(self.delay)
        self.classes_ = np.unique(y)
        self.majority_ = self.classes_[np.bincount(np.searchsorted(self.classes_, y)).argmax()]
        return self

    def predict(self, X):
        return np.full(len(X), self.majority_)


# ----- a scikit-learn estimator ---------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.FitFailedWarning")  # bad data, on purpose
@parametrize_with_checks(
    [TuneSearchCV(LogisticRegression(), {"C": [0.1, 1.0]}, n_trials=2, cv=2, random_state=0)]
)
def test_scikit_learns_estimator_checks_pass(estimator, check, runs):
    """Every check of `check_estimator` (legacy ones included) passes; each fit is a run."""
    check(estimator.set_params(storage_path=runs, max_concurrent=2))


def test_get_params_set_params_and_clone_see_every_argument():
    search = TuneSearchCV(SVC(), SVC_SPACE, n_trials=3, scheduler=nt.ASHA(max_t=5))
    assert search.get_params()["estimator__C"] == 1.0
    search.set_params(estimator__C=2.0, n_trials=7)
    copy = clone(search)
    assert (copy.estimator.C, copy.n_trials, type(copy.scheduler)) == (2.0, 7, nt.ASHA)
    assert copy.scheduler is not search.scheduler


# ----- results as RandomizedSearchCV writes them ----------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"return_train_score": True},
        {"scoring": ["accuracy", "f1_macro"], "refit": "f1_macro"},
        {"scoring": {"acc": "accuracy", "bal": "balanced_accuracy"}, "refit": "bal"},
    ],
    ids=["score", "train-score", "list", "dict"],
)
def test_cv_results_match_randomized_search_on_the_same_candidates(search, options):
    tuned = search(SVC(), SVC_SPACE, n_trials=8, **options).fit(X, Y)
    expected = RandomizedSearchCV(SVC(), SVC_SPACE, n_iter=8, random_state=0, **options)
    expected.fit(X, Y)
    ours, theirs = tuned.cv_results_, expected.cv_results_
    assert list(ours) == list(theirs)
    assert ours["params"] == theirs["params"]
    for key in theirs:
        if key.startswith(("split", "mean_test", "std_test", "rank", "mean_train", "std_train")):
            np.testing.assert_allclose(ours[key], theirs[key], err_msg=key)
    assert (tuned.best_index_, tuned.best_params_) == (expected.best_index_, expected.best_params_)
    assert tuned.best_score_ == pytest.approx(expected.best_score_)
    assert (tuned.n_splits_, tuned.multimetric_) == (5, expected.multimetric_)
    assert tuned.refit_time_ > 0 and tuned.score(X, Y) == pytest.approx(expected.score(X, Y))
    assert len(pd.DataFrame(ours)) == 8


def test_the_tuners_best_is_scikit_learns_best_score_not_a_running_mean(search):
    tuned = search(SVC(), SVC_SPACE, n_trials=8).fit(X, Y)
    tuner, metric = tuned.tuner, "mean_test_score"
    assert tuner.best_result[metric] == pytest.approx(tuned.best_score_)
    assert tuner.best_trial.best_value == pytest.approx(tuned.best_score_)
    history = tuner.history()
    for trial in tuner.trials:
        means = history[history["trial_id"] == trial.trial_id][metric]
        assert trial.best_value == means.iloc[-1], "the mean over every fold, not the best so far"
    assert any(
        history[history["trial_id"] == t.trial_id][metric].max() > t.best_value
        for t in tuner.trials
    ), "some running mean of the first folds beat its candidate's score"


def test_the_dashboard_and_the_progress_line_show_scikit_learns_best_score(search, capfd):
    tuned = search(SVC(), SVC_SPACE, n_trials=8, verbose=1).fit(X, Y)
    shown = format_number(tuned.best_score_)
    running_means = tuned.tuner.history()["mean_test_score"]
    assert format_number(running_means.max()) != shown, "a running mean would read otherwise"
    assert f"best mean_test_score={shown} (trial " in capfd.readouterr().err.splitlines()[-1]
    dashboard = tuned.tuner.dashboard()
    assert f"<b>{shown}</b>" in dashboard.best.value
    rows = dashboard.table.table["rows"]
    assert shown in [row["cells"]["best"] for row in rows]
    assert all(row["cells"]["best"] != format_number(running_means.max()) for row in rows)


def test_the_refit_estimator_answers_predict_and_the_rest(search):
    tuned = search(LogisticRegression(max_iter=1000), {"C": [0.5, 1.0, 2.0]}, n_trials=3)
    tuned.fit(X, Y)
    best = tuned.best_estimator_
    np.testing.assert_array_equal(tuned.predict(X), best.predict(X))
    np.testing.assert_allclose(tuned.predict_proba(X), best.predict_proba(X))
    np.testing.assert_allclose(tuned.decision_function(X), best.decision_function(X))
    np.testing.assert_array_equal(tuned.classes_, [0, 1, 2])
    pca = search(PCA(), {"n_components": [1, 2]}, n_trials=2).fit(X)
    np.testing.assert_allclose(pca.transform(X), pca.best_estimator_.transform(X))
    assert pca.best_params_ == {"n_components": 2}


def test_domains_distributions_and_lists_mix_and_a_list_of_dicts_masks_params(search):
    space = [
        {"kernel": ["rbf"], "C": nt.loguniform(0.1, 10), "gamma": st.uniform(0.01, 1)},
        {"kernel": ["poly"], "degree": nt.choice([2, 3])},
    ]
    tuned = search(SVC(), space, n_trials=6).fit(X, Y)
    assert len(tuned.cv_results_["params"]) == 6
    poly = tuned.cv_results_["param_kernel"] == "poly"
    assert tuned.cv_results_["param_degree"].mask.tolist() == (~poly).tolist()
    assert all(0.1 <= p["C"] < 10 for p in tuned.cv_results_["params"] if "C" in p)


def test_a_searcher_samples_the_space_instead(search):
    tuned = search(SVC(), {"C": nt.loguniform(1e-2, 1e2)}, n_trials=4, searcher=nt.OptunaSearch())
    tuned.fit(X, Y)
    assert len(tuned.cv_results_["params"]) == 4 and tuned.best_score_ > 0.9


def test_fitting_again_replaces_every_fitted_attribute(search):
    tuned = search(SVC(), {"C": [1.0, 2.0]}, n_trials=2).fit(X, Y)
    first = tuned.tuner
    tuned.set_params(refit=False).fit(X, Y)
    assert tuned.tuner is not first and not hasattr(tuned, "best_estimator_")
    assert tuned.wait() is tuned, "a second wait() has nothing more to do"


def test_a_fitted_search_pickles_without_its_tuner(search):
    tuned = search(SVC(), {"C": [1.0]}, n_trials=1).fit(X, Y)
    loaded = pickle.loads(pickle.dumps(tuned))
    np.testing.assert_array_equal(loaded.predict(X), tuned.predict(X))
    with pytest.raises(AttributeError, match="nbtune.load"):
        loaded.tuner  # noqa: B018
    assert len(nt.load(loaded.run_path_).dataframe()) == 1


# ----- failures --------------------------------------------------------------------------------


def test_a_failing_fit_scores_error_score_with_a_warning(search):
    with pytest.warns(FitFailedWarning, match="5 fits failed out of a total of 10"):
        tuned = search(SVC(), {"C": [-1.0, 1.0]}, n_trials=2).fit(X, Y)
    failed = tuned.cv_results_["params"].index({"C": -1.0})
    assert np.isnan(tuned.cv_results_["mean_test_score"][failed])
    assert tuned.best_params_ == {"C": 1.0}


def test_every_fit_failing_or_error_score_raise_is_an_error(search):
    with pytest.raises(ValueError, match="(?s)All the 5 fits failed.*InvalidParameterError"):
        search(SVC(), {"C": [-1.0]}, n_trials=1).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="'C' parameter of SVC"):
        search(SVC(), {"C": [-1.0]}, n_trials=1, error_score="raise").fit(X, Y)


class FitBoom(Exception):
    """What `Explodes.fit` raises: an exception of the estimator's own."""


class Explodes(SlowClassifier):
    """Fails to fit when `c` is negative, with its own exception."""

    def fit(self, X, y):
        if self.c < 0:
            raise FitBoom(f"c={self.c} cannot be fitted")
        return super().fit(X, y)


def test_error_score_raise_raises_the_estimators_own_exception_with_the_workers_traceback(
    search,
):
    with pytest.raises(FitBoom, match="c=-1.0 cannot be fitted") as raised:
        search(Explodes(), {"c": [-1.0, 1.0]}, n_trials=2, error_score="raise").fit(X, Y)
    assert type(raised.value) is FitBoom, "not a wrapper"
    assert "in fit" in str(raised.value.__cause__), "the traceback in the worker, as a cause"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"early_stopping": True}, "early_stopping=True needs an estimator with partial_fit"),
        ({"max_iters": 3}, "max_iters=3 needs early_stopping=True"),
        ({"scoring": ["accuracy", "f1_macro"]}, "refit must be set to a scorer key"),
        ({"n_jobs": 3}, "n_jobs=3 and max_concurrent=2 disagree"),
        ({"n_jobs": 0}, "n_jobs=0"),
        ({"n_jobs": 1.5}, "n_jobs=1.5"),
    ],
)
def test_arguments_that_cannot_work_fail_before_any_worker_starts(search, options, message):
    with pytest.raises(ValueError, match=message):
        search(SVC(), {"C": [1.0]}, **options).fit_async(X, Y)


def test_scikit_learns_n_jobs_verbose_pre_dispatch_and_ranges_are_accepted(search):
    tuned = search(
        SVC(),
        {"C": range(1, 4), "kernel": ["linear"]},
        n_trials=3,
        max_concurrent=None,
        n_jobs=-1,
        verbose=1,
        pre_dispatch="2*n_jobs",
    ).fit(X, Y)
    expected = RandomizedSearchCV(
        SVC(), {"C": range(1, 4), "kernel": ["linear"]}, n_iter=3, random_state=0
    ).fit(X, Y)
    assert tuned.cv_results_["params"] == expected.cv_results_["params"]
    assert tuned.best_params_ == expected.best_params_
    assert tuned.tuner.max_concurrent == os.cpu_count(), "n_jobs=-1: every CPU"
    assert tuned.tuner.progress is True, "verbose=1 prints the progress line"
    assert clone(tuned).get_params()["pre_dispatch"] == "2*n_jobs"


@pytest.mark.parametrize(
    ("n_jobs", "max_concurrent", "expected"),
    [
        (None, None, os.cpu_count()),
        (1, None, 1),
        (-1, None, os.cpu_count()),
        (-2, None, max(1, os.cpu_count() - 1)),
        (None, 3, 3),
        (2, 2, 2),
    ],
)
def test_n_jobs_sets_how_many_candidates_run_at_once(n_jobs, max_concurrent, expected):
    assert candidates_at_once(n_jobs, max_concurrent) == expected


def test_an_empty_range_fails_in_one_line(search):
    with pytest.raises(TypeError, match=r"param_distributions\['C'\]=range\(0, 0\)"):
        search(SVC(), {"C": range(0)}).fit_async(X, Y)


class NotesThread(SlowClassifier):
    """Notes, in a file of its own under `log`, which thread fitted which `c`."""

    def __init__(self, delay=0.0, c=1.0, log=""):
        super().__init__(delay, c)
        self.log = log

    def fit(self, X, y):
        name = threading.current_thread().name
        (Path(self.log) / uuid.uuid4().hex).write_text(f"{self.c}|{name}")
        return super().fit(X, y)


def test_the_last_candidates_share_out_their_folds_so_no_worker_idles(search, tmp_path):
    """As joblib shares out folds: once no candidate is left to start, the last ones fit
    their folds on threads (reports still in order), unless a scheduler may cut them."""
    space = {"c": [0.0, 1.0, 2.0, 3.0, 4.0], "log": [str(tmp_path)]}
    tuned = search(NotesThread(), space, n_trials=5).fit(X, Y)
    threads = {}
    for note in tmp_path.glob("[0-9a-f]" * 32):
        c, name = note.read_text().split("|")
        threads.setdefault(float(c), set()).add(name.startswith("nbtune-fold"))
    by_trial = {t.trial_id: threads[t.config["c"]] for t in tuned.tuner.trials}
    assert by_trial == {0: {False}, 1: {False}, 2: {False}, 3: {True}, 4: {True}}
    assert (tuned.tuner.history().groupby("trial_id")["training_iteration"].max() == 5).all()

    for note in tmp_path.glob("[0-9a-f]" * 32):
        note.unlink()
    search(NotesThread(), space, n_trials=5, scheduler=nt.FIFOScheduler()).fit(X, Y)
    names = {note.read_text().split("|")[1] for note in tmp_path.glob("[0-9a-f]" * 32)}
    assert not any(name.startswith("nbtune-fold") for name in names), "a scheduler: in order"


# ----- early stopping ---------------------------------------------------------------------------


def test_a_scheduler_drops_candidates_between_folds_and_they_rank_last(search):
    # Suggested in this order, the best first: those that come later, worse at the first fold
    # than all the rung already holds, are cut whatever the order of the concurrent reports.
    space = {"C": [100.0, 10.0, 1.0, 0.1, 1e-2, 1e-3], "kernel": ["linear"]}
    tuned = search(SVC(), space, n_trials=6, scheduler=nt.ASHA(max_t=5)).fit(X, Y)
    folds = tuned.tuner.dataframe()["training_iteration"].to_numpy()
    assert (folds < 5).any() and (folds == 5).any(), "ASHA cut some candidates after a fold"
    ranks, results = tuned.cv_results_["rank_test_score"], tuned.cv_results_
    assert ranks[folds < 5].min() > ranks[folds == 5].max()
    assert np.isnan(results["split4_test_score"][folds < 5]).all()
    assert folds[tuned.best_index_] == 5


def test_rank_ties_share_the_lowest_rank_and_nan_ties_with_the_worst():
    means = np.array([0.5, 0.9, np.nan, 0.9, 0.99, 0.1])
    complete = np.array([True, True, True, True, False, True])
    assert rank(means, complete).tolist() == [3, 1, 5, 1, 6, 4]


def test_early_stopping_reports_each_epoch_of_partial_fit(search):
    space = {"alpha": nt.loguniform(1e-4, 1e-1)}
    tuned = search(SGDClassifier(), space, n_trials=4, early_stopping=True, max_iters=3).fit(X, Y)
    history = tuned.tuner.history()
    assert history["training_iteration"].max() == 3 and len(history) >= 4
    ran_in_full = (tuned.tuner.dataframe()["training_iteration"] == 3).to_numpy()
    means = tuned.cv_results_["mean_test_score"]
    assert tuned.best_score_ == means[ran_in_full].max() > 0.5, "the best of those not pruned"


def test_early_stopping_grows_a_warm_started_forest(search):
    tuned = search(
        RandomForestClassifier(n_estimators=6, random_state=0),
        {"max_depth": [2, 3]},
        n_trials=2,
        early_stopping=True,
        max_iters=3,
        scheduler=nt.FIFOScheduler(),
    ).fit(X, Y)
    assert tuned.tuner.dataframe()["training_iteration"].tolist() == [3, 3]
    assert tuned.best_estimator_.n_estimators == 6


# ----- running in the background ----------------------------------------------------------------


def test_fit_async_returns_at_once_and_a_stop_leaves_a_usable_partial_result(search):
    space = {"c": [float(c) for c in range(6)], "delay": [0.3]}
    tuned = search(SlowClassifier(), space, n_trials=6)
    started = time.perf_counter()
    tuned.fit_async(X, Y)
    assert time.perf_counter() - started < 1.5 and tuned.tuner.live
    assert not hasattr(tuned, "cv_results_")
    reported = threading.Event()
    tuned.tuner.subscribe(lambda event: reported.set() if tuned.tuner.best_result else None)
    assert reported.wait(30)
    tuned.tuner.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tuned.wait()
    assert tuned.tuner.state == "stopped"
    assert 1 <= len(tuned.cv_results_["params"]) < 6
    assert tuned.best_estimator_.predict(X[:2]).tolist() == [0, 0]


def test_ctrl_c_in_fit_stops_the_search_and_leaves_a_usable_partial_result(runs):
    code = textwrap.dedent(f"""
        import signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from sklearn.datasets import load_iris
        from test_sklearn import SlowClassifier
        from nbtune.sklearn import TuneSearchCV

        X, y = load_iris(return_X_y=True)
        search = TuneSearchCV(SlowClassifier(), {{"c": list(range(6)), "delay": [0.3]}},
                              n_trials=6, max_concurrent=2, name="ctrl-c", random_state=0,
                              storage_path={str(runs)!r})
        search.fit(X, y)
        print(search.tuner.state, len(search.cv_results_["params"]) < 6,
              search.predict(X[:1]).tolist())
    """)
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    results = runs / "ctrl-c" / "results.jsonl"
    deadline = time.monotonic() + 60
    while not results.exists() or len(results.read_text().splitlines()) < 2:
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out == "stopped True [0]\n"


FIT_ASYNC = """
    import scipy.stats as st
    from sklearn.datasets import load_iris
    from sklearn.svm import SVC
    from nbtune.sklearn import TuneSearchCV

    X, y = load_iris(return_X_y=True)
    search = TuneSearchCV(SVC(), {"C": st.loguniform(1e-2, 1e2)}, n_trials=4, max_concurrent=2,
                          random_state=0, name="svc")
    search.fit_async(X, y)
    print(search.tuner.live)
"""


def test_fit_async_in_a_kernel_returns_and_shows_the_dashboard(tmp_path):
    kernel = Kernel(tmp_path)
    try:
        started = kernel.run(FIT_ASYNC)
        assert started.ok, started.error
        assert started.stdout == "True\n", "the cell returned with the search running"
        widget = "application/vnd.jupyter.widget-view+json"
        assert any(widget in data for data in started.displays), "the dashboard shows"
        done = kernel.run("search.wait(); print(sorted(search.best_params_), search.n_splits_)")
        assert done.stdout == "['C'] 5\n", done
        assert "nbtune · svc</b> — finished" in started.displays[1]["text/html"]
    finally:
        kernel.shutdown()
