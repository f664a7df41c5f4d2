"""Composition with earlier releases at scale, next to the machine's floor.

No peer composes releases, so the yardstick is the least the figures need, measured in the same
run: each release's equivalence classes (one group-by of its quasi-identifiers) and the
original's (one more), the work of four k-anonymity counts. The case: the example census at
1M people; the new release is the demo's (ages in ten-year bands, regions merged, local
suppression left empty); the two earlier ones band ages by five years with exact regions,
and by twenty years with merged regions. Target: within seconds, under 10x the floor.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd

from bench.common import OUT, print_table

N = 1_000_000
QIS = ("region", "age", "sex", "education")
REPEATS = 2


def _bands(age: pd.Series, width: int) -> pd.Series:
    lo = (age // width) * width
    return lo.astype(str) + "-" + (lo + width - 1).astype(str)


def releases() -> tuple[pd.DataFrame, list[tuple[str, pd.DataFrame, dict]]]:
    from riskcore.examples import MACRO, anonymize, census_population

    original = census_population(N, 2026)
    hierarchy = OUT / "composition-regions.csv"
    hierarchy.write_text("".join(f"{r};{m}\n" for r, m in MACRO.items()))
    merged = {"hierarchy": str(hierarchy)}
    new = anonymize(original)
    five = original.drop(columns=["person_id"]).assign(age=_bands(original["age"], 5))
    twenty = original.drop(columns=["person_id"]).assign(
        age=_bands(original["age"], 20), region=original["region"].map(MACRO))
    return original, [("new", new, {"age": "interval", "region": merged}),
                      ("five", five, {"age": "interval"}),
                      ("twenty", twenty, {"age": "interval", "region": merged})]


def floor_s(tables: list[pd.DataFrame]) -> float:
    from riskcore.equivalence import group_rows

    best = np.inf
    for _ in range(REPEATS + 1):
        t0 = time.perf_counter()
        for df in tables:
            codes = np.column_stack([pd.factorize(df[c])[0] for c in QIS])
            group_rows(codes)
        best = min(best, time.perf_counter() - t0)
    return float(best)


def main() -> None:
    from riskcore.measures.composition import compose
    from riskcore.measures.releases import Lineage, ReleaseTables

    OUT.mkdir(parents=True, exist_ok=True)
    original, rels = releases()
    views = [ReleaseTables(name, df, QIS, ("diagnosis",), gen) for name, df, gen in rels]
    lineage = Lineage(original, views[0], tuple(views[1:]))
    best, figures = np.inf, {}
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        figures, _, _ = compose(lineage)
        best = min(best, time.perf_counter() - t0)
    floor = floor_s([original, *[df for _, df, _ in rels]])
    rows = [[f"{N:,}", "2", f"{best:.2f}", f"{floor:.2f}", f"{best / floor:.1f}x",
             f"{figures['pvp_1']:.4f}", f"{figures['pvp_1_alone']:.4f}",
             str(figures["composed_k_min"])]]
    text = print_table(
        "composition of a release with its earlier releases (seconds, best of two) next to "
        "the floor (the equivalence classes of the original and of each release)",
        ["people", "earlier releases", "composition", "floor", "ratio", "pvp_1",
         "pvp_1 alone", "composed k min"], rows)
    (OUT / "composition.txt").write_text(text + "\n")
    (OUT / "composition.json").write_text(json.dumps(
        {"seconds": best, "floor_s": floor, "figures": figures}, indent=2, default=float))


if __name__ == "__main__":
    main()
