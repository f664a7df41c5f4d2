"""What a run writes: ``decision.json`` (one builder, :func:`decision_record`, for every run,
an errored one too), ``measures.json``, the per-record Parquet files and the report, written
with ``decision.json`` last.
"""

from __future__ import annotations

import io
import json
import platform
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from ..errors import StorageError
from ..redact import redact, redact_text
from ..report import render_report
from ..results import MeasureResult, to_jsonable
from ..roles import Roles
from ..storage import exists, join_url, presign, write_bytes
from .config import Gate
from .policy import Decision, Verdict, fixed_decision
from .tables import TableInfo

DECISION_SCHEMA = "riskgate.decision/1"
MEASURES_SCHEMA = "riskgate.measures/1"


def per_record_frame(results: Mapping[str, MeasureResult], n: int,
                     flags: Mapping[str, np.ndarray] | None = None) -> pd.DataFrame:
    """Per-record risks keyed by row number (0-based row of the released table), and the
    run's per-record flags (``identifier``: the row holds an undeclared direct identifier)."""
    cols: dict[str, Any] = {"row": np.arange(n, dtype=np.int64)}
    for key, arr in (flags or {}).items():
        if len(arr) == n:
            cols[key] = arr
    for name, res in results.items():
        for key, arr in res.per_record.items():
            if len(arr) == n:
                cols[f"{name}.{key}"] = np.asarray(arr)
    # the measures' arrays themselves, not a copy of them in one block
    return pd.DataFrame(cols, copy=False)


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as Parquet. Its ``row`` column of row numbers (the per-record files' key: 0,
    1, 2, ...) is delta-encoded: dictionary-encoded as the other columns are, its million
    distinct values filled the dictionary and were then written plain, 4.3 of a 1M-row
    file's 15.5 MB and 0.04 of its 0.21 s to encode."""
    buf = io.BytesIO()
    options: dict[str, Any] = {}
    if "row" in frame.columns and pd.api.types.is_integer_dtype(frame["row"].dtype):
        options = {"use_dictionary": [str(c) for c in frame.columns if c != "row"],
                   "column_encoding": {"row": "DELTA_BINARY_PACKED"}}
    frame.to_parquet(buf, index=False, **options)
    return buf.getvalue()


def per_record_parquet(results: Mapping[str, MeasureResult], n: int) -> bytes:
    """``per_record.parquet``: see :func:`per_record_frame`."""
    return parquet_bytes(per_record_frame(results, n))


def records_parquet(results: Mapping[str, MeasureResult]) -> dict[str, bytes]:
    """The measures' named record tables (e.g. ``alc_predictions``) as Parquet files."""
    return {f"{name}.parquet": parquet_bytes(pd.DataFrame({k: np.asarray(v)
                                                           for k, v in table.items()}))
            for res in results.values() for name, table in res.records.items()}


def versions() -> dict[str, str]:
    """The versions of Python and of the packages a decision records: those of this process,
    read once (their metadata is searched on disk: 0.1 s)."""
    return dict(_versions())


@cache
def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("riskgate", "numpy", "pandas", "pyarrow", "great-expectations", "prefect",
                "scikit-learn", "fsspec"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def json_bytes(doc: Any) -> bytes:
    return json.dumps(doc, indent=2).encode("utf-8")


def run_folder(gate: Gate, run_id: str) -> str:
    return join_url(gate.config.output_url, gate.config.release_id, run_id)


def measures_document(release_id: str, run_id: str | None,
                      results: Mapping[str, MeasureResult], errors: Mapping[str, str]
                      ) -> dict[str, Any]:
    """``measures.json`` (schema ``riskgate.measures/1``), redacted."""
    return redact(to_jsonable({  # type: ignore[no-any-return]
        "schema": MEASURES_SCHEMA, "release_id": release_id, "flow_run_id": run_id,
        "measures": [r.to_dict() for r in results.values()],
        "errors": dict(errors),
    }))


def write_run(folder: str, files: Mapping[str, bytes], decision: Mapping[str, Any] | None,
              storage_options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Write a run's outputs, ``decision.json`` last (when given). Never overwrites a finished run.

    A folder whose ``decision.json`` exists is a finished run and is never written again; the
    other files of an unfinished attempt (same run id: a retried write, or a paused review
    writing its report first) may be replaced.
    """
    decision_url = join_url(folder, "decision.json")
    if exists(decision_url, storage_options, what="output_url"):
        raise StorageError(f"'{redact_text(decision_url)}' already exists; a run's outputs are "
                           "never replaced")
    written = {}
    for name, data in files.items():
        url = join_url(folder, name)
        write_bytes(url, data, storage_options, overwrite=True)
        written[name] = url
    if decision is not None:
        write_bytes(decision_url, json_bytes(decision), storage_options)
        written["decision.json"] = decision_url
    return written


def report_html(decision: Mapping[str, Any], measures: list[dict[str, Any]],
                validation: Mapping[str, Any] | None, per_record: pd.DataFrame | None = None,
                detail: str = "summary", examples: Mapping[str, Any] | None = None,
                history: list[dict[str, Any]] | None = None) -> bytes:
    return render_report(dict(decision), measures, dict(validation) if validation else None,
                         per_record=per_record, detail=detail,
                         examples=dict(examples) if examples else None,
                         history=history).encode("utf-8")


def report_link(report_url: str | None, gate: Gate, options: Mapping[str, Any] | None,
                folder_key: str) -> str | None:
    """One click to the report: ``report.base_url`` + path when the user serves the outputs,
    else a presigned HTTPS URL for object stores; None for local files (no link that 404s)."""
    if not report_url:
        return None
    base = gate.config.report.base_url
    if base:
        return join_url(base, folder_key, "report.html")
    return presign(report_url, options, gate.config.report.link_expiry_s)


def decision_record(release_id: str, run_id: str, decision: Decision, *,
                    started_at: str, inputs: Sequence[TableInfo] = (),
                    config: Mapping[str, Any] | None = None, seed: int = 0,
                    timings: Mapping[str, float] | None = None,
                    roles: Roles | None = None, measures_run: Mapping[str, Any] | None = None,
                    provenance: Mapping[str, Any] | None = None,
                    signing_key: str | None = None, signed: bool | None = None,
                    context: Mapping[str, Any] | None = None,
                    extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``decision.json`` (schema ``riskgate.decision/1``), redacted: the one builder of every
    run's record, a full run's (roles, measures, provenance, signing) and one that ended
    before its config could be read (:func:`error_record`) alike."""
    doc: dict[str, Any] = {
        "schema": DECISION_SCHEMA, "release_id": release_id, "flow_run_id": run_id,
        **decision.to_dict(), "approved": decision.verdict is Verdict.APPROVED,
        "inputs": [i.to_dict() for i in inputs]}
    if roles is not None:
        doc["roles"] = {"quasi_identifiers": list(roles.quasi_identifiers),
                        "sensitive": list(roles.sensitive), "weight": roles.weight,
                        "household": roles.household,
                        "direct_identifiers": list(roles.direct_identifiers)}
    doc["config"] = dict(config or {})
    if measures_run is not None:
        doc["measures_run"] = dict(measures_run)
    doc.update({"seed": seed, "versions": versions(),
                "timings": {k: round(float(v), 4) for k, v in (timings or {}).items()},
                "started_at": started_at, "finished_at": now_iso()})
    if provenance is not None:
        doc["provenance"] = dict(provenance)
    if signed is not None:
        doc.update({"signed": signed, "signing_key": signing_key})
    doc.update({**dict(context or {}), **dict(extra or {})})
    return redact(to_jsonable(doc))  # type: ignore[no-any-return]


def error_record(release_id: str, run_id: str, message: str,
                 context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A minimal ERROR ``decision.json`` for a run whose config could not be loaded but whose
    output location is known (e.g. from a trigger event)."""
    return decision_record(release_id, run_id, fixed_decision(Verdict.ERROR, [message]),
                           started_at=now_iso(), context=context)
