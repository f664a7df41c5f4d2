"""SUDA2 and measure_risk at scale, with the `suda` package (PyPI, own environment).

Data (bench/sdcdata.py): sdcMicro's testdata replicated to 10k, 100k and 1M rows, ``easy``
(7 keys, 5% of the rows of each later copy get one key redrawn) and ``hard`` (9 keys, each redrawn
with probability 0.3). Everything on one core. The targets are sdcMicro's C++ user-CPU times on
this kind of machine: SUDA2 easy 1M 1.47 s, hard 1M 6.47 s; measure_risk with households 1M
3.3 s. The `suda` package computes a different score (every unique subset up to ``max_msu``,
not only the minimal ones): the table reports its time and how often it disagrees with SUDA2.
"""

from __future__ import annotations

import argparse
import json
import tracemalloc

import numpy as np
import pandas as pd

from bench.common import OUT, REFERENCE, peer_python, pin_one_core, print_table, run_peer, timed
from bench.sdcdata import KEYS7, KEYS9, scaled_testdata
from riskcore import Roles, encode_table, frequencies
from riskcore.measures.sdc import sdc_risk
from riskcore.measures.suda import suda2

TARGETS = {("suda", "easy"): 1.47, ("suda", "hard"): 6.47, ("risk", "easy"): 3.3}


def peak_mb(fn, *args, **kwargs) -> float:
    tracemalloc.start()
    fn(*args, **kwargs)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def measure_risk(table):
    freq = frequencies(table)
    return sdc_risk(freq, household=table.column("ori_hid").codes, household_column="ori_hid",
                    weights=table.weights())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--peer-timeout", type=float, default=180.0)
    ap.add_argument("--peer-max-rows", type=int, default=100_000,
                    help="largest table given to the suda package (it concatenates one copy "
                         "of the table per key subset: 1M rows x 127 subsets exhausts memory)")
    args = ap.parse_args()
    pin_one_core()
    OUT.mkdir(parents=True, exist_ok=True)
    base = pd.read_csv(REFERENCE / "datasets/sdcmicro/testdata.csv")
    py = peer_python("suda", ["suda==0.2.2", "pandas==2.3.3", "numpy==2.0.2", "pyarrow"])
    rows, record = [], []
    for variant, keys in (("easy", KEYS7), ("hard", KEYS9)):
        for n in [int(s) for s in args.sizes.split(",")]:
            df = scaled_testdata(base, n, variant, seed=n)
            table = encode_table(df, Roles(tuple(keys), weight="sampling_weight",
                                           household="ori_hid"))
            codes = table.codes(keys)
            t_suda, s = timed(suda2, codes, keys, repeat=3)
            mem_suda = peak_mb(suda2, codes, keys)
            t_enc, _ = timed(encode_table, df, Roles(tuple(keys), weight="sampling_weight",
                                                     household="ori_hid"))
            peer_txt, ratio_txt, disagree = "-", "-", "-"
            if n <= args.peer_max_rows:
                path = OUT / f"sdc_{variant}_{n}.parquet"
                df.to_parquet(path, index=False)
                scores_path = OUT / f"sdc_{variant}_{n}_suda_pkg.npy"
                peer = run_peer(py, "suda_run.py",
                                [str(path), ",".join(keys), str(len(keys)), str(scores_path)],
                                timeout=args.peer_timeout)
                if "seconds" in peer:
                    theirs = np.load(scores_path)
                    peer_txt = f"{peer['seconds']:.2f}"
                    ratio_txt = f"{peer['seconds'] / t_suda:.0f}x"
                    flagged = (theirs > 0) != (s.score > 0)
                    differ = ~np.isclose(theirs, s.score)
                    disagree = (f"{differ.mean():.1%} of scores differ; flagged "
                                f"{int((s.score > 0).sum())} / {int((theirs > 0).sum())}"
                                f"{'' if not flagged.any() else ' (sets differ)'}")
                else:
                    peer_txt = "timeout" if "timeout" in peer else "error"
                record.append({"variant": variant, "n": n, "peer": peer})
            target = TARGETS.get(("suda", variant)) if n == 1_000_000 else None
            rows.append([variant, f"{n:,}", f"SUDA2 ({len(keys)} keys)", f"{t_suda:.3f}",
                         f"{mem_suda:.0f}",
                         f"{target} s: {target / t_suda:.1f}x" if target else "-",
                         peer_txt, ratio_txt, disagree])
            if variant == "easy":
                t_risk, res = timed(measure_risk, table, repeat=3)
                mem_risk = peak_mb(measure_risk, table)
                target = TARGETS[("risk", "easy")] if n == 1_000_000 else None
                rows.append([variant, f"{n:,}", "measure_risk + household", f"{t_risk:.3f}",
                             f"{mem_risk:.0f}",
                             f"{target} s: {target / t_risk:.1f}x" if target else "-",
                             "-", "-", f"ER {res.figures['ER']:.1f}"])
            rows.append([variant, f"{n:,}", "(encoding, once per run)", f"{t_enc:.3f}", "-",
                         "-", "-", "-", f"{s.U:,} full-key uniques"])
            record.append({"variant": variant, "n": n, "suda_s": t_suda, "suda_peak_mb": mem_suda,
                           "full_key_uniques": s.U})
    text = print_table(
        "SUDA2 / measure_risk: riskcore vs sdcMicro's C++ times and the suda package 0.2.2 "
        "(one core; seconds; peak MB of riskcore's allocations)",
        ["data", "rows", "measure", "riskcore s", "peak MB", "sdcMicro target: ratio",
         "suda pkg s", "ratio", "agreement"], rows)
    (OUT / "sdc.txt").write_text(text + "\n")
    (OUT / "sdc.json").write_text(json.dumps(record, indent=2, default=str))


if __name__ == "__main__":
    main()
