"""Utility: riskgate's ``utility`` family against SDMetrics' QualityReport (own environment),
same files, same run, one core. CPU seconds; ratio = SDMetrics / riskgate.

Data: the example generator's census (7 columns, mixed types). The original is one draw; the
release a fresh draw from the same generator, damaged as releases are: income shifted up 20 %
on a fifth of the rows, a tenth of the education cells replaced by the most frequent value,
5 % of the income and 3 % of the region cells missing. riskgate runs with
``pair_bins: sdmetrics`` (SDMetrics' binning of a number in a mixed pair), so that every figure
is comparable: column shapes and numeric pairs must equal SDMetrics' to 1e-6 at any size;
mixed and categorical pairs too up to 50,000 rows, above which SDMetrics scores them on a random
50,000-row subsample (unseeded), so they differ by its sampling error. riskgate's time includes
its propensity model (SDMetrics has none in the QualityReport) but not the reading and encoding
of the files (the gate's shared steps, in bench/gate.py); "shapes+pairs" is the same work as the
QualityReport's (its two properties), "family" all of riskgate's figures.

``--reference FILE`` writes SDMetrics' figures on the 5,000-row data to FILE (the suite's
reference, tests/data/sdmetrics_quality_5000.json).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import OUT, peer_python, pin_one_core, print_table, run_peer

COLS = ["region", "age", "sex", "education", "occupation", "income", "diagnosis"]
SIZES = (100_000, 1_000_000)
PEER = ["sdmetrics==0.21.0", "pyarrow"]


def make_tables(n: int):
    """(original, released) as the module docstring describes; deterministic."""
    from riskcore.examples import census_population

    original = census_population(n, seed=5)[COLS].reset_index(drop=True)
    rel = census_population(n, seed=77)[COLS].reset_index(drop=True)
    rng = np.random.default_rng(11)
    shift = rng.random(n) < 0.2
    rel.loc[shift, "income"] = np.round(rel.loc[shift, "income"] * 1.2)
    top = rel["education"].mode().iloc[0]
    rel.loc[rng.random(n) < 0.1, "education"] = top
    rel.loc[rng.random(n) < 0.05, "income"] = np.nan
    rel["region"] = rel["region"].astype(object)
    rel.loc[rng.random(n) < 0.03, "region"] = None
    return original, rel


def make(n: int, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    original, released = make_tables(n)
    original.to_parquet(folder / "original.parquet")
    released.to_parquet(folder / "released.parquet")


def riskgate_shapes_pairs(original, released) -> float:
    """CPU seconds of the column shapes and pair trends alone (the QualityReport's work)."""
    import pandas as pd

    from riskcore import Roles, encode_tables
    from riskcore.measures.utility import _cols, pair_trends, shapes
    from riskcore.roles import ColumnType

    roles = Roles(quasi_identifiers=COLS, types={
        c: (ColumnType.CONTINUOUS if pd.api.types.is_numeric_dtype(original[c])
            else ColumnType.CATEGORICAL) for c in COLS})
    t = encode_tables({"original": original, "released": released}, roles)
    a, b = _cols(t["original"], COLS), _cols(t["released"], COLS)
    t0 = time.process_time()
    shapes(a, b)
    pair_trends(a, b, "sdmetrics")
    return time.process_time() - t0


def riskgate_figures(original, released, **params) -> tuple[float, dict]:
    """(CPU seconds of the family, its result) with SDMetrics' binning."""
    import pandas as pd

    from riskcore import Roles, encode_tables
    from riskcore.measures import MeasureInputs, run_measure
    from riskcore.roles import ColumnType

    roles = Roles(quasi_identifiers=COLS, types={
        c: (ColumnType.CONTINUOUS if pd.api.types.is_numeric_dtype(original[c])
            else ColumnType.CATEGORICAL) for c in COLS})
    t = encode_tables({"original": original, "released": released}, roles)
    inputs = MeasureInputs(released=t["released"], original=t["original"], seed=1)
    t0 = time.process_time()
    result = run_measure("utility", inputs, {"pair_bins": "sdmetrics", "worst_pairs": 1000,
                                             **params})
    return time.process_time() - t0, result.to_dict()


def pair_scores(result: dict) -> dict[str, float]:
    return {"|".join(p["columns"]): p["score"] for p in result["details"]["worst_pairs"]}


def compare(ours: dict, peer: dict) -> tuple[float, float]:
    """Largest absolute difference over the column shapes and over the pairs."""
    shapes = max(abs(ours["figures"][f"shape.{c}"] - v) for c, v in peer["shapes"].items())
    mine = pair_scores(ours)
    pairs = max(abs(mine[k] - v) for k, v in peer["pairs"].items())
    return shapes, pairs


def main() -> None:
    import pandas as pd

    pin_one_core()
    args = sys.argv[1:]
    py = peer_python("sdmetrics", PEER)
    if args[:1] == ["--reference"]:
        folder = OUT / "utility-data" / "5000"
        make(5000, folder)
        peer = run_peer(py, "sdmetrics_quality.py", [str(folder)], timeout=600)
        peer.pop("seconds")
        Path(args[1]).write_text(json.dumps(peer, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args[1]}")
        return
    sizes = [int(a) for a in args] or list(SIZES)
    rows = []
    for n in sizes:
        folder = OUT / "utility-data" / str(n)
        if not (folder / "released.parquet").exists():
            make(n, folder)
        ori, rel = (pd.read_parquet(folder / f"{t}.parquet") for t in ("original", "released"))
        ours_s, ours = riskgate_figures(ori, rel)
        same_s = riskgate_shapes_pairs(ori, rel)
        peer = run_peer(py, "sdmetrics_quality.py", [str(folder)], timeout=7200)
        if "seconds" not in peer:
            rows.append([f"{n:,}", f"{same_s:.3f}", f"{ours_s:.2f}", str(peer)[:60], "", "", "",
                         "", ""])
            continue
        d_shapes, d_pairs = compare(ours, peer)
        f = ours["figures"]
        rows.append([f"{n:,}", f"{same_s:.3f}", f"{ours_s:.2f}", f"{peer['seconds']:.1f}",
                     f"{peer['seconds'] / same_s:.0f}x", f"{peer['seconds'] / ours_s:.1f}x",
                     f"{f['column_shapes']:.6f} / {peer['column_shapes']:.6f}",
                     f"{f['column_pair_trends']:.6f} / {peer['column_pair_trends']:.6f}",
                     f"{d_shapes:.1e} / {d_pairs:.1e}"])
    text = print_table(
        "utility vs SDMetrics QualityReport (CPU s, one core; target: figures equal, >= 10x)",
        ["rows", "riskgate shapes+pairs s", "riskgate family s", "SDMetrics s",
         "ratio (shapes+pairs)", "ratio (family)", "column shapes (ours / peer)",
         "pair trends (ours / peer)", "max |diff| shapes / pairs"], rows)
    (OUT / "utility.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
