"""Attack-based risk: riskcore against anonymeter 1.1.0 (own environment), same data and
parameters, same run, one core. CPU seconds; the ratio is anonymeter / riskcore.

Runs: univariate and multivariate singling out (500 attacks, n_cols 3), linkability (2000
attacks, k 10, the reference split), inference (1000 attacks; income, occupation, marital).
"""

from __future__ import annotations

import time

import pandas as pd

from bench.common import OUT, REFERENCE, peer_python, pin_one_core, print_table, run_peer
from riskcore.measures.attacks.common import encode_attack_tables
from riskcore.measures.attacks.inference import inference
from riskcore.measures.attacks.linkability import linkability
from riskcore.measures.attacks.singling_out import singling_out

AUX = (["type_employer", "education", "hr_per_week", "capital_loss", "capital_gain"],
       ["race", "sex", "fnlwgt", "age", "country"])


def main() -> None:
    import scipy.optimize  # noqa: F401  (the peer imports its dependencies before its clock too)

    pin_one_core()
    OUT.mkdir(parents=True, exist_ok=True)
    d = REFERENCE / "datasets/anonymeter"
    ori = pd.read_csv(d / "adults_train_reconstructed.csv.gz")
    syn = pd.read_csv(d / "adults_syn_ctgan.csv.gz")
    ctl = pd.read_csv(d / "adults_control.csv.gz")
    cols = list(ori.columns)
    py = peer_python("anonymeter", ["anonymeter==1.1.0"])
    ours = {
        "so-uni": lambda e: singling_out(e["original"], e["released"], e["control"],
                                         columns=cols, mode="univariate", seed=0),
        "so-multi": lambda e: singling_out(e["original"], e["released"], e["control"],
                                           columns=cols, n_cols=3, seed=0),
        "link": lambda e: linkability(e["original"], e["released"], e["control"],
                                      aux_a=AUX[0], aux_b=AUX[1], n_attacks=2000,
                                      n_neighbors=10, seed=0),
        "inference": lambda e: max(
            inference(e["original"], e["released"], e["control"], secret=s,
                      aux=[c for c in cols if c != s], n_attacks=1000, seed=0).figures["risk"]
            for s in ("income", "occupation", "marital")),
    }
    names = {"so-uni": "singling out, univariate", "so-multi": "singling out, multivariate",
             "link": "linkability k=10", "inference": "inference x3 secrets"}
    rows = []
    for kind, fn in ours.items():
        t0 = time.process_time()
        enc = encode_attack_tables(ori, syn, ctl)
        res = fn(enc)
        t = time.process_time() - t0
        risk = res if isinstance(res, float) else res.figures["risk"]
        peer = run_peer(py, "anonymeter_run.py", [str(d), kind], timeout=1800)
        ts = peer.get("seconds")
        rows.append([names[kind], f"{t:.2f}", f"{ts:.1f}" if ts else str(peer)[:40],
                     f"{ts / t:.0f}x" if ts else "n/a",
                     f"{risk:.4f} / {peer.get('risk', float('nan')):.4f}"])
    text = print_table("attacks: riskcore vs anonymeter 1.1.0 (adults, one core, CPU seconds)",
                       ["evaluator", "riskcore s", "anonymeter s", "ratio",
                        "risk ours / anonymeter"], rows)
    (OUT / "attacks.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
