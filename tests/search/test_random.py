import trainables

import nbtune as nt
from nbtune.search import RandomSearch
from nbtune.space import SearchSpace, choice, grid, uniform


def suggest_all(searcher):
    configs = []
    while not searcher.is_finished:
        configs.append(searcher.suggest(len(configs)))
    return configs


def test_grid_values_multiply_the_samples():
    searcher = RandomSearch()
    space = SearchSpace({"a": grid([1, 2, 3]), "x": uniform(0, 1)})
    searcher.setup(space, "loss", "min", num_samples=2, seed=0)
    configs = suggest_all(searcher)
    assert [c["a"] for c in configs] == [1, 2, 3, 1, 2, 3]
    assert len({c["x"] for c in configs}) == 6
    assert searcher.suggest(6) is None


def test_extend_adds_configurations_that_follow_on():
    space = SearchSpace({"opt": choice(["sgd", "adam"]), "x": uniform(0, 1)})
    short, long = RandomSearch(), RandomSearch()
    short.setup(space, "loss", "min", num_samples=3, seed=4)
    long.setup(space, "loss", "min", num_samples=5, seed=4)
    first = suggest_all(short)
    short.extend(2)
    assert not short.is_finished
    assert first + suggest_all(short) == suggest_all(long)


def test_it_plans_the_samples_times_the_grid_and_what_extend_adds():
    searcher = RandomSearch()
    space = SearchSpace({"a": grid([1, 2, 3]), "b": grid([True, False]), "x": uniform(0, 1)})
    searcher.setup(space, "loss", "min", num_samples=2, seed=0)
    assert searcher.planned_trials == 12
    searcher.extend(6)
    assert searcher.planned_trials == 18 == len(suggest_all(searcher))


def test_a_run_over_ray_tune_s_domains_records_ints_as_ints(make_tuner):
    space = {
        "depth": nt.qrandint(2, 10, 2),
        "trees": nt.lograndint(10, 1000),
        "dropout": nt.quniform(0.0, 0.5, 0.1),
        "noise": nt.qrandn(0.0, 1.0, 0.5),
    }
    tuner = make_tuner(
        trainables.count_up,
        {**space, "steps": 1},
        metric="loss",
        num_samples=8,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    frame = tuner.dataframe()
    assert frame["config/depth"].dtype.kind == "i" and frame["config/trees"].dtype.kind == "i"
    assert set(frame["config/depth"]) <= {2, 4, 6, 8, 10}
    assert all(value * 2 == round(value * 2) for value in frame["config/noise"])
