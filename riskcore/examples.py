"""Deterministic example data for the demo and the tests.

A seeded census-like population with realistic dependencies (education depends on age,
occupation on education, income on occupation and age, diagnosis on age and sex), households,
sample weights and a direct identifier; and a "released" version anonymized the usual way:
the name dropped, age in 10-year bands, regions merged, income rounded, and records of
quasi-identifier classes smaller than k locally suppressed (their keys set to missing).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

REGIONS = ["North", "North-East", "East", "South-East", "South", "South-West", "West", "Centre"]
MACRO = {"North": "North", "North-East": "North", "East": "East", "South-East": "East",
         "South": "South", "South-West": "South", "West": "West", "Centre": "West"}
EDUCATION = ["primary", "secondary", "vocational", "bachelor", "master", "doctorate"]
OCCUPATIONS = ["manual", "service", "clerical", "technical", "professional", "manager"]
DIAGNOSES = ["none", "asthma", "diabetes", "hypertension", "depression", "cancer"]


def census_population(n: int = 6000, seed: int = 2026) -> pd.DataFrame:
    """A census-like person table (deterministic for a given seed)."""
    rng = np.random.default_rng(seed)
    n_households = max(1, n // 2)
    hh_of = np.sort(rng.integers(0, n_households, size=n))
    hh_region = rng.choice(len(REGIONS), size=n_households, p=np.linspace(1.6, 0.4, len(REGIONS))
                           / np.linspace(1.6, 0.4, len(REGIONS)).sum())
    region = np.array(REGIONS)[hh_region[hh_of]]
    age = np.clip(rng.gamma(4.0, 10.0, size=n).round(), 16, 95).astype(int)
    sex = rng.choice(["F", "M"], size=n)
    edu_score = np.clip(rng.normal(2.0 + (age < 60) * 0.8 - (age > 75) * 0.6, 1.1), 0, 5)
    education = np.array(EDUCATION)[edu_score.round().astype(int)]
    occ_score = np.clip(edu_score + rng.normal(0, 1.0, size=n), 0, 5).round().astype(int)
    occupation = np.array(OCCUPATIONS)[occ_score]
    income = np.exp(9.6 + 0.22 * occ_score + 0.012 * np.minimum(age, 60)
                    + rng.normal(0, 0.35, size=n)).round(-2)
    p_diag = np.stack([np.full(n, 5.0), np.full(n, 0.8), 0.02 * age, 0.03 * age,
                       np.where(sex == "F", 1.0, 0.6), 0.01 * age], axis=1)
    p_diag /= p_diag.sum(axis=1, keepdims=True)
    u = rng.random(n)[:, None]
    diagnosis = np.array(DIAGNOSES)[(u > np.cumsum(p_diag, axis=1)).sum(axis=1)]
    weight = np.round(rng.uniform(80, 120, size=n_households), 1)[hh_of]  # one per household
    return pd.DataFrame({
        "person_id": [f"P{i:06d}" for i in range(n)],
        "household_id": hh_of,
        "region": region, "age": age, "sex": sex, "education": education,
        "occupation": occupation, "income": income, "diagnosis": diagnosis,
        "weight": weight,
    })


def anonymize(original: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Generalize and locally suppress so that every complete key class has at least k records."""
    rel = original.drop(columns=["person_id"]).copy()
    lo = (rel["age"] // 10) * 10
    rel["age"] = lo.astype(str) + "-" + (lo + 9).astype(str)
    rel["region"] = rel["region"].map(MACRO)
    rel["income"] = (rel["income"] / 5000).round() * 5000
    keys = ["region", "age", "sex", "education"]
    size = rel.groupby(keys, dropna=False)["sex"].transform("size")
    small = size < k
    rel.loc[small, ["education"]] = None
    size = rel.groupby(keys, dropna=False)["sex"].transform("size")
    rel.loc[size < k, ["age", "education"]] = None
    size = rel.groupby(keys, dropna=False)["sex"].transform("size")
    rel.loc[size < k, keys] = None
    return rel


def write_example(folder: str | Path, n: int = 6000, seed: int = 2026) -> dict[str, Path]:
    """Write original.csv and released.csv of the demo into ``folder``."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    original = census_population(n, seed)
    released = anonymize(original)
    paths = {"original": out / "original.csv", "released": out / "released.csv",
             "region_hierarchy": out / "region-hierarchy.csv"}
    original.to_csv(paths["original"], index=False)
    released.to_csv(paths["released"], index=False)
    # how the release merged regions, as an ARX hierarchy (original;level 1)
    paths["region_hierarchy"].write_text("".join(f"{r};{MACRO[r]}\n" for r in REGIONS))
    return paths
