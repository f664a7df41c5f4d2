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

The alignment itself (tables in, tables out) is :mod:`riskcore.alignment`; this module holds
what a config declares, so that loading a config needs no table library.

Undeclared columns are detected when unambiguous: every released label of a column the
original holds as numbers parses as an interval, or every label is a suffix mask. What was
declared or detected, and the share of the original's values that can be compared with the
release's per column, are recorded in the results (``alignment``). The domain check uses that
share: an attack on a column below ``min_comparable`` is insufficient evidence, never a pass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ConfigError

__all__ = ["DEFAULT_MIN_COMPARABLE", "DEFAULT_SUPPRESSED", "NUMERIC_KINDS",
           "GeneralizationSpec", "Interval", "parse_interval", "parse_spec"]

DEFAULT_SUPPRESSED = ("*",)
DEFAULT_MIN_COMPARABLE = 0.5
#: declarations whose aligned values stay numbers (the others make the column labels)
NUMERIC_KINDS = frozenset({"round", "top_code"})

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
