"""Copies and closeness: riskgate's ``copies`` against SDMetrics' DCR metrics (own
environment), same data, same run, one core. CPU seconds; ratio = SDMetrics /
riskgate.

Data: the example generator's census (7 columns, mixed types); original and control are two
halves of one population, the release a fresh draw from the same generator with 15 % of its
rows copied from the original. riskgate compares every released row with every original and
control row at 10,000 rows, as SDMetrics does (equal work, comparable figures: the holdout share
against SDMetrics' share of synthetic rows closer to the training data, and the median DCR). At
100,000 riskgate compares 5,000 sampled released rows with every original and control row;
SDMetrics' ``num_rows_subsample`` samples 5,000 rows of *every* table, so it does less work and
its copies' sources are mostly sampled away (its share reads about 1/2): not equal figures.
The exact share against the control is the chance level of exact matches (the census has few
columns, so it grows with the table). At 1M rows riskgate runs its defaults (5,000 released rows
against 20,000 original and control rows, seeded) and SDMetrics is not run (hours).
"""

from __future__ import annotations

import sys
import time

from bench.common import OUT, peer_python, pin_one_core, print_table, run_peer

COLS = ["region", "age", "sex", "education", "occupation", "income", "diagnosis"]
SIZES = (10_000, 100_000, 1_000_000)
ALL_PAIRS = 10_000  # above: 5,000 released rows sampled, by both tools
PEER_MAX = 100_000  # SDMetrics beyond this takes hours on one core


def make(n: int, folder) -> None:
    from riskcore.examples import census_population

    folder.mkdir(parents=True, exist_ok=True)
    pop = census_population(2 * n, seed=5)[COLS]
    fresh = census_population(n, seed=77)[COLS]
    k = int(0.15 * n)
    fresh.iloc[:k] = pop.iloc[:n].sample(k, random_state=3).to_numpy()
    pop.iloc[:n].reset_index(drop=True).to_parquet(folder / "original.parquet")
    pop.iloc[n:].reset_index(drop=True).to_parquet(folder / "control.parquet")
    fresh.to_parquet(folder / "released.parquet")


def main() -> None:
    import pandas as pd

    from riskcore.measures.attacks.common import encode_attack_tables
    from riskcore.measures.copies import copies

    pin_one_core()
    sizes = [int(a) for a in sys.argv[1:]] or list(SIZES)
    py = peer_python("sdmetrics", ["sdmetrics==0.21.0", "pyarrow"])
    rows = []
    for n in sizes:
        folder = OUT / "copies-data" / str(n)
        if not (folder / "released.parquet").exists():
            make(n, folder)
        ori, rel, ctl = (pd.read_parquet(folder / f"{t}.parquet")
                         for t in ("original", "released", "control"))
        t0 = time.process_time()
        enc = encode_attack_tables(ori, rel, ctl, COLS)
        size = ({"sample_size": n, "reference_size": n} if n <= ALL_PAIRS else
                {"sample_size": 5_000, "reference_size": n} if n <= PEER_MAX else {})
        res = copies(enc["original"], enc["released"], enc["control"], columns=COLS, seed=0,
                     **size)
        ours = time.process_time() - t0
        f = res.figures
        sub = [] if n <= ALL_PAIRS else ["5000"]
        peer = (run_peer(py, "sdmetrics_run.py", [str(folder), *sub], timeout=7200)
                if n <= PEER_MAX else {"skipped": f"over {PEER_MAX:,} rows"})
        ts = peer.get("seconds")
        closer = ((peer.get("overfitting") or {}).get("synthetic_data_percentages") or {})
        share_peer = next(iter(closer.values()), float("nan")) if closer else float("nan")
        med_peer = ((peer.get("baseline") or {}).get("median_DCR_to_real_data") or {}).get(
            "synthetic_data", float("nan"))
        rows.append([f"{n:,}", f"{ours:.1f}", f"{ts:.1f}" if ts else "not run",
                     f"{ts / ours:.0f}x" if ts else "n/a",
                     f"{f['holdout_share']:.4f} / {share_peer:.4f}",
                     f"{f['dcr_original_median']:.4f} / {med_peer:.4f}",
                     f"{f['exact_share']:.4f} / {f['exact_share_control']:.4f}"])
    text = print_table(
        "copies: riskgate vs SDMetrics 0.21 DCR metrics (one core, CPU seconds)",
        ["rows", "riskgate s", "SDMetrics s", "ratio", "holdout share ours / SDMetrics",
         "median DCR ours / SDMetrics", "exact share original / control"], rows)
    (OUT / "copies.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
