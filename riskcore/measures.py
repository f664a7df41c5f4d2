"""The measure registry: one entry per measure family the gate and the CLI can run.

Each entry takes the encoded tables of a run and the measure's parameters from the config, and
returns a :class:`~riskcore.results.MeasureResult`. Tasks call :func:`run_measure`; no metric logic
lives outside riskcore.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .classes import frequencies
from .data import EncodedTable, MissingPolicy
from .diversity import DEFAULT_MISSING_CODE, DEFAULT_RECURSIVE_C, l_diversity, t_closeness
from .errors import ConfigError
from .reid import DEFAULT_KS, DEFAULT_THRESHOLD, k_anonymity, reidentification_risk
from .results import MeasureResult, not_computable


@dataclass(frozen=True)
class MeasureInputs:
    """The encoded tables of one run (jointly encoded) and run-wide settings."""

    released: EncodedTable
    original: EncodedTable | None = None
    control: EncodedTable | None = None
    identification: EncodedTable | None = None
    missing: MissingPolicy = MissingPolicy.OWN
    alpha: float = 1.0
    seed: int = 0


def _check_params(name: str, params: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(params) - allowed
    if unknown:
        raise ConfigError(f"measure '{name}': unknown parameter(s) {sorted(unknown)}; "
                          f"allowed: {sorted(allowed)}")


def _freq(inputs: MeasureInputs):
    return frequencies(inputs.released, population=inputs.identification,
                       missing=inputs.missing, alpha=inputs.alpha)


def _k_anonymity(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    _check_params("k_anonymity", params, {"ks"})
    return k_anonymity(_freq(inputs), ks=params.get("ks", DEFAULT_KS))


def _reid(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    _check_params("reid", params, {"threshold"})
    return reidentification_risk(_freq(inputs), float(params.get("threshold", DEFAULT_THRESHOLD)))


def _l_diversity(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    _check_params("l_diversity", params, {"c", "missing_code", "sensitive"})
    sens = params.get("sensitive") or inputs.released.roles.sensitive
    if not sens:
        return not_computable("l_diversity", "no sensitive attribute is configured (roles: "
                              "sensitive)")
    return l_diversity(inputs.released, sensitive=sens, c=float(params.get("c",
                                                                           DEFAULT_RECURSIVE_C)),
                       missing_code=params.get("missing_code", DEFAULT_MISSING_CODE))


def _t_closeness(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    _check_params("t_closeness", params, {"sensitive"})
    sens = params.get("sensitive") or inputs.released.roles.sensitive
    if not sens:
        return not_computable("t_closeness", "no sensitive attribute is configured")
    return t_closeness(inputs.released, sensitive=sens)


MEASURES: dict[str, Callable[[MeasureInputs, Mapping[str, Any]], MeasureResult]] = {
    "k_anonymity": _k_anonymity,
    "reid": _reid,
    "l_diversity": _l_diversity,
    "t_closeness": _t_closeness,
}

#: Families described in the spec that this version does not compute yet: a policy check on
#: them is "insufficient evidence", never a pass.
PLANNED = {
    "sdc": "individual/global/household risk is not available in this riskgate version",
    "suda": "SUDA2 is not available in this riskgate version",
    "population": "population-uniqueness models are not available in this riskgate version",
    "singling_out": "the singling-out attack is not available in this riskgate version",
    "linkability": "the linkability attack is not available in this riskgate version",
    "inference": "the inference attack is not available in this riskgate version",
    "alc": "the Anonymity Loss Coefficient is not available in this riskgate version",
}


def check_measure_names(names: list[str] | set[str]) -> None:
    unknown = [n for n in names if n not in MEASURES and n not in PLANNED]
    if unknown:
        raise ConfigError(f"unknown measure(s) {sorted(unknown)}; known: "
                          f"{sorted(MEASURES)} (planned: {sorted(PLANNED)})")


def run_measure(name: str, inputs: MeasureInputs, params: Mapping[str, Any] | None = None
                ) -> MeasureResult:
    """Run one measure by name."""
    if name not in MEASURES:
        check_measure_names([name])
        return not_computable(name, PLANNED[name])
    return MEASURES[name](inputs, dict(params or {}))
