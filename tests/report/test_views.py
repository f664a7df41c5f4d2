"""The report's pieces without a browser: plot geometry, the numbers behind each plot, escaping,
advice for failed checks, and progress ticks."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from riskcore import Roles, encode_table, progress
from riskcore.errors import ConfigError
from riskcore.measures import BY_NAME, MeasureInputs, run_measure
from riskcore.report import plots, render_report
from riskcore.report.riskiest import example_records
from riskcore.report.views import (
    INSUFFICIENT_ADVICE,
    RISK_LABELS,
    advice,
    alc_view,
    check_threshold,
    size_buckets,
)
from riskcore.stats import risk_band_counts


def test_nice_ticks_cover_the_top_in_round_steps():
    assert plots.nice_ticks(2611) == [0, 1000, 2000, 3000]
    assert plots.nice_ticks(0.37) == pytest.approx([0, 0.1, 0.2, 0.3, 0.4])
    assert plots.nice_ticks(5) == [0, 1, 2, 3, 4, 5]
    assert plots.nice_ticks(0) == [0.0, 1.0]


def test_bar_heights_are_proportional_and_small_counts_stay_visible():
    svg = str(plots.bar_chart("t", "title", ["a", "b", "c"], [1000, 500, 1], xlabel="x",
                              ylabel="y", highlight=[False, False, True]))
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([0-9.]+)"', svg)]
    assert heights[0] == pytest.approx(2 * heights[1], abs=0.15)
    assert heights[2] >= 2.0  # 1 of 1000 would be 0.2 px: drawn at 2 px
    fills = re.findall(r'<rect [^>]*fill="([^"]+)"', svg)
    assert fills == [plots.BAR, plots.BAR, plots.BAD]
    assert 'data-plot="t"' in svg and "<title>title</title>" in svg


def test_plot_labels_are_escaped():
    evil = "<script>alert(1)</script>"
    for svg in (plots.bar_chart("p", evil, [evil], [3], xlabel=evil, ylabel=evil),
                plots.hbar_chart("p", evil, [evil], [3.0], xlabel=evil),
                plots.dot_whisker("p", evil, [(evil, [plots.Whisker("attack", .2, .1, .3)])]),
                plots.alc_scatter("p", evil, [(evil, .3, .6, "at_risk")]),
                plots.pr_curves("p", evil, [("attack", [0.01, 1.0], [0.9, 0.5])])):
        assert "<script>" not in str(svg) and "&lt;script&gt;" in str(svg)


def test_alc_scatter_bands_follow_the_alc_formula():
    # ALC = (a - b) / (1 - b): the 0.5 line passes (0, 0.5) and (0.5, 0.75)
    frame = plots.Frame(420, 420, left=52, right=16, top=14, bottom=44)
    svg = str(plots.alc_scatter("s", "t", [("#1", 0.5, 0.75, "at_risk")]))
    cx, cy = (float(v) for v in re.search(r'<circle cx="([0-9.]+)" cy="([0-9.]+)"', svg).groups())
    x0, y0 = frame.x0, frame.y0
    wx, wy = frame.x1 - frame.x0, frame.y0 - frame.y1
    assert (cx - x0) / wx == pytest.approx(0.5, abs=1e-3)
    assert (y0 - cy) / wy == pytest.approx(0.75, abs=1e-3)
    # the at-risk polygon's corners are (0, 0.5), (1, 1), (0, 0.75) in data space
    pts = re.search(r'<polygon points="([^"]+)" fill="#fdf3e1"', svg).group(1).split()
    data = [((float(x) - x0) / wx, (y0 - float(y)) / wy) for x, y in
            (p.split(",") for p in pts)]
    assert data == [pytest.approx((0, 0.5), abs=1e-3), pytest.approx((1, 1), abs=1e-3),
                    pytest.approx((0, 0.75), abs=1e-3)]


def test_size_buckets_count_records_and_classes():
    hist = [[1, 2], [3, 1], [7, 2], [150, 1]]
    labels, records, classes = size_buckets(hist)
    assert labels == ["1", "2", "3", "4", "5-9", "10-19", "20-49", "50-99", "100+"]
    assert records == [2, 0, 3, 0, 14, 0, 0, 0, 150]
    assert classes == [2, 0, 1, 0, 2, 0, 0, 0, 1]


def test_risk_bands_include_their_upper_edge():
    counts = risk_band_counts(np.array([0.0005, 0.001, 0.0011, 0.1, 0.1000001, 1.0]))
    assert counts == [2, 1, 0, 1, 1, 0, 1]
    assert RISK_LABELS == ("≤0.001", "≤0.01", "≤0.05", "≤0.1", "≤0.2", "≤0.5", "≤1")


def test_advice_for_failed_and_unmeasured_checks():
    assert advice({"figure": "k_anonymity.k", "verdict": "pass"}) == ""
    assert advice({"figure": "k_anonymity.k", "verdict": "fail"}) == \
        BY_NAME["k_anonymity"].advice
    assert advice({"figure": "alc.diagnosis.alc", "verdict": "review"}) == BY_NAME["alc"].advice
    assert advice({"figure": "sdc.global_risk", "verdict": "insufficient"}) == \
        INSUFFICIENT_ADVICE
    checks = [{"figure": "k_anonymity.k", "threshold": ">= 3", "min": 3.0, "max": None},
              {"figure": "reid.pRb", "threshold": "<= 0.34, review up to 0.5", "min": None,
               "max": 0.34}]
    assert check_threshold(checks, "k_anonymity.k") == 3.0
    assert check_threshold(checks, "reid.pRb") == 0.34
    assert check_threshold(checks, "sdc.global_risk") is None


def _attack(secret: str, alc: float | None, n: int) -> dict:
    row = {"precision": 0.6, "recall": 0.1, "prc": 0.5}
    return {"secret": secret, "known": ["a"], "alc": alc, "band": "safe", "n_attacks": n,
            "attack": row, "base": row, "attack_table": [row], "base_table": [row],
            "parameters": {"r_min": 1e-4}}


def test_alc_curves_show_the_highest_alcs_first_and_count_the_rest():
    attacks = [_attack(f"s{i}", alc, 100) for i, alc in enumerate([0.1, None, 0.7, -0.3])]
    view = alc_view({"alc": {"status": "ok", "details": {"attacks": attacks, "summary": {}}}},
                    max_curves=2)
    ids = [re.search(r'data-plot="([^"]+)"', str(c)).group(1) for c in view["curves"]]
    assert ids == ["alc-pr-3", "alc-pr-1"]
    assert view["n_curves_left_out"] == 2 and len(view["attacks"]) == 4


def _decision(**extra) -> dict:
    d = {"release_id": "r", "flow_run_id": "x", "verdict": "APPROVED", "checks": [],
         "reasons": [], "inputs": [], "versions": {}, "timings": {}, "seed": 1,
         "roles": {"quasi_identifiers": ["a"], "sensitive": ["s"]}, "config": {}}
    d.update(extra)
    return d


def test_unknown_report_detail_is_refused():
    with pytest.raises(ConfigError, match="report detail"):
        render_report(_decision(), [], None, detail="everything")


def test_examples_rank_records_and_hide_sensitive_and_direct_identifiers():
    df = pd.DataFrame({"a": ["x", "x", "y", "z", "z", "z"], "id": list("ABCDEF"),
                       "s": ["p", "q", "r", "p", "q", "r"]})
    table = encode_table(df, Roles(("a",), sensitive=("s",), direct_identifiers=("id",)))
    inputs = MeasureInputs(released=table)
    results = {"reid": run_measure("reid", inputs, {})}
    ex = example_records(table, results, n=3)
    assert ex["ranked_by"] == "reid.prosecutor_risk" and ex["columns"] == ["a"]
    assert [r["row"] for r in ex["rows"]] == [2, 0, 1]
    assert [r["risk"] for r in ex["rows"]] == pytest.approx([1.0, 0.5, 0.5])
    assert [r["values"] for r in ex["rows"]] == [["y"], ["x"], ["x"]]
    assert example_records(table, {}, n=3) is None


def test_measures_tick_progress_under_their_own_name():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({f"k{j}": rng.integers(0, 4, 300).astype(str) for j in range(5)})
    table = encode_table(df, Roles(tuple(df.columns)))
    seen: list[tuple[str, str, int, int | None]] = []
    with progress.listen(lambda *a: seen.append(a)):
        run_measure("suda", MeasureInputs(released=table), {})
    assert seen and {s[0] for s in seen} == {"suda"}
    assert [s[2] for s in seen] == list(range(5)) and {s[3] for s in seen} == {5}
    seen.clear()
    run_measure("suda", MeasureInputs(released=table), {})  # nobody listens: nothing recorded
    assert seen == []


def test_a_step_done_in_threads_spans_its_first_start_to_its_last_end():
    from concurrent.futures import ThreadPoolExecutor
    from contextvars import copy_context

    spans = progress.WorkSpans()
    spans.add("measures", 2.0, 3.0)
    spans.add("measures", 1.5, 2.5)
    spans.add("load", 0.0, 1.0)
    assert spans.pop("measures") == pytest.approx(1.5)
    assert spans.pop("measures") is None  # popped: forgotten

    def work() -> None:
        with progress.working("encode"):
            sum(range(10_000))

    # threads that copy the context (as Prefect's task runner does) record into the run's
    with progress.recording(spans), ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(copy_context().run, work) for _ in range(3)]:
            f.result()
    took = spans.pop("encode")
    assert took is not None and 0 < took < 5
    with progress.working("encode"):  # outside a recording run: nothing kept
        pass
    assert spans.pop("encode") is None and spans.pop("load") == pytest.approx(1.0)


def test_a_template_cache_that_cannot_be_written_or_read_costs_only_the_compilation(tmp_path):
    """The compiled-template cache is a saving, never a failure: a folder that does not exist
    (or cannot be written) and an entry that is not Jinja's are each a cache miss."""
    from jinja2 import DictLoader, Environment

    from riskcore.report import _QuietCache

    missing = Environment(loader=DictLoader({"t": "{{ x }}"}),
                          bytecode_cache=_QuietCache(str(tmp_path / "missing")))
    assert missing.get_template("t").render(x=1) == "1"
    cache = _QuietCache(str(tmp_path))
    Environment(loader=DictLoader({"t": "{{ x }}"}), bytecode_cache=cache).get_template("t")
    for entry in tmp_path.glob("__jinja2_*.cache"):
        entry.write_bytes(b"not a cache entry")
    again = Environment(loader=DictLoader({"t": "{{ x }}!"}), bytecode_cache=cache)
    assert again.get_template("t").render(x=2) == "2!"
