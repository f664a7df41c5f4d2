"""The signer: the one process that holds the signing key, so that no gate does.

Prefect's open-source server has one auth string and no roles: whoever holds it can create a
deployment whose code runs on the gate's worker, with the worker's environment and files. A
key the gate process can read is a key such code can copy, and decisions signed elsewhere
with it would verify. So the key lives with ``riskgate signer``, run as a user of its own (the
key file readable by that user alone), and the gate asks it for each signature over a local
socket (``RISKGATE_SIGNER_SOCKET``). The signer

* signs only a decision made under one of the configs it was started with: the decision's
  provenance must carry that config's SHA-256 and its policy's (the custodian's rules, read
  when the signer starts; a re-pinned or edited config needs a restart of the signer);
* appends every signature to its log (one JSON line: time, the decision's SHA-256, run id,
  release id, verdict, config SHA-256, and the requesting process's pid and uid as the
  kernel reports them), a file the flows' user cannot write;
* says why it refused, in one line, and never returns the key.

What it answers: a deployment's code can no longer copy the key and sign elsewhere, and no
signature is made without a line in the log. What it does not: a process that can reach the
socket can still have a decision of its own making signed, as long as it names the deployed
config (the log then holds it: the run id it names has no gate run, or its file no gate
event). Hence the README's rule that the Prefect API's auth string belongs to the custodian
alone, and that a judged pipeline triggers its gate by writing a manifest, never through the
API.

Protocol: one request per connection, one line of JSON each way: ``{"op": "hello"}`` answers
the key's fingerprint; ``{"op": "sign", "decision": {...}}`` answers ``{"signature": <the
decision.json.sig text>}`` or ``{"error": <why>}``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import socketserver
import stat
import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .errors import ConfigError
from .signing import (
    Rules,
    Signer,
    SigningRefused,
    canonical_bytes,
    decision_rules,
    strict_json,
)

log = logging.getLogger("riskgate.signer")

#: the largest request the signer reads (a decision is tens of kilobytes)
MAX_REQUEST_BYTES = 8 << 20
#: seconds a client waits for the signer
CLIENT_TIMEOUT_S = 30.0


def _read_line(sock: socket.socket, limit: int = MAX_REQUEST_BYTES) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline >= 0:
            chunks.append(chunk[:newline])
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ValueError(f"request larger than {limit} bytes")
    return b"".join(chunks)


def _ask(path: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """One request to the signer at ``path``; SigningRefused when it cannot be reached or
    answers with an error."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CLIENT_TIMEOUT_S)
            sock.connect(path)
            sock.sendall(json.dumps(request, allow_nan=False).encode("utf-8") + b"\n")
            answer = json.loads(_read_line(sock) or b"{}")
    except (OSError, ValueError) as exc:
        raise SigningRefused(f"the signer at '{path}' cannot be reached "
                             f"({type(exc).__name__}: {exc}); start it with riskgate signer "
                             "(RISKGATE_SIGNER_SOCKET names its socket)") from None
    if not isinstance(answer, dict):
        raise SigningRefused(f"the signer at '{path}' answered something that is not JSON")
    if answer.get("error"):
        raise SigningRefused(f"the signer refused: {str(answer['error'])[:500]}")
    return answer


@dataclass(frozen=True)
class RemoteSigner:
    """The gate's side of the signer: its fingerprint, and a signature per decision."""

    path: str
    fingerprint: str

    @classmethod
    def connect(cls, path: str) -> RemoteSigner:
        """The signer at ``path`` (ConfigError naming the socket when it does not answer)."""
        try:
            answer = _ask(path, {"op": "hello"})
        except SigningRefused as exc:
            raise ConfigError(str(exc)) from None
        return cls(path, str(answer.get("fingerprint")))

    def sign(self, decision: Mapping[str, Any]) -> bytes:
        """``decision.json.sig`` for ``decision``, made by the signer (SigningRefused)."""
        answer = _ask(self.path, {"op": "sign", "decision": dict(decision)})
        return str(answer["signature"]).encode("utf-8")


@dataclass(frozen=True)
class Policy:
    """What the signer signs: decisions under these rules, with this key."""

    signer: Signer
    rules: tuple[Rules, ...]

    def check(self, decision: Mapping[str, Any]) -> None:
        """SigningRefused naming what is wrong with a decision it was asked to sign."""
        made = decision_rules(decision)
        if made not in self.rules:
            allowed = "; ".join(r.describe() for r in self.rules)
            raise SigningRefused(
                f"the decision was made under "
                f"{made.describe() if made else 'no recorded config and policy'}, not under "
                f"a config this signer was started with ({allowed})")
        if decision.get("signed") is not True or \
                decision.get("signing_key") != self.signer.fingerprint:
            raise SigningRefused("the decision must say signed: true and name this signer's "
                                 f"key ({self.signer.fingerprint})")


class SignatureLog:
    """The signer's append-only log: one JSON line per signature, flushed to disk."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fd = fd

    def append(self, entry: Mapping[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True).encode("utf-8") + b"\n"
        with self._lock:
            os.write(self._fd, line)
            os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


def _peer(sock: socket.socket) -> dict[str, int]:
    """The requesting process as the kernel reports it (Linux SO_PEERCRED)."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, gid = struct.unpack("3i", raw)
        return {"pid": pid, "uid": uid, "gid": gid}
    except (OSError, AttributeError):
        return {}


def handle(request: Any, policy: Policy, signatures: SignatureLog,
           peer: Mapping[str, int]) -> dict[str, Any]:
    """The answer to one request (never raises)."""
    if not isinstance(request, dict):
        return {"error": "a request is a JSON object with 'op'"}
    if request.get("op") == "hello":
        return {"fingerprint": policy.signer.fingerprint}
    if request.get("op") != "sign" or not isinstance(request.get("decision"), dict):
        return {"error": "unknown request: ask {'op': 'hello'} or {'op': 'sign', "
                         "'decision': {...}}"}
    decision = request["decision"]
    try:
        policy.check(decision)
        body = canonical_bytes(decision)
    except SigningRefused as exc:
        log.warning("refused to sign run %s: %s", str(decision.get("flow_run_id"))[:64], exc)
        return {"error": str(exc)}
    except (TypeError, ValueError) as exc:
        return {"error": f"the decision cannot be signed as JSON: {exc}"}
    made = decision_rules(decision)
    signatures.append({
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "decision_sha256": hashlib.sha256(body).hexdigest(),
        "flow_run_id": str(decision.get("flow_run_id")),
        "release_id": str(decision.get("release_id")),
        "verdict": str(decision.get("verdict")),
        "config_sha256": made.config_sha256 if made else None,
        "peer": dict(peer)})
    return {"signature": policy.signer.sign(decision).decode("utf-8")}


class _Handler(socketserver.StreamRequestHandler):
    server: SignerServer

    def handle(self) -> None:
        try:
            request = strict_json(_read_line(self.connection))
        except ValueError as exc:
            answer: dict[str, Any] = {"error": f"the request is not one line of JSON ({exc})"}
        else:
            answer = handle(request, self.server.policy, self.server.signatures,
                            _peer(self.connection))
        try:
            self.connection.sendall(json.dumps(answer).encode("utf-8") + b"\n")
        except OSError:
            pass


class SignerServer(socketserver.ThreadingUnixStreamServer):
    """The signer's socket server (one thread per request)."""

    daemon_threads = True

    def __init__(self, path: str, policy: Policy, signatures: SignatureLog,
                 mode: int = 0o666) -> None:
        if os.path.exists(path) or os.path.islink(path):
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise ConfigError(f"--socket '{path}' exists and is not a socket; choose "
                                  "another path")
            os.unlink(path)  # a socket left by a signer that stopped
        self.policy, self.signatures = policy, signatures
        super().__init__(path, _Handler)
        os.chmod(path, mode)


def load_policy_for(signer: Signer, configs: Sequence[str],
                    storage_options: Mapping[str, Any] | None = None) -> Policy:
    """The signer's policy: the rules of each config (its text's SHA-256 and its policy's,
    exactly as a gate run records them in its provenance)."""
    from .gate.config import load_gate

    rules = []
    for url in configs:
        gate = load_gate(url, None, storage_options)
        rules.append(Rules(str(gate.provenance["config"]["sha256"]),
                           str(gate.provenance["policy"]["sha256"])))
    return Policy(signer, tuple(rules))
