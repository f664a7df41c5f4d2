"""Inference attack with baseline and control (anonymeter 1.1.0; docs/measures.md 5).

For each target (from the original; from the control table for the control attack) the attacker
takes the secret of the nearest released row on the auxiliary columns (Gower distance). A guess
is correct when equal to the target's secret (missing equals missing), or, with
``regression=True`` for a numeric secret, when |guess - secret| <= tolerance * |guess|
(anonymeter's rule, relative to the guess). Baseline: the secrets of random released rows,
compared with the targets' secrets *by position* (anonymeter 1.1.0 aligns them by index label
and turns ~97% of its baseline guesses into NaN; riskgate does not reproduce that bug).
Counts: n_ori = min(n_attacks, len(original)), n_base = min(len(released), n_ori),
n_ctrl = min(n_attacks, len(control)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from ...compiled import warm
from ...errors import ConfigError
from ...results import MeasureResult
from ...roles import Roles
from ...stats import privacy_risk, wilson
from ..family import MeasureInputs, Params
from .common import (
    DEFAULT_N_ATTACKS,
    attack_family,
    attack_figures,
    attack_result,
    check_attack_columns,
    overlap_warning,
    sample_rows,
)
from .gower import kneighbors, prepare

if TYPE_CHECKING:
    from ...data import EncodedTable


DEFAULT_TOLERANCE = 0.05


Side = tuple[np.ndarray, "np.ndarray | None"]


def _correct(guess: Side, true: Side, regression: bool, tolerance: float) -> np.ndarray:
    """Right guesses: equal codes, or (regression) a value within the tolerance."""
    guess_codes, guess_vals = guess
    true_codes, true_vals = true
    if regression and guess_vals is not None and true_vals is not None:
        both_nan = np.isnan(guess_vals) & np.isnan(true_vals)
        with np.errstate(invalid="ignore"):
            close = np.abs(guess_vals - true_vals) <= tolerance * (np.abs(guess_vals) + 1e-12)
        return close | both_nan
    return guess_codes == true_codes  # codes are shared: -1 == -1 is "missing equals missing"


def inference(
    original: EncodedTable,
    released: EncodedTable,
    control: EncodedTable | None = None,
    *,
    secret: str,
    aux: Sequence[str],
    n_attacks: int = DEFAULT_N_ATTACKS,
    regression: bool = False,
    tolerance: float = DEFAULT_TOLERANCE,
    seed: int = 0,
    wildcards: Mapping[str, int] | None = None,
) -> MeasureResult:
    """Inference risk for one secret (anonymeter); per-value rates in ``details['by_value']``;
    ``wildcards`` as in :func:`~riskcore.measures.attacks.gower.prepare`."""
    aux = list(aux)
    if secret in aux:
        raise ConfigError(f"inference: the secret '{secret}' is also an auxiliary column; "
                          "remove it from aux")
    tables = {"original": original, "released": released}
    if control is not None:
        tables["control"] = control
    check_attack_columns(tables, aux + [secret], "inference")
    sec_is_num = original.column(secret).values is not None
    if regression and not sec_is_num:
        raise ConfigError(f"inference: regression needs a numeric secret; '{secret}' is not")
    rng = np.random.default_rng(seed)
    warnings: list[str] = overlap_warning(original, control, aux + [secret])
    n_ori = min(n_attacks, original.n)
    if n_ori < n_attacks:
        warnings.append(f"n_attacks {n_attacks} exceeds the original's {original.n} rows")
    targets = sample_rows(rng, original.n, n_ori)
    n_base = min(released.n, n_ori)
    base_rows = sample_rows(rng, released.n, n_base)
    ctrl_targets = None
    if control is not None:
        ctrl_targets = sample_rows(rng, control.n, min(n_attacks, control.n))
    tabs = [released, original] + ([control] if control is not None else [])
    rows = [None, targets] + ([ctrl_targets] if control is not None else [])
    mats = prepare(tabs, aux, rows, wildcards)

    sc = {name: t.column(secret) for name, t in tables.items()}

    def vals(name: str, idx: np.ndarray) -> Side:
        col = sc[name]
        return col.codes[idx], (None if col.values is None else col.values[idx])

    def guesses(queries: Any) -> np.ndarray:
        return kneighbors(queries, mats[0], 1)[0][:, 0]

    g = guesses(mats[1])
    ok_main = _correct(vals("released", g), vals("original", targets), regression, tolerance)
    ok_base = _correct(vals("released", base_rows), vals("original", targets[:n_base]),
                       regression, tolerance)
    ok_ctrl = None
    if control is not None:
        gc = guesses(mats[2])
        assert ctrl_targets is not None
        ok_ctrl = _correct(vals("released", gc), vals("control", ctrl_targets), regression,
                           tolerance)
    main = wilson(int(ok_main.sum()), n_ori)
    base = wilson(int(ok_base.sum()), n_base)
    ctrl = None if ok_ctrl is None else wilson(int(ok_ctrl.sum()), ok_ctrl.size)

    by_value = {}
    if not sec_is_num or not regression:
        true_main = sc["original"].codes[targets]
        true_ctrl = None if ok_ctrl is None else sc["control"].codes[ctrl_targets]
        for code in np.unique(true_main):
            sel = true_main == code
            entry: dict[str, Any] = {"n_targets": int(sel.sum()),
                                     "n_attack": int(ok_main[sel].sum())}
            r_ctrl = None
            if true_ctrl is not None and ok_ctrl is not None and (true_ctrl == code).any():
                csel = true_ctrl == code
                entry.update({"n_control_targets": int(csel.sum()),
                              "n_control": int(ok_ctrl[csel].sum())})
                r_ctrl = wilson(entry["n_control"], entry["n_control_targets"])
            risk = privacy_risk(wilson(entry["n_attack"], entry["n_targets"]), r_ctrl)
            entry["risk"] = risk.value
            entry["risk_ci"] = list(risk.ci)
            # values are reported by code, never by the sensitive value itself
            by_value[f"value#{int(code)}"] = entry
    return attack_result(
        "inference", main, base, ctrl, n_attacks=n_attacks, n_achieved=n_ori,
        parameters={"secret": secret, "aux": aux, "regression": regression,
                    "tolerance": tolerance if regression else None, "seed": seed},
        details={"by_value": by_value, "n_baseline_trials": n_base,
                 "n_control_trials": None if ok_ctrl is None else int(ok_ctrl.size)},
        warnings=tuple(warnings))


class InferenceParams(Params):
    """Parameters of ``inference``."""

    secrets: list[str] | None = Field(None, min_length=1,
                                      description="secret columns; default the sensitive ones")
    aux: list[str] | None = Field(None, min_length=1, description="columns the attacker "
                                  "knows; default the quasi-identifiers")
    n_attacks: int = Field(DEFAULT_N_ATTACKS, ge=1)
    regression: bool = Field(False, description="numeric secret guessed within the tolerance")
    tolerance: float = Field(DEFAULT_TOLERANCE, gt=0.0)
    column_fields = ("secrets", "aux")


def _secrets(params: InferenceParams, roles: Roles) -> list[str]:
    return list(params.secrets or roles.sensitive)


def _check(params: InferenceParams, roles: Roles) -> None:
    if not _secrets(params, roles):
        raise ConfigError("needs a secret: set roles.sensitive or measures.inference.secrets")


def _run(inputs: MeasureInputs, params: InferenceParams) -> MeasureResult:
    assert inputs.original is not None
    roles = inputs.released.roles
    secrets = _secrets(params, roles)
    aux = list(params.aux or roles.quasi_identifiers)
    cols = list(dict.fromkeys([*aux, *secrets]))
    refused = inputs.domain_check("inference", cols)
    if refused is not None:
        return refused
    wild = inputs.wildcards(aux)
    per = {sec: inference(inputs.original, inputs.released, inputs.control, secret=sec,
                          aux=[a for a in aux if a != sec], n_attacks=params.n_attacks,
                          regression=params.regression, tolerance=params.tolerance,
                          seed=inputs.seed, wildcards=wild) for sec in secrets}
    worst = max(per, key=lambda k: per[k].figures["risk"] or 0.0)
    # unprefixed: the worst secret's figures (risk_ci_high: the highest over the secrets)
    figures: dict[str, Any] = {**per[worst].figures,
                               "risk_ci_high": max(r.figures["risk_ci_high"] or 0.0
                                                   for r in per.values())}
    for sec, res in per.items():
        for k, v in res.figures.items():
            figures[f"{sec}.{k}"] = v
    return inputs.with_alignment(MeasureResult(
        measure="inference", figures=figures,
        parameters={**params.model_dump(), "secrets": secrets, "aux": aux, "seed": inputs.seed},
        higher_is_riskier=_figures(params, roles),
        details={"worst_secret": worst, **{sec: r.details for sec, r in per.items()}},
        warnings=tuple(f"{sec}: {w}" for sec, r in per.items() for w in r.warnings)),
        cols)


def _figures(params: InferenceParams, roles: Roles) -> dict[str, bool]:
    out = attack_figures()
    for sec in _secrets(params, roles):
        out.update(attack_figures(f"{sec}."))
    return out


FAMILY = attack_family(
    name="inference",
    title="Inference",
    params=InferenceParams,
    run=_run,
    figures=_figures,
    start_up=warm,
    check=_check,
    how_to_read=(
        "How often an attacker who knows some columns infers a secret column correctly through "
        "the release, beyond the same attack on control records. Reported per secret; the gate "
        "uses the worst."),
    advice=(
        "The release lets an attacker infer the secret better than the control: perturb the "
        "secret, generalize the columns it is inferred from, or remove near-copies of original "
        "rows."),
)
