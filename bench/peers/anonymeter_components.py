"""Peer run: the components of one anonymeter 1.1.0 attack per seed, on the adults data.

Usage: anonymeter_components.py DATA_DIR KIND SEEDS
KIND: so-uni, so-multi, link, inference-SECRET; SEEDS: comma-separated.
Prints one JSON object: {"kind", "runs": [{seed, n_attacks, n_success, n_baseline, n_control,
raw_control, correction, risk, risk_ci}]}. Singling out takes the seed; linkability and inference
draw their targets from numpy's global generator (seeded here) and their baseline from an
unseeded generator, so only their attack and control counts are reproducible.
"""

import json
import sys

import numpy as np
import pandas as pd
from anonymeter.evaluators import InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator
from anonymeter.evaluators import singling_out_evaluator as soe

AUX = (["type_employer", "education", "hr_per_week", "capital_loss", "capital_gain"],
       ["race", "sex", "fnlwgt", "age", "country"])

d, kind, seeds = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split(",")]
ori = pd.read_csv(f"{d}/adults_train_reconstructed.csv")
syn = pd.read_csv(f"{d}/adults_syn_ctgan.csv")
ctl = pd.read_csv(f"{d}/adults_control.csv")

raw: dict = {}
_fit = soe.fit_correction_term


def _spy(df, queries):
    """Keep the control's raw count next to the fitted correction (not otherwise exposed)."""
    raw["control"] = len(soe._evaluate_queries_and_return_successful(df=df, queries=queries))
    return _fit(df, queries)


soe.fit_correction_term = _spy
runs = []
for seed in seeds:
    raw.clear()
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
        ev = InferenceEvaluator(ori=ori, syn=syn, control=ctl, secret=secret, n_attacks=1000,
                                aux_cols=[c for c in ori.columns if c != secret])
        ev.evaluate(n_jobs=1)
    r = ev.results()
    risk = ev.risk()
    n_control = float(r.n_control)
    runs.append({"seed": seed, "n_attacks": int(r.n_attacks_ori), "n_success": int(r.n_success),
                 "n_baseline": int(r.n_baseline), "n_control": n_control,
                 "raw_control": raw.get("control", n_control),
                 "correction": n_control / raw["control"] if raw.get("control") else None,
                 "risk": float(risk.value), "risk_ci": [float(x) for x in risk.ci]})
print(json.dumps({"kind": kind, "runs": runs}))
