"""Peer run: the `suda` package (PyPI 0.2.2) on a Parquet file; prints one JSON line.

Usage: suda_run.py DATA.parquet COLS MAX_MSU OUT_SCORES.npy
"""

import json
import sys
import time

import numpy as np
import pandas as pd
from suda import suda

path, cols, max_msu, out = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
df = pd.read_parquet(path, columns=cols)
t0 = time.perf_counter()
res = suda(df, max_msu=max_msu, columns=cols)
seconds = time.perf_counter() - t0
scores = res["suda"].sort_index().to_numpy(dtype=float)
np.save(out, scores)
print(json.dumps({"seconds": seconds, "score_sum": float(scores.sum()),
                  "records_scored": int((scores > 0).sum())}))
