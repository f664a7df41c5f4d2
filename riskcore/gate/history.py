"""A release's earlier runs, read back from the output store.

Each finished run is ``<output_url>/<release_id>/<run_id>/decision.json``; its figures are in
``measures.json`` beside it. ``riskgate history`` lists the runs; the report's risk-utility map
plots the earlier runs' figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..errors import InputError, StorageError
from ..redact import redact_text
from ..storage import filesystem, join_url, presign
from .trigger import RELEASE_ID_PATTERN

MAX_DOCUMENT = 64 << 20


def _decisions(release_id: str, output_url: str, options: Mapping[str, Any]
               ) -> tuple[Any, str, list[str]]:
    if not re.match(RELEASE_ID_PATTERN, release_id):
        raise InputError(f"release id '{release_id[:80]}' is not a valid release id")
    folder = join_url(output_url, release_id)
    fs, path = filesystem(folder, dict(options))
    try:
        found = fs.glob(f"{path.rstrip('/')}/*/decision.json") if fs.exists(path) else []
    except Exception as exc:
        raise StorageError(f"cannot list '{redact_text(folder)}': "
                           f"{redact_text(str(exc))[:200]}") from None
    return fs, folder, list(found)


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
    ``{"run_id", "finished_at", "verdict", "figures": {measure: {figure: value}}}``."""
    fs, _, _ = _decisions(release_id, output_url, options)
    out = []
    for run in runs_of(release_id, output_url, options):
        if run["run_id"] == exclude:
            continue
        doc = _read(fs, run["_key"].rsplit("/", 1)[0] + "/measures.json")
        if doc is None:
            continue
        figures = {str(m.get("measure")): dict(m.get("figures") or {})
                   for m in doc.get("measures") or [] if isinstance(m, dict)}
        out.append({"run_id": run["run_id"], "finished_at": run["finished_at"],
                    "verdict": run["verdict"], "figures": figures})
        if len(out) >= limit:
            break
    return out
