"""Synthetic scale-up of sdcMicro's testdata for the SUDA2 / measure_risk benchmarks.

testdata is replicated to the target size; each copy after the first perturbs its rows:
* ``easy``: 7 keys; each row, with probability 5%, gets one key (chosen uniformly) redrawn from
  that key's marginal;
* ``hard``: 9 keys (the 7 plus age and hhcivil); each key of each row is redrawn from its
  marginal independently with probability 0.3.
Sampling weights and household ids are carried over (household ids made unique per copy).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS7 = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]
KEYS9 = KEYS7 + ["age", "hhcivil"]


def scaled_testdata(base: pd.DataFrame, n_rows: int, variant: str = "easy",
                    seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    keys = KEYS7 if variant == "easy" else KEYS9
    reps = -(-n_rows // len(base))
    idx = np.tile(np.arange(len(base)), reps)[:n_rows]
    copy = np.repeat(np.arange(reps), len(base))[:n_rows]
    out = {k: base[k].to_numpy()[idx].copy() for k in keys}
    later = copy > 0
    if variant == "easy":
        hit = later & (rng.random(n_rows) < 0.05)
        which = rng.integers(0, len(keys), n_rows)
        for j, k in enumerate(keys):
            rows = np.flatnonzero(hit & (which == j))
            out[k][rows] = rng.choice(base[k].to_numpy(), rows.size)
    else:
        for k in keys:
            rows = np.flatnonzero(later & (rng.random(n_rows) < 0.3))
            out[k][rows] = rng.choice(base[k].to_numpy(), rows.size)
    df = pd.DataFrame(out)
    df["sampling_weight"] = base["sampling_weight"].to_numpy()[idx]
    df["ori_hid"] = base["ori_hid"].to_numpy()[idx] + copy.astype(np.int64) * 10_000
    return df
