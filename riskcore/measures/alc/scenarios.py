"""Sets of ALC attacks and their summary (the ALC paper, section 4.3 and 6; the package's
``run_all_columns_attack`` and ``run_auto_attack``).

* one (known columns, secret) pair;
* every column as the secret, with a given known set (minus the secret);
* automatic known sets (the ALC paper, section 6): few known columns whose value combinations keep
  most rows distinct. On at most 10,000 sampled rows, column sets of size 1, 2, ... are tried
  (every combination while there are at most ``10 * max_sets`` of that size, else a random
  sample of that many); a set qualifies when its number of distinct combinations is at least
  ``unique_threshold`` (0.45) times the number of distinct full rows. A size stops after 50
  consecutive sets that do not qualify. Then ``per_secret`` qualifying sets that do not
  contain the secret are drawn at random for each secret.

Summary over attacks (section 4.3): the maximum ALC, the count per band (< 0.5 safe, 0.5-0.75
at risk, >= 0.75 serious, insufficient evidence) and the worst attack.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...equivalence import group_rows
from ...errors import ConfigError
from .inputs import ALCData
from .manager import ALCConfig, ALCResult, run_alc


def auto_known_sets(data: ALCData, columns: Sequence[str] | None = None, max_sets: int = 1000,
                    unique_threshold: float = 0.45, sample_rows: int = 10_000,
                    seed: int = 0) -> list[tuple[str, ...]]:
    """Known-column sets that make most rows distinct, smallest first (see the module doc)."""
    rng = np.random.default_rng(seed)
    cols = list(columns or data.columns)
    t = data.original
    n = data.n[t]
    rows = np.sort(rng.choice(n, size=sample_rows, replace=False)) if n > sample_rows \
        else np.arange(n)
    codes = {c: data.codes[t][c][rows] for c in cols}
    _, n_full = group_rows(np.column_stack([codes[c] for c in cols]))
    found: list[tuple[str, ...]] = []
    for r in range(1, len(cols) + 1):
        total = math.comb(len(cols), r)
        if total <= 10 * max_sets:
            combos: Sequence[tuple[str, ...]] = list(itertools.combinations(cols, r))
        else:
            seen: set[tuple[str, ...]] = set()
            for _ in range(10 * max_sets):
                seen.add(tuple(sorted(rng.choice(cols, size=r, replace=False).tolist(),
                                      key=cols.index)))
            combos = sorted(seen, key=lambda s: [cols.index(c) for c in s])
        inactive = 0
        for combo in combos:
            inactive += 1
            if inactive > 50:
                break
            _, distinct = group_rows(np.column_stack([codes[c] for c in combo]))
            if distinct >= unique_threshold * n_full:
                inactive = 0
                found.append(tuple(combo))
                if len(found) >= max_sets:
                    return found
    return found


@dataclass(frozen=True)
class Scenario:
    secret: str
    known: tuple[str, ...]


def all_secrets(data: ALCData, known: Sequence[str] | None = None,
                secrets: Sequence[str] | None = None) -> list[Scenario]:
    """Every column as the secret; the known set is ``known`` (default: all other columns)."""
    cols = list(data.columns)
    out = []
    for s in secrets or cols:
        k = [c for c in (known or cols) if c != s]
        if k:
            out.append(Scenario(s, tuple(k)))
    return out


def auto_scenarios(data: ALCData, secrets: Sequence[str] | None = None, per_secret: int = 5,
                   columns: Sequence[str] | None = None, max_sets: int = 1000,
                   unique_threshold: float = 0.45, seed: int = 0) -> list[Scenario]:
    """``per_secret`` automatic known sets for every secret (the ALC paper, section 6)."""
    rng = np.random.default_rng(seed)
    sets = auto_known_sets(data, columns, max_sets, unique_threshold, seed=seed)
    out = []
    for s in secrets or data.columns:
        valid = [k for k in sets if s not in k]
        if not valid:
            continue
        pick = rng.choice(len(valid), size=min(per_secret, len(valid)), replace=False)
        out += [Scenario(s, valid[i]) for i in sorted(pick)]
    return out


@dataclass(frozen=True)
class ALCSummary:
    """Section 4.3: the set of attacks condensed."""

    max_alc: float | None
    n_attacks: int
    counts: dict[str, int]
    worst: ALCResult | None

    def to_dict(self) -> dict[str, Any]:
        return {"max_alc": self.max_alc, "n_attacks": self.n_attacks, "counts": self.counts,
                "worst": None if self.worst is None else
                {"secret": self.worst.secret, "known": list(self.worst.known),
                 "alc": self.worst.alc, "band": self.worst.band}}


def summarize(results: Sequence[ALCResult]) -> ALCSummary:
    counts = {"safe": 0, "at_risk": 0, "serious": 0, "insufficient": 0}
    for r in results:
        counts[r.band] += 1
    scored = [r for r in results if r.alc is not None]
    worst = max(scored, key=lambda r: r.alc) if scored else None  # type: ignore[arg-type,return-value]
    return ALCSummary(max_alc=worst.alc if worst else None, n_attacks=len(results),
                      counts=counts, worst=worst)


SCENARIO_KINDS = ("pairs", "all_secrets", "auto")


def build_scenarios(data: ALCData, kind: str, secrets: Sequence[str] | None,
                    known: Sequence[str] | None, per_secret: int = 5, seed: int = 0
                    ) -> list[Scenario]:
    """The attack scenarios of a run (one construction for the gate and the CLI).

    Args:
        kind: ``pairs`` (each secret against the known columns minus itself), ``all_secrets``
            (every column as the secret) or ``auto`` (known sets that make most rows distinct,
            the ALC paper, section 6).
        secrets: the secrets (``pairs``: required; the others: restrict to these).
        known: the known columns (default: every other column).
    """
    if kind == "pairs":
        if not secrets:
            raise ConfigError("ALC: name the secret(s) (measures.alc.secrets, or --secret)")
        cols = list(known or data.columns)
        return [Scenario(s, tuple(k for k in cols if k != s)) for s in secrets]
    if kind == "all_secrets":
        return all_secrets(data, known, secrets)
    if kind == "auto":
        return auto_scenarios(data, secrets or None, per_secret, columns=known, seed=seed)
    raise ConfigError(f"ALC: scenarios must be one of {SCENARIO_KINDS}, got {kind!r}")


def run_scenarios(data: ALCData, scenarios: Sequence[Scenario],
                  config: ALCConfig = ALCConfig(), progress: Callable[[int, int, str], None]
                  | None = None, **kwargs: Any) -> list[ALCResult]:
    """Run every scenario with the same configuration (the seed of the i-th is seed + i)."""
    out = []
    for i, sc in enumerate(scenarios):
        cfg = dataclasses.replace(config, seed=config.seed + i)
        out.append(run_alc(data, sc.secret, list(sc.known), cfg, **kwargs))
        if progress:
            progress(i + 1, len(scenarios), f"{sc.secret}: ALC {out[-1].alc}")
    return out
