"""Which version of the trainable ran each trial: `nbtune.code_hash`, `dataframe()["code"]`."""

from __future__ import annotations

import functools
import textwrap

import nbtune as nt
from nbtune.code_hash import code_hash


def define(source: str, name: str = "train") -> object:
    """A function defined from `source` in a module of its own, as a notebook cell does."""
    namespace: dict = {"nt": nt, "__name__": "cell"}
    exec(textwrap.dedent(source), namespace)
    return namespace[name]


FIRST = """
    def helper(x):
        return x * 2

    def train(config):
        nt.report(loss=helper(config["x"]))
"""


def test_the_same_code_hashes_the_same_and_a_change_anywhere_it_runs_differs():
    assert code_hash(define(FIRST)) == code_hash(define(FIRST)), "same code, another cell"
    assert len(code_hash(define(FIRST))) == 8
    fixed_body = FIRST.replace("helper(config", "helper(1 + config")
    fixed_helper = FIRST.replace("x * 2", "x * 3")
    hashes = {code_hash(define(source)) for source in (FIRST, fixed_body, fixed_helper)}
    assert len(hashes) == 3, "a change in the function or in a helper it calls"


def test_closures_partials_and_class_trainables_hash_their_code():
    def make(factor):
        def train(config):
            nt.report(loss=config["x"] * factor)

        return train

    assert code_hash(make(2)) == code_hash(make(3)), "data in the closure is not code"
    train = define(FIRST)
    other = define(FIRST.replace("x * 2", "x * 5"))
    assert code_hash(functools.partial(train)) != code_hash(functools.partial(other))

    class Counting(nt.Trainable):
        def step(self):
            return {"loss": 1.0}

    class Counting2(nt.Trainable):
        def step(self):
            return {"loss": 2.0}

    assert code_hash(Counting) != code_hash(Counting2)


def test_each_trial_records_the_code_it_ran_and_a_restore_with_a_fix_shows_it(make_tuner):
    first, fixed = define(FIRST), define(FIRST.replace("x * 2", "x * 3"))
    tuner = make_tuner(
        first, {"x": nt.uniform(0, 1)}, metric="loss", num_samples=2, executor=nt.ThreadExecutor()
    )
    tuner.run()
    assert set(tuner.dataframe()["code"]) == {code_hash(first)}
    restored = nt.Tuner.restore(
        tuner.path, fixed, num_samples=4, executor=nt.ThreadExecutor(), progress=False
    )
    restored.run()
    codes = restored.dataframe()["code"].tolist()
    assert codes == [code_hash(first)] * 2 + [code_hash(fixed)] * 2
    assert nt.load(tuner.path).dataframe()["code"].tolist() == codes
