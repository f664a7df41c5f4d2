"""What the report shows for each measure family, computed from the run's JSON outputs.

Plots read counts, rates and column names only. Distributions come from the per-record table
(``per_record.parquet``) when it is given, else from the histograms stored in ``measures.json``;
a plot whose data is absent is left out and the section says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from markupsafe import Markup

from ..stats import RISK_BAND_EDGES, risk_band_counts
from . import plots

RISK_LABELS = tuple(f"≤{e:g}" for e in RISK_BAND_EDGES)
#: class-size buckets of the class-size histogram (lower bounds; the last is open)
SIZE_BUCKETS = (1, 2, 3, 4, 5, 10, 20, 50, 100)

def sections() -> list[tuple[str, str, tuple[str, ...]]]:
    """The report's sections (key, title, families in it), from the registry."""
    from ..measures import FAMILIES, SECTIONS

    return [(key, title, tuple(f.name for f in FAMILIES if f.section == key))
            for key, title in SECTIONS]


INSUFFICIENT_ADVICE = ("The figure could not be computed or is not significant yet (see the "
                       "measure's reason): the gate never passes what it could not measure. "
                       "Add the missing input or parameter, or run more attacks.")


def family(figure: str) -> str:
    return figure.split(".", 1)[0]


def advice(check: Mapping[str, Any]) -> str:
    """What to do about a check that did not pass ('' for a pass)."""
    verdict = check.get("verdict")
    if verdict == "pass":
        return ""
    if verdict in ("insufficient", "error"):
        return INSUFFICIENT_ADVICE
    from ..measures import BY_NAME

    fam = BY_NAME.get(family(str(check.get("figure", ""))))
    return fam.advice if fam else ""


def check_threshold(checks: Sequence[Mapping[str, Any]], figure: str) -> float | None:
    """The lower bound (else the upper bound) of the first check on ``figure``."""
    for c in checks:
        if c.get("figure") == figure:
            bound = c.get("min") if c.get("min") is not None else c.get("max")
            return None if bound is None else float(bound)
    return None


def _column(per_record: pd.DataFrame | None, name: str) -> np.ndarray | None:
    if per_record is None or name not in per_record.columns:
        return None
    arr = per_record[name].to_numpy(dtype=float, na_value=np.nan)
    return arr[np.isfinite(arr)]


def _risk_plot(plot_id: str, title: str, counts: Sequence[int], highlight_from: float | None,
               caption: str) -> Markup:
    lows = (0.0,) + RISK_BAND_EDGES[:-1]
    hl = [highlight_from is not None and lo >= highlight_from - 1e-12 for lo in lows]
    return plots.bar_chart(plot_id, title, RISK_LABELS, counts, xlabel="risk band",
                           ylabel="records", highlight=hl, caption=caption)


def size_buckets(hist: Sequence[Sequence[int]]) -> tuple[list[str], list[int], list[int]]:
    """(labels, records, classes) per class-size bucket from [[size, classes], ...]."""
    sizes = np.array([h[0] for h in hist], dtype=np.int64)
    classes = np.array([h[1] for h in hist], dtype=np.int64)
    lows = np.asarray(SIZE_BUCKETS)
    idx = np.searchsorted(lows, sizes, side="right") - 1
    recs = np.bincount(idx, weights=sizes * classes, minlength=lows.size).astype(int)
    cls = np.bincount(idx, weights=classes, minlength=lows.size).astype(int)
    labels = [str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"
              for lo, hi in zip(SIZE_BUCKETS, SIZE_BUCKETS[1:])] + [f"{SIZE_BUCKETS[-1]}+"]
    return labels, recs.tolist(), cls.tolist()


def reid_view(by_name: Mapping[str, Mapping[str, Any]], checks: Sequence[Mapping[str, Any]],
              per_record: pd.DataFrame | None) -> dict[str, Any]:
    """Class-size histogram and prosecutor/journalist risk distributions."""
    out: dict[str, Any] = {"plots": []}
    k = by_name.get("k_anonymity")
    reid = by_name.get("reid")
    threshold = None
    if reid and reid.get("parameters"):
        threshold = reid["parameters"].get("threshold")
    k_min = check_threshold(checks, "k_anonymity.k")
    limit = k_min if k_min is not None else (math.ceil(1 / threshold) if threshold else None)
    hist = (k or {}).get("details", {}).get("class_size_histogram")
    if hist:
        out["n_records"] = int(sum(s * c for s, c in hist))
    elif per_record is not None:
        out["n_records"] = len(per_record)
    if hist:
        labels, recs, cls = size_buckets(hist)
        hl = [limit is not None and lo < limit for lo in SIZE_BUCKETS]
        out["plots"].append(plots.bar_chart(
            "class-sizes", "Records by equivalence-class size", labels, recs,
            xlabel="class size (records sharing the quasi-identifier values)",
            ylabel="records", highlight=hl,
            caption="Records by the size of their equivalence class"
                    + (f"; red: classes smaller than {limit:g}" if limit else "") + "."))
        out["size_table"] = list(zip(labels, cls, recs))
    if reid:
        pros = _column(per_record, "reid.prosecutor_risk")
        if pros is None and hist:  # prosecutor risk is 1/f: it follows from the class sizes
            sizes = np.array([h[0] for h in hist], dtype=float)
            counts = np.array([h[1] for h in hist], dtype=float) * sizes
            pros = np.repeat(1.0 / sizes, counts.astype(np.int64))
        if pros is not None:
            out["plots"].append(_risk_plot(
                "reid-prosecutor-risk", "Prosecutor risk per record", risk_band_counts(pros),
                threshold, "Records by prosecutor risk (1/f)"
                + (f"; red: above the threshold T = {threshold:g}." if threshold else ".")))
        jour = _column(per_record, "reid.journalist_risk")
        if jour is not None:
            out["plots"].append(_risk_plot(
                "reid-journalist-risk", "Journalist risk per record", risk_band_counts(jour),
                threshold, "Records by journalist risk (1/F, F from the weights or the "
                           "identification table)."))
    return out


def sdc_view(by_name: Mapping[str, Mapping[str, Any]], per_record: pd.DataFrame | None,
             hidden: set[str]) -> dict[str, Any]:
    """Individual and household risk distributions, SUDA scores and contributions, l per
    sensitive attribute."""
    out: dict[str, Any] = {"plots": [], "notes": []}
    sdc = by_name.get("sdc")
    if sdc and sdc.get("status") == "ok":
        thr = sdc["figures"].get("threshold")
        risk = _column(per_record, "sdc.risk")
        counts = risk_band_counts(risk) if risk is not None else [
            c for _, c in sdc.get("details", {}).get("risk_histogram", [])]
        if counts:
            out["plots"].append(_risk_plot(
                "sdc-individual-risk", "Individual risk (sdcMicro)", counts, thr,
                "Records by individual risk" + (f"; red: at or above sdcMicro's threshold "
                                                f"{thr:.3g}." if thr else ".")))
    population = by_name.get("population")
    model_risk = _column(per_record, "population.loglinear_risk")
    if population and population.get("status") == "ok" and model_risk is not None:
        ll = population.get("details", {}).get("loglinear", {})
        pairs = ll.get("model", {}).get("interactions", [])
        model = ("main effects and " + ", ".join(f"{a} x {b}" for a, b in pairs)
                 if pairs else "main effects only")
        out["plots"].append(_risk_plot(
            "population-loglinear-risk", "Model risk E[1/F] (log-linear)",
            risk_band_counts(model_risk), None,
            "Records by the log-linear model's risk E[1/F | f], the chance that a match on the "
            f"record's keys is the right person, from the population model ({model}), beside "
            "the weight-based individual risk."))
    if sdc and sdc.get("status") == "ok":
        hier = _column(per_record, "sdc.hier_risk")
        if hier is not None:
            out["plots"].append(_risk_plot(
                "sdc-household-risk", "Household risk (sdcMicro)", risk_band_counts(hier), None,
                "Records by household risk: the chance that the household is re-identified "
                "through any of its members."))
    suda = by_name.get("suda")
    if suda and suda.get("status") == "ok" and not suda["figures"].get("records_with_msu"):
        out["notes"].append("SUDA2 found no minimal sample unique: no record can be singled "
                            "out by a combination of its key values, so there is nothing to "
                            "plot.")
    elif suda and suda.get("status") == "ok":
        contrib = suda.get("details", {}).get("attribute_contributions", {})
        if contrib:
            items = sorted(contrib.items(), key=lambda kv: -kv[1])
            out["plots"].append(plots.hbar_chart(
                "suda-contributions", "SUDA attribute contributions",
                [k for k, _ in items], [v for _, v in items],
                xlabel="contribution to the SUDA scores (%)",
                caption="Which variables drive uniqueness: each variable's share of the SUDA "
                        "scores (generalize the largest first)."))
        dis = _column(per_record, "suda.dis_score")
        if dis is not None:
            nz = dis[dis > 0]
            out["plots"].append(_risk_plot(
                "suda-dis", "DIS-SUDA score per record (records with a score > 0)",
                risk_band_counts(nz), None,
                f"{nz.size:,} of {dis.size:,} records have a minimal sample unique; their "
                "DIS-SUDA scores (probability of a correct match)."))
        levels = [lv for lv in suda.get("details", {}).get("attribute_level_contributions", [])
                  if str(lv.get("variable", lv.get("attribute", ""))) not in hidden]
        out["suda_levels"] = sorted(levels, key=lambda lv: -float(lv["contribution"]))[:15]
        out["msu_by_size"] = suda.get("details", {}).get("msu_count_by_size", {})
    ldiv = by_name.get("l_diversity")
    if ldiv and ldiv.get("status") == "ok":
        for s in ldiv.get("parameters", {}).get("sensitive", []):
            ls = _column(per_record, f"l_diversity.{s}.distinct_l")
            if ls is None:
                continue
            top = 10
            vals = np.minimum(ls.astype(np.int64), top)
            per_l = np.bincount(vals, minlength=top + 1)[1:]
            labels = [str(i) for i in range(1, top)] + [f"{top}+"]
            out["plots"].append(plots.bar_chart(
                f"l-diversity-{s}", f"Distinct l-diversity of '{s}' per record", labels,
                per_l.tolist(), xlabel="distinct sensitive values in the record's class",
                ylabel="records", highlight=[i == 0 for i in range(top)],
                caption=f"Records by the number of distinct '{s}' values in their class; red: "
                        "l = 1 (the class reveals the value)."))
    return out


def _whiskers(f: Mapping[str, Any], prefix: str) -> list[plots.Whisker]:
    ws = []
    for series in ("attack", "baseline", "control"):
        rate, err = f.get(f"{prefix}{series}_rate"), f.get(f"{prefix}{series}_error")
        if rate is not None and err is not None:
            ws.append(plots.Whisker(series, rate, max(rate - err, 0.0), min(rate + err, 1.0)))
    risk = f.get(f"{prefix}risk")
    lo, hi = f.get(f"{prefix}risk_ci_low"), f.get(f"{prefix}risk_ci_high")
    if risk is not None:
        ws.append(plots.Whisker("risk", risk, lo if lo is not None else risk,
                                hi if hi is not None else risk))
    return ws


def alignment_view(by_name: Mapping[str, Mapping[str, Any]], names: Sequence[str]
                   ) -> list[dict[str, Any]]:
    """Per column the families in ``names`` compared: how the original was put into the
    release's domain and the share of its values that could be compared (the domain check's
    figure; riskcore.alignment), one row per column."""
    rows: dict[str, dict[str, Any]] = {}
    for name in names:
        for col in (by_name.get(name) or {}).get("details", {}).get("alignment", []):
            row = rows.setdefault(col["column"], {**col, "measures": []})
            row["measures"].append(name)
    return list(rows.values())


def attacks_view(by_name: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Rates of the three attacks with their intervals: one table row and one plot row each."""
    rows, table = [], []
    for name in ("singling_out", "linkability", "inference"):
        m = by_name.get(name)
        if not m or m.get("status") != "ok":
            continue
        f = m["figures"]
        prefixes = [("", name.replace("_", " "))]
        if name == "inference":
            secrets = m.get("parameters", {}).get("secrets", [])
            prefixes = [(f"{s}.", f"inference: {s}") for s in secrets]
        for prefix, label in prefixes:
            ws = _whiskers(f, prefix)
            if ws:
                rows.append((label, ws))
            table.append({"attack": label, **{k: f.get(f"{prefix}{k}") for k in (
                "risk", "risk_ci_low", "risk_ci_high", "attack_rate", "baseline_rate",
                "control_rate", "n_attacks", "n_attacks_achieved")}})
    out: dict[str, Any] = {"plots": [], "table": table, "alignment": alignment_view(
        by_name, ("singling_out", "linkability", "inference"))}
    if rows:
        out["plots"].append(plots.dot_whisker(
            "attack-rates", "Attack success rates", rows, xlabel="success rate / risk",
            caption="Success rate of the attack on the release, of the baseline (random "
                    "guesses) and of the attack on control records, with 95 % intervals; "
                    "the square is the privacy risk (attack over control)."))
    return out


def membership_view(by_name: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Per attack its AUC (interval), TPR at 1 % and 0.1 % FPR and advantage; the ROC curves
    on a log FPR axis; how many members drive the low-FPR figure (a count, never values)."""
    out: dict[str, Any] = {"plots": [], "table": [], "strongest": None, "exposed": None,
                           "epsilon": None}
    m = by_name.get("membership")
    if not m or m.get("status") != "ok":
        return out
    f, details = m["figures"], m.get("details", {})
    curves = details.get("roc") or {}
    for name in details.get("attacks", []):
        out["table"].append({"attack": name.replace("_qi", " (quasi-identifiers only)"),
                             **{k: f.get(f"{name}.{k}") for k in (
                                 "auc", "auc_low", "auc_high", "tpr_at_fpr_1pct",
                                 "tpr_at_fpr_01pct", "advantage")}})
    out["strongest"] = details.get("strongest")
    out["exposed"] = (details.get("counts") or {}).get("members_above_1pct_threshold")
    audit = details.get("epsilon") or {}
    low = f.get("epsilon_low")
    lines: list[tuple[str, float, float]] = []
    if isinstance(low, (int, float)) and low > 0:
        lines.append((f"e^{low:.2f}", float(low), float(audit.get("delta") or 0.0)))
    claimed = audit.get("claimed")
    if isinstance(claimed, (int, float)):
        lines.append((f"claimed e^{claimed:g}", float(claimed),
                      float(audit.get("delta") or 0.0)))
    if isinstance(low, (int, float)):
        out["epsilon"] = {"low": low, "point": f.get("epsilon_point"), "claimed": claimed,
                          "excess": f.get("epsilon_excess"), **audit}
    point = ((float(audit["fpr"]), float(audit["tpr"])) if "fpr" in audit and "tpr" in audit
             else None)
    series = [(n, c.get("fpr", []), c.get("tpr", [])) for n, c in curves.items()]
    if series:
        out["plots"].append(plots.roc_curves(
            "membership-roc", "Membership inference: ROC per attack", series,
            epsilon_lines=lines, point=point,
            caption=f"{f.get('n_members')} members (original rows) and as many non-members "
                    "(control rows), scored by each attack; the dashed line is guessing. "
                    "The left part (false positives below 1 %) is where a member is exposed "
                    "with confidence. Dotted: TPR = e^epsilon FPR + delta, the most a "
                    "differentially private release at that epsilon allows; the circle is the "
                    "test the epsilon bound was counted on."))
    return out


def composition_view(by_name: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Per earlier release of the ``composition`` family: which run, whether it was used (or
    why not) and, per sensitive attribute, the share of people disclosed with certainty by
    the pair, by the earlier release alone and by this one alone; a bar of what each earlier
    release adds (the worst attribute's share: alone, with each, with all)."""
    out: dict[str, Any] = {"rows": [], "plots": []}
    m = by_name.get("composition")
    if not m:
        return out
    details = m.get("details") or {}
    per = details.get("per_release") or {}
    alone = {k.split(".")[0]: v for k, v in (m.get("figures") or {}).items()
             if k.endswith(".pvp_1_alone")}
    rows = []
    for e in details.get("earlier") or []:
        name = str(e.get("name") or e.get("decision") or "")
        found = per.get(name) or {}
        attrs = [{"attribute": a, "pvp_1": v.get("pvp_1"),
                  "earlier_alone": v.get("pvp_1_earlier_alone"), "this_alone": alone.get(a),
                  "auc": v.get("differencing_auc")}
                 for a, v in (found.items() if isinstance(found, Mapping) else [])
                 if isinstance(v, Mapping)]
        if "differencing_auc" in found:
            attrs = [{"attribute": "(membership)", "auc": found.get("differencing_auc")}]
        rows.append({"release": name, "verdict": e.get("verdict"), "used": e.get("used"),
                     "reason": e.get("reason"), "signature": e.get("signature"),
                     "attributes": attrs})
    out["rows"] = rows
    f = m.get("figures") or {}
    if m.get("status") == "ok" and isinstance(f.get("pvp_1"), (int, float)):
        labels, values = ["this release alone"], [float(f.get("pvp_1_alone") or 0.0)]
        for r in rows:
            pair = [float(a["pvp_1"]) for a in r["attributes"]
                    if isinstance(a.get("pvp_1"), (int, float))]
            if pair:
                release, _, run = str(r["release"]).partition("/")
                labels.append(f"with {release}" + (f" ({run[:8]})" if run else ""))
                values.append(max(pair))
        if len(labels) > 2:
            labels.append("with all of them")
            values.append(float(f["pvp_1"]))
        out["plots"].append(plots.hbar_chart(
            "composition-adds", "Disclosed with certainty, with the earlier releases",
            labels, values, xlabel="share of the people found in the releases",
            caption="The share of people whose sensitive value (the worst attribute) an "
                    "adversary knowing their quasi-identifiers learns for certain: from this "
                    "release alone, with each earlier release, and with all of them."))
    return out


def copies_view(by_name: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The DCR histograms (release to original, release to control, on shared bins) and the
    copy counts of the ``copies`` family."""
    out: dict[str, Any] = {"plots": [], "counts": None}
    m = by_name.get("copies")
    if not m or m.get("status") != "ok":
        return out
    details = m.get("details", {})
    hist = details.get("dcr_histogram") or {}
    edges = hist.get("edges") or []
    labels = [f"{edges[i]:.2g}" for i in range(len(edges) - 1)]
    near = m.get("parameters", {}).get("near", 0.0)
    for key, title, caption in (
            ("original", "Distance to the closest original row (DCR)",
             "Compared released rows by their distance to the closest original row (0: a "
             f"copy; red: within the near-copy distance {near:g})."),
            ("control", "Distance to the closest control row",
             "The same released rows by their distance to the closest control row: what "
             "closeness to people the release was not made from looks like.")):
        counts = hist.get(key)
        if counts:
            out["plots"].append(plots.bar_chart(
                f"copies-dcr-{key}", title, labels, counts, xlabel="distance (bin start)",
                ylabel="released rows", caption=caption,
                highlight=[edges[i] <= near for i in range(len(counts))]))
    out["counts"] = details.get("counts")
    return out


def alc_view(by_name: Mapping[str, Mapping[str, Any]], max_curves: int = 12) -> dict[str, Any]:
    """The ALC table, the attack-vs-base PRC scatter, and precision-recall per attack."""
    m = by_name.get("alc")
    out: dict[str, Any] = {"plots": [], "curves": [], "attacks": [], "summary": None,
                           "alignment": alignment_view(by_name, ("alc",))}
    if not m or m.get("status") not in ("ok", "insufficient_evidence"):
        return out
    details = m.get("details", {})
    attacks = details.get("attacks", [])
    out["summary"] = details.get("summary")
    points = []
    for i, a in enumerate(attacks):
        label = f"#{i + 1} {a['secret']}"
        out["attacks"].append({"n": i + 1, **a})
        if a.get("attack") and a.get("base"):
            points.append((label, a["base"]["prc"], a["attack"]["prc"], a.get("band", "")))
    if points:
        out["plots"].append(plots.alc_scatter(
            "alc-scatter", "Attack PRC against base PRC", points,
            caption="Each dot is one attack (secret and known columns). Above the dashed 0.5 "
                    "line the release is at risk for that secret, above 0.75 serious."))
    ranked = sorted(range(len(attacks)),
                    key=lambda i: -(attacks[i]["alc"] if attacks[i].get("alc") is not None
                                    else -1e9))
    r_min = (attacks[0].get("parameters", {}) if attacks else {}).get("r_min", 1e-4)
    for i in ranked[:max_curves]:
        a = attacks[i]
        series = [(name, [row["recall"] for row in a.get(f"{key}_table") or []],
                   [row["precision"] for row in a.get(f"{key}_table") or []])
                  for name, key in (("attack", "attack"), ("baseline", "base"))]
        if not any(s[1] for s in series):
            continue
        alc = "n/a" if a.get("alc") is None else f"{a['alc']:.3f}"
        out["curves"].append(plots.pr_curves(
            f"alc-pr-{i + 1}", f"Precision against recall, attack #{i + 1} ({a['secret']})",
            series, r_min=r_min,
            caption=f"#{i + 1}: secret {a['secret']}, ALC {alc} ({a.get('band', '')})"))
    out["n_curves_left_out"] = max(len(attacks) - max_curves, 0)
    return out


def utility_view(by_name: Mapping[str, Mapping[str, Any]], checks: Sequence[Mapping[str, Any]],
                 history: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The risk-utility map (this run, the control, this release's earlier runs), the shapes
    per column beside the control's, the worst pairs and the information loss."""
    from ..measures.utility import risk_axis

    out: dict[str, Any] = {"plots": [], "columns": [], "pairs": [], "summary": [],
                           "loss": None, "map_note": None}
    u = by_name.get("utility")
    if not u or u.get("status") != "ok":
        return out
    f, details = u["figures"], u.get("details", {})
    for key, label in (("column_shapes", "column shapes"),
                       ("column_pair_trends", "column pair trends"),
                       ("pmse_ratio", "pMSE ratio (1: like a sample)")):
        out["summary"].append({"figure": label, "release": f.get(key),
                               "control": f.get(f"{key}_control")})
    control_shapes = details.get("shapes_control") or {}
    for c in details.get("columns", []):
        out["columns"].append({"column": c, "release": f.get(f"shape.{c}"),
                               "control": control_shapes.get(c),
                               "suppressed": f.get(f"suppressed.{c}"),
                               "granularity": f.get(f"granularity.{c}")})
    out["pairs"] = [{"pair": " × ".join(p["columns"]), "metric": p["metric"],
                     "score": p["score"], "original": p.get("original"),
                     "release": p.get("release")} for p in details.get("worst_pairs", [])[:10]]
    loss = details.get("information_loss") or {}
    out["loss"] = ({"not_applicable": loss["not_applicable"]} if "not_applicable" in loss else
                   {"il1s": f.get("il1s"), "suppressed_share": f.get("suppressed_share"),
                    "generalization_intensity": f.get("generalization_intensity"),
                    "left_out": loss.get("hierarchy_columns_left_out") or []})
    shapes_now = [s for s in details.get("columns", []) if f.get(f"shape.{s}") is not None]
    if shapes_now:
        out["plots"].append(plots.hbar_chart(
            "utility-shapes", "Column shapes (1: the original's distribution)",
            shapes_now, [float(f[f"shape.{s}"]) for s in shapes_now],
            xlabel="1 - KS (numbers) or 1 - total variation (categories)"))
    chosen = (u.get("parameters") or {}).get("risk_figure")
    now = {name: m.get("figures") or {} for name, m in by_name.items()}
    axis = risk_axis(now, chosen)
    if axis is None or f.get("column_shapes") is None:
        out["map_note"] = ("No risk-utility map: the run has no risk figure for its vertical "
                           "axis (run an attack, or name one in measures.utility.risk_figure).")
        return out
    risk_name, risk_now = axis
    points = [plots.RUPoint("this run", float(f["column_shapes"]), risk_now, "release")]
    if f.get("column_shapes_control") is not None:
        # the attacks measure risk as the excess over the control: a fresh sample's is 0
        points.append(plots.RUPoint("control", float(f["column_shapes_control"]), 0.0,
                                    "control"))
    shown = 0
    for run in history or []:
        past = risk_axis(run.get("figures") or {}, risk_name)
        util = (run.get("figures") or {}).get("utility", {}).get("column_shapes")
        if past is None or not isinstance(util, (int, float)):
            continue
        points.append(plots.RUPoint(f"{run.get('run_id')} ({run.get('verdict')}, "
                                    f"{run.get('finished_at')})", float(util), past[1],
                                    "earlier"))
        shown += 1
    out["plots"].insert(0, plots.ru_map(
        "utility-ru-map", "Risk-utility map", points, risk_label=risk_name,
        utility_label="utility: column shapes",
        risk_max=_upper(checks, risk_name), utility_min=_lower(checks, "utility.column_shapes"),
        caption=(f"Duncan et al.'s R-U map: this run (blue), the control as the yardstick of "
                 f"a fresh sample (green square), and {shown} earlier run(s) of this release "
                 f"(grey). Risk: {risk_name}; the policy's bounds are dashed. Bottom right is "
                 "safe and useful.")))
    return out


def _upper(checks: Sequence[Mapping[str, Any]], figure: str) -> float | None:
    for c in checks:
        if c.get("figure") == figure and c.get("max") is not None:
            return float(c["max"])
    return None


def _lower(checks: Sequence[Mapping[str, Any]], figure: str) -> float | None:
    for c in checks:
        if c.get("figure") == figure and c.get("min") is not None:
            return float(c["min"])
    return None
