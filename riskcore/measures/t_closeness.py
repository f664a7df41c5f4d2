"""t-closeness per sensitive attribute (docs/measures.md 7; pyCANON's definitions).

The earth mover's distance between a class's distribution of the attribute and the whole
table's: ordered EMD for numeric attributes, (1/(m-1)) sum_i |sum_{j<=i} (q_j - p_j)| over the m
sorted distinct values; equal-distance EMD, 1/2 sum_j |q_j - p_j|, for categorical ones. Missing
values form one extra category (placed after the largest value for numeric attributes). The
table's t is the maximum over classes. Classes are exact-key classes (missing = own value).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from ..equivalence import class_value_pairs, dense_values, group_rows, record_counts
from ..errors import ConfigError
from ..results import MeasureResult
from ..roles import Roles
from .family import MeasureFamily, MeasureInputs, Params, per_column_figures
from .l_diversity import sensitive_columns

if TYPE_CHECKING:
    from ..data import EncodedTable


def t_closeness(
    table: EncodedTable,
    quasi_identifiers: Sequence[str] | None = None,
    sensitive: Sequence[str] | None = None,
    classes: tuple[np.ndarray, int] | None = None,
) -> MeasureResult:
    """t-closeness per sensitive attribute: the largest EMD between a class and the table
    (docs/measures.md 7).

    Returns:
        Figures ``<attr>.t`` and ``t`` (maximum over attributes); per-record ``<attr>.t``.
    """
    qis = list(quasi_identifiers or table.roles.quasi_identifiers)
    sens = list(sensitive or table.roles.sensitive)
    if not sens:
        raise ConfigError("t-closeness needs at least one sensitive attribute in the roles")
    class_id, u = classes if classes is not None else group_rows(table.codes(qis))
    mult = table.multiplicity
    g = record_counts(class_id, u, mult)
    n = table.records
    figures: dict[str, float | int | None] = {}
    per_record: dict[str, np.ndarray] = {}
    kinds: dict[str, str] = {}
    for s in sens:
        col = table.column(s)
        # dense codes of the values present here, in value order; missing last
        present, value = dense_values(col.codes, col.n_categories)
        value = value.astype(np.int64)
        if present.size and present[0] < 0:  # missing (-1) sorts first: move it last
            value = np.where(value == 0, present.size - 1, value - 1)
        m = int(present.size)
        p_all = np.bincount(value, weights=mult, minlength=m) / n
        p_class, p_value, p_count = class_value_pairs(class_id, value, max(m, 1), mult)
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




class TClosenessParams(Params):
    """Parameters of ``t_closeness``."""

    sensitive: list[str] | None = Field(None, min_length=1,
                                        description="default: the roles' sensitive columns")
    column_fields = ("sensitive",)


def _check(params: TClosenessParams, roles: Roles) -> None:
    if not sensitive_columns(params.sensitive, roles):
        raise ConfigError("needs a sensitive column: set roles.sensitive or "
                          "measures.t_closeness.sensitive")


def _run(inputs: MeasureInputs, params: TClosenessParams) -> MeasureResult:
    table = inputs.released
    return t_closeness(table, sensitive=sensitive_columns(params.sensitive, table.roles),
                       classes=inputs.classes(table.roles.quasi_identifiers))


FAMILY = MeasureFamily(
    name="t_closeness",
    title="t-closeness",
    section="sdc",
    params=TClosenessParams,
    run=_run,
    figures=lambda p, roles: {**per_column_figures(sensitive_columns(p.sensitive, roles), ("t",),
                                                   True), "t": True},
    check=_check,
    how_to_read=(
        "t measures how far a group's distribution of a sensitive attribute is from the whole "
        "table's (earth mover's distance, 0 to 1). Large t means membership in a group says a "
        "lot about the sensitive value."),
    advice=(
        "Some group's sensitive distribution is far from the table's: generalize the quasi-"
        "identifiers or perturb the sensitive attribute."),
    scale="classes",
)
