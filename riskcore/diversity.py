"""l-diversity and t-closeness per sensitive attribute (SPEC 3.7 and 7; seed 003).

Classes are formed by exact equality of the quasi-identifiers with missing = missing (sdcMicro's
``ldiversity`` groups NA with NA, whatever the freqCalc policy). Within a class of size g, for a
sensitive attribute:

* distinct-l: number of distinct non-missing values, plus 1 when the class holds the missing code
  (sdcMicro's ``missing``, default -999) and at least one real value;
* entropy-l: exp(-sum p ln p), p = count / g, the missing code counting as one category
  (the real number; pyCANON floors it to an integer);
* recursive (c,l): with the non-missing counts r1 >= r2 >= ... >= rm, the largest l such that
  r1 < c * sum_{i>=l} r_i (strict, in float32 as sdcMicro), l = 1 when m = 1; c <= 0 becomes 1.

A true missing value (NaN / empty cell) in the sensitive attribute is *not* the missing code: each
one is its own category (sdcMicro's behaviour with R's NA, reference ``edge_ldiversity_na.csv``).

t-closeness (pyCANON's definitions): the earth mover's distance between a class's distribution of
the attribute and the whole table's. Ordered EMD for numeric attributes,
(1/(m-1)) sum_i |sum_{j<=i} (q_j - p_j)| over the m sorted distinct values; equal-distance EMD,
1/2 sum_j |q_j - p_j|, for categorical ones. Missing values form one extra category (placed after
the largest value for numeric attributes). The table's t is the maximum over classes.

Everything is computed on (class, value) pair counts with bincount / lexsort: no loop over classes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .classes import group_rows
from .data import EncodedColumn, EncodedTable
from .errors import ConfigError
from .results import MeasureResult

DEFAULT_RECURSIVE_C = 2.0
DEFAULT_MISSING_CODE = -999


def _pairs(class_id: np.ndarray, value: np.ndarray, n_values: int):
    """(class, value) pairs with counts, sorted by class then value."""
    key = class_id.astype(np.int64) * np.int64(n_values) + value.astype(np.int64)
    uniq, counts = np.unique(key, return_counts=True)
    return uniq // n_values, uniq % n_values, counts.astype(np.float64)


def _missing_code_index(col: EncodedColumn, missing_code: float | int | str | None) -> int:
    if missing_code is None:
        return -1
    cats = col.categories
    if col.values is not None:
        hits = np.flatnonzero(cats.astype(float) == float(missing_code))
    else:
        hits = np.flatnonzero(pd.Series(cats).astype(str).to_numpy() == str(missing_code))
    return int(hits[0]) if hits.size else -1


def l_diversity(
    table: EncodedTable,
    quasi_identifiers: Sequence[str] | None = None,
    sensitive: Sequence[str] | None = None,
    *,
    c: float = DEFAULT_RECURSIVE_C,
    missing_code: float | int | str | None = DEFAULT_MISSING_CODE,
) -> MeasureResult:
    """Distinct, entropy and recursive (c,l) diversity per sensitive attribute (SPEC 3.7).

    Args:
        table: the released table, encoded.
        quasi_identifiers: key columns; default the roles' QIs.
        sensitive: sensitive columns; default the roles' sensitive attributes.
        c: recursive-diversity constant (sdcMicro's ``l_recurs_c``, default 2).
        missing_code: value counted as sdcMicro's missing code (default -999; None for none).

    Returns:
        Figures ``<attr>.distinct_l``, ``<attr>.entropy_l``, ``<attr>.recursive_l`` (minimum over
        classes) and ``distinct_l``, ``entropy_l``, ``recursive_l`` (minimum over attributes);
        per-record values ``<attr>.distinct_l`` etc.
    """
    qis = list(quasi_identifiers or table.roles.quasi_identifiers)
    sens = list(sensitive or table.roles.sensitive)
    if not sens:
        raise ConfigError("l-diversity needs at least one sensitive attribute in the roles")
    c_eff = np.float32(c if c > 0 else 1.0)
    class_id, u = group_rows(table.codes(qis))
    g = np.bincount(class_id, minlength=u).astype(np.float64)
    n = table.n
    figures: dict[str, float | int | None] = {}
    per_record: dict[str, np.ndarray] = {}
    for s in sens:
        col = table.column(s)
        ncat = col.n_categories
        code = col.codes.astype(np.int64)
        na = code < 0
        # each true missing value is its own category
        code = np.where(na, ncat + np.arange(n, dtype=np.int64), code)
        mc = _missing_code_index(col, missing_code)
        p_class, p_value, p_count = _pairs(class_id, code, ncat + n)
        real = p_value != mc
        n_real = np.bincount(p_class[real], minlength=u)
        has_mc = np.bincount(p_class[~real], minlength=u) > 0
        distinct = n_real + (has_mc & (n_real > 0))

        p = p_count / g[p_class]
        entropy = np.exp(-np.bincount(p_class, weights=p * np.log(p), minlength=u))

        rc, rcount = p_class[real], p_count[real]
        order = np.lexsort((-rcount, rc))
        rc, rcount = rc[order], rcount[order]
        total = np.bincount(rc, weights=rcount, minlength=u)
        start = np.searchsorted(rc, np.arange(u))
        csum = np.cumsum(rcount)
        before = csum - rcount  # sum of counts before this position (global)
        prefix_in_class = before - np.where(start[rc] > 0, csum[start[rc] - 1], 0.0)
        suffix = total[rc] - prefix_in_class  # sum_{i>=l} r_i for this rank l
        r1 = rcount[start[rc]] if rc.size else rcount
        ok = r1.astype(np.float32) < c_eff * suffix.astype(np.float32)
        recursive = np.bincount(rc[ok], minlength=u)
        recursive = np.where(n_real == 1, 1, np.maximum(recursive, np.minimum(n_real, 1)))

        for name, per_class in (("distinct_l", distinct.astype(np.float64)),
                                ("entropy_l", entropy), ("recursive_l",
                                                         recursive.astype(np.float64))):
            rec = per_class[class_id]
            per_record[f"{s}.{name}"] = rec
            figures[f"{s}.{name}"] = _num(per_class.min())
    for name in ("distinct_l", "entropy_l", "recursive_l"):
        figures[name] = min(figures[f"{s}.{name}"] for s in sens)  # type: ignore[type-var]
    return MeasureResult(
        measure="l_diversity",
        figures=figures,
        parameters={"quasi_identifiers": qis, "sensitive": sens, "c": float(c),
                    "missing_code": missing_code, "missing_in_keys": "own value",
                    "missing_in_sensitive": "each missing value is its own category"},
        higher_is_riskier={k: False for k in figures},
        per_record=per_record,
    )


def t_closeness(
    table: EncodedTable,
    quasi_identifiers: Sequence[str] | None = None,
    sensitive: Sequence[str] | None = None,
) -> MeasureResult:
    """t-closeness per sensitive attribute: the largest EMD between a class and the table (SPEC 7).

    Returns:
        Figures ``<attr>.t`` and ``t`` (maximum over attributes); per-record ``<attr>.t``.
    """
    qis = list(quasi_identifiers or table.roles.quasi_identifiers)
    sens = list(sensitive or table.roles.sensitive)
    if not sens:
        raise ConfigError("t-closeness needs at least one sensitive attribute in the roles")
    class_id, u = group_rows(table.codes(qis))
    g = np.bincount(class_id, minlength=u).astype(np.float64)
    n = table.n
    figures: dict[str, float | int | None] = {}
    per_record: dict[str, np.ndarray] = {}
    kinds: dict[str, str] = {}
    for s in sens:
        col = table.column(s)
        # dense codes of the values present here, in value order; missing last
        present, value = np.unique(col.codes, return_inverse=True)
        value = value.astype(np.int64)
        if present.size and present[0] < 0:  # missing (-1) sorts first: move it last
            value = np.where(value == 0, present.size - 1, value - 1)
        m = int(present.size)
        p_all = np.bincount(value, minlength=m) / n
        p_class, p_value, p_count = _pairs(class_id, value, max(m, 1))
        q = p_count / g[p_class]
        if col.type.is_numeric:
            kinds[s] = "ordered"
            emd = _ordered_emd(p_class, p_value, q, p_all, u, m)
        else:
            kinds[s] = "equal_distance"
            in_class = np.bincount(p_class, weights=np.abs(q - p_all[p_value]), minlength=u)
            mass = np.bincount(p_class, weights=p_all[p_value], minlength=u)
            emd = 0.5 * (in_class + 1.0 - mass)
        emd = np.clip(emd, 0.0, None)
        per_record[f"{s}.t"] = emd[class_id]
        figures[f"{s}.t"] = float(emd.max())
    figures["t"] = max(figures[f"{s}.t"] for s in sens)  # type: ignore[type-var]
    return MeasureResult(
        measure="t_closeness",
        figures=figures,
        parameters={"quasi_identifiers": qis, "sensitive": sens, "emd": kinds,
                    "missing_in_sensitive": "one extra category (after the largest value)"},
        higher_is_riskier={k: True for k in figures},
        per_record=per_record,
    )


def _ordered_emd(p_class: np.ndarray, p_value: np.ndarray, q: np.ndarray, p_all: np.ndarray,
                 u: int, m: int) -> np.ndarray:
    """(1/(m-1)) sum_i |F_c(i) - G(i)| for every class, from sparse (class, value, share) pairs.

    Between two consecutive values present in a class its CDF F_c is a constant k, and the sum of
    |k - G(i)| over that run of i is read off prefix sums of G (G is non-decreasing, so a
    searchsorted splits the run where G crosses k).
    """
    if m <= 1:
        return np.zeros(u)
    G = np.cumsum(p_all)
    S = np.concatenate([[0.0], np.cumsum(G)])
    Fc = np.cumsum(q)
    first = np.r_[True, p_class[1:] != p_class[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(q.size), 0))
    k = Fc - (Fc[start] - q[start])  # the class's own CDF after each of its values
    last = np.r_[p_class[1:] != p_class[:-1], True]
    a = p_value
    b = np.where(last, m, np.r_[p_value[1:], m])
    t = np.clip(np.searchsorted(G, k, side="right"), a, b)
    seg = k * (t - a) - (S[t] - S[a]) + (S[b] - S[t]) - k * (b - t)
    total = np.bincount(p_class, weights=seg, minlength=u)
    # run before the class's first value: F_c = 0, sum of G(i) for i < first value
    total += np.bincount(p_class[first], weights=S[p_value[first]], minlength=u)
    return total / (m - 1)


def _num(x: float) -> float | int:
    xf = float(x)
    return int(xf) if xf.is_integer() else xf
