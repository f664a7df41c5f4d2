"""The measure registry: one entry per measure family the gate and the CLI can run.

Each entry takes the encoded tables of a run and the measure's parameters from the config, and
returns a :class:`~riskcore.results.MeasureResult`. Tasks call :func:`run_measure`; no metric logic
lives outside riskcore.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import progress
from .classes import frequencies
from .data import EncodedTable, MissingPolicy
from .diversity import DEFAULT_MISSING_CODE, DEFAULT_RECURSIVE_C, l_diversity, t_closeness
from .drisk import DEFAULT_K as DRISK_K
from .drisk import drisk
from .errors import ConfigError, InputError
from .indivrisk import DEFAULT_MAX_GLOBAL_RISK, sdc_risk
from .population import US_POPULATION, population_uniqueness
from .reid import DEFAULT_KS, DEFAULT_THRESHOLD, k_anonymity, reidentification_risk
from .results import MeasureResult, Status, not_computable
from .suda import (DEFAULT_DIS_FRACTION, DEFAULT_MAX_KEYS, WARN_KEYS, attribute_level_contributions,
                   suda2, suda_result)


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


def _sdc(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    _check_params("sdc", params, {"method", "max_global_risk", "qual", "fractional_fk"})
    table = inputs.released
    hh_col = table.roles.household
    return sdc_risk(
        _freq(inputs),
        household=table.column(hh_col).codes if hh_col else None,
        household_column=hh_col,
        weights=table.weights(),
        method=params.get("method", "approx"),
        max_global_risk=float(params.get("max_global_risk", DEFAULT_MAX_GLOBAL_RISK)),
        qual=float(params.get("qual", 1.0)),
        fractional=params.get("fractional_fk", "exact"),
        table=table.name,
    )


def _suda(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    _check_params("suda", params, {"keys", "original_scores", "dis_fraction", "max_msu_size",
                                   "max_keys"})
    table = inputs.released
    keys = tuple(params.get("keys") or table.roles.quasi_identifiers)
    max_msu = params.get("max_msu_size")
    max_keys = int(params.get("max_keys", DEFAULT_MAX_KEYS))
    warnings = []
    subsets = sum(math.comb(len(keys), k) for k in range(1, (max_msu or len(keys)) + 1))
    if len(keys) > max_keys and max_msu is None:
        raise ConfigError(
            f"SUDA2 over {len(keys)} keys may examine up to {subsets:,} key subsets (limit "
            f"max_keys = {max_keys}); set suda.max_msu_size (e.g. 5) to cap the MSU size, "
            "or raise suda.max_keys if the cost is acceptable"
        )
    if len(keys) > WARN_KEYS:
        warnings.append(f"SUDA2 over {len(keys)} keys: up to {subsets:,} key subsets are "
                        "examined; expect a long run on large tables")
    for k in keys:
        col = table.column(k)
        if col.values is not None:
            vals = col.values[~np.isnan(col.values)]
            if vals.size and not np.all(vals == np.round(vals)):
                warnings.append(
                    f"key '{k}' has non-integer values: sdcMicro truncates them to integers "
                    "before SUDA2, riskgate keeps every distinct value as its own category"
                )
    codes = table.codes(keys)
    scores = suda2(codes, keys,
                   original_scores=bool(params.get("original_scores", True)),
                   dis_fraction=float(params.get("dis_fraction", DEFAULT_DIS_FRACTION)),
                   max_msu_size=None if max_msu is None else int(max_msu))
    # values of a sensitive attribute or direct identifier used as a key never reach the
    # outputs: their levels are named by code ("value#3"), as the inference attack does
    hidden = set(table.roles.sensitive) | set(table.roles.direct_identifiers)
    labels = [table.column(k).categories if k not in hidden else
              np.array([f"value#{i}" for i in range(table.column(k).n_categories)], dtype=object)
              for k in keys]
    levels = attribute_level_contributions(scores, codes, labels)
    return suda_result(scores, levels, tuple(warnings))


def _population(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    _check_params("population", params, {"population_size"})
    size = params.get("population_size")
    if size is None:
        return not_computable("population", "population models need the population size: "
                              "set measures.population.population_size (a number, or USA)")
    if isinstance(size, str) and size.strip().upper() == "USA":
        size = US_POPULATION
    try:
        N = float(size)
    except (TypeError, ValueError):
        raise ConfigError(f"population_size must be a number or 'USA', got {size!r}") from None
    freq = frequencies(inputs.released, missing="own")
    return population_uniqueness(freq.class_size, N)


def _drisk(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    _check_params("drisk", params, {"columns", "k"})
    if inputs.original is None:
        return not_computable("drisk", "dRisk compares released numeric values with the "
                              "original ones: configure the original table")
    rel, ori = inputs.released, inputs.original
    cols = params.get("columns")
    if not cols:
        cols = [c for c in rel.roles.quasi_identifiers + rel.roles.sensitive
                if rel.column(c).values is not None and rel.column(c).type.value == "continuous"]
    if not cols:
        return not_computable("drisk", "no continuous key columns: name them in "
                              "measures.drisk.columns")
    for c in cols:
        if rel.column(c).values is None:
            raise InputError(f"dRisk column '{c}' is not numeric; list numeric columns only")
    if rel.n != ori.n:
        return not_computable("drisk", f"dRisk needs the released table row-aligned with the "
                              f"original ({rel.n} vs {ori.n} rows)")
    x = np.column_stack([ori.column(c).values for c in cols])
    xm = np.column_stack([rel.column(c).values for c in cols])
    return drisk(x, xm, list(cols), float(params.get("k", DRISK_K)))


def _attack_tables(inputs: MeasureInputs, name: str) -> MeasureResult | None:
    if inputs.original is None:
        return not_computable(name, f"{name} attacks the original through the release: "
                              "configure the original table")
    return None


def _singling_out(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    from .attacks.singling_out import DEFAULT_MAX_ATTEMPTS, singling_out

    _check_params("singling_out", params, {"columns", "n_attacks", "n_cols", "mode",
                                           "max_attempts"})
    missing = _attack_tables(inputs, "singling_out")
    if missing:
        return missing
    roles = inputs.released.roles
    return singling_out(inputs.original, inputs.released, inputs.control,
                        columns=params.get("columns") or list(roles.quasi_identifiers
                                                              + roles.sensitive),
                        n_attacks=int(params.get("n_attacks", 500)),
                        n_cols=int(params.get("n_cols", 3)),
                        mode=params.get("mode", "multivariate"),
                        max_attempts=int(params.get("max_attempts", DEFAULT_MAX_ATTEMPTS)),
                        seed=inputs.seed)


def _linkability(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    from .attacks.linkability import linkability

    _check_params("linkability", params, {"aux_a", "aux_b", "n_attacks", "n_neighbors"})
    missing = _attack_tables(inputs, "linkability")
    if missing:
        return missing
    if not params.get("aux_a") or not params.get("aux_b"):
        return not_computable("linkability", "name the attacker's two column sets: "
                              "measures.linkability.aux_a and aux_b (disjoint)")
    return linkability(inputs.original, inputs.released, inputs.control,
                       aux_a=params["aux_a"], aux_b=params["aux_b"],
                       n_attacks=int(params.get("n_attacks", 500)),
                       n_neighbors=int(params.get("n_neighbors", 1)), seed=inputs.seed)


def _inference(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    from .attacks.inference import DEFAULT_TOLERANCE, inference

    _check_params("inference", params, {"secrets", "aux", "n_attacks", "regression",
                                        "tolerance"})
    missing = _attack_tables(inputs, "inference")
    if missing:
        return missing
    roles = inputs.released.roles
    secrets = list(params.get("secrets") or roles.sensitive)
    if not secrets:
        return not_computable("inference", "no secret: configure sensitive columns or "
                              "measures.inference.secrets")
    aux = list(params.get("aux") or roles.quasi_identifiers)
    per = {sec: inference(inputs.original, inputs.released, inputs.control, secret=sec,
                          aux=[a for a in aux if a != sec],
                          n_attacks=int(params.get("n_attacks", 500)),
                          regression=bool(params.get("regression", False)),
                          tolerance=float(params.get("tolerance", DEFAULT_TOLERANCE)),
                          seed=inputs.seed) for sec in secrets}
    worst = max(per, key=lambda k: per[k].figures["risk"] or 0.0)
    figures: dict[str, Any] = {"risk": per[worst].figures["risk"],
                               "risk_ci_high": max(r.figures["risk_ci_high"] for r in
                                                   per.values())}
    higher = {"risk": True, "risk_ci_high": True}
    for sec, res in per.items():
        for k, v in res.figures.items():
            figures[f"{sec}.{k}"] = v
            higher[f"{sec}.{k}"] = res.higher_is_riskier.get(k, True)
    return MeasureResult(
        measure="inference", figures=figures,
        parameters={"secrets": secrets, "aux": aux, **{k: v for k, v in params.items()
                                                       if k not in ("secrets", "aux")},
                    "seed": inputs.seed},
        higher_is_riskier=higher,
        details={"worst_secret": worst, **{sec: r.details for sec, r in per.items()}},
        warnings=tuple(f"{sec}: {w}" for sec, r in per.items() for w in r.warnings))


ALC_PARAMS = {"secrets", "known", "scenarios", "per_secret", "max_attacks", "time_budget",
              "halting", "alpha", "r_min", "abs_weight", "models", "target_query", "recall",
              "baseline", "types", "threshold"}


def _alc(inputs: MeasureInputs, params: Mapping[str, Any]) -> MeasureResult:
    """The Anonymity Loss Coefficient (seed 004) over a set of attack scenarios."""
    from .alc import ALCConfig, PRCParams, from_encoded
    from .alc.scenarios import Scenario, all_secrets, auto_scenarios, run_scenarios, summarize
    from .alc.targets import select_targets

    _check_params("alc", params, ALC_PARAMS)
    missing = _attack_tables(inputs, "alc")
    if missing:
        return missing
    roles = inputs.released.roles
    columns = list(roles.quasi_identifiers) + list(roles.sensitive)
    data = from_encoded([inputs.original, inputs.released], columns,
                        types=params.get("types"), household=roles.household)
    secrets = list(params.get("secrets") or roles.sensitive)
    known = list(params.get("known") or roles.quasi_identifiers)
    kind = params.get("scenarios", "pairs")
    if kind == "pairs":
        if not secrets:
            return not_computable("alc", "no secret: configure sensitive columns or "
                                  "measures.alc.secrets")
        scenarios = [Scenario(s, tuple(k for k in known if k != s)) for s in secrets]
    elif kind == "all_secrets":
        scenarios = all_secrets(data, known)
    elif kind == "auto":
        scenarios = auto_scenarios(data, secrets or None, int(params.get("per_secret", 5)),
                                   seed=inputs.seed)
    else:
        raise ConfigError(f"measure 'alc': scenarios must be pairs, all_secrets or auto, "
                          f"got {kind!r}")
    if not scenarios:
        return not_computable("alc", "no attack scenario (no known-column set qualifies)")
    cfg = ALCConfig(
        prc=PRCParams(alpha=float(params.get("alpha", 3.0)),
                      r_min=float(params.get("r_min", 1e-4)),
                      abs_weight=float(params.get("abs_weight", 0.0))),
        halting=params.get("halting", "paper"),
        max_attacks=params.get("max_attacks", 5000), time_budget=params.get("time_budget"),
        models=tuple(params.get("models") or ALCConfig().models), seed=inputs.seed)
    targets = (select_targets(data, params["target_query"]) if params.get("target_query")
               else None)
    results = run_scenarios(data, scenarios, cfg, targets=targets,
                            progress=lambda done, total, _s: progress.tick("attacks", done, total),
                            recall=params.get("recall", "targeted"),
                            baseline=params.get("baseline", "model"))
    summary = summarize(results)
    threshold = float(params.get("threshold", 0.5))
    figures: dict[str, Any] = {
        "max": summary.max_alc, "n_scenarios": summary.n_attacks,
        "n_safe": summary.counts["safe"], "n_at_risk": summary.counts["at_risk"],
        "n_serious": summary.counts["serious"],
        "n_insufficient": summary.counts["insufficient"],
        "n_above_threshold": sum(1 for r in results if r.alc is not None
                                 and r.alc >= threshold)}
    higher = {k: True for k in figures}
    higher["n_safe"] = False
    if kind == "pairs":
        for r in results:
            figures[f"{r.secret}.alc"] = r.alc
            higher[f"{r.secret}.alc"] = True
    records: dict[str, dict[str, np.ndarray]] = {}
    parts = []
    for i, r in enumerate(results):
        n = r.n_attacks
        parts.append({"scenario": np.full(n, i, np.int64), **r.predictions})
    if parts:
        records["alc_predictions"] = {k: np.concatenate([p[k] for p in parts])
                                      for k in parts[0]}
    insufficient = [r for r in results if r.alc is None]
    return MeasureResult(
        measure="alc", figures=figures,
        parameters={"scenarios": kind, "secrets": secrets, "known": known,
                    **{k: v for k, v in params.items() if k not in ("secrets", "known",
                                                                    "scenarios")},
                    "seed": inputs.seed},
        higher_is_riskier=higher,
        details={"summary": summary.to_dict(), "column_kinds": dict(data.kinds),
                 "attacks": [r.to_dict(with_predictions=False) for r in results]},
        warnings=tuple(f"{r.secret}: {w}" for r in results for w in r.warnings),
        status=Status.INSUFFICIENT_EVIDENCE if insufficient else Status.OK,
        reason=(f"{len(insufficient)} of {len(results)} ALC attack(s) reached no significant "
                "precision/recall pair (insufficient evidence)") if insufficient else None,
        records=records)


MEASURES: dict[str, Callable[[MeasureInputs, Mapping[str, Any]], MeasureResult]] = {
    "k_anonymity": _k_anonymity,
    "reid": _reid,
    "l_diversity": _l_diversity,
    "t_closeness": _t_closeness,
    "sdc": _sdc,
    "suda": _suda,
    "population": _population,
    "drisk": _drisk,
    "singling_out": _singling_out,
    "linkability": _linkability,
    "inference": _inference,
    "alc": _alc,
}

#: Families described in the spec that this version does not compute yet: a policy check on
#: them is "insufficient evidence", never a pass.
PLANNED: dict[str, str] = {}


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
    with progress.scope(name):
        return MEASURES[name](inputs, dict(params or {}))
