"""Copies and closeness: how near a release (synthetic data above all) stays to the original's
rows.

The distance measures synthetic-data users already run: SDMetrics' ``DCRBaselineProtection``
and ``DCROverfittingProtection``, synthcity's distance metrics, and the holdout "DCR share" of
Platzer & Reutterer (2021), *Holdout-based fidelity and privacy assessment of mixed-type
synthetic data* (Frontiers in Big Data 4). Over the compared columns (default: the
quasi-identifiers and sensitive columns), with the attacks' Gower distance
(:mod:`riskcore.measures.attacks.gower`, one implementation) divided by the number of columns,
so that a distance lies in [0, 1] (0: equal on every column):

* **exact copies**: a released row is a copy when some original row has the same value in every
  compared column (missing equals missing). ``exact_share`` = copies / released rows;
  ``original_reproduced_share`` = original rows that occur in the release / original rows;
  ``exact_share_control`` is the same share against the control (holdout) rows: what chance
  and the population give; ``exact_excess`` = ``exact_share`` - ``exact_share_control``.
* **DCR** (distance to closest record): for each compared released row r, ``d_O(r)`` = min over
  the original's rows of d(r, o), ``d_C(r)`` the same over the control rows.
* **holdout share** (Platzer & Reutterer): original and control subsampled to the same size m;
  s(r) = 1 if d_O(r) < d_C(r), 1/2 on a tie, 0 otherwise; ``holdout_share`` = mean s(r). A
  generator that did not memorize gives 1/2 (the original and the control are draws from one
  population); above 1/2 the release sits closer to the people it was trained on. Interval
  mean +- z se with se = sd(s) / sqrt(n); ``holdout_p_value`` is the one-sided normal test of
  H0: share <= 1/2.
* **NNDR** (nearest-neighbour distance ratio): d_1(r) / d_2(r), the distances to the first and
  second closest original rows (0/0 = 1): near 0, the released row sits on one specific
  person; the same ratio against the control rows is its reference.

Released rows are compared in a seeded sample (``sample_size``). For the holdout share the
original and the control are cut to one size m (the smaller table's); the nearest-neighbour
search runs over seeded reference samples of them (``reference_size``) in bounded blocks (never
n x m memory), and a released row that is an exact copy of any of the m rows (found by
hashing, over all of them) is put at its least possible distance, so verbatim copies count at
any table size; near copies count within the reference samples.
Per record: ``exact_copy`` (0/1, every released row) and ``dcr`` (the compared rows; NaN for
rows outside the sample), keyed by released row number, never values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field

from .. import progress
from ..compiled import warm
from ..equivalence import exact_matches
from ..errors import ConfigError
from ..results import MeasureResult, Status
from ..roles import Roles
from ..stats import normal_sf, z_score
from .attacks.common import check_attack_columns
from .attacks.gower import kneighbors, prepare
from .family import MeasureFamily, MeasureInputs, Params, compared_columns

DEFAULT_SAMPLE = 5_000
DEFAULT_REFERENCE = 20_000
QUANTILES = (0.01, 0.05, 0.25, 0.5)


class CopiesParams(Params):
    """Parameters of ``copies``."""

    columns: list[str] | None = Field(
        None, description="columns compared (default: quasi-identifiers and sensitive)")
    sample_size: int = Field(DEFAULT_SAMPLE, ge=10,
                             description="released rows compared by distance (seeded sample)")
    reference_size: int = Field(DEFAULT_REFERENCE, ge=10,
                                description="original and control rows searched (seeded)")
    distance: Literal["gower"] = Field("gower", description="the attacks' Gower distance")
    near: float = Field(0.05, ge=0, le=1,
                        description="a released row within this DCR of an original row is a "
                                    "near copy (per-column mean distance)")
    bins: int = Field(20, ge=2, le=200, description="histogram bins of the DCR")
    confidence: float = Field(0.95, gt=0, lt=1,
                              description="level of the holdout share's interval")
    column_fields = ("columns",)


def nndr(d1: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """d1 / d2, with 0/0 = 1 (two equally close rows: no single person singled out) and
    x/inf = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(d2 > 0, d1 / d2, 1.0)
    out[np.isinf(d2) & np.isfinite(d1)] = 0.0
    out[np.isinf(d1) & np.isinf(d2)] = 1.0
    return out


def holdout_test(d_orig: np.ndarray, d_ctrl: np.ndarray, confidence: float = 0.95
                 ) -> tuple[float, tuple[float, float], float]:
    """The holdout share with its interval and the one-sided p-value of H0: share <= 1/2."""
    scores = np.where(d_orig < d_ctrl, 1.0, np.where(d_orig == d_ctrl, 0.5, 0.0))
    n = scores.size
    share = float(scores.mean())
    se = float(scores.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    z = z_score(confidence)
    ci = (max(0.0, share - z * se), min(1.0, share + z * se))
    if se == 0:
        p = 0.0 if share > 0.5 else 1.0
    else:
        p = normal_sf((share - 0.5) / se)
    return share, ci, p


def _quantiles(x: np.ndarray, prefix: str) -> dict[str, float | None]:
    finite = x[np.isfinite(x)]
    return {f"{prefix}_{'median' if q == 0.5 else f'p{round(q * 100):02d}'}":
            (float(np.quantile(finite, q)) if finite.size else None) for q in QUANTILES}


def _exact_figures(rel_codes: np.ndarray, ori_codes: np.ndarray, ctrl_codes: np.ndarray | None
                   ) -> tuple[dict[str, float | int | None], np.ndarray, np.ndarray,
                              np.ndarray | None]:
    """The exact-copy figures over every row: the released rows equal to an original row,
    the original rows reproduced, and (with a control) the same share against the control
    and the excess over it. Returns the figures and the three masks."""
    is_copy, reproduced = exact_matches(rel_codes, ori_codes)
    figures: dict[str, float | int | None] = {
        "exact_share": float(is_copy.mean()),
        "original_reproduced_share": float(reproduced.mean()),
        "n_exact_copies": int(is_copy.sum()),
        "exact_share_control": None, "exact_excess": None,
    }
    copy_ctrl = None
    if ctrl_codes is not None:
        copy_ctrl, _ = exact_matches(rel_codes, ctrl_codes)
        figures["exact_share_control"] = float(copy_ctrl.mean())
        figures["exact_excess"] = float(is_copy.mean()) - float(copy_ctrl.mean())
    return figures, is_copy, reproduced, copy_ctrl


def _without_control(figures: dict[str, float | int | None], unavailable: dict[str, str],
                     warnings: list[str]) -> None:
    """The control's figures, unavailable, and why."""
    reason = ("needs a control table (records held out of the data the release was made "
              "from): without it closeness to the original cannot be told from closeness "
              "to the population")
    for name in ("dcr_control_p01", "dcr_control_p05", "dcr_control_p25",
                 "dcr_control_median", "nndr_control_median", "holdout_share",
                 "holdout_share_ci_low", "holdout_share_ci_high", "holdout_p_value"):
        figures[name] = None
        unavailable[name] = reason
    warnings.append("no control table: the holdout share and the control baselines are "
                    "not available")


def _histogram(dcr_o: np.ndarray, dcr_c: np.ndarray | None, bins: int) -> dict[str, Any]:
    """The report's histogram of the distances to the original and the control, on shared
    edges from 0 to the largest finite distance."""
    finite = dcr_o[np.isfinite(dcr_o)]
    if dcr_c is not None:
        finite = np.concatenate([finite, dcr_c[np.isfinite(dcr_c)]])
    top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    edges = np.linspace(0.0, top, bins + 1)
    return {"edges": edges.tolist(),
            "original": np.histogram(dcr_o[np.isfinite(dcr_o)], edges)[0].tolist(),
            "control": (np.histogram(dcr_c[np.isfinite(dcr_c)], edges)[0].tolist()
                        if dcr_c is not None else None)}


def copies(original: Any, released: Any, control: Any = None, *,
           columns: Sequence[str], sample_size: int = DEFAULT_SAMPLE,
           reference_size: int = DEFAULT_REFERENCE, near: float = 0.05, bins: int = 20,
           confidence: float = 0.95, seed: int = 0,
           wildcards: dict[str, int] | None = None) -> MeasureResult:
    """Copies and closeness of ``released`` to ``original`` (EncodedTables, jointly encoded);
    see the module's docstring for every formula."""
    cols = list(columns)
    tables = {"original": original, "released": released}
    if control is not None:
        tables["control"] = control
    check_attack_columns(tables, cols, "copies")
    p = len(cols)
    rng = np.random.default_rng(seed)
    warnings: list[str] = []

    # exact copies, over every row (codes are joint: equal values have equal codes)
    rel_codes, ori_codes = released.codes(cols), original.codes(cols)
    ctrl_codes = control.codes(cols) if control is not None else None
    figures, is_copy, reproduced, copy_ctrl = _exact_figures(rel_codes, ori_codes, ctrl_codes)

    # distances: released rows in a seeded sample; the original and the control cut to one
    # size m for the holdout share, searched in seeded reference samples of them, and every
    # exact copy of a row of the size-m tables found by hashing (a copy whose source is not
    # in the reference sample still sits at its least possible distance)
    n_cmp = min(sample_size, released.n)
    rel_rows = np.sort(rng.choice(released.n, size=n_cmp, replace=False))
    m = original.n if control is None else min(original.n, control.n)
    if m < 2:
        raise ConfigError("copies needs at least two original (and control) rows")
    ori_m = rng.permutation(original.n)[:m]
    ctrl_m = rng.permutation(control.n)[:m] if control is not None else None
    n_ref = min(reference_size, m)
    mats = prepare([released, original] + ([control] if control is not None else []), cols,
                   [rel_rows, np.sort(ori_m[:n_ref])]
                   + ([np.sort(ctrl_m[:n_ref])] if ctrl_m is not None else []), wildcards)
    sample_codes = rel_codes[rel_rows]
    # the distance of a row to its own copy: both-missing numeric columns add 1 each
    self_d = (np.isnan(mats[0].numeric).sum(axis=1) / p if mats[0].numeric.size
              else np.zeros(n_cmp))

    def closest(cand: Any, codes: np.ndarray, rows: np.ndarray, every: np.ndarray | None
                ) -> np.ndarray:
        _, d = kneighbors(mats[0], cand, 2)
        d = d / p
        # the sample's copies of the size-m rows: when those are every row of the table,
        # the copies found over every released row already say it
        copied = every[rel_rows] if every is not None and rows.size == codes.shape[0] else \
            exact_matches(sample_codes, codes[rows])[0]
        fix = copied & (self_d < d[:, 0])
        d[fix, 1] = d[fix, 0]
        d[fix, 0] = self_d[fix]
        return d

    with progress.scope("distance to the original"):
        d_o = closest(mats[1], ori_codes, ori_m, is_copy)
    dcr_o, nndr_o = d_o[:, 0], nndr(d_o[:, 0], d_o[:, 1])
    figures.update(_quantiles(dcr_o, "dcr_original"))
    figures["near_share"] = float(np.mean(dcr_o <= near))
    figures["nndr_original_median"] = float(np.median(nndr_o))
    details: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    dcr_c = None
    if control is not None:
        assert ctrl_m is not None and ctrl_codes is not None
        with progress.scope("distance to the control"):
            d_c = closest(mats[2], ctrl_codes, ctrl_m, copy_ctrl)
        dcr_c, nndr_c = d_c[:, 0], nndr(d_c[:, 0], d_c[:, 1])
        figures.update(_quantiles(dcr_c, "dcr_control"))
        figures["nndr_control_median"] = float(np.median(nndr_c))
        share, ci, pval = holdout_test(dcr_o, dcr_c, confidence)
        figures.update({"holdout_share": share, "holdout_share_ci_low": ci[0],
                        "holdout_share_ci_high": ci[1], "holdout_p_value": pval})
    else:
        _without_control(figures, unavailable, warnings)
    figures.update({"n_compared": int(n_cmp), "n_reference": int(n_ref),
                    "n_holdout_size": int(m)})

    details["dcr_histogram"] = _histogram(dcr_o, dcr_c, bins)
    details["counts"] = {"released": int(released.n), "original": int(original.n),
                         "control": None if control is None else int(control.n),
                         "exact_copies": int(is_copy.sum()),
                         "original_reproduced": int(reproduced.sum()),
                         "exact_copies_of_control": None if copy_ctrl is None
                         else int(copy_ctrl.sum())}
    dcr_all = np.full(released.n, np.nan)
    dcr_all[rel_rows] = dcr_o
    return MeasureResult(
        measure="copies", figures=figures,
        parameters={"columns": cols, "sample_size": sample_size,
                    "reference_size": reference_size, "distance": "gower", "near": near,
                    "bins": bins, "confidence": confidence, "seed": seed},
        details=details, warnings=tuple(warnings),
        per_record={"exact_copy": is_copy.astype(np.int8), "dcr": dcr_all},
        unavailable=unavailable)


#: figure -> higher is riskier
FIGURES: dict[str, bool] = {
    "exact_share": True, "original_reproduced_share": True, "n_exact_copies": True,
    "exact_share_control": False, "exact_excess": True,
    "dcr_original_p01": False, "dcr_original_p05": False, "dcr_original_p25": False,
    "dcr_original_median": False, "near_share": True, "nndr_original_median": False,
    "dcr_control_p01": True, "dcr_control_p05": True, "dcr_control_p25": True,
    "dcr_control_median": True, "nndr_control_median": True,
    "holdout_share": True, "holdout_share_ci_low": True, "holdout_share_ci_high": True,
    "holdout_p_value": False, "n_compared": False, "n_reference": False,
    "n_holdout_size": False,
}


def _columns(params: CopiesParams, roles: Roles, released: Any) -> list[str]:
    return compared_columns(params.columns, roles, released)


def _run(inputs: MeasureInputs, params: CopiesParams) -> MeasureResult:
    assert inputs.original is not None
    cols = _columns(params, inputs.released.roles, inputs.released)
    if not cols:
        return MeasureResult(measure="copies", figures={}, status=Status.NOT_COMPUTABLE,
                             reason="no column to compare: give measures.copies.columns")
    refused = inputs.domain_check("copies", cols)
    if refused is not None:
        return refused
    result = copies(inputs.original, inputs.released, inputs.control, columns=cols,
                    sample_size=params.sample_size, reference_size=params.reference_size,
                    near=params.near, bins=params.bins, confidence=params.confidence,
                    seed=inputs.seed, wildcards=inputs.wildcards(cols))
    return inputs.with_alignment(result, cols)


FAMILY = MeasureFamily(
    name="copies",
    title="Copies and closeness",
    section="copies",
    params=CopiesParams,
    run=_run,
    figures=lambda p, roles: dict(FIGURES),
    needs=("original",),
    reads=("control",),
    distance=True,
    start_up=warm,
    how_to_read=(
        "Whether the release copied people. Exact copies: released rows equal to an original "
        "row on every compared column, beside the same share against control rows (what "
        "chance gives). DCR: each released row's distance to its closest original row (0 = a "
        "copy, 1 = different on every column), drawn against its distance to the closest "
        "control row. Holdout share: the share of released rows closer to the original than "
        "to the control; 0.5 when the generator did not memorize its training rows, above 0.5 "
        "when it did. NNDR near 0: the row sits on one specific person."),
    advice=(
        "The release sits too close to the original's rows: remove the exact and near "
        "copies, train the generator with more privacy (fewer epochs, differential privacy) "
        "or generalize the columns that make rows unique."),
)
