"""The ``alc`` measure family: the Anonymity Loss Coefficient over a set of attack scenarios
(the ALC paper; docs/measures.md 6). The computation lives in this package's other modules; this
one holds the
family's parameters, its adapter from the gate's encoded tables, its figures and report text."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from ... import progress
from ...compiled import warm
from ...errors import ConfigError
from ...results import MeasureResult, Status, not_computable
from ...roles import Roles
from ...threads import start_models
from ..family import MeasureFamily, MeasureInputs, Params
from .baseline import DEFAULT_MODELS
from .inputs import from_encoded
from .manager import ALCConfig, ALCResult
from .prc import PRCParams
from .scenarios import build_scenarios, run_scenarios, summarize
from .targets import select_targets

ModelName = Literal["hist_gradient_boosting", "random_forest", "extra_trees",
                    "logistic_regression", "one_to_one"]
COUNT_FIGURES = ("n_scenarios", "n_safe", "n_at_risk", "n_serious", "n_insufficient",
                 "n_above_threshold")


class ALCParams(Params):
    """Parameters of ``alc`` (defaults: anonymity_loss_coefficient 1.0.32's, docs/measures.md 6)."""

    secrets: list[str] | None = Field(None, min_length=1,
                                      description="secret columns; default the sensitive ones")
    known: list[str] | None = Field(None, min_length=1, description="known columns; default "
                                    "the quasi-identifiers")
    scenarios: Literal["pairs", "all_secrets", "auto"] = "pairs"
    per_secret: int = Field(5, ge=1, description="auto: known sets per secret")
    max_attacks: int = Field(5000, ge=1, description="targets attacked per scenario at most")
    time_budget: float | None = Field(None, gt=0, description="seconds per scenario (makes "
                                      "the result depend on the machine's speed)")
    halting: Literal["paper", "package"] = "paper"
    alpha: float = Field(3.0, gt=0, description="PRC recall-adjustment strength")
    r_min: float = Field(1e-4, gt=0, lt=1, description="PRC recall floor")
    abs_weight: float = Field(0.0, ge=0, le=1, description="weight of the absolute ALC")
    models: list[ModelName] | None = Field(None, min_length=1, description="baseline models")
    target_query: str | None = Field(None, description="pre-targeted mode: 'top 1% income' "
                                     "or a predicate")
    recall: Literal["targeted", "population"] = "targeted"
    baseline: Literal["model", "prior"] = "model"
    types: dict[str, Literal["continuous", "categorical"]] | None = None
    threshold: float = Field(0.5, le=1.0, description="n_above_threshold counts "
                             "scenarios with ALC at or above it")
    column_fields = ("secrets", "known", "types")

    def config(self, seed: int) -> ALCConfig:
        return ALCConfig(prc=PRCParams(alpha=self.alpha, r_min=self.r_min,
                                       abs_weight=self.abs_weight),
                         halting=self.halting, max_attacks=self.max_attacks,
                         time_budget=self.time_budget,
                         models=tuple(self.models or DEFAULT_MODELS), seed=seed)


def _secrets(params: ALCParams, roles: Roles) -> list[str]:
    return list(params.secrets or roles.sensitive)


def _check(params: ALCParams, roles: Roles) -> None:
    if params.scenarios == "pairs" and not _secrets(params, roles):
        raise ConfigError("needs a secret: set roles.sensitive or measures.alc.secrets")


def _run(inputs: MeasureInputs, params: ALCParams) -> MeasureResult:
    assert inputs.original is not None
    roles = inputs.released.roles
    columns = list(roles.compared_columns)
    secrets = _secrets(params, roles)
    used = list(dict.fromkeys([*(params.known or roles.quasi_identifiers), *secrets]))
    refused = inputs.domain_check("alc", used)
    if refused is not None:
        return refused
    data = from_encoded([inputs.original, inputs.released], columns, types=params.types,
                        household=roles.household)
    known = list(params.known or roles.quasi_identifiers)
    scenarios = build_scenarios(data, params.scenarios, secrets,
                                None if params.scenarios == "auto" else known,
                                params.per_secret, inputs.seed)
    if not scenarios:
        return not_computable("alc", "no attack scenario (no known-column set qualifies)")
    targets = select_targets(data, params.target_query) if params.target_query else None
    results = run_scenarios(data, scenarios, params.config(inputs.seed), targets=targets,
                            progress=lambda done, total, _s: progress.tick("attacks", done,
                                                                            total),
                            recall=params.recall, baseline=params.baseline)
    return inputs.with_alignment(
        alc_result(results, params, secrets, known, data.kinds, inputs.seed), used)


def alc_result(results: list[ALCResult], params: ALCParams, secrets: list[str],
               known: list[str], kinds: Any, seed: int) -> MeasureResult:
    """The ``alc`` measure from the scenarios' results."""
    summary = summarize(results)
    figures: dict[str, Any] = {
        "max": summary.max_alc, "n_scenarios": summary.n_attacks,
        "n_safe": summary.counts["safe"], "n_at_risk": summary.counts["at_risk"],
        "n_serious": summary.counts["serious"],
        "n_insufficient": summary.counts["insufficient"],
        "n_above_threshold": sum(1 for r in results if r.alc is not None
                                 and r.alc >= params.threshold)}
    if params.scenarios == "pairs":
        for r in results:
            figures[f"{r.secret}.alc"] = r.alc
    records: dict[str, dict[str, np.ndarray]] = {}
    parts = [{"scenario": np.full(r.n_attacks, i, np.int64), **r.predictions}
             for i, r in enumerate(results)]
    if parts:
        records["alc_predictions"] = {k: np.concatenate([p[k] for p in parts])
                                      for k in parts[0]}
    insufficient = [r for r in results if r.alc is None]
    return MeasureResult(
        measure="alc", figures=figures,
        parameters={**params.model_dump(mode="json"), "secrets": secrets, "known": known,
                    "seed": seed},
        details={"summary": summary.to_dict(), "column_kinds": dict(kinds),
                 "attacks": [r.to_dict(with_predictions=False) for r in results]},
        warnings=tuple(f"{r.secret}: {w}" for r in results for w in r.warnings),
        status=Status.INSUFFICIENT_EVIDENCE if insufficient else Status.OK,
        reason=(f"{len(insufficient)} of {len(results)} ALC attack(s) reached no significant "
                "precision/recall pair (insufficient evidence)") if insufficient else None,
        records=records)


def _directions(figures: dict[str, Any]) -> dict[str, bool]:
    return {k: k != "n_safe" for k in figures}


def _figures(params: ALCParams, roles: Roles) -> dict[str, bool]:
    names = ["max", *COUNT_FIGURES]
    if params.scenarios == "pairs":
        names += [f"{s}.alc" for s in _secrets(params, roles)]
    return _directions(dict.fromkeys(names))


def _alarm(result: MeasureResult) -> str | None:
    worst = result.figures.get("max")
    if worst is not None and worst >= 0.75:
        return f"alc: an attack reaches ALC {worst:.3g} (serious, >= 0.75)"
    return None


def _start_up() -> None:
    """numba's set-up (the row matches' kernel) and the baseline's models."""
    warm()
    start_models("sklearn.ensemble", "sklearn.linear_model", "sklearn.pipeline",
                 "sklearn.preprocessing")


FAMILY = MeasureFamily(
    name="alc",
    title="Anonymity Loss Coefficient",
    section="alc",
    params=ALCParams,
    run=_run,
    figures=_figures,
    needs=("original",),
    check=_check,
    alarm=_alarm,
    fits_models=True,
    start_up=_start_up,
    how_to_read=(
        "The Anonymity Loss Coefficient compares an attack on the release (best row match) with "
        "the best prediction possible from other people's raw data (the baseline), at the "
        "attack's most precise level of recall. Below 0.5 the release is safe for that secret; "
        "0.5 to 0.75 is at risk; 0.75 and above is serious. A negative value means the release "
        "helps an attacker less than the baseline. 'Insufficient evidence' is never a pass."),
    advice=(
        "The best-row-match attack predicts the secret better than the baseline: look at the "
        "attack with the highest ALC, remove near-copies of original rows, generalize its known "
        "columns or perturb the secret."),
)
