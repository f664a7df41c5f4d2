"""Faults: a store that dies mid-write, two runs into one folder, more gates than slots, a gate
killed with SIGKILL, the same seed in two processes, and planted secrets searched everywhere the
gate writes or talks to (outputs, console, run logs, artifacts, events, Prefect's database)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, child_processes, gate_config, run_gate_flow

pytestmark = [pytest.mark.integration, pytest.mark.waits]
RISKGATE = [sys.executable, "-m", "riskgate.flows.cli"]


def _bucket(s3: Any) -> str:
    name = f"fault-{uuid.uuid4().hex[:10]}"
    s3.client().create_bucket(Bucket=name)
    return name


def test_store_dies_mid_write_leaves_no_decision_and_a_rerun_succeeds(s3, example_files):
    from riskcore.errors import StorageError
    from riskcore.gate.config import load_gate
    from riskcore.gate.run import LocalSteps, run_gate

    bucket = _bucket(s3)
    gate = load_gate(gate_config(str(example_files["original"]), str(example_files["released"]),
                                 f"s3://{bucket}/out", storage={"options": s3.options()},
                                 release_id="mid-write"))

    class DiesWhileWriting(LocalSteps):
        """The real steps; the store goes away after the first object is written."""

        def write(self, folder, files, decision, options):  # noqa: ANN001
            from riskcore.storage import join_url, write_bytes

            name, data = next(iter(files.items()))
            write_bytes(join_url(folder, name), data, options, overwrite=True)
            s3.stop()
            return super().write(folder, files, decision, options)

    try:
        outcome = run_gate(gate, "run-1", s3.options(), steps=DiesWhileWriting())
    finally:
        s3.start()
    assert outcome.verdict == "ERROR" and outcome.exit_code == 3
    assert outcome.reasons[0].startswith("the outputs could not be written")  # error first
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys and not [k for k in keys if k.endswith("decision.json")]  # never half a run
    again = run_gate(gate, "run-2", s3.options())
    assert again.verdict == "APPROVED"
    with pytest.raises(StorageError, match="already exists"):  # a finished run stays
        from riskcore.gate.outputs import write_run

        write_run(f"s3://{bucket}/out/mid-write/run-2", {"report.html": b"x"}, {"x": 1},
                  s3.options())


def test_two_runs_into_one_output_folder_never_mix(example_files, tmp_path):
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="same-folder")
    results: list[dict] = []
    threads = [threading.Thread(target=lambda: results.append(run_gate_flow(cfg)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(results) == 2 and results[0]["folder"] != results[1]["folder"]
    for r in results:
        decision = json.loads(Path(r["decision_url"]).read_text())
        assert decision["flow_run_id"] == r["run_id"] and decision["verdict"] == "APPROVED"
    runs = sorted(p.parent.name for p in (tmp_path / "out" / "same-folder").rglob("decision.json"))
    assert runs == sorted(r["run_id"] for r in results)


def test_a_final_state_without_its_data_still_gives_the_outcome(prefect_server, example_files,
                                                               tmp_path):
    """The state of a run read back from the API carries no data (result persistence is off);
    under several gate runs in one process's threads Prefect sometimes hands back such a state.
    The outcome is then the one the run kept in this process, not a lost run."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import MissingResult

    from riskgate.flows.release_gate import release_gate
    from riskgate.flows.verdicts import outcome_of

    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="no-data",
                      measures={"k_anonymity": {}})
    state = release_gate(config=cfg, return_state=True)
    with get_client(sync_client=True) as client:
        bare = client.read_flow_run(state.state_details.flow_run_id).state
    with pytest.raises(MissingResult):
        bare.result(raise_on_failure=False)
    kept = outcome_of(bare)
    assert kept is not None and kept["release_id"] == "no-data"
    assert kept == outcome_of(state)  # the same outcome the state itself carries


def test_eight_gates_against_a_limit_of_five(example_files, tmp_path):
    from riskgate.flows.limits import GATE_LIMIT, set_limits

    set_limits(gate=5)
    outcomes: list[dict] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                          str(tmp_path / "out"), release_id=f"eight-{i}",
                          measures={"k_anonymity": {}, "reid": {}})
        outcome = run_gate_flow(cfg)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert len(outcomes) == 8 and {o["verdict"] for o in outcomes} == {"APPROVED"}  # none lost
    assert all(Path(o["decision_url"]).exists() for o in outcomes)
    spans = sorted(s for o in outcomes for s in o["slots"])
    assert len(spans) == 8
    # the sixth gate could only start once one of the first five had finished
    assert spans[5][0] >= min(b for _, b in spans[:5])
    points = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    inside = peak = 0
    for _, delta in points:
        inside += delta
        peak = max(peak, inside)
    assert peak <= 5
    assert set_limits()[GATE_LIMIT]["active_slots"] == 0


def _slots_in_use() -> int:
    from riskgate.flows.limits import GATE_LIMIT, set_limits

    state = set_limits()[GATE_LIMIT]
    return int(state["active_slots"]) if state else 0


def _measuring(release_id: str, family: str) -> bool:
    """The gate of ``release_id`` has its ``family`` measure task running now."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterTags,
        TaskRunFilter,
        TaskRunFilterName,
    )

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[f"release:{release_id}"])),
            task_run_filter=TaskRunFilter(name=TaskRunFilterName(any_=[f"measure-{family}"])))
    return any(r.state is not None and r.state.is_running() for r in runs)


def test_a_gate_killed_mid_measure_gives_its_slot_back(prefect_server, example_files, tmp_path):
    """A gate SIGKILLed while it measures still holds its slot; the slot comes back when its
    lease lapses (Prefect's shortest lease: 60 s), and the next gate then runs. The kill is
    made while the ALC's task runs (watched through the API), so the test cannot pass on a
    gate that finished first: the slot must still be taken after the kill, and the next gate
    must have waited for the lease."""
    from riskgate.flows.limits import LEASE_S, set_limits

    set_limits(gate=1)
    try:
        slow = gate_config(str(example_files["original"]), str(example_files["released"]),
                           str(tmp_path / "out"), release_id="killed",
                           measures={"alc": {"max_attacks": 3000, "scenarios": "all_secrets",
                                             "secrets": ["diagnosis", "region", "age", "sex",
                                                         "education"],
                                             "halting": "package"}},
                           policy={"version": 1, "checks": ["alc.max <= 0.5"]})
        path = tmp_path / "slow.yaml"
        path.write_text(yaml.safe_dump(slow))
        proc = subprocess.Popen(RISKGATE + ["gate", "--config", str(path)],
                                env=prefect_server.env(), cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while not _measuring("killed", "alc") and proc.poll() is None and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, "the slow gate ended before it was seen measuring"
        assert _slots_in_use() == 1, "the slow gate measures without holding the slot"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        killed_at = time.monotonic()
        assert _slots_in_use() == 1  # nothing gave it back: only the lease's end will
        quick = gate_config(str(example_files["original"]), str(example_files["released"]),
                            str(tmp_path / "out"), release_id="after-kill")
        outcome = run_gate_flow(quick)  # waits for the dead gate's lease to lapse, then runs
        assert outcome["verdict"] == "APPROVED"
        waited = json.loads(Path(outcome["decision_url"]).read_text())["timings"]["slot_wait"]
        # the lease was taken before the measures began and renewed at most once since
        assert waited > LEASE_S / 4, waited
        assert time.monotonic() - killed_at < 3 * LEASE_S
    finally:
        set_limits(gate=5)


def test_the_servers_messages_go_to_a_file_never_to_an_unread_pipe(prefect_server):
    """A server whose stderr is a pipe nobody reads freezes once 64 KiB of its warnings
    (SQLite's "database is locked" tracebacks, 8 KiB each) have filled it: every request
    then times out. The suite's server is started as the CLI starts its private one."""
    servers = [pid for pid in child_processes(os.getpid())
               if b"uvicorn" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert servers, "the suite's Prefect server is not a child of this process"
    for pid in servers:
        for fd in (1, 2):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            assert not target.startswith("pipe:"), (fd, target)
    assert os.readlink(f"/proc/{servers[0]}/fd/2").endswith("server.log")


class _SlowApi:
    """A real HTTP server on 127.0.0.1 that takes each connection at once and answers Prefect's
    health and version paths after ``delay`` seconds (a live server under load); with
    ``tls``, an HTTPS one with that certificate and key (PEM files). It counts the
    connections it took."""

    def __init__(self, delay: float, tls: tuple[Path, Path] | None = None) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        api = self

        class Server(ThreadingHTTPServer):
            def get_request(self) -> Any:
                got = super().get_request()
                api.connections += 1
                return got

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # the connection stays open between requests

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                time.sleep(delay)
                body = b"true" if self.path.endswith("/health") else b'"3.8.8"'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.connections = 0
        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/api"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_slow_but_live_api_is_waited_for_and_a_silent_one_is_one_line():
    """The API check gives a server that took the connection as long to answer as Prefect's
    client gives a request (a loaded server took more than 5 s to answer its health check and
    the gate ended in an error), and no server at all is said at once."""
    from prefect.settings import PREFECT_API_REQUEST_TIMEOUT, temporary_settings

    from riskgate.flows.local_api import ApiUnavailable, check_api

    slow = _SlowApi(delay=1.5)
    try:
        check_api(slow.url, timeout=0.5)  # 1.5 s to answer, well past the 0.5 s to connect
        with (temporary_settings({PREFECT_API_REQUEST_TIMEOUT: 0.5}),
              pytest.raises(ApiUnavailable) as silent):
            check_api(slow.url, timeout=0.5)
        assert "took the connection but did not answer /health within 0.5 s" in str(
            silent.value) and "PREFECT_API_REQUEST_TIMEOUT" in str(silent.value)
    finally:
        slow.close()
    t0 = time.monotonic()
    with pytest.raises(ApiUnavailable) as nobody:
        check_api("http://127.0.0.1:9/api")
    assert "is unreachable (ConnectError)" in str(nobody.value)
    assert time.monotonic() - t0 < 5


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key (an API behind a private CA), and
    that key: PEM files in ``folder``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "riskgate test API")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "api.pem", folder / "api.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_the_api_check_trusts_what_prefects_client_trusts_over_one_connection(tmp_path):
    """An https API behind a private CA: the API check refuses it as Prefect's own client
    does until PREFECT_API_SSL_CERT_FILE names that CA, then both accept it; the check asks
    its two questions over one connection (a client per request built the TLS trust again:
    25 ms each on every gate's path)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_SSL_CERT_FILE, PREFECT_API_URL, temporary_settings

    from riskgate.flows.local_api import ApiUnavailable, check_api

    cert, key = _self_signed(tmp_path)
    api = _SlowApi(delay=0.0, tls=(cert, key))

    def prefect_says(trusted: bool) -> Exception | None:
        settings: dict[Any, Any] = {PREFECT_API_URL: api.url}
        if trusted:
            settings[PREFECT_API_SSL_CERT_FILE] = str(cert)
        with temporary_settings(settings), get_client(sync_client=True) as client:
            return client.api_healthcheck()  # type: ignore[no-any-return]

    try:
        with pytest.raises(ApiUnavailable) as untrusted:
            check_api(api.url)
        assert "is unreachable (ConnectError)" in str(untrusted.value)
        assert prefect_says(trusted=False) is not None
        with temporary_settings({PREFECT_API_SSL_CERT_FILE: str(cert)}):
            before = api.connections
            check_api(api.url)
            assert api.connections - before == 1
        assert prefect_says(trusted=True) is None
        with (temporary_settings({PREFECT_API_SSL_CERT_FILE: str(tmp_path / "none.pem")}),
              pytest.raises(ApiUnavailable) as unreadable):
            check_api(api.url)
        assert str(unreadable.value).startswith(
            f"PREFECT_API_SSL_CERT_FILE ({tmp_path / 'none.pem'}) cannot be read as CA "
            "certificates (FileNotFoundError")
    finally:
        api.close()


class _CountingProxy:
    """A real TCP relay on 127.0.0.1 in front of an HTTP API: it counts the connections it
    accepts and keeps the request lines it relays (what a client cost the API)."""

    def __init__(self, target: str) -> None:
        import re
        import socket
        from urllib.parse import urlsplit

        parts = urlsplit(target)
        self.connections = 0
        self.requests: list[str] = []
        self._line = re.compile(rb"(GET|POST) (\S+) HTTP/1\.1")
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}{parts.path}"
        self._to = (parts.hostname, parts.port)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(self._to)  # type: ignore[arg-type]
            threading.Thread(target=self._pipe, args=(client, upstream, True),
                             daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False),
                             daemon=True).start()

    def _pipe(self, src: Any, dst: Any, asks: bool) -> None:
        try:
            while data := src.recv(65536):
                if asks:
                    self.requests += [f"{m.group(1).decode()} {m.group(2).decode()}"
                                      for m in self._line.finditer(data)]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            dst.close()

    def close(self) -> None:
        self.listener.close()


def test_a_waiting_pipeline_asks_the_api_over_one_connection_and_reads_its_run_alone(
        prefect_server):
    """emit-anonymized --wait keeps one connection for the whole wait (a client per request
    cost 50 ms of CPU each, a fifth of a core for a waiting pipeline) and, once it has found
    the run its event triggered among the deployment's newest 50, reads that run alone (the
    page of 50 cost the server 50 ms a look)."""
    from datetime import UTC, datetime

    import httpx

    from riskgate.flows.cli.emit import post_event, wait_for_verdict

    api = prefect_server.url
    event_id, release = str(uuid.uuid4()), f"wait-{uuid.uuid4().hex[:8]}"
    since = datetime.now(UTC).isoformat()
    with httpx.Client(base_url=api.rstrip("/") + "/", timeout=30) as http:
        flow_id = http.post("flows/", json={"name": f"riskgate-wait-{release}"}).json()["id"]
        deployment = http.post("deployments/", json={"name": "on-anonymization",
                                                     "flow_id": flow_id}).json()["id"]
        run = http.post(f"deployments/{deployment}/create_flow_run", json={
            "parameters": {"trigger": {"event_id": event_id}}}).json()
    proxy = _CountingProxy(api)

    def decide() -> None:
        time.sleep(2.0)  # a few looks first
        post_event(api, {"id": str(uuid.uuid4()), "occurred": datetime.now(UTC).isoformat(),
                         "event": "riskgate.release.approved",
                         "resource": {"prefect.resource.id": f"riskgate.release.{release}"},
                         "related": [{"prefect.resource.id": f"prefect.event.{event_id}",
                                      "prefect.resource.role": "triggering-event"}],
                         "payload": {"verdict": "APPROVED", "release_id": release}})

    decider = threading.Thread(target=decide)
    decider.start()
    try:
        verdict = wait_for_verdict(proxy.url, release, event_id, since, 60)
    finally:
        decider.join()
        proxy.close()
        with httpx.Client(base_url=api.rstrip("/") + "/", timeout=30) as http:
            http.delete(f"flow_runs/{run['id']}")
            http.delete(f"deployments/{deployment}")
            http.delete(f"flows/{flow_id}")
    assert verdict == {"verdict": "APPROVED", "release_id": release}
    assert proxy.connections == 1, proxy.requests
    looks = [r for r in proxy.requests if r.endswith("/events/filter")]
    pages = [r for r in proxy.requests if r.endswith("/flow_runs/filter")]
    alone = [r for r in proxy.requests if r.startswith(f"GET /api/flow_runs/{run['id']}")]
    assert len(looks) >= 3 and len(pages) == 1, proxy.requests
    assert len(alone) == len(looks) - 2, proxy.requests  # every look after the run was found


def test_a_killed_gate_leaves_no_private_server_or_helper_behind(example_files, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "home")
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="orphan")
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.Popen(RISKGATE + ["gate", "--config", str(path)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = helper = None
    deadline = time.monotonic() + 120
    while (server is None or helper is None) and time.monotonic() < deadline:
        for child in child_processes(proc.pid):
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"uvicorn" in cmdline:
                server = child
            elif b"gx_helper" in cmdline:
                helper = child
        time.sleep(0.3)
    assert server is not None, "the gate started no private server"
    assert helper is not None, "the gate started no Great Expectations helper"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    for pid, what in ((server, "the private Prefect server"), (helper, "the GX helper")):
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                break
            try:
                if Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z":
                    break  # a zombie: dead, waiting to be reaped by init
            except OSError:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"{what} outlived the killed gate")


def test_the_same_seed_gives_the_same_bytes_in_two_processes(example_files, tmp_path):
    outs = []
    for i in range(2):
        target = tmp_path / f"m{i}.json"
        env = {**os.environ, "PYTHONHASHSEED": str(17 + i)}
        done = subprocess.run(RISKGATE + [
            "measure", str(example_files["released"]), "--qi", "region,age,sex,education",
            "--sensitive", "diagnosis", "--weight", "weight", "--household", "household_id",
            "--suda", "--population-size", "100000", "--json", str(target)], env=env, cwd=ROOT,
            capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        outs.append(target.read_bytes())
    assert outs[0] == outs[1]
    config = tmp_path / "gate.yaml"  # the bundled config, pointed at this test's files
    config.write_text((ROOT / "examples/gate.yaml").read_text().replace(
        "../build/demo/", f"{example_files['original'].parent}/"))
    alc = []
    for i in range(2):
        target = tmp_path / f"alc{i}.json"
        done = subprocess.run(RISKGATE + [
            "alc", str(example_files["original"]), str(example_files["released"]), "--config",
            str(config), "--secret", "diagnosis", "--known",
            "region,sex,education", "--max-attacks", "300", "--seed",
            "5", "--json", str(target)], env={**os.environ, "PYTHONHASHSEED": str(3 + i)},
            cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        alc.append(target.read_bytes())
    assert alc[0] == alc[1]  # no wall-clock time inside


def test_gate_outputs_are_the_same_apart_from_run_ids_and_times(example_files, tmp_path):
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"), release_id="repro",
                      measures={"k_anonymity": {}, "reid": {}, "singling_out": {
                          "n_attacks": 100}, "inference": {"n_attacks": 100}},
                      policy={"version": 1, "checks": ["reid.pRb <= 1",
                                                       "inference.risk <= 1"]})
    a, b = run_gate_flow(cfg), run_gate_flow(cfg)

    def normal(outcome: dict, name: str) -> str:
        text = (Path(outcome["folder"]) / name).read_text()
        return text.replace(outcome["run_id"], "RUN")

    assert normal(a, "measures.json") == normal(b, "measures.json")
    assert normal(a, "validation.json") == normal(b, "validation.json")
    da, db = (json.loads(normal(o, "decision.json")) for o in (a, b))
    for d in (da, db):
        for key in ("timings", "started_at", "finished_at"):
            d.pop(key)
    assert da == db
    assert (Path(a["folder"]) / "per_record.parquet").read_bytes() == (
        Path(b["folder"]) / "per_record.parquet").read_bytes()


PLANTED = "PLANTED-s3cret-9f41c2"


def test_planted_secrets_reach_no_output_log_artifact_event_or_database(
        prefect_server, s3, example_files, tmp_path, caplog, capfd):
    """The store's real credentials come from a Prefect Secret block and the environment; a
    config that tries to carry them is refused; then every byte riskgate wrote or sent is
    searched for them."""
    import logging

    from prefect.blocks.system import Secret

    from riskgate.flows.cli import main

    caplog.set_level(logging.DEBUG)
    Secret(value={"key": "testing", "secret": PLANTED + "-block"}).save(
        "riskgate-planted", overwrite=True)
    bucket = _bucket(s3)
    s3.client().upload_file(str(example_files["released"]), bucket, "in/released.csv")
    cfg = gate_config(str(example_files["original"]), f"s3://{bucket}/in/released.csv",
                      f"s3://{bucket}/out", release_id="planted",
                      storage={"options": {"endpoint_url": s3.url},
                               "credentials_block": "riskgate-planted"})
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(cfg))
    old = os.environ.get("AWS_SESSION_TOKEN")
    os.environ["AWS_SESSION_TOKEN"] = PLANTED + "-env"
    try:
        code = main(["gate", "--config", str(path), "--verbose"])
        # attempts to smuggle a credential in: refused, and not echoed
        refused = []
        for attempt in (
            {"storage": {"options": {"endpoint_url": s3.url, "password": PLANTED + "-cfg"}}},
            {"released": f"s3://AKIA:{PLANTED}-url@{bucket}/in/released.csv"},
            {"storage": {"options": {"endpoint_url": f"http://u:{PLANTED}-ep@127.0.0.1:9"}}},
        ):
            bad = tmp_path / f"bad{len(refused)}.yaml"
            bad.write_text(yaml.safe_dump({**cfg, **attempt}))
            refused.append(main(["gate", "--config", str(bad), "--verbose"]))
        emit = main(["emit-anonymized", "--release", "planted", "--released",
                     f"s3://AKIA:{PLANTED}-emit@{bucket}/x.csv", "--no-checksums"])
    finally:
        if old is None:
            os.environ.pop("AWS_SESSION_TOKEN")
        else:
            os.environ["AWS_SESSION_TOKEN"] = old
    assert code in (0, 1, 2) and refused == [3, 3, 3] and emit == 3
    from riskgate.flows.local_api import drain_prefect

    drain_prefect()
    time.sleep(2)
    haystacks: dict[str, bytes] = {}
    client = s3.client()
    for obj in client.list_objects_v2(Bucket=bucket, Prefix="out/").get("Contents", []):
        haystacks[obj["Key"]] = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    assert any(k.endswith("decision.json") for k in haystacks)
    captured = capfd.readouterr()
    haystacks["console"] = (captured.out + captured.err).encode()
    haystacks["python logs"] = "\n".join(r.getMessage() for r in caplog.records).encode()
    for table, text in prefect_server.database_text().items():
        haystacks[f"prefect.db {table}"] = text.encode("latin-1", errors="replace")
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as pc:
        arts = pc.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(like_="planted")))
        haystacks["artifacts"] = json.dumps([a.model_dump(mode="json") for a in arts]).encode()
        runs = pc.read_flow_runs()
        haystacks["flow runs"] = json.dumps([r.model_dump(mode="json") for r in runs]).encode()
        logs = pc.read_logs()
        haystacks["run logs"] = json.dumps([lg.model_dump(mode="json") for lg in logs]).encode()
    assert arts and runs and logs
    found = {name: [m for m in (PLANTED + "-env", PLANTED + "-cfg", PLANTED + "-url",
                                PLANTED + "-ep", PLANTED + "-emit") if m.encode() in hay]
             for name, hay in haystacks.items()}
    assert {k: v for k, v in found.items() if v} == {}
    # the Secret block's own value is stored by Prefect, as designed, and nowhere else
    block_value = (PLANTED + "-block").encode()
    elsewhere = [name for name, hay in haystacks.items()
                 if block_value in hay and not name.startswith("prefect.db")]
    assert elsewhere == []
