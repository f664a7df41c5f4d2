"""riskcore.arrays: distinct values and orders as numpy gives them, by faster paths."""

from __future__ import annotations

import numpy as np

from riskcore.arrays import _in_runs, unique


def test_distinct_values_are_numpys_on_runs_and_on_values_in_no_order():
    """Integers in a few sorted runs (the linkage's candidate pairs, one run per key), in no
    order, booleans, unsigned, negative, floats that repeat: each is ``np.unique``'s."""
    rng = np.random.default_rng(3)
    for trial in range(200):
        n = int(rng.integers(0, 5_000))
        runs = [np.sort(rng.integers(-50, 10_000, int(k)))
                for k in rng.multinomial(n, np.ones(4) / 4)]
        cases = [np.concatenate(runs), rng.integers(-5, 5, n), rng.integers(0, 2, n) > 0,
                 rng.integers(0, 300, n).astype(np.uint16),
                 rng.integers(0, 40, n).astype(float) / 4]
        for values in cases:
            assert np.array_equal(unique(values), np.unique(values)), (trial, values.dtype)
    assert _in_runs(np.concatenate([np.arange(1_000), np.arange(1_000)]))
    assert not _in_runs(rng.permutation(2_000))


def test_integer_labels_are_each_values_text():
    """A column of integers as text labels (the diff's and the alignment's reading of a
    household number or a zip) is, per row, ``str`` of its value, missing where it is
    missing, in a Categorical whose categories come in order of first appearance: as each
    distinct value written in Python gives it (signed, 64-bit, unsigned, nullable, a narrow
    type, another index, empty)."""
    import pandas as pd

    from riskcore.alignment import _one_text, text_labels
    from riskcore.data import map_distinct

    rng = np.random.default_rng(4)
    cases = [pd.Series(rng.integers(-1_000, 1_000, 5_000)),
             pd.Series(rng.integers(0, 2**63 - 1, 5_000, dtype=np.int64)),
             pd.Series(pd.array([1, None, 3, 3, -7], dtype="Int64")),
             pd.Series(np.array([2**64 - 1, 5, 5], dtype=np.uint64)),
             pd.Series(np.array([1, 2, 3], dtype=np.int8), index=[5, 6, 7]),
             pd.Series(np.array([], dtype=np.int64))]
    for values in cases:
        got = text_labels(values)
        want = map_distinct(values, lambda u: u.map(_one_text))
        assert got.dtype == want.dtype and got.equals(want)
        assert got.cat.categories.equals(want.cat.categories)
        assert list(got.astype(object).where(got.notna(), None)) == \
            [None if pd.isna(v) else str(v) for v in values]
