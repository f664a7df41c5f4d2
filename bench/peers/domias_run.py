"""Peer run: DOMIAS (van Breugel et al. 2023, the authors' package ``domias``, from which
synthcity's DomiasMIA metrics derive) on the same files riskgate reads; prints one JSON line.

Usage: domias_run.py DATA_DIR TARGETS REFERENCE SEED [--no-bnaf]
Members: TARGETS rows of original.parquet; non-members: TARGETS rows of control.parquet; the
reference set: up to REFERENCE further control rows; the synthetic set: released.parquet (half
to fit the density, half to validate BNAF). Columns: numbers standardized, categories as
standardized integer codes (DOMIAS works on numeric arrays). AUCs of DOMIAS with BNAF and with
KDE densities, and of the GAN-leaks baselines, with CPU seconds.
"""

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from domias.baselines import GAN_leaks, GAN_leaks_cal
from domias.bnaf.density_estimation import compute_log_p_x, density_estimator_trainer
from scipy import stats
from sklearn.metrics import roc_auc_score

# domias 0.0.5 was written for torch 1.x: ReduceLROnPlateau lost ``verbose`` and renamed
# ``is_better``; two shims, nothing of the attack changes
_plateau_init = torch.optim.lr_scheduler.ReduceLROnPlateau.__init__


def _without_verbose(self, *args, verbose=None, **kwargs):
    _plateau_init(self, *args, **kwargs)


torch.optim.lr_scheduler.ReduceLROnPlateau.__init__ = _without_verbose
if not hasattr(torch.optim.lr_scheduler.ReduceLROnPlateau, "is_better"):  # renamed _is_better
    torch.optim.lr_scheduler.ReduceLROnPlateau.is_better = (
        torch.optim.lr_scheduler.ReduceLROnPlateau._is_better)

d, m, ref, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(seed)
torch.set_num_threads(1)
rng = np.random.default_rng(seed)
ori = pd.read_parquet(f"{d}/original.parquet")
ctl = pd.read_parquet(f"{d}/control.parquet")
rel = pd.read_parquet(f"{d}/released.parquet")
both = pd.concat([ori, ctl, rel], ignore_index=True)
cols = []
for c in both.columns:
    v = both[c]
    x = (v.astype(float) if pd.api.types.is_numeric_dtype(v)
         else pd.Series(pd.factorize(v)[0], dtype=float))
    cols.append(((x - x.mean()) / (x.std() or 1.0)).to_numpy())
X = np.column_stack(cols)
o, c, r = X[:len(ori)], X[len(ori):len(ori) + len(ctl)], X[len(ori) + len(ctl):]
m = min(m, len(o), len(c) // 2)
mem = o[rng.choice(len(o), m, replace=False)]
perm = rng.permutation(len(c))
non = c[perm[:m]]
reference = c[perm[m:m + ref]]
synth = r[rng.permutation(len(r))]
fit, val = synth[: len(synth) // 2], synth[len(synth) // 2:]
X_test = np.concatenate([mem, non])
y = np.r_[np.ones(m), np.zeros(m)]
out = {"members": m, "reference": len(reference), "synthetic": len(synth)}

t0 = time.process_time()
p_g = stats.gaussian_kde(synth.T)(X_test.T)
p_r = stats.gaussian_kde(reference.T)(X_test.T)
out["domias_kde_auc"] = roc_auc_score(y, p_g / (p_r + 1e-10))
out["seconds_domias_kde"] = time.process_time() - t0

if "--no-bnaf" not in sys.argv:  # hours on one core beyond 10,000 rows
    t0 = time.process_time()
    with tempfile.TemporaryDirectory() as ws:
        _, model_g = density_estimator_trainer(fit, val[: len(val) // 2], val[len(val) // 2:],
                                               workspace=Path(ws) / "g", device="cpu")
        _, model_r = density_estimator_trainer(reference, workspace=Path(ws) / "r",
                                               device="cpu")
        t = torch.as_tensor(X_test).float()
        lg = compute_log_p_x(model_g, t).detach().numpy()
        lr = compute_log_p_x(model_r, t).detach().numpy()
    out["domias_bnaf_auc"] = roc_auc_score(y, np.exp(lg) / (np.exp(lr) + 1e-10))
    out["seconds_domias_bnaf"] = time.process_time() - t0

t0 = time.process_time()
out["gan_leaks_auc"] = roc_auc_score(y, GAN_leaks(X_test, synth))
out["gan_leaks_cal_auc"] = roc_auc_score(y, GAN_leaks_cal(X_test, synth, reference))
out["seconds_gan_leaks"] = time.process_time() - t0
print(json.dumps(out, default=float))
