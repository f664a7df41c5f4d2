"""The releases a family reads besides the run's own tables: the earlier releases of the same
data that ``composition`` judges the new one with (:mod:`riskcore.gate.lineage` loads them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class ReleaseTables:
    """One release as composition reads it: its table, its quasi-identifiers and sensitive
    columns, its generalization declarations and suppression tokens, its original."""

    name: str
    released: pd.DataFrame
    quasi_identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    generalization: Mapping[str, Any] = field(default_factory=dict)
    tokens: tuple[str, ...] = ("*",)
    original: pd.DataFrame | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: why the release cannot be composed with (not read, changed, unsigned), or None
    reason: str | None = None


@dataclass(frozen=True)
class Lineage:
    """What the gate loads for composition: the current original, the new release and the
    earlier releases (each with its reason when it cannot be used), and the control."""

    original: pd.DataFrame
    new: ReleaseTables
    earlier: tuple[ReleaseTables, ...]
    control: pd.DataFrame | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    #: "kept" (the original's rows, generalized or suppressed) or "new" (synthetic rows),
    #: as ``riskgate init`` tells them apart, and the evidence in plain lines
    kind: str = "kept"
    kind_evidence: tuple[str, ...] = ()
    #: what the look-up found besides the releases used (a lineage id with no APPROVED run)
    notes: tuple[str, ...] = ()
