"""``riskgate diff`` at scale: a release read against its original, beside the machine's limit.

Three releases of one census original (the example generator's 12 columns at N rows): ``kept``
(the original's rows shuffled, 1 % of them dropped), ``generalized`` (the example's
k-anonymization: age in bands, regions merged, classes suppressed) and ``synthetic`` (an
independent sample of the same population: new rows). Each case runs in a process of its own:
the tables are read as the command reads them (:func:`riskgate.flows.cli.common.read_frames`),
then :func:`riskcore.anatomy.diff` links every released row (no sample). The limit, in the
same process: pyarrow reads both Parquet files, best of three. Target: the diff within 10x of
the limit at 1M rows; memory linear in the rows (the peak RSS per row at 100k and at 1M side
by side). The machine's load average is printed beside each row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.common import OUT, print_table

SIZES = (100_000, 1_000_000)
KINDS = ("kept", "generalized", "synthetic")

CHILD = r"""
import json, resource, sys, time
import pyarrow.parquet as pq
folder, kind = sys.argv[1], sys.argv[2]
orig, rel = f"{folder}/original.parquet", f"{folder}/{kind}.parquet"
limit = float("inf")
for _ in range(3):
    t0 = time.perf_counter(); pq.read_table(orig); pq.read_table(rel)
    limit = min(limit, time.perf_counter() - t0)
from riskgate.flows.cli.common import read_frames
from riskcore.anatomy import diff
t0 = time.perf_counter()
frames, _ = read_frames({"original": orig, "released": rel}, {}, {})
read = time.perf_counter() - t0
t0 = time.perf_counter()
result = diff(frames["original"], frames["released"], seed=0)
seconds = time.perf_counter() - t0
print(json.dumps({"limit": limit, "read": read, "diff": seconds, "kind": result.kind,
                  "linked_share": result.linked_share,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make(n: int, folder: Path) -> None:
    """The original and its three releases, as Parquet."""
    from riskcore.examples import anonymize, census_population

    if (folder / "synthetic.parquet").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    original = census_population(n, seed=19)
    rng = np.random.default_rng(19)
    kept = original.iloc[rng.permutation(n)[: int(n * 0.99)]].reset_index(drop=True)
    releases = {"kept": kept, "generalized": anonymize(original),
                "synthetic": census_population(n, seed=23)}
    original.to_parquet(folder / "original.parquet", index=False)
    for name, frame in releases.items():
        frame.to_parquet(folder / f"{name}.parquet", index=False)


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:] if a.isdigit()] or list(SIZES)
    rows, per_row = [], {}
    for n in sizes:
        folder = OUT / "diff-data" / str(n)
        make(n, folder)
        for kind in KINDS:
            load = os.getloadavg()[0]
            done = subprocess.run([sys.executable, "-c", CHILD, str(folder), kind],
                                  capture_output=True, text=True, timeout=3600)
            if done.returncode:
                rows.append([f"{n:,}", kind, "failed: " + done.stderr.strip()[-200:]])
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            per_row[(n, kind)] = r["rss_mb"] * 1e6 / n
            rows.append([f"{n:,}", kind, r["kind"], f"{r['linked_share']:.3f}",
                         f"{r['read']:.2f}", f"{r['diff']:.2f}", f"{r['limit']:.2f}",
                         f"{r['diff'] / r['limit']:.1f}x", f"{r['rss_mb']:.0f}",
                         f"{per_row[(n, kind)]:.0f}", f"{load:.2f}"])
    text = print_table(
        "riskgate diff vs the read limit (wall s; target: diff <= 10x the limit at 1M rows)",
        ["rows", "release", "kind read", "linked share", "read s", "diff s", "limit s",
         "ratio", "peak RSS MB", "bytes/row", "load"], rows)
    (OUT / "diff.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
