"""The attacks' components against anonymeter 1.1.0, seed for seed, on its own example data;
regenerates tests/measures/attacks/anonymeter_golden.json.

For each attack and mode (univariate and multivariate singling out, linkability, inference on
two secrets) and seeds 0-4: the attack, baseline and control counts, the control-size
correction, the risk and its interval, from anonymeter in its own environment (bench/envs)
and from riskcore on the same tables, printed side by side with the means over seeds.

Run: ``python -m bench.attack_reference`` (add ``--keep`` to compare with the stored golden file
without running the peer again).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from bench.common import OUT, ROOT, SHARED, peer_python, print_table, run_peer
from tests.measures.attacks.reference_runs import KINDS, SEEDS, ours

GOLDEN = ROOT / "tests/measures/attacks/anonymeter_golden.json"


def peer_components() -> dict:
    py = peer_python("anonymeter", ["anonymeter==1.1.0"])
    d = SHARED / "datasets/anonymeter"
    out = {}
    for kind in KINDS:
        got = run_peer(py, "anonymeter_components.py", [str(d), kind, ",".join(map(str, SEEDS))],
                       timeout=3600)
        if "runs" not in got:
            raise SystemExit(f"anonymeter {kind}: {got}")
        out[kind] = got["runs"]
    return out


def main() -> None:
    if "--keep" in sys.argv:
        golden = json.loads(GOLDEN.read_text())
    else:
        golden = {"anonymeter": "1.1.0", "data": "shared/datasets/anonymeter (adults, CTGAN, "
                  "control)", "runs": peer_components()}
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    rows = []
    for kind in KINDS:
        ref = golden["runs"][kind]
        mine = [ours(kind, seed) for seed in SEEDS]
        for r, m in zip(ref, mine):
            rows.append([kind, str(r["seed"]),
                         f"{m['n_success']} / {r['n_success']}",
                         f"{m['n_baseline']} / {r['n_baseline']}",
                         f"{m['raw_control']:.0f} / {r['raw_control']:.0f}",
                         "-" if r["correction"] is None else
                         f"{m['correction']:.4f} / {r['correction']:.4f}",
                         f"{m['risk']:.4f} / {r['risk']:.4f}"])
        rows.append([kind, "mean", "", "", "", "",
                     f"{np.mean([m['risk'] for m in mine]):.4f} / "
                     f"{np.mean([r['risk'] for r in ref]):.4f}"])
    text = print_table("attack components, riskcore / anonymeter 1.1.0 (adults, seeds 0-4)",
                       ["attack", "seed", "attack n", "baseline n", "control n (raw)",
                        "correction", "risk"], rows)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "attack_reference.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
