"""The tables of an ALC attack: the original and one or more released tables, jointly encoded,
with each column typed continuous or categorical and continuous columns discretized
(the ALC paper, section 5; anonymity_loss_coefficient 1.0.32 ``DataFiles``; docs/measures.md 6).

* Continuous: float columns, and integer columns whose distribution is "smooth": nunique >= 50;
  or 10 <= nunique < 50 with density nunique / (max - min + 1) >= 0.3 and (>70 % monotone
  transitions of the value histogram, or <= 2 local peaks, or > 40 % of the mass in the middle
  third, or density > 0.7 with nunique >= 15). The test runs on the original's values.
* A continuous column is used raw as a known column (continuous Gower term) and, as a secret,
  replaced by its ordinal bin among 20 equal-width bins between min and max over original and
  released tables.
* Everything else is categorical: codes shared across tables, ``-1`` = missing.

Unlike the package, rows with missing values are kept: missing is its own category for a
secret (those targets are skipped and counted), and a missing known value is a mismatch in the
Gower distance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...errors import ConfigError, InputError, where
from ...roles import ColumnType, Roles

if TYPE_CHECKING:
    import pandas as pd

    from ...data import EncodedTable


CONTINUOUS = "continuous"
CATEGORICAL = "categorical"
DISC_BINS = 20
DISC_MIN = 10
DISC_MAX = 50


def is_smooth(values: np.ndarray, disc_min: int = DISC_MIN, disc_max: int = DISC_MAX) -> bool:
    """The package's test for an integer column that behaves like a continuous one."""
    v = values[np.isfinite(values)]
    if v.size == 0:
        return False
    uniq, counts = np.unique(v, return_counts=True)
    n_unique = len(uniq)
    if n_unique < disc_min:
        return False
    if n_unique >= disc_max:
        return True
    density = n_unique / (uniq[-1] - uniq[0] + 1)
    if density < 0.3:
        return False
    if n_unique >= 5:
        d = np.diff(counts)
        if (d <= 0).mean() > 0.7 or (d >= 0).mean() > 0.7:
            return True
        inner = counts[1:-1]
        peaks = int(np.count_nonzero((inner > counts[:-2]) & (inner > counts[2:])))
        if peaks <= 2:
            return True
        n = len(counts)
        if counts[n // 3: 2 * n // 3].sum() / counts.sum() > 0.4:
            return True
    return bool(density > 0.7 and n_unique >= 15)


@dataclass(frozen=True)
class ALCData:
    """Encoded tables of an ALC run.

    Attributes:
        names: table names, the original first, then the released tables.
        kinds: column -> 'continuous' | 'categorical'.
        codes: table -> column -> int32 codes (categorical codes, or the bin of a continuous
            column), -1 = missing.
        values: table -> column -> float64 values of continuous columns (NaN = missing).
        labels: column -> the label of each code (bins as 'lo..hi').
        n: table -> number of rows.
        household: the original's household code per row, or None.
    """

    names: tuple[str, ...]
    kinds: Mapping[str, str]
    codes: Mapping[str, Mapping[str, np.ndarray]]
    values: Mapping[str, Mapping[str, np.ndarray]]
    labels: Mapping[str, np.ndarray]
    n: Mapping[str, int]
    household: np.ndarray | None = None

    @property
    def original(self) -> str:
        return self.names[0]

    @property
    def released(self) -> tuple[str, ...]:
        return self.names[1:]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.kinds)

    def has(self, table: str, column: str) -> bool:
        return column in self.codes[table]

    def check(self, secret: str, known: Sequence[str]) -> list[str]:
        """Validate an attack scenario; returns warnings (a known column missing from a
        released table counts as a mismatch there, as the paper says)."""
        if not known:
            raise ConfigError("ALC: no known columns given; name at least one (--known A,B)")
        if secret in known:
            raise ConfigError(f"ALC: the secret '{secret}' is also a known column; remove it "
                              "from the known columns")
        for c in (secret, *known):
            if c not in self.kinds:
                raise InputError(f"ALC: {where(self.original, c)} does not exist; the original "
                                 f"has {list(self.kinds)}")
        dup = sorted({c for c in known if list(known).count(c) > 1})
        if dup:
            raise ConfigError(f"ALC: known column(s) {dup} listed twice")
        warnings = []
        usable = [t for t in self.released if self.has(t, secret)]
        if not usable:
            raise InputError(f"ALC: no released table has the secret column '{secret}'; the "
                             "attack cannot predict it")
        for t in usable:
            absent = [c for c in known if not self.has(t, c)]
            if absent:
                warnings.append(f"known column(s) {absent} are absent from released table "
                                f"'{t}': each counts as a mismatch (distance 1) there")
        sec = self.codes[self.original][secret]
        present = np.unique(sec[sec >= 0])
        if present.size < 2:
            raise InputError(f"ALC: {where(self.original, secret)} has "
                             f"{'no value' if present.size == 0 else 'a single value'}; "
                             "there is nothing to infer. Choose another secret")
        for c in known:
            if (self.codes[self.original][c] < 0).all():
                warnings.append(f"known column '{c}' is missing in every original row: it "
                                "adds a mismatch to every distance and carries no information")
        return warnings

    def secret_codes(self, table: str, secret: str) -> np.ndarray:
        return self.codes[table][secret]


def _edges(lo: float, hi: float, bins: int) -> np.ndarray:
    """Equal-width bin edges from lo to hi (lo - 1 to hi + 1 for a constant column)."""
    return np.linspace(lo, hi, bins + 1) if lo != hi else np.linspace(lo - 1, hi + 1, bins + 1)


def _bin(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    out = np.searchsorted(edges[1:-1], values, side="right").astype(np.int32)
    out[~np.isfinite(values)] = -1
    return out


def from_encoded(tables: Sequence[EncodedTable], columns: Sequence[str] | None = None,
                 types: Mapping[str, str] | None = None, household: str | None = None,
                 bins: int = DISC_BINS) -> ALCData:
    """Build the ALC view of jointly encoded tables (the original first).

    Args:
        tables: the original, then the released tables (encoded together).
        columns: the columns of the attack (default: the original's encoded columns).
        types: explicit 'continuous' / 'categorical' per column (else the package's rules).
        household: the household id column of the original (removed from the attack columns).
        bins: equal-width bins of a continuous secret (paper: 20).
    """
    ori = tables[0]
    cols = [c for c in (columns or list(ori.columns)) if c != household]
    types = dict(types or {})
    kinds: dict[str, str] = {}
    for c in cols:
        col = ori.column(c)
        if c in types:
            if types[c] not in (CONTINUOUS, CATEGORICAL):
                raise ConfigError(f"ALC: column '{c}': type must be continuous or categorical, "
                                  f"got {types[c]!r}")
            if types[c] == CONTINUOUS and col.values is None:
                raise InputError(f"ALC: {where(ori.name, c)} is declared continuous but is not "
                                 "numeric; declare it categorical")
            kinds[c] = types[c]
        elif col.type is ColumnType.CONTINUOUS or (
                col.type is ColumnType.INTEGER and col.values is not None
                and is_smooth(col.values)):
            kinds[c] = CONTINUOUS
        else:
            kinds[c] = CATEGORICAL
    names = tuple(t.name for t in tables)
    codes: dict[str, dict[str, np.ndarray]] = {t.name: {} for t in tables}
    values: dict[str, dict[str, np.ndarray]] = {t.name: {} for t in tables}
    labels: dict[str, np.ndarray] = {}
    for c in cols:
        present = [t for t in tables if c in t.columns]
        if kinds[c] == CONTINUOUS:
            allv = np.concatenate([t.column(c).values for t in present])
            finite = allv[np.isfinite(allv)]
            if finite.size == 0:
                raise InputError(f"ALC: column '{c}' has no value in any table; drop it from "
                                 "the attack")
            lo, hi = float(finite.min()), float(finite.max())
            edges = _edges(lo, hi, bins)
            labels[c] = np.array([f"{edges[i]:.6g}..{edges[i + 1]:.6g}" for i in range(bins)],
                                 dtype=object)
            for t in present:
                v = t.column(c).numbers()
                values[t.name][c] = v
                codes[t.name][c] = _bin(v, edges)
        else:
            labels[c] = np.asarray(ori.column(c).categories, dtype=object)
            for t in present:
                codes[t.name][c] = t.column(c).codes.astype(np.int32)
    hh = None
    if household:
        hh = ori.column(household).codes
    return ALCData(names=names, kinds=kinds, codes=codes, values=values, labels=labels,
                   n={t.name: t.n for t in tables}, household=hh)


def from_frames(original: pd.DataFrame, released: pd.DataFrame | Sequence[pd.DataFrame],
                columns: Sequence[str] | None = None, types: Mapping[str, str] | None = None,
                household: str | None = None, names: Sequence[str] | None = None,
                bins: int = DISC_BINS) -> ALCData:
    """Encode DataFrames for ALC attacks (see :func:`from_encoded`).

    Raises:
        InputError: empty tables, a column numeric in one table and text in another.
    """
    import pandas as pd

    from ...data import encode_tables

    rel = [released] if isinstance(released, pd.DataFrame) else list(released)
    if not rel:
        raise ConfigError("ALC: give at least one released table")
    cols = list(columns) if columns is not None else list(original.columns)
    tnames = list(names) if names else ["original"] + (
        ["released"] if len(rel) == 1 else [f"released_{i + 1}" for i in range(len(rel))])
    frames = dict(zip(tnames, [original, *rel]))
    for name, df in list(frames.items())[1:]:
        for c in cols:
            if c in df.columns and c in original.columns:
                a = pd.api.types.is_numeric_dtype(original[c].dtype)
                b = pd.api.types.is_numeric_dtype(df[c].dtype)
                if a != b and df[c].notna().any() and original[c].notna().any():
                    raise InputError(
                        f"ALC: {where(name, c)} is {'numeric' if b else 'text'} but the "
                        f"original's is {'numeric' if a else 'text'}; give the column one type "
                        "in every table (otherwise no value would ever match)")
    need = {tnames[0]: cols + ([household] if household else [])}
    enc_cols = cols + ([household] if household and household not in cols else [])
    roles = Roles(tuple(enc_cols))
    enc = encode_tables(frames, roles, columns=enc_cols, required=need)
    return from_encoded([enc[n] for n in tnames], cols, types=types, household=household,
                        bins=bins)
