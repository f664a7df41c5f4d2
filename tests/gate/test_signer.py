"""The signer service: the one process that holds the key. A gate asks it over a local socket;
it signs only decisions made under the configs it was started with, logs every signature
(with the requesting process), and a decision it signs verifies as one signed with the key."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest
import yaml

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate
from riskcore.signer import RemoteSigner, SignatureLog, SignerServer, load_policy_for
from riskcore.signing import KEY_FILE, PUB_FILE, Signer, SigningRefused
from tests.conftest import POLICY, gate_config


@pytest.fixture(scope="module")
def setup(tmp_path_factory, example_files):
    from riskcore.signing import keygen

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
    policy = load_policy_for(signer, [str(root / "custodian" / "gate.yaml")])
    log = SignatureLog(str(root / "signatures.jsonl"))
    path = str(root / "signer.sock")
    server = SignerServer(path, policy, log)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True)
    thread.start()
    yield {"root": root, "socket": path, "signer": signer}
    server.shutdown()
    server.server_close()
    log.close()


def _entries(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "signatures.jsonl").read_text().splitlines()]


def test_a_decision_under_the_deployed_config_is_signed_and_logged(setup, example_files,
                                                                   capsys):
    from riskgate.flows.cli import main

    root = setup["root"]
    remote = RemoteSigner.connect(setup["socket"])
    assert remote.fingerprint == setup["signer"].fingerprint
    before = len(_entries(root)) if (root / "signatures.jsonl").exists() else 0
    outcome = run_gate(load_gate(root / "custodian" / "gate.yaml"), "run-remote",
                       steps=LocalSteps(), signer=remote)
    assert outcome.verdict == "APPROVED", outcome.reasons
    entries = _entries(root)
    assert len(entries) == before + 1
    entry = entries[-1]
    assert entry["flow_run_id"] == "run-remote" and entry["verdict"] == "APPROVED"
    assert entry["peer"]["pid"] == os.getpid() and entry["peer"]["uid"] == os.getuid()
    decision = Path(outcome.decision_url or "")
    import hashlib

    from riskcore.signing import canonical_bytes
    assert entry["decision_sha256"] == hashlib.sha256(
        canonical_bytes(json.loads(decision.read_text()))).hexdigest()
    code = main(["verify", str(example_files["released"]), "--decision", str(decision),
                 "--public-key", str(root / "keys" / PUB_FILE),
                 "--config", str(root / "custodian" / "gate.yaml")])
    assert code == 0, capsys.readouterr()


def test_a_decision_under_another_config_is_refused_and_the_run_ends_error(setup):
    """The lax config approves, but the signer was not started with it: no signature, no log
    line, and the run's verdict is an unsigned ERROR saying why."""
    root = setup["root"]
    before = len(_entries(root)) if (root / "signatures.jsonl").exists() else 0
    remote = RemoteSigner.connect(setup["socket"])
    outcome = run_gate(load_gate(root / "lax" / "gate.yaml"), "run-lax", steps=LocalSteps(),
                       signer=remote)
    assert outcome.verdict == "ERROR"
    assert "the decision could not be signed: the signer refused: the decision was made under" \
        in outcome.reasons[0]
    assert "the gate had decided APPROVED" in " ".join(outcome.reasons)
    decision = json.loads(Path(outcome.decision_url or "").read_text())
    assert decision["signed"] is False and decision["signing_key"] is None
    assert not Path(str(outcome.decision_url) + ".sig").exists()
    assert (len(_entries(root)) if (root / "signatures.jsonl").exists() else 0) == before


def test_malformed_requests_get_one_line_and_the_key_never_leaves(setup):
    pem = (setup["root"] / "keys" / KEY_FILE).read_bytes()
    for raw in (b"not json\n", b'{"op": "key"}\n', b'{"op": "sign", "decision": 3}\n',
                b'{"op": "sign", "op": "hello"}\n', b"\n"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(setup["socket"])
            sock.sendall(raw)
            answer = sock.recv(1 << 16)
        assert b"error" in answer and pem.strip().splitlines()[1] not in answer, raw
    with pytest.raises(SigningRefused, match="not under a config this signer was started with"):
        RemoteSigner.connect(setup["socket"]).sign({"signed": True, "provenance": {
            "config": {"sha256": "0" * 64}, "policy": {"sha256": "1" * 64}}})


def test_an_unreachable_signer_is_one_line(tmp_path):
    from riskcore.errors import ConfigError

    with pytest.raises(ConfigError, match="the signer at .* cannot be reached"):
        RemoteSigner.connect(str(tmp_path / "none.sock"))


def test_a_deployed_run_never_reads_a_key_file(tmp_path, monkeypatch):
    from riskcore.errors import ConfigError
    from riskcore.signing import signer_from_environment

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
