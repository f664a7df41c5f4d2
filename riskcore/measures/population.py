"""Population uniqueness: Zayatz, Pitman, SNB and Dankar's decision rule (ARX 3.9.2;
docs/measures.md 4.3).

Inputs are the sample's class-size histogram {c_k} (c_k classes of size k), the number of
classes u, the sample size n and the population size N; the sampling fraction is f = n/N.
Each model estimates the number of population uniques; the share is uniques/N. A model whose
solver does not converge, or whose estimate is 0 or outside [0, N], is *not available*: it is
reported as such with the reason, never as 0.

* Zayatz (1991): P(pop-unique | sample-unique) = (c1/u) h(1) / sum_k (c_k/u) h(k), with h(K) the
  hypergeometric P(X = 1) drawing n of N with K successes (N capped at 2^31 - 1 inside h, as
  ARX does); uniques = c1 P / f.
* Pitman (Hoshino 2001): maximum-likelihood (theta, alpha) of the Pitman sampling formula,
  solving sum_{i<u} 1/(theta + i alpha) = sum_{i<n} 1/(theta + i) and
  sum_{i<u} i/(theta + i alpha) = sum_k c_k sum_{j<k} 1/(j - alpha) by Newton's method from the
  moment start values; uniques = Gamma(theta+1)/Gamma(theta+alpha) N^alpha.
* SNB (Chen & Keller-McNulty 1998): K = u + c1 (v1/v2)(v3/v4)^2 non-empty population classes, then
  (a, b) from the c1 and c2 equations; uniques = K b^a.
* Dankar et al. (2012): f <= 0.1: Pitman (Zayatz if Pitman is not available); otherwise
  min(Zayatz, SNB) if SNB is available, else Zayatz.
* Log-linear (Skinner & Holmes 1998; Skinner & Shlomo 2008; :mod:`.loglinear`): a Poisson
  log-linear model of the key cells (main effects and the two-way interactions of the
  BIC-optimal forest) gives each sample unique's P(F = 1 | f = 1) and E[1/F | f = 1];
  tau1 and tau2 are their sums, and the expected population uniques are tau1 / pi.
* ``best``: Dankar's rule extended with the log-linear model: the log-linear estimate when it is
  available (it models the key variables' structure, which the class-size models cannot see),
  otherwise Dankar's choice.

With no sample unique (c1 = 0) every estimate is 0, with that reason: the safest case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field

from ..errors import ConfigError
from ..results import MeasureResult
from . import loglinear
from .family import MeasureFamily, MeasureInputs, Params

_INT_MAX = 2_147_483_647
NO_UNIQUES = "no sample uniques (c1 = 0): no record is unique in the sample, so none is a " \
    "population unique; the estimate is 0"
US_POPULATION = 317_238_626  # ARX's ARXPopulationModel.Region.USA
#: no population of people is larger: the world's is about 8.2e9 (the models' N is a count of
#: people; 1e300 was accepted and silently capped inside the estimators)
MAX_POPULATION = 10_000_000_000


@dataclass(frozen=True)
class Estimate:
    """One model's estimate: uniques and share of the population, or the reason it is absent."""

    model: str
    uniques: float | None
    reason: str | None = None
    note: str | None = None

    @property
    def available(self) -> bool:
        return self.uniques is not None


@dataclass(frozen=True)
class _Histogram:
    """{c_k} of the sample: sizes k, counts c_k, n, u, c1 and c2."""

    k: np.ndarray
    c: np.ndarray
    n: float
    u: float
    c1: float
    c2: float


def _histogram(class_sizes: np.ndarray, N: float) -> _Histogram:
    """The class-size histogram; ConfigError when the population is smaller than the sample."""
    sizes, counts = np.unique(np.asarray(class_sizes, dtype=np.int64), return_counts=True)
    c = counts.astype(np.float64)
    n = float((sizes * c).sum())
    _check(int(n), N)
    return _Histogram(sizes, c, n, float(c.sum()), float(c[sizes == 1].sum()),
                      float(c[sizes == 2].sum()))


def _check(n: int, N: float) -> None:
    if N < n:
        raise ConfigError(f"population size {N:g} is smaller than the sample ({n} records); "
                          "give the size of the population the sample was drawn from")


def zayatz(class_sizes: np.ndarray, N: float) -> Estimate:
    """Zayatz's estimate of population uniques (docs/measures.md 4.3)."""
    h = _histogram(class_sizes, N)
    k, c, n, c1 = h.k, h.c, h.n, h.c1
    if c1 == 0:
        return Estimate("zayatz", 0.0, note=NO_UNIQUES)
    Nh = min(float(N), float(_INT_MAX))
    # log h(K) - log h(1) = log K + sum_{i=1}^{K-1} log1p(-(n-1)/(Nh-i)): no cancellation
    # between huge log-binomials (the direct form loses 1e-6 relative at N = 3e8)
    i = np.arange(1, int(k.max()), dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(Nh - i > n - 1.0, (n - 1.0) / (Nh - i), 1.0)
        steps = np.log1p(-ratio)
        cum = np.concatenate([[0.0], np.cumsum(steps)])
        rel = np.exp(np.log(k.astype(np.float64)) + cum[k - 1])
    bottom = float(np.sum(c * rel))
    if not bottom > 0:
        return Estimate("zayatz", None, "the hypergeometric probabilities underflow")
    top = c1
    f = n / float(N)
    return _valid("zayatz", c1 * (top / bottom) / f, N)


def pitman(class_sizes: np.ndarray, N: float, tol: float = 1e-12, max_iter: int = 200
           ) -> Estimate:
    """Pitman-model estimate of population uniques (docs/measures.md 4.3)."""
    from scipy.special import digamma, gammaln, polygamma

    h = _histogram(class_sizes, N)
    k, c, n, u, c1 = h.k, h.c, h.n, h.u, h.c1
    if c1 == 0:
        return Estimate("pitman", 0.0, note=NO_UNIQUES)
    c2 = h.c2 or 1.0
    cc = c1 * (c1 - 1.0) / c2
    theta = (n * u * cc - c1 * (n - 1.0) * (2.0 * u + cc)) / (2.0 * c1 * u + c1 * cc - n * cc)
    alpha = (theta * (c1 - n) + (n - 1.0) * c1) / (n * u)
    multi = k > 1

    def system(t: float, a: float) -> tuple[np.ndarray, np.ndarray]:
        # sums over i = 1..u-1 of 1/(t + i a) and i/(t + i a), via digamma: x = t/a
        x = t / a
        s1 = (digamma(x + u) - digamma(x + 1.0)) / a
        s3 = ((u - 1.0) - x * a * s1) / a
        o2 = digamma(n + t) - digamma(t + 1.0)
        o4 = float(np.sum(c[multi] * (digamma(k[multi] - a) - digamma(1.0 - a))))
        F = np.array([s1 - o2, s3 - o4])
        # Jacobian by the trigamma sums
        tr = polygamma(1, np.array([x + 1.0, x + u]))
        d_tt = (tr[0] - tr[1]) / a**2  # sum 1/(t+ia)^2
        d_ta = (s1 - x * d_tt * a) / a  # sum i/(t+ia)^2
        d_aa = (s3 - x * a * d_ta) / a  # sum i^2/(t+ia)^2
        d2 = float(polygamma(1, t + 1.0) - polygamma(1, n + t))
        d4 = float(np.sum(c[multi] * (polygamma(1, 1.0 - a) - polygamma(1, k[multi] - a))))
        J = np.array([[-d_tt + d2, -d_ta], [-d_ta, -d_aa - d4]])
        return F, J

    ok = False
    with np.errstate(all="ignore"):
        for _ in range(max_iter):
            if not (np.isfinite(theta) and np.isfinite(alpha)) or alpha <= 0 or alpha >= 1 \
                    or theta <= -alpha:
                break
            F, J = system(theta, alpha)
            try:
                step = np.linalg.solve(J, F)
            except np.linalg.LinAlgError:
                break
            theta, alpha = theta - step[0], alpha - step[1]
            if abs(step[0]) <= tol * max(1.0, abs(theta)) and abs(step[1]) <= tol:
                ok = True
                break
    if not ok or not (0.0 < alpha < 1.0) or not np.isfinite(theta):
        return Estimate("pitman", None, "the Pitman maximum-likelihood equations did not "
                                        "converge to 0 < alpha < 1")
    value = float(np.exp(gammaln(theta + 1.0) - gammaln(theta + alpha) + alpha * np.log(N)))
    return _valid("pitman", value, N)


def snb(class_sizes: np.ndarray, N: float, tol: float = 1e-10, max_iter: int = 200
        ) -> Estimate:
    """Shifted-negative-binomial estimate of population uniques (docs/measures.md 4.3)."""
    h = _histogram(class_sizes, N)
    k, c, n, u, c1, c2 = h.k, h.c, h.n, h.u, h.c1, h.c2
    if c1 == 0:
        return Estimate("snb", 0.0, note=NO_UNIQUES)
    f = n / float(N)
    with np.errstate(all="ignore"):
        v1 = np.sum(k * f**2 * (1 - f**2) ** (k - 1) * c)
        v2 = np.sum((1 - f) ** k * c * (1 + f) ** k - 1.0)
        v3 = np.sum((1 - f) ** k * c)
        v4 = np.sum(k * f * (1 - f) ** (k - 1) * c)
        K = float(u + c1 * (v1 / v2) * (v3 / v4) ** 2)

    def equations(a: float, b: float) -> np.ndarray:
        d = (1 - f) * (1 - b)
        e1 = K * f * (b / (1 - d)) ** a * (a * d / (1 - d) + 1) - c1
        e2 = K * a * b**a * f**2 * (1 - b) / 2 * (1 - d) ** (a + 2) * (2 - (1 - a) * d) - c2
        return np.array([e1, e2])

    if not np.isfinite(K) or K <= 0:
        return Estimate("snb", None, "the estimate of non-empty population classes is invalid")
    best = None
    with np.errstate(all="ignore"):
        for a0 in (0.1, 0.5, 1.0, 2.0, 5.0):
            for b0 in (0.01, 0.1, 0.3, 0.6, 0.9):
                a, b = a0, b0
                for _ in range(max_iter):
                    F = equations(a, b)
                    if not np.all(np.isfinite(F)):
                        break
                    step = 1e-7
                    J = np.column_stack([
                        (equations(a + step * max(1, a), b) - F) / (step * max(1, a)),
                        (equations(a, b + step * b) - F) / (step * b)])
                    try:
                        delta = np.linalg.solve(J, F)
                    except np.linalg.LinAlgError:
                        break
                    a, b = a - delta[0], b - delta[1]
                    if not (a > 0 and 0 < b < 1):
                        break
                    if np.all(np.abs(equations(a, b)) <= tol * max(c1, 1.0)):
                        best = (a, b)
                        break
                if best:
                    break
            if best:
                break
    if best is None:
        return Estimate("snb", None, "the SNB equations have no solution with a > 0, "
                                     "0 < b < 1 (solver did not converge)")
    a, b = best
    return _valid("snb", K * b**a, N)


def _valid(model: str, value: float, N: float) -> Estimate:
    if not np.isfinite(value) or value <= 0.0 or value > N:
        return Estimate(model, None, f"the estimate {value!r} is not a number in (0, N]")
    return Estimate(model, float(value))


def dankar(zay: Estimate, pit: Estimate, snb_: Estimate, sampling_fraction: float
           ) -> tuple[Estimate, str | None]:
    """Dankar's decision rule; returns the estimate and the model chosen."""
    if zay.note == NO_UNIQUES:
        return Estimate("dankar", 0.0, note=NO_UNIQUES), None
    if sampling_fraction <= 0.1:
        if pit.available:
            return Estimate("dankar", pit.uniques), "pitman"
        if zay.available:
            return Estimate("dankar", zay.uniques), "zayatz"
    else:
        if snb_.available and zay.available:
            chosen = "snb" if snb_.uniques < zay.uniques else "zayatz"  # type: ignore[operator]
            return Estimate("dankar", min(snb_.uniques, zay.uniques)), chosen  # type: ignore
        if zay.available:
            return Estimate("dankar", zay.uniques), "zayatz"
    return Estimate("dankar", None, "no underlying model is available"), None


def loglinear_estimate(codes: np.ndarray, class_id: np.ndarray, n_classes: int, N: float,
                       interactions: Sequence[tuple[int, int]] | None = None,
                       names: Sequence[str] | None = None,
                       multiplicity: np.ndarray | None = None
                       ) -> tuple[Estimate, dict[str, Any], dict[str, np.ndarray]]:
    """The log-linear model's estimate of population uniques (tau1 / pi), its details
    (tau1, tau2, the model) and its per-record risks (:mod:`.loglinear`).

    Args:
        codes: the key columns' codes, one row per sample record (missing coded < 0).
        class_id: per record, its key cell; n_classes the number of cells.
        N: the population size.
        interactions: the forest's pairs of column positions; None chooses them by BIC.
        names: the key columns' names, for the interactions in the details (else positions).
        multiplicity: records per row of ``codes``, when rows stand for several records.
    """
    n = codes.shape[0] if multiplicity is None else int(multiplicity.sum())
    _check(n, N)
    pi = n / float(N)
    x, levels = loglinear.dense_levels(codes)
    edges = (loglinear.choose_forest(x, levels, multiplicity) if interactions is None
             else tuple(interactions))
    fit = loglinear.fit_forest(x, levels, edges, class_id, n_classes, multiplicity)
    f = np.bincount(class_id, weights=multiplicity, minlength=n_classes).astype(np.float64)
    nu = (1.0 - pi) * fit.mu / pi  # expected population records outside the sample, per cell
    unique = f == 1
    with np.errstate(over="ignore", under="ignore"):
        p_unique = np.exp(-nu)
        risk = loglinear.record_risk(f, nu)
    tau1 = float(p_unique[unique].sum())
    tau2 = float(risk[unique].sum())
    details: dict[str, Any] = {
        "model": {"interactions": [[names[a], names[b]] if names else [a, b]
                                   for a, b in edges], "criterion":
                  "BIC" if interactions is None else "configured",
                  "df": fit.df, "bic": fit.bic, "loglik": fit.loglik},
        "tau1": tau1, "tau2": tau2}
    per_record = {"loglinear_risk": risk[class_id],
                  "loglinear_p_unique": np.where(unique, p_unique, np.nan)[class_id]}
    if not unique.any():
        return Estimate("loglinear", 0.0, note=NO_UNIQUES), details, per_record
    if not (np.isfinite(tau1) and np.isfinite(tau2) and np.all(np.isfinite(fit.mu))):
        return (Estimate("loglinear", None, "the fitted cell means are not finite numbers"),
                details, per_record)
    return Estimate("loglinear", min(tau1 / pi, float(N))), details, per_record


def population_uniqueness(class_sizes: np.ndarray, population_size: float,
                          loglinear_fit: tuple[Estimate, dict[str, Any], dict[str, np.ndarray]]
                          | None = None) -> MeasureResult:
    """All models as the ``population`` measure.

    Figures: ``zayatz``, ``pitman``, ``snb``, ``dankar`` (and, given its fit, ``loglinear``,
    ``loglinear_tau1``, ``loglinear_tau2``) estimated population uniques, ``best`` (the
    log-linear estimate if available, else Dankar's) and ``<model>_fraction`` (uniques / N). An
    unavailable model's figures are None with the reason in ``unavailable``; with no sample
    uniques every estimate is 0, with that reason in ``details.notes``.
    """
    sizes = np.asarray(class_sizes, dtype=np.int64)
    n = int(sizes.sum())
    N = float(population_size)
    if not np.isfinite(N) or N <= 0:
        raise ConfigError(f"population size must be a positive number, got {population_size}")
    _check(n, N)
    f = n / N
    z, p, s = zayatz(sizes, N), pitman(sizes, N), snb(sizes, N)
    d, chosen = dankar(z, p, s, f)
    estimates = [z, p, s, d]
    details: dict[str, Any] = {"dankar_chosen_model": chosen}
    per_record: dict[str, np.ndarray] = {}
    figures: dict[str, float | int | None] = {}
    if loglinear_fit is not None:
        ll, ll_details, per_record = loglinear_fit
        estimates.append(ll)
        details["loglinear"] = ll_details
        figures["loglinear_tau1"] = ll_details["tau1"] if ll.available else None
        figures["loglinear_tau2"] = ll_details["tau2"] if ll.available else None
        best = Estimate("best", ll.uniques, ll.reason, ll.note) if ll.available else \
            Estimate("best", d.uniques, d.reason, d.note)
        details["best_model"] = "loglinear" if ll.available else (
            f"dankar ({chosen})" if d.available and chosen else "dankar")
        estimates.append(best)
    reasons: dict[str, str] = {}
    notes: dict[str, str] = {}
    for est in estimates:
        figures[est.model] = est.uniques
        figures[f"{est.model}_fraction"] = None if est.uniques is None else est.uniques / N
        if est.reason:
            reasons[est.model] = est.reason
        if est.note:
            notes[est.model] = est.note
    if "loglinear" in reasons:
        for tau in ("loglinear_tau1", "loglinear_tau2"):
            reasons[tau] = reasons["loglinear"]
    figures["sample_uniques"] = int(np.count_nonzero(sizes == 1))
    details["not_available"] = reasons
    details["notes"] = notes
    return MeasureResult(
        measure="population",
        figures=figures,
        parameters={"population_size": N, "sampling_fraction": f, "n": n},
        per_record=per_record,
        details=details,
        warnings=tuple(f"{m}: not available ({r})" for m, r in reasons.items()
                       if not m.startswith("loglinear_tau")),
        unavailable={**reasons, **{f"{m}_fraction": r for m, r in reasons.items()
                                   if not m.startswith("loglinear_tau")}},
    )


MODELS = ("zayatz", "pitman", "snb", "dankar", "loglinear", "best")


class PopulationParams(Params):
    """Parameters of ``population``."""

    population_size: float | Literal["USA"] = Field(
        description="N, the population the sample was drawn from (a number, or USA)")
    interactions: Literal["auto", "none"] | list[tuple[str, str]] = Field(
        "auto", description="the log-linear model's two-way interactions: auto (the forest "
        "that maximizes BIC), none (main effects only), or pairs of quasi-identifiers that "
        "form a forest (no cycle)")

    def size(self) -> float:
        if self.population_size == "USA":
            return float(US_POPULATION)
        size = float(self.population_size)
        if not np.isfinite(size) or size <= 0:
            raise ConfigError(f"population_size must be a positive number, got {size}")
        if size > MAX_POPULATION:
            raise ConfigError(
                f"population_size {size:g} is more people than live on Earth (at most "
                f"{MAX_POPULATION:.0e}); give the size of the population the sample was drawn "
                "from (the sample's weights sum to an estimate of it)")
        return size

    def pairs(self, keys: Sequence[str]) -> list[tuple[int, int]] | None:
        """The configured interactions as column positions in ``keys`` (None: choose)."""
        if self.interactions == "auto":
            return None
        if self.interactions == "none":
            return []
        out: list[tuple[int, int]] = []
        for a, b in self.interactions:
            for name in (a, b):
                if name not in keys:
                    raise ConfigError(
                        f"population.interactions names '{name}', which is not a "
                        f"quasi-identifier ({', '.join(keys)}); name two of them per pair")
            if a == b:
                raise ConfigError(f"population.interactions pairs '{a}' with itself; "
                                  "name two different quasi-identifiers")
            out.append((keys.index(a), keys.index(b)))
        if not loglinear.is_forest(len(keys), out):
            raise ConfigError(
                "population.interactions form a cycle (or repeat a pair): the closed-form fit "
                "needs a forest; drop a pair, or use 'auto'")
        return out


def _check_params(params: PopulationParams, roles: object) -> None:
    params.size()
    keys = list(getattr(roles, "quasi_identifiers", ()) or ())
    if keys:
        params.pairs(keys)


def _run(inputs: MeasureInputs, params: PopulationParams) -> MeasureResult:
    freq = inputs.frequencies(with_population=False, missing="own")  # type: ignore[arg-type]
    keys = list(freq.quasi_identifiers)
    N = params.size()
    fit = loglinear_estimate(inputs.released.codes(keys), freq.class_id, freq.n_classes, N,
                             params.pairs(keys), keys, multiplicity=freq.multiplicity)
    return population_uniqueness(freq.class_size, N, fit)


FAMILY = MeasureFamily(
    name="population",
    title="Population uniqueness (ARX models and a log-linear model)",
    section="sdc",
    params=PopulationParams,
    run=_run,
    figures=lambda p, roles: {**{m: True for m in MODELS},
                              **{f"{m}_fraction": True for m in MODELS},
                              "loglinear_tau1": True, "loglinear_tau2": True,
                              "sample_uniques": True},
    check=_check_params,
    how_to_read=(
        "Estimates of how many records are unique in the whole population, not only in the "
        "sample. Zayatz, Pitman and SNB use only the sample's class sizes (Dankar's rule picks "
        "one, as ARX does). The log-linear model also uses how the key variables depend on "
        "each other, and gives each record its risk: E[1/F], the chance that a match on its "
        "keys is the right person (tau1: sample uniques expected to be population unique; "
        "tau2: expected correct matches among them). 'best' is the log-linear estimate when "
        "it is available. A population unique found in the release can be re-identified "
        "with certainty."),
    advice=(
        "Records unique in the population can be re-identified with certainty: generalize the "
        "quasi-identifiers or release a smaller sample."),
    scale="classes",
)
