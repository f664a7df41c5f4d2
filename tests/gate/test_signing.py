"""Signed decisions: keygen, the gate's signature over the whole decision, ``riskgate verify``
bound to the custodian's rules.

A real gate run (in this process, LocalSteps) signs its decision; verify accepts the approved
file under the custodian's config and refuses, with one line naming the check, a changed file,
a REJECTED decision edited to APPROVED, an edited review, a decision made under other rules, a
decision with a key named twice, a missing, old or corrupt signature and another key; the
canonical bytes are the same in two processes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate
from riskcore.signing import KEY_FILE, PUB_FILE, Signer, canonical_bytes
from tests.conftest import POLICY, gate_config


def write_config(folder: Path, example_files, policy: dict | None = None,
                 **extra) -> Path:
    """A custodian's gate config and its policy as files (what verify --config reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "policy.yaml").write_text(yaml.safe_dump(policy or POLICY))
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(folder / "out"), policy="policy.yaml", **extra)
    (folder / "gate.yaml").write_text(yaml.safe_dump(cfg))
    return folder / "gate.yaml"


@pytest.fixture(scope="module", autouse=True)
def custodian(example_files, tmp_path_factory) -> Path:
    """The custodian's config, every test's default for verify (:data:`CUSTODIAN`), whatever
    test runs first or alone."""
    path = write_config(tmp_path_factory.mktemp("custodian"), example_files)
    CUSTODIAN[:] = [path]
    return path


def _verify(capsys, released: Path, decision: Path, public: Path,
            config: Path | None = None) -> tuple[int, str]:
    from riskgate.flows.cli import main

    code = main(["verify", str(released), "--decision", str(decision),
                 "--public-key", str(public), "--config", str(config or CUSTODIAN[0])])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


#: the module's custodian config (set by the custodian fixture)
CUSTODIAN: list[Path] = []


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Path:
    from riskgate.flows.cli import main

    folder = tmp_path_factory.mktemp("keys") / "k"
    assert main(["keygen", str(folder)]) == 0
    return folder


@pytest.fixture(scope="module")
def approved(keys, custodian) -> Path:
    """A signed APPROVED decision of a real gate run under the custodian's config file."""
    signer = Signer.from_pem((keys / KEY_FILE).read_bytes(), "test key")
    outcome = run_gate(load_gate(custodian), "run-signed", steps=LocalSteps(), signer=signer)
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
    strict = write_config(tmp_path / "strict", example_files,
                          {"version": 1, "checks": ["k_anonymity.k >= 1000"]})
    outcome = run_gate(load_gate(strict), "run-rejected", steps=LocalSteps(), signer=signer)
    assert outcome.verdict == "REJECTED"
    path = Path(outcome.decision_url or "")
    code, out = _verify(capsys, example_files["released"], path, keys / PUB_FILE, strict)
    assert code == 1 and "not verified: verdict REJECTED" in out
    doc = json.loads(path.read_text())
    doc.update(verdict="APPROVED", approved=True)
    path.chmod(0o644)
    path.write_text(json.dumps(doc))
    code, out = _verify(capsys, example_files["released"], path, keys / PUB_FILE, strict)
    assert code == 1 and "not verified: bad signature" in out


def test_a_decision_under_other_rules_is_refused(keys, example_files, tmp_path, capsys):
    """A lax policy that approves, signed with the custodian's key, is refused against the
    custodian's config: its provenance carries another policy's SHA-256 (and another
    config's)."""
    signer = Signer.from_pem((keys / KEY_FILE).read_bytes(), "test key")
    lax = write_config(tmp_path / "lax", example_files,
                       {"version": 1, "checks": ["k_anonymity.k >= 1"]})
    outcome = run_gate(load_gate(lax), "run-lax", steps=LocalSteps(), signer=signer)
    assert outcome.verdict == "APPROVED"
    path = Path(outcome.decision_url or "")
    assert _verify(capsys, example_files["released"], path, keys / PUB_FILE, lax)[0] == 0
    code, out = _verify(capsys, example_files["released"], path, keys / PUB_FILE)
    assert code == 1 and "not verified: different rules: the decision was made under " \
        "config sha256:" in out and "the custodian's are config sha256:" in out
    doc = json.loads(path.read_text())
    custodian = load_gate(CUSTODIAN[0]).provenance
    assert doc["provenance"]["policy"]["sha256"] != custodian["policy"]["sha256"]
    assert f"policy sha256:{custodian['policy']['sha256']}" in " ".join(out.split())
    # the same config text with another policy file behind it: different rules too
    (tmp_path / "lax" / "policy.yaml").write_text(yaml.safe_dump(POLICY))
    code, out = _verify(capsys, example_files["released"], path, keys / PUB_FILE, lax)
    assert code == 1 and "different rules" in out


def test_the_signature_covers_the_review_and_every_key(approved, keys, example_files,
                                                       tmp_path, capsys):
    """Everything the decision says is signed: a reviewer's name put in afterwards, or any
    key added, breaks the signature."""
    for edit in ({"review": {"decision": "approved", "reviewer": "mallory", "comment": "",
                             "at": "2026-01-01T00:00:00+00:00"}},
                 {"note": "added after signing"}, {"timings": {}}):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        doc = {**json.loads(approved.read_text()), **edit}
        (folder / "decision.json").write_text(json.dumps(doc))
        (folder / "decision.json.sig").write_bytes(
            (approved.parent / "decision.json.sig").read_bytes())
        code, out = _verify(capsys, example_files["released"], folder / "decision.json",
                            keys / PUB_FILE)
        assert code == 1 and "not verified: bad signature" in out, edit


def test_a_decision_naming_a_key_twice_is_refused_before_its_signature(
        approved, keys, example_files, tmp_path, capsys):
    """JSON readers keep the first or the last of a key named twice: a decision whose
    "verdict" appears as REJECTED to one and APPROVED to another is refused unread."""
    text = approved.read_text()
    folder = tmp_path / "dup"
    folder.mkdir()
    forged = text.replace('"verdict": "APPROVED"', '"verdict": "REJECTED", "verdict": "APPROVED"',
                          1)
    assert forged != text
    (folder / "decision.json").write_text(forged)
    (folder / "decision.json.sig").write_bytes((approved.parent / "decision.json.sig")
                                               .read_bytes())
    code, out = _verify(capsys, example_files["released"], folder / "decision.json",
                        keys / PUB_FILE)
    assert code == 1 and "names the key 'verdict' twice" in out
    nested = text.replace('"name": "released"', '"name": "released", "name": "original"', 1)
    (folder / "decision.json").write_text(nested)
    code, out = _verify(capsys, example_files["released"], folder / "decision.json",
                        keys / PUB_FILE)
    assert code == 1 and "names the key 'name' twice" in out


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
    sig = json.loads((approved.parent / "decision.json.sig").read_text())
    (folder / "decision.json.sig").write_text(json.dumps({**sig,
                                                          "schema": "riskgate.signature/1"}))
    code, out = _verify(capsys, example_files["released"], folder / "decision.json",
                        keys / PUB_FILE)
    assert code == 1 and "not verified: old signature" in out
    (tmp_path / "bad.pub").write_text("-----BEGIN PUBLIC KEY-----\nnot a key\n")
    code, out = _verify(capsys, example_files["released"], approved, tmp_path / "bad.pub")
    assert code == 3 and "--public-key is not a PEM public key" in out
    assert "Traceback" not in out


def test_canonical_bytes_are_the_same_in_two_processes(approved):
    doc = json.loads(approved.read_text())
    here = canonical_bytes(doc)
    code = ("import json,sys; from riskcore.signing import canonical_bytes; "
            "sys.stdout.buffer.write(canonical_bytes(json.load(open(sys.argv[1]))))")
    there = subprocess.run([sys.executable, "-c", code, str(approved)], capture_output=True,
                           check=True).stdout
    assert here == there
    assert b'"verdict":"APPROVED"' in here and b"sha256" in here


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("x"), "is a file; give a folder"),
    (lambda p: p.symlink_to(p.parent / "nowhere"), "is a symbolic link to nothing"),
    (lambda p: (p.mkdir(), (p / KEY_FILE).symlink_to(p.parent / "elsewhere")),
     "riskgate-signing.key' exists already (or is a symbolic link)"),
], ids=["into-a-file", "dangling-folder-link", "key-path-link"])
def test_keygen_refuses_files_and_links_with_one_line(make, message, tmp_path, capsys):
    from riskgate.flows.cli import main

    target = tmp_path / "keys"
    make(target)
    assert main(["keygen", str(target)]) == 3
    out = capsys.readouterr()
    captured = out.out + out.err
    assert message in " ".join(captured.split()) and "Traceback" not in captured
    assert not (tmp_path / "elsewhere").exists()
