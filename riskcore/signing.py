"""Signed decisions (issue 26): whoever publishes can check that the file about to go out is
the file the gate approved, and that the approval came from the gate.

The gate signs a canonical form of its decision with an Ed25519 key (RFC 8032): the release
id, the run id, the verdict, the checks, every input's SHA-256, the config's and the policy's
SHA-256, the versions and the decision's time, as JSON with sorted keys and no insignificant
white space (the same bytes in any process). The signature and the key's fingerprint go to
``decision.json.sig`` beside ``decision.json``, which says ``signed: true`` and names the key's
fingerprint. :func:`verify_release` checks a released file against a decision and a public key.

Keys: ``riskgate keygen DIR`` writes ``riskgate-signing.key`` (PKCS#8 PEM, mode 0600) and
``riskgate-signing.pub`` (SubjectPublicKeyInfo PEM). The gate signs when
``RISKGATE_SIGNING_KEY`` names the private key's file, or when the config's
``signing.secret_block`` names a Prefect Secret block that holds the PEM.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError, InputError

KEY_FILE = "riskgate-signing.key"
PUB_FILE = "riskgate-signing.pub"
SIGNATURE_SUFFIX = ".sig"
SIGNATURE_SCHEMA = "riskgate.signature/1"
KEY_ENV = "RISKGATE_SIGNING_KEY"
#: the decision's keys that the signature covers (with every input's name and SHA-256)
SIGNED_KEYS = ("schema", "release_id", "flow_run_id", "verdict", "approved", "checks",
               "provenance", "versions", "started_at", "finished_at", "signing_key")


def canonical_bytes(decision: Mapping[str, Any]) -> bytes:
    """The bytes the signature covers: the signed keys of the decision and each input's name
    and SHA-256, as sorted, compact UTF-8 JSON."""
    body = {k: decision.get(k) for k in SIGNED_KEYS}
    body["inputs"] = [{"name": i.get("name"), "sha256": i.get("sha256")}
                      for i in decision.get("inputs") or []]
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:  # pragma: no cover (installed with the gate extra)
        raise ConfigError("signing needs the 'cryptography' package (installed with "
                          "riskgate[gate])") from None
    return serialization, ed25519


def fingerprint(public_pem: bytes) -> str:
    """``sha256:`` and the hex SHA-256 of the raw 32-byte Ed25519 public key."""
    serialization, ed25519 = _crypto()
    key = serialization.load_pem_public_key(public_pem)
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise InputError("the public key is not an Ed25519 key (make one with riskgate keygen)")
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def keygen(folder: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write a new key pair into ``folder`` (never over an existing one)."""
    serialization, ed25519 = _crypto()
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    private, public = out / KEY_FILE, out / PUB_FILE
    for path in (private, public):
        if path.exists():
            raise InputError(f"'{path}' exists already; a signing key is never overwritten "
                             "(move it away, or choose another folder)")
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


@dataclass(frozen=True)
class Signer:
    """A loaded private key and its public key's fingerprint."""

    key: Any
    fingerprint: str

    @classmethod
    def from_pem(cls, pem: bytes, what: str) -> Signer:
        serialization, ed25519 = _crypto()
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError):
            raise ConfigError(f"{what} is not an unencrypted PEM private key; make one with "
                              "riskgate keygen DIR") from None
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise ConfigError(f"{what} is not an Ed25519 key; make one with riskgate keygen DIR")
        public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
        return cls(key, fingerprint(public))

    def sign(self, decision: Mapping[str, Any]) -> bytes:
        """``decision.json.sig``: the signature of :func:`canonical_bytes` and the key."""
        signature = self.key.sign(canonical_bytes(decision))
        doc = {"schema": SIGNATURE_SCHEMA, "algorithm": "Ed25519",
               "key_fingerprint": self.fingerprint,
               "signature": base64.b64encode(signature).decode("ascii")}
        return json.dumps(doc, indent=2, sort_keys=True).encode("utf-8") + b"\n"


def signer_from_environment() -> Signer | None:
    """The signer named by ``RISKGATE_SIGNING_KEY`` (a file), or None when it is unset."""
    path = os.environ.get(KEY_ENV)
    if not path:
        return None
    try:
        pem = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"${KEY_ENV} names '{path}', which cannot be read "
                          f"({exc.strerror}); point it at riskgate-signing.key") from None
    return Signer.from_pem(pem, f"${KEY_ENV} ('{path}')")


class VerificationFailed(Exception):
    """The release may not go out: the check named in the message failed."""


def verify_decision(decision_bytes: bytes, signature_bytes: bytes | None, public_pem: bytes,
                    released_sha256: str) -> Mapping[str, Any]:
    """The decision, when its signature is valid under ``public_pem``, it names this key, the
    released file's SHA-256 is the decision's and the verdict is APPROVED; otherwise
    :class:`VerificationFailed` naming the check that failed."""
    serialization, ed25519 = _crypto()
    try:
        decision = json.loads(decision_bytes)
    except ValueError:
        raise VerificationFailed("bad decision: decision.json is not JSON") from None
    if not isinstance(decision, dict):
        raise VerificationFailed("bad decision: decision.json is not a JSON object")
    if signature_bytes is None or not decision.get("signed"):
        raise VerificationFailed("unsigned: the decision has no signature (the gate ran "
                                 f"without ${KEY_ENV} or a signing block)")
    try:
        sig = json.loads(signature_bytes)
        raw_signature = base64.b64decode(sig["signature"], validate=True)
    except (ValueError, KeyError, TypeError):
        raise VerificationFailed("bad signature (decision.json.sig is malformed)") from None
    expected = fingerprint(public_pem)
    if sig.get("key_fingerprint") != expected or decision.get("signing_key") != expected:
        raise VerificationFailed(
            f"wrong key: the decision was signed by {sig.get('key_fingerprint')}, the public "
            f"key given is {expected}")
    key = serialization.load_pem_public_key(public_pem)
    try:
        key.verify(raw_signature, canonical_bytes(decision))
    except Exception:  # cryptography's InvalidSignature
        raise VerificationFailed("bad signature (the decision does not match what was "
                                 "signed: edited after signing?)") from None
    released = [i for i in decision.get("inputs") or [] if i.get("name") == "released"]
    if not released or released[0].get("sha256") != released_sha256:
        raise VerificationFailed(
            "different file: the file's SHA-256 is "
            f"{released_sha256[:16]}..., the decision approved "
            f"{(released[0].get('sha256') or '?')[:16] if released else 'no released table'}...")
    if decision.get("verdict") != "APPROVED" or decision.get("approved") is not True:
        raise VerificationFailed(f"verdict {decision.get('verdict')}: only an APPROVED release "
                                 "may be published")
    return decision
