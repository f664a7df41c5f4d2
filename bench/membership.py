"""Membership inference: riskgate's ``membership`` family against DOMIAS (the authors'
package, BNAF and KDE densities, and its GAN-leaks baselines) and SynthEval's ``mia`` attack,
each in its own environment, same files, same run, one core. CPU seconds; ratio =
peer / riskgate.

Data (a leaky release): a population of independent columns (age, hours, income, sex,
education, region); original and control are two samples of it, the release a fresh sample with
15 % of its rows replaced by original rows with small noise (age +-1, hours +-1, income +-3 %):
no exact copy, yet members sit near released rows. riskgate runs with the peers' counts (2,000
members and 2,000 non-members, ``n_targets``; its default attacks every row up to 50,000), a
reference of 20,000 control rows at most, the release searched whole. DOMIAS gets the same
counts (its BNAF trains two flows on one core, at 10,000 rows only: 12 CPU minutes there,
hours beyond; its KDE and the GAN-leaks baselines, which are riskgate's distance and
calibrated attacks, at every size).
SynthEval's attack trains a classifier on synthetic vs holdout rows and tests it on real vs
holdout rows, five times; its F1 is its own figure, its AUC the same classifiers' probabilities.
The AUCs measure different attacks on the same data: side by side, not equal.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common import ENVS, OUT, peer_python, pin_one_core, print_table, run_peer

SIZES = (10_000, 100_000, 1_000_000)
SHARE = 0.15
TARGETS = 2_000
REFERENCE = 20_000
BNAF_MAX = 10_000  # DOMIAS's BNAF: 12 CPU minutes at 10,000 rows, hours beyond


def people(n: int, seed: int) -> pd.DataFrame:
    r = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": r.integers(18, 90, n), "hours": r.integers(1, 80, n),
        "income": np.round(r.lognormal(10, 0.6, n), 0),
        "sex": r.choice(["f", "m"], n), "education": r.choice(list("abcdef"), n),
        "region": r.choice([f"r{i}" for i in range(12)], n)})


def make(n: int, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    original, control, synthetic = people(n, 1), people(n, 2), people(n, 3)
    rng = np.random.default_rng(4)
    k = int(SHARE * n)
    near = original.iloc[rng.choice(n, k, replace=False)].copy()
    near["age"] += rng.choice([-1, 1], k)
    near["hours"] += rng.choice([-1, 1], k)
    near["income"] = np.round(near["income"] * (1 + rng.uniform(-0.03, 0.03, k)))
    released = pd.concat([synthetic.iloc[k:], near], ignore_index=True)
    original.to_parquet(folder / "original.parquet")
    control.to_parquet(folder / "control.parquet")
    released.to_parquet(folder / "released.parquet")


def ours(folder: Path, targets: int | None = TARGETS) -> tuple[float, dict]:
    """riskgate's family on the files: CPU seconds and figures, with ``targets`` members and
    non-members each (None: its default, every row up to 50,000)."""
    from riskcore import Roles, encode_tables
    from riskcore.measures import MeasureInputs, run_measure

    frames = {t: pd.read_parquet(folder / f"{t}.parquet")
              for t in ("original", "control", "released")}
    roles = Roles(quasi_identifiers=["age", "sex", "education", "region"],
                  sensitive=["income", "hours"])
    t = encode_tables(frames, roles)
    inputs = MeasureInputs(released=t["released"], original=t["original"],
                           control=t["control"], seed=1)
    params = {} if targets is None else {"n_targets": targets}
    run_measure("membership", inputs, params)  # warm, as the peers (imports and compiled
    # kernels loaded before their clocks start)
    t0 = time.process_time()
    result = run_measure("membership", inputs, params)
    return time.process_time() - t0, {**result.figures,
                                      "strongest": result.details.get("strongest", "")}


def domias_python() -> Path:
    """DOMIAS's environment: torch 2.13.0 (the CPU build on this machine's disk: pip, not uv)
    and domias 0.0.5. synthcity's own DomiasMIA needs torch < 2.3, a CUDA build of several GB
    and some thirty heavy packages; the authors' package is the same attack."""
    import subprocess

    env = ENVS / "domias"
    py = env / "bin" / "python"
    marker = env / ".installed"
    want = "torch==2.13.0 domias==0.0.5 tqdm pyarrow"
    if not marker.exists() or marker.read_text() != want:
        if not py.exists():
            subprocess.run(["python3.11", "-m", "venv", str(env)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "torch==2.13.0"], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "domias==0.0.5", "tqdm",
                        "pyarrow"], check=True)
        marker.write_text(want)
    return py


def main() -> None:
    pin_one_core()
    sizes = [int(a) for a in sys.argv[1:] if a.isdigit()] or list(SIZES)
    syntheval = peer_python("syntheval", ["syntheval==1.7.3", "pyarrow"])
    domias = domias_python()
    rows = []
    for n in sizes:
        folder = OUT / "membership-data" / str(n)
        if not (folder / "released.parquet").exists():
            make(n, folder)
        load = os.getloadavg()[0]
        secs, f = ours(folder)
        every_s, every = ours(folder, None)
        # the peers' answers are kept beside the data (BNAF alone takes 12 CPU minutes):
        # ``--peers-again`` runs them anew
        cache = folder / "peers.json"
        if cache.exists() and "--peers-again" not in sys.argv:
            dm, se = json.loads(cache.read_text())
        else:
            dm = run_peer(domias, "domias_run.py",
                          [str(folder), str(TARGETS), str(REFERENCE), "1",
                           *(["--no-bnaf"] if n > BNAF_MAX else [])], timeout=7200)
            se = run_peer(syntheval, "syntheval_mia.py", [str(folder), "5"], timeout=7200)
            cache.write_text(json.dumps([dm, se]))
        bnaf_s = dm.get("seconds_domias_bnaf")
        kde_s = dm.get("seconds_domias_kde")
        se_s = se.get("seconds")
        rows.append([
            f"{n:,}", f"{secs:.2f}",
            f"{every_s:.2f} (AUC {every['auc']:.3f}, TPR@1% {every['tpr_at_fpr_1pct']:.3f})",
            f"{f['auc']:.3f} ({f['auc_low']:.3f}-{f['auc_high']:.3f}), "
            f"TPR@1% {f['tpr_at_fpr_1pct']:.3f} [{f.get('strongest', '')}]"
            if "auc" in f else str(f)[:40],
            f"density {f.get('density.auc', float('nan')):.3f}, distance "
            f"{f.get('distance.auc', float('nan')):.3f}, calibrated "
            f"{f.get('calibrated.auc', float('nan')):.3f}",
            (f"BNAF {dm['domias_bnaf_auc']:.3f} ({bnaf_s:.0f} s), " if bnaf_s else
             "BNAF not run (hours), ") +
            (f"KDE {dm['domias_kde_auc']:.3f} ({kde_s:.1f} s), GAN-leaks "
             f"{dm['gan_leaks_auc']:.3f} / calibrated {dm['gan_leaks_cal_auc']:.3f} "
             f"({dm['seconds_gan_leaks']:.1f} s)"
             if "domias_kde_auc" in dm else str(dm)[:60]),
            (f"{bnaf_s / secs:.0f}x / " if bnaf_s else "- / ")
            + (f"{kde_s / secs:.1f}x" if kde_s else ""),
            (f"AUC {se['auc']:.3f}, F1 {se['f1']:.3f} ({se_s:.1f} s)"
             if "auc" in se else str(se)[:60]),
            f"{se_s / secs:.1f}x" if se_s else "", f"{load:.2f}"])
    text = print_table(
        "membership vs DOMIAS and SynthEval (CPU s, one core; target: riskgate, every attack, "
        ">= 3x faster than the fastest peer)",
        ["rows", "riskgate s", "riskgate s, its default targets (every row up to 50,000)",
         "riskgate strongest AUC (interval), TPR@1%",
         "riskgate per attack", "DOMIAS (authors' package)", "ratio BNAF / KDE",
         "SynthEval mia", "ratio", "load"], rows)
    (OUT / "membership.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
