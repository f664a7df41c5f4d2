"""A release's earlier runs, read back from the output store.

Each finished run is ``<output_url>/<release_id>/<run_id>/decision.json``; its figures are in
``measures.json`` beside it. ``riskgate history`` lists the runs; the report's risk-utility map
plots the earlier runs' figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import InputError, StorageError
from ..redact import redact_text
from ..storage import filesystem, join_url, presign
from .trigger import RELEASE_ID_PATTERN

MAX_DOCUMENT = 64 << 20


def _decisions(release_id: str, output_url: str, options: Mapping[str, Any],
               detail: bool = False) -> tuple[Any, str, Any]:
    """The store, the release's folder and its runs' ``decision.json`` keys (with
    ``detail``: each key's listing entry)."""
    if not re.match(RELEASE_ID_PATTERN, release_id):
        raise InputError(f"release id '{release_id[:80]}' is not a valid release id")
    folder = join_url(output_url, release_id)
    fs, path = filesystem(folder, dict(options))
    try:
        if not fs.exists(path):
            return fs, folder, {} if detail else []
        found = fs.glob(f"{path.rstrip('/')}/*/decision.json", detail=detail)
    except Exception as exc:
        raise StorageError(f"cannot list '{redact_text(folder)}': "
                           f"{redact_text(str(exc))[:200]}") from None
    return fs, folder, dict(found) if detail else list(found)


def _read(fs: Any, key: str) -> dict[str, Any] | None:
    try:
        with fs.open(key, "rb") as fh:
            doc = json.loads(fh.read(MAX_DOCUMENT))
    except (OSError, ValueError):
        return None  # a document that cannot be read is not a run to show
    return doc if isinstance(doc, dict) else None


def _read_bytes(fs: Any, key: str) -> bytes | None:
    try:
        with fs.open(key, "rb") as fh:
            return bytes(fh.read(MAX_DOCUMENT))
    except OSError:
        return None


def runs_of(release_id: str, output_url: str, options: Mapping[str, Any],
            public_pem: bytes | None = None) -> list[dict[str, Any]]:
    """The finished runs of a release in the output store, newest first: run id, finish time,
    verdict, what started it, its signature's status and the report's link.

    A run's id is its folder's name, never what its decision says (a decision planted in
    another folder cannot take a real run's id: a mismatch is named in ``signature``). The
    signature is "verified" (with ``public_pem``), "signed (not checked)", "unsigned", or "not
    verified: why" (a decision with a key named twice is not read further)."""
    from ..signing import SIGNATURE_SUFFIX, VerificationFailed, check_signature, read_decision

    fs, folder, found = _decisions(release_id, output_url, options)
    runs = []
    for key in found:
        raw = _read_bytes(fs, key)
        if raw is None:
            continue
        folder_id = key.rsplit("/", 2)[-2]
        try:
            doc = read_decision(raw)
        except VerificationFailed as exc:
            runs.append({"run_id": folder_id, "finished_at": None, "verdict": None,
                         "started_by": "unknown", "signed": False,
                         "signature": f"not verified: {exc}",
                         "decision": join_url(folder, folder_id, "decision.json"),
                         "report": "", "_key": key})
            continue
        signature = _read_bytes(fs, key + SIGNATURE_SUFFIX)
        status = ("signed (not checked)" if doc.get("signed") and signature is not None
                  else "unsigned")
        if public_pem is not None:
            try:
                check_signature(doc, signature, public_pem)
                status = "verified"
            except VerificationFailed as exc:
                status = f"not verified: {exc}"
        claimed = str(doc.get("flow_run_id") or "")
        if claimed and claimed != folder_id:
            status = (f"not verified: the decision names run {claimed[:64]}, but lies in the "
                      f"folder of run {folder_id}")
        report = join_url(folder, folder_id, "report.html")
        trigger = doc.get("trigger") or {}
        runs.append({
            "run_id": folder_id, "finished_at": doc.get("finished_at"),
            "verdict": doc.get("verdict"),
            "started_by": (f"event {trigger.get('event_id')}" if trigger.get("event_id")
                           else f"manifest {trigger.get('manifest')}"
                           if trigger.get("manifest")
                           else (doc.get("provenance") or {}).get("config", {}).get("source")
                           or "unknown"),
            "signed": status == "verified" or status.startswith("signed"),
            "signature": status,
            "decision": join_url(folder, folder_id, "decision.json"),
            "report": presign(report, dict(options), 7 * 24 * 3600) or report,
            "_key": key})
    runs.sort(key=lambda r: str(r["finished_at"] or ""), reverse=True)
    return runs


def earlier_figures(release_id: str, output_url: str, options: Mapping[str, Any], *,
                    exclude: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
    """The newest ``limit`` earlier runs (not ``exclude``) with their figures per measure:
    ``{"run_id", "finished_at", "verdict", "figures": {measure: {figure: value}}}``, newest
    first.

    Read newest first by the time the store wrote each ``decision.json`` (the listing's own,
    one request), and only until ``limit`` are found: a release gated every night for a
    year has 365 runs, and reading each one's decision to sort them by the time it claims
    took a request each (on object storage, tens of milliseconds) on every later run's path.
    A store whose listing gives no times is read whole, as :func:`runs_of` does."""
    fs, _, found = _decisions(release_id, output_url, options, detail=True)
    times = {key: _stored_at(info) for key, info in found.items()}
    if any(t is None for t in times.values()):
        keys = [r["_key"] for r in runs_of(release_id, output_url, options)]
    else:
        keys = sorted(found, key=lambda k: (times[k], k), reverse=True)
    out: list[dict[str, Any]] = []
    last: float | None = None
    for key in keys:
        run_id = key.rsplit("/", 2)[-2]
        if run_id == exclude:
            continue
        stored = times.get(key)
        if len(out) >= limit and (stored is None or stored != last):
            break  # runs the store wrote in the same second as the last one read are read too
        last = stored
        decision = _read(fs, key)
        doc = _read(fs, key.rsplit("/", 1)[0] + "/measures.json")
        if decision is None or doc is None:
            continue
        figures = {str(m.get("measure")): dict(m.get("figures") or {})
                   for m in doc.get("measures") or [] if isinstance(m, dict)}
        out.append({"run_id": run_id, "finished_at": decision.get("finished_at"),
                    "verdict": decision.get("verdict"), "figures": figures})
    out.sort(key=lambda r: str(r["finished_at"] or ""), reverse=True)
    return out[:limit]


#: where a filesystem's listing says when it wrote a file (local and in-memory: ``mtime`` or
#: ``created``; S3 ``LastModified``; Azure ``last_modified``; Google Cloud ``updated``)
_STORED_AT = ("mtime", "LastModified", "last_modified", "updated", "created")


def _stored_at(info: Any) -> float | None:
    """A listing entry's write time, in seconds since the epoch; None when it gives none."""
    if not isinstance(info, Mapping):
        return None
    for name in _STORED_AT:
        value = info.get(name)
        if isinstance(value, datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=UTC)
            return value.timestamp()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None
