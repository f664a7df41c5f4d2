"""``riskgate keygen`` and ``riskgate verify``: signed decisions (issue 26).

The publishing step runs ``riskgate verify RELEASED --decision URL --public-key PUB`` and
publishes only on exit 0: the decision's signature is valid under the custodian's key, the
file about to go out is the file that was gated (its SHA-256), and the verdict is APPROVED.
"""

from __future__ import annotations

import argparse
from typing import Any

from riskcore.errors import InputError, RiskgateError
from riskcore.redact import redact_text

from .common import add_storage_flag, console, out, storage_options

#: verify's exit codes: 0 publish, 1 do not publish (the line says which check failed)
EXIT_VERIFIED, EXIT_REFUSED = 0, 1
MAX_DECISION_BYTES = 64 << 20


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    k = sub.add_parser("keygen", parents=[common], help="write an Ed25519 signing key pair",
                       description="Write DIR/riskgate-signing.key (private, mode 0600) and "
                       "DIR/riskgate-signing.pub. The gate signs its decisions when "
                       "RISKGATE_SIGNING_KEY names the private key's file (or the config's "
                       "signing.secret_block names a Prefect Secret block holding it).")
    k.add_argument("dir", help="folder for the key pair (created if needed)")
    k.set_defaults(handler=cmd_keygen)
    v = sub.add_parser("verify", parents=[common],
                       help="check a release against its signed decision before publishing",
                       description="Exit 0 only when the decision's signature is valid under "
                       "the public key, the released file's SHA-256 is the decision's and the "
                       "verdict is APPROVED; 1 otherwise (one line names the check that "
                       "failed); 3 when something cannot be read.")
    v.add_argument("released", help="the file (or folder of Parquet parts) about to be "
                   "published: a path or any fsspec URL")
    v.add_argument("--decision", required=True, help="decision.json of the gate run: a path "
                   "or any fsspec URL (its signature is read from DECISION.sig)")
    v.add_argument("--public-key", required=True, dest="public_key",
                   help="riskgate-signing.pub: a path or any fsspec URL")
    add_storage_flag(v)
    v.set_defaults(handler=cmd_verify)


def cmd_keygen(args: argparse.Namespace) -> int:
    from riskcore.signing import fingerprint, keygen

    private, public = keygen(args.dir)
    out.print(f"private key: {private} (mode 0600; set RISKGATE_SIGNING_KEY={private} where "
              "the gate runs, or store it in a Prefect Secret block)", soft_wrap=True)
    out.print(f"public key:  {public} (give it to whoever publishes: riskgate verify)",
              soft_wrap=True)
    out.print(f"fingerprint: {fingerprint(public.read_bytes())}", soft_wrap=True)
    return 0


def _read(url: str, options: dict[str, Any], what: str) -> bytes:
    from riskcore.storage import read_bytes

    return read_bytes(url, options, max_bytes=MAX_DECISION_BYTES, what=what,
                      too_large="a decision or key file is small").data


def cmd_verify(args: argparse.Namespace) -> int:
    from riskcore.signing import SIGNATURE_SUFFIX, VerificationFailed, verify_decision
    from riskcore.storage import exists

    from .ops import file_sha256

    options = storage_options(args)
    decision = _read(args.decision, options, "--decision")
    sig_url = args.decision + SIGNATURE_SUFFIX
    signature = (_read(sig_url, options, "the decision's signature")
                 if exists(sig_url, options, what="--decision") else None)
    public = _read(args.public_key, options, "--public-key")
    try:
        released_sha = file_sha256(args.released, options)
    except RiskgateError as exc:
        raise InputError(f"released file: {exc}") from None
    try:
        doc = verify_decision(decision, signature, public, released_sha)
    except VerificationFailed as exc:
        console.print(redact_text(f"not verified: {exc}"), markup=False, soft_wrap=True)
        return EXIT_REFUSED
    out.print(redact_text(f"verified: {doc.get('release_id')} run {doc.get('flow_run_id')} "
                          f"APPROVED, signed by {doc.get('signing_key')}, file SHA-256 "
                          f"{released_sha}"), markup=False, soft_wrap=True)
    return EXIT_VERIFIED
