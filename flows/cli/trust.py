"""``riskgate keygen``, ``riskgate signer`` and ``riskgate verify``: signed decisions bound to
the custodian's rules.

The publishing step runs ``riskgate verify RELEASED --decision URL --public-key PUB --config
CFG`` and publishes only on exit 0: the decision's signature is valid under the custodian's
key over everything it says, it was made under the custodian's config and policy (their
SHA-256 in its provenance), the file about to go out is the file that was gated, and the
verdict is APPROVED. Nothing in it trusts the Prefect server. The key itself stays with
``riskgate signer`` (:mod:`riskcore.signer`), run as its own user.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Mapping
from typing import Any

from riskcore.errors import ConfigError, InputError, RiskgateError
from riskcore.redact import redact_text

from .common import add_storage_flag, console, file_sha256, out, storage_options

#: verify's exit codes: 0 publish, 1 do not publish (the line says which check failed)
EXIT_VERIFIED, EXIT_REFUSED = 0, 1
MAX_DECISION_BYTES = 64 << 20


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    k = sub.add_parser("keygen", parents=[common], help="write an Ed25519 signing key pair",
                       description="Write DIR/riskgate-signing.key (private, mode 0600) and "
                       "DIR/riskgate-signing.pub. Give the private key to riskgate signer "
                       "(run as its own user), never to a worker.")
    k.add_argument("dir", help="folder for the key pair (created if needed)")
    k.set_defaults(handler=cmd_keygen)

    sg = sub.add_parser("signer", parents=[common],
                        help="hold the signing key and sign the gate's decisions over a "
                        "local socket",
                        description="Run as a user of its own, with the key readable by that "
                        "user alone and the Prefect API's URL and auth string in its "
                        "environment. Signs a decision only when the asking process is the "
                        "worker's (--allow-user, --allow-group), the run it names is a running "
                        "run of a deployed gate never signed before (asked of the Prefect API), "
                        "and it was made under one of the --config files (their SHA-256 and "
                        "their policy's, read now: restart after a redeploy). Appends every "
                        "signature and refusal to --log. Workers set RISKGATE_SIGNER_SOCKET to "
                        "--socket.")
    sg.add_argument("--key", required=True, help="riskgate-signing.key")
    sg.add_argument("--config", required=True, action="append", dest="configs",
                    help="a gate config whose decisions it signs (repeat for several: the "
                    "trigger config, the nightly one)")
    sg.add_argument("--socket", required=True, help="path of the Unix socket to listen on")
    sg.add_argument("--log", required=True, dest="log_path",
                    help="the signature log (appended to, one JSON line per signature)")
    sg.add_argument("--allow-user", action="append", default=[], dest="allow_users",
                    metavar="USER", help="the user the Prefect worker runs as (repeat for "
                    "several); any other local user is refused")
    sg.add_argument("--allow-group", action="append", default=[], dest="allow_groups",
                    metavar="GROUP", help="a group whose processes may ask (the worker's own)")
    sg.add_argument("--socket-group", dest="socket_group", metavar="GROUP",
                    help="the socket's group (the worker's; the signer's user must be in it, "
                    "or run as root)")
    sg.add_argument("--socket-mode", default="660", dest="socket_mode",
                    help="permissions of the socket, octal (default 660: its owner and its "
                    "group; a mode any local user may write is refused)")
    add_storage_flag(sg)
    sg.set_defaults(handler=cmd_signer)

    v = sub.add_parser("verify", parents=[common],
                       help="check a release against its signed decision before publishing",
                       description="Exit 0 only when the decision's signature is valid under "
                       "the public key over everything the decision says, the decision was "
                       "made under the custodian's config and its policy, the released file's "
                       "SHA-256 is the decision's and the verdict is APPROVED; 1 otherwise (one "
                       "line names the check that failed); 3 when something cannot be read.")
    v.add_argument("released", help="the file (or folder of Parquet parts) about to be "
                   "published: a path or any fsspec URL")
    v.add_argument("--decision", required=True, help="decision.json of the gate run: a path "
                   "or any fsspec URL (its signature is read from DECISION.sig)")
    v.add_argument("--public-key", required=True, dest="public_key",
                   help="riskgate-signing.pub: a path or any fsspec URL")
    v.add_argument("--config", required=True, help="the custodian's gate config (a path or "
                   "any fsspec URL): the decision must have been made under it and the policy "
                   "it names")
    add_storage_flag(v)
    v.set_defaults(handler=cmd_verify)


def cmd_keygen(args: argparse.Namespace) -> int:
    from riskcore.signing import fingerprint, keygen

    private, public = keygen(args.dir)
    out.print(f"private key: {private} (mode 0600; give it to riskgate signer, run as its own "
              "user; never put it where a worker or a flow can read it)", soft_wrap=True)
    out.print(f"public key:  {public} (give it to whoever publishes: riskgate verify)",
              soft_wrap=True)
    out.print(f"fingerprint: {fingerprint(public.read_bytes())}", soft_wrap=True)
    return 0


def _read(url: str, options: dict[str, Any], what: str) -> bytes:
    from riskcore.storage import read_bytes

    return read_bytes(url, options, max_bytes=MAX_DECISION_BYTES, what=what,
                      too_large="a decision or key file is small").data


def read_signed(decision_url: str, options: dict[str, Any]) -> tuple[bytes, bytes | None]:
    """A decision's bytes and its signature's (None when it has none)."""
    from riskcore.signing import SIGNATURE_SUFFIX
    from riskcore.storage import exists

    decision = _read(decision_url, options, "--decision")
    sig_url = decision_url + SIGNATURE_SUFFIX
    signature = (_read(sig_url, options, "the decision's signature")
                 if exists(sig_url, options, what="--decision") else None)
    return decision, signature


def custodian_rules(config_url: str, options: dict[str, Any]) -> Any:
    """The custodian's rules: the SHA-256 of the config's text and of its policy, computed
    as a gate run computes them."""
    from riskcore.gate.config import load_gate
    from riskcore.signing import Rules

    gate = load_gate(config_url, None, options)
    return Rules(str(gate.provenance["config"]["sha256"]),
                 str(gate.provenance["policy"]["sha256"]))


def public_key(url: str, options: dict[str, Any]) -> bytes:
    """The public key's PEM, checked (InputError naming --public-key otherwise)."""
    from riskcore.signing import load_public_key

    pem = _read(url, options, "--public-key")
    load_public_key(pem, "--public-key")
    return pem


def cmd_verify(args: argparse.Namespace) -> int:
    from riskcore.signing import VerificationFailed, verify_decision


    options = storage_options(args)
    decision, signature = read_signed(args.decision, options)
    public = public_key(args.public_key, options)
    rules = custodian_rules(args.config, options)
    try:
        released_sha = file_sha256(args.released, options)
    except RiskgateError as exc:
        raise InputError(f"released file: {exc}") from None
    try:
        doc = verify_decision(decision, signature, public, released_sha, rules)
    except VerificationFailed as exc:
        console.print(redact_text(f"not verified: {exc}"), markup=False, soft_wrap=True)
        return EXIT_REFUSED
    out.print(redact_text(f"verified: {doc.get('release_id')} run {doc.get('flow_run_id')} "
                          f"APPROVED under {rules.describe()}, signed by "
                          f"{doc.get('signing_key')}, file SHA-256 {released_sha}"),
              markup=False, soft_wrap=True)
    return EXIT_VERIFIED


def signed_verdict(decision_bytes: bytes, signature: bytes | None, public_pem: bytes | None
                   ) -> tuple[Mapping[str, Any], str]:
    """A decision and what can be said of its signature: "verified", "unsigned", "signed
    (not checked)" without a key, or "not verified: <why>". The decision is read strictly
    first (a key named twice is refused)."""
    from riskcore.signing import VerificationFailed, check_signature, read_decision

    try:
        doc = read_decision(decision_bytes)
    except VerificationFailed as exc:
        return {}, f"not verified: {exc}"
    if public_pem is None:
        return doc, ("signed (not checked: no --public-key)" if doc.get("signed")
                     and signature is not None else "unsigned")
    try:
        check_signature(doc, signature, public_pem)
    except VerificationFailed as exc:
        return doc, f"not verified: {exc}"
    return doc, "verified"


def cmd_signer(args: argparse.Namespace) -> int:
    import grp
    from pathlib import Path

    from riskcore.signer import Peers, Policy, SignatureLog, SignerServer, load_rules
    from riskcore.signing import Signer

    from ..gate_runs import DeployedRuns

    options = storage_options(args)
    try:
        pem = Path(args.key).read_bytes()
    except OSError as exc:
        raise ConfigError(f"--key '{args.key}' cannot be read ({exc.strerror}); give the "
                          "riskgate-signing.key that riskgate keygen wrote") from None
    try:
        mode = int(args.socket_mode, 8)
    except ValueError:
        raise ConfigError(f"--socket-mode '{args.socket_mode}' is not octal (e.g. 660)"
                          ) from None
    group = None
    if args.socket_group:
        try:
            group = (int(args.socket_group) if args.socket_group.isdigit()
                     else grp.getgrnam(args.socket_group).gr_gid)
        except KeyError:
            raise ConfigError(f"--socket-group '{args.socket_group}': no such group on this "
                              "host; name the worker's group") from None
    peers = Peers.named(args.allow_users, args.allow_groups)
    signer = Signer.from_pem(pem, f"--key '{args.key}'")
    runs = DeployedRuns()
    runs.ping()
    rules = load_rules(args.configs, options)
    try:
        signatures = SignatureLog(args.log_path)
    except OSError as exc:
        raise ConfigError(f"--log '{args.log_path}' cannot be opened for appending "
                          f"({exc.strerror})") from None
    policy = Policy(signer, rules, peers, runs, signed_runs=signatures.signed_runs())
    try:
        server = SignerServer(args.socket, policy, signatures, mode=mode, group=group)
    except PermissionError as exc:
        raise ConfigError(f"--socket '{args.socket}': {exc.strerror}; the signer's user must "
                          "own the folder (and be in --socket-group)") from None
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    out.print(f"signer: key {signer.fingerprint}, socket {args.socket} (mode {mode:o}), log "
              f"{args.log_path}", soft_wrap=True)
    out.print(f"  serves {peers.describe()}; confirms every run with the Prefect API",
              soft_wrap=True)
    for r in policy.rules:
        out.print(f"  signs decisions made under {r.describe()}", soft_wrap=True)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        server.remove_socket()
        signatures.close()
    return 0
