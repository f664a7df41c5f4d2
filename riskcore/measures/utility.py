"""Utility beside risk: what a release keeps of the original.

A release that is safe but useless (half its cells suppressed, a column collapsed to one
value) should not pass unnoticed. Original O against release R over the measured columns
(default: the quasi-identifiers and sensitive columns), with the control C (a fresh sample of
the population, held out of the release's making) scored the same way as the yardstick: a
release's 0.93 reads against what sampling alone gives.

**Column shapes** (SDMetrics' ``ColumnShapes``, so that its users can compare): per column,
missing values left out,

* a number: ``1 - D`` with D the two-sample Kolmogorov-Smirnov statistic,
  D = max_x |F_O(x) - F_R(x)| over the empirical distribution functions (SDMetrics'
  ``KSComplement``);
* a category: ``1 - TVD`` with TVD = 1/2 sum_v |p_O(v) - p_R(v)| over the values' relative
  frequencies (``TVComplement``).

``shape.<column>`` per column; ``column_shapes`` their mean. Both run on the joint encoding's
codes (a numeric column's codes are ordered by value): bincounts and a cumulative sum, O(n + k).

**Column pair trends** (SDMetrics' ``ColumnPairTrends``): per pair of columns,

* two numbers: 1 - |rho_O - rho_R| / 2, Pearson's rho over the rows where both are present
  (``CorrelationSimilarity``);
* otherwise 1 - TVD of the joint frequencies, missing a value of its own
  (``ContingencySimilarity``); a number in a mixed pair is binned first: by default into the
  original's deciles (``pair_bins: original_deciles``: the same edges for both tables, so a
  shift of the distribution shows); ``pair_bins: sdmetrics`` bins each table into ten
  equal-width bins of its own range as SDMetrics' QualityReport does (which, unlike riskgate,
  also scores mixed pairs on a random 50,000-row subsample above that size).

``column_pair_trends`` is their mean (a pair whose correlation is undefined, a constant
column, is left out, as SDMetrics does); the worst pairs are in the details.

**Propensity** (Woo et al. 2009, *Global measures of data utility for microdata masked for
disclosure limitation*, J. Priv. Confid. 1; Snoke et al. 2018, *General and specific utility
measures for synthetic data*, JRSS A 181): a logistic regression tells O from R (seeded samples
of at most ``propensity_rows`` rows each; numbers standardized with a missing indicator,
categories one-hot over their ``max_levels`` most frequent values); with p_i its fitted
probability that row i is released and c = n_R / (n_O + n_R),
``pmse`` = 1/N sum_i (p_i - c)^2, and ``pmse_ratio`` = pMSE / E_0[pMSE] with the null
expectation E_0 = (k - 1) c (1 - c) / N for k model parameters: about 1 when a release is
indistinguishable from a sample of the original. (Snoke et al. print (k - 1)(1 - c)^2 c / N,
half of it at c = 1/2, where several implementations double it; the fitted values of a model
with k - 1 free slopes on an indicator of variance c(1 - c) give c(1 - c) chi2_{k-1}, and the
tests check that a sample of the original scores about 1.) Gradient boosting
would find more, but its null expectation has no closed form; the logistic model's does.

**Information loss, for releases that keep the original's rows** (generalized, perturbed,
suppressed): with ``information_loss: auto`` a release counts as row-aligned when it has the
original's number of rows and, in the median column, row i of the release agrees with row i of
the original beyond chance (Cohen's kappa >= 0.5 for a category, Pearson's r >= 0.5 for a
number); a synthetic release's rows are not the original's and these figures are then "not
applicable" with that reason.

* ``il1s`` (sdcMicro's ``dUtility(method = "IL1s")``): 1/(p n) sum_j sum_i
  |x_ij - z_ij| / (sqrt(2) S_j) over the p numeric columns, S_j the original's standard
  deviation (n - 1), cells missing in either table left out;
* ``suppressed_share``: released cells suppressed (missing or a suppression token) where the
  original had a value, over the original's values; ``suppressed.<column>`` per column;
* ``generalization_intensity`` (ARX's generalization intensity, the loss per cell averaged
  over the compared columns): a released interval costs its width over the column's range,
  a masked label the share of its characters masked, a suppressed cell 1, a value kept 0;
  ``granularity.<column>`` per column (for a column released as is: its suppressed cells).
  A hierarchy's labels carry no level riskgate can read: such a column is left out and named.

Per-record arrays would say nothing the figures do not; the family writes none.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import combinations
from typing import Any, Literal

import numpy as np
from pydantic import Field

from .. import progress
from ..generalization import parse_interval
from ..results import MeasureResult, Status
from ..roles import Roles
from ..threads import start_models
from .family import MeasureFamily, MeasureInputs, Params, compared_columns

UTILITY = ("column_shapes", "column_pair_trends", "pmse", "pmse_ratio")
ROW_ALIGNED = ("il1s", "suppressed_share", "generalization_intensity")
#: figures where a higher value means a worse release (the rest: higher is better)
WORSE_WHEN_HIGHER = {"pmse", "pmse_ratio", "il1s", "suppressed_share",
                     "generalization_intensity"}
ALIGNED_AT = 0.5


class UtilityParams(Params):
    """Parameters of ``utility``."""

    columns: list[str] | None = Field(
        None, description="columns compared (default: quasi-identifiers and sensitive)")
    pair_bins: Literal["original_deciles", "sdmetrics"] = Field(
        "original_deciles", description="how a number in a mixed pair is binned")
    propensity_rows: int = Field(100_000, ge=100,
                                 description="rows of each table in the propensity model")
    max_levels: int = Field(20, ge=1, le=1000,
                            description="one-hot levels per category in the propensity model")
    information_loss: Literal["auto", "on", "off"] = Field(
        "auto", description="IL1s, suppression and generalization for row-aligned releases")
    worst_pairs: int = Field(10, ge=0, le=1000, description="pairs listed in the details")
    risk_figure: str | None = Field(
        None, description="the risk axis of the report's R-U map (default: the highest "
                          "attack risk of the run)")
    column_fields = ("columns",)


# ---------------------------------------------------------------------------------------------
# column shapes and pair trends, on jointly encoded codes


def _freq(codes: np.ndarray, k: int, keep_missing: bool = False) -> np.ndarray:
    """Relative frequencies of codes 0..k-1 (and missing, last, with ``keep_missing``)."""
    if keep_missing:
        counts = np.bincount(codes + 1, minlength=k + 1).astype(np.float64)
        counts = np.roll(counts, -1)
    else:
        counts = np.bincount(codes[codes >= 0], minlength=k).astype(np.float64)
    total = counts.sum()
    return counts / total if total else counts


def ks_complement(a: np.ndarray, b: np.ndarray, k: int) -> float | None:
    """1 - max |F_a - F_b| for value-ordered codes (missing = -1 left out)."""
    fa, fb = _freq(a, k), _freq(b, k)
    if not fa.any() or not fb.any():
        return None
    return float(1.0 - np.max(np.abs(np.cumsum(fa) - np.cumsum(fb))))


def tv_complement(a: np.ndarray, b: np.ndarray, k: int) -> float | None:
    """1 - 1/2 sum |p_a - p_b| over codes (missing left out)."""
    fa, fb = _freq(a, k), _freq(b, k)
    if not fa.any() or not fb.any():
        return None
    return float(1.0 - 0.5 * np.abs(fa - fb).sum())


def _joint(a1: np.ndarray, a2: np.ndarray, b1: np.ndarray, b2: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, int]:
    """Joint codes of two code columns in two tables (missing, -1, a value of its own)."""
    k2 = int(max(a2.max(initial=-1), b2.max(initial=-1))) + 2
    ka = (a1.astype(np.int64) + 1) * k2 + (a2 + 1)
    kb = (b1.astype(np.int64) + 1) * k2 + (b2 + 1)
    k1 = int(max(a1.max(initial=-1), b1.max(initial=-1))) + 2
    if k1 * k2 <= 4_000_000:
        return ka, kb, k1 * k2
    keys, inv = np.unique(np.concatenate([ka, kb]), return_inverse=True)
    return inv[:len(ka)], inv[len(ka):], len(keys)


def contingency_similarity(a1: np.ndarray, a2: np.ndarray, b1: np.ndarray, b2: np.ndarray
                           ) -> float:
    """1 - TVD of the joint frequencies of (a1, a2) and (b1, b2), missing a value of its own."""
    ja, jb, k = _joint(a1, a2, b1, b2)
    fa = np.bincount(ja, minlength=k) / len(ja)
    fb = np.bincount(jb, minlength=k) / len(jb)
    return float(1.0 - 0.5 * np.abs(fa - fb).sum())


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    if len(x) < 2:
        return None
    dx, dy = x - x.mean(), y - y.mean()
    den = math.sqrt(float(dx @ dx) * float(dy @ dy))
    if den == 0:
        return None
    return max(-1.0, min(1.0, float(dx @ dy) / den))


def correlation_similarity(ax: np.ndarray, ay: np.ndarray, bx: np.ndarray, by: np.ndarray
                           ) -> tuple[float | None, float | None, float | None]:
    """(1 - |rho_a - rho_b| / 2, rho_a, rho_b); None when a correlation is undefined."""
    ra, rb = _pearson(ax, ay), _pearson(bx, by)
    if ra is None or rb is None:
        return None, ra, rb
    return 1.0 - abs(ra - rb) / 2.0, ra, rb


def decile_bins(reference: np.ndarray, *values: np.ndarray) -> list[np.ndarray]:
    """Each of ``values`` binned at the deciles of ``reference`` (missing: -1)."""
    ref = reference[~np.isnan(reference)]
    edges = np.unique(np.quantile(ref, np.linspace(0.1, 0.9, 9))) if len(ref) else np.array([])
    out = []
    for v in values:
        b = np.searchsorted(edges, v, side="right").astype(np.int32)
        b[np.isnan(v)] = -1
        out.append(b)
    return out


def sdmetrics_bins(values: np.ndarray) -> np.ndarray:
    """SDMetrics' QualityReport binning: ten equal-width bins of the table's own range
    (``np.histogram_bin_edges``), ``np.digitize`` (so the maximum and NaN fall in bin 11)."""
    present = values[~np.isnan(values)]
    if not len(present):
        return np.full(len(values), 11, dtype=np.int32)
    edges = np.histogram_bin_edges(present, bins=10)
    return np.digitize(values, edges).astype(np.int32)


@dataclass(frozen=True)
class _Col:
    name: str
    numeric: bool
    codes: np.ndarray
    values: np.ndarray | None
    k: int


def _cols(table: Any, columns: Sequence[str]) -> list[_Col]:
    out = []
    for c in columns:
        col = table.column(c)
        out.append(_Col(c, col.values is not None, col.codes, col.values, col.n_categories))
    return out


def shapes(a: list[_Col], b: list[_Col]) -> dict[str, float | None]:
    """Column -> its shape score (KS or TV complement)."""
    return {x.name: (ks_complement if x.numeric else tv_complement)(x.codes, y.codes, x.k)
            for x, y in zip(a, b, strict=True)}


def pair_trends(a: list[_Col], b: list[_Col], pair_bins: str) -> list[dict[str, Any]]:
    """Per pair: its score, the metric and (two numbers) both correlations."""
    out = []
    binned: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # a number's bins, once per column
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.numeric and x.values is not None and y.values is not None:
            if pair_bins == "sdmetrics":
                binned[i] = (sdmetrics_bins(x.values), sdmetrics_bins(y.values))
            else:
                bx, by = decile_bins(x.values, x.values, y.values)
                binned[i] = (bx, by)
    for i, j in combinations(range(len(a)), 2):
        (a1, b1), (a2, b2) = (a[i], b[i]), (a[j], b[j])
        row: dict[str, Any] = {"columns": [a1.name, a2.name]}
        if a1.numeric and a2.numeric:
            assert a1.values is not None and a2.values is not None
            assert b1.values is not None and b2.values is not None
            score, ra, rb = correlation_similarity(a1.values, a2.values, b1.values, b2.values)
            row.update(metric="correlation", score=score, original=ra, release=rb)
        else:
            (ca1, cb1), (ca2, cb2) = (binned.get(k, (a[k].codes, b[k].codes)) for k in (i, j))
            row.update(metric="contingency",
                       score=contingency_similarity(ca1, ca2, cb1, cb2))
        out.append(row)
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


# ---------------------------------------------------------------------------------------------
# propensity


def _design(tables: Sequence[list[_Col]], max_levels: int) -> list[np.ndarray]:
    """The logistic model's feature matrices of several tables (one encoding for all)."""
    blocks: list[list[np.ndarray]] = [[] for _ in tables]
    for j in range(len(tables[0])):
        cols = [t[j] for t in tables]
        if cols[0].numeric:
            vals = [c.values for c in cols]
            assert all(v is not None for v in vals)
            allv = np.concatenate([v for v in vals if v is not None])
            present = allv[~np.isnan(allv)]
            mu = float(present.mean()) if len(present) else 0.0
            sd = float(present.std()) if len(present) else 0.0
            sd = sd if sd > 0 else 1.0
            any_missing = bool(np.isnan(allv).any())
            for blk, v in zip(blocks, vals, strict=True):
                assert v is not None
                z = np.where(np.isnan(v), 0.0, (v - mu) / sd)
                blk.append(z[:, None])
                if any_missing:
                    blk.append(np.isnan(v).astype(np.float64)[:, None])
        else:
            allc = np.concatenate([c.codes for c in cols])
            levels, counts = np.unique(allc, return_counts=True)
            order = levels[np.argsort(-counts, kind="stable")]
            kept = order[1:max_levels + 1]  # the most frequent level is the reference
            other = len(order) > max_levels + 1
            for blk, c in zip(blocks, cols, strict=True):
                onehot = (c.codes[:, None] == kept[None, :]).astype(np.float64)
                blk.append(onehot)
                if other:
                    blk.append((~np.isin(c.codes, order[:max_levels + 1]))
                               .astype(np.float64)[:, None])
    return [np.hstack(b) if b else np.zeros((len(t[0].codes), 0)) for b, t in
            zip(blocks, tables, strict=True)]


def _sample(cols: list[_Col], rows: int, rng: np.random.Generator) -> list[_Col]:
    n = len(cols[0].codes)
    if n <= rows:
        return cols
    idx = np.sort(rng.choice(n, size=rows, replace=False))
    return [_Col(c.name, c.numeric, c.codes[idx],
                 None if c.values is None else c.values[idx], c.k) for c in cols]


def propensity(a: list[_Col], b: list[_Col], *, rows: int, max_levels: int, seed: int
               ) -> dict[str, float | None]:
    """pMSE of a logistic model telling ``a`` from ``b`` and its ratio to the null."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(seed)
    a, b = _sample(a, rows, rng), _sample(b, rows, rng)
    xa, xb = _design([a, b], max_levels)
    x = np.vstack([xa, xb])
    y = np.concatenate([np.zeros(len(xa)), np.ones(len(xb))])
    n = len(y)
    c = len(xb) / n
    k = x.shape[1] + 1
    if x.shape[1] == 0:
        return {"pmse": 0.0, "pmse_ratio": None, "parameters": k}
    # Newton steps on the Cholesky factor: exact in ~10 iterations for a few hundred columns
    model = LogisticRegression(C=1e4, solver="newton-cholesky", max_iter=100, tol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(x, y)
    p = model.predict_proba(x)[:, 1]
    pmse = float(np.mean((p - c) ** 2))
    null = (k - 1) * c * (1 - c) / n
    return {"pmse": pmse, "pmse_ratio": pmse / null if null > 0 else None, "parameters": k}


# ---------------------------------------------------------------------------------------------
# information loss (row-aligned releases)


def _kappa(a: np.ndarray, b: np.ndarray, k: int) -> float:
    agree = float(np.mean(a == b))
    chance = float(_freq(a, k, True) @ _freq(b, k, True))
    return 1.0 if chance >= 1 else (agree - chance) / (1 - chance)


def row_agreement(a: list[_Col], b: list[_Col]) -> float:
    """The median over columns of row i's agreement beyond chance (kappa or Pearson's r)."""
    scores = []
    for x, y in zip(a, b, strict=True):
        if x.numeric and x.values is not None and y.values is not None:
            r = _pearson(x.values, y.values)
            scores.append(0.0 if r is None else r)
        else:
            scores.append(_kappa(x.codes, y.codes, x.k))
    return float(np.median(scores)) if scores else 0.0


def il1s(x: np.ndarray, z: np.ndarray) -> float | None:
    """sdcMicro's IL1s: 1/(p n) sum |x - z| / (sqrt(2) S_j); x, z are (n, p) arrays."""
    if x.size == 0:
        return None
    n, p = x.shape
    sd = np.nanstd(x, axis=0, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cells = np.abs(x - z) / (math.sqrt(2) * sd)
    cells[~np.isfinite(cells)] = np.nan
    return float(np.nansum(cells) / (n * p))


def label_loss(label: str, lo: float, hi: float) -> float | None:
    """The generalization cost of one released label (see the module docstring)."""
    interval = parse_interval(label)
    if interval is not None:
        if hi <= lo:
            return 0.0
        width = min(interval.hi, hi) - max(interval.lo, lo)
        return float(min(1.0, max(0.0, width / (hi - lo))))
    stripped = label.rstrip("*")
    if stripped != label:
        return (len(label) - len(stripped)) / len(label)
    return None


def information_loss(inputs: MeasureInputs, columns: Sequence[str]) -> dict[str, Any]:
    """IL1s, suppression and generalization intensity of a row-aligned release."""
    assert inputs.original is not None
    o, r = inputs.original, inputs.released
    numeric = [c for c in columns if o.column(c).values is not None]
    x = np.column_stack([o.column(c).numbers() for c in numeric]) if numeric else np.empty((0, 0))
    z = np.column_stack([r.column(c).numbers() for c in numeric]) if numeric else np.empty((0, 0))
    wild = inputs.wildcards(columns)
    suppressed: dict[str, float] = {}
    granularity: dict[str, float] = {}
    unreadable: list[str] = []
    total_sup, total_orig = 0, 0
    for c in columns:
        oc, rc = o.column(c), r.column(c)
        had = ~oc.missing
        gone = rc.missing.copy()
        if wild.get(c, -1) >= 0:
            gone |= rc.codes == wild[c]
        n_had = int(had.sum())
        n_gone = int((gone & had).sum())
        suppressed[c] = n_gone / n_had if n_had else 0.0
        total_sup += n_gone
        total_orig += n_had
        how = (inputs.alignment.columns[c].how if inputs.alignment is not None
               and c in inputs.alignment.columns else "as is")
        if how == "as is" or rc.values is not None:
            granularity[c] = float(gone.mean())  # released as is: its suppressed cells
            continue
        labels = [str(v) for v in rc.categories]
        bounds = [parse_interval(v) for v in labels]
        finite = [x for iv in bounds if iv is not None for x in (iv.lo, iv.hi) if math.isfinite(x)]
        lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
        costs = np.array([np.nan if (lc := label_loss(v, lo, hi)) is None else lc
                          for v in labels] + [1.0])
        if c in wild and wild[c] >= 0:
            costs[wild[c]] = 1.0
        cell = costs[rc.codes]  # missing (-1) takes the last entry: suppressed, cost 1
        kept = cell[~rc.missing]
        if kept.size and np.isnan(kept).mean() > 0.5:
            unreadable.append(c)
            continue
        cell = np.where(np.isnan(cell), 0.0, cell)  # a label kept as it was costs nothing
        granularity[c] = float(np.mean(cell))
    return {
        "il1s": il1s(x, z), "numeric": numeric,
        "suppressed_share": total_sup / total_orig if total_orig else 0.0,
        "suppressed": suppressed,
        "generalization_intensity": (float(np.mean(list(granularity.values())))
                                     if granularity else 0.0),
        "granularity": granularity, "unreadable": unreadable,
    }


# ---------------------------------------------------------------------------------------------
# the family


def compare(original: Any, other: Any, columns: Sequence[str], params: UtilityParams, seed: int
            ) -> dict[str, Any]:
    """Shapes, pair trends and propensity of ``other`` against ``original``."""
    a, b = _cols(original, columns), _cols(other, columns)
    with progress.scope("utility: column shapes"):
        per_column = shapes(a, b)
    with progress.scope("utility: pair trends"):
        pairs = pair_trends(a, b, params.pair_bins)
    with progress.scope("utility: propensity"):
        prop = propensity(a, b, rows=params.propensity_rows, max_levels=params.max_levels,
                          seed=seed)
    return {"shapes": per_column, "pairs": pairs, "propensity": prop,
            "column_shapes": _mean(list(per_column.values())),
            "column_pair_trends": _mean([p["score"] for p in pairs])}


def figure_directions(columns: Sequence[str]) -> dict[str, bool]:
    """figure -> higher is riskier; for utility figures read: higher is worse."""
    out = {k: k in WORSE_WHEN_HIGHER for k in (*UTILITY, *ROW_ALIGNED)}
    out.update({f"{k}_control": k in WORSE_WHEN_HIGHER for k in UTILITY})
    out.update({f"shape.{c}": False for c in columns})
    out.update({f"suppressed.{c}": True for c in columns})
    out.update({f"granularity.{c}": True for c in columns})
    out["row_agreement"] = False
    return out


def _columns(params: UtilityParams, roles: Roles, table: Any) -> list[str]:
    return compared_columns(params.columns, roles, table)


def utility(inputs: MeasureInputs, params: UtilityParams) -> MeasureResult:
    """The family's computation (see the module docstring)."""
    assert inputs.original is not None
    cols = _columns(params, inputs.released.roles, inputs.released)
    if not cols:
        return MeasureResult(measure="utility", figures={}, status=Status.NOT_COMPUTABLE,
                             reason="no column to compare: give measures.utility.columns")
    release = compare(inputs.original, inputs.released, cols, params, inputs.seed)
    figures: dict[str, float | int | None] = {
        "column_shapes": release["column_shapes"],
        "column_pair_trends": release["column_pair_trends"],
        "pmse": release["propensity"]["pmse"],
        "pmse_ratio": release["propensity"]["pmse_ratio"],
    }
    figures.update({f"shape.{c}": v for c, v in release["shapes"].items()})
    unavailable: dict[str, str] = {}
    details: dict[str, Any] = {"columns": cols, "pair_bins": params.pair_bins,
                               "propensity_parameters": release["propensity"]["parameters"]}
    ranked = sorted((p for p in release["pairs"] if p["score"] is not None),
                    key=lambda p: p["score"])
    details["worst_pairs"] = ranked[:params.worst_pairs]
    details["pairs_left_out"] = [p["columns"] for p in release["pairs"] if p["score"] is None]
    if inputs.control is not None:
        with progress.scope("utility: control yardstick"):
            ctrl = compare(inputs.original, inputs.control, cols, params, inputs.seed + 1)
        figures.update({"column_shapes_control": ctrl["column_shapes"],
                        "column_pair_trends_control": ctrl["column_pair_trends"],
                        "pmse_control": ctrl["propensity"]["pmse"],
                        "pmse_ratio_control": ctrl["propensity"]["pmse_ratio"]})
        details["shapes_control"] = ctrl["shapes"]
    else:
        for k in UTILITY:
            unavailable[f"{k}_control"] = ("no control table: configure 'control' to see what "
                                           "a fresh sample of the population scores")
    aligned_rows = inputs.original.n == inputs.released.n
    agreement = (row_agreement(_cols(inputs.original, cols), _cols(inputs.released, cols))
                 if aligned_rows else 0.0)
    figures["row_agreement"] = agreement if aligned_rows else None
    applies = {"on": aligned_rows, "off": False,
               "auto": aligned_rows and agreement >= ALIGNED_AT}[params.information_loss]
    if applies:
        with progress.scope("utility: information loss"):
            il = information_loss(inputs, cols)
        figures.update({"il1s": il["il1s"], "suppressed_share": il["suppressed_share"],
                        "generalization_intensity": il["generalization_intensity"]})
        figures.update({f"suppressed.{c}": v for c, v in il["suppressed"].items()})
        figures.update({f"granularity.{c}": v for c, v in il["granularity"].items()})
        if il["il1s"] is None:
            unavailable["il1s"] = "no numeric column in both tables"
        details["information_loss"] = {"numeric": il["numeric"],
                                       "hierarchy_columns_left_out": il["unreadable"]}
    else:
        why = ("information_loss is off" if params.information_loss == "off" else
               "not applicable: the release does not keep the original's rows ("
               + ("its row count differs" if not aligned_rows else
                  f"row agreement {agreement:.2f} < {ALIGNED_AT}: a synthetic release")
               + "); use the column shapes, pair trends and propensity")
        for k in ROW_ALIGNED:
            unavailable[k] = why
        details["information_loss"] = {"not_applicable": why}
    for name in figure_directions(cols):
        if figures.get(name) is None and name not in unavailable:
            unavailable[name] = _why_missing(name, details)
    return MeasureResult(
        measure="utility", figures=figures,
        parameters=params.model_dump(),
        details=details, unavailable=unavailable)


def _why_missing(name: str, details: dict[str, Any]) -> str:
    """Why a declared figure has no value (for the policy's message)."""
    il = details.get("information_loss") or {}
    if "not_applicable" in il and name.split(".")[0] in ("suppressed", "granularity"):
        return str(il["not_applicable"])
    if name.startswith("granularity."):
        return ("the column's labels come from a hierarchy, whose levels riskgate cannot "
                "read: its generalization is left out")
    if name.startswith("shape."):
        return "the column has no value in the original or the release"
    if name == "row_agreement":
        return "the release has another number of rows than the original"
    return "undefined on these tables (a constant or empty column)"


def _run(inputs: MeasureInputs, params: UtilityParams) -> MeasureResult:
    return utility(inputs, params)


FAMILY = MeasureFamily(
    name="utility",
    title="Utility",
    section="utility",
    params=UtilityParams,
    run=_run,
    figures=lambda p, roles: figure_directions(compared_columns(p.columns, roles)),
    needs=("original",),
    reads=("control",),
    fits_models=True,
    start_up=partial(start_models, "sklearn.linear_model"),
    axis="utility",
    how_to_read=(
        "What the release keeps of the original, beside what it risks. Column shapes compare "
        "each column's distribution (1 = identical), pair trends each pair's correlation or "
        "joint frequencies, and the propensity figures how well a model tells release rows "
        "from original rows (pMSE ratio about 1: indistinguishable from a sample). The "
        "control's figures are what a fresh sample of the population scores: a release "
        "near them keeps what sampling keeps. For releases that keep the original's rows, "
        "IL1s, the suppressed share and the generalization intensity say what was lost."),
    advice=(
        "The release is not useful enough: it lost too much of the original. Generalize or "
        "suppress less (a coarser column instead of many suppressed cells), tune the "
        "synthesizer on the worst columns and pairs the report lists, or relax the utility "
        "check if the release's purpose allows it."),
)


#: the risk axis of the R-U map when ``risk_figure`` is not given: the highest of these
RISK_AXIS = ("singling_out.risk", "linkability.risk", "inference.risk")
RISK_AXIS_FALLBACK = ("membership.advantage", "reid.pRa", "sdc.global_risk")


def risk_axis(figures: Mapping[str, Mapping[str, Any]], chosen: str | None = None
              ) -> tuple[str, float] | None:
    """(figure name, value) of a run's risk for the R-U map (Duncan et al. 2001): ``chosen``,
    else the highest attack risk (Anonymeter's three), else the first of membership advantage,
    prosecutor average risk and sdcMicro's global risk that the run has."""

    def value(name: str) -> float | None:
        fam, _, fig = name.partition(".")
        v = (figures.get(fam) or {}).get(fig)
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    if chosen:
        v = value(chosen)
        return None if v is None else (chosen, v)
    attacks = [(n, v) for n in RISK_AXIS if (v := value(n)) is not None]
    if attacks:
        return max(attacks, key=lambda p: p[1])
    for name in RISK_AXIS_FALLBACK:
        v = value(name)
        if v is not None:
            return name, v
    return None
