"""One column of the original put into the release's domain, from the values alone.

A release generalizes, rounds, top-codes, masks or relabels a column, suppresses cells, or keeps
it as it was; before rows can be compared the original's values must be mapped the way the
release mapped them. What the values show is enough for most of it:

* **kept**: the release's values are the original's;
* **interval**: the released labels are intervals (``30-34``, ``[30, 35)``, ``80+``) and the
  original holds numbers: each number goes to the label that holds it;
* **mask**: released labels end in ``*`` (``021**``): each value goes to the pattern it fits;
* **round**: every released number is a multiple of a unit the original's numbers are not
  (income to the thousand);
* **top_code** / **bottom_code**: released numbers stop at a bound that holds the original's
  tail (ages above 85 at 85);
* **labels**: other labels (regions merged under new names): learned from the rows that link on
  the other columns (:func:`learn_labels`).

Each table's cells become integer codes in one space shared by the tables (``MISSING`` where a
cell is missing, ``WILD`` where the release suppressed it: ``*`` and its like match anything);
a quantity also keeps its numbers, for distances (noise). A code written in numbers (a zip, a
household number: :mod:`.reading`) gets one label per number and no distance: rows agree on it
when it is equal, never when it is near.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..alignment import map_intervals, map_mask, text_labels
from ..arrays import unique, unique_inverse
from ..data import arrow_numbers, distinct, looks_numeric, number_series, used_codes, used_values
from ..generalization import parse_interval
from .reading import found_markers

MISSING = -1
WILD = -2
#: released cells that mean "any value" (sdcMicro and ARX write these)
TOKENS = ("*", "**", "***", "****")
#: the units a rounding is looked for at, largest first
UNITS = (100_000.0, 50_000.0, 10_000.0, 5_000.0, 1_000.0, 500.0, 100.0, 50.0, 25.0, 10.0,
         5.0, 2.0, 1.0, 0.5, 0.1, 0.01)
#: a column whose released values are the original's at least this often is kept
KEPT = 0.99


@dataclass(frozen=True)
class ColumnDomain:
    """One shared column in the release's domain.

    Attributes:
        how: kept, interval, mask, round, top_code, bottom_code, labels (to be learned from
            linked rows) or learned (labels mapped by them).
        detail: what the mapping is (a width, a unit, a bound, a label map's size).
        codes: table -> int64 codes in one space (MISSING, WILD for suppressed cells).
        numbers: table -> float values after the mapping (NaN: missing), for numeric columns.
        kept_share: the share of the release's shown cells whose value the mapped original
            takes.
        wild_share: the share of the release's cells that are suppressed (a token, or
            missing where the original has a value).
        markers: the cells read as missing (``N``, ``-9``...).
    """

    name: str
    how: str
    codes: Mapping[str, np.ndarray]
    numbers: Mapping[str, np.ndarray] | None = None
    kept_share: float = 1.0
    wild_share: float = 0.0
    detail: Mapping[str, Any] = field(default_factory=dict)
    markers: tuple[str, ...] = ()
    #: the label of each code of a text column (codes index it), for label maps
    labels: np.ndarray | None = None

    @property
    def comparable(self) -> bool:
        """Rows can be compared on it (its labels are known in the release's domain)."""
        return self.how != "labels"

    @property
    def numeric(self) -> bool:
        return self.numbers is not None


def _clean_text(series: pd.Series, markers: Sequence[str]) -> pd.Series:
    """The column as stripped text, a Categorical, with the markers missing."""
    text = text_labels(series)
    if not isinstance(text.dtype, pd.CategoricalDtype):
        text = text.astype("category")
    cats = text.cat.categories.astype(str).str.strip()
    if not cats.equals(text.cat.categories):  # no label had space around it: nothing to do
        text = text.cat.rename_categories(cats) if cats.is_unique else text.map(
            lambda v: v.strip() if isinstance(v, str) else v).astype("category")
    if markers:
        drop = [m for m in markers if m in text.cat.categories]
        if drop:
            text = text.cat.remove_categories(drop)
    return text


def _joint_codes(texts: Mapping[str, pd.Series], wild: Sequence[str] = ()
                 ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Codes of several text columns in one space (MISSING, WILD for ``wild`` labels), from
    each column's categories (no pass of Python objects over the rows), and each code's
    label."""
    parts = {t: distinct(s) for t, s in texts.items()}
    union = pd.Index(pd.unique(np.concatenate(
        [np.asarray(u, dtype=object) for _, u in parts.values()] or [np.array([], object)])),
        dtype=object)
    wild_set = set(wild)
    out = {}
    for t, (codes, uniques) in parts.items():
        lookup = union.get_indexer(pd.Index(np.asarray(uniques, dtype=object)))
        lookup = np.where(np.isin(np.asarray(uniques, dtype=object), list(wild_set)), WILD,
                          lookup) if wild_set else lookup
        out[t] = np.append(lookup, MISSING).astype(np.int64)[np.asarray(codes, np.int64)]
    return out, np.asarray(union, dtype=object)


def _numbers_coded(numbers: Mapping[str, np.ndarray]
                   ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each table's numbers as codes in one space (equal numbers, equal codes; MISSING where
    there is none), and the number of each code."""
    joint = np.concatenate(list(numbers.values()))
    finite = np.isfinite(joint)
    values, inverse = unique_inverse(joint[finite])
    codes = np.full(joint.size, MISSING, dtype=np.int64)
    codes[finite] = inverse
    out, start = {}, 0
    for t, x in numbers.items():
        out[t] = codes[start:start + x.size]
        start += x.size
    return out, values


def _distinct_numbers_coded(columns: Mapping[str, pd.Series]
                            ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """:func:`_numbers_coded` of text columns, from each column's distinct values: the values
    its rows use are parsed, and only they are sorted (an identifier of 500,000 distinct
    numbers over a million rows: a sort of the distinct numbers, not of every row's), then
    spread back to the rows through the column's codes. The same codes and numbers."""
    used: dict[str, tuple[np.ndarray, int, np.ndarray, np.ndarray]] = {}
    for t, s in columns.items():
        codes, uniques = distinct(s)
        present = used_codes(codes, len(uniques))
        shown = uniques.take(present)
        numbers = arrow_numbers(shown)  # distinct already: parsed as they are, in Arrow
        if numbers is None:
            numbers = number_series(pd.Series(shown)).to_numpy(dtype=float)
        used[t] = (codes, len(uniques), present, numbers)
    joint = np.concatenate([u[3] for u in used.values()])
    finite = np.isfinite(joint)
    values, inverse = unique_inverse(joint[finite])
    coded = np.full(joint.size, MISSING, dtype=np.int64)
    coded[finite] = inverse
    out, start = {}, 0
    for t, (codes, size, present, numbers) in used.items():
        lookup = np.full(size + 1, MISSING, dtype=np.int64)  # the last slot: missing (-1)
        lookup[present] = coded[start:start + numbers.size]
        start += numbers.size
        out[t] = lookup[codes]
    return out, values


def _number_labels(name: str, others: Mapping[str, pd.Series], shown_rel: pd.Series,
                   wild: np.ndarray | None, wild_share: float, found: tuple[str, ...]
                   ) -> ColumnDomain:
    """A code written in numbers (a zip, an identifier, a region's number): one label per
    number (``01``, ``1`` and ``1.0`` are one), compared equal or not, never near; the
    original's labels kept, else other labels, learned from linked rows as text labels are.
    ``wild``: the released cells suppressed."""
    columns = {**others, "released": shown_rel}
    if all(isinstance(s.dtype, pd.CategoricalDtype) for s in columns.values()):
        codes, values = _distinct_numbers_coded(columns)
    else:
        codes, values = _numbers_coded({t: number_series(s).to_numpy(dtype=float)
                                        for t, s in columns.items()})
    if wild is not None:
        codes["released"] = np.where(wild, WILD, codes["released"])
    kept = _kept_share(codes)
    return ColumnDomain(name, "kept" if kept >= KEPT else "labels", codes, None, kept,
                        wild_share, {}, found, values)


def _multiple_of(x: np.ndarray, unit: float) -> np.ndarray:
    q = x / unit
    return np.abs(q - np.round(q)) < 1e-9 * np.maximum(1.0, np.abs(q))


def _rounding(x_o: np.ndarray, x_r: np.ndarray) -> float | None:
    """The unit every released number is a multiple of while most of the original's are not
    (a rounding), or None."""
    r = np.unique(x_r[np.isfinite(x_r)])
    o = x_o[np.isfinite(x_o)]
    if r.size < 2 or o.size == 0:
        return None
    sample = unique(o)
    for unit in UNITS:
        if _multiple_of(r, unit).all() and _multiple_of(sample, unit).mean() < 0.8:
            return unit
    return None


def _round(x: np.ndarray, unit: float) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) / unit + 0.5) * unit


def _codes_of(x_r: np.ndarray, x_o: np.ndarray, bound: float, above: bool) -> bool:
    """Released numbers stop at ``bound``, which collects the original's tail beyond it: at
    least ten released cells sit on it, as many as half the original's tail, and the tail is
    well beyond the original's own cells at the bound (mass accumulated, not a maximum)."""
    o = x_o[np.isfinite(x_o)]
    r = x_r[np.isfinite(x_r)]
    beyond = o > bound if above else o < bound
    if not beyond.any() or r.size == 0:
        return False
    on_bound = r == bound
    tail = np.mean((o >= bound) if above else (o <= bound))
    return bool(on_bound.sum() >= 10 and on_bound.mean() >= 0.5 * tail
                and tail >= 2 * np.mean(o == bound))


def column_domain(name: str, columns: Mapping[str, pd.Series],
                  markers: Sequence[str] = (), found: Sequence[str] | None = None,
                  code: bool = False) -> ColumnDomain:
    """``columns`` (table -> the column: ``original``, ``released``, and others mapped as the
    original is) in the release's domain (see the module doc); ``markers`` mean missing in
    every column, ``found`` are this column's own (:func:`found_markers`, when the caller
    looked for them already). ``code``: the column reads as a code (:mod:`.reading`), whose
    numbers are labels: equal or not, never near (no rounding, top-coding or noise is looked
    for in an identifier or a zip)."""
    if found is None:
        found = found_markers(list(columns.values()))
    found = tuple(sorted(set(found) | set(markers)))
    texts = {t: _clean_text(s, found) for t, s in columns.items()}
    rel = texts["released"]
    # the labels the release's rows show (a sample's column keeps the whole table's
    # categories), listed by pandas, not one Python string at a time
    labels = pd.Series(used_values(rel).astype(str), dtype="str")
    token = labels.isin(TOKENS).to_numpy(dtype=bool)
    tokens = labels[token].tolist()
    shown_rel = rel.cat.remove_categories(tokens) if tokens else rel
    others = {t: s for t, s in texts.items() if t != "released"}
    ori = others["original"]
    ori_missing = float(ori.isna().mean())
    wild_share = float(rel.isin(tokens).mean()) if tokens else 0.0
    wild_share += max(0.0, float(shown_rel.isna().mean()) - wild_share - ori_missing)
    numeric = looks_numeric(ori) and looks_numeric(shown_rel) and shown_rel.notna().any()
    detail: dict[str, Any] = {}
    if numeric and code:
        return _number_labels(name, others, shown_rel,
                              rel.isin(tokens).to_numpy() if tokens else None, wild_share,
                              found)
    if numeric:
        x = {t: number_series(s).to_numpy(dtype=float) for t, s in others.items()}
        x_r = number_series(shown_rel).to_numpy(dtype=float)
        how = "kept"
        unit = _rounding(x["original"], x_r)
        if unit is not None:
            x = {t: _round(v, unit) for t, v in x.items()}
            how, detail = "round", {"unit": unit}
        finite_r = x_r[np.isfinite(x_r)]
        if finite_r.size:
            top, bottom = float(finite_r.max()), float(finite_r.min())
            if _codes_of(x_r, x["original"], top, above=True):
                x = {t: np.where(v > top, top, v) for t, v in x.items()}
                how, detail = ("top_code" if how == "kept" else how), {**detail, "top": top}
            if _codes_of(x_r, x["original"], bottom, above=False):
                x = {t: np.where(v < bottom, bottom, v) for t, v in x.items()}
                how = "bottom_code" if how == "kept" else how
                detail = {**detail, "bottom": bottom}
        numbers = {**x, "released": x_r}
        codes, _ = _numbers_coded(numbers)
        if tokens:
            codes["released"] = np.where(rel.isin(tokens).to_numpy(), WILD, codes["released"])
        kept = _kept_share(codes)
        return ColumnDomain(name, how, codes, numbers, kept, wild_share, detail, found)
    shown = labels[~token]
    mapped: dict[str, pd.Series] = {}
    how = "kept"
    ori_numeric = looks_numeric(ori) and ori.notna().any()
    intervals = _intervals(shown) if ori_numeric else []
    if intervals and len(intervals) >= 0.9 * len(shown):
        mapped = {t: map_intervals(s, intervals) for t, s in others.items()}
        widths = [iv.width for v in intervals if (iv := parse_interval(v)) is not None
                  and math.isfinite(iv.width)]
        how = "interval"
        detail = {"labels": len(intervals),
                  "width": float(np.median(widths)) + 1 if widths else None}
    elif len(shown) and shown.str.endswith("*").sum() >= 0.5 * len(shown):
        mapped = {t: map_mask(s, shown.tolist(), "*") for t, s in others.items()}
        how = "mask"
        detail = {"labels": len(shown)}
    else:
        mapped = dict(others)
    codes, union = _joint_codes({**{t: text_labels(s) for t, s in mapped.items()}, "released": rel},
                                wild=tokens)
    kept = _kept_share(codes)
    if how == "kept" and kept < KEPT:
        how = "labels"
    return ColumnDomain(name, how, codes, None, kept, wild_share, detail, found, union)


#: released labels looked at first for intervals (evenly spaced): most of them must be
INTERVAL_PROBE = 1000


def _intervals(labels: pd.Series) -> list[str]:
    """The labels that read as intervals (``30-34``, ``[30, 35)``, ``80+``), or none when
    fewer than 80 % of an evenly spaced probe of them do (a generalization's labels are
    intervals nearly all; an identifier's million labels are not parsed one by one)."""
    if len(labels) > INTERVAL_PROBE:
        probe = labels.iloc[np.linspace(0, len(labels) - 1, INTERVAL_PROBE).astype(int)]
        if sum(parse_interval(v) is not None for v in probe) < 0.8 * INTERVAL_PROBE:
            return []
    return [v for v in labels.tolist() if parse_interval(v) is not None]


def _kept_share(codes: Mapping[str, np.ndarray]) -> float:
    """The share of the release's shown cells whose code the original takes."""
    rel = codes["released"]
    shown = rel[rel >= 0]
    if shown.size == 0:
        return 1.0
    present = np.zeros(int(max(shown.max(), codes["original"].max(initial=0))) + 1, bool)
    ori = codes["original"]
    present[ori[ori >= 0]] = True
    return float(present[shown].mean())


def learn_labels(dom: ColumnDomain, original_rows: np.ndarray, released_rows: np.ndarray,
                 min_share: float = 0.8, merged_only: bool = False) -> ColumnDomain | None:
    """A relabelled column's map from the original's values to the release's labels, read off
    linked rows (``original_rows[i]`` linked to ``released_rows[i]``): each original value goes
    to the label most of its linked rows show, when at least ``min_share`` do. None when too
    few values map so (the column stays incomparable), when most linked rows are of values
    seen on one linked row alone (no evidence of a map), or, with ``merged_only``, when every
    value maps to itself (a column kept, or perturbed at random: no merge)."""
    ori = dom.codes["original"][original_rows]
    rel = dom.codes["released"][released_rows]
    ok = (ori >= 0) & (rel >= 0)
    if ok.sum() < 20:
        return None
    pairs = pd.DataFrame({"o": ori[ok], "r": rel[ok]}).value_counts().reset_index(
        name="n").sort_values(["o", "n"], ascending=[True, False], kind="stable")
    total = pairs.groupby("o")["n"].transform("sum")
    best = pairs.drop_duplicates("o")
    seen = total[best.index].to_numpy()
    # a label seen on one linked row "maps" to whatever that row shows: no evidence (rows
    # linked by chance, a synthetic release's household numbers). Most linked rows must be of
    # labels seen twice or more, whose rows agree on where they go.
    if seen[seen >= 2].sum() < 0.5 * ok.sum():
        return None
    share = best["n"].to_numpy() / seen
    good = best[share >= min_share]
    covered = good["n"].sum() / max(int(ok.sum()), 1)
    if covered < 0.9:
        return None
    moved = good["o"].to_numpy() != good["r"].to_numpy()
    if merged_only and not (moved.any() and good["n"].to_numpy()[moved].sum()
                            >= 0.01 * ok.sum()):
        return None
    size = int(max(dom.codes["original"].max(initial=0),
                   dom.codes["released"].max(initial=0))) + 1
    lookup = np.full(size + 1, MISSING, dtype=np.int64)
    lookup[good["o"].to_numpy()] = good["r"].to_numpy()
    codes = dict(dom.codes)
    for t, c in dom.codes.items():
        if t != "released":
            codes[t] = np.where(c >= 0, lookup[np.maximum(c, 0)], c)
    n_orig = int(unique(dom.codes["original"][dom.codes["original"] >= 0]).size)
    n_rel = int(unique(good["r"]).size)
    return replace(dom, how="learned", codes=codes, kept_share=_kept_share(codes),
                   detail={"merged": n_orig, "into": n_rel,
                           "_map": {int(o): int(r) for o, r in zip(good["o"], good["r"])}})


def label_map(dom: ColumnDomain) -> dict[str, str]:
    """A learned column's map, original label -> released label (never serialized: it holds
    the column's values)."""
    pairs = dom.detail.get("_map") or {}
    if dom.labels is None:
        return {}
    return {_label(dom.labels[o]): _label(dom.labels[r]) for o, r in pairs.items()}


def _label(value: Any) -> str:
    """A label as text; a code written in numbers as its number (``7``, not ``7.0``)."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)
