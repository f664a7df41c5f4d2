"""riskcore's side of the seed-for-seed comparison with anonymeter 1.1.0: the same
attacks, parameters and data as bench/peers/anonymeter_components.py, as components.

Shared by tests/measures/attacks/test_anonymeter_golden.py and bench/attack_reference.py,
which regenerates the golden file from the peer.
"""

from __future__ import annotations

import functools
from typing import Any

import pandas as pd

from riskcore.measures.attacks.common import encode_attack_tables
from riskcore.measures.attacks.inference import inference
from riskcore.measures.attacks.linkability import linkability
from riskcore.measures.attacks.singling_out import singling_out
from tests.conftest import reference_dir

KINDS = ("so-uni", "so-multi", "link", "inference-income", "inference-marital")
SEEDS = (0, 1, 2, 3, 4)
AUX = (["type_employer", "education", "hr_per_week", "capital_loss", "capital_gain"],
       ["race", "sex", "fnlwgt", "age", "country"])


@functools.cache
def adults() -> tuple[dict[str, Any], list[str]]:
    d = reference_dir() / "datasets/anonymeter"
    ori = pd.read_csv(d / "adults_train_reconstructed.csv.gz")
    syn = pd.read_csv(d / "adults_syn_ctgan.csv.gz")
    ctl = pd.read_csv(d / "adults_control.csv.gz")
    return encode_attack_tables(ori, syn, ctl), list(ori.columns)


def ours(kind: str, seed: int) -> dict[str, Any]:
    """One run's components, named as the peer script names them."""
    enc, cols = adults()
    o, r, c = enc["original"], enc["released"], enc["control"]
    if kind.startswith("so"):
        res = singling_out(o, r, c, columns=cols, n_attacks=500, n_cols=3, seed=seed,
                           mode="univariate" if kind == "so-uni" else "multivariate")
    elif kind == "link":
        res = linkability(o, r, c, aux_a=AUX[0], aux_b=AUX[1], n_attacks=2000, n_neighbors=10,
                          seed=seed)
    else:
        secret = kind.split("-", 1)[1]
        res = inference(o, r, c, secret=secret, aux=[x for x in cols if x != secret],
                        n_attacks=1000, seed=seed)
    f, d = res.figures, res.details
    return {"seed": seed, "n_attacks": f["n_attacks"], "n_success": f["n_attack"],
            "n_baseline": f["n_baseline"], "n_control": f["n_control"],
            "raw_control": d.get("n_control_raw", f["n_control"]),
            "correction": d.get("control_size_correction"),
            "risk": f["risk"], "risk_ci": [f["risk_ci_low"], f["risk_ci_high"]]}
