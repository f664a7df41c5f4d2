"""Values as other tools write them: missing-value markers and number formats.

Real releases come from other tools. A survey extract writes ``N`` (not applicable), ``-9`` or
``.`` for missing; a generator writes categorical codes as ``1.0`` because pandas upcast a
column that had a missing value, while the original writes ``1``; a spreadsheet keeps
``01000`` as a code. Two rules make such tables comparable without hiding a difference:

* **Markers** (:func:`apply_markers`): the tokens the config declares as missing
  (``missing_values`` for every column, ``roles.missing_values`` per column) become missing in
  every table at load, before any type is decided, so every family and every check sees the
  same cells.
* **Number formats** (:func:`canonical_numbers`): a categorical column whose values are
  numbers in every table compares by numeric value (``1.0`` is ``1``, ``1.50`` is ``1.5``);
  a number written with a leading zero (``007``) is a code, so its column stays text and
  ``01000`` never equals ``1000`` (:data:`riskcore.data.CODE_PATTERN`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pandas as pd

from .data import (
    NUMBER_PATTERN,
    as_text,
    digit_codes,
    distinct,
    integer_digits,
    integer_labels,
    map_distinct,
    used_values,
    written_as_code,
)
from .errors import InputError
from .identifiers import identifier_names
from .roles import ColumnType

#: a number already in canonical form: an integer without sign, plus or leading zero, or a
#: decimal without trailing zeros
_CANONICAL = r"^(?:0|-?[1-9][0-9]*)(?:\.[0-9]*[1-9])?$|^-?0\.[0-9]*[1-9]$"


@dataclass(frozen=True)
class Markers:
    """The missing-value markers of a run: for every column, and per column."""

    every_column: tuple[str, ...] = ()
    per_column: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def of(self, column: str) -> tuple[str, ...]:
        """Every marker that applies to ``column``."""
        return self.every_column + tuple(self.per_column.get(column, ()))

    def __bool__(self) -> bool:
        return bool(self.every_column or self.per_column)

    def to_dict(self) -> dict[str, Any]:
        return {"every_column": list(self.every_column),
                "per_column": {c: list(v) for c, v in self.per_column.items()}}


def _marker_numbers(markers: Sequence[str]) -> np.ndarray:
    out = []
    for m in markers:
        try:
            out.append(float(m))
        except ValueError:
            continue
    return np.asarray([x for x in out if np.isfinite(x)], dtype=float)


def apply_markers(df: pd.DataFrame, markers: Markers, skip_text: bool = False
                  ) -> tuple[pd.DataFrame, dict[str, int]]:
    """The table with every declared marker missing, and the cells replaced per column.

    A text cell is a marker when it equals one (surrounding white space ignored); a typed
    number when it equals a marker that reads as a number (``-9``). Each distinct value is
    looked at once (a Categorical's categories, or one factorization).

    Args:
        skip_text: the markers for every column were already read as missing from text
            (a CSV's null values); only per-column markers and typed numbers remain.
    """
    if not markers:
        return df, {}
    out: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for col in df.columns:
        s = df[col]
        tokens = markers.of(str(col)) if not skip_text else tuple(
            markers.per_column.get(str(col), ()))
        numeric_markers = _marker_numbers(markers.of(str(col)))
        new = s
        if pd.api.types.is_bool_dtype(s.dtype):
            pass
        elif pd.api.types.is_numeric_dtype(s.dtype):
            if numeric_markers.size:
                values = s.to_numpy(dtype=float, na_value=np.nan)
                hit = np.isin(values, numeric_markers)
                if hit.any():
                    new = s.astype(float).where(~hit, np.nan)
        elif tokens or numeric_markers.size:
            codes, uniques = distinct(s)
            stripped = pd.Index(np.asarray(uniques, dtype=object)).map(
                lambda v: v.strip() if isinstance(v, str) else v)
            hit_text = stripped.isin(list(tokens)) if tokens else np.zeros(len(stripped), bool)
            if numeric_markers.size:  # "-9.0" is the marker -9 too
                as_numbers = pd.to_numeric(pd.Series(stripped, dtype=object),
                                           errors="coerce").to_numpy(dtype=float)
                hit_text = hit_text | np.isin(as_numbers, numeric_markers)
            marked = np.flatnonzero(hit_text)
            if marked.size:
                hit = np.isin(codes, marked)
                if isinstance(s.dtype, pd.CategoricalDtype):
                    new = s.cat.remove_categories(list(uniques.take(marked)))
                else:
                    new = s.where(~hit, None)
        replaced = int(s.notna().sum() - new.notna().sum()) if new is not s else 0
        if replaced:
            counts[str(col)] = replaced
        out[col] = new
    if not counts:
        return df, {}
    return pd.DataFrame(out, index=df.index, copy=False), counts


@dataclass(frozen=True)
class ColumnFormat:
    """How one column's values are compared across the tables, and why."""

    column: str
    type: str
    how: str

    def to_dict(self) -> dict[str, str]:
        return {"column": self.column, "type": self.type, "how": self.how}


def _canonical(value: Any) -> str | None:
    """A number's canonical text: ``1.0`` -> ``1``, ``+1.50`` -> ``1.5``, ``1e3`` -> ``1000``
    (exact: integers beyond 2**53 keep every digit)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    text = repr(float(value)) if isinstance(value, (float, np.floating)) else str(value).strip()
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    number = number.normalize()
    if number == 0:
        return "0"
    return format(number, "f")


def _canonical_all(values: pd.Series) -> pd.Series:
    """:func:`_canonical` of each distinct value, in bulk where the answer is known: whole
    numbers of a typed column written by Arrow in C++ (an integer's decimal digits are its
    canonical text), text already canonical kept as it is; the rest one by one."""
    kind = pd.api.types.infer_dtype(values, skipna=False)
    if kind == "integer":
        try:
            ints = np.asarray(values.to_numpy(), dtype=np.int64)
        except OverflowError:  # beyond int64: Python's integers, one by one
            ints = None
        if ints is not None:
            return pd.Series(integer_digits(ints).to_numpy(zero_copy_only=False),
                             index=values.index, dtype=object)
    if kind == "string":
        done = pd.Series(values, dtype="str").str.match(_CANONICAL).to_numpy(bool)
        out = values.astype(object).copy()
        rest = ~done
        if rest.any():
            out[rest] = values[rest].map(_canonical)
        return out
    return values.map(_canonical)


def _integer_dtype(s: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def _all_numbers(s: pd.Series) -> bool:
    """Every value of a column is a number (:data:`NUMBER_PATTERN`), each distinct value
    tested once: plain digits by Arrow's character test, the rest by the pattern in Arrow
    when the values are Arrow text (:func:`riskcore.data.as_text`)."""
    if pd.api.types.is_bool_dtype(s.dtype):
        return False
    if pd.api.types.is_numeric_dtype(s.dtype):
        return True
    values = used_values(s)
    if not len(values):
        return True
    text = as_text(values, s.dtype)
    if digit_codes(text) is not None:  # every value plain digits: numbers, codes or not
        return True
    return bool(text.str.match(NUMBER_PATTERN).all())


def _needs_canonical(s: pd.Series) -> bool:
    """Some value of a column is a number not written in canonical form (``1.0``, ``+1``)."""
    if pd.api.types.is_numeric_dtype(s.dtype):
        return True  # typed numbers become text: the other tables' labels are text
    text = as_text(used_values(s), s.dtype)
    return not bool(text.str.match(_CANONICAL).all())


def canonical_numbers(frames: Mapping[str, pd.DataFrame], columns: Sequence[str],
                      types: Mapping[str, ColumnType]
                      ) -> tuple[dict[str, pd.DataFrame], dict[str, ColumnFormat]]:
    """The tables with each categorical column of numbers written one way, and how each
    column compares.

    A column of ``columns`` whose type is categorical and whose values are numbers in every
    table (and none with a leading zero) compares by numeric value: each distinct value is
    rewritten as its canonical text (:func:`_canonical`). A column with a value written with
    a leading zero in any table is text (a code). Numeric columns compare as numbers already.
    """
    out = dict(frames)
    formats: dict[str, ColumnFormat] = {}
    for col in columns:
        present = {name: df[col] for name, df in frames.items() if col in df.columns}
        if not present:
            continue
        typ = types.get(col)
        if any(written_as_code(s) for s in present.values()):
            formats[col] = ColumnFormat(col, ColumnType.CATEGORICAL.value,
                                        "codes: values written as codes (a leading zero, a "
                                        "plus sign, 16 digits or more) are text ('01000' is "
                                        "not '1000', '+1000' not '1000')")
            continue
        if typ is not ColumnType.CATEGORICAL or not all(_all_numbers(s)
                                                        for s in present.values()):
            continue
        if not any(_needs_canonical(s) for s in present.values()):
            continue
        for name, s in present.items():
            if out[name] is frames[name]:
                out[name] = frames[name].copy(deep=False)
            out[name][col] = integer_labels(s) if _integer_dtype(s) and len(s) else \
                map_distinct(s, _canonical_all)
        formats[col] = ColumnFormat(col, ColumnType.CATEGORICAL.value,
                                    "numbers compared by value ('1.0' is '1')")
    return out, formats


#: what a column name may not hold: line breaks of any kind (YAML and editors read U+2028,
#: U+2029 and U+0085 as ones), other control characters and invisible format characters
_UNSAFE_NAME = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e"
                          "\u2060-\u2064\ufeff]")


def refuse_unsafe_names(names: Sequence[str], what: str, url: str) -> None:
    """InputError naming the column (by position, its name escaped) whose name holds a line
    break, a control or an invisible format character: such a name can end a line wherever it
    is written (a config's comment, a log, a report) and say something the file's author
    chose. A header's own byte-order mark is not part of its first name. A name that holds a
    direct identifier (riskcore.identifiers) is refused by its position alone: the name is
    never written anywhere."""
    for i, name in enumerate(map(str, names)):
        if _UNSAFE_NAME.search(name):
            shown = _UNSAFE_NAME.sub(lambda m: f"\\u{ord(m.group()):04x}", name)[:80]
            raise InputError(f"{what}: '{url}' column {i + 1} is named '{shown}', which holds "
                             "a line break, control or invisible character; rename the column "
                             "(names are written into configs, logs and reports)")
    for position, kind in identifier_names(list(map(str, names)))[:1]:
        raise InputError(f"{what}: '{url}' column {position}'s name holds {kind} (a direct "
                         "identifier, published with every copy of the file); rename the "
                         "column")
