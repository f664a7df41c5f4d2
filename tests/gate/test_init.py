"""``riskgate init``: the kind of release read from the data, roles, markers, families and a
policy that fit it, written as two files that a gate runs as they are; never over a file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, Path]:
    """The example's population split into an original, a held-out control and people in
    neither, and four releases: the example's generalized one (of the whole population), a
    clean synthetic release (rows drawn with replacement from the people in neither table,
    three columns shuffled and income noised: new rows from the same population), a
    subsample, and a survey extract that writes N and -9 for missing."""
    from riskcore.examples import write_example

    root = tmp_path_factory.mktemp("init")
    files = write_example(root / "pop", n=6000, seed=3)
    read = {"dtype": str, "keep_default_na": False}
    pop = pd.read_csv(files["original"], **read)
    original, control, others = pop.iloc[:2000], pop.iloc[2000:4000], pop.iloc[4000:]
    original.to_csv(root / "original.csv", index=False)
    control.drop(columns=["person_id"]).to_csv(root / "control.csv", index=False)
    rng = np.random.default_rng(1)
    synthetic = others.drop(columns=["person_id"]).sample(
        frac=1.0, replace=True, random_state=2).reset_index(drop=True)
    for col in ("income", "diagnosis", "occupation"):
        synthetic[col] = synthetic[col].sample(frac=1.0, random_state=int(
            rng.integers(1000))).to_numpy()
    synthetic["income"] = (pd.to_numeric(synthetic["income"]) * rng.normal(
        1, 0.1, len(synthetic))).round(-2).astype(str)
    synthetic.to_csv(root / "synthetic.csv", index=False)
    control.drop(columns=["person_id", "household_id", "weight"]).to_csv(
        root / "control-bare.csv", index=False)
    original.drop(columns=["person_id"]).sample(frac=0.5, random_state=4).to_csv(
        root / "subsample.csv", index=False)
    survey = original.copy()
    survey.loc[::11, "income"] = "N"
    survey.loc[::13, "age"] = "-9"
    survey.to_csv(root / "survey-original.csv", index=False)
    released = survey.drop(columns=["person_id"])
    released["age"] = released["age"].map(lambda a: a if a == "-9" else f"{int(a) // 10 * 10}-"
                                          f"{int(a) // 10 * 10 + 9}")
    released.to_csv(root / "survey-released.csv", index=False)
    return {"root": root, "population": files["original"], "generalized": files["released"],
            **{k: root / f"{k}.csv" for k in ("original", "control", "control-bare", "synthetic",
                                                "subsample", "survey-original",
                                                "survey-released")}}


def _init(capsys, out: Path, **tables: Path | None) -> tuple[int, str]:
    from riskgate.flows.cli import main

    args = ["init", "--out", str(out)]
    for key, path in tables.items():
        if path is not None:
            args += [f"--{key}", str(path)]
    code = main(args)
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def _verdict(config: Path) -> str:
    outcome = run_gate(load_gate(config), "run-init", steps=LocalSteps())
    assert outcome.verdict != "ERROR", outcome.reasons
    return outcome.verdict


def test_a_generalized_release_is_read_as_kept_rows(tables, tmp_path, capsys):
    code, said = _init(capsys, tmp_path / "gen", original=tables["population"],
                       released=tables["generalized"])
    assert code == 0, said
    assert "the release holds rows kept from the original" in said
    assert "next: riskgate gate --config" in said
    text = (tmp_path / "gen" / "gate.yaml").read_text()
    cfg = yaml.safe_load(text)
    assert cfg["roles"]["direct_identifiers"] == ["person_id"]
    assert {"region", "age", "sex", "education"} <= set(cfg["roles"]["quasi_identifiers"])
    assert "diagnosis" in cfg["roles"]["sensitive"]
    assert cfg["roles"]["weight"] == "weight" and cfg["roles"]["household"] == "household_id"
    # what the release did, read off the tables: ages banded, incomes rounded, regions
    # merged (the map learned from the rows that link on the other columns, written as an
    # ARX hierarchy beside the config)
    assert cfg["generalization"] == {"age": "interval", "income": {"round": 5000},
                                     "region": {"hierarchy": "region-hierarchy.csv"}}
    from riskcore.examples import MACRO

    written = (tmp_path / "gen" / "region-hierarchy.csv").read_text().splitlines()
    assert sorted(written) == sorted(f"{r};{m}" for r, m in MACRO.items())
    assert {"k_anonymity", "reid", "l_diversity", "sdc", "copies"} <= set(cfg["measures"])
    assert "# The kind of release, from the data: rows kept" in text
    assert "#   region: 8 labels merged into 4; read as categorical" in text
    policy = yaml.safe_load((tmp_path / "gen" / "policy.yaml").read_text())
    figures = {c["figure"]: c for c in policy["checks"]}
    assert figures["k_anonymity.k"]["min"] == 5
    assert figures["copies.exact_share"]["review_max"] == 1.0
    assert "copies.exact_excess" not in figures
    assert _verdict(tmp_path / "gen" / "gate.yaml") in ("APPROVED", "REJECTED", "NEEDS_REVIEW")


def test_a_synthetic_resample_with_a_control_is_judged_against_chance(tables, tmp_path,
                                                                    capsys):
    code, said = _init(capsys, tmp_path / "syn", original=tables["original"],
                       released=tables["synthetic"], control=tables["control"])
    assert code == 0, said
    assert "the release holds new rows (synthetic data)" in said
    assert "of the control's rows do so by chance" in said
    cfg = yaml.safe_load((tmp_path / "syn" / "gate.yaml").read_text())
    assert cfg["control"].endswith("control.csv")
    assert {"copies", "membership", "singling_out", "inference", "utility"} <= set(
        cfg["measures"])
    assert "k_anonymity" not in cfg["measures"]
    policy = yaml.safe_load((tmp_path / "syn" / "policy.yaml").read_text())
    figures = {c["figure"] for c in policy["checks"]}
    assert {"copies.exact_excess", "copies.holdout_share", "membership.auc"} <= figures
    assert "copies.exact_share" not in figures  # chance, not copying, on coarse columns
    assert _verdict(tmp_path / "syn" / "gate.yaml") == "APPROVED"


def test_a_synthetic_release_without_a_control_says_the_verdict_needs_one(tables, tmp_path,
                                                                        capsys):
    code, _ = _init(capsys, tmp_path / "nc", original=tables["original"],
                    released=tables["synthetic"])
    text = (tmp_path / "nc" / "gate.yaml").read_text()
    assert code == 0 and "# control: held-out.csv" in text and "NEEDS_REVIEW" in text
    outcome = run_gate(load_gate(tmp_path / "nc" / "gate.yaml"), "run-nc", steps=LocalSteps())
    assert outcome.verdict in ("NEEDS_REVIEW", "REJECTED")  # never APPROVED without one
    holdout = next(c for c in outcome.checks if c["figure"] == "copies.holdout_share")
    assert holdout["verdict"] == "insufficient" and "needs a control table" in holdout[
        "message"]


def test_a_subsample_is_read_as_one(tables, tmp_path, capsys):
    code, said = _init(capsys, tmp_path / "sub", original=tables["original"],
                       released=tables["subsample"])
    assert code == 0 and "the release holds a subsample of the original's rows" in said
    cfg = yaml.safe_load((tmp_path / "sub" / "gate.yaml").read_text())
    assert {"k_anonymity", "reid", "sdc"} <= set(cfg["measures"])
    assert _verdict(tmp_path / "sub" / "gate.yaml") == "REJECTED"  # a raw half is not safe


def test_a_control_without_the_releases_weights_and_households_is_enough(tables, tmp_path,
                                                                           capsys):
    """A held-out sample carries what people are, not the release's design columns: the
    config init writes runs to the verdict of the figures (the subsample's REJECTED, as with a
    full control), not to "control.household_id: column exists: failed"."""
    code, said = _init(capsys, tmp_path / "bare", original=tables["original"],
                       released=tables["subsample"], control=tables["control-bare"])
    assert code == 0, said
    cfg = yaml.safe_load((tmp_path / "bare" / "gate.yaml").read_text())
    assert cfg["roles"]["household"] == "household_id" and cfg["roles"]["weight"] == "weight"
    outcome = run_gate(load_gate(tmp_path / "bare" / "gate.yaml"), "run-bare",
                       steps=LocalSteps())
    assert outcome.verdict == "REJECTED", outcome.reasons
    assert not [r for r in outcome.reasons if "data not clean" in r or "control" in r], \
        outcome.reasons
    assert any(r.startswith("k_anonymity.k: fail") for r in outcome.reasons), outcome.reasons


def test_markers_are_found_and_written_into_the_config(tables, tmp_path, capsys):
    code, said = _init(capsys, tmp_path / "survey", original=tables["survey-original"],
                       released=tables["survey-released"])
    assert code == 0, said
    cfg = yaml.safe_load((tmp_path / "survey" / "gate.yaml").read_text())
    per_column = cfg["roles"].get("missing_values", {})
    assert per_column.get("income") == ["N"] and per_column.get("age") == ["-9"]
    assert "missing-value markers:" in said
    assert _verdict(tmp_path / "survey" / "gate.yaml") in ("APPROVED", "REJECTED",
                                                           "NEEDS_REVIEW")


def test_init_never_writes_over_a_file(tables, tmp_path, capsys):
    (tmp_path / "gate.yaml").write_text("mine\n")
    code, said = _init(capsys, tmp_path, original=tables["original"],
                       released=tables["subsample"])
    assert code == 3 and "exist already; riskgate init never writes over a config" in said
    assert (tmp_path / "gate.yaml").read_text() == "mine\n"
    assert not (tmp_path / "policy.yaml").exists()


def test_columns_named_like_demographics_are_quasi_identifiers_whatever_their_values():
    """A 5-digit zip with leading zeros (400 values) and an exact birth date (2,000 values)
    are what an attacker knows best: quasi-identifiers, however many values they have (the
    hardening round found them left out as "not a role")."""
    from riskcore.gate.init import profile, propose

    rng = np.random.default_rng(8)
    n = 4000
    original = pd.DataFrame({
        "zip": [f"{z:05d}" for z in rng.integers(1000, 1400, n)],
        "birth_date": (pd.Timestamp("1940-01-01") + pd.to_timedelta(
            rng.integers(0, 2000, n), unit="D")).strftime("%Y-%m-%d"),
        "sex": rng.choice(["F", "M"], n), "diagnosis": rng.choice(list("abcd"), n)})
    released = original.sample(frac=0.9, random_state=1).reset_index(drop=True)
    prop = propose(profile(original, released))
    assert {"zip", "birth_date", "sex"} <= set(prop.quasi_identifiers), prop.why
    assert "demographic by its name" in prop.why["zip"]
    assert "demographic by its name" in prop.why["birth_date"]


def test_renumbered_households_are_no_hierarchy_written_down(tables, tmp_path, capsys):
    """A release that gave its households new numbers (pseudonyms): the diff learns the map
    from the linked rows, and init says so without writing it (it is the key back to the
    original's numbers); a merged region still gets its hierarchy."""
    released = pd.read_csv(tables["generalized"], dtype=str, keep_default_na=False)
    numbers = released["household_id"].unique()
    new = dict(zip(numbers, np.random.default_rng(5).permutation(len(numbers)) + 500_000))
    released["household_id"] = released["household_id"].map(new).astype(str)
    released.to_csv(tmp_path / "renumbered.csv", index=False)
    code, said = _init(capsys, tmp_path / "gen", original=tables["population"],
                       released=tmp_path / "renumbered.csv")
    assert code == 0, said
    assert "column 'household_id': the release renumbered its" in said
    assert "is not written beside the config" in said
    written = sorted(p.name for p in (tmp_path / "gen").iterdir())
    assert "region-hierarchy.csv" in written and not any("household" in w for w in written)


def test_the_command_line_loads_no_data_library_before_a_command_needs_one():
    """``riskgate`` itself (its parser and every command module) imports neither pandas nor
    NumPy, Prefect, scikit-learn or Great Expectations: a pipeline's ``emit-anonymized``,
    ``verify`` or ``limits`` started in 1.1 s when ``init``'s module brought pandas along (0.45
    s without). Each command imports what it uses when it runs."""
    import subprocess
    import sys

    heavy = ("pandas", "numpy", "prefect", "sklearn", "great_expectations", "pyarrow")
    code = ("import sys; sys.argv = ['riskgate', 'limits', '--help']; "
            "import riskgate.flows.cli; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
