"""The gate reading and writing S3 over HTTP (moto's server mode on 127.0.0.1)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.conftest import gate_config, run_gate_flow


def _bucket(s3) -> str:
    name = f"riskgate-{uuid.uuid4().hex[:10]}"
    s3.client().create_bucket(Bucket=name)
    return name


def _keys(s3, bucket: str, prefix: str = "") -> list[str]:
    resp = s3.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for o in resp.get("Contents", []))


def test_gate_on_s3_inputs_and_outputs(s3, example_files):
    bucket = _bucket(s3)
    client = s3.client()
    for name in ("original", "released"):
        client.upload_file(str(example_files[name]), bucket, f"in/{name}.csv")
    cfg = gate_config(f"s3://{bucket}/in/original.csv", f"s3://{bucket}/in/released.csv",
                      f"s3://{bucket}/out", storage={"options": s3.options()})
    outcome = run_gate_flow(cfg)
    assert outcome["verdict"] == "APPROVED", outcome["reasons"]
    run_id = outcome["decision_url"].split("/")[-2]
    keys = _keys(s3, bucket, "out/")
    assert keys == [f"out/itest/{run_id}/{f}" for f in (
        "decision.json", "measures.json", "per_record.parquet", "report.html",
        "validation.json")]
    types = {k.rsplit("/", 1)[-1]: client.head_object(Bucket=bucket, Key=k)["ContentType"]
             for k in keys}  # the report link opens in the browser, it does not download
    assert types == {"decision.json": "application/json", "measures.json": "application/json",
                     "per_record.parquet": "application/vnd.apache.parquet",
                     "report.html": "text/html; charset=utf-8",
                     "validation.json": "application/json"}
    body = client.get_object(Bucket=bucket, Key=f"out/itest/{run_id}/decision.json")["Body"]
    decision = json.loads(body.read())
    assert decision["verdict"] == "APPROVED"
    assert decision["inputs"][0]["url"].startswith("s3://")
    text = json.dumps(decision)
    assert "testing" not in text  # the credentials from the environment are never written


def test_credentials_in_config_are_refused(example_files, tmp_path):
    from riskcore.errors import ConfigError
    from riskcore.gate.config import load_config as load_gate_config

    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path), storage={"options": {"secret": "abc", "key": "AKIA"}})
    with pytest.raises(ConfigError, match="credential"):
        load_gate_config(cfg)


def test_endpoint_down_during_write_leaves_no_decision_and_rerun_succeeds(s3, example_files):
    bucket = _bucket(s3)
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      f"s3://{bucket}/out", storage={"options": s3.options()},
                      release_id="fault")
    s3.stop()  # inputs are local: load, checks and measures run; the write step cannot
    try:
        outcome = run_gate_flow(cfg)
    finally:
        s3.start()
    assert outcome["state_type"] == "CRASHED" and outcome["verdict"] == "ERROR"
    assert not [k for k in _keys(s3, bucket) if k.endswith("decision.json")]
    outcome = run_gate_flow(cfg)
    assert outcome["verdict"] == "APPROVED"
    decisions = [k for k in _keys(s3, bucket) if k.endswith("decision.json")]
    assert decisions == [f"out/fault/{outcome['decision_url'].split('/')[-2]}/decision.json"]
