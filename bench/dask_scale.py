"""Partitioned tables on Dask: a release larger than any worker's memory.

As a user runs it: ``riskgate gate --config ... --dask-local 2 --dask-memory SIZE`` in its own
process against a Prefect server on 127.0.0.1, under ``/usr/bin/time`` for the gate process's
peak RSS. Dask restarts a worker above its memory limit, and the run is told to fail on the
first such restart (no retries), so a finished run is one where no worker held more than its
limit. Data: the example's census and its anonymized release, written as 1M-row Parquet
partitions; measures: the equivalence family (k-anonymity, re-identification, l-diversity,
t-closeness, sdcMicro risk, population models).

1. A table that fits both ways (2M rows): the one-node gate on a single Parquet file and the
   Dask gate on its partitions; their figures compared.
2. 50M rows in 50 partitions, two workers each limited below the table's in-memory size.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from bench.common import OUT, print_table

KEYS = ["region", "age", "sex", "education"]
MEASURES = {"k_anonymity": {"ks": [2, 5, 10]}, "reid": {"threshold": 0.1},
            "l_diversity": {"c": 2}, "t_closeness": {}, "sdc": {},
            "population": {"population_size": 300_000_000}}
PART_ROWS = 1_000_000
WORKER_MEMORY = "2GiB"


def make_partitions(folder: Path, parts: int) -> None:
    """``parts`` partitions of the census (``<folder>-original``) and of its anonymized release
    (``folder``), 1M rows each, seeded per partition."""
    from riskcore.examples import anonymize, census_population

    originals = folder.with_name(folder.name + "-original")
    for f in (folder, originals):
        f.mkdir(parents=True, exist_ok=True)
    for i in range(parts):
        rel, ori = folder / f"part-{i:05d}.parquet", originals / f"part-{i:05d}.parquet"
        if rel.exists() and ori.exists():
            continue
        original = census_population(PART_ROWS, seed=1000 + i)
        original.to_parquet(ori, index=False)
        anonymize(original).to_parquet(rel, index=False)


def config(original: Path, released: Path, out: Path, name: str) -> Path:
    import yaml

    cfg = {"release_id": f"bench-dask-{name}", "original": str(original),
           "released": str(released), "output_url": str(out),
           "roles": {"quasi_identifiers": KEYS, "sensitive": ["diagnosis"], "weight": "weight",
                     "types": {"age": "categorical"}},
           "measures": MEASURES, "policy": {"version": 1, "checks": ["k_anonymity.k >= 1"]},
           "limits": {"max_table_mb": 16384}, "seed": 19}
    path = out / f"gate-{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg))
    return path


def gate(cfg: Path, api: str, *extra: str) -> tuple[float, float, dict, dict]:
    env = {**os.environ, "PREFECT_API_URL": api,
           # a worker above its limit is restarted, and the run then fails: no retry
           "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0",
           "DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE": "False",
           "DASK_DISTRIBUTED__WORKER__MEMORY__SPILL": "False",
           "DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "False"}
    exe = str(Path(sys.executable).with_name("riskgate"))
    t0 = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", exe, "gate", "--config", str(cfg),
                           "--json", *extra], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    rss_mb = int(done.stderr.strip().splitlines()[-1]) / 1024
    if "{" not in done.stdout:
        raise SystemExit(f"the gate printed no outcome: {done.stdout[-2000:]}")
    outcome = json.loads(done.stdout[done.stdout.index("{"):])
    if not outcome.get("decision_url"):
        raise SystemExit(f"the gate ended {outcome['verdict']}: {outcome['reasons']}")
    decision = json.loads(Path(outcome["decision_url"]).read_text())
    measures = json.loads(Path(outcome["decision_url"]).with_name("measures.json").read_text())
    return wall, rss_mb, decision, {m["measure"]: m["figures"] for m in measures["measures"]}


def in_memory_mb(folder: Path) -> float:
    """The table's size in memory as pandas holds it (one partition measured, times their
    number: they are of one size)."""
    files = sorted(folder.glob("*.parquet"))
    one = pd.read_parquet(files[0]).memory_usage(deep=True).sum()
    return float(one) * len(files) / 2**20


def compare(a: dict, b: dict) -> tuple[int, int, float]:
    """(figures compared, integer figures that differ, largest relative difference)."""
    n = differ = 0
    worst = 0.0
    for fam, figs in a.items():
        for key, x in figs.items():
            y = b.get(fam, {}).get(key)
            if x is None or y is None or key.startswith("hier_"):
                continue
            n += 1
            if isinstance(x, int) and isinstance(y, int):
                differ += int(x != y)
            else:
                worst = max(worst, abs(x - y) / max(abs(x), 1e-300))
    return n, differ, worst


def main() -> None:
    from riskgate.flows.local_api import private_server

    data = OUT / "dask-data"
    runs = OUT / "dask-runs"
    rows = []
    record: dict[str, dict] = {}
    small, large = data / "2M", data / "50M"
    make_partitions(small, 2)
    whole = {name: data / f"2M-{name}.parquet" for name in ("original", "released")}
    for name, folder in (("original", data / "2M-original"), ("released", small)):
        if not whole[name].exists():
            pd.concat([pd.read_parquet(f) for f in sorted(folder.glob("*.parquet"))],
                      ignore_index=True).to_parquet(whole[name], index=False)
    t0 = time.perf_counter()
    make_partitions(large, 50)
    print(f"data ready ({time.perf_counter() - t0:.0f} s)", flush=True)
    dask = ("--dask-local", "2", "--dask-memory", WORKER_MEMORY)
    with private_server(home=str(OUT / "dask-prefect-home")) as api:
        w1, r1, d1, f1 = gate(config(whole["original"], whole["released"], runs,
                                     "2M-one-node"), api)
        w2, r2, d2, f2 = gate(config(data / "2M-original", small, runs, "2M-dask"), api, *dask)
        n, differ, worst = compare(f1, f2)
        for label, wall, rss, dec in (("2M one node (one file)", w1, r1, d1),
                                      ("2M Dask (2 partitions)", w2, r2, d2)):
            t = dec["timings"]
            rows.append([label, dec["verdict"], f"{wall:.1f}", f"{t.get('load', 0):.1f}",
                         f"{t.get('measures', 0):.1f}", f"{t.get('per_record', 0):.1f}",
                         f"{rss:,.0f}", "", ""])
        w3, r3, d3, f3 = gate(config(data / "50M-original", large, runs, "50M-dask"), api,
                              *dask)
        t = d3["timings"]
        table_mb = in_memory_mb(large)
        rows.append(["50M Dask (50 partitions)", d3["verdict"], f"{w3:.1f}",
                     f"{t.get('load', 0):.1f}", f"{t.get('measures', 0):.1f}",
                     f"{t.get('per_record', 0):.1f}", f"{r3:,.0f}", WORKER_MEMORY,
                     f"{table_mb:,.0f}"])
        record = {"2M": {"figures_compared": n, "integer_figures_differing": differ,
                         "largest_relative_difference": worst, "one_node_s": w1, "dask_s": w2},
                  "50M": {"wall_s": w3, "timings": t, "gate_process_rss_mb": r3,
                          "worker_memory": WORKER_MEMORY, "table_in_memory_mb": table_mb,
                          "k": f3["k_anonymity"]["k"], "records": f3["k_anonymity"]["n"]}}
    text = print_table(
        "partitioned release on Dask (2 local workers): wall and stage seconds, the gate "
        "process's peak RSS, each worker's memory limit and the table's in-memory size",
        ["run", "verdict", "wall", "load (partition pass)", "measures", "per-record",
         "gate RSS MB", "worker limit", "table MB"], rows)
    same = (f"2M rows, one node vs Dask: {n} figures compared, {differ} integer figures differ, "
            f"largest relative difference {worst:.1e}")
    print(same)
    (OUT / "dask_scale.txt").write_text(text + "\n" + same + "\n")
    (OUT / "dask_scale.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
