"""The scan for undeclared direct identifiers, next to the machine's floor.

A gate scans every published text column (riskcore.gate.identifiers): each distinct value
once, with Arrow's RE2 over all of them and Python's validators only on the candidates. Its
floor on this machine, measured in the same run on the same table: pyarrow reads the columns
from Parquet and computes each column's distinct values (the least any scan of every value
must do). Cases at 1M rows, 10 text columns: a survey release of codes and labels; the same
with one column of 1M distinct e-mail addresses (the leak the scan exists for, the most
candidates to validate); and one column of 1M distinct free-text notes with no identifier.
Target: the scan within 1 s beside the other checks in the realistic case, and under 5x the
floor when every value is a candidate.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import OUT, print_table

N = 1_000_000
REPEATS = 3


def _codes(rng: np.random.Generator, n: int, k: int, prefix: str) -> np.ndarray:
    return np.array([f"{prefix}{i:03d}" for i in range(k)], dtype=object)[rng.integers(0, k, n)]


def table(case: str, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {f"code_{j}": _codes(rng, N, 10 ** (1 + j % 3), f"c{j}-") for j in range(9)}
    if case == "survey":
        cols["label"] = _codes(rng, N, 5000, "occupation ")
    elif case == "e-mails":
        ids = rng.permutation(N)
        cols["contact"] = np.array([f"user{i}.x@example{i % 97}.org" for i in ids], dtype=object)
    else:  # free text without identifiers
        words = np.array(["blue", "item", "stock", "late", "fixed", "north", "crate", "small"])
        w = words[rng.integers(0, len(words), (N, 3))]
        cols["note"] = np.array([f"{a} {b} {c} {i}" for i, (a, b, c) in enumerate(w)],
                                dtype=object)
    return pd.DataFrame(cols)


def floor_s(path: Path) -> float:
    """Read the columns and compute each one's distinct values (best of three)."""
    best = np.inf
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        t = pq.read_table(path)
        for col in t.columns:
            pc.unique(col)
        best = min(best, time.perf_counter() - t0)
    return float(best)


def scan_s(path: Path) -> tuple[float, list[str]]:
    """The gate's read of the table (categorical frame) is not counted: the scan alone."""
    from riskcore.gate.identifiers import scan_tables
    from riskcore.gate.tables import categorical_frame

    frame = categorical_frame(pq.read_table(path))
    best, found = np.inf, []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        scan = scan_tables({"released": frame})
        best = min(best, time.perf_counter() - t0)
        found = [f"{f.column}:{f.kind}:{f.cells}" for f in scan.findings if scan.failing(f)]
    return float(best), found


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rows, record = [], {}
    for case in ("survey", "e-mails", "free text"):
        path = OUT / f"scan-{case.replace(' ', '-')}.parquet"
        pq.write_table(pa.Table.from_pandas(table(case), preserve_index=False), path)
        floor = floor_s(path)
        scan, found = scan_s(path)
        rows.append([case, f"{N:,}", "10", f"{scan:.2f}", f"{floor:.2f}",
                     f"{scan / floor:.1f}x", "; ".join(found) or "none"])
        record[case] = {"scan_s": scan, "floor_s": floor, "found": found}
    text = print_table(
        "the identifier scan (seconds, best of three) next to the floor (pyarrow read + "
        "distinct values of every column)",
        ["case", "rows", "text columns", "scan", "floor", "scan/floor", "failing"], rows)
    (OUT / "scan.txt").write_text(text + "\n")
    (OUT / "scan.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
