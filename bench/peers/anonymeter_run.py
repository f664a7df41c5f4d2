"""Peer run: one anonymeter 1.1.0 evaluator on the adults data; prints one JSON line.

Usage: anonymeter_run.py DATA_DIR KIND  (KIND: so-uni, so-multi, link, inference)
"""

import json
import sys
import time

import pandas as pd
from anonymeter.evaluators import InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator

d, kind = sys.argv[1], sys.argv[2]
ori = pd.read_csv(f"{d}/adults_train_reconstructed.csv.gz")
syn = pd.read_csv(f"{d}/adults_syn_ctgan.csv.gz")
ctl = pd.read_csv(f"{d}/adults_control.csv.gz")
t0 = time.process_time()
out = {}
if kind.startswith("so"):
    ev = SinglingOutEvaluator(ori=ori, syn=syn, control=ctl, n_attacks=500, n_cols=3, seed=0)
    ev.evaluate(mode="univariate" if kind == "so-uni" else "multivariate")
    out["risk"] = ev.risk().value
elif kind == "link":
    ev = LinkabilityEvaluator(ori=ori, syn=syn, control=ctl, n_attacks=2000, n_neighbors=10,
                              aux_cols=(["type_employer", "education", "hr_per_week",
                                         "capital_loss", "capital_gain"],
                                        ["race", "sex", "fnlwgt", "age", "country"]))
    ev.evaluate(n_jobs=1)
    out["risk"] = ev.risk().value
else:
    risks = []
    for secret in ("income", "occupation", "marital"):
        ev = InferenceEvaluator(ori=ori, syn=syn, control=ctl, secret=secret, n_attacks=1000,
                                aux_cols=[c for c in ori.columns if c != secret])
        ev.evaluate(n_jobs=1)
        risks.append(ev.risk().value)
    out["risk"] = max(risks)
out["seconds"] = time.process_time() - t0
print(json.dumps(out))
