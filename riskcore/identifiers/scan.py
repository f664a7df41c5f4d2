"""The scan of published tables: every column, every kind, counts and rows, never a value.

Per column, on its distinct values (each read once, counts mapped back to cells):

1. the values as text (whole numbers as their digits: a card number in an integer column),
   normalized (:mod:`riskcore.identifiers.text`);
2. the kinds found by their form (:mod:`riskcore.identifiers.patterns`), the identifiers
   with checks (:mod:`riskcore.identifiers.checked_scan`), phone numbers
   (:mod:`riskcore.identifiers.phones`) and person names (:mod:`riskcore.identifiers.names`);
3. one :class:`Finding` per kind found: the cells holding one, their share of the column's
   non-empty cells, the evidence the decision read.

The policy (:class:`IdentifierScan`): a finding fails when the config does not accept the
kind in that column and it is strict (a national identifier, a card, an IBAN: one is enough)
or its cells exceed ``identifiers.threshold`` of the column (default 0.1 %).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from ..arrays import unique
from ..data import distinct, integer_digits, plain_digits
from .checked import checked_kinds
from .checked_scan import scan_checked
from .names import find_names
from .patterns import EMAIL, IP, PATTERN_KINDS, PatternKind
from .phones import (
    DEFAULT_REGIONS,
    EXHAUSTIVE,
    INTERNATIONAL,
    PHONE_SAMPLE,
    WRITTEN_RE2,
    found_regions,
    phone_evidence,
    read_value,
)
from .text import matches, normalized

#: the default share of a column's cells above which a kind that is not strict fails
DEFAULT_THRESHOLD = 0.001
#: names of kinds in configs of earlier versions
ALIASES = {"us_ssn": "us.ssn", "uk_nino": "gb.nino"}


@lru_cache(maxsize=1)
def kind_titles() -> dict[str, tuple[str, bool]]:
    """Every kind's name -> (title, strict), in report order."""
    out: dict[str, tuple[str, bool]] = {EMAIL.name: (EMAIL.title, False),
                                        "phone": ("phone numbers", False)}
    out.update((k.name, (k.title, k.strict)) for k in checked_kinds())
    out.update((k.name, (k.title, k.strict)) for k in PATTERN_KINDS if k is not EMAIL)
    out["name"] = ("person names", False)
    return out


def kind_name(name: str) -> str:
    """A kind's current name (an earlier version's accepted)."""
    return ALIASES.get(name, name)


@dataclass(frozen=True)
class Finding:
    """A kind found in a column: cells holding one, their share, what the decision read."""

    table: str
    column: str
    kind: str
    cells: int
    share: float
    candidates: int
    allowed: bool = False
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64),
                             repr=False, compare=False)
    #: how the kind was told from chance, and where (phone regions, name forms)
    detail: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: counted on a sample (a column of more candidates than the scan reads in full)
    estimated: bool = False

    @property
    def title(self) -> str:
        return kind_titles().get(self.kind, (self.kind, False))[0]

    @property
    def strict(self) -> bool:
        return kind_titles().get(self.kind, (self.kind, False))[1]

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "column": self.column, "kind": self.kind,
                "title": self.title, "cells": self.cells, "share": round(self.share, 6),
                "candidates": self.candidates, "allowed": self.allowed,
                "estimated": self.estimated, **({"detail": dict(self.detail)}
                                                if self.detail else {})}


def as_text(uniques: pd.Index) -> Any:
    """A column's distinct values as Arrow text: strings as they are, whole numbers (a card
    number in an integer column) as their digits; None for a column of other numbers."""
    import pyarrow as pa

    if pd.api.types.is_integer_dtype(uniques.dtype):
        return integer_digits(uniques)
    values = np.asarray(uniques, dtype=object)
    if pd.api.types.is_float_dtype(uniques.dtype):
        if not (len(values) and all(float(v).is_integer() for v in values)):
            return None
        return pa.array([str(int(v)) for v in values], type=pa.large_string())
    try:  # text already: Arrow takes the strings without a pass of Python
        return pa.array(values, type=pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([v if isinstance(v, str) else str(v) for v in values],
                        type=pa.large_string())


def _strings_of(arrow: Any) -> Callable[[np.ndarray], list[str]]:
    import pyarrow as pa

    def strings(where: np.ndarray) -> list[str]:
        if not where.size:
            return []
        return [str(v) for v in arrow.take(pa.array(where, type=pa.int64())).to_pylist()]
    return strings


def _pattern_kind(kind: PatternKind, arrow: Any, strings: Callable[[np.ndarray], list[str]]
                  ) -> tuple[list[int], int]:
    """(distinct values holding a valid one, values holding a candidate)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    valid: list[int] = []
    candidates = 0
    hit = matches(arrow, kind.re2, kind.literal)
    if kind.whole is not None and hit.any():  # whole valid values: no Python per value
        where = np.flatnonzero(hit)
        sub = arrow.take(pa.array(where, type=pa.int64()))
        at = pc.find_substring(sub, "@").to_numpy(zero_copy_only=False)
        sure = where[matches(sub, kind.whole) & (at >= 1) & (at <= 64)]
        valid = sure.tolist()
        candidates = len(valid)
        hit[sure] = False
    where = np.flatnonzero(hit)
    for i, text in zip(where.tolist(), strings(where)):
        if kind is IP and "." not in text and ":" not in text:
            continue
        found = False
        for candidate in kind.candidates(text):
            found = True
            if kind.validate(candidate.strip(" .-")):
                valid.append(i)
                break
        candidates += found
    return valid, candidates


def _phones(arrow: Any, strings: Callable[[np.ndarray], list[str]], regions: Sequence[str],
            column: str) -> tuple[np.ndarray, dict[str, Any], bool] | None:
    """(distinct values holding a phone number, detail, estimated) when phones are found."""
    candidates = np.flatnonzero(matches(arrow, r"[0-9](?:[ .()/-]{0,2}[0-9]){6}"))
    if not candidates.size:
        return None
    sampled = candidates.size > PHONE_SAMPLE
    read = candidates
    if sampled:
        spaced = candidates[np.linspace(0, candidates.size - 1, PHONE_SAMPLE).astype(np.int64)]
        written = np.flatnonzero(matches(arrow, WRITTEN_RE2))
        if written.size > PHONE_SAMPLE:  # a column of them: the spaced sample tells
            written = written[np.linspace(0, written.size - 1, PHONE_SAMPLE).astype(np.int64)]
        read = np.union1d(spaced, written)
    evidence = phone_evidence(strings(read), regions, sampled, column)
    found = found_regions(evidence)
    if not found:
        return None
    detail = {"regions": [k for k in found if k != INTERNATIONAL],
              "international": INTERNATIONAL in found,
              "evidence": {k: evidence[k].to_dict() for k in found}}
    if candidates.size > EXHAUSTIVE:
        return candidates, detail, True
    keep = [r for r in found if r != INTERNATIONAL]
    values = [int(i) for i, text in zip(candidates.tolist(), strings(candidates))
              if read_value(text, keep, None) & set(found)]
    return np.asarray(values, dtype=np.int64), detail, False


def scan_column(table: str, column: str, series: pd.Series,
                regions: Sequence[str] = DEFAULT_REGIONS) -> list[Finding]:
    """Every kind found in one column (see the module doc)."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return []
    codes, uniques = distinct(series)
    if not len(uniques):
        return []
    raw = as_text(uniques)
    if raw is None:
        return []
    arrow = normalized(raw)
    strings = _strings_of(arrow)
    counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
    present = max(int(counts.sum()), 1)
    found: list[Finding] = []

    def add(kind: str, values: np.ndarray, candidates: int, detail: Mapping[str, Any],
            estimated: bool = False, share: float = 1.0) -> None:
        if not values.size:
            return
        cells = int(counts[values].sum())
        if estimated:
            cells = int(round(cells * share))
        rows = np.flatnonzero(np.isin(codes, values))
        found.append(Finding(table, column, kind, cells, cells / present, candidates,
                             rows=rows, detail=detail, estimated=estimated))

    # a column of digits alone (an id, a code, a number) holds no e-mail address (an @), IP
    # address (a dot or colon), URL (a slash) nor name (letters): one pass instead of theirs
    digits = plain_digits(arrow)
    if not digits:
        valid, candidates = _pattern_kind(EMAIL, arrow, strings)
        add(EMAIL.name, np.asarray(valid, dtype=np.int64), candidates, {})
    phones = _phones(arrow, strings, regions, column)
    if phones is not None:
        values, detail, estimated = phones
        add("phone", values, int(values.size), detail, estimated)
    for hits in scan_checked(arrow, strings, column):
        add(hits.kind.name, hits.values, hits.evidence.candidates,
            {"evidence": hits.evidence.to_dict()}, hits.estimated, hits.valid_share)
    if digits:
        return found
    for kind in PATTERN_KINDS:
        if kind is not EMAIL:
            valid, candidates = _pattern_kind(kind, arrow, strings)
            add(kind.name, np.asarray(valid, dtype=np.int64), candidates, {})
    names = find_names(arrow, column)
    add("name", names.values, int(names.values.size),
        {"whole": names.whole, "in_text": names.in_text, "single": names.single,
         **({"column_of": names.single_kind} if names.single_kind else {})})
    return found


@dataclass(frozen=True)
class IdentifierScan:
    """The scan of a run's published tables: what was scanned and what was found."""

    scanned: Mapping[str, tuple[str, ...]]
    findings: tuple[Finding, ...]
    threshold: float = DEFAULT_THRESHOLD
    regions: tuple[str, ...] = DEFAULT_REGIONS

    def failing(self, finding: Finding) -> bool:
        """The finding fails the check: not allowed, and strict or over the threshold."""
        if finding.allowed or finding.cells == 0:
            return False
        return finding.strict or finding.share > self.threshold

    def rows(self, table: str = "released") -> np.ndarray:
        """The rows of ``table`` that hold a failing identifier."""
        parts = [f.rows for f in self.findings if f.table == table and self.failing(f)]
        return unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "regions": list(self.regions),
                "scanned": {t: list(c) for t, c in self.scanned.items()},
                "kinds": list(kind_titles()),
                "found": [{**f.to_dict(), "fails": self.failing(f)} for f in self.findings]}


def scan_tables(frames: Mapping[str, pd.DataFrame], skip: Sequence[str] = (),
                allow: Mapping[str, Sequence[str]] | None = None,
                threshold: float = DEFAULT_THRESHOLD,
                tables: Sequence[str] = ("released", "control"),
                regions: Sequence[str] = DEFAULT_REGIONS) -> IdentifierScan:
    """Scan every column of the published tables (not ``skip``: declared direct identifiers,
    refused as such)."""
    accepted = {c: {kind_name(k) for k in kinds} for c, kinds in (allow or {}).items()}
    findings: list[Finding] = []
    scanned: dict[str, tuple[str, ...]] = {}
    for table in tables:
        df = frames.get(table)
        if df is None:
            continue
        cols = [str(c) for c in df.columns if str(c) not in skip]
        scanned[table] = tuple(cols)
        for col in cols:
            for f in scan_column(table, col, df[col], regions):
                allowed = f.kind in accepted.get(col, set())
                findings.append(Finding(f.table, f.column, f.kind, f.cells, f.share,
                                        f.candidates, allowed, f.rows, f.detail, f.estimated))
    return IdentifierScan(scanned, tuple(findings), threshold, tuple(regions))


def identifier_names(names: Sequence[str]) -> list[tuple[int, str]]:
    """The column names that hold an identifier: (position from 1, the kind's title). A
    header is read as one more column of values (an e-mail address as a column's name is
    published with every copy of the file)."""
    if not names:
        return []
    series = pd.Series([str(n) for n in names], dtype=object)
    out: list[tuple[int, str]] = []
    for f in scan_column("header", "column names", series):
        out.extend((int(r) + 1, f.title) for r in f.rows)
    return sorted(set(out))


def describe(findings: Sequence[Finding]) -> str:
    """One column's failing kinds in words (each with the library's name), never a value."""
    parts = []
    for f in findings:
        where = ""
        regions = f.detail.get("regions") if f.kind == "phone" else None
        if regions:
            where = f" ({', '.join(regions)})"
        about = "about " if f.estimated else ""
        parts.append(f"{f.title}{where} [{f.kind}] in {about}{f.cells:,} cell(s) "
                     f"({f.share:.2%})")
    return "; ".join(parts)


