"""Composition with earlier releases: the intersection attack against a hand-worked pair of
releases, the vectorized figures against a per-record brute force on random releases with
suppressed cells, and the reasons when a release cannot be used."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from riskcore import encode_tables
from riskcore.measures import MeasureInputs, run_measure
from riskcore.measures.composition import compose
from riskcore.measures.releases import Lineage, ReleaseTables
from riskcore.roles import Roles

QIS = ("age", "zip")


def _ganta() -> Lineage:
    """Two 2-diverse releases of four people: one bands ages, the other masks ZIP codes.
    Each alone leaves two diagnoses per person; together they leave one for (21, 10) and
    (22, 11): flu, with certainty."""
    original = pd.DataFrame({"age": [21, 22, 21, 22], "zip": ["10", "10", "11", "11"],
                             "dis": ["flu", "cancer", "hiv", "flu"]})
    banded = original.assign(age="[20, 30)")
    masked = original.assign(age=original["age"].astype(str), zip="1*")
    return Lineage(original,
                   ReleaseTables("new", banded, QIS, ("dis",), {"age": "interval"}),
                   (ReleaseTables("old", masked, QIS, ("dis",), {"zip": {"mask": "*"}}),))


def test_the_hand_worked_intersection_attack():
    figures, details, smallest = compose(_ganta())
    assert figures["pvp_1"] == 0.5 and figures["pvp_1_alone"] == 0.0
    assert figures["composed_l_min"] == 1 and figures["l_min_alone"] == 2
    assert figures["composed_k_min"] == 1 and figures["k_min_alone"] == 2
    # (21, 10): {flu, cancer} then {flu, hiv}; (22, 11): {hiv, flu} then {cancer, flu}
    assert figures["m_invariance_violations"] == 0.5
    assert smallest.tolist() == [1, 2, 2, 1]
    assert details["counts"]["dis"] == {"n_both": 4, "n_disclosed": 2, "n_disclosed_alone": 0}
    assert details["per_release"]["old"]["dis"]["pvp_1_earlier_alone"] == 0.0


def test_releases_that_nest_add_nothing():
    """m-invariance: the same classes published twice (the second coarser on a column the
    first already banded the same way) disclose what the first did alone."""
    lineage = _ganta()
    same = ReleaseTables("same", lineage.new.released.copy(), QIS, ("dis",),
                         {"age": "interval"})
    figures, _, _ = compose(Lineage(lineage.original, lineage.new, (same,)))
    assert figures["pvp_1"] == figures["pvp_1_alone"] == 0.0
    assert figures["m_invariance_violations"] == 0.0
    assert figures["composed_l_min"] == figures["l_min_alone"] == 2


def _brute(original: pd.DataFrame, releases: list[pd.DataFrame]) -> dict[str, float]:
    """Per record, in plain Python: its class in a release is the set of rows agreeing on
    every shown quasi-identifier; its candidates, the multiset of their shown values; the
    composed multiset, the intersection over the releases it is found in."""
    def matches(rec, rel):
        rows = [i for i, row in rel.iterrows()
                if all(row[c] == "*" or row[c] == rec[c] for c in QIS)]
        values = Counter(rel.loc[i, "dis"] for i in rows if rel.loc[i, "dis"] != "*")
        return frozenset(rows) if values else None, values

    per = []
    for _, rec in original.iterrows():
        per.append([matches(rec, rel) for rel in releases])
    both = [i for i, p in enumerate(per) if p[0][0] is not None
            and sum(q[0] is not None for q in p) >= 2]
    composed = []
    for i in both:
        found = [v for rows, v in per[i] if rows is not None]
        inter = found[0]
        for v in found[1:]:
            inter = inter & v
        composed.append(inter)
    keys = [tuple(q[0] for q in per[i]) for i in both]
    k = Counter(keys)
    return {"pvp_1": float(np.mean([len(c) == 1 for c in composed])),
            "pvp_c": float(np.mean([bool(c) and max(c.values()) >= 0.9 * sum(c.values())
                                    for c in composed])),
            "composed_l_min": min(len(c) for c in composed if c),
            "composed_k_min": min(k[key] for key in keys),
            "n_both": len(both)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_figures_match_a_per_record_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 80
    original = pd.DataFrame({"age": rng.choice(["a", "b", "c", "d"], n),
                             "zip": rng.choice(["p", "q", "r"], n),
                             "dis": rng.choice(["u", "v", "w", "x", "y"], n)})
    releases = []
    for share in (0.3, 0.4, 0.2):
        rel = original.copy()
        for c in (*QIS, "dis"):
            rel[c] = rel[c].where(rng.random(n) > share, "*")
        releases.append(rel)
    lineage = Lineage(original, ReleaseTables("r0", releases[0], QIS, ("dis",)),
                      tuple(ReleaseTables(f"r{i}", r, QIS, ("dis",))
                            for i, r in enumerate(releases[1:], 1)))
    figures, details, _ = compose(lineage)
    want = _brute(original, releases)
    assert details["counts"]["dis"]["n_both"] == want.pop("n_both")
    for name, value in want.items():
        assert figures[name] == pytest.approx(value), name


def _inputs(lineage: Lineage | None) -> MeasureInputs:
    roles = Roles(quasi_identifiers=QIS, sensitive=("dis",))
    original = _ganta().original.astype(str)
    enc = encode_tables({"released": original, "original": original}, roles)
    return MeasureInputs(released=enc["released"], original=enc["original"], lineage=lineage)


def test_an_earlier_release_that_cannot_be_used_is_insufficient_evidence_naming_it():
    lineage = _ganta()
    broken = ReleaseTables("2026-q1/run-7", pd.DataFrame(), (), (),
                           reason="its released table changed since that decision")
    result = run_measure("composition", _inputs(Lineage(
        lineage.original, lineage.new, (*lineage.earlier, broken))))
    assert result.status.value == "insufficient_evidence"
    assert "2026-q1/run-7: its released table changed" in str(result.reason)
    assert result.details["earlier"][1]["used"] is False


def test_without_lineage_composition_says_what_to_configure():
    result = run_measure("composition", _inputs(None))
    assert result.status.value == "insufficient_evidence"
    assert "composition.earlier" in str(result.reason)


def test_the_family_reports_the_worst_attribute_and_an_alarm():
    result = run_measure("composition", _inputs(_ganta()))
    assert result.status.value == "ok"
    assert result.figures["pvp_1"] == 0.5 and result.figures["dis.pvp_1"] == 0.5
    assert result.records["composition_sets"]["composed_set_size"].tolist() == [1, 2, 2, 1]
    from riskcore.measures.composition import FAMILY

    assert FAMILY.alarm is not None and "50.00%" in str(FAMILY.alarm(result))


def _population(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n).astype(float),
                         "income": rng.lognormal(10, 0.5, n).round(0),
                         "zip": rng.choice(list("pqrstuvw"), n),
                         "dis": rng.choice(["u", "v", "w", "x"], n)})


def _synthetic(leaky: bool) -> Lineage:
    """A population; the earlier original its first 1,000 people, the new one 300 more. A
    leaky generator publishes its training rows with small noise; an honest one publishes
    fresh people of the same population."""
    pop = _population(8000, 1)
    rng = np.random.default_rng(2)
    before, now, control = pop.iloc[:1000], pop.iloc[:1300], pop.iloc[2000:2600]

    def release(train: pd.DataFrame, fresh: pd.DataFrame) -> pd.DataFrame:
        out = (train if leaky else fresh).copy()
        out["income"] = (out["income"] * rng.normal(1, 0.01, len(out))).round(0)
        return out.reset_index(drop=True)

    new = ReleaseTables("new", release(now, pop.iloc[3000:4300]), ("age", "zip", "income"),
                        ("dis",), original=now)
    old = ReleaseTables("old", release(before, pop.iloc[5000:6000]),
                        ("age", "zip", "income"), ("dis",), original=before)
    return Lineage(now.reset_index(drop=True), new, (old,), control=control, kind="new")


@pytest.mark.parametrize("leaky", [True, False])
def test_differencing_finds_who_was_added_only_when_the_generator_leaks(leaky):
    result = run_measure("composition", _inputs(_synthetic(leaky)))
    assert result.status.value == "ok", result.reason
    auc = result.figures["differencing_auc"]
    assert result.details["per_release"]["old"]["added"] == 300
    if leaky:
        assert auc > 0.85
    else:
        assert 0.4 < auc < 0.6
    assert result.figures["pvp_1"] is None and "pvp_1" in result.unavailable


def test_differencing_needs_the_earlier_original_and_a_control():
    lineage = _synthetic(True)
    old = lineage.earlier[0]
    no_original = ReleaseTables(old.name, old.released, old.quasi_identifiers,
                                old.sensitive)
    result = run_measure("composition", _inputs(Lineage(
        lineage.original, lineage.new, (no_original,), control=lineage.control, kind="new")))
    assert result.status.value == "insufficient_evidence"
    assert "original could not be read" in str(result.reason)
    result = run_measure("composition", _inputs(Lineage(
        lineage.original, lineage.new, lineage.earlier, control=None, kind="new")))
    assert "needs a control table" in str(result.reason)
