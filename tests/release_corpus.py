"""A labelled corpus of releases, each made from one original by a textbook method, with the
truth kept beside it: the kind of release, the original row behind each released row (-1 for
none), what was done to each column and how each column should be read.

Used by the tests of :mod:`riskcore.anatomy` (``riskgate diff``), by ``riskgate init``'s tests
and by ``bench/diff.py``. Every step takes the seed: the same seed gives the same corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from riskcore.examples import MACRO, census_population


@dataclass(frozen=True)
class Release:
    """A release and its truth."""

    name: str
    released: pd.DataFrame
    kind: str
    #: per released row, the original row it comes from (-1: a new row)
    source: np.ndarray
    #: column -> the transform done to it (columns not named: kept)
    transforms: dict[str, str] = field(default_factory=dict)
    #: the share of released rows that are original records (mixed releases)
    real_share: float = 1.0
    #: rows whose values were perturbed (linked at the perturbed bar, not the unchanged one)
    perturbed: bool = False


#: columns read as codes (categories), whatever their digits say
CODES = ("zip", "puma", "region_code", "occp")
#: columns read as quantities
QUANTITIES = ("age", "income", "hours")


def original(n: int = 6000, seed: int = 11) -> pd.DataFrame:
    """A census-like original with integer codes a survey extract holds: a 5-digit zip with
    leading zeros (about 400 values), a PUMA and a region code (integers), an occupation code
    (integers with gaps), and quantities (age, income, hours)."""
    rng = np.random.default_rng(seed)
    people = census_population(n, seed).drop(columns=["person_id"])
    region_code = people["region"].map({r: 11 + 7 * i for i, r in enumerate(
        sorted(people["region"].unique()))}).astype(int)
    zips = rng.choice(np.arange(1000, 99000, 240), 400, replace=False)
    zip_ = pd.Series(rng.choice(zips, n)).map(lambda z: f"{z:05d}")
    puma = rng.choice(np.arange(100, 3700, 37), n)
    occp = rng.choice([10, 430, 1010, 2205, 3255, 4720, 5240, 6230, 7200, 8140, 9130], n)
    hours = np.clip(rng.normal(38, 9, n).round(), 1, 80).astype(int)
    return pd.DataFrame({
        "household_id": people["household_id"], "region": people["region"],
        "region_code": region_code, "zip": zip_, "puma": puma, "age": people["age"],
        "sex": people["sex"], "education": people["education"], "occp": occp,
        "occupation": people["occupation"], "hours": hours, "income": people["income"],
        "diagnosis": people["diagnosis"], "weight": people["weight"]})


def _shuffled(df: pd.DataFrame, source: np.ndarray, rng: np.random.Generator
              ) -> tuple[pd.DataFrame, np.ndarray]:
    order = rng.permutation(len(df))
    return df.iloc[order].reset_index(drop=True), source[order]


def _band(age: pd.Series, width: int) -> pd.Series:
    lo = (age // width) * width
    return lo.astype(str) + "-" + (lo + width - 1).astype(str)


def kept_shuffled(o: pd.DataFrame, rng: np.random.Generator) -> Release:
    rel, src = _shuffled(o, np.arange(len(o)), rng)
    return Release("kept-shuffled", rel, "kept", src)


def kept_dropped(o: pd.DataFrame, rng: np.random.Generator) -> Release:
    """0.5 % of rows dropped, the rest shuffled: a row count a few rows off."""
    keep = np.sort(rng.choice(len(o), int(len(o) * 0.995), replace=False))
    rel, src = _shuffled(o.iloc[keep].reset_index(drop=True), keep, rng)
    return Release("kept-dropped", rel, "kept", src)


def k_anonymized(o: pd.DataFrame, rng: np.random.Generator, k: int = 5) -> Release:
    """Age in 5-year bands, regions merged (new labels), zip to 3 digits, then the rows of
    classes under k removed (about 2 % of them): the most common anonymized release."""
    rel = o.copy()
    rel["age"] = _band(rel["age"], 5)
    rel["region"] = rel["region"].map(MACRO).map(lambda r: f"{r} region")
    rel["zip"] = rel["zip"].str[:3] + "**"
    keys = ["region", "age", "sex"]
    size = rel.groupby(keys)["sex"].transform("size")
    keep = np.flatnonzero((size >= k).to_numpy())
    rel, src = _shuffled(rel.iloc[keep].reset_index(drop=True), keep, rng)
    return Release("k-anonymized", rel, "kept", src,
                   {"age": "generalized", "region": "generalized", "zip": "generalized"})


def locally_suppressed(o: pd.DataFrame, rng: np.random.Generator) -> Release:
    """Cells of rare combinations set to '*' (sdcMicro's local suppression), rows kept."""
    rel = o.copy()
    rel["age"] = _band(rel["age"], 10)
    size = rel.groupby(["region", "age", "sex", "education"])["sex"].transform("size")
    rel.loc[(size < 3).to_numpy(), "education"] = "*"
    hit = rng.random(len(rel)) < 0.03
    rel.loc[hit, "zip"] = "*"
    rel, src = _shuffled(rel, np.arange(len(o)), rng)
    return Release("suppressed", rel, "kept", src,
                   {"age": "generalized", "education": "suppressed", "zip": "suppressed"})


def swapped(o: pd.DataFrame, rng: np.random.Generator, share: float = 0.2) -> Release:
    """20 % of each categorical column's values swapped between random pairs of rows."""
    rel = o.copy()
    cols = ["region", "sex", "education", "occupation", "diagnosis"]
    for c in cols:
        pairs = rng.choice(len(rel), int(len(rel) * share) // 2 * 2, replace=False)
        a, b = pairs[::2], pairs[1::2]
        values = rel[c].to_numpy().copy()
        values[a], values[b] = values[b], values[a].copy()
        rel[c] = values
    rel, src = _shuffled(rel, np.arange(len(o)), rng)
    return Release("swapped", rel, "kept", src, {c: "perturbed" for c in cols}, perturbed=True)


def pram(o: pd.DataFrame, rng: np.random.Generator) -> Release:
    """PRAM on three columns: each value kept with probability 0.8, else drawn from the
    column's distribution."""
    rel = o.copy()
    cols = ["education", "occupation", "diagnosis"]
    for c in cols:
        change = rng.random(len(rel)) < 0.2
        rel.loc[change, c] = rng.choice(o[c].to_numpy(), int(change.sum()))
    rel, src = _shuffled(rel, np.arange(len(o)), rng)
    return Release("pram", rel, "kept", src, {c: "perturbed" for c in cols}, perturbed=True)


def noised(o: pd.DataFrame, rng: np.random.Generator) -> Release:
    """Noise on the quantities: age +-1, hours +-1, income +-3 %."""
    rel = o.copy()
    rel["age"] = rel["age"] + rng.integers(-1, 2, len(rel))
    rel["hours"] = rel["hours"] + rng.integers(-1, 2, len(rel))
    rel["income"] = (rel["income"] * rng.uniform(0.97, 1.03, len(rel))).round()
    rel, src = _shuffled(rel, np.arange(len(o)), rng)
    return Release("noise", rel, "kept", src, {c: "perturbed" for c in QUANTITIES},
                   perturbed=True)


def top_coded(o: pd.DataFrame, rng: np.random.Generator) -> Release:
    """Income rounded to 1,000 and top-coded at its 95th percentile; ages above 85 at 85."""
    rel = o.copy()
    cap = float(np.quantile(o["income"], 0.95).round(-3))
    rel["income"] = np.minimum((rel["income"] / 1000).round() * 1000, cap)
    rel["age"] = np.minimum(rel["age"], 85)
    rel, src = _shuffled(rel, np.arange(len(o)), rng)
    return Release("top-coded", rel, "kept", src, {"income": "generalized",
                                                   "age": "generalized"})


def subsample(o: pd.DataFrame, rng: np.random.Generator) -> Release:
    keep = np.sort(rng.choice(len(o), len(o) // 2, replace=False))
    rel, src = _shuffled(o.iloc[keep].reset_index(drop=True), keep, rng)
    return Release("subsample", rel, "subsample", src)


def synthetic(o: pd.DataFrame, rng: np.random.Generator, seed: int) -> Release:
    """New rows from the same generator (an honest synthetic release: nobody's record)."""
    rel = original(len(o), seed=seed + 1000)
    return Release("synthetic", rel, "synthetic", np.full(len(rel), -1),
                   {c: "new" for c in o.columns}, real_share=0.0)


def _mixed(o: pd.DataFrame, rng: np.random.Generator, seed: int, noise: bool) -> Release:
    n = len(o)
    new = original(n, seed=seed + 2000)
    real = rng.choice(n, int(n * 0.15), replace=False)
    copies = o.iloc[real].copy()
    if noise:
        copies["age"] = copies["age"] + rng.integers(-1, 2, len(copies))
        copies["hours"] = copies["hours"] + rng.integers(-1, 2, len(copies))
        copies["income"] = (copies["income"] * rng.uniform(0.97, 1.03, len(copies))).round()
    rel = pd.concat([new.iloc[: n - len(real)], copies], ignore_index=True)
    src = np.concatenate([np.full(n - len(real), -1), real])
    rel, src = _shuffled(rel, src, rng)
    return Release("mixed-noise" if noise else "mixed", rel, "mixed", src,
                   {c: "new" for c in o.columns}, real_share=0.15, perturbed=noise)


def as_other_tools_write(o: pd.DataFrame, rng: np.random.Generator) -> Release:
    """A kept release as a survey tool writes it: codes as 1.0, 'N' for missing income, an
    index column (allowed by the config), 1 % fewer rows."""
    keep = np.sort(rng.choice(len(o), int(len(o) * 0.99), replace=False))
    rel = o.iloc[keep].reset_index(drop=True).copy()
    rel["puma"] = rel["puma"].astype(float)
    rel["region_code"] = rel["region_code"].astype(float).map(lambda v: f"{v:.1f}")
    rel["income"] = rel["income"].astype(object)
    rel.loc[rng.random(len(rel)) < 0.02, "income"] = "N"
    rel, src = _shuffled(rel, keep, rng)
    return Release("tool-formats", rel, "kept", src)


METHODS: dict[str, Callable[..., Release]] = {
    "kept-shuffled": kept_shuffled, "kept-dropped": kept_dropped, "k-anonymized": k_anonymized,
    "suppressed": locally_suppressed, "swapped": swapped, "pram": pram, "noise": noised,
    "top-coded": top_coded, "subsample": subsample, "tool-formats": as_other_tools_write}


def corpus(n: int = 6000, seed: int = 11) -> tuple[pd.DataFrame, pd.DataFrame, list[Release]]:
    """The original, a held-out control (people of the same population in no release), and
    one release per method."""
    o = original(n, seed)
    control = original(n // 2, seed + 500)
    rng = np.random.default_rng(seed)
    releases = [make(o, rng) for make in METHODS.values()]
    releases += [synthetic(o, rng, seed), _mixed(o, rng, seed, False), _mixed(o, rng, seed, True)]
    return o, control, releases


# ---------------------------------------------------------------- real data: national2019
def national(seed: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """NIST SDNist's extract of the 2019 American Community Survey (27,253 people, 24 columns,
    ``N`` for "not applicable"), split at random into an original (70 %) and a held-out
    control (30 %)."""
    from tests.conftest import REFERENCE

    data = pd.read_parquet(REFERENCE / "datasets/alc-paper/original/national2019.parquet")
    order = np.random.default_rng(seed).permutation(len(data))
    cut = int(len(data) * 0.7)
    return (data.iloc[np.sort(order[:cut])].reset_index(drop=True),
            data.iloc[np.sort(order[cut:])].reset_index(drop=True))


def _n_numbers(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s.replace("N", np.nan), errors="coerce")


def national_releases(o: pd.DataFrame, seed: int = 3) -> list[Release]:
    """Releases of the national2019 original as other tools make them."""
    rng = np.random.default_rng(seed)
    n = len(o)
    out = [kept_shuffled(o, rng), kept_dropped(o, rng)]
    # sdcMicro-style k-anonymity (k = 6): ages in 10-year bands, then the rows of classes
    # under 6 on the key variables removed (about a third of them)
    rel = o.copy()
    rel["AGEP"] = _band(rel["AGEP"], 10)
    keys = ["PUMA", "AGEP", "SEX", "MSP", "RAC1P", "HISP"]
    size = rel.groupby(keys)["SEX"].transform("size")
    keep = np.flatnonzero((size >= 6).to_numpy())
    rel, src = _shuffled(rel.iloc[keep].reset_index(drop=True), keep, rng)
    out.append(Release("k6-suppressed", rel, "subsample" if keep.size < 0.9 * n else "kept",
                       src, {"AGEP": "generalized"}))
    # swapping: 20 % of five columns' values exchanged between random pairs
    rel = o.copy()
    swapped_cols = ["MSP", "EDU", "INDP", "DPHY", "NOC"]
    for c in swapped_cols:
        pairs = rng.choice(n, int(n * 0.2) // 2 * 2, replace=False)
        a, b = pairs[::2], pairs[1::2]
        values = rel[c].to_numpy().copy()
        values[a], values[b] = values[b], values[a].copy()
        rel[c] = values
    rel, src = _shuffled(rel, np.arange(n), rng)
    out.append(Release("swapped", rel, "kept", src, {c: "perturbed" for c in swapped_cols},
                       perturbed=True))
    # noise on the quantities
    rel = o.copy()
    rel["AGEP"] = rel["AGEP"] + rng.integers(-1, 2, n)
    income = _n_numbers(rel["PINCP"])
    noisy = (income * rng.uniform(0.97, 1.03, n)).round()
    rel["PINCP"] = np.where(income.isna(), "N", noisy.map(lambda v: f"{v:.1f}"))
    rel, src = _shuffled(rel, np.arange(n), rng)
    out.append(Release("noise", rel, "kept", src, {"AGEP": "perturbed", "PINCP": "perturbed"},
                       perturbed=True))
    # a generator's rows: every column drawn from its distribution within the person's PUMA
    # and age band, as a simple synthesizer does (nobody's record, beyond chance)
    out.append(Release("synthetic", _synthesize(o, n, rng), "synthetic", np.full(n, -1),
                       real_share=0.0))
    # SMOTE: each new row between a record and a neighbour of its PUMA and sex, numbers
    # interpolated, the other values taken from one of the two
    out.append(_smote(o, rng))
    # a generator's rows with 15 % of the original's records in them
    real = rng.choice(n, int(n * 0.15), replace=False)
    rel = pd.concat([_synthesize(o, n - real.size, rng), o.iloc[real]], ignore_index=True)
    src = np.concatenate([np.full(n - real.size, -1), real])
    rel, src = _shuffled(rel, src, rng)
    out.append(Release("mixed", rel, "mixed", src, real_share=0.15))
    return out


def _synthesize(o: pd.DataFrame, n: int, rng: np.random.Generator) -> pd.DataFrame:
    band = (o["AGEP"] // 10).astype(str) + "|" + o["PUMA"].astype(str)
    groups = rng.choice(band.to_numpy(), n)
    out = {}
    for c in o.columns:
        values = o[c].to_numpy()
        by = pd.Series(np.arange(len(o))).groupby(band.to_numpy()).apply(np.asarray)
        picks = np.empty(n, dtype=np.int64)
        for g in np.unique(groups):
            where_ = np.flatnonzero(groups == g)
            picks[where_] = rng.choice(by[g], where_.size)
        out[c] = values[picks]
    return pd.DataFrame(out)


def _smote(o: pd.DataFrame, rng: np.random.Generator) -> Release:
    n = len(o)
    group = o["PUMA"].astype(str) + "|" + o["SEX"].astype(str)
    rows = rng.choice(n, n)
    members = pd.Series(np.arange(n)).groupby(group.to_numpy()).apply(np.asarray)
    mate = np.array([rng.choice(members[group.iloc[r]]) for r in rows])
    t = rng.random(n)
    rel = o.iloc[rows].reset_index(drop=True).copy()
    other = o.iloc[mate].reset_index(drop=True)
    for c in ("AGEP", "PWGTP", "WGTP"):
        rel[c] = np.round(rel[c] + t * (other[c] - rel[c])).astype(int)
    take = rng.random((n, len(o.columns))) < 0.5
    for j, c in enumerate(o.columns):
        if c in ("AGEP", "PWGTP", "WGTP"):
            continue
        rel[c] = np.where(take[:, j], other[c], rel[c])
    # a SMOTE row is a record when its neighbour was itself or nothing changed
    same = (rel.astype(str).to_numpy() == o.iloc[rows].astype(str).to_numpy()).all(axis=1)
    src = np.where(same, rows, -1)
    real = float(same.mean())
    return Release("smote", rel, "mixed" if real > 0.02 else "synthetic", src,
                   real_share=real)
