"""Signed decisions: whoever publishes can check that the file about to go out is the file the
gate approved, that the approval came from the gate, and that it was made under the
custodian's rules.

The gate signs a canonical form of its whole decision with an Ed25519 key (RFC 8032): every
key of ``decision.json`` (verdict, checks, reasons, the review and its reviewer, every input's
SHA-256, the provenance with the config's and the policy's SHA-256, versions, times), as JSON
with sorted keys and no insignificant white space (the same bytes in any process). The
signature and the key's fingerprint go to ``decision.json.sig`` beside ``decision.json``, which
says ``signed: true`` and names the key's fingerprint. :func:`verify_decision` checks a
released file against a decision, a public key and the custodian's rules.

Keys: ``riskgate keygen DIR`` writes ``riskgate-signing.key`` (PKCS#8 PEM, mode 0600) and
``riskgate-signing.pub`` (SubjectPublicKeyInfo PEM). A deployed gate never holds the key: it
asks the signer (``riskgate signer``, :mod:`riskcore.signer`) over a local socket named by
``RISKGATE_SIGNER_SOCKET``; a gate run from the command line on the custodian's own machine
may read it from the file ``RISKGATE_SIGNING_KEY`` names.
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

from .errors import ConfigError, InputError, RiskgateError

KEY_FILE = "riskgate-signing.key"
PUB_FILE = "riskgate-signing.pub"
SIGNATURE_SUFFIX = ".sig"
#: version 2 signs the whole decision (version 1 signed a list of its keys, not the review)
SIGNATURE_SCHEMA = "riskgate.signature/2"
KEY_ENV = "RISKGATE_SIGNING_KEY"
SOCKET_ENV = "RISKGATE_SIGNER_SOCKET"


class DuplicateKey(ValueError):
    """A JSON document names a key twice (a reader would silently take one of them)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKey(key)
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_json(raw: bytes | str) -> Any:
    """JSON with every object's keys distinct (anywhere) and no NaN or Infinity: what was
    signed is what is read. ValueError (DuplicateKey naming the key) otherwise; a document
    nested deeper than Python's parser can follow (thousands of arrays in a few kilobytes) is
    a ValueError too, never a RecursionError that escapes as a crash."""
    try:
        return json.loads(raw, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply to be read") from None


def canonical_bytes(decision: Mapping[str, Any]) -> bytes:
    """The bytes the signature covers: the whole decision as sorted, compact UTF-8 JSON."""
    return json.dumps(decision, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def signature_document(fingerprint_: str, signature: bytes) -> bytes:
    """``decision.json.sig``: the signature and the key's fingerprint."""
    doc = {"schema": SIGNATURE_SCHEMA, "algorithm": "Ed25519", "key_fingerprint": fingerprint_,
           "signature": base64.b64encode(signature).decode("ascii")}
    return json.dumps(doc, indent=2, sort_keys=True).encode("utf-8") + b"\n"


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
    key = load_public_key(public_pem)
    serialization, _ = _crypto()
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def load_public_key(public_pem: bytes, what: str = "the public key") -> Any:
    """An Ed25519 public key from its PEM; InputError naming ``what`` for anything else."""
    serialization, ed25519 = _crypto()
    try:
        key = serialization.load_pem_public_key(public_pem)
    except Exception:  # ValueError, TypeError, UnsupportedAlgorithm: one line for all
        raise InputError(f"{what} is not a PEM public key (-----BEGIN PUBLIC KEY-----); give "
                         "the riskgate-signing.pub that riskgate keygen wrote") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise InputError(f"{what} is not an Ed25519 key (make one with riskgate keygen)")
    return key


def keygen(folder: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write a new key pair into ``folder`` (never over an existing one)."""
    serialization, ed25519 = _crypto()
    out = Path(folder)
    if out.is_symlink() and not out.exists():
        raise InputError(f"'{out}' is a symbolic link to nothing; give a folder for the key "
                         "pair (a new one is created)")
    if out.exists() and not out.is_dir():
        raise InputError(f"'{out}' is a file; give a folder for the key pair (a new one is "
                         "created)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the folder '{out}' ({exc.strerror}); give a folder "
                         "you can write") from None
    private, public = out / KEY_FILE, out / PUB_FILE
    for path in (private, public):
        if path.exists() or path.is_symlink():
            raise InputError(f"'{path}' exists already (or is a symbolic link); a signing key "
                             "is never written over or through one: move it away, or choose "
                             "another folder")
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
    #: the public key's PEM (what an earlier decision signed with this key verifies under)
    public_pem: bytes = b""

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
        return cls(key, fingerprint(public), public)

    def sign(self, decision: Mapping[str, Any]) -> bytes:
        """``decision.json.sig``: the signature of :func:`canonical_bytes` and the key."""
        return signature_document(self.fingerprint, self.key.sign(canonical_bytes(decision)))


class SigningRefused(RiskgateError):
    """The signer would not sign this decision (another config, a malformed request)."""


class VerificationFailed(Exception):
    """The release may not go out: the check named in the message failed."""


@dataclass(frozen=True)
class Rules:
    """The custodian's rules a decision must have been made under: the SHA-256 of the gate
    config's text and of its policy's (what ``provenance`` records)."""

    config_sha256: str
    policy_sha256: str

    def describe(self) -> str:
        return f"config sha256:{self.config_sha256} / policy sha256:{self.policy_sha256}"


def read_decision(decision_bytes: bytes) -> dict[str, Any]:
    """``decision.json`` read strictly (:func:`strict_json`); VerificationFailed naming what is
    wrong, before any signature is looked at."""
    try:
        decision = strict_json(decision_bytes)
    except DuplicateKey as exc:
        raise VerificationFailed(f"bad decision: decision.json names the key '{exc}' twice (a "
                                 "reader would take one of them): refused unread") from None
    except ValueError:
        raise VerificationFailed("bad decision: decision.json is not JSON") from None
    if not isinstance(decision, dict):
        raise VerificationFailed("bad decision: decision.json is not a JSON object")
    return decision


def check_signature(decision: Mapping[str, Any], signature_bytes: bytes | None,
                    public_pem: bytes) -> None:
    """VerificationFailed unless the decision is signed, under ``public_pem``, over every
    key it holds."""
    if signature_bytes is None or not decision.get("signed"):
        raise VerificationFailed("unsigned: the decision has no signature (the gate ran "
                                 f"without ${SOCKET_ENV} or ${KEY_ENV})")
    try:
        sig = strict_json(signature_bytes)
        raw_signature = base64.b64decode(sig["signature"], validate=True)
    except (ValueError, KeyError, TypeError):
        raise VerificationFailed("bad signature (decision.json.sig is malformed)") from None
    if sig.get("schema") != SIGNATURE_SCHEMA:
        raise VerificationFailed(
            f"old signature: signed as {str(sig.get('schema'))[:40]}, which does not cover the "
            f"whole decision; only {SIGNATURE_SCHEMA} verifies: re-run the gate")
    expected = fingerprint(public_pem)
    if sig.get("key_fingerprint") != expected or decision.get("signing_key") != expected:
        raise VerificationFailed(
            f"wrong key: the decision was signed by {sig.get('key_fingerprint')}, the public "
            f"key given is {expected}")
    key = load_public_key(public_pem)
    try:
        key.verify(raw_signature, canonical_bytes(decision))
    except Exception:  # cryptography's InvalidSignature
        raise VerificationFailed("bad signature (the decision does not match what was "
                                 "signed: edited after signing?)") from None


def decision_rules(decision: Mapping[str, Any]) -> Rules | None:
    """The rules a decision says it was made under (its provenance), or None."""
    prov = decision.get("provenance")
    if not isinstance(prov, Mapping):
        return None
    config, policy = prov.get("config"), prov.get("policy")
    if not isinstance(config, Mapping) or not isinstance(policy, Mapping):
        return None
    return Rules(str(config.get("sha256")), str(policy.get("sha256")))


def verify_decision(decision_bytes: bytes, signature_bytes: bytes | None, public_pem: bytes,
                    released_sha256: str, rules: Rules | None = None) -> Mapping[str, Any]:
    """The decision, when it reads strictly, its signature is valid under ``public_pem`` over
    all it says, it was made under ``rules`` (the custodian's config and policy), the
    released file's SHA-256 is the decision's and the verdict is APPROVED; otherwise
    :class:`VerificationFailed` naming the check that failed."""
    decision = read_decision(decision_bytes)
    check_signature(decision, signature_bytes, public_pem)
    if rules is not None:
        made = decision_rules(decision)
        if made != rules:
            raise VerificationFailed(
                "different rules: the decision was made under "
                f"{made.describe() if made else 'no recorded config and policy'}, the "
                f"custodian's are {rules.describe()}")
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
