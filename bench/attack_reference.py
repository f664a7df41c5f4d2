"""The attacks against anonymeter 1.1.0's public API, seed for seed, on its own example data;
regenerates tests/measures/attacks/anonymeter_golden.json.

For each attack and mode (univariate and multivariate singling out, linkability, inference on
two secrets) and seeds 0-4, anonymeter runs as its users run it (``Evaluator(...)
.evaluate()``, ``results()``, ``risk()``), in its own environment (bench/envs), several times:
a run of one seed is not reproducible (polars' unordered group_by orders the univariate pool,
unseeded generators draw the linkability baseline), so the repeats' spread is the reference's
own noise. riskcore runs on the same tables; both are printed side by side, with the means.

Run: ``python -m bench.attack_reference [REPEATS]`` (default 4; add ``--keep`` to compare with
the stored golden file without running the peer again).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from bench.common import OUT, REFERENCE, ROOT, peer_python, print_table, run_peer
from tests.measures.attacks.reference_runs import KINDS, SEEDS, ours

GOLDEN = ROOT / "tests/measures/attacks/anonymeter_golden.json"
REPEATS = 4


def peer_runs(repeats: int) -> dict:
    """Per kind, per repeat, per seed: anonymeter's public results."""
    py = peer_python("anonymeter", ["anonymeter==1.1.0"])
    d = REFERENCE / "datasets/anonymeter"
    out = {}
    for kind in KINDS:
        got = run_peer(py, "anonymeter_public.py",
                       [str(d), kind, ",".join(map(str, SEEDS)), str(repeats)], timeout=14400)
        if "repeats" not in got:
            raise SystemExit(f"anonymeter {kind}: {got}")
        out[kind] = got["repeats"]
    return out


def golden_document(runs: dict, repeats: int) -> dict:
    return {"anonymeter": "1.1.0",
            "api": "public: Evaluator(...).evaluate(), results(), risk()",
            "data": "tests/reference/datasets/anonymeter (adults, CTGAN, control)",
            "seeds": list(SEEDS), "repeats": repeats, "runs": runs}


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeats = int(args[0]) if args else REPEATS
    if "--keep" in sys.argv:
        golden = json.loads(GOLDEN.read_text())
    else:
        golden = golden_document(peer_runs(repeats), repeats)
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    rows = []
    for kind in KINDS:
        reps = golden["runs"][kind]
        mine = [ours(kind, seed) for seed in SEEDS]
        for i, m in enumerate(mine):
            theirs = [rep[i]["risk"] for rep in reps]
            rows.append([kind, str(SEEDS[i]), f"{m['n_success']} of {m['n_attacks']}",
                         f"{m['risk']:.4f}",
                         " ".join(f"{r:.4f}" for r in theirs)])
        rep_means = [np.mean([r["risk"] for r in rep]) for rep in reps]
        rows.append([kind, "mean", "", f"{np.mean([m['risk'] for m in mine]):.4f}",
                     f"{np.mean(rep_means):.4f} (repeats {min(rep_means):.4f}-"
                     f"{max(rep_means):.4f})"])
    text = print_table("attacks, riskcore against anonymeter 1.1.0's public API (adults, "
                       f"seeds 0-4, {golden['repeats']} repeats each)",
                       ["attack", "seed", "riskcore successes", "riskcore risk",
                        "anonymeter risk per repeat"], rows)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "attack_reference.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
