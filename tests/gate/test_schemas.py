"""decision.json and measures.json against their shipped, versioned JSON schemas."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from riskcore.gate.schemas import SCHEMAS, load_schema, validate


def test_every_schema_is_a_valid_draft_2020_12_schema():
    for name in SCHEMAS:
        jsonschema.Draft202012Validator.check_schema(load_schema(name))


@pytest.fixture(scope="module")
def demo_run(prefect_server, tmp_path_factory):
    """The bundled example through the real gate, from the command line."""
    root = Path(__file__).resolve().parents[2]
    out = tmp_path_factory.mktemp("schemas")
    exe = [sys.executable, "-m", "riskgate.flows.cli"]
    subprocess.run([*exe, "example", str(out / "data"), "--rows", "1500"], check=True, cwd=root)
    cfg = (root / "examples/gate.yaml").read_text()
    cfg = cfg.replace("../build/demo/", str(out / "data") + "/").replace(
        "policy: policy.yaml", f"policy: {root / 'examples/policy.yaml'}")
    (out / "gate.yaml").write_text(cfg)
    done = subprocess.run([*exe, "gate", "--config", str(out / "gate.yaml"), "--json",
                           "--report-detail", "full"],
                          capture_output=True, text=True, cwd=root)
    decisions = list((out / "data/runs").glob("*/*/decision.json"))
    assert len(decisions) == 1, done.stdout[-2000:] + done.stderr[-2000:]
    return done, decisions[0].parent


def test_gate_outputs_validate_and_exit_code_matches_the_verdict(demo_run):
    done, run = demo_run
    decision = json.loads((run / "decision.json").read_text())
    measures = json.loads((run / "measures.json").read_text())
    validate(decision)
    validate(measures)
    codes = {"APPROVED": 0, "REJECTED": 1, "NEEDS_REVIEW": 2, "ERROR": 3}
    assert done.returncode == codes[decision["verdict"]], done.stderr[-2000:]
    assert json.loads(done.stdout)["verdict"] == decision["verdict"]
    # --report-detail full overrides the config: recorded, and the examples are written
    assert decision["config"]["report"]["detail"] == "full"
    examples = json.loads((run / "examples.json").read_text())
    assert examples["ranked_by"] == "reid.prosecutor_risk" and len(examples["rows"]) == 10
    assert "Example values (report detail: full)" in (run / "report.html").read_text()


def test_the_schemas_catch_broken_documents(demo_run):
    _, run = demo_run
    decision = json.loads((run / "decision.json").read_text())
    bad = copy.deepcopy(decision)
    bad["verdict"] = "MAYBE"
    with pytest.raises(jsonschema.ValidationError, match="MAYBE"):
        validate(bad)
    bad = copy.deepcopy(decision)
    bad["approved"] = True  # approved needs the APPROVED verdict
    if decision["verdict"] != "APPROVED":
        with pytest.raises(jsonschema.ValidationError):
            validate(bad)
    bad = copy.deepcopy(decision)
    bad["inputs"][0]["sha256"] = "not-a-checksum"
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    measures = json.loads((run / "measures.json").read_text())
    bad = copy.deepcopy(measures)
    bad["measures"][0]["status"] = "not_computable"
    bad["measures"][0]["reason"] = None  # a measure that could not compute must say why
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    with pytest.raises(KeyError, match="no schema"):
        validate({"schema": "riskgate.unknown/9"})


def test_measure_command_json_validates_against_the_measures_schema(demo_run, capsys):
    from riskgate.flows.cli import main

    run = demo_run[1]
    released = run.parents[2] / "released.csv"
    assert main(["measure", str(released), "--qi", "region,age,sex,education", "--sensitive",
                 "diagnosis", "--weight", "weight", "--household", "household_id", "--suda",
                 "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    validate(doc)
    assert doc["release_id"] == "released" and doc["flow_run_id"] is None
    gate = {m["measure"]: m for m in json.loads((run / "measures.json").read_text())["measures"]}
    ours = {m["measure"]: m for m in doc["measures"]}
    # the command line and the gate compute the same figures from the same table
    assert ours["sdc"]["figures"] == pytest.approx(gate["sdc"]["figures"])
    assert ours["k_anonymity"]["figures"] == gate["k_anonymity"]["figures"]


def test_the_demo_shows_copies_in_its_outputs_and_the_policy_reads_them(demo_run):
    """Per-record DCR and copy flags keyed by row number, the report's section, and
    the example policy's two checks (the k-anonymized demo reproduces its rows in the
    release's domain: review; no control table: the holdout share cannot pass)."""
    import pandas as pd

    _, run = demo_run
    per_record = pd.read_parquet(run / "per_record.parquet")
    assert {"copies.dcr", "copies.exact_copy"} <= set(per_record.columns)
    assert per_record["copies.exact_copy"].isin([0, 1]).all()
    assert per_record["copies.dcr"].notna().sum() == min(1500, 5000)  # the compared sample
    report = (run / "report.html").read_text()
    assert 'data-plot="copies-dcr-original"' in report and 'id="copy-counts"' in report
    decision = json.loads((run / "decision.json").read_text())
    checks = {c["figure"]: c for c in decision["checks"]}
    assert checks["copies.exact_share"]["verdict"] == "review"
    assert checks["copies.exact_share"]["value"] > 0.5  # most rows, as generalized
    assert checks["copies.holdout_share"]["verdict"] == "insufficient"
    assert "control table" in json.dumps(checks["copies.holdout_share"])
