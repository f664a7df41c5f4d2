"""Attacks and the ALC on generalized releases (riskcore.generalization): what is declared (or
unambiguously detected) gives, to the last digit, the figures of an original generalized by hand;
what cannot be compared is insufficient evidence, never a pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from riskcore.errors import ConfigError, InputError
from riskcore.examples import MACRO, write_example
from riskcore.gate.config import tables_config
from riskcore.gate.encoding import encode
from riskcore.gate.policy import CheckVerdict, Verdict, decide, parse_policy
from riskcore.generalization import parse_interval
from riskcore.measures import run_measure
from riskcore.results import MeasureResult, Status

ROLES = {"quasi_identifiers": ["region", "age", "sex", "education"], "sensitive": ["diagnosis"]}
ATTACKS: dict[str, dict[str, Any]] = {
    "singling_out": {"n_attacks": 200},
    "linkability": {"aux_a": ["region", "sex"], "aux_b": ["age", "education"],
                    "n_attacks": 300},
    "inference": {"n_attacks": 300},
    "alc": {"max_attacks": 150, "per_secret": 1, "models": ["logistic_regression"]},
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[str, Path]:
    return write_example(tmp_path_factory.mktemp("generalized"), n=1500, seed=21)


def _frames(demo: dict[str, Path]) -> dict[str, pd.DataFrame]:
    return {n: pd.read_csv(demo[n], dtype=str, keep_default_na=False).replace("", None)
            for n in ("original", "released")}


def _figures(frames: dict[str, pd.DataFrame], **cfg: Any) -> dict[str, MeasureResult]:
    config = tables_config({"released": "released.csv", "original": "original.csv",
                            "roles": {**ROLES, "types": {"age": "categorical"}}, "seed": 5,
                            **cfg}, "test")
    inputs = encode(config, frames)
    return {name: run_measure(name, inputs, params) for name, params in ATTACKS.items()}


def _by_hand(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    ori = frames["original"].copy()
    lo = (ori["age"].astype(int) // 10) * 10
    ori["age"] = lo.astype(str) + "-" + (lo + 9).astype(str)
    ori["region"] = ori["region"].map(MACRO)
    return {**frames, "original": ori}


def _main(r: MeasureResult) -> float:
    return float(r.figures["max" if r.measure == "alc" else "risk"])


def test_declared_generalization_equals_the_original_generalized_by_hand(demo):
    frames = _frames(demo)
    declared = _figures(frames, generalization={
        "age": "interval", "region": {"hierarchy": str(demo["region_hierarchy"])}})
    by_hand = _figures(_by_hand(frames))
    for name in ATTACKS:
        assert declared[name].status is Status.OK, declared[name].reason
        assert declared[name].figures == by_hand[name].figures, name
    how = {c["column"]: c for c in declared["inference"].details["alignment"]}
    assert how["age"]["how"] == "declared: interval" and how["age"]["comparable"] == 1.0
    assert how["region"]["how"] == "declared: hierarchy" and how["region"]["comparable"] == 1.0


def test_intervals_are_detected_and_an_undeclared_merge_is_insufficient_evidence(demo):
    frames = _frames(demo)
    results = _figures(frames)  # nothing declared: age detected, region's merge is not
    how = {c["column"]: c for c in results["linkability"].details["alignment"]}
    # region: only the original's regions that kept their name compare (North, East, ...)
    kept = frames["original"]["region"].isin(set(MACRO.values())).mean()
    assert how["region"] == {"column": "region", "how": "as is",
                             "comparable": pytest.approx(kept), "suppressed": 0.0}
    assert how["age"]["how"] == "detected: interval"
    assert "region" in results["linkability"].details["partly_comparable"]
    renamed = {**frames, "released": frames["released"].assign(
        region=frames["released"]["region"].map(lambda v: None if v is None else f"R-{v}"))}
    refused = _figures(renamed)
    for name, r in refused.items():
        assert r.status is Status.INSUFFICIENT_EVIDENCE, name
        assert "column 'region'" in str(r.reason) and "generalization" in str(r.reason)
    policy = parse_policy({"version": 1, "checks": ["singling_out.risk <= 0.1"]})
    decision = decide(policy, {"singling_out": refused["singling_out"]})
    assert decision.verdict is not Verdict.APPROVED
    assert "column 'region'" in " ".join(decision.reasons)


def test_detected_interval_matches_the_declared_one(demo):
    frames = _frames(demo)
    hier = {"region": {"hierarchy": str(demo["region_hierarchy"])}}
    detected = _figures(frames, generalization=hier)
    declared = _figures(frames, generalization={**hier, "age": "interval"})
    assert {n: r.figures for n, r in detected.items()} == \
        {n: r.figures for n, r in declared.items()}
    how = {c["column"]: c["how"] for c in detected["inference"].details["alignment"]}
    assert how["age"] == "detected: interval"


def test_suppressed_cells_give_a_risk_between_none_and_all_suppressed(demo):
    frames = _by_hand(_frames(demo))
    rng = np.random.default_rng(3)
    n = len(frames["released"])

    def suppressed(share: float) -> float:
        rel = frames["released"].copy()
        rows = rng.permutation(n)[: int(round(share * n))]
        rel.loc[rel.index[rows], "age"] = "*"
        config = tables_config({"released": "r.csv", "original": "o.csv", "seed": 5,
                                "roles": {**ROLES, "types": {"age": "categorical"}}}, "test")
        inputs = encode(config, {**frames, "released": rel})
        result = run_measure("singling_out", inputs, {"n_attacks": 300})
        return float(result.figures["attack_rate"])

    none, tenth, half = suppressed(0.0), suppressed(0.1), suppressed(0.5)
    assert half < tenth < none, (none, tenth, half)
    # a token standing for more than half of a column's cells is refused
    with pytest.raises(ConfigError, match=r"suppressed: the token\(s\) \['\*'\] cover 60\.0% "
                       r"of the released cells of column 'age'"):
        suppressed(0.6)


def test_a_suppression_token_that_is_real_data_is_refused(demo):
    """Listing the release's real labels as 'suppressed' made every cell match anything and
    turned a REJECTED release into APPROVED."""
    frames = _by_hand(_frames(demo))
    label = str(frames["original"]["sex"].dropna().iloc[0])
    config = tables_config({"released": "r.csv", "original": "o.csv", "seed": 5,
                            "suppressed": ["*", label],
                            "roles": {**ROLES, "types": {"age": "categorical"}}}, "test")
    with pytest.raises(ConfigError, match=rf"suppressed: the token '{label}' is a value of "
                       r"column 'sex' in the original"):
        encode(config, frames)


def test_round_and_top_code_and_mask_align_numbers_and_codes():
    from riskcore.alignment import align_tables
    from riskcore.generalization import parse_spec

    ori = pd.DataFrame({"income": ["12345", "67890", "250000"], "zip": ["12345", "12399", "9"],
                        "age": ["93", "40", "17"]})
    rel = pd.DataFrame({"income": ["10000", "70000", "250000"], "zip": ["123**", "123**", "*"],
                        "age": ["90", "40", "18"]})
    specs = {"income": parse_spec({"round": 10000}, "income"),
             "zip": parse_spec({"mask": "*"}, "zip"),
             "age": parse_spec({"top_code": 90, "bottom_code": 18}, "age")}
    out, record = align_tables({"original": ori, "released": rel}, ["income", "zip", "age"], specs)
    assert out["original"]["income"].tolist() == [10000.0, 70000.0, 250000.0]
    zips = out["original"]["zip"]
    assert zips.iloc[:2].tolist() == ["123**", "123**"] and pd.isna(zips.iloc[2])  # no label
    assert out["original"]["age"].tolist() == [90.0, 40.0, 18.0]
    assert record.columns["zip"].comparable == pytest.approx(2 / 3)
    assert record.columns["zip"].suppressed == pytest.approx(1 / 3)


@pytest.mark.parametrize(("label", "inside", "outside"), [
    ("50-59", [50, 59], [49.9, 59.5]), ("[50,60)", [50, 59.9], [60]), ("(50, 60]", [60], [50]),
    ("85+", [85, 120], [84]), ("85 and over", [85], [84]), ("<18", [17.9], [18]),
    ("<=17", [17], [17.5]), ("under 18", [0], [18]), (">90", [91], [90])])
def test_interval_labels(label, inside, outside):
    iv = parse_interval(label)
    assert iv is not None
    assert iv.contains(np.array(inside, dtype=float)).all()
    assert not iv.contains(np.array(outside, dtype=float)).any()


@pytest.mark.parametrize("label", ["north", "50-", "60-50", "1-2-3", ""])
def test_labels_that_are_not_intervals(label):
    assert parse_interval(label) is None


def test_a_hierarchy_that_misses_a_value_names_its_row_not_the_value(demo, tmp_path):
    frames = _frames(demo)
    partial = tmp_path / "partial.csv"
    partial.write_text("North;North\nEast;East\n")
    with pytest.raises(InputError) as err:
        _figures(frames, generalization={"region": {"hierarchy": str(partial)}})
    text = str(err.value)
    assert "column 'region'" in text and "rows [" in text and "partial.csv" in text
    missing = set(frames["original"]["region"]) - {"North", "East"}
    assert not any(v in text.replace("partial.csv", "") for v in missing)


@pytest.mark.parametrize(("spec", "message"), [
    ({"width": -5}, "greater than 0"), ({"interval": 5}, "unknown key"),
    ("bands", "cannot read"), ({"mask": "**"}, "at most 1 character"),
    ({"top_code": float("inf")}, "finite")])
def test_malformed_declarations_are_config_errors(spec, message):
    with pytest.raises(ConfigError, match=message):
        tables_config({"released": "r.csv", "roles": ROLES,
                       "generalization": {"age": spec}}, "test")


def test_a_declaration_for_a_column_without_a_role_is_refused():
    with pytest.raises(ConfigError, match="generalization names column 'zip'"):
        tables_config({"released": "r.csv", "roles": ROLES,
                       "generalization": {"zip": {"mask": "*"}}}, "test")


def _attack(inconclusive: bool, partly: list[str]) -> MeasureResult:
    return MeasureResult(measure="singling_out",
                         figures={"risk": 0.0, "inconclusive": int(inconclusive)},
                         details={"partly_comparable": partly})


@pytest.mark.parametrize(("setting", "partly", "verdict"), [
    (None, [], CheckVerdict.PASS), (None, ["age"], CheckVerdict.REVIEW),
    ("review", [], CheckVerdict.REVIEW), ("pass", ["age"], CheckVerdict.PASS)])
def test_an_inconclusive_attack_is_reviewed_as_the_policy_says(setting, partly, verdict):
    doc: dict[str, Any] = {"version": 1, "checks": ["singling_out.risk <= 0.1"]}
    if setting:
        doc["on_inconclusive"] = setting
    outcome = decide(parse_policy(doc), {"singling_out": _attack(True, partly)}).checks[0]
    assert outcome.verdict is verdict
    if verdict is CheckVerdict.REVIEW:
        assert "inconclusive" in outcome.message
    # a conclusive attack passes whatever the setting
    assert decide(parse_policy(doc), {"singling_out": _attack(False, partly)}).checks[0] \
        .verdict is CheckVerdict.PASS


def test_the_share_of_suppressed_cells_is_the_same_from_categories_or_rows():
    """A Categorical's token share is found through its categories (no pass over
    the rows when no category is a token); the same share as comparing every cell."""
    from riskcore.alignment import _token_share

    rng = np.random.default_rng(7)
    values = rng.choice(np.array(["a", "b", "*", "?", None], dtype=object), 2000,
                        p=[0.4, 0.3, 0.15, 0.05, 0.1])
    for tokens in (["*"], ["*", "?"], ["x"], [], ["?", "zz"]):
        for s in (pd.Series(values, dtype=object), pd.Series(values, dtype="category"),
                  pd.Series(pd.Categorical(values, categories=["a", "b", "*", "?", "zz"]))):
            want = float(pd.Series(values, dtype=object).isin(tokens).mean()) if tokens else 0.0
            assert _token_share(s, tokens) == pytest.approx(want, abs=1e-15), (tokens, s.dtype)
    assert _token_share(pd.Series(values, dtype="category"), ["*"]) > 0.1
