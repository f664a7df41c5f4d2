"""Generated data for the planted-copies test of the ALC halting rule.

The original: four categorical known columns, one continuous, and a secret that equals a
function of column ``a`` for 80 % of the rows (so the baseline, trained on raw data, predicts it
with precision about 0.8 for everybody, and no small group stands out). The released table is
"synthetic": every column drawn independently from the original's marginals, which loses the
relation to the secret; ``copies`` of the original rows (15 %) can be copied verbatim into it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def original(n: int = 6000, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 10, n)
    secret = np.where(rng.random(n) < 0.8, a, rng.integers(0, 10, n))
    return pd.DataFrame({
        "a": [f"a{v}" for v in a],
        "b": [f"b{v}" for v in rng.integers(0, 10, n)],
        "c": [f"c{v}" for v in rng.integers(0, 8, n)],
        "d": [f"d{v}" for v in rng.integers(0, 12, n)],
        "x": np.round(rng.normal(50.0, 15.0, n), 3),
        "secret": [f"s{v}" for v in secret],
    })


def released(ori: pd.DataFrame, copies: float = 0.15, seed: int = 8) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = len(ori)
    syn = pd.DataFrame({c: ori[c].to_numpy()[rng.integers(0, n, n)] for c in ori.columns})
    syn["x"] = np.round(rng.normal(50.0, 15.0, n), 3)
    k = int(round(copies * n))
    if k:
        rows = rng.choice(n, size=k, replace=False)
        syn.iloc[:k] = ori.iloc[rows].to_numpy()
        syn = syn.sample(frac=1.0, random_state=int(rng.integers(1 << 31))).reset_index(drop=True)
    return syn.astype(ori.dtypes.to_dict())


KNOWN = ["a", "b", "c", "d", "x"]
