"""The report people read: rendered by the real gate, opened in headless Chromium.

The browser tests need Debian's ``chromium`` (``.ci/run`` installs it and sets
RISKGATE_REQUIRE_BROWSER=1, so that CI cannot skip them). Screenshots are kept under
``tests/artifacts/``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from markupsafe import escape

from riskcore.gate.schemas import validate
from riskcore.report.views import advice
from riskgate.flows.browser import check_page, find_chromium
from tests.conftest import gate_config, run_gate_flow

pytestmark = pytest.mark.usefixtures("prefect_server")

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

EVERY_FAMILY = {
    "k_anonymity": {"ks": [2, 3, 5, 10]}, "reid": {"threshold": 0.1}, "l_diversity": {},
    "t_closeness": {}, "sdc": {}, "suda": {}, "population": {"population_size": 1_000_000},
    "drisk": {"columns": ["income"]},
    "singling_out": {"n_attacks": 100, "mode": "univariate"},
    "linkability": {"n_attacks": 100, "aux_a": ["region", "age"], "aux_b": ["sex", "education"]},
    "inference": {"n_attacks": 150, "secrets": ["diagnosis"]},
    "alc": {"max_attacks": 300, "models": ["logistic_regression"]},
}
ROLES = {"quasi_identifiers": ["region", "age", "sex", "education"],
         "sensitive": ["diagnosis", "income"], "weight": "weight", "household": "household_id",
         "direct_identifiers": ["person_id"], "types": {"age": "categorical"}}
#: the plots each family must put in the report (the income l-diversity is there too)
FAMILY_PLOTS = {"class-sizes", "reid-prosecutor-risk", "reid-journalist-risk",
                "sdc-individual-risk", "sdc-household-risk", "l-diversity-diagnosis",
                "l-diversity-income", "attack-rates", "alc-scatter", "alc-pr-1", "alc-pr-2"}


def _browser() -> str:
    exe = find_chromium()
    if exe is None:
        if os.environ.get("RISKGATE_REQUIRE_BROWSER") == "1":
            pytest.fail("Chromium is required (RISKGATE_REQUIRE_BROWSER=1) but not installed")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    return exe


def _run(cfg: dict, name: str) -> tuple[dict, Path]:
    outcome = run_gate_flow(cfg)
    return outcome, Path(outcome["folder"])


@pytest.fixture(scope="module")
def every_family(example_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("every")
    policy = {"version": 1, "checks": ["k_anonymity.k >= 3", "reid.pRb <= 0.1",
                                       "sdc.global_risk <= 0.01", "alc.max <= 0.5",
                                       "inference.risk <= 0.5"]}
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(out), measures=EVERY_FAMILY, roles=ROLES, release_id="every-family",
                      policy=policy, generalization={
                          "region": {"hierarchy": str(example_files["region_hierarchy"])}})
    return _run(cfg, "every-family")


def test_every_family_report_opens_in_chromium_with_every_plot(every_family):
    exe = _browser()
    outcome, run = every_family
    decision = json.loads((run / "decision.json").read_text())
    measures = json.loads((run / "measures.json").read_text())
    validate(decision)
    validate(measures)
    assert {m["measure"] for m in measures["measures"]} == set(EVERY_FAMILY)
    shot = ARTIFACTS / "report-every-family.png"
    page = check_page(run / "report.html", shot, chromium=exe)
    assert page.problems() == []
    assert page.verdict == decision["verdict"] == outcome["verdict"] and page.verdict_visible
    assert page.scripts == 0
    seen = {p.plot for p in page.plots}
    assert FAMILY_PLOTS <= seen, FAMILY_PLOTS - seen
    assert all(p.width > 100 and p.height > 100 for p in page.plots)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width == 1280 and height == page.page_height


def test_every_family_report_states_the_numbers_of_the_json(every_family):
    _, run = every_family
    html = (run / "report.html").read_text()
    measures = {m["measure"]: m for m in json.loads((run / "measures.json").read_text())[
        "measures"]}
    decision = json.loads((run / "decision.json").read_text())
    for section in ("checks-section", "inputs", "reid", "sdc", "attacks", "alc", "how-to-read",
                    "reproducibility"):
        assert f'id="{section}"' in html, section
    # the class-size histogram's bars are the records per size bucket of the JSON histogram
    hist = measures["k_anonymity"]["details"]["class_size_histogram"]
    records_5_9 = sum(s * c for s, c in hist if 5 <= s <= 9)
    assert f"<title>5-9: {records_5_9:,}</title>" in html
    # records at risk: the reid figure against the number of records
    reid = measures["reid"]["figures"]
    n = measures["k_anonymity"]["figures"]["n"]
    assert f"<strong>{reid['records_at_risk']:,}</strong> of {n:,} records" in html
    assert f'<td class="num">{reid["pRa"]:.6g}</td>' in html
    # the ALC table shows each attack's ALC and the summary its maximum
    alc = measures["alc"]
    for a in alc["details"]["attacks"]:
        if a["alc"] is not None:
            assert f'{a["alc"]:g}'.replace("-", "") in html
    # the domain check's shares, per column, as the attacks and the ALC recorded them
    rows = {c["column"]: c for name in ("singling_out", "linkability", "inference", "alc")
            for c in measures[name]["details"]["alignment"]}
    assert rows["region"]["how"] == "declared: hierarchy"
    assert rows["age"]["how"] == "detected: interval"
    for c in rows.values():
        share = f'{100 * c["comparable"]:.1f} %'
        assert f'<tr><td>{c["column"]}</td><td>{c["how"]}</td><td class="num">{share}</td>' \
            in html, c
    assert 'id="attack-alignment"' in html and 'id="alc-alignment"' in html
    # every input's full checksum and the seed are recorded for an audit
    for t in decision["inputs"]:
        assert t["sha256"] in html
    assert f"<tr><th>seed</th><td>{decision['seed']}</td></tr>" in html
    # a failing or review check says what to do (its family's advice)
    not_passed = [c for c in decision["checks"] if c["verdict"] != "pass"]
    assert [c["figure"] for c in not_passed] == ["reid.pRb"]  # 0.25 on the example
    for c in not_passed:
        assert str(escape(advice(c))) in html and advice(c)


def test_bundled_example_report_in_chromium(example_files, tmp_path):
    exe = _browser()
    from riskcore.gate.config import load_config as load_gate_config

    demo = Path(__file__).resolve().parents[2] / "examples" / "gate.yaml"
    cfg = load_gate_config(demo).model_dump(mode="json")
    cfg.update(original=str(example_files["original"]), released=str(example_files["released"]),
               output_url=str(tmp_path), policy=str(demo.parent / "policy.yaml"))
    cfg["generalization"]["region"] = {"hierarchy": str(example_files["region_hierarchy"])}
    outcome, run = _run(cfg, "demo")
    assert outcome["verdict"] != "ERROR", outcome
    page = check_page(run / "report.html", ARTIFACTS / "report-demo.png", chromium=exe)
    assert page.problems() == []
    assert page.verdict == outcome["verdict"] and page.verdict_visible
    assert {"class-sizes", "sdc-individual-risk", "l-diversity-diagnosis"} <= {
        p.plot for p in page.plots}


def _hostile_tables(example_files, tmp_path) -> tuple[Path, Path]:
    """The example with a quasi-identifier named like a script and HTML in its values, and a
    unique marker planted in the sensitive column and the direct identifier."""
    ori = pd.read_csv(example_files["original"])
    rel = pd.read_csv(example_files["released"])
    evil = "<script>alert(1)</script>"
    tags = np.array(["<b>bold</b>", "<img src=x onerror=alert(2)>", "a&b", "plain"])
    for df in (ori, rel):
        df[evil] = tags[np.arange(len(df)) % 4]
        df["qi_marker"] = np.where(np.arange(len(df)) == 7, "QIMARK9b1", "common")
        df.loc[7, evil] = "<img src=x onerror=alert(2)>"  # the riskiest record: an example
    ori.loc[[3, 19, 250], "diagnosis"] = "SENSMARK4f2e"
    rel.loc[[3, 19, 250], "diagnosis"] = "SENSMARK4f2e"
    ori.loc[[5], "person_id"] = "DIRMARK77c"
    paths = (tmp_path / "original.csv", tmp_path / "released.csv")
    ori.to_csv(paths[0], index=False)
    rel.to_csv(paths[1], index=False)
    return paths


@pytest.fixture(scope="module")
def hostile(example_files, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    ori, rel = _hostile_tables(example_files, tmp)
    roles = dict(ROLES, sensitive=["diagnosis"],
                 quasi_identifiers=["region", "sex", "<script>alert(1)</script>", "qi_marker"])
    measures = {"k_anonymity": {}, "reid": {"threshold": 0.1}, "l_diversity": {},
                "t_closeness": {}, "sdc": {},
                # a sensitive column among the SUDA keys: its values are named by code only
                "suda": {"keys": ["region", "sex", "qi_marker", "diagnosis"]},
                "inference": {"n_attacks": 100, "secrets": ["diagnosis"]},
                "alc": {"max_attacks": 200, "models": ["logistic_regression"]}}
    runs = {}
    for detail in ("summary", "full"):
        cfg = gate_config(str(ori), str(rel), str(tmp / detail), measures=measures, roles=roles,
                          release_id=f"hostile-{detail}", report={"detail": detail})
        runs[detail] = _run(cfg, f"hostile-{detail}")
    return runs


def test_html_in_column_names_and_values_renders_as_text(hostile):
    exe = _browser()
    _, run = hostile["full"]
    html = (run / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html and "<b>bold</b>" not in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html  # shown as text in the full examples
    page = check_page(run / "report.html", ARTIFACTS / "report-escaping.png", chromium=exe)
    assert page.dialogs == () and page.scripts == 0 and page.problems() == []


def test_planted_sensitive_marker_never_reaches_the_report(hostile):
    for detail, (_, run) in hostile.items():
        html = (run / "report.html").read_text()
        assert "SENSMARK4f2e" not in html, detail
        assert "DIRMARK77c" not in html, detail
        for name in ("decision.json", "measures.json", "examples.json"):
            if (run / name).exists():
                text = (run / name).read_text()
                assert "SENSMARK4f2e" not in text and "DIRMARK77c" not in text, (detail, name)
    # the marker in a quasi-identifier is the riskiest record: it shows only with 'full'
    assert "QIMARK9b1" not in (hostile["summary"][1] / "report.html").read_text()
    full = (hostile["full"][1] / "report.html").read_text()
    assert "QIMARK9b1" in full and "Example values (report detail: full)" in full
    suda = [m for m in json.loads((hostile["full"][1] / "measures.json").read_text())[
        "measures"] if m["measure"] == "suda"][0]
    coded = [lv["value"] for lv in suda["details"]["attribute_level_contributions"]
             if lv["variable"] == "diagnosis"]
    assert coded and all(str(v).startswith("value#") for v in coded)
    examples = json.loads((hostile["full"][1] / "examples.json").read_text())
    assert examples["columns"] == ["region", "sex", "<script>alert(1)</script>", "qi_marker"]
    assert examples["rows"][0]["values"][3] == "QIMARK9b1"
    assert not (hostile["summary"][1] / "examples.json").exists()


def test_report_command_rerenders_the_same_report(every_family, tmp_path):
    from riskgate.flows.cli import main

    _, run = every_family
    target = tmp_path / "again.html"
    assert main(["report", str(run), "--out", str(target)]) == 0
    assert target.read_text() == (run / "report.html").read_text()


def test_a_failed_run_still_has_a_readable_report(example_files, tmp_path):
    exe = _browser()
    cfg = gate_config(str(example_files["original"]), str(tmp_path / "missing.csv"),
                      str(tmp_path / "out"))
    outcome, run = _run(cfg, "broken")
    assert outcome["verdict"] == "ERROR"
    page = check_page(run / "report.html", None, chromium=exe)
    assert page.problems() == [] and page.verdict == "ERROR" and page.plots == ()


def test_report_command_detail_follows_the_flag_and_what_the_run_recorded(hostile, tmp_path,
                                                                          capsys):
    from riskgate.flows.cli import main

    full_run, summary_run = hostile["full"][1], hostile["summary"][1]
    # a full run re-rendered as a summary hides the example values
    assert main(["report", str(full_run), "--out", str(tmp_path / "s.html"),
                 "--report-detail", "summary", "--json"]) == 0
    told = json.loads(capsys.readouterr().out)
    assert told["detail"] == "summary" and told["verdict"] == "REJECTED"
    assert "QIMARK9b1" not in (tmp_path / "s.html").read_text()
    # a summary run has no examples to show, and says so
    assert main(["report", str(summary_run), "--out", str(tmp_path / "f.html"),
                 "--report-detail", "full"]) == 0
    assert "recorded no example values" in capsys.readouterr().err
    html = (tmp_path / "f.html").read_text()
    assert 'id="examples"' not in html
    # the SUDA value contributions of measures.json are shown, labelled as example values
    assert 'id="suda-levels"' in html and "Example values (report detail: full)" in html
