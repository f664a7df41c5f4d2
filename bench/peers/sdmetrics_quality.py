"""Peer run: SDMetrics' QualityReport on the same files riskgate reads; prints one JSON line.

Usage: sdmetrics_quality.py DATA_DIR  (original.parquet and released.parquet there)
Per column its shape score, per pair its trend score, the two property means, CPU seconds.
"""

import json
import sys
import time

import pandas as pd
from sdmetrics.reports.single_table import QualityReport

d = sys.argv[1]
ori = pd.read_parquet(f"{d}/original.parquet")
rel = pd.read_parquet(f"{d}/released.parquet")
metadata = {"columns": {c: {"sdtype": "numerical" if pd.api.types.is_numeric_dtype(ori[c])
                            else "categorical"} for c in ori.columns}}
t0 = time.process_time()
report = QualityReport()
report.generate(ori, rel, metadata, verbose=False)
seconds = time.process_time() - t0
shapes = report.get_details("Column Shapes")
pairs = report.get_details("Column Pair Trends")
props = report.get_properties().set_index("Property")["Score"]
print(json.dumps({
    "shapes": {r["Column"]: r["Score"] for _, r in shapes.iterrows()},
    "pairs": {f"{r['Column 1']}|{r['Column 2']}": r["Score"] for _, r in pairs.iterrows()},
    "column_shapes": props["Column Shapes"], "column_pair_trends": props["Column Pair Trends"],
    "seconds": seconds}, default=float))
