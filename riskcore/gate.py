"""The release gate's steps as plain functions (the Prefect tasks are thin wrappers over these).

load -> validate -> encode once -> measures -> policy -> outputs. Outputs go under
``<output_url>/<release_id>/<run_id>/``; ``decision.json`` is written last, so a reader that sees
it sees a complete run, and a run folder that already holds outputs is never written again.
"""

from __future__ import annotations

import io
import json
import platform
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from .cleanliness import declared_types
from .data import ColumnType, encode_tables
from .errors import StorageError
from .gateconfig import GateConfig
from .measures import MEASURES, PLANNED, MeasureInputs, check_measure_names
from .policy import Decision, Policy
from .report import render_report
from .results import MeasureResult, to_jsonable
from .tableio import (TableInfo, coerce_types, detect_format, exists, join_url, read_table,
                      write_bytes)

DECISION_SCHEMA = "riskgate.decision/1"
MEASURES_SCHEMA = "riskgate.measures/1"


def load_input(cfg: GateConfig, name: str, storage_options: Mapping[str, Any] | None = None
               ) -> tuple[pd.DataFrame, TableInfo]:
    """Read one of the run's tables (original, released, control, identification)."""
    url = cfg.tables()[name]
    roles = cfg.role_spec
    wanted = list(roles.measured_columns) + list(roles.direct_identifiers)
    return read_table(url, name=name, format=cfg.read.format, encoding=cfg.read.encoding,
                      na_values=cfg.read.na_values, sep=cfg.read.sep,
                      max_mb=cfg.limits.max_table_mb, storage_options=storage_options,
                      columns=wanted if detect_format(url, cfg.read.format) == "parquet"
                      else None)


def measures_to_run(cfg: GateConfig, policy: Policy) -> tuple[dict[str, dict[str, Any]],
                                                               dict[str, str]]:
    """The measures of a run: those configured plus those the policy checks.

    Returns (name -> params for available measures, name -> reason for planned ones).
    """
    names = list(cfg.measures) + [m for m in sorted(policy.measures) if m not in cfg.measures]
    check_measure_names(names)
    run = {n: dict(cfg.measures.get(n, {})) for n in names if n in MEASURES}
    unavailable = {n: PLANNED[n] for n in names if n not in MEASURES}
    return run, unavailable


def prepare_inputs(cfg: GateConfig, frames: Mapping[str, pd.DataFrame]) -> MeasureInputs:
    """Convert the cleaned tables to their declared types and encode them jointly, once."""
    roles = cfg.role_spec
    types = declared_types(frames, roles)
    typed = {name: coerce_types(df, types, name) for name, df in frames.items()}
    # numeric types decided on the original; integers stay integers when every value is whole
    explicit = dict(roles.types)
    for col, typ in types.items():
        if col not in explicit and typ is not ColumnType.CONTINUOUS:
            explicit[col] = typ
    from dataclasses import replace

    roles = replace(roles, types=explicit)
    required = {name: [c for c in roles.measured_columns if name != "identification"
                       or c in roles.quasi_identifiers] for name in typed}
    enc = encode_tables(typed, roles, required=required)
    return MeasureInputs(released=enc["released"], original=enc.get("original"),
                         control=enc.get("control"), identification=enc.get("identification"),
                         missing=cfg.missing, alpha=cfg.alpha, seed=cfg.seed)


def per_record_frame(results: Mapping[str, MeasureResult], n: int) -> pd.DataFrame:
    """Per-record risks keyed by row number (0-based row of the released table)."""
    cols: dict[str, Any] = {"row": np.arange(n, dtype=np.int64)}
    for name, res in results.items():
        for key, arr in res.per_record.items():
            if len(arr) == n:
                cols[f"{name}.{key}"] = np.asarray(arr)
    return pd.DataFrame(cols)


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


def per_record_parquet(results: Mapping[str, MeasureResult], n: int) -> bytes:
    """``per_record.parquet``: see :func:`per_record_frame`."""
    return parquet_bytes(per_record_frame(results, n))


def records_parquet(results: Mapping[str, MeasureResult]) -> dict[str, bytes]:
    """The measures' named record tables (e.g. ``alc_predictions``) as Parquet files."""
    files = {}
    for res in results.values():
        for name, table in res.records.items():
            buf = io.BytesIO()
            pd.DataFrame({k: np.asarray(v) for k, v in table.items()}).to_parquet(buf, index=False)
            files[f"{name}.parquet"] = buf.getvalue()
    return files


def versions() -> dict[str, str]:
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


def decision_record(cfg: GateConfig, run_id: str, decision: Decision,
                    infos: list[TableInfo], timings: Mapping[str, float],
                    started_at: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    roles = cfg.role_spec
    record = {
        "schema": DECISION_SCHEMA,
        "release_id": cfg.release_id,
        "flow_run_id": run_id,
        **decision.to_dict(),
        "approved": decision.verdict.value == "APPROVED",
        "inputs": [i.to_dict() for i in infos],
        "roles": {"quasi_identifiers": list(roles.quasi_identifiers),
                  "sensitive": list(roles.sensitive), "weight": roles.weight,
                  "household": roles.household,
                  "direct_identifiers": list(roles.direct_identifiers)},
        "config": cfg.public_dict(),
        "seed": cfg.seed,
        "versions": versions(),
        "timings": {k: round(float(v), 4) for k, v in timings.items()},
        "started_at": started_at,
        "finished_at": now_iso(),
    }
    if extra:
        record.update(extra)
    return to_jsonable(record)


def run_folder(cfg: GateConfig, run_id: str) -> str:
    return join_url(cfg.output_url, cfg.release_id, run_id)


def write_run(folder: str, files: Mapping[str, bytes], decision: Mapping[str, Any],
              storage_options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Write a run's outputs, ``decision.json`` last. Never overwrites a previous run.

    A folder whose ``decision.json`` exists is a finished run and is never written again; the
    other files of an unfinished attempt (same run id, e.g. a retried write) may be replaced.
    """
    decision_url = join_url(folder, "decision.json")
    if exists(decision_url, storage_options):
        raise StorageError(f"'{decision_url}' already exists; a run's outputs are never replaced")
    written = {}
    for name, data in files.items():
        url = join_url(folder, name)
        write_bytes(url, data, storage_options, overwrite=True)
        written[name] = url
    write_bytes(decision_url, json.dumps(decision, indent=2).encode("utf-8"), storage_options)
    written["decision.json"] = decision_url
    return written


def report_html(decision: Mapping[str, Any], measures: list[dict[str, Any]],
                validation: Mapping[str, Any] | None, per_record: pd.DataFrame | None = None,
                detail: str = "summary", examples: Mapping[str, Any] | None = None) -> bytes:
    return render_report(dict(decision), measures, dict(validation) if validation else None,
                         per_record=per_record, detail=detail,
                         examples=dict(examples) if examples else None).encode("utf-8")


def measures_document(cfg: GateConfig, run_id: str, results: Mapping[str, MeasureResult],
                      errors: Mapping[str, str]) -> dict[str, Any]:
    return to_jsonable({
        "schema": MEASURES_SCHEMA, "release_id": cfg.release_id, "flow_run_id": run_id,
        "measures": [r.to_dict() for r in results.values()],
        "errors": dict(errors),
    })
