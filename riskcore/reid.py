"""Re-identification risk: k-anonymity and the prosecutor, journalist and marketer models.

Seed 000 (Protegrity risk metrics), seed 003 (sdcMicro k-anonymity violations), SPEC section 2,
ARX 3.9.2 ``RiskModelSampleSummary``. Formulas are written per record so that they hold under
the NA wildcard too (where fk is not a class size):

* pRa = (1/n) sum_i I(1/fk_i > T)     pRb = max_i 1/fk_i = 1/min f_j    pRc = (1/n) sum_i 1/fk_i
  (= |J|/n for exact classes)
* jRa = (1/n) sum_i I(1/Fk_i > T)     jRb = max_i 1/Fk_i
* mRc = (1/n) sum_i 1/Fk_i = (1/n) sum_j f_j/F_j
* jRc = max(|J_pop| / N_pop, mRc) (seed 000); jRc_arx = max(|J| / sum_{j in J} F_j, mRc) (ARX).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .classes import ClassFrequencies, PopulationSource
from .errors import ConfigError
from .results import MeasureResult

DEFAULT_THRESHOLD = 0.1
DEFAULT_KS = (2, 3, 5, 10)


def k_anonymity(freq: ClassFrequencies, ks: Sequence[int] = DEFAULT_KS) -> MeasureResult:
    """k-anonymity: k = min fk, and for each k the records violating it (seed 003).

    violations_k<k> = sum_i I(fk_i < k); violations_share_k<k> = that / n. n1 and n2 are the
    records in classes of size 1 and 2 (sdcMicro reports n1 as violating 2-anonymity and n1 + n2
    as violating 3-anonymity). The class-size histogram is in ``details``.

    Args:
        freq: the sample's class frequencies.
        ks: the k levels to count violations for (default 2, 3, 5, 10).
    """
    ks = sorted({int(k) for k in ks})
    if any(k < 1 for k in ks):
        raise ConfigError(f"k levels must be >= 1, got {ks}")
    fk = freq.fk
    n = freq.n
    figures: dict[str, float | int | None] = {
        "k": _as_number(fk.min()),
        "n": n,
        "n_classes": freq.n_classes,
        "n1": int(np.count_nonzero(fk == 1)),
        "n2": int(np.count_nonzero(fk == 2)),
    }
    higher = {"k": False, "n": False, "n_classes": False, "n1": True, "n2": True}
    for k in ks:
        count = int(np.count_nonzero(fk < k))
        figures[f"violations_k{k}"] = count
        figures[f"violations_share_k{k}"] = count / n
        higher[f"violations_k{k}"] = True
        higher[f"violations_share_k{k}"] = True
    sizes, counts = np.unique(freq.class_size.astype(np.int64), return_counts=True)
    return MeasureResult(
        measure="k_anonymity",
        figures=figures,
        parameters={"ks": ks, "quasi_identifiers": list(freq.quasi_identifiers),
                    "missing": freq.missing.value, "alpha": freq.alpha},
        higher_is_riskier=higher,
        per_record={"fk": fk, "Fk": freq.Fk},
        details={"class_size_histogram": [[int(s), int(c)] for s, c in zip(sizes, counts)]},
    )


def reidentification_risk(freq: ClassFrequencies,
                          threshold: float = DEFAULT_THRESHOLD) -> MeasureResult:
    """Prosecutor, journalist and marketer risk (SPEC 2; seed 000) at threshold T.

    Records at risk use the strict comparison 1/f > T. Without a population (no weights, no
    identification table) F = f and every journalist figure equals the prosecutor one.

    Args:
        freq: class frequencies (Fk from weights or an identification table, or F = f).
        threshold: T, the highest acceptable probability of re-identifying one record
            (default 0.1, seed 000).
    """
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"threshold T must lie in (0, 1], got {threshold}")
    n = freq.n
    inv_f = 1.0 / freq.fk
    inv_F = 1.0 / freq.Fk
    pRa = float(np.count_nonzero(inv_f > threshold)) / n
    pRb = float(inv_f.max())
    pRc = float(inv_f.mean())
    jRa = float(np.count_nonzero(inv_F > threshold)) / n
    jRb = float(inv_F.max())
    mRc = float(inv_F.mean())
    if freq.population is PopulationSource.TABLE:
        jRc = max(freq.population_classes / freq.population_records, mRc)
    else:
        jRc = max(freq.n_classes / float(freq.class_population.sum()), mRc)
    jRc_arx = max(freq.n_classes / float(freq.class_population.sum()), mRc)
    figures = {"pRa": pRa, "pRb": pRb, "pRc": pRc, "jRa": jRa, "jRb": jRb, "jRc": jRc,
               "jRc_arx": jRc_arx, "mRc": mRc,
               "records_at_risk": int(np.count_nonzero(inv_f > threshold))}
    return MeasureResult(
        measure="reid",
        figures=figures,
        parameters={"threshold": threshold, "population": freq.population.value,
                    "quasi_identifiers": list(freq.quasi_identifiers),
                    "missing": freq.missing.value, "alpha": freq.alpha},
        higher_is_riskier={k: True for k in figures},
        per_record={"prosecutor_risk": inv_f, "journalist_risk": inv_F},
    )


def effective_threshold_size(threshold: float) -> int:
    """ARX's effective threshold class size s(T) (SPEC 2): records at risk are in classes < s(T).

    s(T) = floor(1/T), plus 1 if 1/floor(1/T) - T >= 0.01 * T.
    """
    s = int(np.floor(1.0 / threshold))
    if 1.0 / s - threshold >= 0.01 * threshold:
        s += 1
    return s


def _as_number(x: float) -> float | int:
    xf = float(x)
    return int(xf) if xf.is_integer() else xf
