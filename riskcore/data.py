"""Data roles, column types and the single encoding pass every measure reads (docs/measures.md 1).

A table is encoded once: each column becomes integer codes (``-1`` = missing), numeric columns
also keep their float values, and a missing mask. Several tables (original, released, control,
identification) are encoded *jointly*, so that equal values get equal codes across tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .arrays import unique_inverse
from .errors import InputError, where
from .roles import ColumnType, MissingPolicy, Roles

__all__ = ["ColumnType", "EncodedColumn", "EncodedTable", "MissingPolicy", "NUMBER_PATTERN",
           "Roles", "check_columns", "digit_codes", "distinct", "encode_table", "encode_tables",
           "infer_type", "infinite_rows", "looks_numeric", "map_distinct", "number_series",
           "numeric_values", "plain_digits", "unique_categories", "written_as_code"]


#: the one number syntax riskgate accepts in text cells (the loader, the encoder and the
#: cleanliness checks all use it); ASCII classes only, so that Arrow's RE2 and Python's ``re``
#: agree on it and pandas runs it in Arrow (digit and space escapes fall back to Python)
_SPACE = "[ \\t\\n\\r\\f\\v]*"
NUMBER_PATTERN = (f"^{_SPACE}[-+]?(?:[0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
                  f"{_SPACE}$")
_NUMBER = re.compile(NUMBER_PATTERN)
#: a number written as a code, not a quantity, makes its column text: with a leading zero
#: ("007", "01000", "-05": "01000" never equals "1000"; "0", "0.5" and "0e3" are numbers),
#: with an explicit plus sign ("+1000" is not "1000": phone and account codes), or a whole
#: number of 16 digits or more (cards, identifiers; beyond 2**53 a float would merge
#: neighbours and raise k)
CODE_PATTERN = f"^{_SPACE}(?:[-+]?0[0-9]|[+]|-?[0-9]{{16,}}{_SPACE}$)"
_CODE = re.compile(CODE_PATTERN)


#: within :func:`factorized_once`: each column's :func:`distinct` and used codes, by the
#: memory its values occupy (the arrays held, so that memory is not reused while it lives)
_ONCE: ContextVar[dict[tuple[Any, ...], list[Any]] | None] = ContextVar("factorized_once",
                                                                        default=None)


@contextmanager
def factorized_once() -> Iterator[None]:
    """Within it, a column that is not a Categorical is factorized once, however many readers
    ask (the release's diff reads a typed column's distinct values for its markers, its
    reading and its domain: at 1M rows a household number's hash pass took 25 ms each time).
    No column may change in place inside it: the diff only reads them, and the gate's
    preparation, checks and encoding (which it spans too) make a new column for any they
    change. Nested: the outer one's."""
    if _ONCE.get() is not None:
        yield
        return
    token = _ONCE.set({})
    try:
        yield
    finally:
        _ONCE.reset(token)


def _once_entry(series: pd.Series) -> list[Any] | None:
    """The memo's entry of a column (created empty), or None outside :func:`factorized_once`:
    keyed by its values' array (an Arrow or masked array is held by the frame, the same object
    each time the column is taken; numpy values are a new view each time, keyed by their
    memory)."""
    memo = _ONCE.get()
    if memo is None:
        return None
    values = series.array
    if isinstance(values, pd.arrays.NumpyExtensionArray):
        arr = np.asarray(values)
        key: tuple[Any, ...] = ("numpy", arr.__array_interface__["data"][0], arr.strides,
                                arr.shape, arr.dtype.str)
        held: Any = arr
    else:
        key, held = ("array", id(values)), values
    entry = memo.get(key)
    if entry is None:
        entry = memo[key] = [held, None, None]
    return entry


def distinct(series: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """A column as codes (signed integers, ``-1`` = missing) into its distinct values.

    Per-value work (parsing numbers, regular expressions, mapping labels) then runs once per
    distinct value instead of once per row: a Categorical (what the loader makes of text) gives
    them for free, in its own narrow integer type (no copy), anything else is factorized once
    (a hash pass in C; once in all within :func:`factorized_once`).
    """
    if isinstance(series.dtype, pd.CategoricalDtype):
        return np.asarray(series.array.codes), series.cat.categories
    entry = _once_entry(series)
    if entry is not None and entry[1] is not None:
        return entry[1]  # type: ignore[no-any-return]
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    out = np.asarray(codes, dtype=np.int64), pd.Index(uniques)
    if entry is not None:
        entry[1] = out
    return out


def _take(values: np.ndarray, codes: np.ndarray, missing: object) -> np.ndarray:
    """values[codes], with ``missing`` where the code is -1."""
    return np.append(values, np.asarray([missing], dtype=values.dtype))[codes]


def unique_categories(categories: pd.Index) -> pd.CategoricalDtype:
    """The dtype of categories known to be distinct (an Arrow dictionary, a factorize's
    uniques, the digits of distinct integers), without pandas hashing them all again to check
    (0.2 s for two tables of 1M rows with an identifier-like column); pandas' own check where
    its fast path is missing."""
    fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)
    if fast is not None:
        try:
            return fast(categories, ordered=False)  # type: ignore[no-any-return]
        except TypeError:
            pass
    return pd.CategoricalDtype(categories)


def map_distinct(series: pd.Series, fn: Callable[[pd.Series], pd.Series],
                 numeric: bool = False) -> pd.Series:
    """``fn`` applied to each distinct non-missing value once, spread back to every row.

    Args:
        series: the column.
        fn: maps a Series of distinct values (Python objects) to a Series of the same length.
        numeric: the result is a float column (NaN where missing); else a Categorical
            (missing where ``fn`` gives a missing value or the row was missing).
    """
    codes, uniques = distinct(series)
    mapped = fn(pd.Series(np.asarray(uniques, dtype=object), dtype=object))
    if numeric:
        values = pd.to_numeric(mapped, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        return pd.Series(_take(values, codes, np.nan), index=series.index, dtype=float)
    new_codes, new_uniques = pd.factorize(mapped.astype(object), use_na_sentinel=True)
    full = _take(np.asarray(new_codes, dtype=np.int64), codes, -1)
    # text categories Arrow-backed, as the loaders make them: what reads them later (regular
    # expressions, parsing) then runs in Arrow, not over Python strings
    kind = "str" if pd.api.types.infer_dtype(new_uniques, skipna=False) == "string" else object
    return pd.Series(pd.Categorical.from_codes(
        full, dtype=unique_categories(pd.Index(new_uniques, dtype=kind)), validate=False),
        index=series.index)


def integer_labels(s: pd.Series) -> pd.Series:
    """A typed integer column as text labels, each value's decimal digits: a Categorical
    whose categories come in the values' first appearance, as :func:`map_distinct` of ``str``
    gives them; in bulk (Arrow writes the digits): distinct integers have distinct digits,
    so the distinct values need no second hash pass."""
    codes, uniques = distinct(s)
    categories = pd.Index(pd.array(integer_digits(uniques), dtype="str"))
    return pd.Series(pd.Categorical.from_codes(
        np.asarray(codes), dtype=unique_categories(categories), validate=False), index=s.index)


def integer_digits(values: Any) -> Any:
    """Integers (a numpy or pandas array without missing values) as Arrow text, each its
    decimal digits (its canonical text), written by Arrow in C++ with no Python string per
    value: the reverse of :func:`arrow_numbers`."""
    import pyarrow as pa

    return pa.array(np.asarray(values)).cast(pa.large_string())


def arrow_numbers(uniques: pd.Index) -> np.ndarray | None:
    """Distinct text values (Arrow-backed, as the loaders make them) parsed as float numbers
    by Arrow, surrounding whitespace ignored, in C++ with no Python string per value; None
    when a value is not a plain finite number (Arrow reads "inf" and "nan": the caller's
    pandas path then reads it as pandas does, or names it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(uniques.array, pd.arrays.ArrowStringArray):
        return None
    try:
        parsed = pc.cast(pc.utf8_trim_whitespace(pa.array(uniques.array)), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if parsed.null_count:
        return None
    values: np.ndarray = parsed.to_numpy(zero_copy_only=False)
    return values if bool(np.isfinite(values).all()) else None


def number_series(series: pd.Series) -> pd.Series:
    """A column as float numbers, NaN where missing or not a number (text is parsed once per
    distinct value)."""
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(
            series.dtype):
        return pd.Series(series.to_numpy(dtype=float, na_value=np.nan), index=series.index)
    codes, uniques = distinct(series)
    if not pd.api.types.is_bool_dtype(series.dtype) and len(uniques):
        # distinct text parsed by Arrow in C++ (as the encoder does), when every value is a
        # plain finite number; anything else (missing words, infinities) by pandas below
        text = uniques if isinstance(uniques.array, pd.arrays.ArrowStringArray) else (
            pd.Index(text_series(np.asarray(uniques, dtype=object), all_text=True))
            if pd.api.types.infer_dtype(uniques, skipna=False) == "string" else None)
        fast = arrow_numbers(text) if text is not None else None
        if fast is not None:
            return pd.Series(_take(fast, codes, np.nan), index=series.index, dtype=float)
    return map_distinct(series, lambda u: u, numeric=True)


#: text that ``pd.to_numeric`` can read as an infinite number has an exponent or spells
#: "inf(inity)", or has more digits than a double's range (1.8e308)
_MAY_BE_INFINITE = "[eEiI]"
_MAX_FINITE_DIGITS = 300


def infinite_rows(series: pd.Series) -> np.ndarray:
    """The rows whose number is infinite: ``inf`` in a typed column, or text such as ``1e400``
    that reads as one (the same reading as :func:`number_series`).

    Of a text column only the distinct values that can read as infinite (an exponent, "inf",
    or more than 300 characters) are parsed: an identifier column of a million distinct
    numbers costs a regular expression in Arrow, not a million parses.
    """
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(
            series.dtype):
        return np.flatnonzero(np.isinf(series.to_numpy(dtype=float, na_value=np.nan)))
    if pd.api.types.is_bool_dtype(series.dtype):
        return np.empty(0, dtype=np.int64)
    codes, uniques = distinct(series)
    if len(uniques) == 0:
        return np.empty(0, dtype=np.int64)
    text = as_text(uniques, series.dtype)
    maybe = (text.str.contains(_MAY_BE_INFINITE, regex=True).fillna(False)
             | (text.str.len() > _MAX_FINITE_DIGITS).fillna(False)).to_numpy(dtype=bool)
    candidates = np.flatnonzero(maybe)
    if candidates.size == 0:
        return np.empty(0, dtype=np.int64)
    parsed = number_series(pd.Series(np.asarray(uniques, dtype=object)[candidates],
                                     dtype=object)).to_numpy()
    infinite = candidates[np.isinf(parsed)]
    if infinite.size == 0:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(np.isin(codes, infinite))


def first_seen(series: pd.Series) -> tuple[np.ndarray, pd.Index, np.ndarray]:
    """A column's :func:`distinct` codes and values, and the indices of the values that occur
    in order of first appearance (what ``pd.factorize`` orders them by)."""
    codes, uniques = distinct(series)
    n = len(codes)
    first = np.full(len(uniques) + 1, n, dtype=np.int64)  # the last slot collects missing
    np.minimum.at(first, codes, np.arange(n, dtype=np.int64))
    first = first[:-1]
    seen = np.flatnonzero(first < n)
    return codes, uniques, seen[np.argsort(first[seen], kind="stable")]


def joint_text_codes(parts: Sequence[pd.Series]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Text columns of several tables coded in one space: the distinct values in order of
    first appearance over the tables in turn (``pd.factorize`` of their concatenation), and
    each table's codes (int32, -1 missing). Computed from each column's distinct values: the
    first table's order is its own (no hashing of its values), a later table's values are
    looked up among those seen before it."""
    categories = np.empty(0, dtype=object)
    out = []
    for series in parts:
        codes, uniques, order = first_seen(series)
        values = np.asarray(uniques, dtype=object)
        if categories.size:
            joint = pd.Index(categories, dtype=object).get_indexer(
                pd.Index(values, dtype=object)).astype(np.int32)
        else:
            joint = np.full(values.size, -1, dtype=np.int32)
        new = order[joint[order] < 0]
        joint[new] = categories.size + np.arange(new.size, dtype=np.int32)
        categories = np.concatenate([categories, values[new]])
        # each distinct value's joint code, and -1 (the last slot) for missing
        out.append(np.append(joint, np.int32(-1))[codes])
    return categories, out


def used_values(series: pd.Series) -> pd.Index:
    """The distinct non-missing values that occur in a column, in the column's own type (a
    Categorical's unused categories left out)."""
    entry = _once_entry(series)
    if entry is not None and entry[2] is not None:
        return entry[2]  # type: ignore[no-any-return]
    codes, uniques = distinct(series)
    used = uniques.take(used_codes(codes, len(uniques)))
    if entry is not None:
        entry[2] = used
    return used


def used_codes(codes: np.ndarray, size: int) -> np.ndarray:
    """The codes in [0, ``size``) that occur in ``codes`` (-1: missing), in order."""
    shifted = codes.astype(np.intp)  # missing (-1) counted in slot 0: no masked copy
    shifted += 1
    return np.flatnonzero(np.bincount(shifted, minlength=size + 1)[1:])


def plain_digits(values: Any) -> bool:
    """Every one of these Arrow strings (some, none missing) is plain ASCII digits, by
    Arrow's character test (3 ms for 432,000 values; a regular expression takes 50)."""
    import pyarrow.compute as pc

    return bool(len(values)) and not values.null_count and bool(
        pc.all(pc.ascii_is_decimal(values)).as_py())


def digit_codes(text: pd.Series) -> np.ndarray | None:
    """Of text values (Arrow-backed) that are every one plain ASCII digits, an identifier's
    or a code's, the commonest column of many distinct values: which are written as codes
    (:data:`CODE_PATTERN` on digits: a leading zero before another digit, or 16 digits or
    more), from Arrow's character tests, an order of magnitude under a regular expression
    (3 ms for 432,000 values against 50); each of them matches :data:`NUMBER_PATTERN`. None
    when a value is anything else (empty, a space, a sign, a point): the caller then matches
    the patterns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(text.array, pd.arrays.ArrowStringArray):
        return None
    values = pa.array(text.array)
    if not plain_digits(values):
        return None
    length = pc.binary_length(values)  # ASCII digits: one byte each
    code = pc.or_(pc.greater_equal(length, 16),
                  pc.and_(pc.starts_with(values, "0"), pc.greater(length, 1)))
    return np.asarray(code.to_numpy(zero_copy_only=False), dtype=bool)


def looks_numeric(series: pd.Series) -> bool:
    """True when every non-missing cell of a column is a number (numeric dtype, or text that
    matches :data:`NUMBER_PATTERN` with no value written as a code, :data:`CODE_PATTERN`:
    ``007``, ``+1000`` and 16-digit numbers are codes); each distinct value is tested once."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return True
    values = used_values(series)
    if len(values) == 0:
        return False
    text = as_text(values, series.dtype)
    codes = digit_codes(text)
    if codes is not None:
        return not bool(codes.any())
    return bool(text.str.match(_NUMBER).all()) and not bool(
        text.str.match(_CODE).any())


def written_as_code(series: pd.Series) -> bool:
    """True when some cell of a text column is a number written as a code
    (:data:`CODE_PATTERN`: a leading zero, a plus sign, 16 digits or more); typed numbers
    are never codes (their identity is exact: :func:`exact_integer_codes`)."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return False
    values = used_values(series)
    if not len(values):
        return False
    text = as_text(values, series.dtype)
    codes = digit_codes(text)
    if codes is not None:
        return bool(codes.any())
    return bool(text.str.match(_CODE).any())


def as_text(values: pd.Index, dtype: object) -> pd.Series:
    """A column's distinct values as text (:func:`text_series`); values that are strings
    already (Arrow-backed) are used as they are, without a round trip through Python objects."""
    if _is_text(dtype):
        return pd.Series(values, dtype="str")
    return text_series(np.asarray(values, dtype=object))


def _is_text(dtype: object) -> bool:
    """Every value of a column of this dtype is a string (a string dtype, or a Categorical of
    strings)."""
    if isinstance(dtype, pd.CategoricalDtype):
        dtype = dtype.categories.dtype
    return pd.api.types.is_string_dtype(dtype) and not pd.api.types.is_object_dtype(dtype)


def text_series(values: np.ndarray, all_text: bool = False) -> pd.Series:
    """Values as a text Series: Arrow-backed when every value is a string (regular
    expressions then run in Arrow), else as Python objects converted with ``str``."""
    if all_text or pd.api.types.infer_dtype(values, skipna=False) == "string":
        return pd.Series(values, dtype="str")
    return pd.Series(values, dtype=object).astype(str)


def infer_type(series: pd.Series) -> ColumnType:
    """Infer a column's type from its pandas dtype and values.

    Floats whose non-missing values are all whole numbers are integers (pandas reads integer
    columns with missing values as float).
    """
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return ColumnType.BOOLEAN
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return ColumnType.DATETIME
    if pd.api.types.is_integer_dtype(dtype):
        return ColumnType.INTEGER
    if pd.api.types.is_float_dtype(dtype):
        values = series.to_numpy(dtype=float, na_value=np.nan)
        finite = values[np.isfinite(values)]
        if finite.size and np.all(finite == np.round(finite)):
            return ColumnType.INTEGER
        return ColumnType.CONTINUOUS
    return ColumnType.CATEGORICAL


@dataclass(frozen=True)
class EncodedColumn:
    """One encoded column.

    Attributes:
        codes: int32 codes, ``-1`` where missing; codes are ordered by value for numeric columns.
        categories: the label of each code (shared across jointly encoded tables).
        values: float64 values for numeric columns (NaN where missing), else None.
        missing: boolean mask of missing values.
    """

    name: str
    type: ColumnType
    codes: np.ndarray
    categories: np.ndarray
    values: np.ndarray | None
    missing: np.ndarray

    @property
    def n_categories(self) -> int:
        return int(len(self.categories))

    def numbers(self) -> np.ndarray:
        """The float values of a numeric column (InputError for a categorical one)."""
        if self.values is None:
            raise InputError(f"column '{self.name}' is not numeric")
        return self.values


@dataclass(frozen=True)
class EncodedTable:
    """A table after the encoding pass: what every measure reads.

    ``multiplicity``, when given, makes each row stand for that many identical records: the
    distinct rows of a table too large for one process, counted by a distributed group-by
    (:mod:`riskcore.partitions`). ``n`` stays the number of rows; :attr:`records` is the number
    of records they stand for.
    """

    name: str
    n: int
    columns: Mapping[str, EncodedColumn]
    roles: Roles
    inferred_types: Mapping[str, str]
    multiplicity: np.ndarray | None = None

    @property
    def records(self) -> int:
        """The number of records the rows stand for."""
        return self.n if self.multiplicity is None else int(self.multiplicity.sum())

    def take(self, rows: np.ndarray) -> EncodedTable:
        """The table's ``rows`` alone (codes shared: the categories stay the same)."""
        from dataclasses import replace

        cols = {c: replace(col, codes=col.codes[rows], missing=col.missing[rows],
                           values=None if col.values is None else col.values[rows])
                for c, col in self.columns.items()}
        mult = None if self.multiplicity is None else self.multiplicity[rows]
        return replace(self, n=int(len(rows)), columns=cols, multiplicity=mult)

    def column(self, name: str) -> EncodedColumn:
        try:
            return self.columns[name]
        except KeyError:
            raise InputError(
                f"{where(self.name, name)} was not encoded; add it to the roles in the config"
            ) from None

    def codes(self, names: Sequence[str]) -> np.ndarray:
        """The (n, len(names)) int32 code matrix of the given columns."""
        if not names:
            return np.empty((self.n, 0), dtype=np.int32)
        return np.column_stack([self.column(c).codes for c in names])

    def weights(self) -> np.ndarray | None:
        if not self.roles.weight:
            return None
        col = self.column(self.roles.weight)
        assert col.values is not None
        return col.values


def check_columns(df: pd.DataFrame, columns: Sequence[str], table: str, role: str = "") -> None:
    """Raise InputError naming the table and column when a configured column is absent."""
    if df.columns.duplicated().any():
        dups = sorted(set(df.columns[df.columns.duplicated()].astype(str)))
        raise InputError(
            f"{where(table)} has duplicate column names {dups}; rename them so each is unique"
        )
    missing = [c for c in columns if c not in df.columns]
    if missing:
        have = ", ".join(map(str, df.columns[:20]))
        raise InputError(
            f"{where(table, missing[0])} is configured{(' as ' + role) if role else ''} but "
            f"absent (missing: {missing}); the table has: {have}. Fix the column name in the "
            "config or the file"
        )


def numeric_values(series: pd.Series, table: str, col: str) -> np.ndarray:
    """Float values of a column (missing = NaN).

    Raises:
        InputError: naming the rows whose text is not a number, or whose number is not finite
            (``1e400`` in a CSV, ``inf`` in Parquet): a non-finite number never reaches a measure.
    """
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.astype(float).to_numpy()
    if not (pd.api.types.is_numeric_dtype(series.dtype)):
        codes, uniques = distinct(series)
        fast = arrow_numbers(uniques)
        if fast is not None:
            return _take(fast, codes, np.nan)
        text = pd.Series(np.asarray(uniques, dtype=object), dtype=object)
        parsed = pd.to_numeric(text.where(text.isna(), text.astype(str).str.strip()),
                               errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        bad_values = np.flatnonzero(np.isnan(parsed) & text.notna().to_numpy())
        if bad_values.size:
            bad = np.isin(codes, bad_values)
            rows = np.flatnonzero(bad)[:5].tolist()
            raise InputError(
                f"{where(table, col)} is declared numeric but {int(bad.sum())} value(s) are not "
                f"numbers (rows {rows}); fix the data or declare the column categorical"
            )
        series = pd.Series(_take(parsed, codes, np.nan), index=series.index)
    values = series.to_numpy(dtype=float, na_value=np.nan)
    infinite = np.isinf(values)
    if infinite.any():
        rows = np.flatnonzero(infinite)[:5].tolist()
        raise InputError(
            f"{where(table, col)} holds {int(infinite.sum())} infinite or overflowing number(s) "
            f"(rows {rows}); every number must be finite: fix the data")
    return values


def sorted_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float values as int32 codes into their sorted distinct values (``-1`` where NaN).

    What ``pd.factorize(values, sort=True)`` gives, made cheaper: whole numbers (identifiers,
    counts) are keyed as int64, which hashes about three times faster than float64; values
    that repeat are hashed and their distinct values alone sorted, others sorted
    (:func:`riskcore.arrays.unique_inverse`). A negative zero is zero.
    """
    nan = np.isnan(values)
    has_nan = bool(nan.any())
    present = values[~nan] if has_nan else values
    key: np.ndarray = present
    if present.size and float(np.abs(present).max()) < 2.0**53 and bool(
            np.all(present == np.trunc(present))):
        key = present.astype(np.int64)
        low = int(key.min()) if key.size else 0
        span = int(key.max()) - low + 1 if key.size else 0
        if span <= 4 * key.size + (1 << 16):
            # whole numbers in a narrow range (identifiers, ages, counts): ranks by one
            # bincount over the range, no hashing nor sort
            seen = np.bincount(key - low, minlength=span) > 0
            rank_of = (np.cumsum(seen) - 1).astype(np.int32)
            coded_small = rank_of[key - low]
            cats = (np.flatnonzero(seen) + low).astype(np.float64)
            if not has_nan:
                return coded_small, cats
            full = np.full(values.shape[0], -1, dtype=np.int32)
            full[~nan] = coded_small
            return full, cats
    distinct_values, inverse = unique_inverse(key)
    categories = np.asarray(distinct_values, dtype=np.float64)
    coded = inverse.astype(np.int32)
    if not has_nan:
        return coded, categories
    out = np.full(values.shape[0], -1, dtype=np.int32)
    out[~nan] = coded
    return out, categories


#: integers at or beyond this magnitude lose their identity as float64 (2**53 + 1 reads as 2**53)
EXACT_INTEGERS_FROM = 2.0**53


def _exact_ints(series: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """A column's values as exact integers (int64, uint64, or Python ints beyond both) and
    its missing mask, or None when a value is not a whole number written as one."""
    if pd.api.types.is_integer_dtype(series.dtype):
        missing = series.isna().to_numpy()
        kind = np.uint64 if pd.api.types.is_unsigned_integer_dtype(series.dtype) else np.int64
        return series.to_numpy(dtype=kind, na_value=0), missing
    if pd.api.types.is_numeric_dtype(series.dtype):
        return None  # floats: their identity is their float value already
    codes, uniques = distinct(series)
    parsed: list[int] = []
    for v in np.asarray(uniques, dtype=object):  # once per distinct value
        text = str(v).strip()
        if not text.lstrip("+-").isdigit():
            return None
        parsed.append(int(text))
    try:
        ints = np.asarray(parsed, dtype=np.int64)
    except OverflowError:
        try:
            ints = np.asarray(parsed, dtype=np.uint64)
        except OverflowError:
            ints = np.asarray(parsed, dtype=object)
    missing = codes < 0
    return np.append(ints, ints[:1] if ints.size else np.zeros(1, ints.dtype))[codes], missing


def exact_integer_codes(parts: Sequence[pd.Series], values: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray] | None:
    """Codes of a numeric column by exact integer value when some value is a whole number at
    or beyond 2**53 (an identifier, a Parquet uint64 beyond 2**63), where float64 would merge
    neighbours and raise k; None when float64 keeps every identity (the usual case, handled
    by :func:`sorted_codes`). The categories stay float (labels, distances)."""
    finite = values[np.isfinite(values)]
    if not finite.size or float(np.abs(finite).max()) < EXACT_INTEGERS_FROM:
        return None
    exact = [_exact_ints(s) for s in parts]
    if any(e is None for e in exact):
        return None
    arrays = [e[0] for e in exact if e is not None]
    missing = np.concatenate([e[1] for e in exact if e is not None])
    kinds = {a.dtype for a in arrays}
    if kinds == {np.dtype(np.int64)} or kinds == {np.dtype(np.uint64)}:
        joint = np.concatenate(arrays)
    elif kinds == {np.dtype(np.int64), np.dtype(np.uint64)} and all(
            a.dtype == np.uint64 or not (a < 0).any() for a in arrays):
        joint = np.concatenate([a.astype(np.uint64) for a in arrays])
    else:  # negative and beyond 2**63 in one column: Python's integers
        joint = np.concatenate([a.astype(object) for a in arrays])
    uniques, inverse = np.unique(joint[~missing], return_inverse=True)
    codes = np.full(joint.size, -1, dtype=np.int32)
    codes[~missing] = inverse.astype(np.int32)
    return codes, np.asarray(uniques, dtype=np.float64)


def encode_tables(
    frames: Mapping[str, pd.DataFrame],
    roles: Roles,
    columns: Sequence[str] | None = None,
    required: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, EncodedTable]:
    """Encode several tables jointly (one pass per column over all of them).

    Args:
        frames: table name -> DataFrame (e.g. ``{"released": df}``).
        roles: the column roles; explicit types are taken from ``roles.types``.
        columns: columns to encode; default ``roles.measured_columns`` present in each table.
        required: table name -> columns that must be present there (default: every encoded
            column in every table).

    Returns:
        table name -> EncodedTable, codes shared across tables.

    Raises:
        InputError: empty table, absent or duplicate column, non-numeric or non-positive weight.
    """
    cols = list(columns) if columns is not None else list(roles.measured_columns)
    for name, df in frames.items():
        if len(df) == 0:
            raise InputError(f"{where(name)} is empty (0 rows); check the file and its filters")
        need = cols if required is None else list(required.get(name, ()))
        check_columns(df, need, name)

    encoded: dict[str, dict[str, EncodedColumn]] = {name: {} for name in frames}
    inferred: dict[str, str] = {}
    for col in cols:
        present = {name: df[col] for name, df in frames.items() if col in df.columns}
        if not present:
            continue
        explicit = roles.types.get(col)
        if explicit is not None:
            typ = explicit
        else:
            typ = infer_type(next(iter(present.values())))
            inferred[col] = typ.value
        if col == roles.weight:
            typ = ColumnType.CONTINUOUS
        names = list(present)
        lengths = [len(s) for s in present.values()]
        offsets = np.cumsum([0] + lengths)
        if typ.is_numeric:
            parts = [numeric_values(s, name, col) for name, s in present.items()]
            values_all = np.concatenate(parts)
            del parts
            exact = exact_integer_codes(list(present.values()), values_all)
            codes_all, categories = exact if exact is not None else sorted_codes(values_all)
        else:
            categories, coded = joint_text_codes(list(present.values()))
            codes_all = np.concatenate(coded) if coded else np.empty(0, dtype=np.int32)
            values_all = None
        for i, name in enumerate(names):
            sl = slice(offsets[i], offsets[i + 1])
            codes = codes_all[sl]
            values = values_all[sl] if values_all is not None else None
            encoded[name][col] = EncodedColumn(
                name=col, type=typ, codes=codes, categories=categories, values=values,
                missing=codes < 0,
            )
        if col == roles.weight:
            for name in names:
                _check_weights(encoded[name][col], name)
    return {
        name: EncodedTable(name=name, n=len(frames[name]), columns=encoded[name], roles=roles,
                           inferred_types=dict(inferred))
        for name in frames
    }


def encode_table(df: pd.DataFrame, roles: Roles, name: str = "table") -> EncodedTable:
    """Encode one table (see :func:`encode_tables`)."""
    return encode_tables({name: df}, roles)[name]


def _check_weights(col: EncodedColumn, table: str) -> None:
    values = col.values
    assert values is not None
    bad_missing = np.flatnonzero(np.isnan(values))
    if bad_missing.size:
        raise InputError(
            f"{where(table, col.name)}: {bad_missing.size} sample weight(s) are missing "
            f"(rows {bad_missing[:5].tolist()}); every record needs a positive weight"
        )
    bad = np.flatnonzero(values <= 0)
    if bad.size:
        raise InputError(
            f"{where(table, col.name)}: {bad.size} sample weight(s) are zero or negative "
            f"(rows {bad[:5].tolist()}); weights must be > 0 (a record stands for w people)"
        )
    with np.errstate(over="ignore"):
        total = float(np.sum(values))
    if not np.isfinite(total):
        raise InputError(
            f"{where(table, col.name)}: the sample weights sum to more than the largest "
            f"number a computer can hold (the largest is {float(values.max()):.3g}); weights "
            "are population counts per record: fix the data")
