"""Log-linear model risk of sample uniques (Skinner & Holmes 1998; Skinner & Shlomo 2008).

The model (sdcMicro's ``modRisk`` family): the population count of key cell k is
F_k ~ Poisson(lambda_k); the sample is a Bernoulli draw with fraction pi = n/N, so the sample count
is f_k ~ Poisson(mu_k), mu_k = pi lambda_k, and F_k - f_k | f_k ~ Poisson(nu_k) with
nu_k = (1 - pi) lambda_k, independent of f_k. log mu_k is a log-linear model of the key
variables fitted to the sample's cell counts (the offset log pi only rescales it). Then:

* P(F_k = 1 | f_k = 1) = exp(-nu_k) and E[1/F_k | f_k = 1] = (1 - exp(-nu_k)) / nu_k;
* for a record in a cell of sample size f: E[1/F | f] = E[1/(f + X)], X ~ Poisson(nu), which is
  1F1(1; f + 1; -nu) / f (Kummer's transform of the integral of t^(f-1) e^(-nu (1-t)) over [0, 1]);
* tau1 = sum over sample uniques of P(F = 1 | f = 1), the expected number of sample uniques that
  are population unique; tau2 = sum of E[1/F | f = 1], the expected number of correct matches;
* the expected number of population uniques is tau1 / pi: a population unique is sampled with
  probability pi, and is then a sample unique.

**The model class and its fit.** Main effects plus the two-way interactions of a *forest* over
the key variables. A forest is a decomposable graph, so the maximum-likelihood fit is in closed
form from the sample's margins (Bishop, Fienberg & Holland 1975, ch. 3; Lauritzen 1996, 4.4):

    mu_k = n * prod_{edges (a, b)} p_ab(x_a, x_b) / prod_v p_v(x_v) ** (deg(v) - 1)

with p the sample's relative one- and two-way margins. It needs the margins at the observed
cells only: no enumeration of the cross-product of the key levels (10^8 cells for zip x sex x
age x education x occupation x ethnicity), no iteration, nothing that can fail to converge. The
model with *all* two-way interactions is not decomposable and needs iterative proportional
fitting over the whole cross-product; on sparse tables it also overfits (fitted values pulled
to the observed counts), which makes tau1 too small (Skinner & Shlomo 2008, 5: "overfitting
leads to underestimation of risk"; on bench/population.py's census it read 0.4x the truth at
a 1 % sample).

**Model choice.** By BIC = log-likelihood - df/2 log n among forests. The log-likelihood gain
of edge (a, b) is n I(a; b) (the sample's mutual information), its df (L_a - 1)(L_b - 1), so the
best forest is the maximum spanning forest on the weights n I(a; b) - (L_a - 1)(L_b - 1)/2 log n
over the positive ones (Chow & Liu 1968, by Kruskal's algorithm; ties broken by column order):
exact within the class, and deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LogLinearFit", "fit_forest", "choose_forest", "record_risk", "dense_levels"]


@dataclass(frozen=True)
class LogLinearFit:
    """A fitted forest model on a sample.

    Attributes:
        edges: the two-way interactions, as pairs of column positions.
        mu: fitted expected sample count per class (aligned with the class ids given).
        loglik: the Poisson log-likelihood kernel sum_k f_k log mu_k over the observed cells.
        df: the model's free parameters (1 + sum (L - 1) + sum over edges (L_a - 1)(L_b - 1)).
        bic: loglik - df/2 log n.
    """

    edges: tuple[tuple[int, int], ...]
    mu: np.ndarray
    loglik: float
    df: int
    bic: float


def dense_levels(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's codes renumbered 0..L-1 over the values present (missing, coded < 0,
    is a level of its own), and the level counts L per column."""
    codes = np.asarray(codes, dtype=np.int64)
    out = np.empty_like(codes)
    levels = np.empty(codes.shape[1], dtype=np.int64)
    for j in range(codes.shape[1]):
        col = codes[:, j]
        lo = int(col.min()) if col.size else 0
        shifted = col - lo
        present = np.bincount(shifted) > 0
        rank = np.cumsum(present) - 1
        out[:, j] = rank[shifted]
        levels[j] = int(present.sum())
    return out, levels


def _pair_key(x: np.ndarray, a: int, b: int, levels: np.ndarray) -> np.ndarray:
    return x[:, a] * levels[b] + x[:, b]


def _counts(key: np.ndarray, size: int, weights: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the count of its key among the records; and the distinct keys' counts
    (``weights``: records per row, when rows stand for several records)."""
    if size <= 50_000_000:
        table = np.bincount(key, weights=weights, minlength=size)
        return table[key], table[table > 0]
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    if weights is not None:
        counts = np.bincount(inverse.ravel(), weights=weights, minlength=counts.size)
    return counts[inverse.ravel()], counts


def _entropy_n(counts: np.ndarray, n: float) -> float:
    """n * H of a margin: -sum c log(c/n)."""
    c = counts.astype(np.float64)
    return float(-(c * np.log(c / n)).sum())


def choose_forest(x: np.ndarray, levels: np.ndarray, weights: np.ndarray | None = None
                  ) -> tuple[tuple[int, int], ...]:
    """The BIC-optimal forest: Kruskal on n I(a;b) - (L_a-1)(L_b-1)/2 log n, positive only.

    ``weights``: records per row of ``x``, when rows stand for several records."""
    p = x.shape[1]
    n = x.shape[0] if weights is None else float(weights.sum())
    if n < 2 or p < 2:
        return ()
    hn = [_entropy_n(_counts(x[:, j], int(levels[j]), weights)[1], n) for j in range(p)]
    candidates: list[tuple[float, int, int]] = []
    for a in range(p):
        for b in range(a + 1, p):
            _, pair = _counts(_pair_key(x, a, b, levels), int(levels[a] * levels[b]), weights)
            gain = hn[a] + hn[b] - _entropy_n(pair, n)  # n * I(a; b)
            penalty = 0.5 * float((levels[a] - 1) * (levels[b] - 1)) * np.log(n)
            weight = gain - penalty
            if weight > 1e-9 * max(1.0, gain):
                candidates.append((-weight, a, b))
    candidates.sort()
    return tuple(sorted(_acyclic(p, [(a, b) for _, a, b in candidates])))


def _acyclic(p: int, edges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The pairs, in order, that join two trees of the forest grown so far over p variables
    (Kruskal's step, by union-find); a pair that would close a cycle is left out."""
    parent = list(range(p))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    kept: list[tuple[int, int]] = []
    for a, b in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
            kept.append((a, b))
    return kept


def is_forest(p: int, edges: Sequence[tuple[int, int]]) -> bool:
    """Whether the pairs form a forest over p variables (no cycle, no repeated pair)."""
    return len(_acyclic(p, edges)) == len(edges)


def fit_forest(x: np.ndarray, levels: np.ndarray, edges: Sequence[tuple[int, int]],
               class_id: np.ndarray, n_classes: int, weights: np.ndarray | None = None
               ) -> LogLinearFit:
    """The closed-form maximum-likelihood fit of the forest model (module docstring).

    Args:
        x: dense level codes, one row per sample record (:func:`dense_levels`).
        levels: levels per column.
        edges: the forest's pairs of column positions.
        class_id: per record, its cell (exact key combination) 0..n_classes-1.
        n_classes: the number of observed cells.
        weights: records per row of ``x``, when rows stand for several records.
    """
    rows, p = x.shape
    n = rows if weights is None else float(weights.sum())
    deg = np.zeros(p, dtype=np.int64)
    for a, b in edges:
        deg[a] += 1
        deg[b] += 1
    logn = np.log(float(n))
    log_mu = np.full(rows, logn)
    for j in range(p):  # p_v ** (1 - deg v)
        if deg[j] != 1:
            per_row, _ = _counts(x[:, j], int(levels[j]), weights)
            log_mu += (1 - deg[j]) * (np.log(per_row) - logn)
    for a, b in edges:
        per_row, _ = _counts(_pair_key(x, a, b, levels), int(levels[a] * levels[b]), weights)
        log_mu += np.log(per_row) - logn
    rep = np.empty(n_classes, dtype=np.int64)
    rep[class_id] = np.arange(rows)
    mu = np.exp(log_mu[rep])
    f = np.bincount(class_id, weights=weights, minlength=n_classes).astype(np.float64)
    # Poisson log-likelihood up to the constant -sum log f!: sum f log mu - sum mu, and the fit
    # reproduces n, so sum mu over all cells is n
    loglik = float((f * np.log(mu)).sum() - n)
    df = 1 + int((levels - 1).sum()) + sum(int((levels[a] - 1) * (levels[b] - 1))
                                            for a, b in edges)
    return LogLinearFit(tuple(edges), mu, loglik, df, loglik - 0.5 * df * logn)


def record_risk(f: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """E[1/F | f] = E[1/(f + X)], X ~ Poisson(nu): 1F1(1; f+1; -nu)/f; (1 - e^-nu)/nu at f = 1."""
    from scipy.special import hyp1f1

    f = np.asarray(f, dtype=np.float64)
    nu = np.asarray(nu, dtype=np.float64)
    out = np.empty_like(nu)
    one = f == 1
    with np.errstate(divide="ignore", invalid="ignore"):
        v = nu[one]
        out[one] = np.where(v > 0, -np.expm1(-v) / np.where(v > 0, v, 1.0), 1.0)
    more = ~one
    if more.any():
        out[more] = hyp1f1(1.0, f[more] + 1.0, -nu[more]) / f[more]
    return out
