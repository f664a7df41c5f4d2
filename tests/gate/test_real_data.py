"""Data as other tools write it, through the whole gate (in this process): codes written as
floats, survey markers for missing, a pandas index column, a column the original lacks, and
a column numeric in one table and text in the other. Each with its verdict and its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate

LAX = {"version": 1, "checks": ["k_anonymity.k >= 1"]}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, pd.DataFrame]:
    from riskcore.examples import write_example

    files = write_example(tmp_path_factory.mktemp("real-base"), n=1500, seed=21)
    read = {"dtype": str, "keep_default_na": False}
    return {"original": pd.read_csv(files["original"], **read),
            "released": pd.read_csv(files["released"], **read)}


def _gate(tmp_path: Path, original: pd.DataFrame, released: pd.DataFrame, *,
          index: bool = False, measures: dict[str, Any] | None = None,
          policy: dict[str, Any] | None = None, **extra: Any) -> tuple[Any, dict[str, Any]]:
    original.to_csv(tmp_path / "original.csv", index=False)
    released.to_csv(tmp_path / "released.csv", index=index)
    given = dict(extra.pop("roles", {}))
    roles = {"quasi_identifiers": ["region", "age", "sex", "education"],
             "sensitive": ["diagnosis"], "direct_identifiers": ["person_id"], **given,
             "types": {"age": "categorical", **given.get("types", {})}}
    cfg = {"release_id": "real", "original": str(tmp_path / "original.csv"),
           "released": str(tmp_path / "released.csv"), "output_url": str(tmp_path / "out"),
           "roles": roles, "measures": measures or {"k_anonymity": {}},
           "policy": policy or LAX, "seed": 3, **extra}
    outcome = run_gate(load_gate(cfg), "run", steps=LocalSteps())
    folder = Path(outcome.folder or "")
    validation = json.loads((folder / "validation.json").read_text()) if (
        folder / "validation.json").exists() else {}
    return outcome, validation


def _codes(frame: pd.DataFrame) -> pd.DataFrame:
    """Education as numeric codes (1..5), the way a survey extract writes them."""
    labels = sorted(set(frame["education"]) - {""})
    out = frame.copy()
    out["education"] = frame["education"].map({v: str(i + 1) for i, v in enumerate(labels)}
                                              ).fillna("")
    return out


def test_codes_written_as_floats_compare_by_value(base, tmp_path):
    """A generator wrote 1.0 where the original writes 1 (pandas upcast a column with a
    missing value): the column compares by value, the attacks see every value comparable and
    utility keeps its shape; the decision records how the column was compared."""
    original = _codes(base["original"])
    released = _codes(base["original"].drop(columns=["person_id"]))
    released["education"] = released["education"].map(lambda v: f"{v}.0" if v else v)
    outcome, validation = _gate(
        tmp_path, original, released, roles={"types": {"education": "categorical"}},
        measures={"k_anonymity": {}, "utility": {"propensity_rows": 400},
                  "inference": {"n_attacks": 100}},
        policy={"version": 1, "checks": ["k_anonymity.k >= 1", "inference.risk <= 1",
                                         "utility.column_shapes >= 0.99"]})
    assert outcome.verdict == "APPROVED", outcome.reasons
    formats = {f["column"]: f for f in validation["formats"]}
    assert formats["education"]["how"].startswith("numbers compared by value")
    measures = json.loads((Path(outcome.folder or "") / "measures.json").read_text())
    utility = next(m for m in measures["measures"] if m["measure"] == "utility")
    assert utility["figures"]["shape.education"] == pytest.approx(1.0)
    inference = next(m for m in measures["measures"] if m["measure"] == "inference")
    assert inference["status"] == "ok", inference.get("reason")


def test_survey_markers_declared_missing_make_a_numeric_column_numeric(base, tmp_path):
    """N for "not applicable" in a numeric column: without a declaration the gate names the
    column, the kind of the values and the fix in one line; with missing_values it passes and
    validation.json records the markers and the cells they replaced."""
    released = base["released"].copy()
    rows = np.arange(0, len(released), 17)
    released.loc[rows, "income"] = "N"
    measures = {"k_anonymity": {}, "utility": {"propensity_rows": 400}}
    extra = {"roles": {"sensitive": ["diagnosis", "income"]}}
    (tmp_path / "a").mkdir()
    outcome, validation = _gate(tmp_path / "a", base["original"], released,
                                measures=measures, **extra)
    assert outcome.verdict == "REJECTED"
    line = " ".join(outcome.reasons)
    assert "released.income: schema agrees with the original" in line
    assert "are not numbers (letters)" in line and "missing_values" in line
    assert "'N'" not in line  # a sensitive column's values are never shown
    (tmp_path / "b").mkdir()
    outcome, validation = _gate(tmp_path / "b", base["original"], released,
                                measures=measures, missing_values=["N"], **extra)
    assert outcome.verdict == "APPROVED", outcome.reasons
    assert validation["missing_values"]["every_column"] == ["N"]
    (tmp_path / "c").mkdir()
    outcome, validation = _gate(tmp_path / "c", base["original"], released,
                                measures=measures, roles={"sensitive": ["diagnosis", "income"],
                                                          "missing_values": {"income": ["N"]}})
    assert outcome.verdict == "APPROVED", outcome.reasons
    assert validation["missing_values"]["replaced"]["released"] == {"income": len(rows)}


def test_a_marker_in_a_quasi_identifier_is_shown_with_the_fix(base, tmp_path):
    original = base["original"].copy()
    original["age"] = original["age"].astype(str)
    released = base["original"].drop(columns=["person_id"]).copy()
    released.loc[::9, "age"] = "?"
    outcome, _ = _gate(tmp_path, original, released, roles={"types": {"age": "integer"}})
    line = " ".join(outcome.reasons)
    assert outcome.verdict == "REJECTED"
    assert "released.age: schema agrees with the original" in line
    assert "(punctuation: '?')" in line and "missing_values: [?]" in line


@pytest.mark.parametrize("round_trip", [False, True], ids=["to_csv", "read-and-written-again"])
def test_a_pandas_index_column_is_refused_naming_it(base, tmp_path, round_trip):
    released = base["released"]
    if round_trip:  # read back with pandas and written again: the header says "Unnamed: 0"
        released.to_csv(tmp_path / "once.csv")
        released = pd.read_csv(tmp_path / "once.csv", dtype=str, keep_default_na=False)
    outcome, validation = _gate(tmp_path, base["original"], released, index=not round_trip)
    assert outcome.verdict == "REJECTED", outcome.reasons
    line = " ".join(outcome.reasons)
    name = "Unnamed: 0" if round_trip else "(unnamed column 1)"
    assert f"released.{name}: every column is named" in line
    assert "index=False" in line and "ignore_columns" in line
    assert "Great Expectations" not in line and "unexpected" not in line


def test_an_index_column_named_index_counting_rows_is_refused(base, tmp_path):
    released = base["released"].reset_index()  # a column "index": 0..n-1
    outcome, _ = _gate(tmp_path, base["original"], released)
    assert outcome.verdict == "REJECTED"
    assert "column(s) ['index'] count the rows" in " ".join(outcome.reasons)


def test_a_column_the_original_lacks_is_refused_unless_ignored(base, tmp_path):
    released = base["released"].copy()
    released["batch"] = "b1"
    (tmp_path / "a").mkdir()
    outcome, _ = _gate(tmp_path / "a", base["original"], released)
    assert outcome.verdict == "REJECTED"
    assert "column(s) ['batch'] are not in the original" in " ".join(outcome.reasons)
    (tmp_path / "b").mkdir()
    outcome, _ = _gate(tmp_path / "b", base["original"], released, ignore_columns=["batch"])
    assert outcome.verdict == "APPROVED", outcome.reasons
    decision = json.loads(Path(outcome.decision_url or "").read_text())
    assert decision["config"]["ignore_columns"] == ["batch"]


def test_a_note_over_two_lines_is_read_and_passes(base, tmp_path):
    """A free-text column nobody measures may hold a line break in a quoted field."""
    original = base["original"].copy()
    original["note"] = "seen"
    released = base["released"].copy()
    released["note"] = ["line one\nline two" if i % 50 == 0 else "ok"
                        for i in range(len(released))]
    outcome, _ = _gate(tmp_path, original, released)
    assert outcome.verdict == "APPROVED", outcome.reasons
