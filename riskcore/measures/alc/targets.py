"""Target selection for the pre-targeted mode (the ALC paper, section 3.2): the records an attacker
singles out a priori, e.g. outliers.

Two forms, parsed here (never evaluated as code):

* ``top 1% income`` (or ``top 0.01 income``): the records with the largest values of a numeric
  column, the given fraction of the records with a value (ties at the cut are included);
* a predicate: clauses ``COLUMN OP VALUE`` joined by ``and``, OP one of ``== != < <= > >=``;
  VALUE a number or a quoted string (``sex == 'F' and age >= 70``).
"""

from __future__ import annotations

import operator
import re
import shlex

import numpy as np

from ...errors import ConfigError
from .inputs import ALCData

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}
# linear in the query's length: possessive repeats, the clause split at its first operator
_TOP = re.compile(r"top\s++([0-9.]++)(?:\s*+(%))?\s++(\S.*+)", re.IGNORECASE)
_AND = re.compile(r"(?<!\s)\s++and\s++", re.IGNORECASE)
_OPERATOR = re.compile(r"==|!=|<=|>=|<|>")


def _clause(clause: str) -> tuple[str, str, str] | None:
    """(column, operator, value) of ``COLUMN OP VALUE``, split at the first operator."""
    text = clause.strip()
    m = _OPERATOR.search(text, 1)
    if m is None:
        return None
    col, raw = text[:m.start()].strip(), text[m.end():].strip()
    return (col, m.group(), raw) if col and raw else None


def _check(data: ALCData, col: str) -> None:
    if col not in data.kinds:
        raise ConfigError(f"target query: unknown column '{col}'; columns: {list(data.kinds)}")


def _numeric(data: ALCData, col: str, query: str) -> np.ndarray:
    """Float values of a column (numeric labels of a categorical one), NaN = missing."""
    _check(data, col)
    t = data.original
    if col in data.values[t]:
        return data.values[t][col]
    try:
        per_code = np.array([float(v) for v in data.labels[col]] + [np.nan])
    except (TypeError, ValueError):
        raise ConfigError(f"target query '{query}': column '{col}' is not numeric") from None
    return per_code[data.codes[t][col]]  # code -1 picks the trailing NaN


def select_targets(data: ALCData, query: str) -> np.ndarray:
    """Row numbers of the original selected by ``query`` (see the module doc)."""
    m = _TOP.fullmatch(query.strip())
    if m:
        amount = float(m.group(1))
        fraction = amount / 100.0 if m.group(2) == "%" else amount
        col = m.group(3)
        if not 0 < fraction <= 1:
            raise ConfigError(f"target query '{query}': the fraction must lie in (0, 1]")
        x = _numeric(data, col, query)
        fin = np.isfinite(x)
        k = max(1, int(round(fraction * fin.sum())))
        cut = np.sort(x[fin])[::-1][k - 1]
        return np.flatnonzero(fin & (x >= cut))
    mask = np.ones(data.n[data.original], dtype=bool)
    for clause in _AND.split(query.strip()):
        parts = _clause(clause)
        if parts is None:
            raise ConfigError(f"target query: cannot read '{clause}'; write COLUMN OP VALUE "
                              "(OP: == != < <= > >=) joined by 'and', or 'top 1% COLUMN'")
        col, op, raw = parts
        try:
            literal = shlex.split(raw)[0] if raw[:1] in "'\"" else raw
        except ValueError:
            raise ConfigError(f"target query: unbalanced quotes in '{clause}'") from None
        _check(data, col)
        t = data.original
        if col not in data.values[t] and op in ("==", "!="):
            codes = data.codes[t][col]
            match = np.array([str(v) == literal for v in data.labels[col]] + [False])
            hit = match[codes]
            mask &= hit if op == "==" else (~hit & (codes >= 0))
            continue
        try:
            num = float(literal)
        except ValueError:
            raise ConfigError(f"target query: '{clause}' compares column '{col}' with a "
                              f"number, but {literal!r} is not one") from None
        with np.errstate(invalid="ignore"):
            mask &= _OPS[op](_numeric(data, col, query), num)
    return np.flatnonzero(mask)
