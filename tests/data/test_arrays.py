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
