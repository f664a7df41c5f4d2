"""The gate reads the release as ``riskgate diff`` does: the kind and each column's transform in
``validation.json`` and in the report's "what was done to this release"; a mixed release's
families of equivalence classes judge its linked rows (the records it publishes), not the new
rows around them; composition takes its kind from the same reading."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate
from tests.release_corpus import corpus


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("anatomy-gate")
    original, control, releases = corpus(2000, seed=5)
    original.to_csv(root / "original.csv", index=False)
    control.to_csv(root / "control.csv", index=False)
    for r in releases:
        r.released.to_csv(root / f"{r.name}.csv", index=False)
    return {"root": root, **{r.name: root / f"{r.name}.csv" for r in releases}}


def _gate(tables: dict[str, Path], released: str, measures: dict, checks: list[str],
          run: str, **extra: object) -> tuple[dict, dict, Path]:
    cfg = {"release_id": f"anatomy-{released}", "original": "original.csv",
           "released": f"{released}.csv", "control": "control.csv", "output_url": "runs",
           "seed": 4, "roles": {"quasi_identifiers": ["region", "age", "sex", "zip", "puma"],
                                "sensitive": ["diagnosis", "income"]},
           "measures": measures, "policy": {"version": 1, "checks": checks}, **extra}
    path = tables["root"] / f"{run}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    outcome = run_gate(load_gate(path), run, steps=LocalSteps())
    folder = Path(outcome.decision_url or "").parent
    return (json.loads((folder / "validation.json").read_text()),
            json.loads((folder / "measures.json").read_text()), folder)


def test_the_validation_record_and_the_report_say_what_was_done(tables):
    validation, _, folder = _gate(tables, "k-anonymized", {"k_anonymity": {}},
                                  ["k_anonymity.k >= 1"], "kanon",
                                  generalization={"age": "interval", "zip": {"mask": "*"}})
    release = validation["release"]
    assert release["kind"] == "kept"
    assert release["columns"]["age"]["transform"] == "generalized"
    assert release["columns"]["zip"]["type"] == "categorical"
    report = (folder / "report.html").read_text()
    assert 'id="release-anatomy"' in report and "generalized to intervals of width 5" in report


def test_a_mixed_release_is_judged_by_both_and_its_classes_on_its_records(tables):
    validation, measures, folder = _gate(
        tables, "mixed", {"k_anonymity": {}, "copies": {}},
        ["k_anonymity.k >= 1", "copies.exact_excess <= 1"], "mixed")
    release = validation["release"]
    assert release["kind"] == "mixed" and abs(release["linked_share"] - 0.15) <= 0.05
    k = next(m for m in measures["measures"] if m["measure"] == "k_anonymity")
    assert "linked to an original record" in k["details"]["rows"]
    per_record = pd.read_parquet(folder / "per_record.parquet")
    fk = per_record["k_anonymity.fk"]
    assert fk.notna().sum() == release["rows"]["linked"] < len(per_record)
