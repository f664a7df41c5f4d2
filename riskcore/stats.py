"""Success rates with Wilson intervals and the privacy risk against a control set
(Giomi et al., anonymeter 1.1.0 ``stats/confidence.py``; docs/measures.md 5).

* z = Phi^-1((1 + CL)/2) (CL = 0.95 gives z = 1.959964).
* Success rate of s successes in n trials is the Wilson centre
  rate = (s + z^2/2) / (n + z^2), error = z / (n + z^2) * sqrt(s (n - s)/n + z^2/4).
* Privacy risk with a control set: R = (r_attack - r_control) / (1 - r_control), error by
  first-order propagation
  sigma_R = sqrt((sigma_a / |1 - r_c|)^2 + (sigma_c (r_a - 1) / (1 - r_c)^2)^2);
  value and interval clipped to [0, 1]. Without control: risk = attack rate +- error, clipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np


@dataclass(frozen=True)
class Rate:
    """A success rate: Wilson centre and error, with the raw counts."""

    rate: float
    error: float
    successes: float
    trials: int


@dataclass(frozen=True)
class Risk:
    value: float
    ci: tuple[float, float]


def z_score(confidence_level: float = 0.95) -> float:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence level must lie in (0, 1), got {confidence_level}")
    return NormalDist().inv_cdf(0.5 * (1.0 + confidence_level))


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z: erfc(z / sqrt 2) / 2, exact in the far tail (where
    1 - cdf loses every digit) and 0 at +inf. The standard library's, not scipy.stats': its
    import costs half a second of one thread in every gate process."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def wilson(successes: float, trials: int, confidence_level: float = 0.95) -> Rate:
    """Wilson score centre and error of ``successes`` out of ``trials`` (docs/measures.md 5)."""
    if trials <= 0:
        raise ValueError("the number of trials must be positive")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes ({successes}) must lie in [0, trials={trials}]")
    z = z_score(confidence_level)
    n, s = float(trials), float(successes)
    rate = (s + z * z / 2.0) / (n + z * z)
    error = z / (n + z * z) * math.sqrt(s * (n - s) / n + z * z / 4.0)
    return Rate(rate=rate, error=error, successes=successes, trials=trials)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def privacy_risk(attack: Rate, control: Rate | None = None) -> Risk:
    """Risk of the attack relative to the control attack, with its propagated error
    (docs/measures.md 5)."""
    if control is None:
        return Risk(_clip(attack.rate), (_clip(attack.rate - attack.error),
                                         _clip(attack.rate + attack.error)))
    ra, sa, rc, sc = attack.rate, attack.error, control.rate, control.error
    value = (ra - rc) / (1.0 - rc)
    sigma = math.sqrt((sa / abs(1.0 - rc)) ** 2 + (sc * (ra - 1.0) / (1.0 - rc) ** 2) ** 2)
    return Risk(_clip(value), (_clip(value - sigma), _clip(value + sigma)))


def rate_figures(prefix: str, r: Rate | None) -> dict[str, float | int | None]:
    """Figures ``<prefix>_rate``, ``<prefix>_error`` and ``n_<prefix>`` for a result."""
    if r is None:
        return {f"{prefix}_rate": None, f"{prefix}_error": None, f"n_{prefix}": None}
    return {f"{prefix}_rate": r.rate, f"{prefix}_error": r.error, f"n_{prefix}": r.successes}


#: upper edges of the risk bands of every risk histogram (sdc details, the report's plots)
RISK_BAND_EDGES = (0.001, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0)


def risk_band_counts(risk: np.ndarray, multiplicity: np.ndarray | None = None) -> list[int]:
    """Records per risk band: band i holds RISK_BAND_EDGES[i-1] < r <= RISK_BAND_EDGES[i]
    (each row counts its multiplicity when rows stand for several records)."""
    edges = np.asarray(RISK_BAND_EDGES)
    idx = np.searchsorted(edges, np.asarray(risk, dtype=float), side="left")
    counts = np.bincount(np.minimum(idx, edges.size - 1), weights=multiplicity,
                         minlength=edges.size)
    return [int(c) for c in counts]


def clopper_pearson(successes: int, trials: int, alpha: float, side: str) -> float:
    """The one-sided Clopper-Pearson bound of a binomial proportion at level 1 - alpha:
    ``side="lower"`` is B(alpha; k, n - k + 1) (0 when k = 0), ``"upper"`` is
    B(1 - alpha; k + 1, n - k) (1 when k = n), B the inverse of the regularized incomplete
    beta function. Exact: the bound holds at its level for every n (Clopper & Pearson 1934)."""
    from scipy.special import betaincinv

    k, n = int(successes), int(trials)
    if n <= 0:
        return 0.0 if side == "lower" else 1.0
    if side == "lower":
        return 0.0 if k <= 0 else float(betaincinv(k, n - k + 1, alpha))
    return 1.0 if k >= n else float(betaincinv(k + 1, n - k, 1 - alpha))
