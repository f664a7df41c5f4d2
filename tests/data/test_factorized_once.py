"""Within riskcore.data.factorized_once a typed column is factorized once, however many of the
diff's readers ask for its distinct values, and every reader gets what it got before."""

from __future__ import annotations

import numpy as np
import pandas as pd

import riskcore.data as data
from riskcore.anatomy import diff, read_release
from riskcore.data import distinct, factorized_once, used_values


def _tables(n: int = 4000) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(3)
    original = pd.DataFrame({
        "age": rng.integers(18, 90, n),
        "household": rng.integers(0, n // 2, n),
        "income": np.round(rng.lognormal(10, 1, n), 2),
        "sex": pd.Categorical(rng.choice(["F", "M"], n)),
    })
    released = original.sample(frac=0.9, random_state=4).reset_index(drop=True)
    return original, released


def _count_factorize(monkeypatch) -> list[int]:
    """The rows of every column pandas factorizes through riskcore.data (a counter around
    the real function)."""
    sizes: list[int] = []
    real = pd.factorize

    def counted(values, *args, **kwargs):
        sizes.append(len(values))
        return real(values, *args, **kwargs)

    monkeypatch.setattr(data.pd, "factorize", counted)
    return sizes


def test_a_column_taken_again_from_its_frame_is_factorized_once(monkeypatch):
    original, _ = _tables()
    sizes = _count_factorize(monkeypatch)
    with factorized_once():
        first = distinct(original["household"])
        again = distinct(original["household"])  # a new Series, a new view of the same memory
        used = used_values(original["household"])
        assert used_values(original["household"]) is used
    assert again is first and sizes == [len(original)]
    # outside, every call factorizes: the memo lives only as long as the scope
    distinct(original["household"])
    assert len(sizes) == 2
    # a column with other values at another place in memory is its own entry
    with factorized_once():
        a = distinct(original["age"])
        b = distinct(original["age"].copy())
    assert a is not b and np.array_equal(a[0], b[0])


def test_the_diff_factorizes_each_typed_column_of_each_table_once(monkeypatch):
    original, released = _tables()
    expected = diff(original, released, seed=2).to_dict()
    sizes = _count_factorize(monkeypatch)
    got = read_release(original, released, seed=2).to_dict()
    assert got == expected
    # three typed columns in two tables: six factorizations of whole columns, no more (each
    # was factorized three or four times before: markers, reading, domain)
    whole = [s for s in sizes if s in (len(original), len(released))]
    assert len(whole) == 6, sizes
