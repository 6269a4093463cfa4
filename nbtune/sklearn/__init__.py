"""scikit-learn's randomized search, with nbtune's worker processes, dashboard and schedulers.

    from nbtune.sklearn import TuneSearchCV

    search = TuneSearchCV(SVC(), {"C": scipy.stats.loguniform(1e-2, 1e2)}, n_trials=40,
                          scheduler=nbtune.ASHA(max_t=5))   # may drop a candidate after a fold
    search.fit(X, y)          # blocks, as scikit-learn's; or fit_async(X, y) ... wait()
    search.best_params_, search.cv_results_, search.predict(X), search.tuner.dataframe()

Needs scikit-learn (`pip install 'nbtune[sklearn]'`); `import nbtune` does not import it.
"""

from __future__ import annotations

try:
    import sklearn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("nbtune.sklearn needs scikit-learn: pip install 'nbtune[sklearn]'") from exc

from nbtune.sklearn._search import TuneSearchCV

__all__ = ["TuneSearchCV"]
