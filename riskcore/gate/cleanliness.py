"""Cleanliness checks before any measure runs (Protegrity's best practices), with Great
Expectations.

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
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..anatomy.reading import ColumnReading, read_column
from ..arrays import unique
from ..data import (
    NUMBER_PATTERN,
    ColumnType,
    Roles,
    distinct,
    infinite_rows,
    looks_numeric,
    map_distinct,
    written_as_code,
)
from ..equivalence import control_overlap_test
from ..identifiers.text import FORMAT, HIDING
from ..results import Record
from ..roles import CONTROLS, PUBLISHED
from .gx_suites import Job, gx_context, run_suites_here
from .tables import REPLACEMENT_CHAR

log = logging.getLogger(__name__)

NUMBER_REGEX = NUMBER_PATTERN
#: control and non-printable characters, line breaks and tabs inside a cell included, and
#: every invisible format character (a zero-width space makes "Paris" two labels)
CONTROL_REGEX = "[\x00-\x1f\x7f" + FORMAT + "]"
#: the same, for free text nobody measures (a note over two lines): tabs and line breaks
#: inside a quoted field are text, every other control character is not; of the format
#: characters, those that only hide text (riskcore.identifiers.text.HIDING: zero-width
#: spaces, bidirectional overrides), not the joiners and marks honest text writes
CONTROL_IN_TEXT_REGEX = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f" + HIDING + "]"
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
    #: seconds the checks waited for Great Expectations' one-off start-up (not in to_dict)
    gx_start_wait: float = 0.0
    #: what preparing the tables decided (formats, markers: riskcore.gate.prepare)
    prepared: Mapping[str, Any] = field(default_factory=dict)
    #: the scan for undeclared direct identifiers (riskcore.identifiers)
    identifiers: Any = None

    def with_prepared(self, checks: Sequence[CheckResult], prepared: Mapping[str, Any]
                      ) -> CleanlinessReport:
        """This report with the preparation's checks (first) and record."""
        return replace(self, checks=(*checks, *self.checks), prepared=dict(prepared))

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
                **dict(self.prepared),
                **({"identifiers": self.identifiers.to_dict()}
                   if self.identifiers is not None else {}),
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


def unnamed_label(position: int) -> str:
    """What the report calls a column whose name is empty (1-based position)."""
    return f"(unnamed column {position})"


def blank(name: Any) -> bool:
    return not str(name).strip()


def with_names(df: pd.DataFrame) -> pd.DataFrame:
    """The frame with each empty column name replaced by :func:`unnamed_label` (Great
    Expectations, and every message, need a name)."""
    if not any(blank(c) for c in df.columns):
        return df
    names = [unnamed_label(i + 1) if blank(c) else c for i, c in enumerate(df.columns)]
    out = df.copy(deep=False)
    out.columns = pd.Index(names)
    return out


def column_readings(frames: Mapping[str, pd.DataFrame], roles: Roles
                    ) -> dict[str, ColumnReading]:
    """How each measured column reads (:func:`riskcore.anatomy.read_column`: a code or a
    quantity, with its evidence), on the original (the types are decided there, as the
    checks decide them; else the first table); a type the config declares wins."""
    ref = frames.get("original")
    if ref is None:
        ref = next(iter(frames.values()))
    return {col: read_column(col, [ref[col]], roles.types.get(col))
            for col in roles.measured_columns if col in ref.columns}


def declared_types(frames: Mapping[str, pd.DataFrame], roles: Roles,
                   readings: Mapping[str, ColumnReading] | None = None
                   ) -> dict[str, ColumnType]:
    """Types of the measured columns: explicit ones, else inferred from the original table;
    a number written as a code in any table (``007``, ``+1000``) makes its column text, and
    so does a column of whole numbers that reads as codes (a zip, a PUMA, an occupation code:
    :func:`column_readings`), so that every distance attack reads it as an attacker does. A
    column whose reading is split keeps its numbers; the distance attacks measure it both
    ways (:func:`riskcore.measures.run_measure`)."""
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
            elif looks_numeric(s) and not any(written_as_code(df[col])
                                              for df in frames.values() if col in df.columns):
                reading = (readings or {}).get(col) or read_column(col, [s])
                code = reading.type == "categorical" and not reading.split
                types[col] = ColumnType.CATEGORICAL if code else ColumnType.CONTINUOUS
            else:
                types[col] = ColumnType.CATEGORICAL
    return types


def warm_up() -> None:
    """Start Great Expectations' helper process, which imports GX and builds its context on
    the other core while the run starts and the tables load (:mod:`.gx_helper`; nothing when
    it runs already).

    It was a thread until the gate's overhead was profiled: the import is Python
    under the interpreter's lock, so a thread only moved its 2.5 s of CPU beside Prefect's
    start-up, which it slowed as much. A worker running several gates at once has one helper
    per flow process for as long as that process lives (about 200 MB each)."""
    from . import gx_helper

    gx_helper.start()


def _run_suites(jobs: Sequence[tuple[str, pd.DataFrame, Sequence[Spec]]]
                ) -> tuple[list[list[dict[str, Any]]], float]:
    """:func:`run_suites_here` in the helper process when there is one, else here; and the
    seconds spent waiting for Great Expectations' start-up (its import and context)."""
    from . import gx_helper

    plain: list[Job] = [(name, frame, [(sp.kind, sp.column, sp.kwargs) for sp in specs])
                        for name, frame, specs in jobs]
    helper = gx_helper.current()
    if helper is not None:
        try:
            return helper.run_suites(plain)
        except gx_helper.HelperGone as exc:
            log.warning("Great Expectations' helper process is gone (%s); validating in this "
                        "process", exc)
        except gx_helper.HelperFailed as exc:
            raise RuntimeError(f"Great Expectations failed: {exc}") from None
    t0 = time.perf_counter()
    gx_context()
    waited = time.perf_counter() - t0
    return run_suites_here(plain), waited


@dataclass(frozen=True)
class DistinctValues:
    """A table's columns as their distinct non-missing values, what Great Expectations checks.

    Every expectation riskgate asks for is a property of single values (a regular expression,
    a type, "not every value missing"), so checking each distinct value once is the same check
    as checking every row; the row counts and example row numbers come back through ``codes``
    (row -> index of its value, -1 = missing) and ``counts`` (rows per value). A column of
    typed numbers (Parquet, JSON) keeps one present value: its type is the schema's, and
    "not every value missing" is all that is asked of its values.
    """

    values: Mapping[str, Any]
    codes: Mapping[str, np.ndarray]
    counts: Mapping[str, np.ndarray]
    text: frozenset[str]
    n: int

    @classmethod
    def of(cls, df: pd.DataFrame) -> DistinctValues:
        columns: dict[str, Any] = {}
        codes: dict[str, np.ndarray] = {}
        counts: dict[str, np.ndarray] = {}
        text: set[str] = set()
        for col in df.columns:
            s = df[col]
            if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(
                    s.dtype):
                # typed numbers: the schema answers the type; the only value-level question
                # left ("not every value missing") needs one present value, not all of them
                present = s.notna().to_numpy()
                first = int(present.argmax()) if present.any() else None
                columns[str(col)] = s.iloc[[] if first is None else [first]].to_numpy()
                continue
            c, uniques = distinct(s)
            missing = bool(c.size) and int(c.min()) < 0
            count = np.bincount(c[c >= 0] if missing else c, minlength=len(uniques))
            used = np.flatnonzero(count)
            if used.size == len(uniques):  # every value used: the codes are already these
                codes[str(col)] = c  # in their own (narrow) integer type: no copy
            else:
                remap = np.full(len(uniques) + 1, -1, dtype=np.int32 if used.size < 2**31
                                else np.int64)
                remap[used] = np.arange(used.size)
                codes[str(col)] = remap[c]
            counts[str(col)] = count[used]
            values = uniques.take(used)
            dtype = df[col].dtype
            if isinstance(dtype, pd.CategoricalDtype):
                dtype = dtype.categories.dtype
            if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
                text.add(str(col))
                # text through Arrow's regular expressions, mixed values as Python objects;
                # text already held as text (a CSV's Categoricals) stays in its Arrow buffers
                if not pd.api.types.is_object_dtype(dtype):
                    columns[str(col)] = pd.array(values, dtype="str")
                    continue
                arr = np.asarray(values, dtype=object)
                all_text = all(isinstance(v, str) for v in arr)
                columns[str(col)] = pd.array(arr, dtype="str" if all_text else object)
            else:
                columns[str(col)] = values
        return cls(values=columns, codes=codes, counts=counts, text=frozenset(text), n=len(df))

    def rows(self, col: str, value_index: Sequence[int]) -> tuple[int, np.ndarray]:
        """Rows holding any of the given distinct values: their count and the first rows."""
        idx = np.asarray(value_index, dtype=np.int64)
        idx = idx[(idx >= 0) & (idx < len(self.counts[col]))]
        total = int(self.counts[col][idx].sum())
        first = np.flatnonzero(np.isin(self.codes[col], idx))[:MAX_EXAMPLE_ROWS] if total \
            else np.empty(0, dtype=np.int64)
        return total, first


@dataclass(frozen=True)
class Spec:
    """One expectation as data: its label in riskgate's report, the column, GX's class name
    and its other arguments."""

    label: str
    column: str
    kind: str
    kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def key(self) -> tuple[str, str, Any]:
        return (self.kind, self.column, dict(self.kwargs).get("regex"))


def _expectations_for(values: DistinctValues, columns: Sequence[str], roles: Roles,
                      types: Mapping[str, ColumnType], table: str) -> list[Spec]:
    exps = []
    needed = list(roles.required_in(table))
    if table == "original":
        needed += [c for c in roles.direct_identifiers if c in columns]
    for col in needed:
        exps.append(Spec("column exists", col, "ExpectColumnToExist"))
        if col not in columns:
            continue
        text = col in values.text
        typ = types.get(col)
        if typ is not None and typ.is_numeric and text:
            exps.append(Spec("values are numbers", col, "ExpectColumnValuesToMatchRegex",
                             (("regex", NUMBER_REGEX),)))
        elif typ is not None and typ.is_numeric and not pd.api.types.is_numeric_dtype(
                pd.Series(values.values[col]).dtype):
            exps.append(Spec("values are numbers", col, "ExpectColumnValuesToBeInTypeList", ((
                "type_list", ("int", "int64", "int32", "float", "float64", "float32", "Int64",
                              "Float64")),)))
        if text:
            exps.append(Spec("characters decodable in the declared encoding", col,
                             "ExpectColumnValuesToNotMatchRegex", (("regex", REPLACEMENT_CHAR),)))
        if col in roles.quasi_identifiers:
            exps.append(Spec(EMPTY_CHECK, col,
                             "ExpectColumnUniqueValueCountToBeBetween", (("min_value", 1),)))
    if table != "identification":
        measured = set(roles.measured_columns)
        for col in columns:  # every text column read, measured or not
            if col in values.text:
                regex = CONTROL_REGEX if col in measured else CONTROL_IN_TEXT_REGEX
                exps.append(Spec("no control or non-printable characters", col,
                                 "ExpectColumnValuesToNotMatchRegex", (("regex", regex),)))
    return exps


#: the check that a key column holds a value (over a partitioned table: in some partition)
EMPTY_CHECK = "key column is not empty"
#: expectations about a column as a whole (it exists, it is not empty), not about single values
COLUMN_LEVEL = frozenset({"ExpectColumnToExist", "ExpectColumnUniqueValueCountToBeBetween"})


def _size_group(n_values: int) -> int:
    """Columns whose numbers of distinct values are within a factor of 64 share a frame: an
    identifier with a million distinct values does not pad a key column's few labels."""
    return int(np.log2(n_values + 1) // 6)


@dataclass(frozen=True)
class _Member:
    """One table's part in a shared column: the union position of each of its values."""

    table: str
    values: DistinctValues
    position: np.ndarray


@dataclass(frozen=True)
class _Shared:
    """A text column's distinct values checked once for every table that asks the same
    value checks of it: the union of their distinct values, and where each table's are."""

    column: str
    specs: tuple[Spec, ...]
    values: Any
    members: tuple[_Member, ...]


#: regular expressions of the value checks that Arrow's engine (RE2) reads exactly as Python's
#: does, each in RE2's spelling: classes of code points, a literal, no look-around, and ``$``
#: after a class that takes line breaks (Python's ``$`` also matches before a final line break)
_RE2_SAME = {NUMBER_REGEX: NUMBER_REGEX, REPLACEMENT_CHAR: REPLACEMENT_CHAR,
             CONTROL_REGEX: r"[\x00-\x1f\x7f" + FORMAT + "]",
             CONTROL_IN_TEXT_REGEX: r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f" + HIDING + "]"}
#: columns with fewer distinct values go to Great Expectations whole
SCREEN_ABOVE = 20_000


def _suspects(sh: _Shared) -> np.ndarray | None:
    """The union positions Great Expectations needs to see of a large text column whose
    every check is a regular expression: the values that fail one of them when Arrow
    evaluates the same expressions (RE2, in C++, on the column as it is held), and the first
    value. GX then checks these and reports as if it had seen every value: a value passing
    every expression in Arrow passes it in GX, as the expressions are the same
    (:data:`_RE2_SAME`). None (GX sees every value) for small columns, other checks, or
    values Arrow cannot hold as text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(sh.values)
    if n <= SCREEN_ABOVE or not all(
            sp.kind in ("ExpectColumnValuesToMatchRegex", "ExpectColumnValuesToNotMatchRegex")
            and dict(sp.kwargs).get("regex") in _RE2_SAME for sp in sh.specs):
        return None
    try:
        text = pa.array(sh.values, type=pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return None
    suspect = np.zeros(n, dtype=bool)
    for sp in sh.specs:
        hit = pc.match_substring_regex(text, _RE2_SAME[dict(sp.kwargs)["regex"]])
        hit_np = hit.fill_null(False).to_numpy(zero_copy_only=False)
        suspect |= ~hit_np if sp.kind == "ExpectColumnValuesToMatchRegex" else hit_np
    suspect[0] = True
    return np.flatnonzero(suspect)


def _shared_columns(tables: Sequence[tuple[str, DistinctValues, Sequence[Spec]]]
                    ) -> list[_Shared]:
    """The value checks (regular expressions, types) of every table, grouped: a text column
    whose value checks are the same in several tables (the original's and the release's
    household ids) is checked once on the union of its distinct values; any other column
    on its own."""
    groups: dict[tuple[Any, ...], list[tuple[str, DistinctValues, tuple[Spec, ...]]]] = {}
    for table, values, specs in tables:
        by_column: dict[str, list[Spec]] = {}
        for sp in specs:
            if sp.kind not in COLUMN_LEVEL and sp.column in values.values:
                by_column.setdefault(sp.column, []).append(sp)
        for col, col_specs in by_column.items():
            keys = tuple(sp.key for sp in col_specs)
            key = (col, keys) if col in values.text else (col, keys, table)
            groups.setdefault(key, []).append((table, values, tuple(col_specs)))
    shared = []
    for (col, *_), members in groups.items():
        arrays = [pd.Series(v.values[col]) for _, v, _ in members]
        if len(arrays) == 1 or all(a.equals(arrays[0]) for a in arrays[1:]):
            # one table, or the same distinct values in the same order in each (identifiers
            # the release keeps: hashing them again would cost more than the rest)
            union: Any = members[0][1].values[col]
            positions = [np.arange(len(union))] * len(arrays)
        else:
            codes, uniques = pd.factorize(pd.concat(arrays, ignore_index=True))
            union = uniques.array
            bounds = np.cumsum([0] + [len(a) for a in arrays])
            positions = [codes[bounds[i]:bounds[i + 1]] for i in range(len(arrays))]
        shared.append(_Shared(col, members[0][2], union, tuple(
            _Member(t, v, pos) for (t, v, _), pos in zip(members, positions))))
    return shared


#: the value checks asked of many columns at once: one expectation on their values stacked
#: into one frame column (:func:`_value_jobs`)
STACKED = frozenset({"ExpectColumnValuesToMatchRegex", "ExpectColumnValuesToNotMatchRegex"})


@dataclass(frozen=True)
class _Segment:
    """Where one shared column's values lie in a stacked frame column."""

    column: str  # the shared column's name in its job (unique per job)
    start: int
    length: int


#: one job of value checks: its name, frame and expectations; the shared column behind each
#: name, the union positions of a screened column's values, and the segments of each stack
ValueJob = tuple[str, pd.DataFrame, list[Spec], dict[str, "_Shared"],
                 dict[str, "np.ndarray | None"], dict[str, tuple[_Segment, ...]]]


def _value_jobs(shared: Sequence[_Shared]) -> list[ValueJob]:
    """The shared columns packed into frames by size (:func:`_size_group`), each frame's
    columns named uniquely; a large text column whose checks are regular expressions
    contributes its suspects only (:func:`_suspects`), the union positions they stand for
    given per column.

    A regular expression asked of several columns is one expectation, on their values
    stacked into one frame column (the segments say whose values are where): Great
    Expectations' cost is per expectation (10-30 ms each, whatever the number of values:
    its metric graph and configurations), and a value passes or fails a regular expression
    whatever column it comes from. Columns are stacked only with columns of the same kind
    of array (text held as text, or Python objects), which GX matches alike; every other
    check keeps its column. Shorter frame columns are padded with missing values, which no
    check counts."""
    groups: dict[int, list[tuple[_Shared, Any, np.ndarray | None]]] = {}
    for sh in shared:
        kept = _suspects(sh)
        values = sh.values if kept is None else pd.Series(sh.values).iloc[kept].to_numpy()
        groups.setdefault(_size_group(len(values)), []).append((sh, values, kept))
    jobs: list[ValueJob] = []
    for key in sorted(groups):
        named: dict[str, tuple[pd.Series, _Shared, np.ndarray | None]] = {}
        for sh, values, kept in groups[key]:
            name = sh.column
            while name in named:
                name += "'"
            named[name] = (pd.Series(values).reset_index(drop=True), sh, kept)
        columns: dict[str, pd.Series] = {}
        specs: list[Spec] = []
        parts: dict[tuple[Any, ...], list[tuple[str, pd.Series]]] = {}
        for name, (series, sh, _) in named.items():
            for sp in sh.specs:
                if sp.kind in STACKED:
                    parts.setdefault((sp.kind, sp.kwargs, series.dtype == object, sp.label),
                                     []).append((name, series))
                else:
                    columns[name] = series
                    specs.append(replace(sp, column=name))
        stacks: dict[str, tuple[_Segment, ...]] = {}
        for (kind, kwargs, _, label), members in parts.items():
            stack = f"stacked values {len(stacks) + 1}"
            while stack in named:
                stack += "'"
            starts = np.cumsum([0] + [len(s) for _, s in members])
            stacks[stack] = tuple(_Segment(name, int(starts[i]), len(s))
                                  for i, (name, s) in enumerate(members))
            columns[stack] = pd.concat([s for _, s in members], ignore_index=True) \
                if len(members) > 1 else members[0][1]
            specs.append(Spec(label, stack, kind, kwargs))
        size = max((len(c) for c in columns.values()), default=0)
        frame = pd.DataFrame({n: c.reindex(range(size)) for n, c in columns.items()},
                             index=pd.RangeIndex(size))
        jobs.append((f"values-{key}", frame, specs, {n: sh for n, (_, sh, _) in named.items()},
                     {n: kept for n, (_, _, kept) in named.items()}, stacks))
    return jobs


def _unstacked(rows: Sequence[Mapping[str, Any]], stacks: Mapping[str, Sequence[_Segment]]
               ) -> list[dict[str, Any]]:
    """A job's results with each stacked one given back to the columns in its stack, as if
    each column had been checked on its own: the failing values in its segment (their
    positions in the column), a pass when it has none (a column with no value too, as GX
    says of a column whose values are all missing); GX's error, if it raised, for every
    column."""
    out: list[dict[str, Any]] = []
    for row in rows:
        segments = stacks.get(row["column"])
        if segments is None:
            out.append(dict(row))
            continue
        index = None if row["index"] is None else np.asarray(row["index"], dtype=np.int64)
        for seg in segments:
            mine = {**row, "column": seg.column}
            if index is not None:
                inside = index[(index >= seg.start) & (index < seg.start + seg.length)]
                mine["index"] = (inside - seg.start).tolist()
                mine["success"] = bool(row["success"]) or inside.size == 0
            out.append(mine)
    return out


def _column_frame(values: DistinctValues) -> pd.DataFrame:
    """One row: each column's first distinct value, or missing when it has none (what "the
    column exists" and "the column is not empty" ask)."""
    return pd.DataFrame({c: pd.Series(v).iloc[:1].reindex(range(1))
                         for c, v in values.values.items()}, index=pd.RangeIndex(1))


def validate_tables(frames: Mapping[str, pd.DataFrame], roles: Roles,
                    identifiers: Any = None) -> CleanlinessReport:
    """Run the cleanliness checks on every table of a run (Great Expectations, in memory).

    The checks run on the columns' distinct values (:class:`DistinctValues`), counts and
    example rows mapped back to each table's rows: per table, one suite for the column
    checks (exists, not empty) on a one-row frame; and one suite per size of column for the
    value checks, where a text column that several tables share is checked once on the
    union of their distinct values (:func:`_shared_columns`), and a large one whose checks
    are regular expressions contributes the values Arrow finds failing (:func:`_suspects`).

    Args:
        frames: table role name -> DataFrame as read (CSV cells as text).
        roles: the column roles.
        identifiers: the rules of the scan for undeclared direct identifiers
            (:class:`riskcore.gate.config.IdentifierRules`; default: its defaults).
    """
    frames = {name: with_names(df) for name, df in frames.items()}
    types = declared_types(frames, roles)
    tables: list[tuple[str, DistinctValues, list[Spec]]] = []
    for table, df in frames.items():
        values = DistinctValues.of(df)
        specs = _expectations_for(values, [str(c) for c in df.columns], roles, types, table)
        tables.append((table, values, specs))
    jobs: list[tuple[str, pd.DataFrame, Sequence[Spec]]] = []
    for table, values, specs in tables:
        jobs.append((f"{table}-columns", _column_frame(values),
                     [sp for sp in specs if sp.kind in COLUMN_LEVEL]))
    value_jobs = _value_jobs(_shared_columns(tables))
    jobs.extend((name, frame, specs) for name, frame, specs, _, _, _ in value_jobs)
    # riskgate's own preconditions are computed while Great Expectations runs in its helper
    # process (this thread then only waits on the helper's pipe)
    with ThreadPoolExecutor(1, thread_name_prefix="riskgate-preconditions") as pool:
        preconditions = pool.submit(_preconditions, frames, roles, types)
        scan = pool.submit(_identifier_checks, frames, roles, identifiers)
        suites, waited = _run_suites(jobs)
        own = preconditions.result()
        scan_checks, scanned = scan.result()

    found: dict[tuple[str, tuple[str, str, Any]], CheckResult] = {}
    by_name = {t: (values, {sp.key: sp.label for sp in specs}) for t, values, specs in tables}
    for (table, values, _), rows in zip(tables, suites):
        for row in rows:
            check = _check(table, row, values, by_name[table][1])
            found[(table, _row_key(row))] = check
    for (_, _, _, owner, kept, stacks), rows in zip(value_jobs, suites[len(tables):]):
        for row in _unstacked(rows, stacks):
            sh = owner[row["column"]]
            for member in sh.members:
                mine = {**row, "column": sh.column}
                if row["index"] is not None:
                    unexpected = np.asarray(row["index"], dtype=np.int64)
                    positions = kept[row["column"]]
                    if positions is not None:  # positions in the union
                        unexpected = positions[unexpected]
                    index = np.flatnonzero(np.isin(member.position, unexpected))
                    mine["index"] = index.tolist()
                    mine["success"] = bool(row["success"]) or index.size == 0
                values, labels = by_name[member.table]
                found[(member.table, _row_key(mine))] = _check(member.table, mine, values,
                                                               labels)
    results = [found.get((table, sp.key)) or _no_result(table, sp)
               for table, values, specs in tables for sp in _in_frame_order(values, specs)]
    results.extend(own)
    results.extend(scan_checks)
    return CleanlinessReport(checks=tuple(results),
                             declared_types={k: v.value for k, v in types.items()},
                             gx_start_wait=waited, identifiers=scanned)


#: the check's label in reports
IDENTIFIER_CHECK = "no undeclared direct identifiers"


def _identifier_checks(frames: Mapping[str, pd.DataFrame], roles: Roles, rules: Any
                       ) -> tuple[list[CheckResult], Any]:
    """The scan for undeclared direct identifiers as checks: one failing line per column,
    naming the kinds, counts and shares (never a value), else one passing line per table."""
    from ..identifiers import DEFAULT_THRESHOLD, describe, scan_tables
    from ..identifiers.phones import DEFAULT_REGIONS

    scan = scan_tables(frames, skip=roles.direct_identifiers,
                       allow=getattr(rules, "allow", None) or {},
                       threshold=getattr(rules, "threshold", DEFAULT_THRESHOLD),
                       regions=getattr(rules, "regions", None) or DEFAULT_REGIONS)
    out: list[CheckResult] = []
    for table, columns in scan.scanned.items():
        failing = [f for f in scan.findings if f.table == table and scan.failing(f)]
        by_column: dict[str, list[Any]] = {}
        for f in failing:
            by_column.setdefault(f.column, []).append(f)
        n = len(frames[table])
        for col, found in by_column.items():
            rows = unique(np.concatenate([f.rows for f in found]))
            kinds = ", ".join(f.kind for f in found)
            out.append(CheckResult(
                table=table, check=IDENTIFIER_CHECK, column=col, success=False,
                unexpected_count=int(rows.size), element_count=n,
                example_rows=tuple(int(r) for r in rows[:MAX_EXAMPLE_ROWS]), source="riskgate",
                detail=(f"{describe(found)}: remove them, declare the column under "
                        "roles.direct_identifiers, or accept the kind in this column "
                        f"(identifiers: {{allow: {{{col}: [{kinds}]}}}})")))
        if not by_column:
            out.append(CheckResult(table=table, check=IDENTIFIER_CHECK, column=None,
                                   success=True, element_count=n, source="riskgate",
                                   detail=f"{len(columns)} column(s) scanned"))
    return out, scan


def _no_result(table: str, spec: Spec) -> CheckResult:
    """A check Great Expectations gave no result for fails (closed), saying so."""
    return CheckResult(table=table, check=spec.label, column=spec.column, success=False,
                       detail="Great Expectations returned no result for this check")


def _row_key(row: Mapping[str, Any]) -> tuple[str, str, Any]:
    """A GX result's :attr:`Spec.key`: class name, column, regular expression."""
    return ("".join(p.capitalize() for p in row["type"].split("_")), row["column"],
            row["regex"])


def _in_frame_order(values: DistinctValues, specs: Sequence[Spec]) -> list[Spec]:
    """A table's checks in report order: columns with fewer distinct values first, each
    column's checks together, in the order the expectations were written (an absent
    column's with the first columns)."""
    groups = sorted({_size_group(len(v)) for v in values.values.values()})
    rank = {c: groups.index(_size_group(len(v))) for c, v in values.values.items()}
    first: dict[str, int] = {}
    for i, sp in enumerate(specs):
        first.setdefault(sp.column, i)
    return sorted(specs, key=lambda sp: (rank.get(sp.column, 0), first[sp.column]))


def _check(table: str, row: Mapping[str, Any], values: DistinctValues,
           labels: Mapping[tuple[str, str, Any], str]) -> CheckResult:
    """One GX result as a CheckResult, counts and example rows in the table's rows."""
    col, kind = row["column"], row["type"]
    label = labels.get(_row_key(row), kind)
    count, rows = 0, np.empty(0, dtype=np.int64)
    if col in values.codes and row["index"] is not None:
        count, rows = values.rows(col, row["index"])
    detail = ""
    if not row["success"] and kind == "expect_column_to_exist":
        detail = f"add the column to table '{table}' or fix the roles in the config"
    elif not row["success"] and kind == "expect_column_unique_value_count_to_be_between":
        detail = "every value is missing"
    elif row["error"]:
        detail = row["error"]
    return CheckResult(table=table, check=label, column=col, success=row["success"],
                       unexpected_count=count, element_count=values.n if row["counted"] else None,
                       example_rows=tuple(int(i) for i in rows), detail=detail)




def _preconditions(frames: Mapping[str, pd.DataFrame], roles: Roles,
                   types: Mapping[str, ColumnType]) -> list[CheckResult]:
    out: list[CheckResult] = []
    original = frames.get("original")
    for table, df in frames.items():
        for col in roles.measured_columns:
            typ = types.get(col)
            if col not in df.columns or typ is None or not typ.is_numeric:
                continue
            infinite = infinite_rows(df[col])
            if infinite.size:
                out.append(CheckResult(
                    table=table, check="numbers are finite", column=col, success=False,
                    unexpected_count=int(infinite.size), element_count=len(df),
                    example_rows=tuple(infinite[:MAX_EXAMPLE_ROWS].tolist()), source="riskgate",
                    detail="infinite or overflowing numbers (e.g. 1e400) cannot be measured"))
    for table in PUBLISHED:
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
                        out.append(_schema_clash(table, col, df[col], typ, roles))
    released = frames.get("released")
    for table in CONTROLS:
        control = frames.get(table)
        if control is None:
            continue
        # held out from the original: a control that shares its rows is no yardstick; and
        # apart from the release: a control made of released rows (the judged party's own
        # half of its release, named as the control) turns every copy into "chance"
        for other, what in ((original, "original"), (released, "release")):
            if other is None:
                continue
            cols = [c for c in control.columns if c in other.columns]
            if not cols:
                continue
            codes_other, codes_ctrl = _text_codes(other, control, cols)
            test, overlap = control_overlap_test(codes_ctrl, codes_other)
            out.append(CheckResult(
                table=table, check=f"control rows do not overlap the {what}",
                column=None, success=not test.excessive, unexpected_count=int(overlap.size),
                element_count=len(control),
                example_rows=tuple(overlap[:MAX_EXAMPLE_ROWS].tolist()), source="riskgate",
                detail=test.describe(len(cols), what) + (
                    f": control rows must be held out from the {what}" if test.excessive
                    else "")))
    return out


#: values shown in a message about a column's type: at most this many distinct ones, each
#: at most this long (a marker like N, NA, ?, never a column of words)
_SHOWN_VALUES, _SHOWN_TOKEN = 3, 4


def _value_kind(value: str) -> str:
    text = value.strip()
    if not text:
        return "blank"
    if text.isalpha():
        return "letters"
    if not any(ch.isalnum() for ch in text):
        return "punctuation"
    return "text mixing letters and digits"


def _schema_clash(table: str, col: str, series: pd.Series, typ: ColumnType, roles: Roles
                  ) -> CheckResult:
    """A column numeric in the original and text in ``table``: one line naming the column, the
    kinds of the values that are not numbers (the values themselves only when they are short
    tokens of a column that is neither sensitive nor a direct identifier: a missing-value
    marker like ``N`` or ``?``) and the fix."""
    codes, uniques = distinct(series)
    text = pd.Series(np.asarray(uniques, dtype=object)).map(str)
    bad = np.flatnonzero(~text.str.match(NUMBER_PATTERN).to_numpy(dtype=bool))
    rows = np.flatnonzero(np.isin(codes, bad))
    kinds = sorted({_value_kind(str(text.iloc[i])) for i in bad})
    private = col in roles.sensitive or col in roles.direct_identifiers
    tokens = [str(text.iloc[i]) for i in bad[:_SHOWN_VALUES + 1]]
    shown = "" if private or len(tokens) > _SHOWN_VALUES or any(
        len(t) > _SHOWN_TOKEN for t in tokens) else (": " + ", ".join(repr(t) for t in tokens))
    marker = "missing_values: [" + ", ".join(tokens) + "]" if shown else (
        "missing_values: [...]")
    return CheckResult(
        table=table, check="schema agrees with the original", column=col, success=False,
        unexpected_count=int(rows.size), element_count=len(series),
        example_rows=tuple(rows[:MAX_EXAMPLE_ROWS].tolist()), source="riskgate",
        detail=(f"numeric ({typ.value}) in the original, but {len(bad)} distinct value(s) here "
                f"are not numbers ({', '.join(kinds)}{shown}): if they mean missing, declare "
                f"them ({marker} in the gate config, or roles.missing_values: {{{col}: [...]}}); "
                f"else declare the column's type (roles.types: {{{col}: categorical}})"))


def _text_codes(a: pd.DataFrame, b: pd.DataFrame, cols: Sequence[str]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Code matrices of the two tables' values as text on ``cols``, one code per distinct text
    across both tables (each column's text made once per distinct value), -1 = missing."""
    codes_a = np.empty((len(a), len(cols)), dtype=np.int64)
    codes_b = np.empty((len(b), len(cols)), dtype=np.int64)
    for j, col in enumerate(cols):
        ta = map_distinct(a[col], lambda u: u.astype(str))
        tb = map_distinct(b[col], lambda u: u.astype(str))
        joint = pd.Index(pd.unique(np.concatenate([
            np.asarray(ta.cat.categories, dtype=object),
            np.asarray(tb.cat.categories, dtype=object)])), dtype=object)
        for t, out in ((ta, codes_a), (tb, codes_b)):
            lookup = np.append(joint.get_indexer(pd.Index(t.cat.categories, dtype=object)), -1)
            out[:, j] = lookup[np.asarray(t.cat.codes, dtype=np.int64)]
    return codes_a, codes_b
