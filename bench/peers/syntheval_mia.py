"""Peer run: SynthEval's membership inference attack (``mia``: a LightGBM classifier trained on
synthetic vs holdout rows, tested on real vs holdout rows) on the same files riskgate reads;
prints one JSON line.

Usage: syntheval_mia.py DATA_DIR ITERATIONS
SynthEval reports precision, recall and macro F1 of the hard predictions; the same classifiers'
probabilities are kept here to give the attack's AUC too (its own procedure, scored by AUC).
"""

import json
import sys
import time

import lightgbm
import numpy as np
import pandas as pd
import syntheval.metrics.privacy.metric_MIA_classification as mia
from sklearn.metrics import roc_auc_score

d, iters = sys.argv[1], int(sys.argv[2])
np.random.seed(0)
ori = pd.read_parquet(f"{d}/original.parquet")
ctl = pd.read_parquet(f"{d}/control.parquet")
rel = pd.read_parquet(f"{d}/released.parquet")
cat = [c for c in ori.columns if not pd.api.types.is_numeric_dtype(ori[c])]
num = [c for c in ori.columns if c not in cat]
seen: list = []


class Recording(lightgbm.LGBMClassifier):
    def predict(self, X, *a, **k):
        seen.append(self.predict_proba(X)[:, 1])
        return super().predict(X, *a, **k)


truth: list = []
_precision = mia.precision_score


def recording_precision(y_true, y_pred, **k):
    truth.append(np.asarray(y_true))
    return _precision(y_true, y_pred, **k)


mia.LGBMClassifier = Recording
mia.precision_score = recording_precision
t0 = time.process_time()
metric = mia.MIAClassifier(ori, rel, ctl, cat_cols=cat, num_cols=num, do_preprocessing=False)
res = metric.evaluate(num_eval_iter=iters)
seconds = time.process_time() - t0
aucs = [roc_auc_score(t, s) for t, s in zip(truth, seen)]
print(json.dumps({"f1": res.get("MIA macro F1"), "precision": res.get("MIA precision"),
                  "recall": res.get("MIA recall"), "auc": float(np.mean(aucs)),
                  "iterations": iters, "seconds": seconds}, default=float))
