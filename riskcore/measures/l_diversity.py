"""l-diversity per sensitive attribute (docs/measures.md 3.7; sdcMicro ``ldiversity``).

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
Everything is computed on (class, value) pair counts with bincount / lexsort: no loop over classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from ..equivalence import class_value_pairs, group_rows, record_counts
from ..errors import ConfigError
from ..results import MeasureResult
from ..roles import Roles
from .family import MeasureFamily, MeasureInputs, Params, per_column_figures

if TYPE_CHECKING:
    from ..data import EncodedColumn, EncodedTable


DEFAULT_RECURSIVE_C = 2.0
DEFAULT_MISSING_CODE = -999


def _missing_code_index(col: EncodedColumn, missing_code: float | int | str | None) -> int:
    if missing_code is None:
        return -1
    cats = col.categories
    if col.values is not None:
        hits = np.flatnonzero(cats.astype(float) == float(missing_code))
    else:
        import pandas as pd

        hits = np.flatnonzero(pd.Series(cats).astype(str).to_numpy() == str(missing_code))
    return int(hits[0]) if hits.size else -1


def l_diversity(
    table: EncodedTable,
    quasi_identifiers: Sequence[str] | None = None,
    sensitive: Sequence[str] | None = None,
    *,
    c: float = DEFAULT_RECURSIVE_C,
    missing_code: float | int | str | None = DEFAULT_MISSING_CODE,
    classes: tuple[np.ndarray, int] | None = None,
) -> MeasureResult:
    """Distinct, entropy and recursive (c,l) diversity per sensitive attribute (docs/measures.md
    3.7).

    Args:
        table: the released table, encoded.
        quasi_identifiers: key columns; default the roles' QIs.
        sensitive: sensitive columns; default the roles' sensitive attributes.
        c: recursive-diversity constant (sdcMicro's ``l_recurs_c``, default 2).
        missing_code: value counted as sdcMicro's missing code (default -999; None for none).
        classes: the exact-key classes (class id per record, count) when already computed.

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
    class_id, u = classes if classes is not None else group_rows(table.codes(qis))
    mult = table.multiplicity
    g = record_counts(class_id, u, mult)
    n = table.n
    figures: dict[str, float | int | None] = {}
    per_record: dict[str, np.ndarray] = {}
    max_distinct: dict[str, float | int] = {}
    for s in sens:
        col = table.column(s)
        ncat = col.n_categories
        code = col.codes.astype(np.int64)
        na = code < 0
        # each true missing value is its own category (a row standing for several records
        # never holds a missing sensitive value: see riskcore.partitions)
        code = np.where(na, ncat + np.arange(n, dtype=np.int64), code)
        mc = _missing_code_index(col, missing_code)
        p_class, p_value, p_count = class_value_pairs(class_id, code, ncat + n, mult)
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

        max_distinct[s] = _num(distinct.max())
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
        per_record=per_record,
        details={"max_distinct_l": max_distinct},
    )


def _num(x: float) -> float | int:
    xf = float(x)
    return int(xf) if xf.is_integer() else xf


NAMES = ("distinct_l", "entropy_l", "recursive_l")


class LDiversityParams(Params):
    """Parameters of ``l_diversity``."""

    c: float = Field(DEFAULT_RECURSIVE_C, gt=0.0, description="recursive (c,l) constant")
    missing_code: int | float | str | None = Field(
        DEFAULT_MISSING_CODE, description="value counted as sdcMicro's missing code")
    sensitive: list[str] | None = Field(None, min_length=1,
                                        description="default: the roles' sensitive columns")
    column_fields = ("sensitive",)


def sensitive_columns(params_sensitive: list[str] | None, roles: Roles) -> list[str]:
    """The sensitive columns a family measures: its own list, else the roles'."""
    return list(params_sensitive or roles.sensitive)


def _check(params: LDiversityParams, roles: Roles) -> None:
    if not sensitive_columns(params.sensitive, roles):
        raise ConfigError("needs a sensitive column: set roles.sensitive or "
                          "measures.l_diversity.sensitive")


def _run(inputs: MeasureInputs, params: LDiversityParams) -> MeasureResult:
    table = inputs.released
    sens = sensitive_columns(params.sensitive, table.roles)
    return l_diversity(table, sensitive=sens, c=params.c, missing_code=params.missing_code,
                       classes=inputs.classes(table.roles.quasi_identifiers))


def _figures(params: LDiversityParams, roles: Roles) -> dict[str, bool]:
    sens = sensitive_columns(params.sensitive, roles)
    return {**per_column_figures(sens, NAMES, False), **{n: False for n in NAMES}}


def _alarm(result: MeasureResult) -> str | None:
    sens = result.parameters.get("sensitive", [])
    for s in sens:
        if result.details.get("max_distinct_l", {}).get(s) == 1:
            return (f"l_diversity: every class has a single value of '{s}' (l = 1 everywhere): "
                    "the quasi-identifiers reveal it for every record")
    return None


FAMILY = MeasureFamily(
    name="l_diversity",
    title="l-diversity",
    section="sdc",
    params=LDiversityParams,
    run=_run,
    figures=_figures,
    check=_check,
    alarm=_alarm,
    how_to_read=(
        "l is the number of different sensitive values within a group that shares quasi-"
        "identifiers. l = 1 means everyone in some group has the same sensitive value: knowing "
        "someone is in that group reveals it."),
    advice=(
        "Some group of records shares one sensitive value: generalize the quasi-identifiers so "
        "that groups merge, suppress those records, or perturb the sensitive attribute."),
    scale="classes",
)
