"""What the three attack families (anonymeter) share: their tables, jointly encoded (equal values
share codes across tables), the checks on them, target sampling and the result they return."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...equivalence import ControlOverlap, control_overlap_test, group_rows
from ...errors import ConfigError, InputError
from ...results import MeasureResult
from ...roles import Roles
from ...stats import Rate, privacy_risk, rate_figures
from ..family import MeasureFamily

if TYPE_CHECKING:
    import pandas as pd

    from ...data import EncodedTable


DEFAULT_N_ATTACKS = 500

#: higher = riskier for the figures every attack result carries
_HIGHER = ("risk", "risk_ci_low", "risk_ci_high", "attack_rate", "n_attack")
_LOWER = ("attack_error", "baseline_rate", "baseline_error", "n_baseline", "control_rate",
          "control_error", "n_control", "n_attacks", "n_attacks_achieved", "inconclusive")


def attack_figures(prefix: str = "") -> dict[str, bool]:
    """The figures of one attack result (with ``prefix``) and their directions."""
    return {**{prefix + k: True for k in _HIGHER}, **{prefix + k: False for k in _LOWER}}


def encode_attack_tables(ori: pd.DataFrame, syn: pd.DataFrame, control: pd.DataFrame | None,
                         columns: Sequence[str] | None = None) -> dict[str, EncodedTable]:
    """Encode DataFrames for the attacks (column types inferred on the original)."""
    cols = list(columns) if columns is not None else list(ori.columns)
    frames = {"original": ori, "released": syn}
    if control is not None:
        frames["control"] = control
    from ...data import encode_tables

    return encode_tables(frames, Roles(tuple(cols)), columns=cols)


def check_attack_columns(tables: Mapping[str, EncodedTable], columns: Sequence[str], what: str
                         ) -> None:
    """Refuse missing, duplicated or differently typed attack columns, naming table and column."""
    if not columns:
        raise ConfigError(f"{what}: no columns given")
    dup = sorted({c for c in columns if list(columns).count(c) > 1})
    if dup:
        raise ConfigError(f"{what}: column(s) {dup} listed twice")
    for name, t in tables.items():
        missing = [c for c in columns if c not in t.columns]
        if missing:
            raise InputError(f"{what}: table '{name}' has no column(s) {missing}; fix the "
                             "column names in the config")
    ref = tables["original"]
    for name, t in tables.items():
        for c in columns:
            if (t.column(c).values is None) != (ref.column(c).values is None):
                raise InputError(f"{what}: column '{c}' is numeric in one table and not in "
                                 f"'{name}'; give it one type in every table")


def dedup_rows(table: EncodedTable, columns: Sequence[str]) -> np.ndarray:
    """Row numbers of the first occurrence of each distinct row over ``columns`` (in order)."""
    ids, u = group_rows(table.codes(list(columns)))
    first = np.full(u, table.n, dtype=np.int64)
    np.minimum.at(first, ids, np.arange(table.n))
    return np.sort(first)


def control_overlap(ori: EncodedTable, control: EncodedTable, columns: Sequence[str]
                    ) -> ControlOverlap:
    """The control-overlap test over ``columns``: control rows that also occur verbatim in the
    original, against the rate at which the original repeats itself (independent samples)."""
    return control_overlap_test(control.codes(list(columns)), ori.codes(list(columns)))[0]


def sample_rows(rng: np.random.Generator, n_rows: int, n: int) -> np.ndarray:
    """n distinct row numbers of a table of n_rows, in random order."""
    return rng.choice(n_rows, size=n, replace=False)


def overlap_warning(ori: EncodedTable, control: EncodedTable | None, columns: Sequence[str]
                    ) -> list[str]:
    """A warning when the control table shares more rows with the original than independent
    samples would (it must be held out)."""
    if control is None:
        return []
    test = control_overlap(ori, control, columns)
    if test.excessive:
        return [test.describe(len(columns)) + "; the control set must be records held out of "
                "the release, otherwise the risk is under-estimated"]
    return []


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
    return MeasureResult(
        measure=measure, figures=figures, parameters=dict(parameters),
        details={"risk_ci": list(risk.ci), **(details or {})},
        warnings=tuple(warns),
    )


#: an attack whose risk interval lies wholly above this has shown serious disclosure
ALARM_RISK = 0.5


def attack_alarm(result: MeasureResult) -> str | None:
    """The attack showed serious disclosure (its risk interval lies above 0.5)."""
    low = result.figures.get("risk_ci_low")
    if low is not None and low >= ALARM_RISK:
        return (f"{result.measure}: the attack succeeds far beyond chance (risk interval above "
                f"{low:.3g})")
    return None


def attack_family(**declared: Any) -> MeasureFamily:
    """An attack family in anonymeter's mould (singling out, linkability, inference): what
    the three share (the attacks' section, the original needed, the control read as chance's
    yardstick, figures that depend on how columns are read, the attacks' alarm, and
    :func:`attack_figures` unless it declares its own) with what the family declares."""
    shared: dict[str, Any] = {"section": "attacks", "needs": ("original",),
                              "reads": ("control",), "distance": True, "alarm": attack_alarm,
                              "figures": lambda p, roles: attack_figures()}
    return MeasureFamily(**{**shared, **declared})
