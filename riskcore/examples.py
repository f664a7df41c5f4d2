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


POPULATION_STRUCTURES = ("census", "independent", "correlated", "rare")


def survey_population(n: int = 200_000, seed: int = 1, structure: str = "census"
                      ) -> pd.DataFrame:
    """A population of ``n`` people with known dependence between its key variables, integer
    coded: region (10), zip (100 per region), sex, age (0-99), ethnicity (6), marital (5),
    education (6), occupation (8). For testing population-uniqueness estimates against the
    truth counted in the population itself.

    Structures: ``census`` (ethnicity depends on region, marital status on age and sex,
    education on age, occupation on education and sex; zip sizes Zipf-like), ``independent``
    (every variable drawn alone), ``correlated`` (ethnicity fixed by region, occupation by
    education and age, marital status by age, each in 85 % of the people, at random
    otherwise), ``rare`` (every variable heavy-tailed, so many rare combinations).
    """
    if structure not in POPULATION_STRUCTURES:
        raise ValueError(f"structure must be one of {POPULATION_STRUCTURES}, got {structure!r}")
    rng = np.random.default_rng(seed)
    n_regions = 10
    p_region = np.linspace(2.0, 0.5, n_regions)
    region = rng.choice(n_regions, n, p=p_region / p_region.sum())
    sex = rng.integers(0, 2, n)
    age = np.clip(rng.gamma(4.0, 10.0, n).round(), 0, 99).astype(np.int64)

    def draw(p: np.ndarray) -> np.ndarray:  # one category per row from row-wise probabilities
        p = p / p.sum(axis=1, keepdims=True)
        return (rng.random(len(p))[:, None] > np.cumsum(p, axis=1)).sum(axis=1)

    def zipf(levels: int, s: float) -> np.ndarray:
        w = 1.0 / np.arange(1, levels + 1) ** s
        return w / w.sum()

    if structure in ("independent", "rare"):
        s = 1.0 if structure == "independent" else 1.6
        zip_ = region * 100 + rng.choice(100, n, p=zipf(100, 0.8 if s == 1.0 else 1.4))
        if structure == "rare":
            age = rng.choice(100, n, p=zipf(100, 0.7))
        eth = rng.choice(6, n, p=zipf(6, 1.5 * s))
        mar = rng.choice(5, n, p=zipf(5, 1.2 * s))
        edu = rng.choice(6, n, p=zipf(6, 0.8 * s))
        occ = rng.choice(8, n, p=zipf(8, 0.7 * s))
    else:
        zip_ = region * 100 + rng.choice(100, n, p=zipf(100, 0.8))
        base = np.array([0.70, 0.12, 0.08, 0.05, 0.03, 0.02])
        tilt = rng.dirichlet(np.full(6, 2.0), n_regions)
        eth = draw((0.5 * base + 0.5 * tilt)[region])
        logits = np.stack([
            np.where(age < 30, 3.0, 0.5 - 0.01 * age), np.full(n, 1.5),
            np.where(age > 40, 0.5, -2.0),
            np.where(age > 60, 0.02 * (age - 60) + np.where(sex == 1, 0.8, 0.0), -3.0),
            np.full(n, -1.0)], axis=1)
        mar = draw(np.exp(logits))
        score = np.clip(rng.normal(2.0 + (age < 60) * 0.8 - (age > 75) * 0.6
                                   - (age < 20) * 1.5, 1.1), 0, 5)
        edu = score.round().astype(np.int64)
        occ = np.clip(score * 1.3 + rng.normal(0, 1.2, n) + sex * 0.5, 0, 7).round()
        occ = occ.astype(np.int64)
        if structure == "correlated":  # each mostly fixed by one other key, else at random
            keep = rng.random((3, n)) < 0.85
            eth = np.where(keep[0], region % 6, rng.integers(0, 6, n))
            occ = np.where(keep[1], np.clip(edu + (age > 50), 0, 7), rng.integers(0, 8, n))
            mar = np.where(keep[2], np.clip(age // 20, 0, 4), rng.integers(0, 5, n))
    return pd.DataFrame({"region": region, "zip": zip_, "sex": sex, "age": age,
                         "ethnicity": eth, "marital": mar, "education": edu,
                         "occupation": occ})
