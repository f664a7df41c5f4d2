"""Composition through the whole gate (in this process): a second release of the same people
judged with the first, read back from the output store by its release id; its figures are the
ones the family computes on the two files; a first release whose file changed since its
decision, or whose decision is unsigned when a public key is required, is insufficient
evidence naming it, and the gate does not approve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate
from riskcore.measures.composition import compose
from riskcore.measures.releases import Lineage, ReleaseTables

QIS = ["region", "age", "sex", "education"]
READ = {"dtype": str, "keep_default_na": False}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    from riskcore.examples import write_example

    folder = tmp_path_factory.mktemp("composition")
    paths = write_example(folder, n=1500, seed=5)
    original = pd.read_csv(paths["original"], **READ)
    published = original.drop(columns=["person_id"])
    # the first release bands ages by ten years; the second merges regions (the hierarchy)
    first = published.assign(age=[f"[{a // 10 * 10}, {a // 10 * 10 + 10})"
                                  for a in original["age"].astype(int)])
    hierarchy = dict(line.split(";") for line in
                     paths["region_hierarchy"].read_text().splitlines())
    second = published.assign(region=published["region"].map(hierarchy))
    first.to_csv(folder / "first.csv", index=False)
    second.to_csv(folder / "second.csv", index=False)
    from riskcore.signing import keygen

    key, _ = keygen(folder / "keys")  # the gate signs; earlier decisions verify under its key
    return {**paths, "first": folder / "first.csv", "second": folder / "second.csv",
            "out": folder / "out", "key": key}


def _run(files: dict[str, Path], released: str, generalization: dict[str, Any],
         measures: dict[str, Any], checks: list[str], run_id: str, signed: bool = True
         ) -> Any:
    from riskcore.signing import Signer

    cfg = {"release_id": "survey", "original": str(files["original"]),
           "released": str(files[released]), "output_url": str(files["out"]),
           "roles": {"quasi_identifiers": QIS, "sensitive": ["diagnosis"],
                     "direct_identifiers": ["person_id"], "types": {"age": "categorical"}},
           "generalization": generalization, "measures": measures,
           "policy": {"version": 1, "checks": checks}, "seed": 3}
    signer = Signer.from_pem(files["key"].read_bytes(), "key") if signed else None
    return run_gate(load_gate(cfg), run_id, steps=LocalSteps(), signer=signer)


def _composition(outcome: Any) -> dict[str, Any]:
    doc = json.loads((Path(outcome.folder) / "measures.json").read_text())
    return next(m for m in doc["measures"] if m["measure"] == "composition")


FIRST = {"age": "interval"}


def test_the_second_release_is_judged_with_the_first(files):
    first = _run(files, "first", FIRST, {"k_anonymity": {}}, ["k_anonymity.k >= 1"], "q1")
    assert first.verdict == "APPROVED", first.reasons
    second_gen = {"region": {"hierarchy": str(files["region_hierarchy"])}}
    outcome = _run(files, "second", second_gen, {"composition": {"lineage": ["survey"]}},
                   ["composition.pvp_1 <= 0.01"], "q2")
    result = _composition(outcome)
    assert result["status"] == "ok", result.get("reason")
    assert [e["run_id"] for e in result["details"]["earlier"]] == ["q1"]
    # the figures are the family's own on the two files
    original = pd.read_csv(files["original"], **READ).drop(columns=["person_id"])
    original["age"] = original["age"].astype(int)
    lineage = Lineage(original,
                      ReleaseTables("new", pd.read_csv(files["second"], **READ), tuple(QIS),
                                    ("diagnosis",), second_gen),
                      (ReleaseTables("q1", pd.read_csv(files["first"], **READ), tuple(QIS),
                                     ("diagnosis",), FIRST),))
    want, _, _ = compose(lineage)
    for name in ("pvp_1", "pvp_1_alone", "composed_k_min", "m_invariance_violations"):
        assert result["figures"][name] == pytest.approx(want[name]), name
    assert result["figures"]["pvp_1"] > result["figures"]["pvp_1_alone"] + 0.05
    assert outcome.verdict == "REJECTED"
    assert any("composition.pvp_1" in r for r in outcome.reasons), outcome.reasons
    report = (Path(outcome.folder) / "report.html").read_text()
    assert 'id="composition-releases"' in report and 'data-plot="composition-adds"' in report
    assert "survey/q1" in report
    per_record = pd.read_parquet(Path(outcome.folder) / "composition_sets.parquet")
    assert set(per_record.columns) == {"row", "composed_set_size"}
    assert (per_record["composed_set_size"] >= 0).all()


def test_a_first_release_changed_since_its_decision_is_named(files, tmp_path):
    first = _run(files, "first", FIRST, {"k_anonymity": {}}, ["k_anonymity.k >= 1"], "q1b")
    assert first.verdict == "APPROVED"
    saved = files["first"].read_bytes()
    try:
        files["first"].write_bytes(saved.replace(b"\n", b"\r\n", 1))  # one byte more
        outcome = _run(files, "second", {"region": {"hierarchy": str(files[
            "region_hierarchy"])}}, {"composition": {"lineage": ["survey"], "max_releases": 1}},
            ["composition.pvp_1 <= 0.01"], "q3")
    finally:
        files["first"].write_bytes(saved)
    result = _composition(outcome)
    assert result["status"] == "insufficient_evidence"
    assert "changed since that decision" in result["reason"]
    assert outcome.verdict != "APPROVED"


def test_an_unsigned_first_release_is_refused_when_a_key_is_required(files, tmp_path):
    from riskcore.signing import keygen

    _, pub = keygen(tmp_path / "keys")
    # its own first release, signed under the gate's key (not the one required): the test
    # stands alone, whatever ran before it
    assert _run(files, "first", FIRST, {"k_anonymity": {}}, ["k_anonymity.k >= 1"],
                "q4-first").verdict == "APPROVED"
    outcome = _run(files, "second", {"region": {"hierarchy": str(files["region_hierarchy"])}},
                   {"composition": {"lineage": ["survey"], "public_key": str(pub)}},
                   ["composition.pvp_1 <= 0.01"], "q4")
    result = _composition(outcome)
    assert result["status"] == "insufficient_evidence"
    assert "wrong key" in result["reason"]  # signed, but not under the key given
    assert outcome.verdict != "APPROVED"


def test_an_earlier_decision_is_never_taken_on_its_word(files, tmp_path):
    """Without composition.public_key, earlier decisions verify under the gate's own signer's
    key; a gate that signs nothing composes nothing (a hand-made decision pointing at a
    harmless file would otherwise be believed)."""
    here = {**files, "out": tmp_path / "out"}
    first = _run(here, "first", FIRST, {"k_anonymity": {}}, ["k_anonymity.k >= 1"], "u1",
                 signed=False)
    assert first.verdict == "APPROVED"
    gen = {"region": {"hierarchy": str(files["region_hierarchy"])}}
    checks = ["composition.pvp_1 <= 0.01"]
    signed = _composition(_run(here, "second", gen, {"composition": {"lineage": ["survey"]}},
                               checks, "u2"))
    assert signed["status"] == "insufficient_evidence" and "unsigned" in signed["reason"]
    unsigned = _run(here, "second", gen, {"composition": {"lineage": ["survey"]}}, checks,
                    "u3", signed=False)
    result = _composition(unsigned)
    assert result["status"] == "insufficient_evidence" and unsigned.verdict != "APPROVED"
    assert "set composition.public_key" in result["reason"]


def test_approved_runs_beyond_max_releases_are_never_dropped_in_silence(files, tmp_path):
    """Decoys: harmless approved runs of other files under the lineage's id would push the
    real earlier release out of the window; more than max_releases is insufficient evidence
    naming it. The same file approved again counts once."""
    here = {**files, "out": tmp_path / "out"}
    gen = {"region": {"hierarchy": str(files["region_hierarchy"])}}
    _run(here, "first", FIRST, {"k_anonymity": {}}, ["k_anonymity.k >= 1"], "real")
    for i in range(3):  # the same file, approved three times: one release
        _run(here, "second", gen, {"k_anonymity": {}}, ["k_anonymity.k >= 1"], f"again{i}")
    ok = _composition(_run(here, "second", gen, {"composition": {
        "lineage": ["survey"], "max_releases": 2}}, ["composition.pvp_1 <= 0.5"], "c1"))
    assert ok["status"] == "ok" and ok["figures"]["n_earlier"] == 2, ok.get("reason")
    flooded = _composition(_run(here, "second", gen, {"composition": {
        "lineage": ["survey"], "max_releases": 1}}, ["composition.pvp_1 <= 0.5"], "c2"))
    assert flooded["status"] == "insufficient_evidence"
    assert "more than composition.max_releases (1)" in flooded["reason"]


def test_the_first_release_of_a_lineage_is_measured_alone_and_a_misspelt_id_is_named(
        files, tmp_path):
    """Nothing published before (no earlier release configured, or a lineage whose runs were
    none APPROVED): the release is measured alone (pvp_1 0, the *_alone figures its own), and
    the gate can approve it. A lineage id with no run in the store at all is insufficient
    evidence naming it: a typo must not pass for a first release."""
    here = {**files, "out": tmp_path / "out"}
    gen = {"region": {"hierarchy": str(files["region_hierarchy"])}}
    checks = ["composition.pvp_1 <= 0.01"]
    first = _run(here, "second", gen, {"composition": {}}, checks, "f1")
    result = _composition(first)
    assert result["status"] == "ok" and first.verdict == "APPROVED", first.reasons
    original = pd.read_csv(files["original"], **READ).drop(columns=["person_id"])
    original["age"] = original["age"].astype(int)
    alone, _, _ = compose(Lineage(original, ReleaseTables(
        "new", pd.read_csv(files["second"], **READ), tuple(QIS), ("diagnosis",), gen), ()))
    assert result["figures"]["n_earlier"] == 0 and result["figures"]["pvp_1"] == 0.0
    assert result["figures"]["pvp_1_alone"] == pytest.approx(alone["pvp_1_alone"])
    assert alone["pvp_1_alone"] > 0.3  # the figure is the release's own, not a default
    assert "measured alone" in " ".join(result["details"]["notes"])

    here = {**files, "out": tmp_path / "out2"}  # a store where only a rejected run precedes
    rejected = _run(here, "first", FIRST, {"k_anonymity": {}}, ["k_anonymity.k >= 50"], "f2")
    assert rejected.verdict == "REJECTED"
    after = _run(here, "second", gen, {"composition": {"lineage": ["survey"]}}, checks, "f3")
    notes = " ".join(_composition(after)["details"]["notes"])
    assert after.verdict == "APPROVED" and "none APPROVED (REJECTED)" in notes, notes

    typo = _run(here, "second", gen, {"composition": {"lineage": ["survy"]}}, checks, "f4")
    result = _composition(typo)
    assert result["status"] == "insufficient_evidence" and typo.verdict != "APPROVED"
    assert "no run of release 'survy' in the output store" in result["reason"]


def test_a_release_that_adds_one_person_to_an_approved_one_discloses_them(files, tmp_path):
    """A, then B = A plus one person, both in the same domain: the intersection finds nothing
    new, but B minus A is that person's row, sensitive value included. The difference is
    judged: pvp_1 1 (the one added record's value is certain), difference_records 1."""
    here = {**files, "out": tmp_path / "out"}
    rows = files["first"].read_text().splitlines(keepends=True)
    (tmp_path / "a.csv").write_text("".join(rows[:-1]))  # every row but the last person
    here["a"] = tmp_path / "a.csv"
    first = _run(here, "a", FIRST, {"k_anonymity": {}}, ["k_anonymity.k >= 1"], "a1")
    assert first.verdict == "APPROVED"
    outcome = _run(here, "first", FIRST, {"composition": {"lineage": ["survey"]}},
                   ["composition.pvp_1 <= 0.01"], "b1")
    result = _composition(outcome)
    assert result["status"] == "ok", result.get("reason")
    figures = result["figures"]
    assert figures["difference_records"] == 1
    assert figures["difference_pvp_1"] == 1.0 and figures["pvp_1"] == 1.0
    assert figures["difference_l_min"] == 1
    assert outcome.verdict == "REJECTED"
    # releases generalized differently (regions merged, ages exact) have no difference
    other = _composition(_run(here, "second", {"region": {"hierarchy": str(
        files["region_hierarchy"])}}, {"composition": {"lineage": ["survey"]}},
        ["composition.pvp_1 <= 1"], "b2"))
    assert other["status"] == "ok" and other["figures"]["difference_records"] is None
