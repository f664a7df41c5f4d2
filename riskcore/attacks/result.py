"""The result of an attack-based evaluation (seed 002): rates, counts, risk and interval."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..results import MeasureResult
from ..stats import Rate, privacy_risk, rate_figures


def attack_result(measure: str, main: Rate, baseline: Rate, control: Rate | None, *,
                  n_attacks: int, n_achieved: int, parameters: Mapping[str, Any],
                  details: Mapping[str, Any] | None = None,
                  warnings: tuple[str, ...] = ()) -> MeasureResult:
    """Figures: ``risk``, ``risk_ci_low``, ``risk_ci_high``, the three rates with errors and
    counts, ``n_attacks`` (asked) and ``n_attacks_achieved``; ``inconclusive`` is 1 when the
    attack does no better than the random baseline (not a sign of safety)."""
    risk = privacy_risk(main, control)
    inconclusive = baseline.rate >= main.rate
    figures: dict[str, float | int | None] = {
        "risk": risk.value, "risk_ci_low": risk.ci[0], "risk_ci_high": risk.ci[1],
        **rate_figures("attack", main), **rate_figures("baseline", baseline),
        **rate_figures("control", control),
        "n_attacks": n_attacks, "n_attacks_achieved": n_achieved,
        "inconclusive": int(inconclusive),
    }
    warns = list(warnings)
    if inconclusive:
        warns.append("the attack is no better than the random baseline: the result is "
                      "inconclusive (not evidence of safety); try more attacks or other columns")
    if control is None:
        warns.append("no control table: the risk is the raw attack success rate, which also "
                     "counts what the release teaches about the population in general")
    higher = {k: True for k in ("risk", "risk_ci_low", "risk_ci_high", "attack_rate",
                                "n_attack")}
    return MeasureResult(
        measure=measure, figures=figures, parameters=dict(parameters),
        higher_is_riskier=higher,
        details={"risk_ci": list(risk.ci), **(details or {})},
        warnings=tuple(warns),
    )
