"""Tables of an attack: the original, released and control tables over the attack columns,
jointly encoded (equal values share codes across tables), with the checks of seed 002."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..classes import group_rows
from ..data import EncodedTable, Roles, encode_tables
from ..errors import ConfigError, InputError


def encode_attack_tables(ori: pd.DataFrame, syn: pd.DataFrame, control: pd.DataFrame | None,
                         columns: Sequence[str] | None = None) -> dict[str, EncodedTable]:
    """Encode DataFrames for the attacks (column types inferred on the original)."""
    cols = list(columns) if columns is not None else list(ori.columns)
    frames = {"original": ori, "released": syn}
    if control is not None:
        frames["control"] = control
    return encode_tables(frames, Roles(tuple(cols)), columns=cols)


def check_columns(tables: dict[str, EncodedTable], columns: Sequence[str], what: str) -> None:
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


def control_overlap(ori: EncodedTable, control: EncodedTable, columns: Sequence[str]) -> float:
    """Share of control rows that also occur verbatim in the original (over ``columns``)."""
    both = np.vstack([ori.codes(list(columns)), control.codes(list(columns))])
    ids, _ = group_rows(both)
    in_ori = np.zeros(int(ids.max()) + 1, dtype=bool)
    in_ori[ids[: ori.n]] = True
    return float(in_ori[ids[ori.n:]].mean()) if control.n else 0.0


def sample_rows(rng: np.random.Generator, n_rows: int, n: int) -> np.ndarray:
    """n distinct row numbers of a table of n_rows, in random order."""
    return rng.choice(n_rows, size=n, replace=False)


def overlap_warning(ori: EncodedTable, control: EncodedTable | None, columns: Sequence[str],
                    tolerance: float = 0.01) -> list[str]:
    """A warning when the control table shares rows with the original (it must be held out)."""
    if control is None:
        return []
    share = control_overlap(ori, control, columns)
    if share > tolerance:
        return [f"{share:.1%} of the control rows also occur in the original over the attack "
                "columns; the control set must be records held out of the release, otherwise "
                "the risk is under-estimated"]
    return []
