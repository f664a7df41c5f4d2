"""The ALC against anonymity_loss_coefficient 1.0.32 on two more of the paper's data sets;
regenerates tests/measures/alc/alc_golden.json.

Data: the paper's BankChurners (10,127 rows, numbers and categories) and child (20,000 rows, a
Bayesian-network sample, all categories), each released with 20 % swapping
(riskcore.measures.alc.swap.swap_frame, as reference/alc/README.md does for adult). Per
scenario the package's ALC, baseline and attack PRC, predictions and halt code (numpy and
random seeded with 0: BrmAttack exposes no seed), beside riskcore's with seed 0.

Run: ``python -m bench.alc_reference`` (``--keep`` compares with the stored file only).
"""

from __future__ import annotations

import json
import sys

import pandas as pd

from bench.common import OUT, REFERENCE, ROOT, peer_python, print_table, run_peer
from riskcore.measures.alc import ALCConfig, from_frames, run_alc
from riskcore.measures.alc.swap import swap_frame

GOLDEN = ROOT / "tests/measures/alc/alc_golden.json"
SCENARIOS = {
    "churn_attrition_from_all": ("BankChurnersNoId", "Attrition_Flag", None),
    "churn_income_from_4demo": ("BankChurnersNoId", "Income_Category",
                                ["Customer_Age", "Gender", "Education_Level",
                                 "Marital_Status"]),
    "child_disease_from_all": ("child", "Disease", None),
}


def scenario_data(name: str) -> tuple[pd.DataFrame, pd.DataFrame, str, list[str]]:
    data, secret, known = SCENARIOS[name]
    ori = pd.read_parquet(REFERENCE / f"datasets/alc-paper/original/{data}.parquet")
    known = known or [c for c in ori.columns if c != secret]
    return ori, swap_frame(ori, 0.1), secret, known


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    if "--keep" in sys.argv:
        golden = json.loads(GOLDEN.read_text())
    else:
        py = peer_python("alc", ["anonymity_loss_coefficient==1.0.32", "pandas==2.3.3"])
        golden = {"package": "anonymity_loss_coefficient 1.0.32", "release": "swap 20 %",
                  "runs": {}}
        for name in SCENARIOS:
            ori, rel, secret, known = scenario_data(name)
            paths = []
            for which, frame in (("original", ori), ("released", rel)):
                path = OUT / f"{name}_{which}.parquet"
                frame.to_parquet(path, index=False)
                paths.append(str(path))
            peer = run_peer(py, "alc_run.py", [*paths, secret, ",".join(known), "0",
                                               str(OUT / "alc_peer")], timeout=3600)
            if "alc" not in peer:
                raise SystemExit(f"package {name}: {peer}")
            golden["runs"][name] = {k: peer[k] for k in ("alc", "base_prc", "attack_prc", "n",
                                                         "halt", "model")}
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    rows = []
    for name, ref in golden["runs"].items():
        ori, rel, secret, known = scenario_data(name)
        r = run_alc(from_frames(ori, rel), secret, known, ALCConfig(seed=0))
        rows.append([name, f"{r.alc} / {ref['alc']}",
                     f"{r.base.prc if r.base else None} / {ref['base_prc']}",
                     f"{r.attack.prc if r.attack else None} / {ref['attack_prc']}",
                     f"{r.n_attacks} / {ref['n']}", f"{r.band}"])
    text = print_table("ALC: riskcore / anonymity_loss_coefficient 1.0.32 (swap 20 %, seed 0)",
                       ["scenario", "ALC", "base PRC", "attack PRC", "predictions",
                        "riskcore band"], rows)
    (OUT / "alc_reference.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
