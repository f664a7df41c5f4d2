"""Value swapping as in the ALC paper's experiments (alc-paper prep_anon.py; the ALC paper, section
6):
per column, int(fraction n) disjoint random row pairs exchange their values (fraction 0.1 moves
about 20 % of the values, "weak"; 0.4 about 80 %, "strong"). Used by the prior-approach baseline
and to build comparable releases."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


def swap_pairs(n: int, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two disjoint sets of int(fraction n) rows; row a[i] swaps with row b[i]."""
    k = int(fraction * n)
    perm = rng.permutation(n)[: 2 * k]
    return perm[:k], perm[k:]


def swap_arrays(arrays: list[np.ndarray], fraction: float, rng: np.random.Generator) -> None:
    """Swap one column, given as aligned arrays (codes, values...), in place."""
    a, b = swap_pairs(len(arrays[0]), fraction, rng)
    for arr in arrays:
        arr[a], arr[b] = arr[b].copy(), arr[a].copy()


def swap_frame(df: pd.DataFrame, fraction: float, seed: int = 42) -> pd.DataFrame:
    """A swapped copy of a table, columns processed in file order with one generator
    (reference/alc: ``numpy.random.default_rng(42)``)."""
    rng = np.random.default_rng(seed)
    out = df.copy()
    for c in df.columns:
        v = out[c].to_numpy().copy()
        swap_arrays([v], fraction, rng)
        out[c] = v
    return out
