"""A release's earlier runs, read back from the output store (issue 28 item 12, issue 32).

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


def runs_of(release_id: str, output_url: str, options: Mapping[str, Any]
            ) -> list[dict[str, Any]]:
    """The finished runs of a release in the output store, newest first: run id, finish time,
    verdict, what started it, whether it is signed and the report's link."""
    fs, folder, found = _decisions(release_id, output_url, options)
    runs = []
    for key in found:
        doc = _read(fs, key)
        if doc is None:
            continue
        run_id = str(doc.get("flow_run_id") or key.rsplit("/", 2)[-2])
        report = join_url(folder, run_id, "report.html")
        trigger = doc.get("trigger") or {}
        runs.append({
            "run_id": run_id, "finished_at": doc.get("finished_at"),
            "verdict": doc.get("verdict"),
            "started_by": (f"event {trigger.get('event_id')}" if trigger.get("event_id")
                           else (doc.get("provenance") or {}).get("config", {}).get("source")
                           or "unknown"),
            "signed": bool(doc.get("signed")),
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
