"""Run inside pyCANON's own environment: time k, l, t on a Parquet file, print JSON."""

import json
import sys
import time

import pandas as pd
from pycanon import anonymity

path, qis, sa = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
which = sys.argv[4].split(",") if len(sys.argv) > 4 else ["k", "l", "t"]
df = pd.read_parquet(path).reset_index(drop=True)
out = {}
for name, fn in (("k", lambda: anonymity.k_anonymity(df, qis)),
                 ("l", lambda: anonymity.l_diversity(df, qis, sa)),
                 ("t", lambda: anonymity.t_closeness(df, qis, sa))):
    if name not in which:
        continue
    t0 = time.perf_counter()
    value = fn()
    out[name] = {"seconds": time.perf_counter() - t0, "value": float(value)}
print(json.dumps(out))
