"""The signer: the one process that holds the signing key, so that no gate does.

Prefect's open-source server has one auth string and no roles: whoever holds it can create a
deployment whose code runs on the gate's worker, with the worker's environment and files. A
key the gate process can read is a key such code can copy, and decisions signed elsewhere
with it would verify. So the key lives with ``riskgate signer``, run as a user of its own (the
key file readable by that user alone), and the gate asks it for each signature over a local
socket (``RISKGATE_SIGNER_SOCKET``). The signer signs a decision only when all of these hold:

* **the asking process is the worker's**: the socket is not world-writable (mode 0660 by
  default, its group the worker's), and the kernel's account of the peer (``SO_PEERCRED``)
  names a user or group the signer was started to serve (``--allow-user``,
  ``--allow-group``); any other local user is refused before its request is read;
* **the decision is a gate run's**: the run it names exists, is a run of the release gate
  under one of its deployments, is running now, was deployed with the config the decision
  was made under, is labelled with the decision's release, and has not been signed before
  (:class:`RunCheck`; the Prefect API's answer in :mod:`riskgate.flows.gate_runs`). A
  decision with no gate run behind it is refused, not only logged;
* **the rules are the custodian's**: the decision's provenance carries the SHA-256 of one of
  the configs the signer was started with and of that config's policy.

Every signature, and every refusal, is one JSON line in the signer's log (time, the decision's
SHA-256, run id, release id, verdict, config SHA-256, the requesting process's pid, uid and
gid), a file the flows' user cannot write; the run ids it holds are never signed again, across
restarts. The key never leaves the process.

Protocol: one request per connection, one line of JSON each way: ``{"op": "hello"}`` answers
the key's fingerprint and public key; ``{"op": "sign", "decision": {...}}`` answers
``{"signature": <the decision.json.sig text>}`` or ``{"error": <why>}``.
"""

from __future__ import annotations

import grp
import hashlib
import json
import logging
import os
import pwd
import socket
import socketserver
import stat
import struct
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from .errors import ConfigError
from .signing import (
    KEY_ENV,
    SOCKET_ENV,
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
#: the socket's permissions unless told otherwise: its owner and its group (the worker's)
DEFAULT_SOCKET_MODE = 0o660


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
            try:
                sock.sendall(json.dumps(request, allow_nan=False).encode("utf-8") + b"\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # a signer refusing this peer answers before reading, then closes: the
                # request may meet a closed socket, and the refusal is still there to read
            answer = strict_json(_read_line(sock) or b"{}")
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
    """The gate's side of the signer: its fingerprint and public key, and a signature per
    decision."""

    path: str
    fingerprint: str
    public_pem: bytes = b""

    @classmethod
    def connect(cls, path: str) -> RemoteSigner:
        """The signer at ``path`` (ConfigError naming the socket when it does not answer)."""
        try:
            answer = _ask(path, {"op": "hello"})
        except SigningRefused as exc:
            raise ConfigError(str(exc)) from None
        return cls(path, str(answer.get("fingerprint")),
                   str(answer.get("public_key") or "").encode("ascii", "replace"))

    def sign(self, decision: Mapping[str, Any]) -> bytes:
        """``decision.json.sig`` for ``decision``, made by the signer (SigningRefused)."""
        answer = _ask(self.path, {"op": "sign", "decision": dict(decision)})
        return str(answer["signature"]).encode("utf-8")


def signer_from_environment(deployed: bool = False) -> Signer | RemoteSigner | None:
    """The gate's signer: the signer service at ``RISKGATE_SIGNER_SOCKET``, else the key file
    ``RISKGATE_SIGNING_KEY`` names, else None (unsigned).

    A deployed run (``deployed``) never reads a key file: a deployment's code runs in the same
    process and environment, so whoever can create a deployment could copy the key; it is a
    ConfigError naming the fix (``riskgate signer``)."""
    socket_path = os.environ.get(SOCKET_ENV)
    if socket_path:
        return RemoteSigner.connect(socket_path)
    path = os.environ.get(KEY_ENV)
    if not path:
        return None
    if deployed:
        raise ConfigError(
            f"${KEY_ENV} is set in a deployed gate's environment, where any deployment's code "
            "could read the key: keep the key with riskgate signer (run as its own user) and "
            f"set ${SOCKET_ENV} on the worker instead")
    try:
        pem = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"${KEY_ENV} names '{path}', which cannot be read "
                          f"({exc.strerror}); point it at riskgate-signing.key") from None
    return Signer.from_pem(pem, f"${KEY_ENV} ('{path}')")


class RunCheck(Protocol):
    """Confirms that a decision was made by a running gate run of a deployed gate (the
    Prefect API's answer: :class:`riskgate.flows.gate_runs.DeployedRuns`)."""

    def confirm(self, decision: Mapping[str, Any], rules: Rules) -> None:
        """SigningRefused naming what is wrong (no such run, not a deployed gate's, not
        running, deployed under other rules, another release, the API unreachable)."""


@dataclass(frozen=True)
class Peers:
    """Who may ask: the worker's users and groups, by number (``SO_PEERCRED``)."""

    uids: frozenset[int] = frozenset()
    gids: frozenset[int] = frozenset()

    @classmethod
    def named(cls, users: Iterable[str], groups: Iterable[str]) -> Peers:
        """From user and group names (or numbers); ConfigError naming one that does not
        exist, or when none is given (nobody could ask)."""
        uids, gids = set(), set()
        for user in users:
            try:
                uids.add(int(user) if user.isdigit() else pwd.getpwnam(user).pw_uid)
            except KeyError:
                raise ConfigError(f"--allow-user '{user}': no such user on this host; name "
                                  "the user the Prefect worker runs as") from None
        for group in groups:
            try:
                gids.add(int(group) if group.isdigit() else grp.getgrnam(group).gr_gid)
            except KeyError:
                raise ConfigError(f"--allow-group '{group}': no such group on this host")\
                    from None
        if not uids and not gids:
            raise ConfigError("the signer serves nobody: name the worker's user with "
                              "--allow-user USER (or its group with --allow-group GROUP); any "
                              "other local user is refused")
        return cls(frozenset(uids), frozenset(gids))

    def allows(self, peer: Mapping[str, int]) -> bool:
        return (peer.get("uid") in self.uids) or (peer.get("gid") in self.gids)

    def describe(self) -> str:
        return ", ".join([*(f"uid {u}" for u in sorted(self.uids)),
                          *(f"gid {g}" for g in sorted(self.gids))])


@dataclass
class Policy:
    """What the signer signs: decisions of running gate runs under these rules, for these
    peers, with this key; each run once."""

    signer: Signer
    rules: tuple[Rules, ...]
    peers: Peers
    runs: RunCheck
    #: run ids already signed (read back from the log at start: never signed twice)
    signed_runs: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self, decision: Mapping[str, Any]) -> Rules:
        """The rules the decision was made under; SigningRefused naming what is wrong."""
        made = decision_rules(decision)
        if made is None or made not in self.rules:
            allowed = "; ".join(r.describe() for r in self.rules)
            raise SigningRefused(
                f"the decision was made under "
                f"{made.describe() if made else 'no recorded config and policy'}, not under "
                f"a config this signer was started with ({allowed})")
        if decision.get("signed") is not True or \
                decision.get("signing_key") != self.signer.fingerprint:
            raise SigningRefused("the decision must say signed: true and name this signer's "
                                 f"key ({self.signer.fingerprint})")
        run_id = str(decision.get("flow_run_id") or "")
        if run_id in self.signed_runs:
            raise SigningRefused(f"run {run_id[:64]} has been signed before: a gate run's "
                                 "decision is signed once")
        self.runs.confirm(decision, made)
        return made

    def sign_once(self, decision: Mapping[str, Any]) -> tuple[Rules, bytes]:
        """Check, then sign, with the run recorded as signed (two requests for one run at
        once: the second is refused)."""
        with self._lock:
            made = self.check(decision)
            self.signed_runs.add(str(decision.get("flow_run_id") or ""))
        return made, self.signer.sign(decision)


class SignatureLog:
    """The signer's append-only log: one JSON line per signature or refusal, flushed to disk."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fd = fd

    def signed_runs(self) -> set[str]:
        """The run ids the log records as signed (lines that do not read are skipped)."""
        out: set[str] = set()
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(entry, dict) and entry.get("signed", True) is True \
                            and entry.get("flow_run_id"):
                        out.add(str(entry["flow_run_id"]))
        except OSError:
            pass
        return out

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


def _entry(decision: Mapping[str, Any], peer: Mapping[str, int], signed: bool,
           body: bytes | None = None, why: str | None = None) -> dict[str, Any]:
    made = decision_rules(decision)
    entry: dict[str, Any] = {
        "time": datetime.now(UTC).isoformat(timespec="seconds"), "signed": signed,
        "flow_run_id": str(decision.get("flow_run_id"))[:128],
        "release_id": str(decision.get("release_id"))[:128],
        "verdict": str(decision.get("verdict"))[:32],
        "config_sha256": made.config_sha256[:64] if made else None, "peer": dict(peer)}
    if body is not None:
        entry["decision_sha256"] = hashlib.sha256(body).hexdigest()
    if why is not None:
        entry["refused"] = why[:500]
    return entry


def handle(request: Any, policy: Policy, signatures: SignatureLog,
           peer: Mapping[str, int]) -> dict[str, Any]:
    """The answer to one request (never raises)."""
    if not isinstance(request, dict):
        return {"error": "a request is a JSON object with 'op'"}
    if request.get("op") == "hello":
        return {"fingerprint": policy.signer.fingerprint,
                "public_key": policy.signer.public_pem.decode("ascii")}
    if request.get("op") != "sign" or not isinstance(request.get("decision"), dict):
        return {"error": "unknown request: ask {'op': 'hello'} or {'op': 'sign', "
                         "'decision': {...}}"}
    decision = request["decision"]
    try:
        body = canonical_bytes(decision)
        made, signature = policy.sign_once(decision)
    except SigningRefused as exc:
        log.warning("refused to sign run %s: %s", str(decision.get("flow_run_id"))[:64], exc)
        signatures.append(_entry(decision, peer, False, why=str(exc)))
        return {"error": str(exc)}
    except (TypeError, ValueError) as exc:
        return {"error": f"the decision cannot be signed as JSON: {exc}"}
    signatures.append(_entry(decision, peer, True, body))
    return {"signature": signature.decode("utf-8")}


class _Handler(socketserver.StreamRequestHandler):
    server: SignerServer

    def handle(self) -> None:
        peer = _peer(self.connection)
        if not self.server.policy.peers.allows(peer):
            # refused before a byte of the request is read: nothing it says is looked at
            log.warning("refused a request from pid %s uid %s gid %s: not a user or group this "
                        "signer serves", peer.get("pid"), peer.get("uid"), peer.get("gid"))
            answer: dict[str, Any] = {
                "error": f"uid {peer.get('uid')} / gid {peer.get('gid')} may not ask this "
                         "signer: it serves the gate worker's user alone (--allow-user)"}
        else:
            try:
                request = strict_json(_read_line(self.connection))
            except ValueError as exc:
                answer = {"error": f"the request is not one line of JSON ({exc})"}
            else:
                answer = handle(request, self.server.policy, self.server.signatures, peer)
        try:
            self.connection.sendall(json.dumps(answer).encode("utf-8") + b"\n")
        except OSError:
            pass


class SignerServer(socketserver.ThreadingUnixStreamServer):
    """The signer's socket server (one thread per request). The socket is created with
    ``mode`` (0660 unless told otherwise) and, given ``group``, that group; on close it is
    removed only if it is still the one this server bound (a replacement's stays)."""

    daemon_threads = True

    def __init__(self, path: str, policy: Policy, signatures: SignatureLog,
                 mode: int = DEFAULT_SOCKET_MODE, group: int | None = None) -> None:
        if os.path.exists(path) or os.path.islink(path):
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise ConfigError(f"--socket '{path}' exists and is not a socket; choose "
                                  "another path")
            if _answers(path):
                raise ConfigError(f"--socket '{path}': a signer is listening there already; "
                                  "stop it first, or choose another path")
            os.unlink(path)  # a socket left by a signer that stopped
        if mode & 0o002:
            raise ConfigError(f"--socket-mode {mode:o} lets every local user ask for "
                              "signatures; use 660 (the worker's group) or 600")
        self.policy, self.signatures = policy, signatures
        old = os.umask(0o777)  # the socket is never reachable before its mode is set
        try:
            super().__init__(path, _Handler)
        finally:
            os.umask(old)
        if group is not None:
            os.chown(path, -1, group)
        os.chmod(path, mode)
        self.bound = _identity(path)
        self.path = path

    def remove_socket(self) -> None:
        """Unlink the socket path when it is still this server's socket (the same file: its
        device, inode and change time; a file system may give a new file a freed inode)."""
        try:
            if _identity(self.path) == self.bound:
                os.unlink(self.path)
        except OSError:
            pass


def _identity(path: str) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_dev, st.st_ino, st.st_ctime_ns


def _answers(path: str) -> bool:
    """Something listens on the socket at ``path``."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            sock.connect(path)
            return True
    except OSError:
        return False


def load_rules(configs: Sequence[str], storage_options: Mapping[str, Any] | None = None
               ) -> tuple[Rules, ...]:
    """The rules of each config (its text's SHA-256 and its policy's, exactly as a gate run
    records them in its provenance)."""
    from .gate.config import load_gate

    rules = []
    for url in configs:
        gate = load_gate(url, None, storage_options)
        rules.append(Rules(str(gate.provenance["config"]["sha256"]),
                           str(gate.provenance["policy"]["sha256"])))
    return tuple(rules)
