"""Operations end to end, as the README's Deploy section runs them: a real Prefect server on
127.0.0.1 (the suite's), moto's S3 server, ``riskgate deploy`` from deployments/prefect.yaml, a
process worker, and ``riskgate emit-anonymized`` from the command line."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
import yaml

from riskcore.errors import RiskgateError
from tests.conftest import ROOT, runs_as_another_user, unprivileged, wait_for_paused_run

pytestmark = pytest.mark.integration
RISKGATE = [sys.executable, "-m", "riskgate.flows.cli"]


def _run(cmd: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def ops(prefect_server, s3, tmp_path_factory):
    """Config, policy and tables in S3; the gate deployed; a worker polling its pool."""
    from riskcore.examples import write_example

    # the store's endpoint only the documented way: every process, worker,
    # CLI and emitting pipeline, has $RISKGATE_STORAGE_OPTIONS; no AWS_ENDPOINT_URL anywhere
    env = {**prefect_server.env(), "RISKGATE_STORAGE_OPTIONS": json.dumps(
               {"endpoint_url": s3.url}),
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("AWS_ENDPOINT_URL", None)
    _S3_URL[:] = [s3.url]
    files = write_example(tmp_path_factory.mktemp("ops"), n=2000, seed=5)
    client = s3.client()
    for bucket in ("ops-config", "ops-data", "ops-out"):
        client.create_bucket(Bucket=bucket)
    client.upload_file(str(files["original"]), "ops-data", "census/original.csv")
    client.upload_file(str(files["released"]), "ops-data", "census/released-v1.csv")
    # a different released file than the config's: the one the pipeline just wrote
    v2 = pd.read_csv(files["released"]).iloc[::-1]
    v2_bytes = v2.to_csv(index=False).encode()
    client.put_object(Bucket="ops-data", Key="census/released-v2.csv", Body=v2_bytes)
    base = yaml.safe_load((ROOT / "examples/gate.yaml").read_text())
    base.update(original="s3://ops-data/census/original.csv",
                released="s3://ops-data/census/released-v1.csv",
                output_url="s3://ops-out/riskgate", policy="policy.yaml",
                measures={"k_anonymity": {}, "reid": {}, "l_diversity": {}})
    base.pop("generalization")  # no attack here; the compose demo test declares it
    policies = {
        "policy.yaml": {"version": 1, "checks": ["k_anonymity.k >= 3", "reid.pRb <= 0.34"]},
        "strict.yaml": {"version": 1, "checks": ["k_anonymity.k >= 50"]},
        "review.yaml": {"version": 1, "checks": [{"figure": "k_anonymity.k", "min": 50,
                                                  "review_min": 1}]},
    }
    for name, doc in policies.items():
        client.put_object(Bucket="ops-config", Key=name, Body=yaml.safe_dump(doc).encode())
    client.put_object(Bucket="ops-config", Key="gate.yaml", Body=yaml.safe_dump(base).encode())
    strict = {**base, "policy": "strict.yaml"}
    client.put_object(Bucket="ops-config", Key="gate-strict.yaml",
                      Body=yaml.safe_dump(strict).encode())
    review = {**base, "policy": "review.yaml", "review": "pause", "review_timeout_s": 600}
    client.put_object(Bucket="ops-config", Key="gate-review.yaml",
                      Body=yaml.safe_dump(review).encode())
    # the way for a judged pipeline: a manifest under a prefix it can write, the rest of the
    # store out of its reach
    client.create_bucket(Bucket="ops-releases")
    manifest = {**base, "trigger": {"released_prefixes": ["s3://ops-releases/census/"]}}
    client.put_object(Bucket="ops-config", Key="gate-manifest.yaml",
                      Body=yaml.safe_dump(manifest).encode())
    prefixed = {**base, "trigger": {"released_prefixes": ["s3://ops-data/census/"]}}
    client.put_object(Bucket="ops-config", Key="gate-prefixed.yaml",
                      Body=yaml.safe_dump(prefixed).encode())
    lax = {**base, "policy": {"version": 1, "checks": ["k_anonymity.k >= 1"]}}
    client.put_object(Bucket="ops-config", Key="gate-lax.yaml",
                      Body=yaml.safe_dump(lax).encode())

    # the key where no flow reads it: a folder only this (root) user reads, and the signer,
    # a process of this user, on a socket the worker's user may reach
    # (outside pytest's own temporary folder, which only this user may enter: the worker's
    # user must reach its home and the signer's socket)
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="riskgate-ops-trust-"))
    root.chmod(0o755)
    keys = root / "keys"
    assert _run(RISKGATE + ["keygen", str(keys)], env).returncode == 0
    keys.chmod(0o700)
    sockets = root / "signer"
    sockets.mkdir()
    sockets.chmod(0o755)
    signers: list[subprocess.Popen] = []

    def start_signer(*extra: str) -> None:
        for old in signers:
            old.terminate()
            old.wait(timeout=30)
        cmd = RISKGATE + ["signer", "--key", str(keys / "riskgate-signing.key"),
                          "--socket", str(sockets / "signer.sock"),
                          "--log", str(root / "signatures.jsonl")]
        for url in (*SIGNED_CONFIGS, *extra):
            cmd += ["--config", url]
        signer = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        signers.append(signer)
        line = signer.stdout.readline() if signer.stdout else ""
        assert line.startswith("signer: key sha256:"), line + signer.stdout.read()

    # a lost run is declared after 60 s, the shortest deploy accepts (90 s by default): every
    # later deploy of the module keeps it, and the lost-run test waits a half minute less
    start_signer()
    deployed = _run(RISKGATE + ["deploy", "--trigger-config", PINNED, "--lost-after",
                                str(LOST_AFTER_TEST_S)], env)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert "triggered gate: config pinned" in deployed.stdout
    assert f"after {LOST_AFTER_TEST_S} s without a heartbeat" in deployed.stdout
    assert _run(RISKGATE + ["limits", "--gate", "5"], env).returncode == 0
    workers: list[subprocess.Popen] = []

    def start_worker() -> subprocess.Popen:
        # as the README deploys it: an unprivileged user, the signer's socket, no key
        cmd, worker_env, user = unprivileged(
            [sys.executable, "-m", "prefect", "worker", "start", "--pool", "riskgate-process",
             "--limit", "10"],
            {**env, "PREFECT_WORKER_QUERY_SECONDS": "1", "PREFECT_WORKER_PREFETCH_SECONDS": "5",
             "RISKGATE_SIGNER_SOCKET": str(sockets / "signer.sock")}, root / "worker-home")
        worker_env.pop("RISKGATE_SIGNING_KEY", None)
        log = open(root / f"worker-{len(workers)}.log", "wb")  # noqa: SIM115 (kept open)
        worker = subprocess.Popen(cmd, env=worker_env, cwd=worker_env["PREFECT_HOME"],
                                  stdout=log, stderr=subprocess.STDOUT, **user)
        workers.append(worker)
        return worker

    start_worker()
    yield {"env": env, "s3": s3, "v2_sha": hashlib.sha256(v2_bytes).hexdigest(),
           "workers": workers, "start_worker": start_worker, "start_signer": start_signer,
           "keys": keys, "signatures": root / "signatures.jsonl", "root": root}
    for signer in signers:
        signer.terminate()
    import shutil

    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:  # a worker still finishing a run's process is stopped without waiting longer
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=30)
    kept = tmp_path_factory.mktemp("ops-logs")  # the workers' logs outlive the run's folder
    for log_file in root.glob("worker-*.log"):
        shutil.copy(log_file, kept / log_file.name)
    shutil.rmtree(root, ignore_errors=True)


PINNED = "s3://ops-config/gate.yaml"
#: the custodian's configs the module's signer signs for (the pinned one and those a test
#: pins for a while, as a custodian's redeploy would)
SIGNED_CONFIGS = (PINNED, "s3://ops-config/gate-strict.yaml", "s3://ops-config/gate-review.yaml",
                  "s3://ops-config/gate-prefixed.yaml", "s3://ops-config/gate-manifest.yaml")
LOST_AFTER_TEST_S = 60


def _pin(url: str, watch_every: int = 60) -> None:
    """What riskgate deploy --trigger-config URL records, without deploying the flows again:
    the Variable, and the config's SHA-256 in the triggered deployments' tags (each run
    checks them); the watcher runs when the config lists released prefixes."""
    import os

    from riskcore.gate.config import load_gate
    from riskgate.flows.cli.ops import record_pinned, recorded_tags, set_trigger_config

    options = json.loads(os.environ.get("RISKGATE_STORAGE_OPTIONS") or "{}") or {
        "endpoint_url": _S3_URL[0]}
    try:
        gate = load_gate(url, None, options)
        sha, watch = (str(gate.provenance["config"]["sha256"]),
                      bool(gate.config.trigger.released_prefixes))
    except RiskgateError:  # a config that cannot be read: its runs end ERROR
        sha, watch = "0" * 64, False
    set_trigger_config(url)
    nightly = recorded_tags().get("nightly-recheck")
    record_pinned({"on-anonymization": sha, "watch-releases": sha, "nightly-recheck": nightly},
                  watch_every, watch)


#: the S3 endpoint of the module (for _pin, which reads configs in this process)
_S3_URL: list[str] = []


@contextmanager
def _pinned(url: str, watch_every: int = 60) -> Iterator[None]:
    """The triggered gate's pinned config for a while (what riskgate deploy
    --trigger-config records), then back to the module's."""
    _pin(url, watch_every)
    try:
        yield
    finally:
        _pin(PINNED)


def _emit(ops: dict[str, Any], release: str, *extra: str, wait: bool = True,
          released: str = "s3://ops-data/census/released-v2.csv"
          ) -> subprocess.CompletedProcess:
    cmd = RISKGATE + ["emit-anonymized", "--release", release, "--released", released,
                      *extra]
    if wait:
        cmd += ["--wait", "--timeout", "240"]
    return _run(cmd, ops["env"])


def _emit_all(ops: dict[str, Any], *calls: tuple[Any, ...]) -> list[subprocess.CompletedProcess]:
    """Several :func:`_emit` at once (each ``(release, *extra)``, or with a ``released`` URL
    as a last dict), as pipelines do: the worker gates them side by side."""
    from concurrent.futures import ThreadPoolExecutor

    def one(call: tuple[Any, ...]) -> subprocess.CompletedProcess:
        kwargs = call[-1] if isinstance(call[-1], dict) else {}
        args = call[:-1] if kwargs else call
        return _emit(ops, *args, **kwargs)

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(one, calls))


def _decision(ops: dict[str, Any], release: str) -> dict[str, Any]:
    client = ops["s3"].client()
    keys = [o["Key"] for o in client.list_objects_v2(
        Bucket="ops-out", Prefix=f"riskgate/{release}/").get("Contents", [])
        if o["Key"].endswith("decision.json")]
    assert len(keys) == 1, keys
    return json.loads(client.get_object(Bucket="ops-out", Key=keys[0])["Body"].read())


def _flow_run(run_id: str, timeout_s: float = 120.0) -> Any:
    """The run once its state is final: its decision and verdict event are written a moment
    before the engine sets the final state."""
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(uuid.UUID(run_id))
            if (run.state and run.state.is_final()) or time.monotonic() > deadline:
                return run
            time.sleep(0.5)


def _artifacts(run_id: str) -> dict[str, Any]:
    """The run's artifacts by key suffix (summary, checks, report; the latest of each)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[uuid.UUID(run_id)])))
    return {(a.key or "").rsplit("-", 1)[-1]: a for a in sorted(arts, key=lambda a: a.created)}


def test_triggered_runs_gate_the_emitted_file_and_end_in_verdict_states(ops):
    approved, error = _emit_all(ops, ("ops-approved",), (
        "ops-error", "--no-checksums", {"released": "s3://ops-data/census/nope.csv"}))
    emitted = {"ops-approved": approved, "ops-error": error}
    with _pinned("s3://ops-config/gate-strict.yaml"):  # the custodian tightened the policy
        emitted["ops-rejected"] = _emit(ops, "ops-rejected")
    codes = {r: e.returncode for r, e in emitted.items()}
    assert codes == {"ops-approved": 0, "ops-rejected": 1, "ops-error": 3}, {
        r: e.stdout + e.stderr for r, e in emitted.items()}
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
    same server and S3: the custodian deploys under its pinned config (the signer restarted
    for it, as the compose signer starts after the custodian), the pipeline writes its release
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


def _pause_description(run_id: Any) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        for item in client.filter_flow_run_input(run_id, key_prefix="paused-", limit=50,
                                                 exclude_keys=set()):
            if item.key.endswith("-description"):
                return str(json.loads(item.value))
    return ""


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


PLANTED = "PLANTED-S3CRET-7f3a"


def _post(ops: dict[str, Any], release: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A raw event as a hostile pipeline would send it (not through emit-anonymized, which
    refuses these payloads before sending), and the verdict its run answers with."""
    return _post_all(ops, {release: payload})[release]


def _post_all(ops: dict[str, Any], payloads: dict[str, dict[str, Any]]
              ) -> dict[str, dict[str, Any]]:
    """:func:`_post` for several releases at once: every event sent, then every verdict
    awaited (the worker gates them side by side, up to the pool's limit)."""
    from datetime import UTC, datetime

    from riskgate.flows.cli.ops import post_event, wait_for_verdict

    api = ops["env"]["PREFECT_API_URL"]
    sent = {}
    for release, payload in payloads.items():
        event_id = str(uuid.uuid4())
        since = datetime.now(UTC).isoformat()
        post_event(api, {"id": event_id, "occurred": since,
                         "event": "riskgate.anonymization.completed",
                         "resource": {"prefect.resource.id": f"riskgate.release.{release}"},
                         "related": [], "payload": {"release_id": release, **payload}})
        sent[release] = (event_id, since)
    return {release: wait_for_verdict(api, release, event_id, since, 240)
            for release, (event_id, since) in sent.items()}


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


def _processes_of_run(run_id: Any) -> list[int]:
    """The processes running a flow run (the worker starts them with its id in their
    environment)."""
    import os

    marker = f"PREFECT__FLOW_RUN_ID={run_id}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(pid))
    return found


def _verdict_events(release: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    with get_client(sync_client=True) as client:
        page = client.read_events(filter=EventFilter(
            event=EventNameFilter(prefix=["riskgate.release."]),
            resource=EventResourceFilter(id=[f"riskgate.release.{release}"])), limit=20)
    return list(page.events)


def _paused_and_waiting(ops: dict[str, Any], release: str
                        ) -> tuple[subprocess.Popen, Any]:
    """A triggered gate paused for review, and emit-anonymized --wait waiting for it."""
    with _pinned("s3://ops-config/gate-review.yaml"):
        waiting = subprocess.Popen(
            RISKGATE + ["emit-anonymized", "--release", release, "--released",
                        "s3://ops-data/census/released-v2.csv", "--wait", "--timeout", "600"],
            env=ops["env"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        paused = wait_for_paused_run(release)
    return waiting, paused


def test_a_killed_gate_process_ends_error_for_the_waiting_pipeline(ops):
    """SIGKILL the gate's process mid-run (here while its review waits; the worker lives):
    the worker runs the flow's crash hook, and the run ends in an ERROR verdict, event, tag,
    state ("Error", Crashed) and decision.json; emit-anonymized --wait exits 3 within
    seconds, not after its timeout."""
    import os
    import signal

    waiting, paused = _paused_and_waiting(ops, "ops-killed")
    pids = _processes_of_run(paused.id)
    assert pids, "the paused run's process was not found"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 3, out
    assert time.monotonic() - t0 < 60
    assert "verdict: ERROR" in out and "process ended without a verdict" in out, out
    events = _verdict_events("ops-killed")
    assert [e.event for e in events] == ["riskgate.release.error"], events
    run = _flow_run(str(paused.id))
    assert (run.state.type.value, run.state.name) == ("CRASHED", "Error")
    assert "verdict:ERROR" in run.tags and run.name == "ops-killed-ERROR"
    decision = _decision(ops, "ops-killed")
    assert decision["verdict"] == "ERROR" and "without a verdict" in decision["reasons"][0]
    assert decision["trigger"]["event_id"]  # riskgate history names the event that started it


def test_the_pool_starts_no_more_gates_than_its_limit(ops):
    """The limit is at the door. With the gate limit at 2, four triggers
    start two gate processes; the other two wait Scheduled (no process) and run after."""
    from datetime import UTC, datetime

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
    )

    assert _run(RISKGATE + ["limits", "--gate", "2"], ops["env"]).returncode == 0
    try:
        releases = [f"ops-door-{i}" for i in range(4)]
        since = datetime.now(UTC)
        for release in releases:
            assert _emit(ops, release, wait=False).returncode == 0
        most_started, waited_scheduled, finished = 0, False, []
        deadline = time.monotonic() + 300
        with get_client(sync_client=True) as client:
            dep = client.read_deployment_by_name("release-gate/on-anonymization")
            while time.monotonic() < deadline and len(finished) < len(releases):
                # a triggered run is named after its release only once it runs: all of the
                # deployment's runs since the emits are these four
                runs = client.read_flow_runs(
                    flow_run_filter=FlowRunFilter(expected_start_time=FlowRunFilterExpectedStartTime(
                        after_=since)),
                    deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[dep.id])))
                started = [r for r in runs if r.state and r.state.type.value in ("PENDING",
                                                                                 "RUNNING")]
                processes = sum(bool(_processes_of_run(r.id)) for r in runs
                                if r.state and not r.state.is_final())
                most_started = max(most_started, len(started), processes)
                waited_scheduled |= bool(started) and len(runs) == 4 and any(
                    r.state and r.state.type.value == "SCHEDULED" for r in runs)
                finished = [r for r in runs if r.state and r.state.is_final()]
                time.sleep(0.5)
        assert len(finished) == 4, [(r.name, r.state) for r in finished]
        assert sorted(r.name for r in finished) == [f"{r}-APPROVED" for r in releases]
        assert most_started <= 2 and waited_scheduled, (most_started, waited_scheduled)
    finally:
        assert _run(RISKGATE + ["limits", "--gate", "5"], ops["env"]).returncode == 0


def test_a_plain_redeploy_keeps_the_nightly_schedule(ops):
    """A redeploy without --nightly-config kept nothing: the schedule went inactive. Now it
    stays as configured, and --no-nightly turns it off."""
    from prefect.client.orchestration import get_client

    def active() -> bool:
        with get_client(sync_client=True) as client:
            dep = client.read_deployment_by_name("release-gate/nightly-recheck")
            return all(s.active for s in client.read_deployment_schedules(dep.id))

    first = _run(RISKGATE + ["deploy", "--trigger-config", PINNED, "--nightly-config", PINNED],
                 ops["env"])
    assert first.returncode == 0 and active(), first.stdout + first.stderr
    plain = _run(RISKGATE + ["deploy"], ops["env"])  # keeps the pinned config too
    assert plain.returncode == 0 and "nightly re-check: kept active" in plain.stdout
    assert f"triggered gate: keeps its pinned config {PINNED}" in plain.stdout
    assert active()
    off = _run(RISKGATE + ["deploy", "--trigger-config", PINNED, "--no-nightly"], ops["env"])
    assert off.returncode == 0 and "deactivated" in off.stdout and not active()
    # each deploy replaced the lost-run automation: one left, not one per deploy (each fired),
    # and without --lost-after each kept the module's silence (the lost-run test relies on it)
    from riskgate.flows.deployments import LOST_GATE_AUTOMATION

    with get_client(sync_client=True) as client:
        automations = client.read_automations_by_name(LOST_GATE_AUTOMATION)
    assert len(automations) == 1
    assert automations[0].trigger.within.total_seconds() == LOST_AFTER_TEST_S
    assert f"after {LOST_AFTER_TEST_S} s without a heartbeat" in plain.stdout
    short = _run(RISKGATE + ["deploy", "--lost-after", "45"], ops["env"])
    assert short.returncode != 0 and "--lost-after: 45 s is too short" in short.stderr, \
        short.stdout + short.stderr
    assert "Traceback" not in short.stderr


def test_history_lists_a_releases_runs_newest_first(ops):
    """The release's runs from the output store, with a report link."""
    first, second = _emit_all(ops, ("ops-history",), ("ops-history",))
    assert first.returncode == second.returncode == 0, first.stdout + second.stdout
    done = _run(RISKGATE + ["history", "ops-history", "--config", PINNED, "--json"],
                ops["env"])
    assert done.returncode == 0, done.stdout + done.stderr
    runs = json.loads(done.stdout)
    assert len(runs) == 2 and [r["verdict"] for r in runs] == ["APPROVED", "APPROVED"]
    assert runs[0]["finished_at"] >= runs[1]["finished_at"]
    assert all(r["started_by"].startswith("event ") for r in runs)
    assert httpx.get(runs[0]["report"], timeout=10).status_code == 200  # one click away
    table = _run(RISKGATE + ["history", "ops-history", "--config", PINNED], ops["env"])
    assert table.returncode == 0 and runs[0]["run_id"] in table.stdout


def test_a_run_lost_with_its_worker_ends_error(ops):
    """What nothing on the worker's side survives: SIGKILL the worker and the
    gate's process together (a lost host or container). Killing the worker alone ends the gate
    at its next line of output, through the crash hook (its output pipe breaks); with both gone, no
    hook runs, and the server's automation (riskgate deploy) ends the run Crashed "Error" once
    its heartbeats stop for 60 s (the module deploys with --lost-after 60; 90 s by default);
    emit-anonymized --wait exits 3; that state triggers the
    lost-run-verdict deployment on the next living worker, which writes the ERROR decision,
    event and tag. A run lost while its worker was starting it (Pending: it never beat, seen
    in the ops walk-through) is declared lost too. Last in the module: it starts the module's
    worker again."""
    import os
    import signal

    from prefect.client.orchestration import get_client
    from prefect.states import Pending

    from riskgate.flows.deployments import LOST_MESSAGE

    with get_client(sync_client=True) as client:  # submitted by a worker that then died
        dep = client.read_deployment_by_name("release-gate/on-anonymization")
        starting = client.create_flow_run_from_deployment(dep.id, state=Pending())
    waiting, paused = _paused_and_waiting(ops, "ops-lost")
    pids = _processes_of_run(paused.id)
    assert pids, "the paused run's process was not found"
    for worker in ops["workers"]:
        worker.kill()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    try:
        out, _ = waiting.communicate(timeout=LOST_AFTER_TEST_S + 90)
    finally:
        ops["start_worker"]()
    assert waiting.returncode == 3, out
    assert "verdict: ERROR" in out and "stopped sending heartbeats" in out, out
    # the rest of the verdict: the lost-run-verdict deployment, triggered by that state, runs
    # on the worker started again and writes the decision, the event and the tag
    deadline = time.monotonic() + 120
    while not _verdict_events("ops-lost") and time.monotonic() < deadline:
        time.sleep(1)
    assert [e.event for e in _verdict_events("ops-lost")] == ["riskgate.release.error"]
    decision = _decision(ops, "ops-lost")
    assert decision["verdict"] == "ERROR" and "lost with its worker" in decision["reasons"][0]
    run = _flow_run(str(paused.id))
    assert (run.state.type.value, run.state.name) == ("CRASHED", "Error")
    assert "verdict:ERROR" in run.tags and "verdict:NEEDS_REVIEW" not in run.tags
    never_started = _flow_run(str(starting.id), timeout_s=60)
    assert (never_started.state.type.value, never_started.state.name) == ("CRASHED", "Error")
    assert LOST_MESSAGE in str(never_started.state.message)  # (and the recorder's words)


# ---------------------------------------------------------------- separation of duties
def _final_run(run_id: Any, timeout_s: float = 180.0) -> Any:
    return _flow_run(str(run_id), timeout_s=timeout_s)


def test_no_run_parameter_can_change_the_rules(ops):
    """What the API's auth string lets a pipeline do, each closed: runs of on-anonymization
    created with their own config, with overrides that swap the policy, with a policy, end
    ERROR naming the parameter; the pinned Variable re-pinned to a lax config without a
    redeploy ends ERROR "the pinned config changed since deploy"."""
    from prefect.client.orchestration import get_client
    from prefect.variables import Variable

    from riskgate.flows.names import TRIGGER_CONFIG_VARIABLE

    attempts = {"config": {"config": "s3://ops-config/gate-lax.yaml"},
                "overrides": {"overrides": {"policy": "s3://ops-config/strict.yaml"}},
                "policy": {"policy": {"version": 1, "checks": []}}}
    with get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name("release-gate/on-anonymization")
        made = {key: client.create_flow_run_from_deployment(dep.id, parameters=params)
                for key, params in attempts.items()}
    for key, run in made.items():
        final = _final_run(run.id)
        assert (final.state.type.value, final.state.name) == ("CRASHED", "Error"), final.state
        assert f"parameter(s) ['{key}'] are not accepted by a deployed gate" in \
            final.state.message, final.state.message
        assert "verdict:ERROR" in final.tags
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


def _wait_for_decision(ops: dict[str, Any], release: str, timeout_s: float = 240.0
                       ) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return _decision(ops, release)
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


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
        marker = [o["Key"] for o in ops["s3"].client().list_objects_v2(
            Bucket="ops-out", Prefix="riskgate/_manifests/").get("Contents", [])]
        assert len(marker) == 1
        time.sleep(25)  # two more looks of the watcher: the manifest is not gated again
        _decision(ops, "ops-manifest")  # still exactly one decision
    signatures = [json.loads(line) for line in ops["signatures"].read_text().splitlines()]
    assert any(s["flow_run_id"] == decision["flow_run_id"] for s in signatures)


def test_emit_trusts_the_decision_not_the_event(ops):
    """Anyone holding the auth string can emit a verdict event. emit-anonymized --wait with
    --public-key reads the run's decision.json and checks its signature: a forged APPROVED
    event pointing at a forged decision ends exit 3, "not verified"."""
    from datetime import UTC, datetime

    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    from riskgate.flows.cli.ops import post_event

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
