"""How a column should be read: a code (a category) or a quantity (a number), with the evidence.

An attacker reads a zip code as a code: two people in 02134 and 02135 are no closer than two in
02134 and 98101. A column of integer codes read as numbers makes every distance attack weaker
than the simplest attacker (a nearest-neighbour attack with zip as a code found 16.8 % of
members at 1 % false positives where the same attack with zip as a number found 4.5 %: see
docs/measures.md, membership). So the reading decides, in this order:

1. a type the config declares (always wins);
2. text: a category; a number written as a code (a leading zero, a plus sign, 16 digits or
   more: :data:`riskcore.data.CODE_PATTERN`): a category;
3. the name: a word of :data:`CODE_WORDS` (zip, puma, region, occupation, industry...) makes a
   category, a word of :data:`QUANTITY_WORDS` (age, income, hours...) a quantity;
4. the values of a column of whole numbers: a handful of values (at most
   :data:`FEW_VALUES`) or values repeated with gaps between them (fewer than :data:`DENSE` of
   the integers between the smallest and the largest occur: codes, or a rounded quantity)
   could be either: the reading is **split**, and the distance attacks run under both
   readings and report the worse; a dense range, or values mostly distinct, a quantity;
5. numbers with fractions: a quantity.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..data import (
    NUMBER_PATTERN,
    arrow_numbers,
    as_text,
    digit_codes,
    number_series,
    used_values,
    written_as_code,
)
from ..roles import ColumnType

#: words of a column's name that make its whole numbers codes
CODE_WORDS = frozenset({
    "zip", "zipcode", "postcode", "postal", "plz", "code", "codes", "id", "puma", "region",
    "state", "st", "county", "district", "area", "fips", "naics", "soc", "isco", "nace",
    "occupation", "occ", "occp", "socp", "industry", "ind", "indp", "naicsp", "country",
    "cit", "nativity", "pob", "pobp", "division", "div", "msa", "cbsa", "tract", "block",
    "geo", "geography", "ward", "municipality", "province", "canton", "lga", "icd", "diag",
    "diagnosis", "procedure", "cpt", "category", "class", "type", "group", "race", "rac1p",
    "hisp", "ethnicity", "mar", "marital", "schl", "religion", "language", "lanp", "relp",
    "relationship", "sex", "gender", "cow", "esr", "status"})
#: words of a column's name that make it a quantity
QUANTITY_WORDS = frozenset({
    "age", "agep", "income", "salary", "wage", "wages", "earnings", "pincp", "wagp", "pernp",
    "hincp", "hours", "hrs", "wkhp", "count", "amount", "price", "cost", "weight", "wgt",
    "height", "size", "days", "weeks", "years", "months", "duration", "balance", "score",
    "rate", "pct", "percent", "number", "num", "total", "sum", "length", "distance", "bmi",
    "dose", "visits", "children", "persons", "np", "rooms", "value", "tax", "debt", "limit"})
#: a handful of whole numbers: a code or a count, the evidence is split
FEW_VALUES = 20
#: whole numbers that fill at least this share of their range read as a quantity
DENSE = 0.3

_WORDS = re.compile(r"[a-z]+")


def name_words(name: str) -> set[str]:
    """A column name's words: ``householdId``, ``household_id`` and ``HOUSEHOLD ID`` give
    {household, id}."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", str(name))
    return set(_WORDS.findall(spaced.lower()))


def named(name: str, vocabulary: frozenset[str] | Sequence[str]) -> bool:
    """The name has a word of ``vocabulary``, or is one when its separators are dropped."""
    joined = re.sub(r"[^a-z]", "", str(name).lower())
    return bool(name_words(name) & set(vocabulary)) or joined in vocabulary


@dataclass(frozen=True)
class ColumnReading:
    """How a column is read: ``categorical`` or ``numeric``; ``split`` when the evidence
    supports both (the distance attacks then take the worse of the two readings)."""

    name: str
    type: str
    split: bool
    evidence: tuple[str, ...]
    #: every value is a number (so the column could also be read as one: an attacker who
    #: reads a zip code as a number is measured too, never laxer than either reading)
    numbers: bool = False

    @property
    def other(self) -> str:
        """The other reading (what a split column is also measured as)."""
        return "numeric" if self.type == "categorical" else "categorical"

    @property
    def both_ways(self) -> bool:
        """The distance attacks measure it both ways: its evidence is split, or it is a code
        whose values are all numbers."""
        return self.split or (self.type == "categorical" and self.numbers)

    def to_dict(self) -> dict[str, object]:
        return {"type": self.type, "split": self.split, "evidence": list(self.evidence)}


def read_column(name: str, columns: Sequence[pd.Series],
                declared: ColumnType | None = None,
                markers: Sequence[str] | None = None) -> ColumnReading:
    """The reading of column ``name`` from its cells in every table (see the module doc),
    the cells that mean missing (``N``, ``-9``: :func:`marker_candidates`, or ``markers``
    when the caller found them already) left out."""
    if declared is not None:
        typ = "numeric" if declared.is_numeric else "categorical"
        return ColumnReading(name, typ, False, (f"declared {declared.value} in the config",))
    if markers is None:
        markers = found_markers(columns)
    present = [without(s, markers) for s in columns]
    present = [s for s in present if s.notna().any()]
    if not present:
        return ColumnReading(name, "categorical", False, ("every value is missing",))
    if not all(_all_numbers(s) for s in present):
        return ColumnReading(name, "categorical", False, ("text values",))
    if any(written_as_code(s) for s in present):
        return ColumnReading(name, "categorical", False, (
            "numbers written as codes (a leading zero, a plus sign or 16 digits and more)",),
            numbers=True)
    values = np.concatenate([_numbers(used_values(s)) for s in present])
    values = values[np.isfinite(values)]
    whole = bool(values.size) and bool(np.all(values == np.round(values)))
    distinct = pd.unique(values + 0.0)  # its size and range alone (+ 0.0: -0 is 0); hashed
    if named(name, QUANTITY_WORDS) and not named(name, ("id", "code", "zip", "puma")):
        return ColumnReading(name, "numeric", False, ("named like a quantity",))
    if whole and named(name, CODE_WORDS):
        return ColumnReading(name, "categorical", False, (
            f"whole numbers, named like a code ({distinct.size:,} distinct values)",),
            numbers=True)
    if not whole:
        return ColumnReading(name, "numeric", False, ("numbers with fractions",))
    span = float(distinct.max() - distinct.min() + 1) if distinct.size else 1.0
    density = distinct.size / span
    if distinct.size <= FEW_VALUES:
        return ColumnReading(name, "categorical", True, (
            f"{distinct.size} whole numbers: a code or a small count; measured both ways",),
            numbers=True)
    rows = sum(int(s.notna().sum()) for s in present)
    if density < DENSE and distinct.size < 0.5 * rows:
        # repeated values with gaps between them: codes (a zip, an industry), or a quantity
        # rounded or heavy-tailed (incomes): measured both ways
        return ColumnReading(name, "numeric", True, (
            f"{distinct.size:,} whole numbers spread over {span:,.0f} (only {density:.0%} of "
            "the range occurs): codes with gaps, or a rounded quantity; measured both ways",),
            numbers=True)
    return ColumnReading(name, "numeric", False, (
        f"{distinct.size:,} whole numbers, {density:.0%} of their range, "
        f"{distinct.size / max(rows, 1):.0%} of the rows distinct: a quantity",))


def _numbers(values: pd.Index) -> np.ndarray:
    """Distinct values as floats: Arrow's parse of text already distinct (no hash pass to
    find what is distinct again), else :func:`number_series`."""
    fast = arrow_numbers(values)
    if fast is not None:
        return fast
    return number_series(pd.Series(values)).to_numpy(dtype=float)


def without(series: pd.Series, markers: Sequence[str]) -> pd.Series:
    """The column with the cells that are ``markers`` (surrounding space ignored) missing."""
    if not markers:
        return series
    if isinstance(series.dtype, pd.CategoricalDtype):
        cats = series.cat.categories
        drop = [c for c in cats if str(c).strip() in markers]
        return series.cat.remove_categories(drop) if drop else series
    if pd.api.types.is_numeric_dtype(series.dtype):
        return series
    return series.where(~series.astype(str).str.strip().isin(list(markers)))


def _all_numbers(series: pd.Series) -> bool:
    """Every value parses as a number (codes written with zeros or signs included)."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return True
    values = used_values(series)
    if not len(values):
        return False
    text = as_text(values, series.dtype)
    return digit_codes(text) is not None or bool(text.str.match(NUMBER_PATTERN).all())


def read_columns(frames: Mapping[str, pd.DataFrame], names: Sequence[str],
                 declared: Mapping[str, ColumnType] | None = None,
                 markers: Mapping[str, Sequence[str]] | None = None
                 ) -> dict[str, ColumnReading]:
    """The reading of every column of ``names`` over the tables that hold it (``markers``:
    each column's missing-value markers, when the caller found them already)."""
    declared = declared or {}
    markers = markers or {}
    return {c: read_column(c, [df[c] for df in frames.values() if c in df.columns],
                           declared.get(c), markers.get(c)) for c in names}


def found_markers(columns: Sequence[pd.Series]) -> tuple[str, ...]:
    """The missing-value markers of one column over its tables
    (:func:`marker_candidates` of each), sorted."""
    return tuple(sorted({m for s in columns for m in marker_candidates(s)}))


#: tokens that survey and statistical tools write for "missing" (checked per column)
MARKER_CANDIDATES = ("N", "NA", "N/A", "?", ".", "-", "--", "*", "missing", "unknown",
                     "-9", "-99", "-999", "-8", "-7")
#: the negative codes among them, as integers
NEGATIVE_CODES = np.array([int(m) for m in MARKER_CANDIDATES if m.lstrip("-").isdigit()])


def marker_candidates(series: pd.Series) -> tuple[str, ...]:
    """Tokens among a column's values that mean missing: every other value is a number (a
    numeric column with ``N`` or ``?`` in it), or a negative code in a column of non-negative
    numbers (``-9`` beside ages). Each distinct value is looked at once, as column arrays."""
    if pd.api.types.is_float_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return ()  # a float is written -9.0, never a marker token
    used = used_values(series)
    if len(used) == 0:
        return ()
    if pd.api.types.is_integer_dtype(series.dtype):
        numbers = np.asarray(used, dtype=np.int64)
        marked = np.isin(numbers, NEGATIVE_CODES)
        rest = numbers[~marked]
        if not marked.any() or not rest.size or int(rest.min()) < 0:
            return ()
        return tuple(sorted(str(v) for v in np.unique(numbers[marked])))
    # text as Arrow strings where every value is one (stripped and matched in C++)
    values = as_text(used, series.dtype)
    if digit_codes(values) is not None:  # plain digits, every one: no token, no minus
        return ()
    values = values.str.strip()
    is_number = values.str.match(NUMBER_PATTERN).to_numpy(dtype=bool, na_value=False)
    in_set = values.isin(list(MARKER_CANDIDATES)).to_numpy(dtype=bool)
    if (~is_number & ~in_set).any() or not is_number.any():
        return ()
    text_markers = sorted(set(values[~is_number & in_set]))
    # a number below zero is written with a minus: only those are parsed
    minus = is_number & values.str.startswith("-").to_numpy(dtype=bool, na_value=False)
    below = np.zeros(values.size, dtype=bool)
    below[minus] = pd.to_numeric(values[minus], errors="coerce").to_numpy(
        dtype=float, na_value=np.nan) < 0
    marked = below & in_set
    negative = sorted(set(values[marked]))
    others = is_number & ~marked
    negative_markers = negative if others.any() and not (below & others).any() else []
    return tuple(text_markers) + tuple(negative_markers)


