"""Generalized releases: map the original's exact values into the release's domain.

A k-anonymized release shows ``50-59`` where the original holds ``57``; an attacker who knows
the exact value maps it into the release's categories before matching. riskgate does the same,
once, in the encoding step: the original's (control's, identification table's) values of every
declared column are replaced by the released label that covers them, so that the attacks and the
ALC compare what an attacker can compare. The equivalence-class families read only the release
and are not affected.

Declared per released column in the gate config (``generalization:``):

* ``interval``: released labels are intervals (``50-59``, ``[50,60)``, ``(50, 60]``, ``50+``,
  ``<18``, ``<=17``, ``85 and over``, ``under 18``); an original number maps to the narrowest
  label containing it (ties: the label that sorts first). ``a-b`` is closed on both sides.
* ``{width: w}``: bands of width w starting at multiples of w; the label is the released label
  whose interval starts there (or ``a-b`` with b = a + w - 1 for whole numbers).
* ``{round: r}``: numbers rounded to the nearest multiple of r (halves away from zero).
* ``{top_code: t}`` / ``{bottom_code: b}``: numbers above t (below b) become t (b).
* ``{mask: "*"}``: trailing characters replaced by the mask (``123**``); the original value maps
  to the released pattern with the fewest masked characters that it matches.
* ``{hierarchy: URL}``: an ARX hierarchy (``;``-separated; the original value first, then one
  column per level); the original value maps to the finest level whose label the release holds
  (rows may sit at different levels, as after local recoding).

A released cell equal to a suppression token (``suppressed``, default ``["*"]``) means "any
value": it matches every value in the attacks (Gower distance 0 for that column; a singling-out
predicate on it is always true), so suppression never *hides* risk; it lowers it only by what
the attacker cannot use.

Undeclared columns are detected when unambiguous: every released label of a column the
original holds as numbers parses as an interval, or every label is a suffix mask. What was
declared or detected, and the share of the original's values that can be compared with the
release's per column, are recorded in the results (``alignment``). The domain check uses that
share: an attack on a column below ``min_comparable`` is insufficient evidence, never a pass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ConfigError, InputError, where

__all__ = ["Alignment", "ColumnAlignment", "GeneralizationSpec", "align_tables",
           "parse_interval", "parse_spec"]

DEFAULT_SUPPRESSED = ("*",)
DEFAULT_MIN_COMPARABLE = 0.5
MAX_HIERARCHY_BYTES = 256 * 2**20

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"^\s*([\[(])\s*({_NUM})\s*[,;]\s*({_NUM})\s*([\])])\s*$"), "bracket"),
    (re.compile(rf"^\s*({_NUM})\s*(?:-|–|to)\s*({_NUM})\s*$"), "range"),
    (re.compile(rf"^\s*({_NUM})\s*(?:\+|or more|and over|and older|or older)\s*$"), "plus"),
    (re.compile(rf"^\s*(?:>=|≥|at least)\s*({_NUM})\s*$"), "plus"),
    (re.compile(rf"^\s*>\s*({_NUM})\s*$"), "above"),
    (re.compile(rf"^\s*(?:<|under|below|less than)\s*({_NUM})\s*$"), "below"),
    (re.compile(rf"^\s*(?:<=|≤|at most)\s*({_NUM})\s*$"), "upto"),
)


@dataclass(frozen=True)
class Interval:
    """A numeric interval with open or closed ends."""

    lo: float
    hi: float
    lo_closed: bool = True
    hi_closed: bool = True

    def contains(self, x: np.ndarray) -> np.ndarray:
        above = x >= self.lo if self.lo_closed else x > self.lo
        below = x <= self.hi if self.hi_closed else x < self.hi
        return np.asarray(above & below)

    @property
    def width(self) -> float:
        return self.hi - self.lo


def parse_interval(label: str) -> Interval | None:
    """The interval a released label stands for, or None when it is not interval syntax."""
    for pattern, kind in _PATTERNS:
        m = pattern.match(label)
        if not m:
            continue
        g = m.groups()
        if kind == "bracket":
            lo, hi = float(g[1]), float(g[2])
            return Interval(lo, hi, g[0] == "[", g[3] == "]") if lo <= hi else None
        if kind == "range":
            lo, hi = float(g[0]), float(g[1])
            return Interval(lo, hi) if lo <= hi else None
        x = float(g[0])
        if kind == "plus":
            return Interval(x, math.inf)
        if kind == "above":
            return Interval(x, math.inf, lo_closed=False)
        if kind == "below":
            return Interval(-math.inf, x, hi_closed=False)
        return Interval(-math.inf, x)
    return None


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IntervalSpec(_Spec):
    kind: Literal["interval"] = "interval"
    width: float | None = Field(None, gt=0)


class RoundSpec(_Spec):
    kind: Literal["round"] = "round"
    round: float = Field(gt=0)


class TopCodeSpec(_Spec):
    kind: Literal["top_code"] = "top_code"
    top_code: float | None = None
    bottom_code: float | None = None

    @model_validator(mode="after")
    def _one(self) -> TopCodeSpec:
        if self.top_code is None and self.bottom_code is None:
            raise ValueError("give top_code or bottom_code")
        for v in (self.top_code, self.bottom_code):
            if v is not None and not math.isfinite(v):
                raise ValueError("codes must be finite numbers")
        return self


class MaskSpec(_Spec):
    kind: Literal["mask"] = "mask"
    mask: str = Field(min_length=1, max_length=1)


class HierarchySpec(_Spec):
    kind: Literal["hierarchy"] = "hierarchy"
    hierarchy: str = Field(min_length=1)


GeneralizationSpec = IntervalSpec | RoundSpec | TopCodeSpec | MaskSpec | HierarchySpec


def parse_spec(raw: Any, column: str, source: str = "gate config") -> GeneralizationSpec:
    """One column's declaration (ConfigError naming the key and the allowed forms)."""
    where_ = f"{source}: generalization.{column}"
    forms = ("interval, {width: 5}, {round: 1000}, {top_code: 90}, {bottom_code: 18}, "
             "{mask: '*'} or {hierarchy: URL}")
    if raw == "interval" or raw is None:
        return IntervalSpec()
    if not isinstance(raw, Mapping) or len(raw) == 0:
        raise ConfigError(f"{where_}: cannot read {raw!r}; write one of {forms}")
    keys = set(map(str, raw))
    model: type[_Spec]
    if keys <= {"width"}:
        model = IntervalSpec
    elif keys == {"round"}:
        model = RoundSpec
    elif keys <= {"top_code", "bottom_code"}:
        model = TopCodeSpec
    elif keys == {"mask"}:
        model = MaskSpec
    elif keys == {"hierarchy"}:
        model = HierarchySpec
    else:
        raise ConfigError(f"{where_}: unknown key(s) {sorted(keys)}; write one of {forms}")
    try:
        return model.model_validate(dict(raw))  # type: ignore[return-value]
    except ValidationError as exc:  # pydantic's first message, without its links
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        detail = f"{loc}: {err['msg']}" if loc else str(err["msg"])
        raise ConfigError(f"{where_}: {detail}; write one of {forms}") from None


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


def _text(s: pd.Series) -> pd.Series:
    """The column as text (missing stays missing; whole floats lose their '.0')."""
    def one(v: Any) -> str | None:
        if isinstance(v, str):
            return v
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return None
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)

    return s.astype(object).map(one)


def _numbers(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce")


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _map_intervals(values: pd.Series, labels: Sequence[str], table: str, col: str
                   ) -> pd.Series:
    """Each number -> the narrowest released interval label containing it (None if none)."""
    parsed = [(lab, iv) for lab in sorted(labels) if (iv := parse_interval(lab)) is not None]
    x = _numbers(values)
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
    return x.map(lambda v: out.get(float(v)) if pd.notna(v) else None)


def _map_width(values: pd.Series, labels: Sequence[str], width: float) -> pd.Series:
    starts: dict[float, str] = {}
    for lab in sorted(labels):
        iv = parse_interval(lab)
        if iv is not None and math.isfinite(iv.lo):
            starts.setdefault(iv.lo, lab)
    x = _numbers(values)
    lo = np.floor(x / width) * width

    def label(v: float) -> str | None:
        if pd.isna(v):
            return None
        if v in starts:
            return starts[v]
        hi = v + width - 1 if float(width).is_integer() else v + width
        return f"{_fmt(v)}-{_fmt(hi)}"

    return lo.map(label)


def _map_mask(values: pd.Series, labels: Sequence[str], mask: str) -> pd.Series:
    known = set(labels)
    text = _text(values)
    uniq = [v for v in pd.unique(text) if isinstance(v, str)]
    out: dict[str, str] = {}
    for v in uniq:
        for k in range(len(v) + 1):
            cand = v[:len(v) - k] + mask * k
            if cand in known:
                out[v] = cand
                break
    return text.map(lambda v: out.get(v) if v is not None else None)


def read_hierarchy(url: str, storage_options: Mapping[str, Any] | None, col: str
                   ) -> dict[str, list[str]]:
    """An ARX hierarchy: original value -> its labels, finest level first."""
    import io

    from .storage import read_bytes

    raw = read_bytes(url, storage_options, max_bytes=MAX_HIERARCHY_BYTES,
                     what=f"hierarchy of column '{col}'",
                     too_large="an ARX hierarchy file should be far smaller").data
    frame = pd.read_csv(io.BytesIO(raw), sep=";", header=None, dtype=str, keep_default_na=False,
                        engine="python")
    if frame.shape[1] < 2:
        raise InputError(f"hierarchy of column '{col}' ('{url}') has fewer than two columns; "
                         "an ARX hierarchy is ';'-separated: the original value, then one "
                         "column per level")
    return {str(r[0]).strip(): [str(v).strip() for v in r[1:]]
            for r in frame.itertuples(index=False, name=None)}


def _map_hierarchy(values: pd.Series, labels: Sequence[str], levels: dict[str, list[str]],
                   table: str, col: str, url: str) -> pd.Series:
    known = set(labels)
    text = _text(values).map(lambda v: v.strip() if v is not None else None)
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
    return text.map(lambda v: out.get(v) if v is not None else None)


def _detect(original: pd.Series, labels: Sequence[str], mask_chars: str = "*"
            ) -> str | None:
    """'interval' or 'mask' when the released labels unambiguously say so, else None."""
    if not labels or original.dropna().empty:
        return None
    numeric = _numbers(original).notna().mean() >= 0.99
    if numeric and all(parse_interval(lab) is not None for lab in labels):
        return "interval"
    masked = [lab for lab in labels if lab.endswith(mask_chars)]
    if masked and len(masked) == len(labels) or (
            masked and all(re.fullmatch(r"[^*]*\**", lab) for lab in labels)
            and len(masked) >= 0.5 * len(labels)):
        return "mask"
    return None


def _released_labels(released: pd.Series, tokens: Sequence[str]) -> list[str]:
    text = _text(released)
    return [v for v in pd.unique(text) if isinstance(v, str) and v not in tokens]


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
    labels = _released_labels(released, tokens)
    rel_text = _text(released)
    suppressed = float(rel_text.isin(list(tokens)).mean()) if len(rel_text) else 0.0
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
            aligned[table] = _map_intervals(s, labels, table, col)
        elif isinstance(spec, IntervalSpec):
            aligned[table] = _map_width(s, labels, float(spec.width or 1))
        elif isinstance(spec, RoundSpec):
            x = _numbers(s)
            aligned[table] = np.sign(x) * np.floor(np.abs(x) / spec.round + 0.5) * spec.round
        elif isinstance(spec, TopCodeSpec):
            x = _numbers(s)
            if spec.top_code is not None:
                x = x.where(~(x > spec.top_code), spec.top_code)
            if spec.bottom_code is not None:
                x = x.where(~(x < spec.bottom_code), spec.bottom_code)
            aligned[table] = x
        elif isinstance(spec, MaskSpec):
            aligned[table] = _map_mask(s, labels, spec.mask)
        elif isinstance(spec, HierarchySpec):
            assert levels is not None
            aligned[table] = _map_hierarchy(s, labels, levels, table, col, spec.hierarchy)
        else:
            aligned[table] = s
    share = 1.0
    ori = aligned.get("original")
    if ori is not None and labels:  # a wholly suppressed column matches anything
        present = others["original"].notna()
        if kind in ("round", "top_code") or (spec is None and numeric):
            share = 1.0
        else:
            ok = _text(ori).isin(labels) & present
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
                out[name] = frames[name].copy()
            out[name][col] = s.astype(object).where(s.notna(), None) \
                if spec is None or spec.kind not in ("round", "top_code") else s
    return out, Alignment(record, min_comparable=min_comparable, suppressed_tokens=tuple(tokens))
