"""Separation of duties on a real server: the judged pipeline cannot choose its rules, its
files, its control or its signature (tests/flows/operations_support.py sets the server up)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
import yaml

from tests.conftest import ROOT, runs_as_another_user
from tests.flows.operations_support import (
    PINNED,
    PLANTED,
    RISKGATE,
    _decision,
    _emit,
    _final_run,
    _pin,
    _pinned,
    _post,
    _post_all,
    _run,
)

pytestmark = [pytest.mark.integration, pytest.mark.waits]


def test_the_judged_pipeline_cannot_choose_its_rules(ops):
    """A payload that names the rules it is judged by (config, policy, original, output
    folder, or a key nobody allowed) ends ERROR naming the key and the pinned config, and
    nothing is written outside the config's output folder."""
    v2 = "s3://ops-data/census/released-v2.csv"
    cases = {
        "steer-policy": ({"released": v2, "policy": "s3://ops-config/lax.yaml"}, "policy"),
        "steer-config": ({"released": v2, "config": "s3://ops-config/other.yaml"}, "config"),
        "steer-original": ({"released": v2, "original": "s3://ops-data/unrelated.csv"},
                           "original"),
        "steer-output": ({"released": v2, "output_url": "s3://ops-out/riskgate/ops-rejected"},
                         "output_url"),
        "steer-unknown": ({"released": v2, "seed": 1}, "seed"),
        "steer-identification": ({"released": v2, "identification": v2}, "identification"),
    }
    def planted() -> list[str]:
        return [o["Key"] for o in ops["s3"].client().list_objects_v2(
            Bucket="ops-out", Prefix="riskgate/ops-rejected/").get("Contents", [])
            if o["Key"].endswith("decision.json")]

    before = planted()
    verdicts = _post_all(ops, {release: payload for release, (payload, _) in cases.items()})
    for release, (_, key) in cases.items():
        verdict = verdicts[release]
        reasons = " ".join(verdict.get("reasons") or [])
        assert verdict.get("verdict") == "ERROR", (release, verdict)
        assert f"payload key '{key}'" in reasons and "gate.yaml" in reasons, reasons
        decision = _decision(ops, release)  # under <config output_url>/<release_id>/<run>/
        assert decision["verdict"] == "ERROR" and decision["approved"] is False
    assert planted() == before  # nothing was planted beside another release's run


def test_a_released_url_outside_the_allowed_prefixes_is_refused(ops):
    with _pinned("s3://ops-config/gate-prefixed.yaml"):
        refused = _post_all(ops, {
            "ops-outside": {"released": "s3://ops-data/other/released.csv"},
            "ops-escape": {"released": "s3://ops-data/census/../other/released.csv"}})
        inside = _emit(ops, "ops-inside")
        outside, escape = refused["ops-outside"], refused["ops-escape"]
    assert inside.returncode == 0, inside.stdout + inside.stderr
    for verdict in (outside, escape):
        assert verdict["verdict"] == "ERROR", verdict
        assert "outside every trigger.released_prefixes" in " ".join(verdict["reasons"])


def test_a_secret_in_a_payload_never_reaches_the_flow_runs(ops, prefect_server):
    """The payload is refused (credentials), and since the trigger hands the flow the event's
    id alone, the secret is in no flow run's parameters, through the API or in the server's
    database (the event itself is the pipeline's, stored as sent)."""
    from prefect.client.orchestration import get_client

    verdict = _post(ops, "ops-secret", {
        "released": f"s3://AKIAIOSFODNN7EXAMPLE:{PLANTED}@ops-data/census/released-v2.csv"})
    assert verdict["verdict"] == "ERROR" and "carries credentials" in " ".join(
        verdict["reasons"])
    assert PLANTED not in json.dumps(verdict)
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(limit=200)
        assert runs and not [r.id for r in runs if PLANTED in json.dumps(
            r.parameters, default=str) or PLANTED in (r.state.message or "" if r.state else "")]
    rows = prefect_server.database_text(("flow_run", "task_run", "log", "artifact",
                                         "flow_run_state", "variable"))
    assert "ops-secret" in rows["flow_run"] or "ops-secret" in rows.get("prefect.db", "")
    assert [name for name, text in rows.items() if PLANTED in text] == []


def test_an_unauthenticated_emit_is_refused_with_one_line(tmp_path, monkeypatch):
    """The README's server set-up turns on Prefect's authentication: a client without
    PREFECT_API_AUTH_STRING is refused, exit 3, one line that says what to set."""
    import os

    from riskgate.flows.local_api import private_server

    monkeypatch.setenv("PREFECT_SERVER_API_AUTH_STRING", "riskgate:test-only")
    monkeypatch.setenv("PREFECT_API_AUTH_STRING", "riskgate:test-only")
    with private_server(home=str(tmp_path / "auth-home")) as url:
        base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
        base.update(PREFECT_API_URL=url, PREFECT_HOME=str(tmp_path / "client-home"))
        cmd = RISKGATE + ["emit-anonymized", "--release", "auth", "--released",
                          str(tmp_path), "--no-checksums"]
        refused = _run(cmd, base, timeout=120)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        lines = [ln for ln in (refused.stdout + refused.stderr).splitlines() if ln.strip()]
        assert len(lines) == 1 and "requires authentication" in lines[0], lines
        assert "PREFECT_API_AUTH_STRING" in lines[0] and "Traceback" not in refused.stderr
        allowed = _run(cmd, {**base, "PREFECT_API_AUTH_STRING": "riskgate:test-only"},
                       timeout=120)
        assert allowed.returncode == 0, allowed.stdout + allowed.stderr
        assert "emitted riskgate.anonymization.completed" in allowed.stdout
        # a wrong or an empty auth string on the commands that talk to the API: one line
        # each, before anything is done (the health check alone needs no credentials)
        config = tmp_path / "gate.yaml"
        config.write_text(yaml.safe_dump({
            "release_id": "auth", "original": "o.csv", "released": "r.csv",
            "output_url": "out", "roles": {"quasi_identifiers": ["a"]},
            "policy": {"version": 1, "checks": ["k_anonymity.k >= 1"]}}))
        for command in (["gate", "--config", str(config)], ["limits", "--gate", "3"],
                        ["deploy"]):
            for given, why in (("riskgate:wrong", "the PREFECT_API_AUTH_STRING given is not "
                                                  "the server's"),
                               ("", "PREFECT_API_AUTH_STRING is not set (or empty)")):
                done = _run(RISKGATE + command, {**base, "PREFECT_API_AUTH_STRING": given},
                            timeout=120)
                text = done.stdout + done.stderr
                lines = [ln for ln in text.splitlines() if ln.strip()]
                assert done.returncode == 3 and len(lines) == 1, (command, given, text)
                assert "refused the request (401)" in lines[0] and why in lines[0], lines[0]


def test_no_run_parameter_can_change_the_rules(ops, prefect_server):
    """What the API's auth string lets a pipeline do, each closed: runs of on-anonymization
    created with their own config, with overrides that swap the policy, with a policy, with a
    payload (and a secret in it) inside the trigger, or with any other parameter, are refused
    by the API before a run exists (the deployment enforces its closed parameter schema), so
    nothing of theirs is stored; the pinned Variable re-pinned to a lax config without a
    redeploy ends ERROR "the pinned config changed since deploy"."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.variables import Variable

    from riskgate.flows.names import TRIGGER_CONFIG_VARIABLE

    secret = f"s3://AKIAIOSFODNN7EXAMPLE:{PLANTED}@ops-data/census/released-v2.csv"
    attempts = {"config": {"config": "s3://ops-config/gate-lax.yaml"},
                "overrides": {"overrides": {"policy": "s3://ops-config/strict.yaml"}},
                "policy": {"policy": {"version": 1, "checks": []}},
                "payload": {"trigger": {"event_id": str(uuid.uuid4()), "payload": {
                    "release_id": "ops-param", "released": secret}}},
                "unknown": {"released": secret}}
    with get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name("release-gate/on-anonymization")
        assert dep.enforce_parameter_schema is True
        assert dep.parameter_openapi_schema["additionalProperties"] is False
        for key, params in attempts.items():
            with pytest.raises(PrefectHTTPStatusError, match="409"):
                client.create_flow_run_from_deployment(dep.id, parameters=params)
                raise AssertionError(f"a run was created with the parameter {key}")
    rows = prefect_server.database_text(("flow_run", "flow_run_state", "log"))
    assert [name for name, text in rows.items() if PLANTED in text] == []
    Variable.set(TRIGGER_CONFIG_VARIABLE, "s3://ops-config/gate-lax.yaml", overwrite=True)
    try:
        repinned = _emit(ops, "ops-repinned")
    finally:
        _pin(PINNED)
    assert repinned.returncode == 3, repinned.stdout + repinned.stderr
    said = " ".join(repinned.stdout.split())
    assert "the pinned config changed since deploy" in said and "gate-lax.yaml" in said


def test_a_deployments_step_cannot_read_the_signing_key(ops):
    """An API holder's deployment whose pull step runs on the gate's worker, dumping its
    environment and trying the key file: the environment holds no key (the signer's socket
    only) and, the worker running as its own user, the key file cannot be read. Without the
    key no decision can be forged for a file never gated."""
    from prefect.client.orchestration import get_client

    loot = ops["root"] / "loot"  # where the worker's user can write (pytest's is not)
    loot.mkdir()
    loot.chmod(0o777)
    key = ops["keys"] / "riskgate-signing.key"
    script = (f"sh -c 'env > {loot}/env.txt; cat {key} > {loot}/key.txt 2> {loot}/key.err "
              f"< /dev/null; cat \"${{RISKGATE_SIGNING_KEY:-/no-key-here}}\" >> {loot}/key.txt "
              f"2>> {loot}/key.err < /dev/null'")
    with get_client(sync_client=True) as client:
        flow = client.read_flow_by_name("riskgate-lost-run")
        dep_id = client.create_deployment(
            flow_id=flow.id, name="innocent-looking", work_pool_name="riskgate-process",
            entrypoint="riskgate.flows.release_gate.lost_run_verdict",
            pull_steps=[{"prefect.deployments.steps.run_shell_script": {"script": script}}],
            parameters={"lost_run": "nothing"})
        run = client.create_flow_run_from_deployment(dep_id)
    final = _final_run(run.id)
    assert (loot / "env.txt").exists(), final.state  # the step ran, on the gate's worker
    env = (loot / "env.txt").read_text()
    assert "RISKGATE_SIGNER_SOCKET=" in env and "RISKGATE_SIGNING_KEY" not in env
    assert "PRIVATE KEY" not in env
    if runs_as_another_user():
        assert (loot / "key.txt").read_bytes() == b""
        assert "Permission denied" in (loot / "key.err").read_text()


def test_the_control_is_the_custodians(ops):
    """A payload that names its own made-up rows as the control (turning a membership alarm
    into a pass) is refused: the control comes from the config unless trigger.allow lists
    it."""
    verdict = _post(ops, "ops-steered-control", {
        "released": "s3://ops-data/census/released-v2.csv",
        "control": "s3://ops-data/census/released-v1.csv"})
    reasons = " ".join(verdict.get("reasons") or [])
    assert verdict["verdict"] == "ERROR"
    assert "payload key 'control' is not allowed" in reasons
    assert "the control is the custodian's holdout" in reasons


def test_emit_trusts_the_decision_not_the_event(ops):
    """Anyone holding the auth string can emit a verdict event. emit-anonymized --wait with
    --public-key reads the run's decision.json and checks its signature: a forged APPROVED
    event pointing at a forged decision ends exit 3, "not verified"."""
    from datetime import UTC, datetime

    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    from riskgate.flows.cli.emit import post_event

    forged = {"schema": "riskgate.decision/1", "release_id": "ops-forged", "verdict": "APPROVED",
              "approved": True, "signed": True, "signing_key": "sha256:" + "0" * 64,
              "inputs": [{"name": "released", "sha256": ops["v2_sha"]}], "reasons": []}
    client = ops["s3"].client()
    client.put_object(Bucket="ops-data", Key="forged/decision.json",
                      Body=json.dumps(forged).encode())
    client.put_object(Bucket="ops-data", Key="forged/decision.json.sig",
                      Body=json.dumps({"schema": "riskgate.signature/2", "signature": "AAAA",
                                       "key_fingerprint": "sha256:" + "0" * 64}).encode())
    with _pinned("s3://ops-config/gate-strict.yaml"):  # the real verdict: REJECTED
        waiting = subprocess.Popen(RISKGATE + [
            "emit-anonymized", "--release", "ops-forged", "--released",
            "s3://ops-data/census/released-v2.csv", "--wait", "--timeout", "240",
            "--public-key", str(ops["keys"] / "riskgate-signing.pub")],
            env=ops["env"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        with get_client(sync_client=True) as api:
            deadline = time.monotonic() + 60
            trigger = []
            while not trigger and time.monotonic() < deadline:
                trigger = api.read_events(filter=EventFilter(
                    event=EventNameFilter(name=["riskgate.anonymization.completed"]),
                    resource=EventResourceFilter(id=["riskgate.release.ops-forged"])),
                    limit=5).events
                time.sleep(0.2)
        assert trigger, "the pipeline's event never arrived"
        post_event(ops["env"]["PREFECT_API_URL"], {
            "id": str(uuid.uuid4()), "occurred": datetime.now(UTC).isoformat(),
            "event": "riskgate.release.approved",
            "resource": {"prefect.resource.id": "riskgate.release.ops-forged"},
            "related": [{"prefect.resource.id": f"prefect.event.{trigger[0].id}",
                         "prefect.resource.role": "trigger"}],
            "payload": {"release_id": "ops-forged", "verdict": "APPROVED",
                        "decision_url": "s3://ops-data/forged/decision.json"}})
        said, _ = waiting.communicate(timeout=300)
    assert waiting.returncode != 0, said
    if "not verified" in said:  # the forged event came first: refused, not believed
        assert waiting.returncode == 3 and "verdict: ERROR" in said
    else:  # the real verdict came first: the decision says REJECTED, and verifies
        assert "decision: verified" in said and waiting.returncode == 1
