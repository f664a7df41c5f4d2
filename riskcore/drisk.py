"""dRisk: share of records whose perturbed numeric values stay close to the original
(seed 003: sdcMicro ``dRisk``; SPEC 3.8).

With sd_j the standard deviation of the perturbed column j (missing values ignored), record i is
at risk when, for every numeric key j, the original value x_ij lies in
[xm_ij - k sd_j, xm_ij + k sd_j]; dRisk is the share of records at risk (default k = 0.05). A
record with a missing value in any of the columns is not counted as at risk (R's comparison
gives NA), and is counted in ``records_with_missing``.
"""

from __future__ import annotations

import numpy as np

from .errors import ConfigError, InputError
from .results import MeasureResult

DEFAULT_K = 0.05


def drisk(original: np.ndarray, perturbed: np.ndarray, columns: list[str] | tuple[str, ...],
          k: float = DEFAULT_K) -> MeasureResult:
    """dRisk for numeric keys (SPEC 3.8).

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
        higher_is_riskier={"dRisk": True, "records_at_risk": True,
                           "records_with_missing": False},
        per_record={"drisk_at_risk": at_risk.astype(np.float64)},
        details={"sd_perturbed": {c: float(s) for c, s in zip(columns, sd)}},
    )
