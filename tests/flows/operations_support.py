"""What the operations tests share: the custodian's store in moto's S3 (configs, policies,
tables), the gate deployed on the suite's Prefect server, the signer, and a worker polling the
pool as an unprivileged user with a standby beside it that forks each flow run, as compose
deploys them (the ``ops`` fixture, one per test process), and the helpers that emit, pin and
read back what a run did."""


from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from riskcore.errors import RiskgateError
from tests.conftest import (
    ROOT,
    child_processes,
    runs_as_another_user,
    unprivileged,
    wait_for_paused_run,
)

RISKGATE = [sys.executable, "-m", "riskgate.flows.cli"]


def _run(cmd: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
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
        # it serves the worker's user alone, on a socket of the worker's group (0660)
        worker_user = ["--allow-user", "nobody", "--socket-group", "nogroup"] \
            if runs_as_another_user() else ["--allow-user", str(os.getuid())]
        cmd = RISKGATE + ["signer", "--key", str(keys / "riskgate-signing.key"),
                          "--socket", str(sockets / "signer.sock"),
                          "--log", str(root / "signatures.jsonl"), *worker_user]
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
    # the pool compose deploys (docker/worker.sh): each flow run a fork of the worker's
    # standby where one answers, else Prefect's engine (the faults module's process-level
    # faults run there: :func:`standby`)
    deployed = _run(RISKGATE + ["deploy", "--standby", "--trigger-config", PINNED,
                                "--lost-after", str(LOST_AFTER_TEST_S)], env)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert "triggered gate: config pinned" in deployed.stdout
    assert f"after {LOST_AFTER_TEST_S} s without a heartbeat" in deployed.stdout
    assert _run(RISKGATE + ["limits", "--gate", "5"], env).returncode == 0
    workers: list[subprocess.Popen] = []
    standbys: list[subprocess.Popen] = []
    home = root / "worker-home"
    # as the README deploys it: an unprivileged user, the signer's socket, no key; and a
    # standby beside the worker, as its user and with its environment, `riskgate` on its PATH
    worker_cmd, worker_env, user = unprivileged(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", "riskgate-process",
         "--limit", "10"],
        {**env, "PREFECT_WORKER_QUERY_SECONDS": "1", "PREFECT_WORKER_PREFETCH_SECONDS": "5",
         "RISKGATE_SIGNER_SOCKET": str(sockets / "signer.sock")}, home)
    worker_env.pop("RISKGATE_SIGNING_KEY", None)
    (home / "bin").mkdir()
    (home / "bin" / "riskgate").write_text(  # what an install's entry point script does
        f"#!{worker_cmd[0]}\nfrom riskgate.flows.launch import run\nrun()\n")
    (home / "bin" / "riskgate").chmod(0o755)
    (home / "standby").mkdir(mode=0o700)
    if user:
        shutil.chown(home / "standby", user["user"], user["group"])
    worker_env.update(PATH=f"{home / 'bin'}{os.pathsep}{worker_env.get('PATH', '')}",
                      RISKGATE_STANDBY=str(home / "standby" / "standby.sock"))

    def standby(on: bool) -> None:
        """The worker's standby started (and ready) or stopped: with none answering, each
        flow run is Prefect's engine in a process of its own."""
        for old in standbys:
            old.terminate()
            old.wait(timeout=30)
        standbys.clear()
        if not on:
            return
        log_path = root / f"standby-{len(list(root.glob('standby-*.log')))}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([worker_cmd[0], "-m", "riskgate.flows.cli", "standby"],
                                    env=worker_env, cwd=home, stdout=log,
                                    stderr=subprocess.STDOUT, **user)
        standbys.append(proc)
        _standby_ready(proc, log_path)

    def start_worker() -> subprocess.Popen:
        log = open(root / f"worker-{len(workers)}.log", "wb")  # noqa: SIM115 (kept open)
        worker = subprocess.Popen(worker_cmd, env=worker_env, cwd=worker_env["PREFECT_HOME"],
                                  stdout=log, stderr=subprocess.STDOUT, **user)
        workers.append(worker)
        return worker

    standby(True)
    start_worker()
    yield {"env": env, "s3": s3, "v2_sha": hashlib.sha256(v2_bytes).hexdigest(),
           "workers": workers, "start_worker": start_worker, "start_signer": start_signer,
           "standby": standby, "keys": keys, "signatures": root / "signatures.jsonl",
           "root": root}
    for signer in signers:
        signer.terminate()

    # the flow runs a worker started (a paused review waits on for minutes) are its children:
    # found now, before the worker ends and they pass to init, and ended with it
    runs = [pid for parent in (*workers, *standbys) for pid in _descendants(parent.pid)]
    for worker in workers:
        worker.terminate()
    for pid in runs:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for worker in workers:
        # Prefect's worker takes half a minute to stop on SIGTERM (it waits out its loops);
        # at the session's end nothing of its is still needed: a few seconds, then SIGKILL
        try:
            worker.wait(timeout=3)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=30)
    standby(False)
    kept = tmp_path_factory.mktemp("ops-logs")  # the workers' logs outlive the run's folder
    for log_file in [*root.glob("worker-*.log"), *root.glob("standby-*.log")]:
        shutil.copy(log_file, kept / log_file.name)
    shutil.rmtree(root, ignore_errors=True)


def _standby_ready(proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until a standby says it is ready (its imports done), at most 180 s."""
    deadline = time.monotonic() + 180
    while "standby ready" not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


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


def _forked(ops: dict[str, Any]) -> int:
    """The flow runs the worker's standbys have forked so far (each says so in its log)."""
    return sum(line.endswith("forked for a worker's flow run")
               for log in ops["root"].glob("standby-*.log")
               for line in log.read_text(errors="replace").splitlines())


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


def _pause_description(run_id: Any) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        for item in client.filter_flow_run_input(run_id, key_prefix="paused-", limit=50,
                                                 exclude_keys=set()):
            if item.key.endswith("-description"):
                return str(json.loads(item.value))
    return ""


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

    from riskgate.flows.cli.emit import post_event, wait_for_verdict

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


# ---------------------------------------------------------------- separation of duties
def _final_run(run_id: Any, timeout_s: float = 180.0) -> Any:
    return _flow_run(str(run_id), timeout_s=timeout_s)


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


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (its children, theirs...)."""
    out, todo = [], [pid]
    while todo:
        for child in child_processes(todo.pop()):
            out.append(child)
            todo.append(child)
    return out
