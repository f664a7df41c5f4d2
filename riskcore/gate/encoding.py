"""Encoding a run's tables once for every measure: which tables the families read, their
joint encoding (codes shared across tables, types decided on the original), the alignment of
the other tables with a generalized release.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

import pandas as pd

from .. import progress
from ..alignment import Alignment, align_tables
from ..anatomy.reading import ColumnReading
from ..data import ColumnType, EncodedTable, encode_tables, looks_numeric
from ..measures import BY_NAME, MeasureInputs
from ..roles import CONTROLS
from .cleanliness import (
    column_readings,
    declared_types,
)
from .config import Gate, TablesConfig
from .tables import coerce_types


def measured_tables(gate: Gate) -> frozenset[str]:
    """The tables the gate's families read: the release and the identification table always
    (the equivalence families' sample and population), the original and the control when a
    family needs the original (the attacks, copies, membership, utility, the ALC...)."""
    needs = {table for name in gate.measures for table in BY_NAME[name].needs}
    tables = {"released", "identification", *needs}
    if "original" in needs:
        tables.update(t for t in CONTROLS if t == "control" or gate.config.custodian_control)
    return frozenset(tables)


def encode_measured(gate: Gate, frames: Mapping[str, pd.DataFrame]) -> MeasureInputs:
    """:func:`encode` of the tables the gate's families read (:func:`measured_tables`): what
    every gate step encodes, in this process or as a Prefect task."""
    return encode(gate.config, frames, tables=measured_tables(gate))


def encode(cfg: TablesConfig, frames: Mapping[str, pd.DataFrame],
           storage_options: Mapping[str, Any] | None = None,
           tables: Collection[str] | None = None) -> MeasureInputs:
    """Align the other tables with a generalized release, convert the tables to their declared
    types and encode them jointly, once.

    Args:
        tables: the tables to encode (:func:`measured_tables`; default all). The others are
            still aligned (their checks, e.g. a suppression token that is a real value of the
            original, still apply) and decide the columns' types, but are not encoded: a gate
            of the equivalence families alone never reads the original's codes.
    """
    with progress.working("encode"):
        readings = column_readings(frames, cfg.role_spec)
        enc, alignment = encode_aligned(cfg, frames, storage_options, tables, readings)
    released = enc["released"]
    # a column read both ways (a handful of whole numbers: a code or a count; a code whose
    # values are numbers) is measured by the distance attacks as it was encoded and the
    # other way too, the worse kept: never laxer than an attacker who reads it either way
    roles = cfg.role_spec
    split = tuple(c for c, r in readings.items() if r.both_ways and c in released.columns
                  and c not in roles.types and c != roles.weight)
    return MeasureInputs(released=enc["released"], original=enc.get("original"),
                         control=enc.get("control"),
                         custodian_control=enc.get("custodian_control"),
                         identification=enc.get("identification"),
                         missing=cfg.missing, alpha=cfg.alpha, seed=cfg.seed,
                         alignment=alignment, split=split)


def encode_aligned(cfg: TablesConfig, frames: Mapping[str, pd.DataFrame],
                   storage_options: Mapping[str, Any] | None = None,
                   tables: Collection[str] | None = None,
                   readings: Mapping[str, ColumnReading] | None = None,
                   ) -> tuple[dict[str, EncodedTable], Alignment]:
    """The original's (control's, identification's) values mapped into the release's domain
    (declared or unambiguous generalizations, riskcore.generalization), then encoded."""
    roles = cfg.role_spec
    columns = [*roles.quasi_identifiers, *roles.sensitive]
    # compared as numbers (distances, never "equal or not"): typed numeric, or untyped and
    # numbers in the release and the original alike
    numeric = [c for c in columns if (roles.types[c].is_numeric if c in roles.types else all(
        looks_numeric(df[c]) for df in frames.values() if c in df.columns))]
    aligned, alignment = align_tables(
        frames, columns, cfg.generalization_specs(), numeric=numeric, tokens=cfg.suppressed,
        min_comparable=cfg.min_comparable, storage_options=storage_options)
    return encode_frames(cfg, aligned, tables, readings), alignment


def encode_frames(cfg: TablesConfig, frames: Mapping[str, pd.DataFrame],
                  tables: Collection[str] | None = None,
                  readings: Mapping[str, ColumnReading] | None = None
                  ) -> dict[str, EncodedTable]:
    """Every frame (of ``tables``, default all) typed (numeric types decided on the original,
    codes read as categories: :func:`~riskcore.gate.cleanliness.declared_types`) and encoded
    jointly."""
    roles = cfg.role_spec
    types = declared_types(frames, roles, readings)
    typed = {name: coerce_types(df, types, name) for name, df in frames.items()
             if tables is None or name in tables}
    # numeric types decided on the original; integers stay integers when every value is whole
    explicit = dict(roles.types)
    for col, typ in types.items():
        if col not in explicit and typ is not ColumnType.CONTINUOUS:
            explicit[col] = typ
    roles = replace(roles, types=explicit)
    required = {name: list(roles.required_in(name)) for name in typed}
    return encode_tables(typed, roles, required=required)
