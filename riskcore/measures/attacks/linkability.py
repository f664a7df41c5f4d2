"""Linkability attack with random baseline and control (anonymeter 1.1.0; docs/measures.md 5).

An attacker holds two tables about the same people with disjoint columns (aux A and aux B).
For each target record (drawn from the original, or from the control table for the control
attack) the k nearest released rows on A and on B are found (Gower distance); the target is
linked when the two neighbour sets intersect. Baseline: two random sets of k released rows
per target. ``rates_for(k)`` re-evaluates any k up to the searched one without a new search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from ...compiled import warm
from ...errors import ConfigError
from ...results import MeasureResult
from ...roles import Roles
from ...stats import wilson
from ..family import MeasureInputs, Params
from .common import (
    DEFAULT_N_ATTACKS,
    attack_family,
    attack_result,
    check_attack_columns,
    overlap_warning,
    sample_rows,
)
from .gower import kneighbors, prepare

if TYPE_CHECKING:
    from ...data import EncodedTable


def _linked(nn_a: np.ndarray, nn_b: np.ndarray, k: int) -> np.ndarray:
    """Per target: do the first k neighbours on A and on B share a row?"""
    a, b = nn_a[:, :k], nn_b[:, :k]
    return (a[:, :, None] == b[:, None, :]).any(axis=(1, 2))


def _random_sets(rng: np.random.Generator, n: int, m: int, k: int) -> np.ndarray:
    """n rows of k distinct integers in [0, m), drawn without replacement per row."""
    out = rng.integers(0, m, size=(n, k))
    while True:
        s = np.sort(out, axis=1)
        dup = (s[:, 1:] == s[:, :-1]).any(axis=1) if k > 1 else np.zeros(n, dtype=bool)
        if not dup.any():
            return out
        out[dup] = rng.integers(0, m, size=(int(dup.sum()), k))


def linkability(
    original: EncodedTable,
    released: EncodedTable,
    control: EncodedTable | None = None,
    *,
    aux_a: Sequence[str],
    aux_b: Sequence[str],
    n_attacks: int = DEFAULT_N_ATTACKS,
    n_neighbors: int = 1,
    seed: int = 0,
    wildcards: Mapping[str, int] | None = None,
) -> MeasureResult:
    """Linkability risk (anonymeter). Figures per k in ``details['by_k']``; ``wildcards`` as in
    :func:`~riskcore.measures.attacks.gower.prepare`."""
    aux_a, aux_b = list(aux_a), list(aux_b)
    overlap = sorted(set(aux_a) & set(aux_b))
    if overlap:
        raise ConfigError(f"linkability: the two auxiliary column sets overlap on {overlap}; "
                          "they must be disjoint")
    tables = {"original": original, "released": released}
    if control is not None:
        tables["control"] = control
    check_attack_columns(tables, aux_a, "linkability (aux A)")
    check_attack_columns(tables, aux_b, "linkability (aux B)")
    if not 1 <= n_neighbors <= released.n:
        raise ConfigError(f"n_neighbors must lie in [1, {released.n}]")
    rng = np.random.default_rng(seed)
    warnings: list[str] = overlap_warning(original, control, aux_a + aux_b)
    n_ori = min(n_attacks, original.n)
    if n_ori < n_attacks:
        warnings.append(f"n_attacks {n_attacks} exceeds the original's {original.n} rows; "
                        f"{n_ori} targets are used")
    targets = sample_rows(rng, original.n, n_ori)
    ctrl_targets = None
    if control is not None:
        n_ctrl = min(n_attacks, control.n)
        ctrl_targets = sample_rows(rng, control.n, n_ctrl)

    def neighbours(cols: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
        tabs = [released, original] + ([control] if control is not None else [])
        rows = [None, targets] + ([ctrl_targets] if control is not None else [])
        mats = prepare(tabs, cols, rows, wildcards)
        nn_main, _ = kneighbors(mats[1], mats[0], n_neighbors)
        nn_ctrl = kneighbors(mats[2], mats[0], n_neighbors)[0] if control is not None else None
        return nn_main, nn_ctrl

    a_main, a_ctrl = neighbours(aux_a)
    b_main, b_ctrl = neighbours(aux_b)
    base_a = _random_sets(rng, n_ori, released.n, n_neighbors)
    base_b = _random_sets(rng, n_ori, released.n, n_neighbors)

    by_k = {}
    for k in range(1, n_neighbors + 1):
        main = int(_linked(a_main, b_main, k).sum())
        base = int(_linked(base_a, base_b, k).sum())
        ctrl = None if a_ctrl is None or b_ctrl is None else int(
            _linked(a_ctrl, b_ctrl, k).sum())
        by_k[k] = (main, base, ctrl)

    def result_for(k: int) -> MeasureResult:
        main, base, ctrl = by_k[k]
        return attack_result(
            "linkability", wilson(main, n_attacks), wilson(base, n_attacks),
            None if ctrl is None else wilson(ctrl, n_attacks),
            n_attacks=n_attacks, n_achieved=n_ori,
            parameters={"aux_a": aux_a, "aux_b": aux_b, "n_neighbors": k, "seed": seed},
            details={"by_k": {str(kk): {"n_attack": v[0], "n_baseline": v[1], "n_control": v[2]}
                              for kk, v in by_k.items()}},
            warnings=tuple(warnings))

    res = result_for(n_neighbors)
    return res


def risk_for_k(result: MeasureResult, k: int) -> tuple[float, tuple[float, float]]:
    """Risk and interval of a linkability result at any k <= the searched one, from its counts."""
    from ...stats import privacy_risk

    counts = result.details["by_k"].get(str(k))
    if counts is None:
        raise ConfigError(f"k = {k} was not searched (up to {result.parameters['n_neighbors']})")
    n = int(result.figures["n_attacks"] or 0)
    ctrl = None if counts["n_control"] is None else wilson(counts["n_control"], n)
    r = privacy_risk(wilson(counts["n_attack"], n), ctrl)
    return r.value, r.ci


class LinkabilityParams(Params):
    """Parameters of ``linkability``: the attacker's two disjoint column sets."""

    aux_a: list[str] = Field(min_length=1, description="first auxiliary column set")
    aux_b: list[str] = Field(min_length=1, description="second auxiliary column set")
    n_attacks: int = Field(DEFAULT_N_ATTACKS, ge=1)
    n_neighbors: int = Field(1, ge=1, description="k nearest neighbours compared")
    column_fields = ("aux_a", "aux_b")


def _check(params: LinkabilityParams, roles: Roles) -> None:
    overlap = sorted(set(params.aux_a) & set(params.aux_b))
    if overlap:
        raise ConfigError(f"aux_a and aux_b overlap on {overlap}; they must be disjoint")


def _run(inputs: MeasureInputs, params: LinkabilityParams) -> MeasureResult:
    assert inputs.original is not None
    cols = [*params.aux_a, *params.aux_b]
    refused = inputs.domain_check("linkability", cols)
    if refused is not None:
        return refused
    result = linkability(inputs.original, inputs.released, inputs.control, aux_a=params.aux_a,
                         aux_b=params.aux_b, n_attacks=params.n_attacks,
                         n_neighbors=params.n_neighbors, seed=inputs.seed,
                         wildcards=inputs.wildcards(cols))
    return inputs.with_alignment(result, cols)


FAMILY = attack_family(
    name="linkability",
    title="Linkability",
    params=LinkabilityParams,
    run=_run,
    start_up=warm,
    check=_check,
    how_to_read=(
        "How often the release lets an attacker link two halves of a person's record (two "
        "disjoint column sets) beyond what chance and the control records give."),
    advice=(
        "The release links the attacker's two column sets: generalize or perturb the columns of "
        "one set, or remove near-copies of original rows."),
)
