"""Signed decisions (issue 26, item 4): keygen, the gate's signature, ``riskgate verify``.

A real gate run (in this process, LocalSteps) signs its decision; verify accepts the approved
file and refuses, with one line naming the check, a changed file, a REJECTED decision edited to
APPROVED, a missing or corrupt signature and another key; the canonical bytes are the same
in two processes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate
from riskcore.signing import KEY_FILE, PUB_FILE, Signer, canonical_bytes
from tests.conftest import gate_config


def _verify(capsys, released: Path, decision: Path, public: Path) -> tuple[int, str]:
    from riskgate.flows.cli import main

    code = main(["verify", str(released), "--decision", str(decision),
                 "--public-key", str(public)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Path:
    from riskgate.flows.cli import main

    folder = tmp_path_factory.mktemp("keys") / "k"
    assert main(["keygen", str(folder)]) == 0
    return folder


@pytest.fixture(scope="module")
def approved(keys, example_files, tmp_path_factory) -> Path:
    """A signed APPROVED decision of a real gate run."""
    out = tmp_path_factory.mktemp("signed")
    signer = Signer.from_pem((keys / KEY_FILE).read_bytes(), "test key")
    gate = load_gate(gate_config(str(example_files["original"]),
                                 str(example_files["released"]), str(out)))
    outcome = run_gate(gate, "run-signed", steps=LocalSteps(), signer=signer)
    assert outcome.verdict == "APPROVED", outcome.reasons
    return Path(outcome.decision_url or "")


def test_keygen_writes_a_private_key_only_its_owner_reads(keys, capsys):
    from riskgate.flows.cli import main

    assert stat.S_IMODE(os.stat(keys / KEY_FILE).st_mode) == 0o600
    assert (keys / PUB_FILE).read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert main(["keygen", str(keys)]) == 3  # never over an existing key
    captured = capsys.readouterr()
    assert "exists already" in captured.out + captured.err


def test_the_approved_file_verifies(approved, keys, example_files, capsys):
    decision = json.loads(approved.read_text())
    assert decision["signed"] is True and decision["signing_key"].startswith("sha256:")
    assert (approved.parent / "decision.json.sig").exists()
    prov = decision["provenance"]
    assert prov["config"]["source"] == "command line" and len(prov["config"]["sha256"]) == 64
    assert prov["policy"]["sha256"] and prov["released"]["sha256"] == next(
        i["sha256"] for i in decision["inputs"] if i["name"] == "released")
    code, out = _verify(capsys, example_files["released"], approved, keys / PUB_FILE)
    assert code == 0, out
    assert "verified:" in out


def test_a_changed_file_is_refused(approved, keys, example_files, tmp_path, capsys):
    changed = tmp_path / "released.csv"
    changed.write_bytes(example_files["released"].read_bytes() + b"\n")
    code, out = _verify(capsys, changed, approved, keys / PUB_FILE)
    assert code == 1 and "not verified: different file" in out


def test_an_edited_decision_is_refused(approved, keys, example_files, tmp_path, capsys):
    """A REJECTED decision edited to APPROVED (here the other way round: any edit) breaks
    the signature."""
    folder = tmp_path / "run"
    folder.mkdir()
    doc = json.loads(approved.read_text())
    doc["checks"][0]["value"] = 0.0  # a figure changed after signing
    (folder / "decision.json").write_text(json.dumps(doc))
    (folder / "decision.json.sig").write_bytes((approved.parent / "decision.json.sig")
                                               .read_bytes())
    code, out = _verify(capsys, example_files["released"], folder / "decision.json",
                        keys / PUB_FILE)
    assert code == 1 and "not verified: bad signature" in out


def test_a_rejected_decision_edited_to_approved_is_refused(keys, example_files, tmp_path,
                                                            capsys):
    signer = Signer.from_pem((keys / KEY_FILE).read_bytes(), "test key")
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"),
                      policy={"version": 1, "checks": ["k_anonymity.k >= 1000"]})
    outcome = run_gate(load_gate(cfg), "run-rejected", steps=LocalSteps(), signer=signer)
    assert outcome.verdict == "REJECTED"
    path = Path(outcome.decision_url or "")
    code, out = _verify(capsys, example_files["released"], path, keys / PUB_FILE)
    assert code == 1 and "not verified: verdict REJECTED" in out
    doc = json.loads(path.read_text())
    doc.update(verdict="APPROVED", approved=True)
    path.chmod(0o644)
    path.write_text(json.dumps(doc))
    code, out = _verify(capsys, example_files["released"], path, keys / PUB_FILE)
    assert code == 1 and "not verified: bad signature" in out


def test_unsigned_missing_and_foreign_signatures_are_refused(approved, keys, example_files,
                                                             tmp_path, capsys):
    from riskgate.flows.cli import main

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "decision.json").write_bytes(approved.read_bytes())
    code, out = _verify(capsys, example_files["released"], folder / "decision.json",
                        keys / PUB_FILE)
    assert code == 1 and "not verified: unsigned" in out
    (folder / "decision.json.sig").write_text("{not json")
    code, out = _verify(capsys, example_files["released"], folder / "decision.json",
                        keys / PUB_FILE)
    assert code == 1 and "not verified: bad signature (decision.json.sig is malformed)" in out
    assert main(["keygen", str(tmp_path / "other")]) == 0
    capsys.readouterr()
    code, out = _verify(capsys, example_files["released"], approved,
                        tmp_path / "other" / PUB_FILE)
    assert code == 1 and "not verified: wrong key" in out
    code, out = _verify(capsys, example_files["released"], tmp_path / "nope.json",
                        keys / PUB_FILE)
    assert code == 3 and "does not exist" in out


def test_canonical_bytes_are_the_same_in_two_processes(approved):
    doc = json.loads(approved.read_text())
    here = canonical_bytes(doc)
    code = ("import json,sys; from riskcore.signing import canonical_bytes; "
            "sys.stdout.buffer.write(canonical_bytes(json.load(open(sys.argv[1]))))")
    there = subprocess.run([sys.executable, "-c", code, str(approved)], capture_output=True,
                           check=True).stdout
    assert here == there
    assert b'"verdict":"APPROVED"' in here and b"sha256" in here
