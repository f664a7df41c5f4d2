"""``watch-releases``: a judged pipeline triggers its gate with nothing but write access to its
prefix.

The pipeline writes its release and, beside it, a manifest ``release.json`` under one of the
pinned config's ``trigger.released_prefixes``. Every ``--watch-every`` seconds this flow lists
those prefixes, and for each manifest whose SHA-256 has not been gated yet starts one run of
the ``on-anonymization`` deployment with ``manifest={url, sha256}`` (the run re-reads it,
checks the bytes are those found, and judges the release under the pinned rules: no
parameter of it can change them). The manifest's SHA-256 is the run's idempotency key, so a
manifest is gated once however often it is seen, and a marker
``<output_url>/_manifests/<sha256>.json`` (the run's id, the manifest's URL, when) records it
in the output store; a release id never begins with '_', so markers never mix with runs.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger

from riskcore.errors import RiskgateError
from riskcore.gate.config import Gate, load_gate
from riskcore.gate.trigger import MANIFEST_NAME
from riskcore.redact import install_log_redaction, redact_text
from riskcore.storage import exists, filesystem, join_url, under_prefix, write_bytes
from riskgate.tasks.io import resolve_storage_options

from .pinned import check_deployed, pinned_config_url

#: the deployment whose runs gate a manifest
GATE_DEPLOYMENT = "release-gate/on-anonymization"
#: the folder of the output store where gated manifests are recorded
MARKERS = "_manifests"
#: new gate runs started by one look at most (the trigger rate limits them anyway)
MAX_NEW_PER_PASS = 60


def _logger() -> logging.Logger | logging.LoggerAdapter[Any]:
    try:
        return get_run_logger()
    except Exception:
        return logging.getLogger("riskgate.watch")


def find_manifests(prefix: str, options: dict[str, Any]) -> list[str]:
    """The URLs of the release manifests under ``prefix`` (any depth), sorted; only those
    that lie inside it once links and escapes are resolved."""
    fs, path = filesystem(prefix, options)
    try:
        fs.invalidate_cache()
        found = fs.find(path.rstrip("/"), withdirs=False) if fs.exists(path) else []
    except Exception as exc:
        raise RiskgateError(f"cannot list '{redact_text(prefix)}': "
                            f"{redact_text(str(exc))[:200]}") from None
    scheme = prefix.split("://", 1)[0] + "://" if "://" in prefix else ""
    urls = []
    for key in found:
        if str(key).rsplit("/", 1)[-1] != MANIFEST_NAME:
            continue
        url = f"{scheme}{key}" if scheme else str(key)
        if under_prefix(url, prefix):
            urls.append(url)
    return sorted(urls)


#: the most of a manifest's bytes the watcher hashes (a larger file is refused by its run)
HASHED_BYTES = 16 << 20


def manifest_sha256(url: str, options: dict[str, Any]) -> str:
    """The SHA-256 of a manifest's bytes, read in chunks (a manifest over the size a run reads
    is hashed too, so that its run can refuse it by name; beyond :data:`HASHED_BYTES` the
    file's size stands for the rest)."""
    fs, path = filesystem(url, options)
    digest = hashlib.sha256()
    try:
        with fs.open(path, "rb") as fh:
            read = 0
            while read < HASHED_BYTES and (chunk := fh.read(1 << 20)):
                digest.update(chunk)
                read += len(chunk)
            if read >= HASHED_BYTES:
                digest.update(str(fs.size(path)).encode())
    except Exception as exc:
        raise RiskgateError(f"cannot read '{redact_text(url)}': "
                            f"{redact_text(str(exc))[:200]}") from None
    return digest.hexdigest()


def marker_url(gate: Gate, sha256: str) -> str:
    return join_url(gate.config.output_url, MARKERS, f"{sha256}.json")


def start_gate(manifest_url: str, sha256: str) -> str:
    """One run of the gate deployment for the manifest (its SHA-256 the idempotency key: a
    second call returns the first run); returns its id."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(GATE_DEPLOYMENT)
        run = client.create_flow_run_from_deployment(
            deployment.id, parameters={"manifest": {"url": manifest_url, "sha256": sha256}},
            idempotency_key=f"riskgate-manifest-{sha256}")
    return str(run.id)


@flow(name="riskgate-watch-releases", log_prints=False, retries=0, validate_parameters=False)
def watch_releases(**refused: Any) -> dict[str, Any]:
    """Start a gate run for each release manifest not yet gated (see the module doc).

    Returns what it did: manifests seen, runs started, manifests skipped (and why)."""
    install_log_redaction()
    log = _logger()
    if refused:
        raise RiskgateError(f"parameter(s) {sorted(refused)} are not accepted: the rules are "
                            "pinned by riskgate deploy --trigger-config")
    gate = load_gate(pinned_config_url())
    check_deployed(gate)
    options = resolve_storage_options(gate.config, {})
    prefixes = list(gate.config.trigger.released_prefixes)
    summary: dict[str, Any] = {"seen": 0, "started": [], "skipped": []}
    if not prefixes:
        log.info("the pinned config %s lists no trigger.released_prefixes: nothing to watch",
                 gate.source)
        return summary
    for prefix in prefixes:
        for url in find_manifests(prefix, options):
            summary["seen"] += 1
            if len(summary["started"]) >= MAX_NEW_PER_PASS:
                summary["skipped"].append({"manifest": url, "why": "next look"})
                continue
            try:
                sha = manifest_sha256(url, options)
            except RiskgateError as exc:
                log.warning("manifest %s not read: %s", url, exc)
                summary["skipped"].append({"manifest": url, "why": str(exc)[:200]})
                continue
            marker = marker_url(gate, sha)
            if exists(marker, options, what="output_url"):
                continue
            # every manifest found gets its run: one the gate refuses (too large, not JSON)
            # files its ERROR where the pipeline looks, never nothing
            run_id = start_gate(url, sha)
            shown = redact_text(url)
            write_bytes(marker, json.dumps({
                "manifest": shown, "sha256": sha, "flow_run_id": run_id,
                "started_at": datetime.now(UTC).isoformat(timespec="seconds")},
                indent=2).encode("utf-8"), options, overwrite=True)
            log.info("manifest %s (sha256 %s...): gate run %s started", shown, sha[:16],
                     run_id)
            summary["started"].append({"manifest": shown, "sha256": sha, "run": run_id})
    return summary
