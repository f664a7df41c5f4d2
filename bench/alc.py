"""ALC: riskcore against anonymity_loss_coefficient 1.0.32 (own environment, pandas
2.3.3), same data and scenarios, same run, one core, CPU seconds.

Data: the ALC paper's adult (30,000 rows), released with 20 % swapping (reference/alc/README.md:
per column, int(0.1 n) disjoint random row pairs swap, default_rng(42)). Scenarios A-D of the
reference runs. Per attack: time, predictions, time per prediction, ALC, baseline PRC (the
baseline's strength is what keeps the ALC honest) and the halting reason, for both.

Like the package's, riskcore's libraries are loaded before the clock starts: the peer script
imports anonymity_loss_coefficient (scikit-learn with it) before it times the attack, and this
bench imports scikit-learn's models and loads riskcore's compiled best-row-match kernel (numba,
compiled once into its disk cache) on two targets before it times anything.

Busy: riskcore runs each scenario again on the machine's cores beside two processes
that spin on them, with the thread budget a gate gives a family running alone (wall seconds
then, since the spinners take CPU from it), against the package's idle one-core time: a
conservative ratio (the package would be slower beside them too).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from bench.common import OUT, REFERENCE, peer_python, pin_one_core, print_table, run_peer
from riskcore.measures.alc import ALCConfig, BestRowMatch, from_frames, run_alc
from riskcore.measures.alc.inputs import ALCData
from riskcore.measures.alc.swap import swap_frame
from riskcore.threads import family_threads, thread_budget

ALL_CORES = os.sched_getaffinity(0)


def _load_libraries(data: ALCData) -> None:
    """What the peer's import does for it: scikit-learn's models imported, and the compiled
    best-row-match kernel loaded (compiled on the first run after a change)."""
    import sklearn.ensemble  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    import sklearn.pipeline  # noqa: F401
    import sklearn.preprocessing  # noqa: F401

    BestRowMatch(data, "label", ["age", "sex"]).predict(np.arange(2))


def main() -> None:
    pin_one_core()
    OUT.mkdir(parents=True, exist_ok=True)
    ori_path = REFERENCE / "datasets/alc-paper/original/adult.parquet"
    ori = pd.read_parquet(ori_path)
    rel = swap_frame(ori, 0.1)
    rel_path = OUT / "adult_swap20.parquet"
    rel.to_parquet(rel_path, index=False)
    cols = list(ori.columns)
    scenarios = {
        "A label / 8 QIs": ("label", ["age", "workclass", "education", "marital-status",
                                      "occupation", "race", "sex", "hours-per-week"]),
        "B occupation / all": ("occupation", [c for c in cols if c != "occupation"]),
        "C marital / 5 demo": ("marital-status", ["age", "sex", "race", "native-country",
                                                  "education"]),
        "D hours / all": ("hours-per-week", [c for c in cols if c != "hours-per-week"]),
    }
    py = peer_python("alc", ["anonymity_loss_coefficient==1.0.32", "pandas==2.3.3"])
    t0 = time.process_time()
    data = from_frames(ori, rel)
    t_encode = time.process_time() - t0
    _load_libraries(data)
    rows, total_ours = [], t_encode
    for name, (secret, known) in scenarios.items():
        t0 = time.process_time()
        r = run_alc(data, secret, known, ALCConfig(seed=0))
        t = time.process_time() - t0
        total_ours += t
        # busy: the machine's every core, two spinners on them, riskcore with the budget a
        # gate gives a family running alone (it was pinned to the spinners' one core before)
        os.sched_setaffinity(0, ALL_CORES)
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(2)]
        try:
            w0 = time.perf_counter()
            with thread_budget(family_threads(1)):
                busy = run_alc(data, secret, known, ALCConfig(seed=0))
            t_busy = time.perf_counter() - w0
        finally:
            for sp in spinners:
                sp.kill()
                sp.wait()
            pin_one_core()
        assert busy.alc == r.alc  # the same seed, the same figures, busy or not
        peer = run_peer(py, "alc_run.py", [str(ori_path), str(rel_path), secret, ",".join(known),
                                           "0", str(OUT / "alc_peer")], timeout=1800)
        ts, n_peer = peer.get("seconds"), peer.get("n")
        per_ours = t / max(r.n_attacks, 1)
        per_peer = ts / n_peer if ts and n_peer else None
        rows.append([
            name, f"{t:.2f}", f"{ts:.1f}" if ts else str(peer)[:30],
            f"{ts / t:.0f}x" if ts else "n/a",
            f"{r.n_attacks} / {n_peer}",
            f"{per_ours * 1000:.1f} / {per_peer * 1000:.0f}" if per_peer else "n/a",
            f"{per_peer / per_ours:.0f}x" if per_peer else "n/a",
            f"{t_busy:.2f}",
            f"{per_peer / (t_busy / max(busy.n_attacks, 1)):.0f}x" if per_peer else "n/a",
            f"{r.alc} / {peer.get('alc')}",
            f"{r.base.prc if r.base else None} / {peer.get('base_prc')}",
            f"{r.baseline.model} / {peer.get('model')}",
            f"{r.halt_reason} / {peer.get('halt')}"])
    text = print_table(
        "ALC: riskcore vs anonymity_loss_coefficient 1.0.32 (adult 30k, swap 20 %, one core, "
        "CPU s)",
        ["scenario", "riskcore s", "package s", "ratio", "predictions ours / pkg",
         "ms per prediction", "ratio per prediction", "riskcore busy s (wall)",
         "ratio per prediction, busy", "ALC ours / pkg",
         "base PRC ours / pkg", "baseline model", "halt"], rows)
    text += f"\nriskcore, whole 4-scenario run including encoding: {total_ours:.1f} s"
    print(text.splitlines()[-1])
    (OUT / "alc.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
