"""Precision, recall, the precision-recall coefficient (PRC) and the Anonymity Loss Coefficient
(ALC) of the ALC paper (sections 3.5, 4.1, 4.2), as anonymity_loss_coefficient 1.0.32 computes them
(docs/measures.md 6), except that alpha, R_min and the absolute weight really take effect.

* Probabilistic precision (eq. 2): the midpoint of the Wilson score interval of the measured
  precision T / (T + F) (eq. 1), z = 1.959964 for 95 %; bounds rounded to 4 decimals as the
  package does, so precision = lo + (hi - lo) / 2.
* Recall: random mode R = (T + F) / (T + F + A) (eq. 3); pre-targeted mode relative to the whole
  population R = (N - A) N' / (N D) (eq. 4) or to the pre-targeted set R' = (N - A) / N (eq. 5).
* PRC (eq. 6): PRC = (1 - (log10 R / log10 R_min)^alpha) * P for R > R_min, else PRC = R;
  alpha = 3, R_min = 1e-4 by default; P and R clipped to [0, 1]; rounded to 4 decimals.
* ALC: ALC_abs = PRC_atk - PRC_base (eq. 7), ALC_rel = (PRC_atk - PRC_base) / (1 - PRC_base)
  (eq. 8); ALC = w ALC_abs + (1 - w) ALC_rel with w = 0 by default (the paper uses ALC_rel);
  a PRC >= 1 is replaced by 0.99999999 before dividing; rounded to 4 decimals.
* Best PRC of one side (docs/measures.md 6, ``compute_best_prc``): sort the predictions by
  confidence (descending, stable), and for every prefix n = 1..N whose Wilson width is below
  ``max_width`` compute PRC(midpoint, recall); keep the first maximum; then take every
  prediction whose confidence is >= the confidence at that n (ties included) and recompute.
  Vectorized: one cumulative sum, no loop over n.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...stats import z_score

DEFAULT_ALPHA = 3.0
DEFAULT_R_MIN = 1e-4
DEFAULT_ABS_WEIGHT = 0.0
TIGHT_WIDTH = 0.1
LOOSE_WIDTH = 0.25
PRC_CAP = 0.99999999


@dataclass(frozen=True)
class PRCParams:
    """How precision and recall combine (the ALC paper eq. 6 and 8).

    Attributes:
        alpha: sharpness of the knee of the equal-PRC curves (paper: 3).
        r_min: recall below which PRC = R (paper: 1e-4).
        abs_weight: weight of ALC_abs in the ALC (0: the paper's ALC_rel).
        confidence_level: of the Wilson interval around the precision.
    """

    alpha: float = DEFAULT_ALPHA
    r_min: float = DEFAULT_R_MIN
    abs_weight: float = DEFAULT_ABS_WEIGHT
    confidence_level: float = 0.95

    def __post_init__(self) -> None:
        if not self.alpha > 0:
            raise ConfigError(f"ALC: alpha must be positive, got {self.alpha}")
        if not 0 < self.r_min < 1:
            raise ConfigError(f"ALC: r_min must lie in (0, 1), got {self.r_min}")
        if not 0 <= self.abs_weight <= 1:
            raise ConfigError(f"ALC: abs_weight must lie in [0, 1], got {self.abs_weight}")


def wilson_bounds(correct: np.ndarray | float, n: np.ndarray | float,
                  confidence_level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score bounds of correct / n, rounded to 4 decimals (vectorized; n > 0)."""
    z = z_score(confidence_level)
    n = np.asarray(n, dtype=float)
    p = np.asarray(correct, dtype=float) / n
    denom = 1.0 + z * z / n
    centre = p + z * z / (2.0 * n)
    half = z * np.sqrt((p * (1.0 - p) + z * z / (4.0 * n)) / n)
    return np.round((centre - half) / denom, 4), np.round((centre + half) / denom, 4)


def probabilistic_precision(correct: float, n: int, confidence_level: float = 0.95) -> float:
    """Eq. 2: midpoint of the (rounded) Wilson interval of correct / n."""
    if n <= 0:
        raise ValueError("probabilistic precision needs at least one prediction")
    lo, hi = wilson_bounds(correct, n, confidence_level)
    return float(lo + (hi - lo) / 2.0)


def recall_random(n_predictions: int, n_attempts: int) -> float:
    """Eq. 3: R = (T + F) / (T + F + A)."""
    return n_predictions / n_attempts


def recall_pretargeted_population(n_attempts: int, n_abstentions: int, n_targeted: int,
                                  n_records: int) -> float:
    """Eq. 4: R = (N - A) N' / (N D): recall relative to the whole population of D records."""
    return (n_attempts - n_abstentions) * n_targeted / (n_attempts * n_records)


def recall_pretargeted(n_attempts: int, n_abstentions: int) -> float:
    """Eq. 5: R' = (N - A) / N: recall relative to the N' pre-targeted records."""
    return (n_attempts - n_abstentions) / n_attempts


def prc(precision: np.ndarray | float, recall: np.ndarray | float,
        params: PRCParams = PRCParams()) -> np.ndarray | float:
    """Eq. 6, vectorized; rounded to 4 decimals."""
    p = np.clip(np.asarray(precision, dtype=float), 0.0, 1.0)
    r = np.clip(np.asarray(recall, dtype=float), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log10(np.maximum(r, params.r_min)) / math.log10(params.r_min)
        value = np.where(r > params.r_min, (1.0 - ratio ** params.alpha) * p, r)
    value = np.round(value, 4)
    return float(value) if value.ndim == 0 else value


def alc(prc_attack: float, prc_base: float, params: PRCParams = PRCParams()) -> float:
    """Eq. 7 and 8 combined with the absolute weight w: w ALC_abs + (1 - w) ALC_rel."""
    a = min(prc_attack, PRC_CAP)
    b = min(prc_base, PRC_CAP)
    rel = (a - b) / (1.0 - b)
    absolute = prc_attack - prc_base
    return round(params.abs_weight * absolute + (1.0 - params.abs_weight) * rel, 4)


def alc_from_pr(p_attack: float, r_attack: float, p_base: float, r_base: float,
                params: PRCParams = PRCParams()) -> float:
    """ALC from the two precision/recall pairs."""
    return alc(float(prc(p_attack, r_attack, params)), float(prc(p_base, r_base, params)), params)


def band(value: float | None) -> str:
    """The paper's reading of an ALC (section 6): < 0.5 safe, 0.5-0.75 at risk, >= 0.75
    serious; None (no significant measure) is 'insufficient'."""
    if value is None:
        return "insufficient"
    if value < 0.5:
        return "safe"
    if value < 0.75:
        return "at_risk"
    return "serious"


@dataclass(frozen=True)
class PRPoint:
    """One precision/recall pair of one side: the predictions with confidence >= threshold."""

    threshold: float
    n: int
    correct: int
    precision_measured: float
    ci_low: float
    ci_high: float
    precision: float
    recall: float
    prc: float

    @property
    def width(self) -> float:
        return round(self.ci_high - self.ci_low, 4)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["width"] = self.width
        return d


def _sorted(confidence: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-np.asarray(confidence, dtype=float), kind="stable")
    return np.asarray(confidence, dtype=float)[order], np.asarray(correct, dtype=bool)[order]


def _tie_ends(conf_sorted: np.ndarray) -> np.ndarray:
    """Index of the last prediction of each run of equal confidence (sorted input)."""
    return np.flatnonzero(np.r_[conf_sorted[1:] != conf_sorted[:-1], True])


def _point(conf_sorted: np.ndarray, correct_sorted: np.ndarray, threshold: float,
           total: int, recall_scale: float, params: PRCParams) -> PRPoint:
    n = int(np.count_nonzero(conf_sorted >= threshold))
    c = int(np.count_nonzero(correct_sorted[:n]))
    bounds = wilson_bounds(c, n, params.confidence_level)
    lo, hi = float(bounds[0]), float(bounds[1])
    precision = round(lo + (hi - lo) / 2.0, 4)
    recall = round(n / total * recall_scale, 4)
    return PRPoint(threshold=float(threshold), n=n, correct=c, precision_measured=c / n,
                   ci_low=lo, ci_high=hi, precision=precision, recall=recall,
                   prc=float(prc(precision, recall, params)))


def best_prc(confidence: np.ndarray, correct: np.ndarray, max_width: float = TIGHT_WIDTH,
             params: PRCParams = PRCParams(), recall_scale: float = 1.0) -> PRPoint | None:
    """The best precision/recall pair of one side whose Wilson width is below ``max_width``.

    Args:
        confidence: rank score of each prediction (abstentions carry 0).
        correct: whether each prediction was right.
        max_width: the interval width a prefix must be below (0.1 tight, 0.25 loose).
        params: PRC parameters.
        recall_scale: factor on n / N (N' / D for eq. 4 in pre-targeted mode, else 1).

    Returns:
        The best pair (ties at its threshold included), or None when no prefix is narrow
        enough or every PRC is 0.
    """
    total = len(confidence)
    if total == 0:
        return None
    conf_s, corr_s = _sorted(confidence, correct)
    n = np.arange(1, total + 1, dtype=float)
    c = np.cumsum(corr_s)
    lo, hi = wilson_bounds(c, n, params.confidence_level)
    ok = (hi - lo) < max_width
    if not ok.any():
        return None
    values = np.where(ok, prc(lo + (hi - lo) / 2.0, n / total * recall_scale, params), -1.0)
    i = int(np.argmax(values))
    if values[i] <= 0.0:
        return None
    return _point(conf_s, corr_s, conf_s[i], total, recall_scale, params)


def prc_table(confidence: np.ndarray, correct: np.ndarray, params: PRCParams = PRCParams(),
              recall_scale: float = 1.0, max_rows: int = 60) -> list[PRPoint]:
    """Precision/recall pairs at the distinct confidence thresholds (ties complete), at most
    ``max_rows`` of them spread evenly in log recall (the highest and lowest always kept)."""
    total = len(confidence)
    if total == 0:
        return []
    conf_s, corr_s = _sorted(confidence, correct)
    ends = _tie_ends(conf_s)
    if len(ends) > max_rows:
        logn = np.log(ends + 1.0)
        targets = np.linspace(logn[0], logn[-1], max_rows)
        ends = np.unique(ends[np.searchsorted(logn, targets, side="left").clip(0, len(ends) - 1)])
    return [_point(conf_s, corr_s, conf_s[e], total, recall_scale, params) for e in ends]


def exposed_group(confidence: np.ndarray, correct: np.ndarray, base_prc: float,
                  params: PRCParams = PRCParams(), recall_scale: float = 1.0,
                  tight_width: float = TIGHT_WIDTH, min_correct: int = 5,
                  alc_threshold: float = 0.5) -> PRPoint | None:
    """A small, highly exposed group that the statistics cannot confirm yet (the ALC paper, section
    5.1).

    Among the top-confidence prefixes (ties complete) that are *not yet significant* (Wilson
    width >= ``tight_width``) and hold at least ``min_correct`` right predictions, the one whose
    measured precision, if it held, gives the highest ALC against ``base_prc``; returned when
    that ALC reaches ``alc_threshold``. The paper keeps attacking while such low-recall
    measures still improve; the package's early-low halts do not look at them.
    """
    total = len(confidence)
    if total == 0:
        return None
    conf_s, corr_s = _sorted(confidence, correct)
    ends = _tie_ends(conf_s)
    n = ends + 1.0
    c = np.cumsum(corr_s)[ends]
    lo, hi = wilson_bounds(c, n, params.confidence_level)
    cand = ((hi - lo) >= tight_width) & (c >= min_correct)
    if not cand.any():
        return None
    potential = prc(c / n, n / total * recall_scale, params)
    potential = np.where(cand, potential, -1.0)
    i = int(np.argmax(potential))
    if alc(float(potential[i]), base_prc, params) < alc_threshold:
        return None
    return _point(conf_s, corr_s, conf_s[ends[i]], total, recall_scale, params)
