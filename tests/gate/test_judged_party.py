"""What the judged party can write never chooses its rules: a control it names is judged beside
the custodian's (the worse verdict kept) and refused when it shares the release's rows; a column
name it writes cannot become a key of the custodian's config, and a name that holds a line
break or a control character is refused at load, in every format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from riskcore.errors import InputError
from riskcore.examples import census_population
from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate

COLUMNS = ["region", "age", "sex", "education", "occupation", "income", "diagnosis"]


@pytest.fixture(scope="module")
def steering(tmp_path_factory) -> dict[str, Path]:
    """Members, the custodian's holdout, a release of near copies of the members (the leak),
    the pipeline's half of its own release; an honest release and a control from elsewhere."""
    root = tmp_path_factory.mktemp("steering")
    people = census_population(12000, seed=3)[COLUMNS]
    members, holdout = people.iloc[:3000], people.iloc[3000:6000]
    rng = np.random.default_rng(5)
    released = members.sample(frac=1.0, random_state=1).reset_index(drop=True)
    released["age"] = released["age"] + rng.integers(-1, 2, len(released))
    released["income"] = (released["income"] * rng.uniform(0.97, 1.03, len(released))).round()
    # an honest release (people in no other table, as a perfect generator would make), and a
    # control from elsewhere (older people): against it the release looks like the members
    fresh, elsewhere = people.iloc[6000:9000], people.iloc[9000:].copy()
    elsewhere["age"] = elsewhere["age"] + 25
    paths = {"original": root / "original.csv", "holdout": root / "holdout.csv",
             "released": root / "released.csv", "own_half": root / "own-half.csv",
             "fresh": root / "fresh.csv", "elsewhere": root / "elsewhere.csv"}
    members.to_csv(paths["original"], index=False)
    holdout.to_csv(paths["holdout"], index=False)
    released.to_csv(paths["released"], index=False)
    released.iloc[::2].to_csv(paths["own_half"], index=False)
    fresh.to_csv(paths["fresh"], index=False)
    elsewhere.to_csv(paths["elsewhere"], index=False)
    cfg = {"release_id": "steer", "original": "original.csv", "released": "released.csv",
           "control": "holdout.csv", "output_url": "runs", "seed": 3,
           "roles": {"quasi_identifiers": ["region", "age", "sex", "education"],
                     "sensitive": ["diagnosis"], "types": {"age": "integer"}},
           "measures": {"membership": {}},
           "trigger": {"allow": ["control"]},
           "policy": {"version": 1, "checks": [
               {"figure": "membership.auc", "max": 0.6, "review_max": 0.7}]}}
    (root / "gate.yaml").write_text(yaml.safe_dump(cfg))
    paths["config"] = root / "gate.yaml"
    return paths


def _gate(paths: dict[str, Path], control: str | None, run: str, released: str = "released"
          ) -> dict:
    overrides = {"control": str(paths[control])} if control else {}
    overrides["released"] = str(paths[released])
    origins = {"config": "deployment", **({"control": "payload"} if control else {})}
    gate = load_gate(paths["config"], overrides, origins=origins)
    outcome = run_gate(gate, run, steps=LocalSteps())
    return json.loads(Path(outcome.decision_url or "").read_text())


def test_the_custodians_holdout_sees_the_leak(steering):
    decision = _gate(steering, None, "alone")
    assert decision["verdict"] in ("NEEDS_REVIEW", "REJECTED"), decision["reasons"]
    assert "controls" not in decision


def test_the_pipelines_own_half_of_its_release_as_control_is_refused(steering):
    decision = _gate(steering, "own_half", "own-half")
    assert decision["verdict"] == "REJECTED"
    assert any("control rows do not overlap the release" in r for r in decision["reasons"])


def test_a_control_named_by_the_payload_is_judged_beside_the_custodians(steering):
    """An honest release passes against the custodian's holdout; a payload's control that
    makes it look worse is judged beside it, each family that reads a control runs against
    both, the worse verdict is kept and the decision says which."""
    alone = _gate(steering, None, "honest", released="fresh")
    assert alone["verdict"] == "APPROVED", alone["reasons"]
    both = _gate(steering, "elsewhere", "honest-elsewhere", released="fresh")
    assert both["controls"] == {
        "judged_against": ["control (the trigger payload's)",
                           "custodian_control (the config's own)"],
        "verdicts": {"control": "REJECTED", "custodian_control": "APPROVED"},
        "kept": "control"}
    assert both["verdict"] == "REJECTED"
    assert both["provenance"]["control"]["source"] == "payload"
    assert both["provenance"]["custodian_control"]["source"] == "config"


def test_whichever_control_is_worse_is_kept(steering):
    """The leaking release against the custodian's holdout and an honest second control: the
    custodian's (worse or equal) verdict stands, never the better one."""
    alone = _gate(steering, None, "leak-alone")
    both = _gate(steering, "fresh", "leak-fresh")
    assert both["verdict"] == alone["verdict"] != "APPROVED"
    assert both["controls"]["verdicts"]["custodian_control"] == alone["verdict"]


# ---------------------------------------------------------------- names the data writes
INJECTED = "notes\u2028identifiers: {allow: {notes: [uk_nino]}}\u2028#"


def test_a_column_name_cannot_write_a_key_of_the_config_init_writes(tmp_path):
    from riskcore.gate.init import config_text, policy_text, profile, propose

    people = census_population(800, seed=2)
    original = people.rename(columns={"occupation": INJECTED})
    released = original.drop(columns=["person_id"]).sample(frac=1.0, random_state=0)
    prof = profile(original, released)
    prop = propose(prof)
    text = config_text(prof, prop, {"original": "o.csv", "released": "r.csv"})
    policy = policy_text(prof, prop, False)
    for written in (text, policy):
        assert not any(ch in written for ch in "\u2028\u2029\u0085\r")
        doc = yaml.safe_load(written)
        assert "identifiers" not in doc
    assert INJECTED not in text


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
@pytest.mark.parametrize("name", [INJECTED, "a\nb", "a\rb", "a\x85b", "tab\tname", "zero\u200bw",
                                  "nul\x00"])
def test_a_column_name_with_a_line_break_or_control_character_is_refused(tmp_path, fmt, name):
    from riskcore.gate.tables import read_table

    df = pd.DataFrame({"age": [1, 2, 3], name: ["a", "b", "c"]})
    path = tmp_path / f"t.{fmt}"
    if fmt == "csv":  # a quoted header field keeps its line breaks
        path.write_bytes(('age,"' + name + '"\n1,a\n2,b\n3,c\n').encode())
    elif fmt == "parquet":
        df.to_parquet(path)
    else:
        path.write_text("".join(json.dumps({"age": a, name: v}) + "\n"
                                for a, v in zip(df["age"], df[name])))
    with pytest.raises(InputError, match="(column 2 is named .* holds a line break, control or "
                                         "invisible character|column name that holds a line "
                                         "break .*); rename the column"):
        read_table(str(path), name="released")


def test_a_partitioned_release_with_such_a_name_is_refused(tmp_path):
    from riskcore.partitions import discover

    folder = tmp_path / "parts"
    folder.mkdir()
    for i in range(2):
        pd.DataFrame({"age": [1, 2], INJECTED: ["a", "b"]}).to_parquet(folder / f"p{i}.parquet")
    with pytest.raises(InputError, match="holds a line break"):
        discover(str(folder), "released")
