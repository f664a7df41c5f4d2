"""Cleanliness checks before any measure runs (seed 001's best practices), with Great Expectations.

Per table, for every column the measures use: the column exists; its values are of the declared
type (a number column with text values fails); no character the declared encoding could not
decode; key columns are not empty. For every text column read (measured or not): no control or
non-printable characters, line breaks included. Then riskgate's own preconditions across tables:
numbers are finite, original and released agree on the measured columns' types, direct
identifiers are absent from released tables, control rows do not overlap the original.

Results list each failed expectation with counts and a few example *row numbers*: never values,
so nothing sensitive leaks into reports.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..data import NUMBER_PATTERN, ColumnType, Roles, looks_numeric
from ..results import Record
from .tables import REPLACEMENT_CHAR

log = logging.getLogger(__name__)

NUMBER_REGEX = NUMBER_PATTERN
#: control and non-printable characters, line breaks and tabs inside a cell included
CONTROL_REGEX = "[\x00-\x1f\x7f]"
MAX_EXAMPLE_ROWS = 5


@dataclass(frozen=True)
class CheckResult(Record):
    """One expectation's outcome (no data values)."""

    table: str
    check: str
    column: str | None
    success: bool
    unexpected_count: int = 0
    element_count: int | None = None
    example_rows: tuple[int, ...] = ()
    detail: str = ""
    source: str = "great_expectations"


@dataclass(frozen=True)
class CleanlinessReport:
    checks: tuple[CheckResult, ...]
    declared_types: Mapping[str, str] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return all(c.success for c in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.success]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "riskgate.validation/1", "success": self.success,
                "n_checks": len(self.checks), "n_failed": len(self.failures),
                "declared_types": dict(self.declared_types),
                "checks": [c.to_dict() for c in self.checks]}

    def summary_lines(self) -> list[str]:
        lines = []
        for c in self.failures:
            where = f"{c.table}.{c.column}" if c.column else c.table
            rows = f", e.g. rows {list(c.example_rows)}" if c.example_rows else ""
            count = f"{c.unexpected_count} value(s)" if c.unexpected_count else "failed"
            lines.append(f"{where}: {c.check}: {count}{rows}"
                         + (f" ({c.detail})" if c.detail else ""))
        return lines


def declared_types(frames: Mapping[str, pd.DataFrame], roles: Roles) -> dict[str, ColumnType]:
    """Types of the measured columns: explicit ones, else inferred from the original table."""
    ref = frames.get("original")
    if ref is None:
        ref = next(iter(frames.values()))
    types: dict[str, ColumnType] = {}
    for col in roles.measured_columns:
        if col in roles.types:
            types[col] = roles.types[col]
        elif col == roles.weight:
            types[col] = ColumnType.CONTINUOUS
        elif col in ref.columns:
            s = ref[col]
            if pd.api.types.is_bool_dtype(s.dtype):
                types[col] = ColumnType.BOOLEAN
            elif looks_numeric(s):
                types[col] = ColumnType.CONTINUOUS
            else:
                types[col] = ColumnType.CATEGORICAL
    return types


def _gx_context():
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(store_backend_defaults=InMemoryStoreBackendDefaults(),
                               progress_bars=ProgressBarsConfig(globally=False),
                               analytics_enabled=False)
    return gx, gx.get_context(mode="ephemeral", project_config=config)


def _expectations_for(gx, df: pd.DataFrame, roles: Roles, types: Mapping[str, ColumnType],
                      table: str):
    exps = []
    needed = list(roles.measured_columns)
    if table == "original":
        needed += [c for c in roles.direct_identifiers if c in df.columns]
    for col in needed:
        exps.append(("column exists", col, gx.expectations.ExpectColumnToExist(column=col)))
        if col not in df.columns:
            continue
        s = df[col]
        text = s.dtype == object or pd.api.types.is_string_dtype(s.dtype)
        typ = types.get(col)
        if typ is not None and typ.is_numeric and text:
            exps.append(("values are numbers", col,
                         gx.expectations.ExpectColumnValuesToMatchRegex(column=col,
                                                                        regex=NUMBER_REGEX)))
        elif typ is not None and typ.is_numeric and not pd.api.types.is_numeric_dtype(s.dtype):
            in_types = gx.expectations.ExpectColumnValuesToBeInTypeList
            exps.append(("values are numbers", col, in_types(
                column=col, type_list=["int", "int64", "int32", "float", "float64", "float32",
                                       "Int64", "Float64"])))
        if text:
            exps.append(("characters decodable in the declared encoding", col,
                         gx.expectations.ExpectColumnValuesToNotMatchRegex(
                             column=col, regex=REPLACEMENT_CHAR)))
        if col in roles.quasi_identifiers:
            exps.append(("key column is not empty", col,
                         gx.expectations.ExpectColumnUniqueValueCountToBeBetween(
                             column=col, min_value=1)))
    for col in df.columns:  # every text column read, measured or not
        s = df[col]
        if s.dtype == object or pd.api.types.is_string_dtype(s.dtype):
            exps.append(("no control or non-printable characters", str(col),
                         gx.expectations.ExpectColumnValuesToNotMatchRegex(
                             column=col, regex=CONTROL_REGEX)))
    return exps


def validate_tables(frames: Mapping[str, pd.DataFrame], roles: Roles) -> CleanlinessReport:
    """Run the cleanliness checks on every table of a run (Great Expectations, in memory).

    Args:
        frames: table role name -> DataFrame as read (CSV cells as text).
        roles: the column roles.
    """
    gx, context = _gx_context()
    types = declared_types(frames, roles)
    source = context.data_sources.add_pandas("riskgate")
    results: list[CheckResult] = []
    for table, df in frames.items():
        asset = source.add_dataframe_asset(table)
        batch_def = asset.add_batch_definition_whole_dataframe(f"{table}-all")
        batch = batch_def.get_batch(batch_parameters={"dataframe": df.reset_index(drop=True)})
        specs = _expectations_for(gx, df, roles, types, table)
        if table == "identification":
            specs = [s for s in specs if s[1] in roles.quasi_identifiers]
        suite = context.suites.add(gx.ExpectationSuite(name=f"riskgate-{table}"))
        for _, _, exp in specs:
            suite.add_expectation(exp)
        validation = batch.validate(suite, result_format={
            "result_format": "SUMMARY", "partial_unexpected_count": MAX_EXAMPLE_ROWS})
        by_type_col = {(type(exp).__name__, col, getattr(exp, "regex", None)): label
                       for label, col, exp in specs}
        for res in validation.results:
            cfg = res.expectation_config
            col = cfg.kwargs.get("column")
            cls_name = "".join(p.capitalize() for p in cfg.type.split("_"))
            label = by_type_col.get((cls_name, col, cfg.kwargs.get("regex")), cfg.type)
            r = res.result or {}
            rows = tuple(int(i) for i in (r.get("partial_unexpected_index_list") or [])
                         [:MAX_EXAMPLE_ROWS] if isinstance(i, (int, np.integer)))
            detail = ""
            if not res.success and cfg.type == "expect_column_to_exist":
                detail = f"add the column to table '{table}' or fix the roles in the config"
            elif not res.success and cfg.type == "expect_column_unique_value_count_to_be_between":
                detail = "every value is missing"
            elif res.exception_info and res.exception_info.get("raised_exception"):
                detail = str(res.exception_info.get("exception_message", ""))[:200]
            results.append(CheckResult(
                table=table, check=label, column=col, success=bool(res.success),
                unexpected_count=int(r.get("unexpected_count") or 0),
                element_count=r.get("element_count"), example_rows=rows, detail=detail))
    results.extend(_preconditions(frames, roles, types))
    return CleanlinessReport(checks=tuple(results),
                             declared_types={k: v.value for k, v in types.items()})


MAX_CONTROL_OVERLAP = 0.01


def _preconditions(frames: Mapping[str, pd.DataFrame], roles: Roles,
                   types: Mapping[str, ColumnType]) -> list[CheckResult]:
    out: list[CheckResult] = []
    original = frames.get("original")
    for table, df in frames.items():
        for col in roles.measured_columns:
            typ = types.get(col)
            if col not in df.columns or typ is None or not typ.is_numeric:
                continue
            values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float,
                                                                      na_value=np.nan)
            infinite = np.flatnonzero(np.isinf(values))
            if infinite.size:
                out.append(CheckResult(
                    table=table, check="numbers are finite", column=col, success=False,
                    unexpected_count=int(infinite.size), element_count=len(df),
                    example_rows=tuple(infinite[:MAX_EXAMPLE_ROWS].tolist()), source="riskgate",
                    detail="infinite or overflowing numbers (e.g. 1e400) cannot be measured"))
    for table in ("released", "control"):
        df = frames.get(table)
        if df is None:
            continue
        present = [c for c in roles.direct_identifiers if c in df.columns]
        out.append(CheckResult(
            table=table, check="direct identifiers are absent", column=",".join(present) or None,
            success=not present, source="riskgate",
            detail=(f"remove {present} from the {table} table before release" if present
                    else "")))
        if original is not None:
            for col in roles.measured_columns:
                if col in df.columns and col in original.columns:
                    typ = types.get(col)
                    if typ is not None and typ.is_numeric and not looks_numeric(df[col]) and \
                            df[col].notna().any():
                        out.append(CheckResult(
                            table=table, check="schema agrees with the original", column=col,
                            success=False, source="riskgate",
                            detail=f"numeric ({typ.value}) in the original, text here"))
    control = frames.get("control")
    if control is not None and original is not None:
        cols = [c for c in roles.measured_columns if c in control.columns and c in
                original.columns]
        if cols:
            h_orig = pd.util.hash_pandas_object(original[cols].astype(str), index=False)
            h_ctrl = pd.util.hash_pandas_object(control[cols].astype(str), index=False)
            overlap = np.flatnonzero(np.isin(h_ctrl.to_numpy(), h_orig.to_numpy()))
            out.append(CheckResult(
                table="control", check="control rows do not overlap the original",
                column=None, success=overlap.size <= MAX_CONTROL_OVERLAP * len(control),
                unexpected_count=int(overlap.size),
                element_count=len(control), example_rows=tuple(overlap[:MAX_EXAMPLE_ROWS].tolist()),
                source="riskgate",
                detail=(f"{overlap.size} control row(s) equal an original row on the measured "
                        f"columns (tolerance {MAX_CONTROL_OVERLAP:.0%}, for duplicates that real "
                        "data holds); control rows must be held out from the original"
                        if overlap.size else "")))
    return out
