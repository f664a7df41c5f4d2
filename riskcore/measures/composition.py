"""Composition: a new release judged together with the earlier releases of the same data.

Custodians publish the same population again and again (every quarter, to several partners,
generalized one way and another). Each release can pass alone while the pair discloses: an
adversary who knows a person's quasi-identifiers finds the person's class in each release and
intersects the sensitive values seen there (the composition attack of Ganta,
Kasiviswanathan & Smith, KDD 2008); m-invariance (Xiao & Tao, SIGMOD 2007) is the defence for
re-publication. The earlier releases are the gate's own earlier decisions
(:mod:`riskcore.gate.lineage` reads them: their config, their released table, its SHA-256
checked, their signature verified when a public key is given).

**Releases that keep the original's rows** (generalized, suppressed). Every original record is
mapped into each release's domain with that release's own declared generalization (the
alignment the attacks use, :func:`riskcore.alignment.align_tables`) and found there: its
*class* is every released row that agrees with it on every quasi-identifier the row shows (a
suppressed cell, a token or left empty, agrees with anything). Its candidate multiset of a
sensitive attribute in a release is the values of that class. For a record present in the
new release and in at least one earlier one, the composed candidates are the intersection
over every release it is in (a value's count: its smallest count there). Per sensitive
attribute, worst over them:

* ``pvp_1``: the share of those records whose intersection holds exactly one value: disclosed
  with certainty (Ganta's PVP at 100 %);
* ``pvp_c``: the share whose most frequent composed value holds at least ``confidence`` of the
  composed multiset (Ganta's PVP_c, default c = 0.9);
* ``composed_l_min``: the smallest composed set (distinct values), over records whose sets do
  not contradict each other (an empty intersection discloses nothing);
* ``composed_k_min``: the fewest original records that fall in the same class of every
  release as a person: how many people an adversary cannot tell apart across them;
* ``m_invariance_violations``: the share of those records whose class's set of sensitive
  values differs between the new release and an earlier one (m-invariance requires it fixed);
* the same of the new release alone (``pvp_1_alone``, ``pvp_c_alone``, ``l_min_alone``,
  ``k_min_alone``), so that what the earlier releases add shows;
* the **difference** of two releases in the same domain (every quasi-identifier's labels the
  same in both: the same generalization) that share most of their rows (at least 90 % of the
  smaller one's, as a re-publication of grown data does): the records one release holds and
  the other lacks
  are what a person added or removed between them became, and an adversary who knows that
  someone was added finds them among those few rows. Per sensitive attribute,
  ``difference_records`` (records added plus removed), ``difference_pvp_1`` (the share of
  them whose class among the added, or the removed, records holds one sensitive value: the
  person's value is certain) and ``difference_l_min`` (the fewest distinct values in such a
  class). ``pvp_1`` is the worse of the intersection's and the difference's: a release that
  adds one person to an approved one has pvp_1 1 whatever its classes are.

**Releases of new rows** (synthetic data). The intersection has no meaning; what composes is
membership: a record added to the original between two releases is told apart by comparing
the releases. ``differencing_auc``: the records of the new original that the earlier
original lacks (members of the new release only) against control rows (members of
neither), scored s(x) = d(x, R_earlier) - d(x, R_new), d the membership family's distance to
the closest released row (numbers as quantiles): 0.5 when the new release says nothing of
who was added. It needs both originals (the earlier decision's, re-read, its SHA-256 checked)
and a control; otherwise it is insufficient evidence, with the reason.

Per record: ``composition_sets.parquet`` holds each original row's smallest composed set size
(row numbers only). An earlier release that cannot be read, whose file changed, or whose
signature does not verify is insufficient evidence with its reason, never skipped in silence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from ..equivalence import group_rows
from ..errors import ConfigError
from ..results import MeasureResult, Status
from ..roles import Roles
from .family import MeasureFamily, MeasureInputs, Params
from .releases import Lineage, ReleaseTables

DEFAULT_MAX_RELEASES = 8
DEFAULT_CONFIDENCE = 0.9
#: per-record output: original row and its smallest composed set size
RECORDS = "composition_sets"
FIGURES = ("pvp_1", "pvp_c", "composed_l_min", "composed_k_min", "m_invariance_violations",
           "pvp_1_alone", "pvp_c_alone", "l_min_alone", "k_min_alone", "difference_records",
           "difference_pvp_1", "difference_l_min", "differencing_auc", "n_earlier")
#: per sensitive attribute, the counts behind the shares (in the details)
COUNTS = ("n_both", "n_disclosed", "n_disclosed_alone")
#: figures where a higher value is safer
SAFER_HIGHER = ("composed_l_min", "composed_k_min", "l_min_alone", "k_min_alone",
                "difference_l_min", "n_earlier")
#: two releases share a domain when every quasi-identifier's labels agree this much (Jaccard)
SAME_DOMAIN = 0.9
#: ... and are a re-publication (a few records added or removed) when they share this share
#: of the smaller one's rows; otherwise (another suppression, another sample) the rows that
#: differ are not people who came or went, and the intersection figures judge them
SHARED_ROWS = 0.9


class CompositionParams(Params):
    """Parameters of ``composition``."""

    earlier: list[str] = Field(default_factory=list, description="URLs of earlier decision.json "
                               "files to compose with")
    lineage: list[str] = Field(default_factory=list, description="release ids whose APPROVED "
                               "runs in the output store are composed with")
    max_releases: int = Field(DEFAULT_MAX_RELEASES, ge=1, le=64,
                              description="earlier releases looked back at, newest first")
    confidence: float = Field(DEFAULT_CONFIDENCE, gt=0, le=1,
                              description="the c of PVP_c")
    kind: Literal["auto", "kept", "new"] = Field(
        "auto", description="kept: releases that keep the original's rows (intersection); "
                            "new: synthetic rows (differencing); auto: by the release's rows")
    public_key: str | None = Field(None, description="riskgate-signing.pub: earlier decisions "
                                   "must verify under it")


# ---------------------------------------------------------------- candidate sets
@dataclass(frozen=True)
class Candidates:
    """Per original record its class in one release (-1: not found there), and per class
    the counts of each sensitive value (value codes shared by every release)."""

    klass: np.ndarray
    table: pd.DataFrame  # columns: klass, value, count
    sizes: np.ndarray  # distinct values per class


def _text(series: pd.Series) -> np.ndarray:
    from ..alignment import text_labels as aligned_text

    return np.asarray(aligned_text(series).astype(object), dtype=object)


def _joint_codes(columns: Sequence[pd.Series], tokens: set[str]
                 ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per column (as text), codes into the distinct values of all of them (-1: missing),
    and where a cell is missing or a suppression token. The work is per distinct value: each
    column's text is a Categorical, whose categories are joined (no pass of Python objects
    over the rows)."""
    from ..alignment import text_labels as aligned_text
    from ..data import distinct

    parts = [distinct(aligned_text(c)) for c in columns]
    union = pd.Index(pd.unique(np.concatenate(
        [np.asarray(u, dtype=object) for _, u in parts])), dtype=object)
    codes, wild = [], []
    for raw, uniques in parts:
        to_union = np.append(union.get_indexer(pd.Index(np.asarray(uniques, dtype=object))),
                             -1).astype(np.int64)
        is_token = np.append(np.isin(np.asarray(uniques, dtype=object), list(tokens)), True)
        raw = np.asarray(raw, dtype=np.int64)  # -1 (missing) takes the appended last slot
        codes.append(to_union[raw])
        wild.append(is_token[raw])
    return codes, wild


def candidates(original: pd.DataFrame, release: ReleaseTables, sensitive: str,
               values: pd.Index) -> Candidates:
    """Every original record's class in ``release`` and the class's sensitive values (see the
    module doc): the original mapped into the release's domain with its declarations, then
    matched on the columns each released row shows, one suppression pattern at a time."""
    from ..alignment import align_tables
    from ..data import looks_numeric
    from ..generalization import parse_spec

    qis = [c for c in release.quasi_identifiers if c in original.columns
           and c in release.released.columns]
    specs = {c: parse_spec(s, c) for c, s in release.generalization.items() if c in qis}
    numeric = [c for c in qis if c not in specs and looks_numeric(original[c])
               and looks_numeric(release.released[c])]
    frames = {"original": original[qis], "released": release.released[qis]}
    aligned, _ = align_tables(frames, qis, specs, numeric=numeric, tokens=release.tokens)
    n, m = len(original), len(release.released)
    tokens = set(release.tokens)
    ori_codes = np.empty((n, len(qis)), dtype=np.int64)
    rel_codes = np.empty((m, len(qis)), dtype=np.int64)
    wild = np.zeros((m, len(qis)), dtype=bool)
    for j, c in enumerate(qis):
        # a suppressed cell, written as a token or left empty, agrees with any value
        (ori_codes[:, j], rel_codes[:, j]), (_, wild[:, j]) = _joint_codes(
            [aligned["original"][c], release.released[c]], tokens)
    sens = _text(release.released[sensitive])
    present = pd.notna(sens) & ~np.isin(sens, list(tokens))
    value = np.asarray(values.get_indexer(pd.Index(sens, dtype=object)), dtype=np.int64)
    # one suppression pattern at a time: rows that show the same columns
    pattern, n_patterns = group_rows(wild.astype(np.int64))
    per_pattern = []
    for p in range(n_patterns):
        rows = np.flatnonzero(pattern == p)
        shown = np.flatnonzero(~wild[rows[0]])
        ids, _ = group_rows(np.vstack([rel_codes[rows][:, shown], ori_codes[:, shown]]))
        rel_ids, ori_ids = ids[:rows.size], ids[rows.size:]
        known = np.zeros(int(ids.max(initial=-1)) + 1, dtype=bool)
        known[rel_ids] = True
        per_pattern.append((np.where(known[ori_ids], ori_ids, -1), rel_ids, rows))
    # a record's class: the tuple of its groups over the patterns
    groups = np.column_stack([g for g, _, _ in per_pattern]) if per_pattern else \
        np.full((n, 1), -1)
    found = (groups >= 0).any(axis=1)
    klass = np.full(n, -1, dtype=np.int64)
    if found.any():
        ids, _ = group_rows(groups[found])
        klass[found] = ids
    # each class's values: the sum over patterns of its group's released values
    parts = []
    for p, (_, rel_ids, rows) in enumerate(per_pattern):
        ok = present[rows]
        counts = pd.DataFrame({"group": rel_ids[ok], "value": value[rows][ok]}).value_counts(
            ).rename("count").reset_index()
        link = pd.DataFrame({"klass": klass, "group": groups[:, p]})
        link = link[(link["klass"] >= 0) & (link["group"] >= 0)].drop_duplicates()
        parts.append(link.merge(counts, on="group")[["klass", "value", "count"]])
    table = (pd.concat(parts, ignore_index=True).groupby(["klass", "value"], sort=False)[
        "count"].sum().reset_index() if parts else
        pd.DataFrame({"klass": [], "value": [], "count": []}, dtype=np.int64))
    n_classes = int(klass.max(initial=-1)) + 1
    sizes = np.bincount(table["klass"].to_numpy(np.int64), minlength=max(n_classes, 1))
    # a class with no value to show (every sensitive cell suppressed) is not found
    klass = np.where((klass >= 0) & (sizes[np.maximum(klass, 0)] > 0), klass, -1)
    return Candidates(klass, table, sizes)


def _composed(views: Sequence[Candidates], confidence: float
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per original record, over the views it is found in: the composed set's size (0: the
    sets contradict each other), whether its most frequent composed value holds at least
    ``confidence`` of the composed multiset, and the number of views it is found in."""
    n = len(views[0].klass)
    keys = np.column_stack([v.klass for v in views])
    in_views = (keys >= 0).sum(axis=1)
    combo, _ = group_rows(keys)
    first = np.zeros(int(combo.max(initial=-1)) + 1, dtype=np.int64)
    first[combo[::-1]] = np.arange(n)[::-1]
    combos = keys[first]  # one row per distinct combination of classes
    cur: pd.DataFrame | None = None
    for i, view in enumerate(views):
        cls = combos[:, i]
        has = cls >= 0
        link = pd.DataFrame({"combo": np.flatnonzero(has), "klass": cls[has]})
        vals = link.merge(view.table, on="klass")[["combo", "value", "count"]]
        if cur is None:
            cur = vals
            seen = has
            continue
        # combos not in this view keep their values; those in it keep the common ones
        keep = cur[~has[cur["combo"].to_numpy()]]
        both = cur[has[cur["combo"].to_numpy()]].merge(vals, on=["combo", "value"],
                                                         suffixes=("", "_v"))
        both["count"] = np.minimum(both["count"], both["count_v"])
        cur = pd.concat([keep, both[["combo", "value", "count"]]], ignore_index=True)
        # combos first seen here take this view's values
        fresh = has & ~seen
        if fresh.any():
            cur = pd.concat([cur, vals[fresh[vals["combo"].to_numpy()]]], ignore_index=True)
        seen = seen | has
    assert cur is not None
    n_combos = combos.shape[0]
    size = np.bincount(cur["combo"].to_numpy(np.int64), minlength=n_combos)
    total = np.bincount(cur["combo"].to_numpy(np.int64), weights=cur["count"].to_numpy(float),
                        minlength=n_combos)
    top = cur.groupby("combo")["count"].max().reindex(range(n_combos), fill_value=0).to_numpy()
    confident = (total > 0) & (top >= confidence * np.maximum(total, 1e-12))
    return size[combo], confident[combo], in_views


def _figures(views: Sequence[Candidates], confidence: float) -> dict[str, Any]:
    """The figures of one sensitive attribute: composed over every view, and the first view
    (the new release) alone."""
    size, confident, in_views = _composed(views, confidence)
    new = views[0].klass >= 0
    both = new & (in_views >= 2)
    keys = np.column_stack([np.where(both, v.klass, -1) for v in views])
    together, _ = group_rows(keys)
    group_size = np.bincount(together)[together]
    alone_size = np.where(new, views[0].sizes[np.maximum(views[0].klass, 0)], 0)
    alone_ids = np.where(new, views[0].klass, -1)
    alone_k = np.bincount(np.maximum(alone_ids, 0))[np.maximum(alone_ids, 0)]
    single, alone_conf, _ = _composed(views[:1], confidence)
    violated = np.zeros(len(new), dtype=bool)
    for v in views[1:]:
        in_v = new & (v.klass >= 0)
        pair_size, _, _ = _composed([views[0], v], confidence)
        other = v.sizes[np.maximum(v.klass, 0)]
        violated |= in_v & ~((pair_size == alone_size) & (pair_size == other))
    valid = both & (size > 0)
    return {
        "pvp_1": float(np.mean(size[both] == 1)) if both.any() else 0.0,
        "pvp_c": float(np.mean(confident[both])) if both.any() else 0.0,
        "composed_l_min": int(size[valid].min()) if valid.any() else None,
        "composed_k_min": int(group_size[both].min()) if both.any() else None,
        "m_invariance_violations": float(np.mean(violated[both])) if both.any() else 0.0,
        "pvp_1_alone": float(np.mean(alone_size[new] == 1)) if new.any() else 0.0,
        "pvp_c_alone": float(np.mean(alone_conf[new])) if new.any() else 0.0,
        "l_min_alone": int(alone_size[new].min()) if new.any() else None,
        "k_min_alone": int(alone_k[new].min()) if new.any() else None,
        "n_both": int(both.sum()), "n_disclosed": int(np.sum(both & (size == 1))),
        "n_disclosed_alone": int(np.sum(new & (alone_size == 1))),
        "_size": np.where(both, size, np.where(new, alone_size, -1)),
    }


def same_domain(new: ReleaseTables, earlier: ReleaseTables) -> list[str] | None:
    """The quasi-identifiers two releases both show when they are in the same domain (each
    column's set of labels agrees within :data:`SAME_DOMAIN`), else None."""
    cols = [c for c in new.quasi_identifiers if c in earlier.quasi_identifiers
            and c in new.released.columns and c in earlier.released.columns]
    if not cols:
        return None
    for c in cols:
        a = set(pd.unique(_text(new.released[c])).tolist())
        b = set(pd.unique(_text(earlier.released[c])).tolist())
        if len(a & b) < SAME_DOMAIN * max(len(a | b), 1):
            return None
    return cols


def difference(new: ReleaseTables, earlier: ReleaseTables, sensitive: str
               ) -> dict[str, Any] | None:
    """What the difference of two releases in the same domain discloses of ``sensitive`` (see
    the module doc): None when they are not in the same domain or one lacks the column."""
    cols = same_domain(new, earlier)
    if cols is None or sensitive not in new.released.columns or \
            sensitive not in earlier.released.columns:
        return None
    tokens = set(new.tokens) | set(earlier.tokens)
    both = [_joint_codes([new.released[c], earlier.released[c]], tokens)[0]
            for c in [*cols, sensitive]]
    n_new = len(new.released)
    rows = np.column_stack([np.concatenate(parts) for parts in both])
    ids, u = group_rows(rows)
    count_new = np.bincount(ids[:n_new], minlength=u)
    count_old = np.bincount(ids[n_new:], minlength=u)
    if np.minimum(count_new, count_old).sum() < SHARED_ROWS * min(n_new, ids.size - n_new):
        return None
    first = np.zeros(u, dtype=np.int64)
    first[ids[::-1]] = np.arange(ids.size)[::-1]
    sens_text = _text(pd.concat([new.released[sensitive], earlier.released[sensitive]],
                                ignore_index=True))
    sens_ok = pd.notna(sens_text) & ~np.isin(sens_text, list(tokens))
    records, disclosed, l_min = 0, 0, None
    for delta in (count_new - count_old, count_old - count_new):  # added, then removed
        keep = np.flatnonzero(delta > 0)
        if keep.size == 0:
            continue
        rep = first[keep]
        klass, _ = group_rows(rows[rep][:, :-1])
        frame = pd.DataFrame({"klass": klass, "value": rows[rep][:, -1],
                              "count": delta[keep], "shown": sens_ok[rep]})
        distinct = frame[frame["shown"]].groupby("klass")["value"].nunique()
        per = distinct.reindex(range(int(klass.max()) + 1), fill_value=0).to_numpy()
        certain = (per[klass] == 1) & frame["shown"].to_numpy()
        records += int(frame["count"].sum())
        disclosed += int(frame["count"].to_numpy()[certain].sum())
        shown = per[per > 0]
        if shown.size:
            l_min = int(shown.min()) if l_min is None else min(l_min, int(shown.min()))
    return {"records": records, "disclosed": disclosed, "l_min": l_min}


def compose(lineage: Lineage, confidence: float = DEFAULT_CONFIDENCE
            ) -> tuple[dict[str, Any], dict[str, Any], np.ndarray]:
    """The composition figures of a kept-rows release (see the module doc): top-level figures
    (worst over sensitive attributes), details (per earlier release what it adds with this
    one alone; per sensitive attribute the people found in both and disclosed), per original
    record the smallest composed set size (-1: not found in the new release)."""
    usable = [e for e in lineage.earlier if e.reason is None]
    sensitive = [s for s in lineage.new.sensitive
                 if s in lineage.original.columns and all(s in e.sensitive for e in usable)]
    releases = [lineage.new, *usable]
    figures: dict[str, Any] = {}
    per_release: dict[str, dict[str, Any]] = {e.name: {} for e in usable}
    counts: dict[str, dict[str, int]] = {}
    smallest = np.full(len(lineage.original), np.iinfo(np.int64).max, dtype=np.int64)
    found_any = np.zeros(len(lineage.original), dtype=bool)
    for s in sensitive:
        texts = np.concatenate([_text(r.released[s]) for r in releases])
        values = pd.Index(pd.unique(texts[pd.notna(texts)]), dtype=object)
        views = [candidates(lineage.original, r, s, values) for r in releases]
        f = _figures(views, confidence)
        size = f.pop("_size")
        counts[s] = {k: f.pop(k) for k in COUNTS}
        smallest = np.where(size >= 0, np.minimum(smallest, size), smallest)
        found_any |= size >= 0
        diffs = [d for d in (difference(lineage.new, e, s) for e in usable) if d is not None]
        f["difference_records"] = max((d["records"] for d in diffs), default=None)
        shares = [d["disclosed"] / d["records"] for d in diffs if d["records"]]
        f["difference_pvp_1"] = max(shares, default=0.0 if diffs else None)
        lows = [d["l_min"] for d in diffs if d["l_min"] is not None]
        f["difference_l_min"] = min(lows) if lows else None
        if f["difference_pvp_1"]:
            f["pvp_1"] = max(f["pvp_1"], f["difference_pvp_1"])
        for k, v in f.items():
            figures[f"{s}.{k}"] = v
        for e, view in zip(usable, views[1:]):
            g = _figures([views[0], view], confidence)
            alone = _figures([view], confidence)  # what the earlier release disclosed itself
            per_release[e.name][s] = {**{k: g[k] for k in (
                "pvp_1", "pvp_c", "composed_l_min", "m_invariance_violations", "n_both",
                "n_disclosed")}, "pvp_1_earlier_alone": alone["pvp_1_alone"]}
    worst: dict[str, Any] = {}
    for k in ("pvp_1", "pvp_c", "m_invariance_violations", "pvp_1_alone", "pvp_c_alone",
              "difference_records", "difference_pvp_1"):
        vals = [figures[f"{s}.{k}"] for s in sensitive if figures[f"{s}.{k}"] is not None]
        worst[k] = max(vals) if vals else None
    for k in ("composed_l_min", "composed_k_min", "l_min_alone", "k_min_alone",
              "difference_l_min"):
        vals = [figures[f"{s}.{k}"] for s in sensitive if figures[f"{s}.{k}"] is not None]
        worst[k] = min(vals) if vals else None
    figures.update(worst)
    return figures, {"per_release": per_release, "counts": counts}, \
        np.where(found_any, smallest, -1)


# ---------------------------------------------------------------- new rows: differencing
def differencing(lineage: Lineage, earlier: ReleaseTables, columns: Sequence[str],
                 seed: int) -> tuple[float | None, str | None, dict[str, Any]]:
    """``differencing_auc`` against one earlier release of new rows (see the module doc), or
    None with the reason."""
    from ..data import encode_tables
    from .membership import auc_delong, closest_distance, quantile_columns

    if earlier.original is None:
        return None, "the earlier release's original could not be read to find the records " \
                     "added since", {}
    if lineage.control is None:
        return None, "needs a control table (records in no release) as the non-members", {}
    cols = [c for c in columns if c in lineage.original.columns and c in earlier.original.columns
            and c in earlier.released.columns and c in lineage.new.released.columns
            and c in lineage.control.columns]
    if not cols:
        return None, "no column shared by both releases and both originals", {}
    key = [c for c in cols]
    now = lineage.original[key].astype(str).agg("\x1f".join, axis=1)
    before = set(earlier.original[key].astype(str).agg("\x1f".join, axis=1))
    added = np.flatnonzero(~now.isin(before).to_numpy())
    if added.size == 0:
        return None, "the two originals hold the same records: nothing was added to tell " \
                     "apart", {"added": 0}
    rng = np.random.default_rng(seed)
    m = min(added.size, len(lineage.control), 2000)
    members = lineage.original.iloc[np.sort(rng.choice(added, m, replace=False))][cols]
    non = lineage.control.iloc[np.sort(rng.choice(len(lineage.control), m, replace=False))][cols]
    roles = Roles(quasi_identifiers=tuple(cols))
    enc = encode_tables({"new": lineage.new.released[cols], "old": earlier.released[cols],
                         "members": members, "non": non}, roles)
    from .attacks.gower import prepare

    new, old, mem, non_m = prepare([enc["new"], enc["old"], enc["members"], enc["non"]], cols,
                                   [np.arange(enc[t].n) for t in ("new", "old", "members",
                                                                   "non")])
    new, old, mem, non_m = quantile_columns([new, old, mem, non_m], {})
    score_m = closest_distance(mem, old) - closest_distance(mem, new)
    score_n = closest_distance(non_m, old) - closest_distance(non_m, new)
    auc, low, high = auc_delong(score_m, score_n)
    return auc, None, {"added": int(added.size), "members": int(m), "auc_low": low,
                       "auc_high": high}


def _kind(lineage: Lineage, params: CompositionParams) -> str:
    """kept or new: as configured, else as the gate found it from the data
    (:attr:`Lineage.kind`)."""
    return lineage.kind if params.kind == "auto" else params.kind


# ---------------------------------------------------------------- the family
def _run(inputs: MeasureInputs, params: CompositionParams) -> MeasureResult:
    lineage = inputs.lineage
    if lineage is None:
        return MeasureResult(
            measure="composition", figures={}, status=Status.INSUFFICIENT_EVIDENCE,
            reason="composition compares with earlier releases, which a gate run loads "
                   "(composition.earlier, composition.lineage): none was given to this run")
    compared = [{"name": e.name, "release_id": e.meta.get("release_id"),
                 "run_id": e.meta.get("run_id"),
                 "sha256": e.meta.get("sha256"), "decision": e.meta.get("decision"),
                 "verdict": e.meta.get("verdict"),
                 "signature": e.meta.get("signature"), "used": e.reason is None,
                 "reason": e.reason} for e in lineage.earlier]
    broken = [e for e in lineage.earlier if e.reason is not None]
    details: dict[str, Any] = {"earlier": compared, "kind": _kind(lineage, params),
                               "kind_evidence": list(lineage.kind_evidence),
                               "notes": list(lineage.notes)}
    if broken:
        return MeasureResult(
            measure="composition", figures={}, status=Status.INSUFFICIENT_EVIDENCE,
            reason="; ".join(f"earlier release {e.name}: {e.reason}" for e in broken),
            details=details)
    if not lineage.earlier:  # nothing went out before: the first release of its lineage,
        # measured alone (pvp_1 = 0: nobody is in two releases; the *_alone figures are its own)
        details["notes"].append("no earlier release was published (none configured, or no "
                                "APPROVED run of the lineage): this release is measured alone")
    figures: dict[str, Any] = {k: None for k in FIGURES}
    figures["n_earlier"] = len(lineage.earlier)
    unavailable: dict[str, str] = {}
    records: dict[str, dict[str, np.ndarray]] = {}
    if details["kind"] == "kept":
        try:
            found, more, smallest = compose(lineage, params.confidence)
        except ConfigError as exc:  # a release's tokens or declarations do not fit its data
            return MeasureResult(measure="composition", figures={},
                                 status=Status.INSUFFICIENT_EVIDENCE,
                                 reason=f"the releases cannot be aligned: {exc}",
                                 details=details)
        figures.update(found)
        details.update(more)
        records[RECORDS] = {"row": np.flatnonzero(smallest >= 0).astype(np.int64),
                            "composed_set_size": smallest[smallest >= 0]}
        unavailable["differencing_auc"] = ("the release keeps the original's rows: the "
                                           "intersection figures apply")
    else:
        cols = [*lineage.new.quasi_identifiers, *lineage.new.sensitive]
        aucs, reasons, per = [], [], {}
        for e in lineage.earlier:
            auc, why, info = differencing(lineage, e, cols, inputs.seed)
            per[e.name] = {"differencing_auc": auc, "reason": why, **info}
            if auc is None:
                reasons.append(f"{e.name}: {why}")
            else:
                aucs.append(auc)
        details["per_release"] = per
        figures["differencing_auc"] = max(aucs) if aucs else None
        if not lineage.earlier:
            unavailable["differencing_auc"] = "no earlier release to compare with"
        elif not aucs:
            return MeasureResult(measure="composition", figures={},
                                 status=Status.INSUFFICIENT_EVIDENCE,
                                 reason="; ".join(reasons), details=details)
    for k in _figures_of(params, Roles(quasi_identifiers=lineage.new.quasi_identifiers,
                                       sensitive=lineage.new.sensitive)):
        if figures.get(k) is None and k not in unavailable:
            unavailable[k] = ("a release of new rows: the intersection figures do not apply"
                              if details["kind"] == "new" else "no original record is found "
                              "in the new and an earlier release")
    return MeasureResult(
        measure="composition", figures=figures, parameters=params.model_dump(mode="json"),
        details=details, unavailable=unavailable, records=records)


def _alarm(result: MeasureResult) -> str | None:
    pvp = result.figures.get("pvp_1")
    alone = result.figures.get("pvp_1_alone")
    if isinstance(pvp, (int, float)) and pvp > 0:
        return (f"composition: with the earlier releases, {pvp:.2%} of the people found in "
                "both have their sensitive value disclosed with certainty (the new release "
                f"alone: {float(alone or 0):.2%})")
    return None


def _figures_of(params: CompositionParams, roles: Roles) -> dict[str, bool]:
    out = {k: k not in SAFER_HIGHER for k in FIGURES}
    for s in roles.sensitive:
        out.update({f"{s}.{k}": k not in SAFER_HIGHER for k in FIGURES
                    if k not in ("differencing_auc", "n_earlier")})
    return out


FAMILY = MeasureFamily(
    name="composition",
    title="Composition with earlier releases",
    section="reid",
    params=CompositionParams,
    run=_run,
    figures=_figures_of,
    needs=("original",),
    reads=("control",),
    alarm=_alarm,
    scale="whole",
    how_to_read=(
        "What the earlier releases of the same people add to this one. An adversary who "
        "knows a person's quasi-identifiers finds the person's class in every release and "
        "keeps the sensitive values seen in all of them: pvp_1 is the share of people found "
        "in this release and an earlier one whose value is then certain, beside the same "
        "share in this release alone; m-invariance violations are people whose class shows "
        "another set of values from one release to the next. For synthetic releases, the "
        "differencing AUC tells whether comparing two releases reveals who was added to the "
        "original between them (0.5: it does not)."),
    advice=(
        "Publish the same people with the same generalization (or generalizations that nest), "
        "keep each class's set of sensitive values fixed across releases (m-invariance), or "
        "coarsen the new release where its classes cut across the earlier ones; for synthetic "
        "data, train on the whole population each time or add noise to what changed."),
)
