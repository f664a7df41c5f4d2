"""Every published column is read and scanned whatever the release's format: a Parquet file,
a partitioned folder of them, CSV; columns outside the roles and under ignore_columns too; a
column name holding an identifier refused by its position alone; invisible characters refused
as unclean. Whole gate runs on the bundled example (riskcore.examples)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from riskcore.gate.config import load_gate
from riskcore.gate.partitioned_steps import PartitionedSteps
from riskcore.gate.run import LocalSteps, run_gate
from tests.conftest import example_text_tables

N = 2000


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, pd.DataFrame]:
    return example_text_tables(tmp_path_factory.mktemp("published-base"), N, 11)


def _write(df: pd.DataFrame, path: Path, form: str) -> Path:
    if form == "csv":
        df.to_csv(path.with_suffix(".csv"), index=False)
        return path.with_suffix(".csv")
    if form == "parquet":
        df.to_parquet(path.with_suffix(".parquet"), index=False)
        return path.with_suffix(".parquet")
    path.mkdir()
    for i, lo in enumerate(range(0, len(df), len(df) // 4)):
        df.iloc[lo:lo + len(df) // 4].to_parquet(path / f"part-{i:03d}.parquet", index=False)
    return path


def _gate(tmp_path: Path, original: pd.DataFrame, released: pd.DataFrame, form: str,
          **extra: Any) -> tuple[Any, dict[str, Any]]:
    cfg = {"release_id": "published", "original": str(_write(original, tmp_path / "o", form)),
           "released": str(_write(released, tmp_path / "r", form)),
           "output_url": str(tmp_path / "out"),
           "roles": {"quasi_identifiers": ["region", "age", "sex", "education"],
                     "sensitive": ["diagnosis"], "direct_identifiers": ["person_id"],
                     "types": {"age": "categorical"}},
           "measures": {"k_anonymity": {}},
           "policy": {"version": 1, "checks": ["k_anonymity.k >= 1"]}, **extra}
    steps = PartitionedSteps() if form == "partitioned" else LocalSteps()
    outcome = run_gate(load_gate(cfg), "run", steps=steps)
    folder = Path(outcome.folder or "")
    path = folder / "validation.json"
    return outcome, json.loads(path.read_text()) if path.exists() else {}


def _emails(n: int) -> list[str]:
    return [f"person{i}@example.org" for i in range(n)]


@pytest.mark.parametrize("form", ["csv", "parquet", "partitioned"])
def test_a_released_column_of_emails_the_original_lacks_is_rejected(form, base, tmp_path):
    released = base["released"].copy()
    released["contact"] = _emails(len(released))
    outcome, validation = _gate(tmp_path, base["original"], released, form)
    assert outcome.verdict == "REJECTED", outcome.reasons
    text = " ".join(outcome.reasons)
    assert "every released column is in the original" in text and "contact" in text
    assert "e-mail addresses [email]" in text, outcome.reasons
    if form != "partitioned":  # one scan over the whole table, recorded
        assert "contact" in validation["identifiers"]["scanned"]["released"]


@pytest.mark.parametrize("form", ["parquet", "partitioned"])
def test_a_column_published_unmeasured_is_still_scanned(form, base, tmp_path):
    released = base["released"].copy()
    released["contact"] = _emails(len(released))
    outcome, _ = _gate(tmp_path, base["original"], released, form,
                       ignore_columns=["contact"])
    assert outcome.verdict == "REJECTED", outcome.reasons
    assert any("released.contact" in r and "[email]" in r for r in outcome.reasons)


@pytest.mark.parametrize("form", ["parquet", "partitioned"])
def test_ssns_inside_a_column_no_role_names_are_rejected(form, base, tmp_path):
    original, released = base["original"].copy(), base["released"].copy()
    jobs = ["clerk", "nurse", "driver", "teacher"]
    original["occupation"] = [jobs[i % 4] for i in range(len(original))]
    released["occupation"] = [jobs[i % 4] if i % 50 else f"nurse (ssn 536-{10 + i % 80:02d}-"
                              f"{1000 + i:04d})" for i in range(len(released))]
    outcome, _ = _gate(tmp_path, original, released, form)
    assert outcome.verdict == "REJECTED", outcome.reasons
    line = next(r for r in outcome.reasons if "released.occupation" in r)
    assert "[us.ssn]" in line and "536-" not in " ".join(outcome.reasons)


def test_the_honest_parquet_release_passes(base, tmp_path):
    outcome, validation = _gate(tmp_path, base["original"], base["released"], "parquet")
    assert outcome.verdict == "APPROVED", outcome.reasons
    assert set(validation["identifiers"]["scanned"]["released"]) >= {"region", "diagnosis"}


@pytest.mark.parametrize("form", ["csv", "parquet"])
def test_a_column_named_by_an_address_is_refused_by_its_position(form, base, tmp_path):
    released = base["released"].copy()
    released["jane.doe@example.org"] = "x"
    outcome, _ = _gate(tmp_path, base["original"], released, form)
    assert outcome.verdict == "ERROR", outcome.reasons
    position = list(released.columns).index("jane.doe@example.org") + 1
    assert any(f"column {position}'s name holds e-mail addresses" in r
               for r in outcome.reasons), outcome.reasons
    for path in Path(outcome.folder or tmp_path / "out").rglob("*"):
        if path.is_file():
            assert b"jane.doe" not in path.read_bytes(), path


def test_a_zero_width_space_is_refused_as_unclean(base, tmp_path):
    released = base["released"].copy()
    released.loc[released.index[:3], "region"] = released["region"].iloc[:3] + "\u200b"
    outcome, validation = _gate(tmp_path, base["original"], released, "csv")
    assert outcome.verdict == "REJECTED", outcome.reasons
    failed = [c for c in validation["checks"] if not c["success"]]
    assert any(c["check"] == "no control or non-printable characters"
               and c["column"] == "region" and c["unexpected_count"] == 3 for c in failed)
