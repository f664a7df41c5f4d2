"""Re-identification risk: the prosecutor, journalist and marketer models at threshold T.

Protegrity's risk metrics, docs/measures.md 2, ARX 3.9.2 ``RiskModelSampleSummary``.
Formulas are written per record so that they hold under the NA wildcard too (where fk is not a
class size):

* pRa = (1/n) sum_i I(1/fk_i > T)     pRb = max_i 1/fk_i = 1/min f_j    pRc = (1/n) sum_i 1/fk_i
  (= |J|/n for exact classes)
* jRa = (1/n) sum_i I(1/Fk_i > T)     jRb = max_i 1/Fk_i
* mRc = (1/n) sum_i 1/Fk_i = (1/n) sum_j f_j/F_j
* jRc = max(|J_pop| / N_pop, mRc) (Protegrity's risk metrics); jRc_arx = max(|J| / sum_{j in J}
F_j, mRc) (ARX).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from ..equivalence import ClassFrequencies, PopulationSource
from ..errors import ConfigError
from ..results import MeasureResult
from .family import MeasureFamily, MeasureInputs, Params

DEFAULT_THRESHOLD = 0.1
FIGURES = ("pRa", "pRb", "pRc", "jRa", "jRb", "jRc", "jRc_arx", "mRc", "records_at_risk")


class ReidParams(Params):
    """Parameters of ``reid``."""

    threshold: float = Field(DEFAULT_THRESHOLD, gt=0.0, le=1.0,
                             description="T: highest acceptable re-identification probability "
                             "of one record (Protegrity's risk metrics: 0.1)")


def reidentification_risk(freq: ClassFrequencies,
                          threshold: float = DEFAULT_THRESHOLD) -> MeasureResult:
    """Prosecutor, journalist and marketer risk (docs/measures.md 2; Protegrity's risk metrics) at
    threshold T.

    Records at risk use the strict comparison 1/f > T. Without a population (no weights, no
    identification table) F = f and every journalist figure equals the prosecutor one.

    Args:
        freq: class frequencies (Fk from weights or an identification table, or F = f).
        threshold: T, the highest acceptable probability of re-identifying one record
            (default 0.1, Protegrity's risk metrics).
    """
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"threshold T must lie in (0, 1], got {threshold}")
    n = freq.n
    inv_f = 1.0 / freq.fk
    inv_F = 1.0 / freq.Fk
    at_risk = freq.count(inv_f > threshold)
    pRa = at_risk / n
    pRb = float(inv_f.max())
    pRc = float(inv_f.mean()) if freq.multiplicity is None else freq.total(inv_f) / n
    jRa = freq.count(inv_F > threshold) / n
    jRb = float(inv_F.max())
    mRc = float(inv_F.mean()) if freq.multiplicity is None else freq.total(inv_F) / n
    if freq.population is PopulationSource.TABLE:
        jRc = max(freq.population_classes / freq.population_records, mRc)
    else:
        jRc = max(freq.n_classes / float(freq.class_population.sum()), mRc)
    jRc_arx = max(freq.n_classes / float(freq.class_population.sum()), mRc)
    figures = {"pRa": pRa, "pRb": pRb, "pRc": pRc, "jRa": jRa, "jRb": jRb, "jRc": jRc,
               "jRc_arx": jRc_arx, "mRc": mRc,
               "records_at_risk": at_risk}
    return MeasureResult(
        measure="reid",
        figures=figures,
        parameters={"threshold": threshold, "population": freq.population.value,
                    "quasi_identifiers": list(freq.quasi_identifiers),
                    "missing": freq.missing.value, "alpha": freq.alpha},
        per_record={"prosecutor_risk": inv_f, "journalist_risk": inv_F},
    )


def effective_threshold_size(threshold: float) -> int:
    """ARX's effective threshold class size s(T) (docs/measures.md 2): records at risk are in
    classes < s(T).

    s(T) = floor(1/T), plus 1 if 1/floor(1/T) - T >= 0.01 * T.
    """
    s = int(np.floor(1.0 / threshold))
    if 1.0 / s - threshold >= 0.01 * threshold:
        s += 1
    return s


def _run(inputs: MeasureInputs, params: ReidParams) -> MeasureResult:
    return reidentification_risk(inputs.frequencies(), params.threshold)


def _alarm(result: MeasureResult) -> str | None:
    if result.figures.get("pRc") == 1.0:
        return "every record of the release is unique on its quasi-identifiers (pRc = 1)"
    return None


FAMILY = MeasureFamily(
    name="reid",
    title="Prosecutor, journalist and marketer risk",
    section="reid",
    params=ReidParams,
    run=_run,
    figures=lambda p, roles: {k: True for k in FIGURES},
    how_to_read=(
        "Prosecutor risk assumes the attacker knows the person is in the release; journalist "
        "risk that they only know an identification table; marketer risk is the expected share "
        "of records re-identified when everyone is attacked. Ra is the share of records above "
        "the threshold T, Rb the highest risk of any record, Rc the average success rate."),
    advice=(
        "The risk sits in small classes: generalize or suppress quasi-identifiers until no "
        "class is smaller than 1/T. Journalist figures also depend on the sample weights."),
    alarm=_alarm,
    scale="classes",
)
