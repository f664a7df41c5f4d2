"""Operations end to end, as the README's Deploy section runs them: a real Prefect server on
127.0.0.1 (the suite's), moto's S3 server, ``riskgate deploy`` from deployments/prefect.yaml, a
process worker, and ``riskgate emit-anonymized`` from the command line: triggers, verdict
states, review, the compose story (tests/flows/operations_support.py sets it up)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import ROOT, wait_for_paused_run
from tests.flows.operations_support import (
    PINNED,
    RISKGATE,
    _artifacts,
    _decision,
    _emit,
    _emit_all,
    _flow_run,
    _forked,
    _pause_description,
    _pin,
    _pinned,
    _run,
    _wait_for_decision,
)

pytestmark = [pytest.mark.integration, pytest.mark.waits]


def test_triggered_runs_gate_the_emitted_file_and_end_in_verdict_states(ops):
    forked = _forked(ops)
    approved, error = _emit_all(ops, ("ops-approved",), (
        "ops-error", "--no-checksums", {"released": "s3://ops-data/census/nope.csv"}))
    emitted = {"ops-approved": approved, "ops-error": error}
    with _pinned("s3://ops-config/gate-strict.yaml"):  # the custodian tightened the policy
        emitted["ops-rejected"] = _emit(ops, "ops-rejected")
    codes = {r: e.returncode for r, e in emitted.items()}
    assert codes == {"ops-approved": 0, "ops-rejected": 1, "ops-error": 3}, {
        r: e.stdout + e.stderr for r, e in emitted.items()}
    assert _forked(ops) - forked == 3  # each a fork of the worker's standby
    expected = {"ops-approved": ("APPROVED", "COMPLETED", "Approved"),
                "ops-rejected": ("REJECTED", "FAILED", "Rejected"),
                "ops-error": ("ERROR", "CRASHED", "Error")}
    for release, (verdict, state_type, state_name) in expected.items():
        decision = _decision(ops, release)
        assert decision["verdict"] == verdict, decision["reasons"]
        trigger = decision["trigger"]
        assert trigger["event"] == "riskgate.anonymization.completed"
        assert uuid.UUID(trigger["event_id"]) and len(trigger["payload_sha256"]) == 64
        run = _flow_run(decision["flow_run_id"])
        assert (run.state.type.value, run.state.name) == (state_type, state_name)
        assert {"riskgate", f"verdict:{verdict}", f"release:{release}"} <= set(run.tags)
        assert run.name == f"{release}-{verdict}"
    approved = _decision(ops, "ops-approved")
    released = [i for i in approved["inputs"] if i["name"] == "released"][0]
    # the run gated the emitted file, not the config's released-v1.csv
    assert released["url"] == "s3://ops-data/census/released-v2.csv"
    assert released["sha256"] == ops["v2_sha"] == approved["trigger"]["checksums"]["released"]
    assert "nope.csv" in _decision(ops, "ops-error")["reasons"][0]
    prov = approved["provenance"]  # where every input came from
    assert prov["config"] == {**prov["config"], "source": "deployment", "url": PINNED}
    assert len(prov["config"]["sha256"]) == 64 and len(prov["policy"]["sha256"]) == 64
    assert prov["released"]["source"] == "payload" and prov["original"]["source"] == "config"
    assert prov["released"]["sha256"] == ops["v2_sha"]
    # the flow run's parameters hold the event's id and time, never its payload
    run = _flow_run(approved["flow_run_id"])
    assert set(run.parameters["trigger"]) == {"event_id", "event", "occurred"}
    # a verdict is not a crash: the rejected run logs no ERROR
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    rejected = uuid.UUID(_decision(ops, "ops-rejected")["flow_run_id"])
    with get_client(sync_client=True) as client:
        for _ in range(20):  # the worker's process sends its last logs a moment later
            logs = client.read_logs(log_filter=LogFilter(
                flow_run_id=LogFilterFlowRunId(any_=[rejected])))
            if any("a verdict, not a crash" in log.message for log in logs):
                break
            time.sleep(1)
    assert any("verdict REJECTED (a verdict, not a crash)" in log.message for log in logs)
    assert not [log.message for log in logs if log.level >= 40], "ERROR logs for a verdict"


def test_the_compose_demo_runs_outside_docker(ops):
    """docker/custodian.sh and docker/demo.sh, as the compose services run them, against the
    same server and S3: the custodian deploys under its pinned config, with flow runs forked
    from the worker's standby (the signer restarted for it, as the compose signer starts after
    the custodian), the pipeline writes its release
    and manifest with no Prefect API in its environment, the watcher finds it, and the
    publishing step's riskgate verify refuses the NEEDS_REVIEW decision."""
    import os

    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    custodian = {**ops["env"], "PATH": path, "AWS_ENDPOINT_URL": ops["s3"].url,
                 "KEYS_DIR": str(ops["keys"])}
    try:
        done = subprocess.run(["sh", "docker/custodian.sh"], env=custodian, cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "triggered gate: config pinned" in done.stdout
        assert "watch-releases looks every 10 s" in done.stdout
        # the compose worker (docker/worker.sh) runs a standby beside it, as this suite's does
        assert "start each flow run as `riskgate flow-run`" in done.stdout, done.stdout
        ops["start_signer"]("s3://riskgate-config/gate.yaml")
        pipeline = {k: v for k, v in custodian.items() if not k.startswith("PREFECT_")}
        done = subprocess.run(["sh", "docker/demo.sh"], env={**pipeline, "DEMO_TIMEOUT": "240"},
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        said = done.stdout + done.stderr
        assert done.returncode == 0, said
        assert "verdict: NEEDS_REVIEW" in said
        assert "not verified: verdict NEEDS_REVIEW" in " ".join(said.split())
    finally:
        _pin(PINNED)
        ops["start_signer"]()


def test_the_report_is_one_click_away(ops):
    decision = _decision(ops, "ops-rejected")
    arts = _artifacts(decision["flow_run_id"])
    assert set(arts) == {"summary", "checks", "report"}
    match = re.fullmatch(r"\[riskgate report ops-rejected\]\((.+)\)", arts["report"].data)
    assert match, arts["report"].data  # a link artifact: Markdown [text](url)
    link = match.group(1)
    assert link.startswith("http://") or link.startswith("https://")
    page = httpx.get(link, timeout=10)
    assert page.status_code == 200 and "REJECTED" in page.text and "<html" in page.text
    summary = arts["summary"].data
    assert "\\>= 50" in summary and "k\\_anonymity.k" in summary  # escaped, not a block quote
    assert "| k\\_anonymity.k | 4 |" in summary or "| k\\_anonymity.k |" in summary
    assert link in summary


def test_a_paused_review_shows_its_checks_and_frees_its_slot(ops):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.flow_runs import resume_flow_run

    with _pinned("s3://ops-config/gate-review.yaml"):
        # the pipeline waits: told at once that a person must decide, then, unanswered at its
        # --timeout, NEEDS_REVIEW (exit 2), never "is a worker running?"
        waiting = subprocess.Popen(RISKGATE + [
            "emit-anonymized", "--release", "ops-review", "--released",
            "s3://ops-data/census/released-v2.csv", "--wait", "--timeout", "45"],
            env=ops["env"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        paused = wait_for_paused_run("ops-review")  # its config was read: pinned back below
    # a run that waits for a person is found by its verdict
    assert "verdict:NEEDS_REVIEW" in paused.tags and paused.name == "ops-review-NEEDS_REVIEW"
    with get_client(sync_client=True) as client:
        # the report and measures exist before the reviewer is asked; decision.json does not
        keys = [o["Key"] for o in ops["s3"].client().list_objects_v2(
            Bucket="ops-out", Prefix="riskgate/ops-review/").get("Contents", [])]
        names = {k.rsplit("/", 1)[-1] for k in keys}
        assert {"report.html", "measures.json", "validation.json"} <= names
        assert "decision.json" not in names
        text = _pause_description(paused.id)  # the form's text, as the UI shows it
        shown = re.search(r"k_anonymity\.k = (\d+) \(threshold >= 50", text)
        assert shown and "report.html" in text, text
        # the paused run holds no gate slot ...
        from riskgate.flows.limits import GATE_LIMIT
        assert client.read_global_concurrency_limit_by_name(GATE_LIMIT).active_slots == 0
        # ... so five more gates run while the review waits
        emits = [subprocess.Popen(RISKGATE + [
            "emit-anonymized", "--release", f"ops-slot-{i}", "--released",
            "s3://ops-data/census/released-v2.csv"],
            env=ops["env"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for i in range(5)]
        assert all(p.wait(timeout=120) == 0 for p in emits)
        deadline = time.monotonic() + 300
        done: dict[str, Any] = {}
        while time.monotonic() < deadline and len(done) < 5:
            for i in range(5):
                release = f"ops-slot-{i}"
                if release in done:
                    continue
                runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                    name=FlowRunFilterName(like_=release)))
                if runs and runs[0].state and runs[0].state.is_final():
                    done[release] = runs[0]
            time.sleep(2)
        assert len(done) == 5, f"only {sorted(done)} finished while the review was paused"
        # (how long each waited for its slot is the machine's load, not a property of the
        # gate: not asserted; the property is the count of slots held, asserted above)
        still = client.read_flow_run(paused.id)
        assert still.state.type is StateType.PAUSED
        told, _ = waiting.communicate(timeout=120)
        assert waiting.returncode == 2, told
        assert "waits for a reviewer in the Prefect UI" in told
        assert "verdict: NEEDS_REVIEW" in told and "worker" not in told
        resume_flow_run(paused.id, run_input={"approve": False, "reviewer": "dpo@example.org",
                                              "comment": "k too small"})
    for _ in range(120):
        try:
            decision = _decision(ops, "ops-review")
            break
        except AssertionError:
            time.sleep(1)
    assert decision["verdict"] == "REJECTED" and decision["review"]["reviewer"] == \
        "dpo@example.org"
    assert float(shown.group(1)) == decision["checks"][0]["value"]
    assert _flow_run(decision["flow_run_id"]).state.name == "Rejected"


def test_a_trigger_whose_config_cannot_be_read_ends_error_for_the_waiting_pipeline(ops):
    """A run that fails before its gate starts still answers the event that triggered it:
    ``--wait`` gets the ERROR verdict at once, not after its timeout."""
    with _pinned("s3://ops-config/missing.yaml"):
        done = _emit(ops, "ops-no-config")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "verdict: ERROR" in done.stdout and "missing.yaml" in done.stdout  # not a timeout


def test_emit_without_a_reachable_api_fails(ops, tmp_path):
    env = {**ops["env"], "PREFECT_API_URL": "http://127.0.0.1:9/api"}
    dead = _run(RISKGATE + ["emit-anonymized", "--release", "x", "--released",
                            "s3://ops-data/census/released-v2.csv", "--no-checksums"], env,
                timeout=60)
    assert dead.returncode == 3 and "unreachable" in dead.stdout + dead.stderr
    env.pop("PREFECT_API_URL")
    none = _run(RISKGATE + ["emit-anonymized", "--release", "x", "--released",
                            "s3://ops-data/census/released-v2.csv", "--no-checksums"], env,
                timeout=60)
    assert none.returncode == 3 and "PREFECT_API_URL is not set" in none.stdout + none.stderr


def test_a_config_on_s3_runs_from_the_cli(ops):
    done = _run(RISKGATE + ["gate", "--config", "s3://ops-config/gate.yaml", "--release-id",
                            "ops-cli", "--json"], ops["env"])
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["verdict"] == "APPROVED"
    assert outcome["decision_url"].startswith("s3://ops-out/riskgate/ops-cli/")


def test_the_committed_prefect_yaml_is_the_one_source_rendered():
    from riskgate.flows.deployments import prefect_yaml

    assert (ROOT / "deployments/prefect.yaml").read_text() == prefect_yaml()


def test_the_operations_run_on_prefect_with_postgresql(ops, prefect_server):
    """The suite's server is on PostgreSQL, as production is (SQLite locked
    under the concurrent gates); the fresh-home test below keeps SQLite's smoke test. The
    runs these tests triggered are rows of PostgreSQL's flow_run table."""
    import asyncio

    import asyncpg

    from tests import postgres

    if not postgres.available() and not prefect_server.database:
        pytest.fail("PostgreSQL's initdb and pg_ctl are needed (.ci/run starts a cluster)")
    assert prefect_server.database and prefect_server.database.startswith("postgresql")
    assert _emit(ops, "ops-postgres").returncode == 0

    async def count() -> int:
        conn = await asyncpg.connect(prefect_server.database.replace("+asyncpg", ""))
        try:
            return int(await conn.fetchval(
                "select count(*) from flow_run where name like 'ops-postgres%'"))
        finally:
            await conn.close()

    assert asyncio.run(count()) == 1


def test_a_fresh_prefect_home_gate_runs_with_a_private_server(tmp_path, example_files):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "fresh-home")
    cfg = yaml.safe_load((ROOT / "examples/gate.yaml").read_text())
    cfg.update(original=str(example_files["original"]), released=str(example_files["released"]),
               output_url=str(tmp_path / "out"), policy=str(ROOT / "examples/policy.yaml"))
    cfg["generalization"]["region"] = {"hierarchy": str(example_files["region_hierarchy"])}
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(cfg))
    done = _run(RISKGATE + ["gate", "--config", str(path)], env)
    assert done.returncode in (0, 1, 2), done.stdout + done.stderr
    assert "verdict:" in done.stdout and "Traceback" not in done.stdout + done.stderr
    decisions = list(Path(tmp_path / "out").rglob("decision.json"))
    assert decisions
    # output in a pipe: whole lines (the decision's path on one line, never cut at 80
    # columns), and one line per step and per family as each finishes, with its time
    assert f"decision: {decisions[0]}" in done.stdout.splitlines()
    steps = [ln.strip() for ln in done.stderr.splitlines() if ln.startswith("  ")]
    for step in ("load", "validate", "encode", "measure alc", "measures"):
        assert any(re.fullmatch(rf"{step}: \d+\.\d s", ln) for ln in steps), (step, steps)


def test_a_pipeline_with_write_access_alone_triggers_its_gate(ops):
    """The manifest path end to end: a pipeline whose environment holds no Prefect URL nor
    auth string writes its release and release.json under its prefix; watch-releases finds
    the manifest, the gate runs under the pinned rules, the signer signs, riskgate verify
    accepts it under the custodian's config and refuses it under another; the same manifest
    seen again starts no second run."""
    import os

    manifest_config = "s3://ops-config/gate-manifest.yaml"
    pipeline = {k: v for k, v in ops["env"].items() if not k.startswith("PREFECT_")}
    pipeline["PATH"] = os.environ["PATH"]
    write = ("import hashlib, json, sys\n"
             "from riskcore.storage import read_bytes, write_bytes, deployment_options\n"
             "data = read_bytes('s3://ops-data/census/released-v2.csv', None, max_bytes=1<<30,"
             " what='x').data\n"
             "base = 's3://ops-releases/census/v3/'\n"
             "write_bytes(base + 'released.csv', data, overwrite=True)\n"
             "doc = {'release_id': 'ops-manifest', 'released': 'released.csv',\n"
             "       'checksums': {'released': hashlib.sha256(data).hexdigest()}}\n"
             "write_bytes(base + 'release.json', json.dumps(doc).encode(), overwrite=True)\n")
    with _pinned(manifest_config, watch_every=10):
        done = subprocess.run([sys.executable, "-c", write], env=pipeline, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        decision = _wait_for_decision(ops, "ops-manifest")
        assert decision["verdict"] == "APPROVED", decision["reasons"]
        assert decision["trigger"]["manifest"] == "s3://ops-releases/census/v3/release.json"
        assert decision["signed"] is True
        assert decision["provenance"]["config"]["url"] == manifest_config
        released = "s3://ops-releases/census/v3/released.csv"
        decision_url = f"s3://ops-out/riskgate/ops-manifest/{decision['flow_run_id']}/" \
            "decision.json"
        pub = str(ops["keys"] / "riskgate-signing.pub")
        ok = _run(RISKGATE + ["verify", released, "--decision", decision_url, "--public-key",
                              pub, "--config", manifest_config], ops["env"])
        assert ok.returncode == 0 and "verified:" in ok.stdout, ok.stdout + ok.stderr
        other = _run(RISKGATE + ["verify", released, "--decision", decision_url,
                                 "--public-key", pub, "--config", PINNED], ops["env"])
        assert other.returncode == 1 and "not verified: different rules" in other.stdout + \
            other.stderr
        seen = time.monotonic()
        marker = [o["Key"] for o in ops["s3"].client().list_objects_v2(
            Bucket="ops-out", Prefix="riskgate/_manifests/").get("Contents", [])
            if "/release-ids/" not in o["Key"]]
        assert len(marker) == 1
        bound = json.loads(ops["s3"].client().get_object(
            Bucket="ops-out", Key="riskgate/_manifests/release-ids/ops-manifest.json")[
            "Body"].read())
        assert bound["folder"] == "s3://ops-releases/census/v3/"
        # a manifest that names its own control is refused, and its ERROR is filed under the
        # release it names, where the pipeline looks (while the watcher looks twice more);
        # manifests that cannot be judged are filed where the pipeline looks, under their
        # folder's path when they name no release id that can be read: one over 64 KB, one
        # nested 30,000 arrays deep, one borrowing another folder's release id (written once
        # that folder's release id is bound: all four in one look of the watcher)
        steer = write.replace("census/v3/", "census/v4/").replace(
            "'released': 'released.csv',", "'released': 'released.csv', 'control': "
            "'released.csv',").replace("'ops-manifest'", "'ops-manifest-steered'")
        hostile = {"v5": "b'{\"release_id\": \"ops-huge\", \"pad\": \"' + b'x' * 70000 + b'\"}'",
                   "v6": "b'{\"release_id\": ' + b'[' * 30000 + b']' * 30000 + b'}'",
                   "v7": "json.dumps({'release_id': 'ops-manifest', 'released': "
                         "'released.csv'}).encode()"}
        code = steer + "".join(
            f"write_bytes('s3://ops-releases/census/{folder}/release.json', {body}, "
            "overwrite=True)\n" for folder, body in hostile.items())
        done = subprocess.run([sys.executable, "-c", code], env=pipeline, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        steered = _wait_for_decision(ops, "ops-manifest-steered")
        assert steered["verdict"] == "ERROR", steered["reasons"]
        assert "payload key 'control' is not allowed" in steered["reasons"][0]
        assert steered["trigger"]["manifest"] == "s3://ops-releases/census/v4/release.json"
        reasons = {folder: _wait_for_decision(ops, f"ops-releases-census-{folder}")["reasons"][0]
                   for folder in hostile}
        assert "above the limit of 0.1 MB; a manifest names a few files" in reasons["v5"], \
            reasons["v5"]
        assert "nested too deeply" in reasons["v6"], reasons["v6"]
        assert "release id 'ops-manifest' belongs to the manifests of " \
               "'s3://ops-releases/census/v3/'" in reasons["v7"], reasons["v7"]
        time.sleep(max(0.0, 25 - (time.monotonic() - seen)))  # the watcher looked twice more
        _decision(ops, "ops-manifest")  # still exactly one decision
    signatures = [json.loads(line) for line in ops["signatures"].read_text().splitlines()]
    assert any(s["flow_run_id"] == decision["flow_run_id"] for s in signatures)


def test_the_watcher_waits_behind_the_gates(ops):
    """watch-releases runs from a queue the worker polls after the gates' (deploy creates it
    with a higher priority number): after a worker outage the schedule has left one late
    watcher run per interval, and a restarted worker must start the waiting gates first."""
    from prefect.client.orchestration import get_client

    from riskgate.flows.deployments import WATCH_QUEUE, WORK_POOL

    with get_client(sync_client=True) as client:
        watch = client.read_deployment_by_name("riskgate-watch-releases/watch-releases")
        gate = client.read_deployment_by_name("release-gate/on-anonymization")
        queues = {q.name: q.priority for q in client.read_work_queues(work_pool_name=WORK_POOL)}
    assert (watch.work_queue_name, gate.work_queue_name) == (WATCH_QUEUE, "default")
    assert queues[WATCH_QUEUE] > queues["default"], queues
