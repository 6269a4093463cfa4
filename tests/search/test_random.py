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
