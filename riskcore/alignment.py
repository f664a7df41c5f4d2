"""Aligning the original (control, identification) with a generalized release.

The declarations and their semantics are in :mod:`riskcore.generalization`. Here each declared
(or unambiguously detected) column of the other tables is mapped into the release's labels,
once, in the gate's encoding step, and the share of values that can be compared is recorded for
the domain check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .data import distinct, integer_labels, map_distinct, number_series, used_values
from .errors import ConfigError, InputError, where
from .generalization import (
    DEFAULT_MIN_COMPARABLE,
    DEFAULT_SUPPRESSED,
    NUMERIC_KINDS,
    GeneralizationSpec,
    HierarchySpec,
    IntervalSpec,
    MaskSpec,
    RoundSpec,
    TopCodeSpec,
    parse_interval,
)
from .redact import redact_text

__all__ = ["Alignment", "ColumnAlignment", "align_column", "align_tables", "read_hierarchy"]

MAX_HIERARCHY_BYTES = 256 * 2**20

#: a label whose stars (if any) all come last: "12*", "1***"
_TRAILING_STARS = re.compile(r"[^*]*+\**+")


@dataclass(frozen=True)
class ColumnAlignment:
    """How one column of the original was put into the release's domain.

    Attributes:
        column: the column name.
        how: 'declared: <kind>', 'detected: <kind>', or 'as is'.
        comparable: the share of the original's non-missing values that equal a released
            value after alignment (numbers of a numeric column count as comparable).
        suppressed: the share of released cells that are suppression tokens.
    """

    column: str
    how: str
    comparable: float
    suppressed: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "how": self.how,
                "comparable": round(self.comparable, 6), "suppressed": round(self.suppressed, 6)}


@dataclass(frozen=True)
class Alignment:
    """The alignment of a run: per column, and the threshold of the domain check."""

    columns: Mapping[str, ColumnAlignment] = field(default_factory=dict)
    min_comparable: float = DEFAULT_MIN_COMPARABLE
    suppressed_tokens: tuple[str, ...] = DEFAULT_SUPPRESSED

    def below(self, columns: Sequence[str]) -> list[ColumnAlignment]:
        """The columns among ``columns`` whose comparable share is under the threshold."""
        return [self.columns[c] for c in columns
                if c in self.columns and self.columns[c].comparable < self.min_comparable]

    def partly(self, columns: Sequence[str]) -> list[str]:
        """The columns among ``columns`` that are not fully comparable."""
        return [c for c in columns if c in self.columns and self.columns[c].comparable < 1.0]

    def insufficient_reason(self, columns: Sequence[str]) -> str | None:
        """Why an attack on ``columns`` cannot be trusted, or None."""
        low = self.below(columns)
        if not low:
            return None
        parts = [f"column '{c.column}': {c.comparable:.0%} of the original's values can be "
                 "compared with the release's" for c in low]
        return ("; ".join(parts) + f" (the domain check needs {self.min_comparable:.0%}); "
                "declare how the column was generalized under 'generalization:' in the gate "
                "config (interval, {width: w}, {round: r}, {mask: '*'}, {hierarchy: URL})")

    def to_dict(self) -> dict[str, Any]:
        return {"min_comparable": self.min_comparable,
                "suppressed_tokens": list(self.suppressed_tokens),
                "columns": [c.to_dict() for c in self.columns.values()]}


def _one_text(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return None
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def text_labels(s: pd.Series) -> pd.Series:
    """The column as text (missing stays missing; whole floats lose their '.0'), a Categorical
    computed once per distinct value; a Categorical of text (CSV cells, Parquet strings) is
    that already and comes back as it is (no pass over its rows)."""
    if isinstance(s.dtype, pd.CategoricalDtype) and pd.api.types.infer_dtype(
            s.dtype.categories, skipna=True) in ("string", "empty"):
        return s
    if pd.api.types.is_integer_dtype(s.dtype) and s.notna().any():
        # each distinct integer's digits written by Arrow: a household number's 430,000
        # distinct values in a Python call each took 0.4 s of a million-row diff
        return integer_labels(s)
    return map_distinct(s, lambda u: u.map(_one_text))


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def map_intervals(values: pd.Series, labels: Sequence[str]) -> pd.Series:
    """Each number -> the narrowest released interval label containing it (None if none)."""
    parsed = [(lab, iv) for lab in sorted(labels) if (iv := parse_interval(lab)) is not None]
    x = number_series(values)
    uniq = pd.unique(x.dropna())
    out: dict[float, str] = {}
    if parsed and len(uniq):
        u = np.asarray(uniq, dtype=float)
        best_w = np.full(u.shape, np.inf)
        best = np.full(u.shape, -1)
        for i, (_, iv) in enumerate(parsed):
            inside = iv.contains(u)
            better = inside & (iv.width < best_w)
            best_w[better] = iv.width
            best[better] = i
        out = {float(v): parsed[b][0] for v, b in zip(u, best) if b >= 0}
    return map_distinct(x, lambda u: u.map(lambda v: out.get(float(v))))


def _map_width(values: pd.Series, labels: Sequence[str], width: float) -> pd.Series:
    starts: dict[float, str] = {}
    for lab in sorted(labels):
        iv = parse_interval(lab)
        if iv is not None and math.isfinite(iv.lo):
            starts.setdefault(iv.lo, lab)
    x = number_series(values)
    lo = np.floor(x / width) * width

    def label(v: float) -> str | None:
        if v in starts:
            return starts[v]
        hi = v + width - 1 if float(width).is_integer() else v + width
        return f"{_fmt(v)}-{_fmt(hi)}"

    return map_distinct(lo, lambda u: u.map(label))


def map_mask(values: pd.Series, labels: Sequence[str], mask: str) -> pd.Series:
    known = set(labels)
    text = text_labels(values)
    uniq = [v for v in pd.unique(text) if isinstance(v, str)]
    out: dict[str, str] = {}
    for v in uniq:
        for k in range(len(v) + 1):
            cand = v[:len(v) - k] + mask * k
            if cand in known:
                out[v] = cand
                break
    return map_distinct(text, lambda u: u.map(out.get))


def read_hierarchy(url: str, storage_options: Mapping[str, Any] | None, col: str
                   ) -> dict[str, list[str]]:
    """An ARX hierarchy: original value -> its labels, finest level first."""

    from .storage import read_bytes

    raw = read_bytes(url, storage_options, max_bytes=MAX_HIERARCHY_BYTES,
                     what=f"hierarchy of column '{col}'",
                     too_large="an ARX hierarchy file should be far smaller").data
    return parse_hierarchy(raw, f"hierarchy of column '{col}' ('{redact_text(url)}')")


def parse_hierarchy(raw: bytes, what: str) -> dict[str, list[str]]:
    """An ARX hierarchy's rows: ``value;level1;level2;...``, UTF-8, every row as long as the
    first, every value once. Each defect is one InputError naming ``what``, the row and the
    fix (a value under two parents would otherwise silently take the last row)."""
    import csv
    import io

    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
                         ) from None
    if "\x00" in text:
        raise InputError(f"{what} holds a NUL byte; an ARX hierarchy is ';'-separated text")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=";", strict=True)
    try:
        rows = [(reader.line_num, r) for r in reader if any(cell.strip() for cell in r)]
    except csv.Error as exc:
        raise InputError(f"{what}: line {reader.line_num} cannot be read ({exc}); write "
                         "';'-separated values, quoting a value that holds ';' or '\"'") from None
    if not rows:
        raise InputError(f"{what} is empty; write one row per original value: the value, then "
                         "one ';'-separated label per level")
    first_line, width = rows[0][0], len(rows[0][1])
    if width < 2:
        raise InputError(f"{what} has fewer than two columns; an ARX hierarchy is "
                         "';'-separated: the original value, then one column per level")
    levels: dict[str, list[str]] = {}
    first_row: dict[str, int] = {}
    for number, row in rows:
        if len(row) != width:
            raise InputError(f"{what}: line {number} has {len(row)} field(s), line {first_line} "
                             f"has {width}; give every value one label per level")
        value = row[0].strip()
        if value in first_row:
            raise InputError(f"{what}: line {number} repeats the value of line "
                             f"{first_row[value]} (a value under two parents); keep one line "
                             "per value")
        first_row[value] = number
        levels[value] = [v.strip() for v in row[1:]]
    return levels


def _map_hierarchy(values: pd.Series, labels: Sequence[str], levels: dict[str, list[str]],
                   table: str, col: str, url: str) -> pd.Series:
    known = set(labels)
    text = map_distinct(values, lambda u: u.map(
        lambda v: t.strip() if (t := _one_text(v)) is not None else None))
    missing = text.notna() & ~text.isin(list(levels))
    if missing.any():
        rows = np.flatnonzero(missing.to_numpy())[:5].tolist()
        raise InputError(
            f"{where(table, col)}: {int(missing.sum())} value(s) are not in the hierarchy "
            f"'{url}' (rows {rows}); add them to the hierarchy's first column")
    out: dict[str, str] = {}
    for v, path in levels.items():
        for lab in [v, *path]:
            if lab in known:
                out[v] = lab
                break
        else:
            out[v] = path[-1] if path else v
    return map_distinct(text, lambda u: u.map(out.get))


def _detect(original: pd.Series, labels: Sequence[str]) -> str | None:
    """'interval' or 'mask' when the released labels unambiguously say so, else None."""
    if not labels or original.dropna().empty:
        return None
    numeric = number_series(original).notna().mean() >= 0.99
    if numeric and all(parse_interval(lab) is not None for lab in labels):
        return "interval"
    masked = [lab for lab in labels if lab.endswith("*")]
    if not masked:
        return None
    if len(masked) == len(labels):
        return "mask"
    trailing_only = all(_TRAILING_STARS.fullmatch(lab) for lab in labels)
    return "mask" if trailing_only and len(masked) >= 0.5 * len(labels) else None


def _token_share(text: pd.Series, tokens: Sequence[str]) -> float:
    """The share of a column's cells that are suppression tokens, the tokens looked up among
    its distinct values (:func:`~riskcore.data.distinct`): a Categorical none of whose values
    is a token (most of them) costs no pass over its rows."""
    if not len(text) or not tokens:
        return 0.0
    codes, uniques = distinct(text)
    hit = np.flatnonzero(uniques.isin(list(tokens)))
    return float(np.isin(codes, hit).mean()) if hit.size else 0.0


def _released_labels(released_text: pd.Series, tokens: Sequence[str]) -> list[str]:
    return [v for v in pd.unique(released_text) if isinstance(v, str) and v not in tokens]


#: a suppression token may stand for at most this share of a column's released cells
MAX_SUPPRESSED_SHARE = 0.5


def check_suppression_tokens(col: str, released_text: pd.Series, original: pd.Series | None,
                             tokens: Sequence[str], suppressed: float) -> None:
    """A suppression token ("any value") must be a placeholder, not data: one that is a value
    of the column in the original, or that stands for more than half of the column's released
    cells, would make every quasi-identifier cell match anything and hide the risk (listing
    the release's real labels turned a REJECTED release into APPROVED). ConfigError
    naming the token, the column and the share."""
    if not tokens:
        return
    if original is not None:
        present = pd.Index(used_values(text_labels(original)).astype(str))  # per distinct value
        real = [t for t in tokens if t in present]
        if real:
            raise ConfigError(
                f"suppressed: the token '{real[0]}' is a value of column '{col}' in the "
                "original, so it cannot mean 'suppressed'; list only placeholders that never "
                "occur in the data (e.g. '*')")
    if suppressed > MAX_SUPPRESSED_SHARE:
        counts = released_text[released_text.isin(list(tokens))].astype(str).value_counts()
        top = str(counts.index[0]) if len(counts) else tokens[0]
        raise ConfigError(
            f"suppressed: the token(s) {sorted(map(str, counts.index))[:5]} cover "
            f"{suppressed:.1%} of the released cells of column '{col}' ('{top}' the most), more "
            f"than {MAX_SUPPRESSED_SHARE:.0%}: a column this suppressed should be dropped from "
            "the release, or the token is a real label; list only placeholders")


def align_column(col: str, spec: GeneralizationSpec | None, released: pd.Series,
                 others: Mapping[str, pd.Series], tokens: Sequence[str],
                 numeric: bool, storage_options: Mapping[str, Any] | None = None,
                 ) -> tuple[dict[str, pd.Series], ColumnAlignment]:
    """Map the other tables' values of ``col`` into the release's domain.

    Args:
        col: the column.
        spec: its declaration, or None (detected when unambiguous, else left as is).
        released: the released column as read.
        others: table name -> the column in the original, control, identification tables.
        tokens: suppression tokens of the release.
        numeric: the column is compared as numbers (no generalization detected on it).
    """
    rel_text = text_labels(released)
    labels = _released_labels(rel_text, tokens)
    suppressed = _token_share(rel_text, tokens)
    check_suppression_tokens(col, rel_text, others.get("original"), tokens, suppressed)
    how = "as is"
    kind: str | None = spec.kind if spec is not None else None
    if spec is None and "original" in others:
        detected = _detect(others["original"], labels)
        if detected == "interval":
            spec, how = IntervalSpec(), "detected: interval"
        elif detected == "mask":
            spec, how = MaskSpec(mask="*"), "detected: mask '*'"
        kind = spec.kind if spec is not None else None
    elif spec is not None:
        how = f"declared: {kind}"
    levels = (read_hierarchy(spec.hierarchy, storage_options, col)
              if isinstance(spec, HierarchySpec) else None)
    aligned: dict[str, pd.Series] = {}
    for table, s in others.items():
        if isinstance(spec, IntervalSpec) and spec.width is None:
            aligned[table] = map_intervals(s, labels)
        elif isinstance(spec, IntervalSpec):
            aligned[table] = _map_width(s, labels, float(spec.width or 1))
        elif isinstance(spec, RoundSpec):
            x = number_series(s)
            aligned[table] = np.sign(x) * np.floor(np.abs(x) / spec.round + 0.5) * spec.round
        elif isinstance(spec, TopCodeSpec):
            x = number_series(s)
            if spec.top_code is not None:
                x = x.where(~(x > spec.top_code), spec.top_code)
            if spec.bottom_code is not None:
                x = x.where(~(x < spec.bottom_code), spec.bottom_code)
            aligned[table] = x
        elif isinstance(spec, MaskSpec):
            aligned[table] = map_mask(s, labels, spec.mask)
        elif isinstance(spec, HierarchySpec):
            assert levels is not None
            aligned[table] = _map_hierarchy(s, labels, levels, table, col, spec.hierarchy)
        else:
            aligned[table] = s
    share = 1.0  # numbers compare by distance; a wholly suppressed column matches anything
    ori = aligned.get("original")
    compared_as_numbers = kind in NUMERIC_KINDS or (spec is None and numeric)
    if ori is not None and labels and not compared_as_numbers:
        present = others["original"].notna()
        ok = text_labels(ori).isin(labels) & present
        share = float(ok.sum() / present.sum()) if present.sum() else 1.0
    return aligned, ColumnAlignment(col, how, share, suppressed)


def align_tables(frames: Mapping[str, pd.DataFrame], columns: Sequence[str],
                 declared: Mapping[str, GeneralizationSpec], numeric: Sequence[str] = (),
                 tokens: Sequence[str] = DEFAULT_SUPPRESSED,
                 min_comparable: float = DEFAULT_MIN_COMPARABLE,
                 storage_options: Mapping[str, Any] | None = None,
                 ) -> tuple[dict[str, pd.DataFrame], Alignment]:
    """Every table but the release with ``columns`` mapped into the release's domain.

    Returns the new frames (the release unchanged; others copied only where a column changed)
    and the alignment record (per column: how, comparable share, suppressed share).
    """
    if "released" not in frames:
        return dict(frames), Alignment(min_comparable=min_comparable,
                                       suppressed_tokens=tuple(tokens))
    out = {name: df for name, df in frames.items()}
    record: dict[str, ColumnAlignment] = {}
    numeric_set = set(numeric)
    for col in columns:
        if col not in frames["released"].columns:
            continue
        others = {n: df[col] for n, df in frames.items() if n != "released" and col in df.columns}
        if not others:
            continue
        spec = declared.get(col)
        aligned, info = align_column(col, spec, frames["released"][col], others, tokens,
                                     numeric=col in numeric_set and spec is None,
                                     storage_options=storage_options)
        record[col] = info
        if info.how == "as is":
            continue
        for name, s in aligned.items():
            if out[name] is frames[name]:
                out[name] = frames[name].copy(deep=False)
            keep = (spec is not None and spec.kind in NUMERIC_KINDS) or isinstance(
                s.dtype, pd.CategoricalDtype)
            out[name][col] = s if keep else s.astype(object).where(s.notna(), None)
    return out, Alignment(record, min_comparable=min_comparable, suppressed_tokens=tuple(tokens))
