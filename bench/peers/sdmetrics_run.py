"""Peer run: SDMetrics' DCR metrics on the same files riskgate reads; prints one JSON line.

Usage: sdmetrics_run.py DATA_DIR [SUBSAMPLE]  (original, released, control .parquet there)
Both metrics compare every released row (or SUBSAMPLE of them) with every original (control) row.
"""

import json
import sys
import time

import pandas as pd
from sdmetrics.single_table import DCRBaselineProtection, DCROverfittingProtection

d = sys.argv[1]
sub = {"num_rows_subsample": int(sys.argv[2])} if len(sys.argv) > 2 else {}
ori = pd.read_parquet(f"{d}/original.parquet")
rel = pd.read_parquet(f"{d}/released.parquet")
ctl = pd.read_parquet(f"{d}/control.parquet")
metadata = {"columns": {c: {"sdtype": "numerical" if pd.api.types.is_numeric_dtype(ori[c])
                            else "categorical"} for c in ori.columns}}
t0 = time.process_time()
over = DCROverfittingProtection.compute_breakdown(
    real_training_data=ori, synthetic_data=rel, real_validation_data=ctl, metadata=metadata,
    **sub)
t_over = time.process_time() - t0
t1 = time.process_time()
base = DCRBaselineProtection.compute_breakdown(real_data=ori, synthetic_data=rel,
                                               metadata=metadata, **sub)
t_base = time.process_time() - t1
print(json.dumps({"overfitting": over, "baseline": base, "seconds_overfitting": t_over,
                  "seconds_baseline": t_base, "seconds": t_over + t_base}, default=float))
