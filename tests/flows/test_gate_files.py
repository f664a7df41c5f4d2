"""The release gate end to end on local files, under Prefect's test harness."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_table, frequencies, k_anonymity, reidentification_risk
from riskcore.data import ColumnType
from tests.conftest import gate_config, run_gate_flow


def _run_dir(outcome: dict) -> Path:
    return Path(outcome["folder"])


def test_gate_on_local_files_writes_complete_audited_outputs(example_files, tmp_path):
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"))
    outcome = run_gate_flow(cfg)
    assert outcome["verdict"] == "APPROVED", outcome["reasons"]
    run = _run_dir(outcome)
    assert sorted(p.name for p in run.iterdir()) == [
        "decision.json", "measures.json", "per_record.parquet", "report.html",
        "validation.json"]
    decision = json.loads((run / "decision.json").read_text())
    assert decision["schema"] == "riskgate.decision/1"
    assert decision["approved"] is True and decision["seed"] == 11
    checksums = {i["name"]: i["sha256"] for i in decision["inputs"]}
    for name in ("original", "released"):
        expected = hashlib.sha256(example_files[name].read_bytes()).hexdigest()
        assert checksums[name] == expected
    assert {"prefect", "great-expectations", "numpy", "pandas"} <= set(decision["versions"])
    assert decision["flow_run_id"] in str(run)
    # each step's time is its own work; the Prefect task runs around it are counted apart
    timings = decision["timings"]
    assert {"load", "validate", "encode", "measures", "task_runs"} <= set(timings)
    assert timings["task_runs"] > 0

    # the figures in the outputs are riskcore's on the same data
    released = pd.read_csv(example_files["released"])
    table = encode_table(released, Roles(("region", "age", "sex", "education"),
                                         weight="weight", types={"age": ColumnType.CATEGORICAL}))
    freq = frequencies(table)
    expected_reid = reidentification_risk(freq, 0.1).figures
    measures = {m["measure"]: m for m in json.loads((run / "measures.json").read_text())
                ["measures"]}
    for key in ("pRa", "pRb", "pRc", "jRc", "mRc"):
        assert measures["reid"]["figures"][key] == pytest.approx(expected_reid[key], rel=1e-12)
    assert measures["k_anonymity"]["figures"]["k"] == k_anonymity(freq).figures["k"]
    checks = {c["figure"]: c for c in decision["checks"]}
    assert checks["reid.pRb"]["value"] == pytest.approx(expected_reid["pRb"])
    assert all(c["verdict"] == "pass" for c in decision["checks"])

    per_record = pd.read_parquet(run / "per_record.parquet")
    assert len(per_record) == len(released)
    np.testing.assert_array_equal(per_record["row"], np.arange(len(released)))
    np.testing.assert_array_equal(per_record["k_anonymity.fk"], freq.fk)
    html = (run / "report.html").read_text()
    assert "APPROVED" in html and "itest" in html


def test_gate_publishes_artifacts_and_verdict_event(example_files, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.events.filters import EventFilter, EventNameFilter

    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="artifact-check")
    outcome = run_gate_flow(cfg)
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["riskgate-artifact-check-summary",
                                        "riskgate-artifact-check-checks",
                                        "riskgate-artifact-check-report"])))
        kinds = {a.key: a for a in arts}
        # local outputs: no link that would 404 in the UI; the summary says where the file is
        assert set(kinds) == {"riskgate-artifact-check-summary", "riskgate-artifact-check-checks"}
        summary = kinds["riskgate-artifact-check-summary"].data
        assert "APPROVED" in summary and "a file on the machine that ran the gate" in summary
        assert outcome["report_url"].replace("_", "\\_").replace("-", "-") in summary
        import time

        events = []
        for _ in range(30):  # events are delivered asynchronously
            page = client.read_events(EventFilter(event=EventNameFilter(
                name=["riskgate.release.approved"])), limit=50)
            events = [e for e in page.events if e.payload.get("release_id") == "artifact-check"]
            if events:
                break
            time.sleep(0.5)
        assert events, "no riskgate.release.approved event"
        assert events[0].resource.id == "riskgate.release.artifact-check"
        assert events[0].payload["verdict"] == "APPROVED"
        run = client.read_flow_run(outcome["decision_url"].split("/")[-2])
        assert run.name == "artifact-check-APPROVED"


def test_a_command_line_gate_beats_only_when_asked(example_files, tmp_path):
    """riskgate gate sends no heartbeats at Prefect's default frequency (nothing reads them,
    and the engine waited up to 1 s for its heartbeat thread at the end of every gate); a
    frequency the user sets is kept."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    def run(release: str) -> str:
        cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                          str(tmp_path / "out"), release_id=release)
        return run_gate_flow(cfg)["decision_url"].split("/")[-2]

    quiet = run("beats-default")
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 30}):
        beating = run("beats-asked")

    def beats(run_id: str) -> int:
        with get_client(sync_client=True) as client:
            return len(client.read_events(EventFilter(
                event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
                resource=EventResourceFilter(id=[f"prefect.flow-run.{run_id}"])),
                limit=10).events)

    deadline = time.monotonic() + 30
    while not beats(beating) and time.monotonic() < deadline:  # delivered asynchronously
        time.sleep(0.5)
    assert beats(beating) >= 1  # the first beat is sent as the run starts
    assert beats(quiet) == 0


def _dirty_case(kind: str, files: dict[str, Path], tmp: Path) -> Path:
    released = files["released"].read_bytes()
    path = tmp / f"released_{kind}.csv"
    if kind == "invalid_utf8":
        lines = released.split(b"\n")
        lines[5] = lines[5].replace(b"North", b"N\xff\xferth", 1).replace(b"East", b"E\xffst", 1)
        lines[9] = lines[9].replace(b",F,", b",\xc3(,", 1).replace(b",M,", b",\xc3(,", 1)
        path.write_bytes(b"\n".join(lines))
    elif kind == "text_in_number":
        df = pd.read_csv(files["released"], dtype=str, keep_default_na=False)
        df.loc[3, "weight"] = "ninety"
        df.to_csv(path, index=False)
    elif kind == "missing_qi":
        df = pd.read_csv(files["released"], dtype=str, keep_default_na=False)
        df.drop(columns=["education"]).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("kind,column,check", [
    ("invalid_utf8", None, "characters decodable in the declared encoding"),
    ("text_in_number", "weight", "values are numbers"),
    ("missing_qi", "education", "column exists"),
])
def test_dirty_data_is_rejected_with_failed_expectations(example_files, tmp_path, kind, column,
                                                         check):
    dirty = _dirty_case(kind, example_files, tmp_path)
    cfg = gate_config(str(example_files["original"]), str(dirty), str(tmp_path / "out"))
    outcome = run_gate_flow(cfg)
    assert outcome["verdict"] == "REJECTED"
    run = _run_dir(outcome)
    assert sorted(p.name for p in run.iterdir()) == ["decision.json", "report.html",
                                                     "validation.json"]
    validation = json.loads((run / "validation.json").read_text())
    failed = [c for c in validation["checks"] if not c["success"]]
    assert failed and all(c["table"] == "released" for c in failed)
    match = [c for c in failed if c["check"] == check and (column is None or c["column"] == column)]
    assert match, failed
    if kind == "text_in_number":
        assert match[0]["unexpected_count"] == 1 and match[0]["example_rows"] == [3]
    if kind == "invalid_utf8":
        assert {c["column"] for c in match} == {"region", "sex"}
        assert sorted({r for c in match for r in c["example_rows"]}) == [4, 8]
    decision = json.loads((run / "decision.json").read_text())
    assert decision["approved"] is False and decision["checks"] == []
    assert any("data not clean" in r for r in decision["reasons"])


def test_unclean_data_shows_no_failed_encode_task(example_files, tmp_path):
    """The encoding begins beside the validate task. On text in a number column both fail;
    the run is REJECTED for the checks and ops see no encode task at all (as when the
    encoding followed the checks), not a failed one. On clean data the encode task shows the
    rest of the encoding, Completed."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    def tasks(outcome: dict) -> list[tuple[str, str]]:
        """(task, state) of the run's task runs, without their numbered suffixes."""
        run_id = outcome["decision_url"].split("/")[-2]
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[run_id])))
        return sorted((re.sub("-[0-9a-f]{3}$", "", t.name), t.state.type.value) for t in runs)

    dirty = _dirty_case("text_in_number", example_files, tmp_path)
    rejected = run_gate_flow(gate_config(str(example_files["original"]), str(dirty),
                                         str(tmp_path / "out"), release_id="dirty"))
    assert rejected["verdict"] == "REJECTED"
    assert tasks(rejected) == [("load-original", "COMPLETED"), ("load-released", "COMPLETED"),
                               ("tell", "COMPLETED"), ("validate", "COMPLETED"),
                               ("write-outputs", "COMPLETED")]
    clean = run_gate_flow(gate_config(str(example_files["original"]),
                                      str(example_files["released"]), str(tmp_path / "out"),
                                      release_id="clean"))
    assert clean["verdict"] == "APPROVED"
    assert ("encode", "COMPLETED") in tasks(clean)


def test_sensitive_values_never_reach_validation_outputs(example_files, tmp_path):
    df = pd.read_csv(example_files["released"], dtype=str, keep_default_na=False)
    df.loc[2, "diagnosis"] = "SECRET-MARKER-\x07"
    path = tmp_path / "released_marker.csv"
    df.to_csv(path, index=False)
    cfg = gate_config(str(example_files["original"]), str(path), str(tmp_path / "out"))
    outcome = run_gate_flow(cfg)
    assert outcome["verdict"] == "REJECTED"
    for f in _run_dir(outcome).iterdir():
        assert b"SECRET-MARKER" not in f.read_bytes(), f.name


def test_a_measure_that_raises_makes_the_verdict_error(example_files, tmp_path):
    # an identification table that lacks the release's classes: k_anonymity and reid raise
    ident = tmp_path / "ident.csv"
    pd.read_csv(example_files["original"]).head(50).to_csv(ident, index=False)
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), identification=str(ident))
    outcome = run_gate_flow(cfg)
    assert outcome["verdict"] == "ERROR" and outcome["exit_code"] == 3
    assert outcome["state_type"] == "CRASHED" and outcome["state_name"] == "Error"
    decision = json.loads((_run_dir(outcome) / "decision.json").read_text())
    assert decision["approved"] is False
    errored = [c for c in decision["checks"] if c["verdict"] == "error"]
    assert errored and "lacks" in errored[0]["message"] and "identification" in errored[0][
        "message"]


def test_a_bad_measure_parameter_is_an_error_before_any_table_is_read(example_files, tmp_path):
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), measures={"k_anonymity": {"ks": [0]}, "reid": {}})
    outcome = run_gate_flow(cfg)
    assert outcome["verdict"] == "ERROR" and outcome["state_name"] == "Error"
    assert "measures.k_anonymity.ks" in outcome["reasons"][0]
    decision = json.loads(Path(outcome["decision_url"]).read_text())  # written all the same
    assert decision["verdict"] == "ERROR" and decision["inputs"] == []


def test_missing_input_file_is_an_error_written_down(example_files, tmp_path):
    cfg = gate_config(str(example_files["original"]), str(tmp_path / "nope.csv"),
                      str(tmp_path / "out"))
    outcome = run_gate_flow(cfg)
    assert outcome["verdict"] == "ERROR"
    decision = json.loads((_run_dir(outcome) / "decision.json").read_text())
    assert "does not exist" in decision["reasons"][0] and "nope.csv" in decision["reasons"][0]


def test_gate_runs_the_alc_and_writes_its_predictions(example_files, tmp_path):
    policy = {"version": 1, "checks": [{"figure": "k_anonymity.k", "min": 1},
                                       {"figure": "alc.max", "max": 0.5, "review_max": 0.75}]}
    measures = {"alc": {"max_attacks": 400, "models": ["logistic_regression"]}}
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), policy=policy, measures=measures)
    outcome = run_gate_flow(cfg)
    run = _run_dir(outcome)
    decision = json.loads((run / "decision.json").read_text())
    check = [c for c in decision["checks"] if c["figure"] == "alc.max"][0]
    measures_doc = json.loads((run / "measures.json").read_text())
    alc = [m for m in measures_doc["measures"] if m["measure"] == "alc"][0]
    attack = alc["details"]["attacks"][0]
    assert attack["secret"] == "diagnosis" and "predictions" not in attack
    if attack["alc"] is None:  # insufficient evidence is never a pass
        assert check["verdict"] == "insufficient" and outcome["verdict"] != "APPROVED"
    else:
        assert check["value"] == attack["alc"] == alc["figures"]["max"]
    preds = pd.read_parquet(run / "alc_predictions.parquet")
    assert len(preds) == attack["n_attacks"] and alc["records"] == {
        "alc_predictions": "alc_predictions.parquet"}
    assert set(preds.columns) >= {"scenario", "target", "attack_rank_score", "attack_correct"}


def test_gate_with_sdcmicro_and_attack_families(example_files, tmp_path):
    policy = {"version": 1, "checks": [
        "sdc.global_risk <= 0.01", "sdc.hier_risk <= 0.05",
        "suda.records_with_msu_share <= 0.05", "population.dankar_fraction <= 0.05",
        "singling_out.risk <= 0.5", "inference.risk <= 0.5"]}
    measures = {"sdc": {}, "suda": {}, "population": {"population_size": 1_000_000},
                "singling_out": {"n_attacks": 100, "mode": "univariate"},
                "inference": {"n_attacks": 200}}
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), policy=policy, measures=measures)
    outcome = run_gate_flow(cfg)
    run = _run_dir(outcome)
    decision = json.loads((run / "decision.json").read_text())
    assert outcome["verdict"] in ("APPROVED", "NEEDS_REVIEW", "REJECTED")
    checks = {c["figure"]: c for c in decision["checks"]}
    for fig in ("sdc.global_risk", "sdc.hier_risk", "suda.records_with_msu_share",
                "singling_out.risk", "inference.risk"):
        assert isinstance(checks[fig]["value"], float), fig
    measures_doc = json.loads((run / "measures.json").read_text())
    by_name = {m["measure"]: m for m in measures_doc["measures"]}
    assert by_name["inference"]["parameters"]["secrets"] == ["diagnosis"]
    per_record = pd.read_parquet(run / "per_record.parquet")
    assert {"sdc.risk", "sdc.hier_risk", "suda.suda_score", "suda.dis_score"} <= set(
        per_record.columns)
