"""The signer service: the one process that holds the key. A gate asks it over a local socket;
it answers only the worker's user, signs only a decision of a running run of a deployed gate
(asked of the suite's real Prefect API), made under the configs it was started with, once per
run; it logs every signature and refusal, and a decision it signs verifies as one signed with
the key."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate
from riskcore.signer import (
    Peers,
    Policy,
    RemoteSigner,
    SignatureLog,
    SignerServer,
    load_rules,
)
from riskcore.signing import KEY_FILE, PUB_FILE, Signer, SigningRefused, canonical_bytes
from tests.conftest import POLICY, gate_config

#: the test's own deployed gate (the operations tests own the real deployment names on the
#: shared server): the signer is told that this name is a gate's
TEST_GATE = "signer-test-gate"


class Server:
    """A signer server in this process's threads."""

    def __init__(self, path: str, policy: Policy, log: SignatureLog, **kwargs: Any) -> None:
        self.server = SignerServer(path, policy, log, **kwargs)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.server.remove_socket()


@pytest.fixture(scope="module")
def setup(tmp_path_factory, example_files, prefect_server):
    from riskcore.signing import keygen
    from riskgate.flows.gate_runs import DeployedRuns

    root = tmp_path_factory.mktemp("signer")
    keygen(root / "keys")
    for name, policy in (("custodian", POLICY),
                         ("lax", {"version": 1, "checks": ["k_anonymity.k >= 1"]})):
        folder = root / name
        folder.mkdir()
        (folder / "policy.yaml").write_text(yaml.safe_dump(policy))
        cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                          str(folder / "out"), policy="policy.yaml")
        (folder / "gate.yaml").write_text(yaml.safe_dump(cfg))
    signer = Signer.from_pem((root / "keys" / KEY_FILE).read_bytes(), "key")
    rules = load_rules([str(root / "custodian" / "gate.yaml")])
    log = SignatureLog(str(root / "signatures.jsonl"))
    policy = Policy(signer, rules, Peers(uids=frozenset({os.getuid()})),
                    DeployedRuns(gates=(TEST_GATE,)), signed_runs=log.signed_runs())
    path = str(root / "signer.sock")
    server = Server(path, policy, log)
    yield {"root": root, "socket": path, "signer": signer, "rules": rules, "log": log}
    server.stop()
    log.close()


def _gate_run(config_sha: str, release: str = "itest", deployment: str = TEST_GATE,
              flow: str = "release-gate", running: bool = True) -> str:
    """A flow run as a deployed gate's: a deployment recording ``config_sha`` (as riskgate
    deploy records it), a run of it labelled with ``release`` and set RUNNING."""
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    from riskgate.flows.names import CONFIG_TAG_PREFIX

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name(flow)
        dep = client.create_deployment(flow_id, deployment,
                                       tags=["riskgate", f"{CONFIG_TAG_PREFIX}{config_sha}"])
        run = client.create_flow_run_from_deployment(dep, tags=["riskgate",
                                                                 f"release:{release}"])
        if running:
            client.set_flow_run_state(run.id, Running(), force=True)
        return str(run.id)


def _entries(root: Path) -> list[dict]:
    path = root / "signatures.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_running_deployed_gate_run_is_signed_once_and_logged(setup, example_files, capsys):
    from riskgate.flows.cli import main

    root = setup["root"]
    remote = RemoteSigner.connect(setup["socket"])
    assert remote.fingerprint == setup["signer"].fingerprint
    assert remote.public_pem == setup["signer"].public_pem
    run_id = _gate_run(setup["rules"][0].config_sha256)
    gate = load_gate(root / "custodian" / "gate.yaml")
    outcome = run_gate(gate, run_id, steps=LocalSteps(), signer=remote)
    assert outcome.verdict == "APPROVED", outcome.reasons
    entry = _entries(root)[-1]
    assert entry["signed"] is True and entry["flow_run_id"] == run_id
    assert entry["peer"]["pid"] == os.getpid() and entry["peer"]["uid"] == os.getuid()
    decision = Path(outcome.decision_url or "")
    assert entry["decision_sha256"] == hashlib.sha256(
        canonical_bytes(json.loads(decision.read_text()))).hexdigest()
    code = main(["verify", str(example_files["released"]), "--decision", str(decision),
                 "--public-key", str(root / "keys" / PUB_FILE),
                 "--config", str(root / "custodian" / "gate.yaml")])
    assert code == 0, capsys.readouterr()
    # the same run again (a second decision of its own making, for a file never gated): refused
    again = {**json.loads(decision.read_text()), "inputs": [{"name": "released",
                                                             "sha256": "0" * 64}]}
    with pytest.raises(SigningRefused, match="has been signed before"):
        remote.sign(again)
    # ... and after a restart too: the log remembers the runs it signed
    assert run_id in SignatureLog(str(root / "signatures.jsonl")).signed_runs()


def _forged(setup: dict, run_id: str, release: str = "itest") -> dict[str, Any]:
    """What a local user makes up: an APPROVED decision under the custodian's rules (their
    SHA-256 copied from any decision.json), for a file never gated."""
    rules = setup["rules"][0]
    return {"schema": "riskgate.decision/1", "release_id": release, "flow_run_id": run_id,
            "verdict": "APPROVED", "approved": True, "checks": [], "reasons": [],
            "inputs": [{"name": "released", "sha256": "0" * 64}], "signed": True,
            "signing_key": setup["signer"].fingerprint,
            "provenance": {"config": {"sha256": rules.config_sha256},
                           "policy": {"sha256": rules.policy_sha256}}}


@pytest.mark.parametrize("case", ["no-such-run", "not-a-uuid", "not-deployed",
                                  "other-deployment", "completed", "other-flow",
                                  "other-rules", "other-release"])
def test_a_decision_with_no_running_gate_run_behind_it_is_refused(setup, case):
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    sha = setup["rules"][0].config_sha256
    if case == "no-such-run":
        run_id, why = str(uuid.uuid4()), "no flow run"
    elif case == "not-a-uuid":
        run_id, why = "local-made-up", "not a Prefect flow run id"
    elif case == "not-deployed":  # a command-line gate's kind of run: no deployment
        from prefect import flow

        @flow(name="release-gate")
        def cli_gate() -> None: ...

        with get_client(sync_client=True) as client:
            run = client.create_flow_run(cli_gate, tags=["release:itest"])
            client.set_flow_run_state(run.id, Running(), force=True)
        run_id, why = str(run.id), "not a run of a deployed gate"
    elif case == "other-deployment":
        run_id, why = _gate_run(sha, deployment="something-else"), \
            "not a run of a deployed gate"
    elif case == "completed":
        run_id, why = _gate_run(sha, running=False), "not running"
    elif case == "other-flow":
        run_id, why = _gate_run(sha, flow="another-flow"), "not of the release gate"
    elif case == "other-rules":
        run_id, why = _gate_run("f" * 64), "was created under config sha256:ffff"
    else:
        run_id, why = _gate_run(sha, release="census-v9"), "gates release 'census-v9'"
    before = len(_entries(setup["root"]))
    with pytest.raises(SigningRefused, match=why):
        RemoteSigner.connect(setup["socket"]).sign(_forged(setup, run_id))
    refused = _entries(setup["root"])[before:]
    assert len(refused) == 1 and refused[0]["signed"] is False and why.split("'")[0] in \
        refused[0]["refused"]
    if case == "completed":  # the same run, running, is signed
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(uuid.UUID(run_id), Running(), force=True)
        assert RemoteSigner.connect(setup["socket"]).sign(_forged(setup, run_id))


def test_a_decision_under_another_config_is_refused_and_the_run_ends_error(setup):
    """The lax config approves, but the signer was not started with it: no signature, and the
    run's verdict is an unsigned ERROR saying why."""
    root = setup["root"]
    remote = RemoteSigner.connect(setup["socket"])
    lax = load_gate(root / "lax" / "gate.yaml")
    run_id = _gate_run(str(lax.provenance["config"]["sha256"]))
    outcome = run_gate(lax, run_id, steps=LocalSteps(), signer=remote)
    assert outcome.verdict == "ERROR"
    assert "the decision could not be signed: the signer refused: the decision was made under" \
        in outcome.reasons[0]
    assert "the gate had decided APPROVED" in " ".join(outcome.reasons)
    decision = json.loads(Path(outcome.decision_url or "").read_text())
    assert decision["signed"] is False and decision["signing_key"] is None
    assert not Path(str(outcome.decision_url) + ".sig").exists()
    assert not any(e["signed"] for e in _entries(root) if e["flow_run_id"] == run_id)


def test_another_local_user_is_refused_before_its_request_is_read(setup, tmp_path):
    """A signer serving another uid (the worker's) refuses this process, whatever it asks."""
    log = SignatureLog(str(tmp_path / "log.jsonl"))
    policy = Policy(setup["signer"], setup["rules"], Peers(uids=frozenset({os.getuid() + 4242})),
                    _Never(), set())
    server = Server(str(tmp_path / "s.sock"), policy, log)
    try:
        with pytest.raises(SigningRefused, match=f"uid {os.getuid()} / gid .* may not ask"):
            RemoteSigner(str(tmp_path / "s.sock"), "").sign(_forged(setup, str(uuid.uuid4())))
        with pytest.raises(Exception, match="may not ask"):
            RemoteSigner.connect(str(tmp_path / "s.sock"))
    finally:
        server.stop()
        log.close()


class _Never:
    def confirm(self, decision: Any, rules: Any) -> None:
        raise AssertionError("a refused peer's request is never looked at")


def test_the_socket_is_not_world_writable_and_a_replacement_keeps_its_own(setup, tmp_path):
    from riskcore.errors import ConfigError

    path = str(tmp_path / "s.sock")
    log = SignatureLog(str(tmp_path / "log.jsonl"))
    policy = Policy(setup["signer"], setup["rules"], Peers(uids=frozenset({os.getuid()})),
                    _Never(), set())
    with pytest.raises(ConfigError, match="lets every local user ask"):
        SignerServer(path, policy, log, mode=0o666)
    first = Server(path, policy, log)
    assert oct(os.stat(path).st_mode & 0o777) == "0o660"
    with pytest.raises(ConfigError, match="a signer is listening there already"):
        SignerServer(path, policy, log)
    # the first stops listening; a replacement binds the path; then the first's exit must not
    # remove the replacement's socket
    first.server.shutdown()
    first.server.server_close()
    second = Server(path, policy, log)
    first.server.remove_socket()
    assert os.path.exists(path) and RemoteSigner.connect(path).fingerprint
    second.stop()
    assert not os.path.exists(path)
    log.close()


def test_malformed_and_deep_requests_get_one_line_and_the_key_never_leaves(setup):
    pem = (setup["root"] / "keys" / KEY_FILE).read_bytes()
    deep = b'{"op": "sign", "decision": ' + b"[" * 30000 + b"]" * 30000 + b"}\n"
    for raw in (b"not json\n", b'{"op": "key"}\n', b'{"op": "sign", "decision": 3}\n',
                b'{"op": "sign", "op": "hello"}\n', b"\n", deep):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(setup["socket"])
            sock.sendall(raw)
            answer = sock.recv(1 << 16)
        assert b"error" in answer and pem.strip().splitlines()[1] not in answer, raw[:40]
    assert b"nested too deeply" in answer
    with pytest.raises(SigningRefused, match="not under a config this signer was started with"):
        RemoteSigner.connect(setup["socket"]).sign({"signed": True, "provenance": {
            "config": {"sha256": "0" * 64}, "policy": {"sha256": "1" * 64}}})


def test_the_signer_command_serves_nobody_unless_told_whom(tmp_path, capsys):
    from riskcore.signing import keygen
    from riskgate.flows.cli import main

    keygen(tmp_path / "k")
    code = main(["signer", "--key", str(tmp_path / "k" / KEY_FILE), "--config", "x.yaml",
                 "--socket", str(tmp_path / "s.sock"), "--log", str(tmp_path / "l")])
    assert code == 3
    assert "serves nobody: name the worker's user with --allow-user" in capsys.readouterr().err


def test_an_unreachable_signer_is_one_line(tmp_path):
    from riskcore.errors import ConfigError

    with pytest.raises(ConfigError, match="the signer at .* cannot be reached"):
        RemoteSigner.connect(str(tmp_path / "none.sock"))


def test_a_deployed_run_never_reads_a_key_file(tmp_path, monkeypatch):
    from riskcore.errors import ConfigError
    from riskcore.signer import signer_from_environment

    monkeypatch.delenv("RISKGATE_SIGNER_SOCKET", raising=False)
    monkeypatch.setenv("RISKGATE_SIGNING_KEY", str(tmp_path / "k"))
    with pytest.raises(ConfigError, match="set in a deployed gate's environment"):
        signer_from_environment(deployed=True)


def test_a_secret_block_for_the_key_is_refused_naming_the_fix(example_files, tmp_path):
    from riskcore.errors import ConfigError

    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path), signing={"secret_block": "riskgate-key"})
    with pytest.raises(ConfigError, match="signing.secret_block: .*readable by anyone holding "
                                          "the API's auth string"):
        load_gate(cfg)


def test_a_refusal_sent_before_the_request_is_read_still_reaches_the_client(tmp_path):
    """The signer answers a peer it does not serve before reading its request, then closes:
    a request still being sent meets a closed socket (a broken pipe), and the client must
    read the refusal, not report the signer unreachable (seen once in CI as a race)."""
    import socket
    import threading

    from riskcore.signer import SigningRefused, _ask

    path = str(tmp_path / "s.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)

    def refuse() -> None:
        conn, _ = server.accept()
        conn.sendall(b'{"error": "uid 0 / gid 0 may not ask this signer"}\n')
        conn.close()

    thread = threading.Thread(target=refuse)
    thread.start()
    with pytest.raises(SigningRefused, match="may not ask this signer"):
        _ask(path, {"op": "sign", "padding": "x" * 5_000_000})  # larger than the buffers
    thread.join(timeout=10)
    server.close()
