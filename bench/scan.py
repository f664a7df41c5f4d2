"""The scan for undeclared direct identifiers: today's beside turn 4's and the machine's floor.

A gate scans every published column (riskcore.identifiers): each distinct value once,
normalized and searched with Arrow's RE2, python-stdnum's and phonenumbers' validators only on
candidates (a sample of them where a column holds very many). Beside it, in the same run on
the same tables: turn 4's scan (riskcore/gate/identifiers.py at commit 3373a48, read from the
repository's history: US and UK identifiers, a phone expression, no libraries), and the floor,
pyarrow reading the columns from Parquet and computing each column's distinct values (the
least any scan of every value must do).

Cases at 1M rows, 10 text columns (nine of codes and labels, and one more):
* survey: a column of 5,000 occupation labels;
* e-mails: 1M distinct e-mail addresses (the leak the scan exists for);
* free text: 1M distinct notes without identifiers;
* codes: 1M distinct random nine-digit codes (every value a candidate of nine kinds, and of
  phones in several regions; none is an identifier);
* national ids: 1M distinct Dutch BSNs (found, every cell counted);
* phones: 1M distinct German numbers in national form (found).
Targets: today's scan within 2x turn 4's where turn 4 scanned the same kinds, and under 5x the
floor wherever every value is a candidate.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import OUT, print_table

N = 1_000_000
REPEATS = 2


def _codes(rng: np.random.Generator, n: int, k: int, prefix: str) -> np.ndarray:
    return np.array([f"{prefix}{i:03d}" for i in range(k)], dtype=object)[rng.integers(0, k, n)]


def _nine(rng: np.random.Generator, n: int) -> np.ndarray:
    """n distinct nine-digit numbers (zero-padded)."""
    return rng.choice(10 ** 9, size=n, replace=False)


def _bsns(rng: np.random.Generator, n: int) -> np.ndarray:
    """n distinct valid BSNs: eight digits, the ninth making sum(d_i x (9 - i)) - d_9 a
    multiple of 11 (stdnum's nl.bsn; a remainder of 10 has no digit: drawn again)."""
    out: list[str] = []
    seen: set[int] = set()
    while len(out) < n:
        body = rng.integers(0, 10 ** 8, 2 * n)
        digits = (body[:, None] // 10 ** np.arange(7, -1, -1)) % 10
        check = (digits * np.arange(9, 1, -1)).sum(axis=1) % 11
        for b, c in zip(body.tolist(), check.tolist()):
            if c < 10 and b not in seen:
                seen.add(b)
                out.append(f"{b:08d}{c}")
                if len(out) == n:
                    break
    return np.array(out, dtype=object)


def table(case: str, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {f"code_{j}": _codes(rng, N, 10 ** (1 + j % 3), f"c{j}-") for j in range(9)}
    if case == "survey":
        cols["label"] = _codes(rng, N, 5000, "occupation ")
    elif case == "e-mails":
        ids = rng.permutation(N)
        cols["contact"] = np.array([f"user{i}.x@example{i % 97}.org" for i in ids], dtype=object)
    elif case == "free text":
        words = np.array(["blue", "item", "stock", "late", "fixed", "north", "crate", "small"])
        w = words[rng.integers(0, len(words), (N, 3))]
        cols["note"] = np.array([f"{a} {b} {c} {i}" for i, (a, b, c) in enumerate(w)],
                                dtype=object)
    elif case == "codes":
        cols["reference"] = np.array([f"{v:09d}" for v in _nine(rng, N)], dtype=object)
    elif case == "national ids":
        cols["client"] = _bsns(rng, N)
    else:  # German numbers: an area code, a subscriber number
        areas = np.array(["030", "040", "089", "0711", "0221", "069", "0201", "0341"])
        subscriber = _nine(rng, N) % 10 ** 7 + 2 * 10 ** 6
        cols["telefon"] = np.array([f"{a} {s}" for a, s in zip(
            areas[rng.integers(0, len(areas), N)], subscriber)], dtype=object)
    return pd.DataFrame(cols)


def floor_s(path: Path) -> float:
    """Read the columns and compute each one's distinct values (best of the repeats)."""
    best = np.inf
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        t = pq.read_table(path)
        for col in t.columns:
            pc.unique(col)
        best = min(best, time.perf_counter() - t0)
    return float(best)


def _timed(scan: Callable[[dict[str, pd.DataFrame]], object], frame: pd.DataFrame
           ) -> tuple[float, object]:
    best, out = np.inf, None
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        out = scan({"released": frame})
        best = min(best, time.perf_counter() - t0)
    return float(best), out


def _failing(scan: object) -> list[str]:
    return [f"{f.column}:{f.kind}:{f.cells}" for f in scan.findings  # type: ignore[attr-defined]
            if scan.failing(f)]  # type: ignore[attr-defined]


#: the commit whose identifier scan is the baseline (turn 4's), and its file there
TURN4 = ("3373a48", "riskcore/gate/identifiers.py")


def turn4_scan() -> Callable[[dict[str, pd.DataFrame]], object]:
    """Turn 4's ``scan_tables``, loaded from the repository's history (its one relative
    import pointed at the package)."""
    import subprocess
    import sys
    import types

    commit, path = TURN4
    source = subprocess.run(["git", "show", f"{commit}:{path}"], capture_output=True,
                            text=True, check=True, cwd=Path(__file__).resolve().parents[1]
                            ).stdout.replace("from ..data import", "from riskcore.data import")
    module = types.ModuleType("identifiers_turn4")
    sys.modules[module.__name__] = module  # its dataclasses look themselves up there
    exec(compile(source, f"{commit}:{path}", "exec"), module.__dict__)  # noqa: S102
    return module.scan_tables  # type: ignore[no-any-return]


def main() -> None:
    from riskcore.gate.tables import categorical_frame
    from riskcore.identifiers import scan_tables

    OUT.mkdir(parents=True, exist_ok=True)
    turn4 = turn4_scan()
    rows, record = [], {}
    for case in ("survey", "e-mails", "free text", "codes", "national ids", "phones"):
        path = OUT / f"scan-{case.replace(' ', '-')}.parquet"
        pq.write_table(pa.Table.from_pandas(table(case), preserve_index=False), path)
        floor = floor_s(path)
        # the gate's read of the table (a categorical frame) is not counted: the scans alone
        frame = categorical_frame(pq.read_table(path))
        today, found = _timed(scan_tables, frame)
        before, found_before = _timed(turn4, frame)
        rows.append([case, f"{N:,}", f"{today:.2f}", f"{before:.2f}", f"{floor:.2f}",
                     f"{today / before:.1f}x", f"{today / floor:.1f}x",
                     "; ".join(_failing(found)) or "none",
                     "; ".join(_failing(found_before)) or "none"])
        record[case] = {"scan_s": today, "turn4_s": before, "floor_s": floor,
                        "found": _failing(found), "turn4_found": _failing(found_before)}
    text = print_table(
        "the identifier scan (seconds, best of two) beside turn 4's and the floor (pyarrow "
        "read + distinct values of every column), 10 text columns",
        ["case", "rows", "scan", "turn 4", "floor", "scan/turn 4", "scan/floor", "fails",
         "turn 4 fails"], rows)
    (OUT / "scan.txt").write_text(text + "\n")
    (OUT / "scan.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
