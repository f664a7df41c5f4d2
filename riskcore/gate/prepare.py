"""The tables between reading and checking: what other tools put in them.

* **Columns nobody meant to publish**: a column with an empty name, or one pandas named
  ``Unnamed: N`` (a ``DataFrame.to_csv()`` index), or named ``index`` and counting the rows,
  may be the original's row order; a released column the original lacks is judged by no
  measure. Each is a failed check naming the column and the fix, unless the config lists it
  under ``ignore_columns`` (recorded in the decision).
* **Number formats**: :func:`riskcore.formats.canonical_numbers` (``1.0`` is ``1`` in a
  categorical column of numbers; ``007`` is a code).

The missing-value markers were applied when each table was read
(:func:`riskcore.gate.tables.read_table`); what they replaced is recorded here too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..data import number_series
from ..formats import ColumnFormat, canonical_numbers
from ..roles import PUBLISHED
from .cleanliness import CheckResult, blank, declared_types, unnamed_label, with_names
from .config import TablesConfig
from .tables import TableInfo

#: how pandas names a column whose header is empty (``Unnamed: 0``, ``Unnamed: 3.1``)
_PANDAS_UNNAMED = re.compile(r"Unnamed: [0-9]{1,9}(?:\.[0-9]{1,9})?")
#: names under which tools write a table's index (with row numbers in it)
INDEX_NAMES = frozenset({"index", "level_0", "rownames", "row.names", "row_names"})


def counts_rows(series: pd.Series) -> bool:
    """The column holds the row numbers 0..n-1 or 1..n in order (a written index)."""
    n = len(series)
    if n == 0:
        return False
    values = number_series(series).to_numpy(dtype=float)
    if np.isnan(values).any():
        return False
    start = values[0]
    return start in (0.0, 1.0) and bool(np.array_equal(values, np.arange(n) + start))


@dataclass(frozen=True)
class Prepared:
    """What preparing the tables decided: per-column formats, the checks on columns nobody
    meant to publish, and the missing-value markers with the cells they replaced."""

    formats: Mapping[str, ColumnFormat] = field(default_factory=dict)
    checks: tuple[CheckResult, ...] = ()
    markers: Mapping[str, Any] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"formats": [f.to_dict() for f in self.formats.values()],
                "missing_values": dict(self.markers),
                "ignore_columns": list(self.ignored)}


def column_checks(cfg: TablesConfig, frames: Mapping[str, pd.DataFrame],
                  infos: Sequence[TableInfo]) -> list[CheckResult]:
    """The published tables' columns that nobody meant to publish (see the module doc)."""
    ignored = set(cfg.ignore_columns)
    headers = {i.name: i.header for i in infos}
    original = set(headers.get("original") or ())
    out: list[CheckResult] = []
    for table in PUBLISHED:
        df = frames.get(table)
        if df is None:
            continue
        unnamed, index = [], []
        for position, col in enumerate(df.columns, start=1):
            name = str(col)
            if name in ignored:
                continue
            if blank(name) or _PANDAS_UNNAMED.fullmatch(name.strip()):
                unnamed.append(unnamed_label(position) if blank(name) else name)
            elif name.strip().lower() in INDEX_NAMES and counts_rows(df[col]):
                index.append(name)
        if unnamed:
            out.append(CheckResult(
                table=table, check="every column is named", column=", ".join(unnamed),
                success=False, source="riskgate",
                detail=(f"{len(unnamed)} column(s) without a name: an index written by "
                        "DataFrame.to_csv() (write with index=False) or a stray separator; "
                        "drop it from the file, or list it under ignore_columns in the gate "
                        "config to publish it unmeasured")))
        if index:
            out.append(CheckResult(
                table=table, check="no index column counting the rows",
                column=", ".join(index), success=False, source="riskgate",
                detail=(f"column(s) {index} count the rows (0..n-1 or 1..n): a written index "
                        "that may carry the original's row order; drop it (DataFrame.to_csv("
                        "index=False)), or list it under ignore_columns")))
    released = frames.get("released")
    if released is not None and original:
        out.append(extra_columns_check(list(map(str, released.columns)), original, ignored))
    return out


def extra_columns_check(released: Sequence[str], original: set[str] | frozenset[str],
                        ignored: set[str] | frozenset[str]) -> CheckResult:
    """Every released column is in the original (or accepted under ``ignore_columns``): a
    column the original lacks is judged by no measure."""
    extra = [c for c in released if c not in original and c not in ignored and not blank(c)
             and not _PANDAS_UNNAMED.fullmatch(c.strip())]
    return CheckResult(
        table="released", check="every released column is in the original",
        column=", ".join(extra) or None, success=not extra, source="riskgate",
        detail=(f"column(s) {extra[:10]} are not in the original, so no measure judges "
                "them; drop them from the release, or list them under ignore_columns in "
                "the gate config to publish them unmeasured" if extra else ""))


def prepare_tables(cfg: TablesConfig, frames: Mapping[str, pd.DataFrame],
                   infos: Sequence[TableInfo]) -> tuple[dict[str, pd.DataFrame], Prepared]:
    """The tables with numbers written one way (:func:`riskcore.formats.canonical_numbers`),
    and what was decided (checks on unnamed, index and extra columns included)."""
    roles = cfg.role_spec
    named = {name: with_names(df) for name, df in frames.items()}
    types = declared_types(named, roles)
    out, formats = canonical_numbers(named, list(roles.measured_columns), types)
    markers = cfg.markers
    record = {**markers.to_dict(),
              "replaced": {i.name: dict(i.markers_replaced) for i in infos
                           if i.markers_replaced}} if markers else {}
    return out, Prepared(formats=formats, checks=tuple(column_checks(cfg, frames, infos)),
                         markers=record, ignored=tuple(cfg.ignore_columns))
