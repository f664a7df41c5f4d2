"""dRisk: share of records whose perturbed numeric values stay close to the original
(sdcMicro ``dRisk``; docs/measures.md 3.8).

With sd_j the standard deviation of the perturbed column j (missing values ignored), record i is
at risk when, for every numeric key j, the original value x_ij lies in
[xm_ij - k sd_j, xm_ij + k sd_j]; dRisk is the share of records at risk (default k = 0.05). A
record with a missing value in any of the columns is not counted as at risk (R's comparison
gives NA), and is counted in ``records_with_missing``.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from ..errors import ConfigError, InputError
from ..results import MeasureResult, not_computable
from ..roles import Roles
from .family import MeasureFamily, MeasureInputs, Params

DEFAULT_K = 0.05


def drisk(original: np.ndarray, perturbed: np.ndarray, columns: list[str] | tuple[str, ...],
          k: float = DEFAULT_K) -> MeasureResult:
    """dRisk for numeric keys (docs/measures.md 3.8).

    Args:
        original: (n, p) original values, NaN where missing.
        perturbed: (n, p) released (perturbed) values of the same records, in the same order.
        columns: names of the p columns.
        k: the interval half-width in standard deviations of the perturbed column.
    """
    x = np.asarray(original, dtype=np.float64)
    xm = np.asarray(perturbed, dtype=np.float64)
    if x.shape != xm.shape:
        raise InputError(f"dRisk needs the original and released tables row-aligned: shapes "
                         f"{x.shape} and {xm.shape} differ; release the same records in the "
                         "same order")
    if k <= 0:
        raise ConfigError(f"dRisk's k must be > 0, got {k}")
    n = x.shape[0]
    sd = np.nanstd(xm, axis=0, ddof=1)
    if not np.all(np.isfinite(sd)):
        bad = [c for c, s in zip(columns, sd) if not np.isfinite(s)]
        raise InputError(f"dRisk: column(s) {bad} have fewer than two values; they cannot be "
                         "scaled")
    lo = xm - k * sd
    hi = xm + k * sd
    with np.errstate(invalid="ignore"):
        inside = (x >= lo) & (x <= hi)
    missing = np.isnan(x).any(axis=1) | np.isnan(xm).any(axis=1)
    at_risk = inside.all(axis=1) & ~missing
    count = int(at_risk.sum())
    return MeasureResult(
        measure="drisk",
        figures={"dRisk": count / n, "records_at_risk": count,
                 "records_with_missing": int(missing.sum())},
        parameters={"k": k, "columns": list(columns)},
        per_record={"drisk_at_risk": at_risk.astype(np.float64)},
        details={"sd_perturbed": {c: float(s) for c, s in zip(columns, sd)}},
    )


class DriskParams(Params):
    """Parameters of ``drisk``."""

    columns: list[str] | None = Field(None, min_length=1, description="numeric columns "
                                      "compared; default the continuous key/sensitive columns")
    k: float = Field(DEFAULT_K, gt=0.0, description="interval half-width in standard deviations")
    column_fields = ("columns",)


def _run(inputs: MeasureInputs, params: DriskParams) -> MeasureResult:
    rel, ori = inputs.released, inputs.original
    assert ori is not None
    cols = list(params.columns or [])
    if not cols:
        cols = [c for c in rel.roles.compared_columns if rel.column(c).values is not None
                and rel.column(c).type.value == "continuous"]
    if not cols:
        return not_computable("drisk", "no continuous key columns: name them in "
                              "measures.drisk.columns")
    for c in cols:
        if rel.column(c).values is None:
            raise InputError(f"dRisk column '{c}' is not numeric; list numeric columns only")
    if rel.n != ori.n:
        return not_computable("drisk", f"dRisk needs the released table row-aligned with the "
                              f"original ({rel.n} vs {ori.n} rows)")
    x = np.column_stack([ori.column(c).numbers() for c in cols])
    xm = np.column_stack([rel.column(c).numbers() for c in cols])
    return drisk(x, xm, list(cols), params.k)


def _figures(params: DriskParams, roles: Roles) -> dict[str, bool]:
    return {"dRisk": True, "records_at_risk": True, "records_with_missing": False}


FAMILY = MeasureFamily(
    name="drisk",
    title="dRisk (sdcMicro)",
    section="sdc",
    params=DriskParams,
    run=_run,
    figures=_figures,
    needs=("original",),
    how_to_read=(
        "dRisk is the share of records whose perturbed numeric values stay so close to the "
        "original ones (within k standard deviations) that the original can be recognized."),
    advice=(
        "Perturbed numeric values stay too close to the originals: add more noise or swap more "
        "records."),
    scale="whole",
)
