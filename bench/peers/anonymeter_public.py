"""Peer run: anonymeter 1.1.0's public API, as its users run it, on its adults data.

Usage: anonymeter_public.py DATA_DIR KIND SEEDS REPEATS
KIND: so-uni, so-multi, link, inference-SECRET; SEEDS: comma-separated; REPEATS: how many
times each seed is run again (polars' group_by and the unseeded generators make runs of one
seed differ: the spread between repeats is the reference's own noise).
Prints one JSON object: {"kind", "repeats": [[{seed, n_attacks, n_success, n_baseline,
n_control, risk, risk_ci} per seed] per repeat]}. Nothing but ``Evaluator(...).evaluate()``,
``results()`` and ``risk()``.
"""

import json
import sys

import numpy as np
import pandas as pd
from anonymeter.evaluators import InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator

AUX = (["type_employer", "education", "hr_per_week", "capital_loss", "capital_gain"],
       ["race", "sex", "fnlwgt", "age", "country"])

d, kind = sys.argv[1], sys.argv[2]
seeds, repeats = [int(s) for s in sys.argv[3].split(",")], int(sys.argv[4])
ori = pd.read_csv(f"{d}/adults_train_reconstructed.csv.gz")
syn = pd.read_csv(f"{d}/adults_syn_ctgan.csv.gz")
ctl = pd.read_csv(f"{d}/adults_control.csv.gz")

out = []
for _ in range(repeats):
    runs = []
    for seed in seeds:
        np.random.seed(seed)
        if kind.startswith("so"):
            ev = SinglingOutEvaluator(ori=ori, syn=syn, control=ctl, n_attacks=500, n_cols=3,
                                      seed=seed)
            ev.evaluate(mode="univariate" if kind == "so-uni" else "multivariate")
        elif kind == "link":
            ev = LinkabilityEvaluator(ori=ori, syn=syn, control=ctl, n_attacks=2000,
                                      n_neighbors=10, aux_cols=AUX)
            ev.evaluate(n_jobs=1)
        else:
            secret = kind.split("-", 1)[1]
            ev = InferenceEvaluator(ori=ori, syn=syn, control=ctl, secret=secret,
                                    n_attacks=1000,
                                    aux_cols=[c for c in ori.columns if c != secret])
            ev.evaluate(n_jobs=1)
        r = ev.results()
        risk = ev.risk()
        runs.append({"seed": seed, "n_attacks": int(r.n_attacks_ori),
                     "n_success": int(r.n_success), "n_baseline": int(r.n_baseline),
                     "n_control": float(r.n_control), "risk": float(risk.value),
                     "risk_ci": [float(x) for x in risk.ci]})
    out.append(runs)
print(json.dumps({"kind": kind, "repeats": out}))
