"""Partitioned tables (riskcore.partitions, riskcore.gate.partitioned_steps): the same figures
as the whole table, identical to the bit on one node and on a Dask cluster whose workers cannot
hold the table, and bad partitions named in an ERROR."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from riskcore.examples import MACRO, anonymize, census_population
from riskcore.gate.config import load_gate
from riskcore.gate.partitioned_steps import PartitionedSteps
from riskcore.gate.run import run_gate
from riskcore.partitions import folder_sha256

CLASS_FAMILIES = ("k_anonymity", "reid", "sdc", "l_diversity", "t_closeness", "population")


def write_tables(folder: Path, n: int, parts: int, seed: int = 5,
                 split_households: bool = False, original_rows: int | None = None
                 ) -> dict[str, Path]:
    """original and released as single Parquet files and as folders of ``parts`` partitions,
    cut between households (or through them, ``split_households``); ``original_rows``: only
    the original's first rows, in two partitions (for tests that measure the release alone)."""
    original = census_population(n, seed)
    released = anonymize(original)
    released.loc[released.index[::97], "diagnosis"] = None  # missing sensitive values
    if original_rows is not None:
        original = original.iloc[:original_rows]
    out: dict[str, Path] = {}
    for name, df in (("original", original), ("released", released)):
        whole = folder / f"{name}.parquet"
        df.to_parquet(whole, index=False)
        if name == "original" and original_rows is not None:
            parts_here = 2
        else:
            parts_here = parts
        part_dir = folder / name
        part_dir.mkdir()
        cuts = np.linspace(0, len(df), parts_here + 1).astype(int)
        if not split_households:  # move each cut to the start of its household
            hh = df["household_id"].to_numpy()
            cuts[1:-1] = np.searchsorted(hh, hh[cuts[1:-1]], side="left")
        for i, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:])):
            df.iloc[lo:hi].to_parquet(part_dir / f"part-{i:03d}.parquet", index=False)
        out[name], out[f"{name}_parts"] = whole, part_dir
    (folder / "hierarchy.csv").write_text("".join(f"{r};{m}\n" for r, m in MACRO.items()))
    return out


def config(folder: Path, original: Path, released: Path, release_id: str,
           measures: dict[str, Any] | None = None) -> Path:
    from tests.conftest import POLICY

    doc = {
        "release_id": release_id, "original": str(original), "released": str(released),
        "output_url": str(folder / "runs"),
        "roles": {"quasi_identifiers": ["region", "age", "sex", "education"],
                  "sensitive": ["diagnosis"], "weight": "weight", "household": "household_id",
                  "direct_identifiers": ["person_id"], "types": {"age": "categorical"}},
        "generalization": {"age": "interval",
                           "region": {"hierarchy": str(folder / "hierarchy.csv")}},
        "measures": measures or {"k_anonymity": {}, "reid": {"threshold": 0.1},
                                 "l_diversity": {}, "t_closeness": {},
                                 "sdc": {"max_global_risk": 0.01},
                                 "population": {"population_size": 2_000_000}},
        "policy": POLICY, "seed": 3,
    }
    path = folder / f"{release_id}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def figures(outcome: Any) -> dict[str, dict[str, Any]]:
    doc = json.loads(Path(outcome.decision_url).with_name("measures.json").read_text())
    return {m["measure"]: m["figures"] for m in doc["measures"]}


def per_record_parts(outcome: Any) -> pd.DataFrame:
    files = sorted((Path(outcome.folder) / "per_record").glob("part-*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("partitioned")
    return folder, write_tables(folder, n=4000, parts=5)


def test_partitioned_gate_gives_the_whole_tables_figures(tables) -> None:
    folder, t = tables
    whole = run_gate(load_gate(config(folder, t["original"], t["released"], "whole")), "w1")
    parts = run_gate(load_gate(config(folder, t["original_parts"], t["released_parts"],
                                      "parts", measures={
                                          "k_anonymity": {}, "reid": {"threshold": 0.1},
                                          "l_diversity": {}, "t_closeness": {},
                                          "sdc": {"max_global_risk": 0.01},
                                          "population": {"population_size": 2_000_000},
                                          "suda": {}})),
                     "p1", steps=PartitionedSteps())
    assert whole.verdict == parts.verdict == "APPROVED", (whole.reasons, parts.reasons)
    fw, fp = figures(whole), figures(parts)
    compared = 0
    for fam in CLASS_FAMILIES:
        assert fw[fam].keys() == fp[fam].keys()
        for key, a in fw[fam].items():
            b = fp[fam][key]
            if isinstance(a, int) or a is None:
                assert a == b, (fam, key)  # counts, k, l: exactly
            else:
                assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15), (fam, key, a, b)
            compared += 1
    assert compared > 40
    assert fp["population"]["loglinear"] is not None and fp["sdc"]["hier_risk"] > 0
    # per record: the same values for every record, in the release's row order
    pr_whole = pd.read_parquet(Path(whole.folder) / "per_record.parquet")
    pr_parts = per_record_parts(parts)
    assert pr_parts["row"].tolist() == list(range(len(pr_whole)))
    shared = [c for c in pr_parts.columns if c != "row"]
    assert "sdc.hier_risk" in shared
    assert len(shared) >= 10
    for c in shared:
        np.testing.assert_allclose(pr_parts[c].to_numpy(float), pr_whole[c].to_numpy(float),
                                   rtol=1e-12, equal_nan=True, err_msg=c)
    measures = json.loads(Path(parts.decision_url).with_name("measures.json").read_text())
    suda = next(m for m in measures["measures"] if m["measure"] == "suda")
    assert suda["status"] == "not_computable" and "partitioned table of 4,000" in suda["reason"]
    decision = json.loads(Path(parts.decision_url).read_text())
    released = next(i for i in decision["inputs"] if i["name"] == "released")
    assert released["rows"] == 4000 and decision["per_record_parts"] == 5
    # what a trigger event announces for the folder is what the gate finds
    assert released["sha256"] == folder_sha256(str(t["released_parts"]))


def _worker_rss(tasks: list[Any], dask_worker: Any) -> int:
    """A worker's resident memory in its steady state: after a few partitions' work (its
    libraries, Great Expectations among them, loaded and their caches filled)."""
    import psutil

    from riskcore.partitions import summarize

    for task in tasks:
        summarize(task)
    return int(psutil.Process().memory_info().rss)


def _set_limit(limit: int, dask_worker: Any) -> None:
    dask_worker.memory_manager.memory_limit = limit


def test_dask_workers_smaller_than_the_table_give_identical_figures(tmp_path: Path) -> None:
    """Workers whose memory limit leaves them less room than half the table (over their own
    start-up memory; Dask kills a worker above it) gate it with the figures and per-record
    values of the one-node partitioned run, identical to the bit."""
    import dask
    from distributed import Client, LocalCluster

    from riskcore.gate.partitioned_steps import partition_checks
    from riskcore.partitions import DaskExecutor, discover, tasks_for

    t = write_tables(tmp_path, n=1_600_000, parts=32, original_rows=50_000)
    table_bytes = sum(int(pd.read_parquet(f).memory_usage(deep=True).sum())
                      for f in sorted(t["released_parts"].glob("*.parquet")))
    measures = {"k_anonymity": {}, "reid": {"threshold": 0.1}, "l_diversity": {},
                "t_closeness": {}, "sdc": {"max_global_risk": 0.01}}
    cfg = config(tmp_path, t["original_parts"], t["released_parts"], "dask", measures)
    local = run_gate(load_gate(cfg), "local", steps=PartitionedSteps(sample_rows=20_000))
    memory = dask.config.set({"distributed.worker.memory.target": False,
                              "distributed.worker.memory.spill": False,
                              "distributed.worker.memory.pause": False,
                              "distributed.worker.memory.terminate": 0.95,
                              "distributed.scheduler.allowed-failures": 0})
    with memory, LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="4GiB",
                              dashboard_address=None) as cluster, Client(cluster) as client:
        roles = load_gate(cfg).config.role_spec
        warm = [task for name in ("original", "released")
                for task in tasks_for(discover(str(t[f"{name}_parts"]), name), roles,
                                      url=str(t[f"{name}_parts"]), sample_rows=20_000, seed=3,
                                      check=partial(partition_checks, table=name, roles=roles),
                                      count=name == "released")[:2 if name == "original"
                                                                 else 4]]
        rss = client.run(_worker_rss, warm)
        # Dask restarts a worker above 95 % of its limit: there, it holds its start-up
        # memory and half the table at most
        kill_at = max(rss.values()) + table_bytes // 2
        limit = int(kill_at / 0.95)
        client.run(_set_limit, limit)
        client.run(_set_limit, limit, nanny=True)
        dask_run = run_gate(load_gate(cfg), "dask",
                            steps=PartitionedSteps(DaskExecutor(client), sample_rows=20_000))
        alive = len(client.scheduler_info()["workers"])
    assert kill_at - max(rss.values()) < table_bytes
    assert alive == 2  # no worker was killed for memory
    assert local.verdict == dask_run.verdict, (local.reasons, dask_run.reasons)
    assert figures(local) == figures(dask_run)
    a, b = per_record_parts(local), per_record_parts(dask_run)
    assert len(a) == 1_600_000 and a.equals(b)


def test_a_corrupt_partition_is_an_error_naming_it(tables, tmp_path: Path) -> None:
    folder, t = tables
    broken = tmp_path / "released"
    broken.mkdir()
    for f in sorted(t["released_parts"].glob("*.parquet")):
        (broken / f.name).write_bytes(f.read_bytes())
    (broken / "part-002.parquet").write_bytes(b"PAR1 not really parquet")
    out = run_gate(load_gate(config(folder, t["original_parts"], broken, "corrupt")), "c1",
                   steps=PartitionedSteps())
    assert out.verdict == "ERROR" and out.exit_code == 3
    assert "part-002.parquet" in out.reasons[0] and "not a readable Parquet" in out.reasons[0]


def altered_copy(source: Path, target: Path, name: str, change: Any) -> Path:
    """A copy of a partitioned table where ``change`` edits partition ``name``'s frame."""
    target.mkdir()
    for f in sorted(source.glob("*.parquet")):
        df = pd.read_parquet(f)
        if f.name == name:
            change(df)
        df.to_parquet(target / f.name, index=False)
    return target


def test_a_partition_with_another_schema_is_an_error_naming_it(tables, tmp_path: Path) -> None:
    folder, t = tables

    def to_text(df: pd.DataFrame) -> None:
        df["weight"] = df["weight"].astype(str)

    odd = altered_copy(t["released_parts"], tmp_path / "released", "part-003.parquet", to_text)
    out = run_gate(load_gate(config(folder, t["original_parts"], odd, "schema")), "s1",
                   steps=PartitionedSteps())
    assert out.verdict == "ERROR"
    assert "part-003.parquet" in out.reasons[0] and "'weight'" in out.reasons[0]
    assert "different schema" in out.reasons[0]


def test_an_infinite_number_in_a_partition_is_an_error_naming_it(tables, tmp_path: Path
                                                                 ) -> None:
    folder, t = tables

    def infinite(df: pd.DataFrame) -> None:
        df.loc[df.index[3], "weight"] = np.inf

    bad = altered_copy(t["released_parts"], tmp_path / "released", "part-001.parquet", infinite)
    out = run_gate(load_gate(config(folder, t["original_parts"], bad, "inf")), "i1",
                   steps=PartitionedSteps())
    assert out.verdict == "ERROR" and "part-001.parquet" in out.reasons[0]
    assert "'weight'" in out.reasons[0] and "infinite" in out.reasons[0]


def test_households_across_partitions_leave_household_risk_unavailable(tmp_path: Path) -> None:
    t = write_tables(tmp_path, n=3000, parts=4, split_households=True)
    out = run_gate(load_gate(config(tmp_path, t["original_parts"], t["released_parts"], "hh")),
                   "h1", steps=PartitionedSteps())
    doc = json.loads(Path(out.decision_url).with_name("measures.json").read_text())
    sdc = next(m for m in doc["measures"] if m["measure"] == "sdc")
    assert sdc["figures"]["hier_risk"] is None and sdc["figures"]["global_risk"] > 0
    assert "households span partitions" in sdc["unavailable"]["hier_risk"]
    assert "sdc.hier_risk" not in per_record_parts(out).columns


def test_an_unclean_partition_rejects_the_release_naming_it_and_the_row(tables, tmp_path: Path
                                                                        ) -> None:
    """Great Expectations runs per partition; the failing check names the partition, and its
    example row is the record's row number in the whole table."""
    folder, t = tables

    def bell(df: pd.DataFrame) -> None:
        df.loc[df.index[5], "diagnosis"] = "asthma\x07"

    dirty = altered_copy(t["released_parts"], tmp_path / "released", "part-002.parquet", bell)
    first_rows = sum(len(pd.read_parquet(f)) for f in sorted(dirty.glob("*.parquet"))[:2])
    out = run_gate(load_gate(config(folder, t["original_parts"], dirty, "dirty")), "d1",
                   steps=PartitionedSteps())
    assert out.verdict == "REJECTED", out.reasons
    line = next(r for r in out.reasons if "data not clean" in r)
    assert "released.diagnosis" in line and "part-002.parquet" in line
    assert f"rows [{first_rows + 5}]" in line


def test_a_csv_original_with_a_partitioned_release_is_an_error_saying_what_to_do(
        tables, tmp_path: Path) -> None:
    folder, t = tables
    csv = tmp_path / "original.csv"
    pd.read_parquet(t["original"]).to_csv(csv, index=False)
    out = run_gate(load_gate(config(folder, csv, t["released_parts"], "csv")), "v1",
                   steps=PartitionedSteps())
    assert out.verdict == "ERROR"
    assert "table 'original'" in out.reasons[0] and "convert it" in out.reasons[0]
