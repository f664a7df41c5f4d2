"""Individual, global and household risk from sample weights (sdcMicro; docs/measures.md 3.3-3.5).

The Benedetti-Franconi model treats the population frequency F of a record's key given its
sample frequency f as negative binomial with success probability p = f/F, and takes the
record's risk as r = E[1/F | f].

* Approximate closed forms (sdcMicro ``indivRisk(method="approx")``, the default of
  ``measure_risk``), with p = fk/Fk:
  f = 1: r = p/(1-p) ln(1/p);  f = 2: r = p/(1-p) - (p/(1-p))^2 ln(1/p);  f > 2: r = p/(f - (1-p)).
* Exact: r = sum_{h>=f} (1/h) C(h-1, f-1) p^f (1-p)^(h-f) = int_0^1 s^(f-1) p/(p + (1-p)s) ds,
  evaluated by a damped recurrence (see ``_exact``), finite and accurate for every f; sdcMicro's
  alternating series overflows to NaN for large f (fk = 176 in testdata).
* r = 1/f when f = F (census, all weights 1) or when no weights are given.
* Global risk: ER = sum_i r_i expected re-identifications, global_risk = ER/n.
* Household risk: r_h = 1 - prod_{i in h} (1 - r_i), given to every member; hier_ER sums it over
  persons.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
from pydantic import Field

from ..equivalence import ClassFrequencies, PopulationSource
from ..errors import ConfigError, InputError, where
from ..results import MeasureResult
from ..stats import RISK_BAND_EDGES, risk_band_counts
from .family import MeasureFamily, MeasureInputs, Params

DEFAULT_MAX_GLOBAL_RISK = 0.01


class RiskMethod(str, Enum):
    APPROX = "approx"  # sdcMicro's default closed forms
    EXACT = "exact"  # the exact series, computed stably


class FractionalFk(str, Enum):
    """What to do with non-integer fk (NA wildcard with alpha < 1, docs/measures.md 3.2)."""

    EXACT = "exact"  # the exact formula, defined for any real f > 0 (riskgate's default)
    SDCMICRO = "sdcmicro"  # sdcMicro's approx: 0 for 1 < f < 2 (under-states the risk)


def individual_risk(
    fk: np.ndarray,
    Fk: np.ndarray,
    *,
    method: RiskMethod | str = RiskMethod.APPROX,
    weighted: bool = True,
    qual: float = 1.0,
    fractional: FractionalFk | str = FractionalFk.EXACT,
) -> np.ndarray:
    """Per-record Benedetti-Franconi risk r = E[1/F | f] (docs/measures.md 3.3; sdcMicro
    ``indivRisk``).

    Args:
        fk: sample frequency of each record's key.
        Fk: estimated population frequency (sum of weights in the class).
        method: ``approx`` (sdcMicro's closed forms) or ``exact`` (the series, computed stably).
        weighted: False gives r = 1/fk (sdcMicro's ``measure_risk`` without weights).
        qual: multiplier of the risk (sdcMicro's ``qual``, default 1).
        fractional: treatment of non-integer fk under the approx method (see FractionalFk).

    Returns:
        float64 array of risks in (0, 1].
    """
    method = RiskMethod(method)
    fractional = FractionalFk(fractional)
    f = np.asarray(fk, dtype=np.float64)
    F = np.asarray(Fk, dtype=np.float64)
    if f.shape != F.shape:
        raise ValueError("fk and Fk must have the same shape")
    if (f <= 0).any() or (F < f * (1 - 1e-12)).any():
        raise InputError("individual risk needs 0 < fk <= Fk for every record; the weights "
                         "give a population frequency below the sample frequency")
    if not weighted:
        return qual / f
    p = np.minimum(f / F, 1.0)
    r = np.empty_like(p)
    census = f == F
    r[census] = 1.0 / f[census]
    rest = ~census
    if method is RiskMethod.EXACT:
        r[rest] = _exact(f[rest], p[rest])
        return qual * r
    fr, pr = f[rest], p[rest]
    odds = pr / (1.0 - pr)
    log_inv = -np.log(pr)
    out = np.zeros_like(pr)
    one = fr == 1
    two = fr == 2
    more = fr > 2
    out[one] = odds[one] * log_inv[one]
    out[two] = odds[two] - odds[two] ** 2 * log_inv[two]
    out[more] = pr[more] / (fr[more] - (1.0 - pr[more]))
    frac = (fr != np.round(fr)) & (fr < 2)
    if fractional is FractionalFk.EXACT and frac.any():
        out[frac] = _exact(fr[frac], pr[frac])
    r[rest] = out
    return qual * r


def _exact(f: np.ndarray, p: np.ndarray) -> np.ndarray:
    """E[1/F | f] without cancellation or overflow, for any real f >= 1 and 0 < p < 1.

    With s = p t/(1 - (1-p) t) the series becomes r = int_0^1 s^(f-1) p/(p + q s) ds (q = 1-p),
    i.e. r = (p/q) I_f with I_f = int_0^1 s^(f-1)/(s + a) ds, a = p/q. Then
    I_f = 1/(f-1) - a I_(f-1), started from I_1 = ln(1/p) (integer f) or from the positive series
    for the fractional part. For p <= 1/2 (a <= 1) this forward recurrence damps errors (factor
    a per step). For p > 1/2 the positive series (p/f) sum_j q^j j!/((f+1)...(f+j)) has ratio
    below 1/2 and converges in a few dozen terms.
    """
    from scipy.special import hyp2f1

    f = np.asarray(f, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    out = np.empty_like(p)
    big = p > 0.5
    if big.any():
        out[big] = _series(f[big], p[big])
    small = ~big
    if small.any():
        fs, ps = f[small], p[small]
        q = 1.0 - ps
        a = ps / q
        base = fs - np.floor(fs) + 1.0  # in [1, 2): I_base by the series, then recur upward
        whole = base == 1.0
        I = np.empty_like(ps)
        I[whole] = -np.log(ps[whole])
        if (~whole).any():
            # I_b = (q/b) 2F1(1, 1; b+1; q), b in (1, 2) (scipy is accurate for c < 3)
            b = base[~whole]
            I[~whole] = hyp2f1(1.0, 1.0, b + 1.0, q[~whole]) * q[~whole] / b
        steps = (fs - base).astype(np.int64)
        order = np.argsort(steps, kind="stable")
        steps_sorted = steps[order]
        I_sorted, a_sorted, b_sorted = I[order], a[order], base[order]
        start = 0
        for k in range(1, int(steps_sorted[-1]) + 1 if steps_sorted.size else 1):
            while start < steps_sorted.size and steps_sorted[start] < k:
                start += 1
            sl = slice(start, None)
            # I_(b+k) = 1/(b+k-1) - a I_(b+k-1)
            I_sorted[sl] = 1.0 / (b_sorted[sl] + k - 1.0) - a_sorted[sl] * I_sorted[sl]
        I[order] = I_sorted
        out[small] = ps / q * I
    return out


def _series(f: np.ndarray, p: np.ndarray, terms: int = 80) -> np.ndarray:
    """(p/f) sum_j t_j, t_0 = 1, t_j = t_(j-1) q j/(f+j): positive terms, ratio < q < 1/2."""
    q = 1.0 - p
    t = np.ones_like(p)
    total = np.ones_like(p)
    for j in range(1, terms + 1):
        t = t * q * j / (f + j)
        total += t
    return p / f * total


class ThresholdStatus(str, Enum):
    FOUND = "found"  # a risk level tau meets the target
    ALREADY_BELOW = "already_below"  # ER is already below the target: no record must change
    NONE_QUALIFIES = "none_qualifies"  # no level meets the target (sdcMicro returns 0)


@dataclass(frozen=True)
class GlobalRisk:
    """Global risk and the micro-Argus threshold (docs/measures.md 3.4)."""

    ER: float
    global_risk: float
    threshold: float
    threshold_status: ThresholdStatus
    records_above_threshold: int
    max_global_risk: float


def global_risk(risk: np.ndarray, max_global_risk: float = DEFAULT_MAX_GLOBAL_RISK,
                multiplicity: np.ndarray | None = None) -> GlobalRisk:
    """ER = sum r, global_risk = ER/n, and the risk threshold meeting ``max_global_risk``.

    Threshold rule (sdcMicro ``measure_threshold``, micro-Argus): with target T = max_global_risk
    * n, if sum r < T the target is already met (threshold = max r; sdcMicro prints NA). Else the
    threshold is the largest distinct risk value tau with
    sum_{r_i <= tau} r_i + tau * #{r_i > tau} < T (records above tau would have their risk
    brought down to tau); 0 if no value qualifies. With ``multiplicity`` each row stands for
    that many records with its risk.
    """
    if not 0.0 < max_global_risk < 1.0:
        raise ConfigError(f"max_global_risk must lie in (0, 1), got {max_global_risk}")
    r = np.asarray(risk, dtype=np.float64)
    m = None if multiplicity is None else np.asarray(multiplicity, dtype=np.float64)
    n = r.size if m is None else int(m.sum())
    ER = float(r.sum()) if m is None else float(np.dot(m, r))
    target = max_global_risk * n
    if ER < target:
        tau = float(r.max())
        status = ThresholdStatus.ALREADY_BELOW
    else:
        order = np.argsort(r, kind="stable")
        s = r[order]
        w = np.ones_like(s) if m is None else m[order]
        csum = np.cumsum(s * w) if m is not None else np.cumsum(s)
        cw = np.cumsum(w)
        last = np.flatnonzero(np.append(s[1:] != s[:-1], True))  # last index of each value
        capped = csum[last] + s[last] * (n - cw[last])
        ok = np.flatnonzero(capped < target)
        if ok.size:
            tau = float(s[last[ok[-1]]])
            status = ThresholdStatus.FOUND
        else:
            tau = 0.0
            status = ThresholdStatus.NONE_QUALIFIES
    above = r > tau
    return GlobalRisk(ER=ER, global_risk=ER / n, threshold=tau, threshold_status=status,
                      records_above_threshold=int(np.count_nonzero(above)) if m is None
                      else int(m[above].sum()),
                      max_global_risk=max_global_risk)


def household_risk(risk: np.ndarray, household: np.ndarray,
                   weights: np.ndarray | None = None, table: str = "table",
                   column: str = "household", multiplicity: np.ndarray | None = None
                   ) -> np.ndarray:
    """Per-person household risk r_h = 1 - prod_{i in h}(1 - r_i) (docs/measures.md 3.5).

    Computed as -expm1(sum log1p(-r_i)) per household, stable for tiny risks and exact at r = 1.

    Args:
        risk: per-record individual risk.
        household: per-record household codes (int, -1 = missing).
        weights: per-record sample weights; members of one household must share one weight.
        multiplicity: records per row, when rows stand for several identical records.

    Raises:
        InputError: a missing household id, or a household whose members have different weights.
    """
    hh = np.asarray(household)
    if (hh < 0).any():
        rows = np.flatnonzero(hh < 0)[:5].tolist()
        raise InputError(f"{where(table, column)}: {int((hh < 0).sum())} record(s) have no "
                         f"household id (rows {rows}); give every record a household id")
    import pandas as pd

    ids, uniq = pd.factorize(hh)
    k = len(uniq)
    if weights is not None:
        wmin = np.full(k, np.inf)
        wmax = np.full(k, -np.inf)
        np.minimum.at(wmin, ids, weights)
        np.maximum.at(wmax, ids, weights)
        bad = np.flatnonzero(~np.isclose(wmin, wmax, rtol=1e-9, atol=0.0))
        if bad.size:
            rows = np.flatnonzero(np.isin(ids, bad))[:5].tolist()
            raise InputError(
                f"{where(table, column)}: {bad.size} household(s) have members with different "
                f"sample weights (rows {rows}); household risk needs one weight per household. "
                "Fix the weights or drop the household role"
            )
    with np.errstate(divide="ignore"):  # r = 1 gives log 0 = -inf, and r_h = 1 exactly
        keep = np.log1p(-np.minimum(risk, 1.0))
        if multiplicity is not None:
            keep = keep * multiplicity
        log_keep = np.bincount(ids, weights=keep, minlength=k)
    return (-np.expm1(log_keep))[ids]


def sdc_risk(
    freq: ClassFrequencies,
    *,
    household: np.ndarray | None = None,
    household_column: str | None = None,
    weights: np.ndarray | None = None,
    method: RiskMethod | str = RiskMethod.APPROX,
    max_global_risk: float = DEFAULT_MAX_GLOBAL_RISK,
    qual: float = 1.0,
    fractional: FractionalFk | str = FractionalFk.EXACT,
    table: str = "released",
) -> MeasureResult:
    """sdcMicro's ``measure_risk``: individual risk, global risk, threshold, household risk.

    Figures: ``ER``, ``global_risk``, ``global_risk_pct``, ``threshold``,
    ``records_above_threshold``, and with households ``hier_ER``, ``hier_risk``,
    ``hier_risk_pct``. Per record: ``risk`` and ``hier_risk``.
    """
    weighted = freq.population is PopulationSource.WEIGHTS
    # a record's risk is a function of its class's fk and Fk: computed once per class and
    # spread to the records (the same numbers, without ten per-record temporaries)
    r = individual_risk(freq.class_fk, freq.class_population, method=method, weighted=weighted,
                        qual=qual, fractional=fractional)[freq.class_id]
    mult = freq.multiplicity
    g = global_risk(r, max_global_risk, mult)
    n = freq.n
    figures: dict[str, float | int | None] = {
        "ER": g.ER, "global_risk": g.global_risk, "global_risk_pct": 100.0 * g.global_risk,
        "threshold": g.threshold, "records_above_threshold": g.records_above_threshold,
        "max_individual_risk": float(r.max()),
    }
    per_record = {"risk": r}
    unavailable: dict[str, str] = {}
    warnings = []
    details: dict[str, object] = {}
    if household is not None:
        try:
            hr = household_risk(r, household, weights, table, household_column or "household",
                                mult)
        except InputError as exc:
            # individual and global risk stand; the household figures are not computable
            hr = None
            figures.update({"hier_ER": None, "hier_risk": None, "hier_risk_pct": None})
            details["hier_risk_not_computable"] = str(exc)
            unavailable.update({k: str(exc) for k in HOUSEHOLD_FIGURES})
            warnings.append(f"household risk not computable: {exc}")
        if hr is not None:
            hier_ER = float(hr.sum()) if mult is None else freq.total(hr)
            figures.update({"hier_ER": hier_ER, "hier_risk": hier_ER / n,
                            "hier_risk_pct": 100.0 * hier_ER / n})
            per_record["hier_risk"] = hr
    if not weighted:
        warnings.append("no sample weights: risk = 1/fk (sdcMicro's unweighted measure_risk)")
    return MeasureResult(
        measure="sdc",
        figures=figures,
        parameters={"method": RiskMethod(method).value, "max_global_risk": max_global_risk,
                    "qual": qual, "fractional_fk": FractionalFk(fractional).value,
                    "weighted": weighted, "quasi_identifiers": list(freq.quasi_identifiers),
                    "household": household_column, "missing": freq.missing.value,
                    "alpha": freq.alpha},
        per_record=per_record,
        details={"threshold_status": g.threshold_status.value,
                 "risk_histogram": _risk_histogram(r, mult), **details},
        warnings=tuple(warnings),
        unavailable=unavailable,
    )


def _risk_histogram(r: np.ndarray, multiplicity: np.ndarray | None = None
                    ) -> list[list[float | int]]:
    """Counts of records per risk band, for the report: [[upper edge, count], ...]."""
    return [[float(e), c] for e, c in zip(RISK_BAND_EDGES, risk_band_counts(r, multiplicity))]


FIGURES = ("ER", "global_risk", "global_risk_pct", "threshold", "records_above_threshold",
           "max_individual_risk")
HOUSEHOLD_FIGURES = ("hier_ER", "hier_risk", "hier_risk_pct")


class SdcParams(Params):
    """Parameters of ``sdc`` (sdcMicro's ``measure_risk``)."""

    method: RiskMethod = Field(RiskMethod.APPROX, description="approx (sdcMicro) or exact")
    max_global_risk: float = Field(DEFAULT_MAX_GLOBAL_RISK, gt=0.0, le=1.0,
                                   description="target global risk of the threshold rule")
    qual: float = Field(1.0, gt=0.0, description="multiplies every individual risk")
    fractional_fk: FractionalFk = Field(FractionalFk.EXACT,
                                        description="non-integer fk under the NA wildcard")


def _run(inputs: MeasureInputs, params: SdcParams) -> MeasureResult:
    table = inputs.released
    hh_col = table.roles.household
    return sdc_risk(inputs.frequencies(), household=table.column(hh_col).codes if hh_col else None,
                    household_column=hh_col, weights=table.weights(), method=params.method,
                    max_global_risk=params.max_global_risk, qual=params.qual,
                    fractional=params.fractional_fk, table=table.name)


def _figures(params: SdcParams, roles: object) -> dict[str, bool]:
    names = FIGURES + (HOUSEHOLD_FIGURES if getattr(roles, "household", None) else ())
    return {k: True for k in names}


def _alarm(result: MeasureResult) -> str | None:
    risk = result.figures.get("global_risk")
    if risk is not None and risk >= 0.5:
        return f"sdc: the expected share of re-identified records is {risk:.3g} (>= 0.5)"
    return None


FAMILY = MeasureFamily(
    name="sdc",
    title="Individual, global and household risk (sdcMicro)",
    section="sdc",
    params=SdcParams,
    run=_run,
    figures=_figures,
    alarm=_alarm,
    how_to_read=(
        "Individual risk is the probability that a record is re-identified when the attacker "
        "matches it against the population its sample weight stands for (sdcMicro). The global "
        "risk is the expected share of re-identified records; household risk is the chance that "
        "a household is re-identified through any of its members. A global risk at or below 1 % "
        "is a common target."),
    advice=(
        "Treat the riskiest records first (local suppression, recoding); sdcMicro's 'threshold' "
        "figure is the individual risk to bring them under. Household risk needs household-level "
        "treatment (e.g. drop household size or structure)."),
    scale="classes",
)
