"""A release read against its original: what kind of release it is, what was done to each
column, and which original row each released row comes from.

:func:`diff` puts every shared column of the original into the release's domain
(:mod:`.domain`), links the released rows to the original's (:mod:`.linkage`), learns the label
maps of relabelled columns from the rows that link on the others and links again, and judges
the links against what chance gives: the same linkage of a held-out control (people in no
release), or, without one, of the original to itself with each row kept from its own match
(the rate at which independent samples of these people coincide).

At the threshold where the release's linked share most exceeds chance's (quality ``tau``), the
share of released rows that are someone's record is ``linked_share = (L - C) / (1 - C)``, ``L``
the release's linked share and ``C`` chance's (zero unless the excess is significant, one-sided
p < 0.001). The kind:

* ``kept``: at least :data:`KEPT_SHARE` of the released rows are original records (or most of
  them, :data:`MOST`, in a release with no more rows than the original: records perturbed in
  many places), and the release has at least :data:`SUBSAMPLE_BELOW` as many rows as the
  original (generalized, suppressed, perturbed, a few removed);
* ``subsample``: original records, fewer than that (the fraction is said);
* ``synthetic``: no more linked rows than chance gives;
* ``mixed``: new rows with some original records (``linked_share`` says how many).

Per column: ``transform`` (kept, generalized, suppressed, perturbed, new, absent, added), the
share suppressed, the generalization or perturbation seen, and its reading (a code or a
quantity, :mod:`.reading`). Linear-logarithmic in the rows; no step assumes equal row counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..data import factorized_once
from ..roles import ColumnType
from ..stats import normal_sf
from .domain import ColumnDomain, column_domain, label_map, learn_labels
from .linkage import Links, Matrix, Query, Weights, link_each, matrices, weights
from .reading import ColumnReading, found_markers, read_columns

#: released rows that must be original records for a release to be kept rows
KEPT_SHARE = 0.85
#: ... or the majority, when the release has no more rows than the original (its records,
#: perturbed: a new row is never a row of a release that holds only the original's)
MOST = 0.5
#: a release with fewer rows than this share of the original's is a subsample
SUBSAMPLE_BELOW = 0.9
#: chance is measured on at most this many rows (a seeded sample)
CHANCE_ROWS = 20_000
#: the excess over chance must be significant at this level
ALPHA = 0.001
#: a linked column whose values differ on at least this share of linked rows is perturbed
PERTURBED = 0.01
#: a column with at least this share of released cells suppressed is suppressed
SUPPRESSED = 0.005
#: the thresholds of link quality tried
THRESHOLDS = tuple(round(0.5 + 0.025 * i, 3) for i in range(21))

KIND_WORDS = {"kept": "rows kept from the original",
              "subsample": "a subsample of the original's rows",
              "synthetic": "new rows (synthetic data)",
              "mixed": "new rows with some of the original's records in them"}


@dataclass(frozen=True)
class ColumnDiff:
    """What was done to one column, and how it reads."""

    name: str
    transform: str
    suppressed_share: float
    reading: ColumnReading
    domain: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"transform": self.transform, "suppressed_share": round(self.suppressed_share, 6),
                "type": self.reading.type, "type_split": self.reading.split,
                "type_evidence": list(self.reading.evidence), "domain": self.domain,
                **{k: v for k, v in self.detail.items() if not k.startswith("_")}}


@dataclass(frozen=True)
class ReleaseDiff:
    """A release read against its original (see the module doc)."""

    kind: str
    linked_share: float
    linked_raw: float
    chance: float
    chance_from: str
    threshold: float
    rows: Mapping[str, int]
    columns: Mapping[str, ColumnDiff]
    evidence: tuple[str, ...]
    links: Links | None = None
    linked: np.ndarray | None = None
    #: the links cover a seeded sample of the released rows, not each of them
    sampled: bool = False
    #: per relabelled column, original label -> released label (learned from linked rows;
    #: values of the column: never serialized)
    label_maps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def keeps_records(self) -> bool:
        """The release holds original records (kept, subsample or mixed)."""
        return self.kind != "synthetic"

    def readings(self) -> dict[str, ColumnReading]:
        return {c: d.reading for c, d in self.columns.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "linked_share": round(self.linked_share, 6),
                "linked_share_raw": round(self.linked_raw, 6), "chance": round(self.chance, 6),
                "chance_from": self.chance_from, "link_threshold": self.threshold,
                "rows": dict(self.rows),
                "columns": {c: d.to_dict() for c, d in self.columns.items()},
                "evidence": list(self.evidence), "summary": self.summary()}

    def links_frame(self) -> pd.DataFrame:
        """One row per released row, in release order: the original row it comes from
        (0-based, null when none) and the link's quality."""
        assert self.links is not None and self.linked is not None and not self.sampled
        row = pd.array(np.where(self.linked, self.links.original_row, -1), dtype="Int64")
        row[~self.linked] = pd.NA
        return pd.DataFrame({"original_row": row,
                             "quality": np.where(np.isfinite(self.links.score),
                                                 np.round(self.links.quality, 4), np.nan)})

    def summary(self) -> list[str]:
        """The plain-words account (what ``riskgate diff`` prints)."""
        n_o, n_r = self.rows["original"], self.rows["released"]
        lines = []
        if self.kind in ("kept", "subsample"):
            kept = min(n_r, n_o)
            linked = (f"{self.rows['linked']:,} of a sample of {self.rows['linked_of_sample']:,}"
                      if self.sampled else f"{self.rows['linked']:,}")
            lines.append(f"{self.kind}: {kept:,} of {n_o:,} records ({kept / max(n_o, 1):.1%}), "
                         f"{1 - kept / max(n_o, 1):.1%} removed; {linked} linked to their "
                         "original row")
        elif self.kind == "mixed":
            lines.append(f"mixed: {self.linked_share:.1%} of {n_r:,} released rows are the "
                         f"original's records (beyond the {self.chance:.1%} chance gives), the "
                         "rest new rows")
        else:
            lines.append(f"synthetic: {n_r:,} new rows; {self.linked_raw:.1%} link to an "
                         f"original row, as {self.chance:.1%} of {self.chance_from} do by chance")
        for c, d in self.columns.items():
            lines.append(f"{c}: {_column_words(d)}")
        return lines


def _column_words(d: ColumnDiff) -> str:
    detail, out = d.detail, d.transform
    if d.transform == "generalized":
        how = d.domain
        if how == "interval":
            width = detail.get("width")
            out = f"generalized to intervals{f' of width {width:g}' if width else ''}"
        elif how == "round":
            out = f"rounded to {detail.get('unit'):g}"
        elif how in ("top_code", "bottom_code") and not detail.get("unit"):
            out = "top-coded at " + ", ".join(f"{detail[k]:g}" for k in ("top", "bottom")
                                               if k in detail)
        elif how == "learned":
            out = f"{detail.get('merged')} labels merged into {detail.get('into')}"
        elif how == "mask":
            out = "masked (trailing characters replaced by *)"
        else:
            out = f"generalized ({how})"
    elif d.transform == "perturbed":
        out = f"perturbed: {detail.get('changed_share', 0):.1%} of linked rows changed"
        if "noise_sd" in detail:
            out += f" (noise sd {detail['noise_sd']:.3g})"
    if d.suppressed_share >= SUPPRESSED and d.transform != "suppressed":
        out += f"; {d.suppressed_share:.1%} of cells suppressed"
    elif d.transform == "suppressed":
        out = f"suppressed in {d.suppressed_share:.1%} of cells"
    reading = d.reading.type + (" (evidence split: both readings)" if d.reading.split else "")
    return f"{out}; read as {reading}"


def _frame(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    return df[[c for c in columns if c in df.columns]]


def _original(doms: Sequence[ColumnDomain], seed: int, earlier: Matrix | None = None
              ) -> tuple[Matrix, Weights]:
    """The original's matrix and the weights read from it. ``earlier``: its matrix before
    labels were learned (what it derived from its numbers still holds)."""
    original = matrices(doms, "original")
    original.keep_numbers_from(earlier)
    return original, weights(doms, original, seed)


def _link(doms: Sequence[ColumnDomain], original: Matrix, w: Weights, seed: int,
          chance_table: str | None, exact_only: bool = False) -> tuple[list[Links], int]:
    """The links of the released rows and, with ``chance_table``, of chance's rows
    (``control``, or ``original`` kept from itself; a seeded sample of them) after them, made
    in one pass over the original (a third less than a pass each); and the sample's size.
    ``exact_only``: :func:`~.linkage.link_each`'s."""
    queries = [Query(matrices(doms, "released"))]
    rows = np.empty(0, np.int64)
    if chance_table is not None:
        chance = original if chance_table == "original" else matrices(doms, chance_table)
        n = chance.codes.shape[0]
        rng = np.random.default_rng(seed + 7)
        rows = np.sort(rng.choice(n, min(n, CHANCE_ROWS), replace=False))
        if chance_table == "original":
            queries.append(_chance_of_original(doms, original, rows, seed))
        else:
            queries.append(Query(chance, rows))
    return link_each(queries, original, w, exact_only), rows.size


def _chance_of_original(doms: Sequence[ColumnDomain], original: Matrix, rows: np.ndarray,
                        seed: int) -> Query:
    """Chance's rows when it is measured on the original itself: the sampled ``rows``, each
    kept from its own match, and each identifying column's label (:func:`_identifying`: an
    identifier, a household number) taken from another row drawn at random. Within the
    original no other row holds a row's identifier, so its rows would never agree on one by
    chance; an independent sample of the same people does when both tables number their
    rows alike (``P000000``, ``P000001``...: what most synthesizers write), and a synthetic
    release would otherwise read as mixed (0.1-0.2 % of its rows "linked" through the
    identifier). The other columns keep their joint values (what coincides between people)."""
    redrawn = tuple(j for j, d in enumerate(doms) if d.numbers is None and _identifying(d))
    n = original.codes.shape[0]
    if not redrawn or n < 2:
        return Query(original, rows, exclude_self=True)
    donors = np.random.default_rng(seed + 11).integers(0, n - 1, rows.size)
    donors += donors >= rows  # any row but itself
    return Query(original, rows, exclude_self=True, redrawn=redrawn, donors=donors)


def _threshold(rel: Links, chance: Links, chance_rows: int, rel_rows: int
               ) -> tuple[float, float, float]:
    """The quality threshold where the share of released rows that are original records,
    (L - C) / (1 - C), is largest (its 95 % lower bound) among those where the excess over
    chance is significant: at every threshold that ratio is at most the true share (a
    perturbed record can fall below a threshold; a new row matches as well as chance's rows
    do), so the largest is the closest; and the two shares there. L and C are the shares of
    rows whose best candidate reaches the threshold, each row on its own."""
    best = (THRESHOLDS[-1], 0.0, 0.0, -math.inf)
    for tau in THRESHOLDS:
        share_r = float(np.sum(rel.best_quality >= tau - 1e-12) / max(rel_rows, 1))
        share_c = float(np.sum(chance.best_quality >= tau - 1e-12) / max(chance_rows, 1))
        ratio = (share_r - share_c) / max(1 - share_c, 1e-12)
        if not _significant(share_r, rel_rows, share_c, chance_rows):
            ratio = min(ratio, 0.0)
        # the largest lower confidence bound wins: a threshold where the ratio is as large
        # but less certain (fewer rows behind it) does not
        se = math.sqrt(share_r * (1 - share_r) / max(rel_rows, 1)
                       + share_c * (1 - share_c) / max(chance_rows, 1)) / max(1 - share_c, 1e-9)
        if ratio - 1.96 * se > best[3]:
            best = (tau, share_r, share_c, ratio - 1.96 * se)
    return best[0], best[1], best[2]


def _significant(share_r: float, n_r: int, share_c: float, n_c: int) -> bool:
    pooled = (share_r * n_r + share_c * n_c) / max(n_r + n_c, 1)
    se = math.sqrt(max(pooled * (1 - pooled), 1e-12) * (1 / max(n_r, 1) + 1 / max(n_c, 1)))
    return normal_sf((share_r - share_c) / se) < ALPHA


def _transforms(doms: Mapping[str, ColumnDomain], kind: str, links: Links,
                linked: np.ndarray) -> dict[str, tuple[str, dict[str, Any]]]:
    """Per shared column: its transform and what was seen (on the linked rows)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    rel_rows = np.flatnonzero(linked)
    ori_rows = links.original_row[rel_rows]
    for c, d in doms.items():
        detail: dict[str, Any] = dict(d.detail)
        a, b = d.codes["released"][rel_rows], d.codes["original"][ori_rows]
        shown = (a >= 0) & (b >= 0)
        changed = float(np.mean(a[shown] != b[shown])) if shown.any() else 0.0
        if d.numbers is not None and shown.any():
            x = d.numbers["released"][rel_rows][shown]
            y = d.numbers["original"][ori_rows][shown]
            diff = x - y
            moved = diff != 0
            changed = float(np.mean(moved))
            if moved.any():
                detail["noise_sd"] = float(np.std(diff))
                detail["noise_relative"] = float(np.median(np.abs(diff[moved]) / np.maximum(
                    np.abs(y[moved]), 1e-12)))
        detail["changed_share"] = round(changed, 6)
        if kind in ("synthetic", "mixed"):
            transform = "new"
        elif d.how not in ("kept", "labels"):
            transform = "generalized"
        elif changed >= PERTURBED:
            transform = "perturbed"
        elif d.wild_share >= SUPPRESSED:
            transform = "suppressed"
        else:
            transform = "kept"
        out[c] = (transform, detail)
    return out


def _identifying(d: Any) -> bool:
    """A column with a label for most rows (an id): no hierarchy merges it, and a map
    "learned" from rows that agree elsewhere would only pair unrelated ids."""
    codes = d.codes["original"]
    labels = int(codes.max()) + 1 if codes.size else 0
    return labels > 0.5 * max(codes.size, 1)


def _learn_labels(doms: dict[str, Any], usable: dict[str, Any], links: Any) -> list[str]:
    """Columns whose labels are learned from the rows that link on the others (their map is
    put in ``doms`` and ``usable``): a column with labels of its own from the rows that link
    well (quality 0.9), a kept column whose labels were partly merged (a hierarchy keeping a
    name) from the rows that link well enough with it (0.7: a column compared in the linkage
    lowers the quality of the rows it changed) or that agree on every other column, a map
    consistent over 95 % of them."""
    learned = []
    linked = links.original_row >= 0
    good = linked & (links.quality >= 0.9)
    # rows that link well enough with the column, or that agree on every column compared
    # but one (on few columns, one merged label takes a row under 0.7)
    fair = linked & ((links.quality >= 0.7) | (links.agree >= links.compared - 1))
    for c, d in doms.items():
        if not good.any() or d.numbers is not None:
            continue
        if c not in usable:
            mapped = learn_labels(d, links.original_row[good], np.flatnonzero(good))
        elif d.how == "kept" and not _identifying(d):
            mapped = learn_labels(d, links.original_row[fair], np.flatnonzero(fair),
                                  min_share=0.95, merged_only=True)
        else:
            mapped = None
        if mapped is not None:
            doms[c] = usable[c] = mapped
            learned.append(c)
    return learned


def _may_learn(doms: Mapping[str, ColumnDomain]) -> bool:
    """Whether :func:`_learn_labels` may map a column once the release is linked: one whose
    labels are not the original's, or a kept text column the release shows fewer labels of
    than the original (labels merged under a kept name; or rows left out, where nothing is
    learned)."""
    for d in doms.values():
        if d.how == "labels":
            return True
        if d.how == "kept" and d.numbers is None and not _identifying(d):
            released, original = (np.count_nonzero(np.bincount(c[c >= 0], minlength=1))
                                  for c in (d.codes["released"], d.codes["original"]))
            if released < original:
                return True
    return False


def _kind(linked_share: float, full_n: int, n_o: int, evidence: list[str]) -> str:
    """The release's kind from the share of its rows that are original records beyond
    chance and its size against the original's; what led there goes to ``evidence``."""
    records = linked_share >= KEPT_SHARE or (
        linked_share >= MOST and full_n <= n_o * (1 + PERTURBED))
    if records:
        kind = "subsample" if full_n < SUBSAMPLE_BELOW * n_o else "kept"
        evidence.append(f"{linked_share:.1%} of released rows are original records beyond "
                        f"chance; the release holds {full_n / max(n_o, 1):.1%} as many rows "
                        f"as the original: {KIND_WORDS[kind]}")
        if linked_share < KEPT_SHARE:
            evidence.append("most released rows link to original records and the release has "
                            "no more rows than the original: its records, perturbed in more "
                            "places than a row links through (swapping, PRAM, noise)")
        return kind
    if linked_share > 0:
        evidence.append(f"{linked_share:.1%} of released rows are original records beyond "
                        "chance, the rest new rows: a mixed release")
        return "mixed"
    evidence.append("no more released rows link than chance gives: new (synthetic) rows")
    return "synthetic"


@factorized_once()  # its readers share each column's factorization
def diff(original: pd.DataFrame, released: pd.DataFrame, control: pd.DataFrame | None = None,
         *, types: Mapping[str, ColumnType] | None = None, markers: Sequence[str] = (),
         seed: int = 0, sample: int | None = None, of_rows: int | None = None) -> ReleaseDiff:
    """The release read against its original (see the module doc).

    Args:
        original, released: the tables as read (text Categoricals or typed columns).
        control: a held-out sample of the same people (the yardstick of chance); without it,
            the original linked to itself, each row kept from its own match.
        types: column types the config declares (they win over every reading).
        markers: cells that mean missing in every column (besides those found).
        seed: the seed of every random step (chance's sample).
        sample: link a seeded sample of this many released rows (the kind, the transforms and
            the readings need no more); the links then cover those rows alone
            (:attr:`ReleaseDiff.sampled`). Default: every row.
        of_rows: ``released`` is already that sample (:func:`release_sample`) of a release
            of this many rows (the gate sends the helper process the sample alone).
    """
    full_n = len(released) if of_rows is None else of_rows
    sampled = full_n > len(released)
    if not sampled:
        taken = release_sample(released, sample, seed)
        sampled = taken is not None
        released = released if taken is None else taken
    n_o, n_r = len(original), len(released)
    shared = [str(c) for c in released.columns if c in original.columns]
    if control is not None:
        shared = [c for c in shared if c in control.columns]
    tables = {"original": original, "released": released}
    if control is not None:
        tables["control"] = control
    names = list(dict.fromkeys([*original.columns, *released.columns]))
    # each column's markers looked for once, for its domain and its reading
    found = {c: found_markers([df[c] for df in tables.values() if c in df.columns])
             for c in names}
    readings = read_columns(tables, names, types, found)
    # a code's numbers are labels: the rows are linked on them as equal or not, never near
    doms = {c: column_domain(c, {t: df[c] for t, df in tables.items()}, markers, found[c],
                             code=readings[c].type == "categorical" and not readings[c].split)
            for c in shared}
    usable = {c: d for c, d in doms.items() if d.comparable and (d.codes["released"] >= 0).any()}
    evidence = [f"{full_n:,} released rows, {n_o:,} original rows"]
    if not usable:
        evidence.append("no column keeps the original's values, nor a mapping of them: new "
                        "rows")
        columns = _columns(original, released, doms, readings, {c: ("new", {}) for c in doms})
        return ReleaseDiff("synthetic", 0.0, 0.0, 0.0, "none", 1.0,
                           {"original": n_o, "released": full_n, "linked": 0}, columns,
                           tuple(evidence))
    chance_table = "control" if control is not None else "original"
    chance_from = ("the control's rows" if control is not None else
                   "the original's own rows (each to another)")
    # chance is linked in the release's pass when those links likely stand: not when labels
    # may be learned from them (the release is linked again then, and chance with it), and
    # those first links are exact ones alone (the labels are learned from rows that agree)
    ori, w = _original(list(usable.values()), seed)
    may_learn = _may_learn(doms)
    linked_all, n_chance = _link(list(usable.values()), ori, w, seed,
                                 None if may_learn else chance_table, exact_only=may_learn)
    links, chance_links = linked_all[0], linked_all[1:]
    learned = _learn_labels(doms, usable, links)
    if learned:
        ori, w = _original(list(usable.values()), seed, ori)
        evidence.append(f"labels learned from the rows that link on the other columns: "
                        f"{', '.join(learned)}")
    if learned or may_learn:
        (links, *chance_links), n_chance = _link(list(usable.values()), ori, w, seed,
                                                 chance_table)
    tau, share_r, share_c = _threshold(links, chance_links[0], n_chance, n_r)
    significant = _significant(share_r, n_r, share_c, n_chance)
    linked_share = max(0.0, (share_r - share_c) / max(1 - share_c, 1e-12)) if significant \
        else 0.0
    linked = (links.original_row >= 0) & (links.quality >= tau - 1e-12)
    n_linked = int(linked.sum())
    evidence.append(f"{share_r:.1%} of released rows link to an original row at quality "
                    f"{tau:g} or more on {len(usable)} column(s); {share_c:.1%} of "
                    f"{chance_from} do so by chance")
    kind = _kind(linked_share, full_n, n_o, evidence)
    transforms = _transforms(doms, kind, links, linked)
    columns = _columns(original, released, doms, readings, transforms)
    rows = {"original": n_o, "released": full_n, "linked": n_linked,
            **({"linked_of_sample": n_r} if sampled else {}),
            **({"control": len(control)} if control is not None else {})}
    if sampled:
        evidence.insert(1, f"the kind is read on a seeded sample of {n_r:,} of the "
                           f"{full_n:,} released rows")
    return ReleaseDiff(kind, linked_share, share_r, share_c, chance_from, tau, rows, columns,
                       tuple(evidence), links, linked, sampled=sampled,
                       label_maps={c: label_map(doms[c]) for c in learned})


def release_sample(released: pd.DataFrame, sample: int | None, seed: int
                   ) -> pd.DataFrame | None:
    """The seeded sample of ``sample`` released rows that :func:`diff` links, in the
    release's order; None when it would be every row."""
    if sample is None or len(released) <= sample:
        return None
    rng = np.random.default_rng([seed, 0xD1F])
    return released.iloc[np.sort(rng.choice(len(released), int(sample), replace=False))]


def read_release(original: pd.DataFrame, released: pd.DataFrame,
                 control: pd.DataFrame | None = None, *,
                 types: Mapping[str, ColumnType] | None = None, markers: Sequence[str] = (),
                 seed: int = 0, sample: int | None = None, of_rows: int | None = None
                 ) -> ReleaseDiff:
    """:func:`diff` on a seeded sample of ``sample`` released rows, and for a mixed release
    again on every row: the gate needs each of its rows linked (the families of equivalence
    classes measure the linked rows alone). The gate's reading of a release, here or in the
    helper process (:mod:`riskcore.gate.gx_helper`). Given the sample alone (``of_rows``: see
    :func:`diff`), a mixed release's reading stays the sample's: the caller, who holds every
    row, asks again with them."""
    kwargs: dict[str, Any] = {"types": types, "markers": markers, "seed": seed}
    with factorized_once():
        release = diff(original, released, control, sample=sample, of_rows=of_rows, **kwargs)
        if release.kind == "mixed" and release.sampled and of_rows is None:
            release = diff(original, released, control, **kwargs)
    return release


def _columns(original: pd.DataFrame, released: pd.DataFrame,
             doms: Mapping[str, ColumnDomain], readings: Mapping[str, ColumnReading],
             transforms: Mapping[str, tuple[str, dict[str, Any]]]) -> dict[str, ColumnDiff]:
    out: dict[str, ColumnDiff] = {}
    for c in dict.fromkeys([*map(str, original.columns), *map(str, released.columns)]):
        if c in doms:
            transform, detail = transforms[c]
            d = doms[c]
            out[c] = ColumnDiff(c, transform, d.wild_share, readings[c], d.how, detail)
        elif c in released.columns and c not in original.columns:
            out[c] = ColumnDiff(c, "added", 0.0, readings[c])
        elif c in original.columns and c not in released.columns:
            out[c] = ColumnDiff(c, "absent", 0.0, readings[c])
        else:  # in both but not the control's: not compared
            out[c] = ColumnDiff(c, "kept", 0.0, readings[c], "not compared (the control "
                                "lacks it)")
    return out
