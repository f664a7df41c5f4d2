"""``riskgate init``: a first gate config and policy written from the tables themselves.

A custodian with an original and a release made by another tool should not have to write roles,
families and thresholds by hand before seeing a first verdict. :func:`profile` reads what the
tables say (per column: type, missing-value markers, cardinality, whether the release keeps the
original's values; across tables: whether the release keeps the original's rows, is a
subsample of them, or holds new rows); :func:`propose` turns that into roles, families and a
policy that fit the kind of release; :func:`write_config` writes them as two plain YAML files
with a comment on every choice. Nothing here runs a gate.

The kind of release, from the data:

* **kept rows** (generalized, suppressed or perturbed: sdcMicro, ARX): about as many rows as
  the original, and most rows equal to the original's on the columns the release did not
  generalize (at the same position, or as a multiset when the order was shuffled) -- far more
  than a held-out sample equals it by chance;
* **subsample**: fewer rows, nearly every one equal to an original row on every shared column;
* **new rows** (synthetic): the rest. On coarse columns a synthetic release can equal the
  original on many rows by chance; a control shows how many (the copies family's
  ``exact_share_control``), and the kind is decided against it.

The thresholds come from the literature the family modules cite, each with its reason in the
policy file; every line is the custodian's to edit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..data import NUMBER_PATTERN, looks_numeric, used_values, written_as_code
from ..equivalence import exact_matches
from ..generalization import parse_interval
from .trigger import RELEASE_ID_PATTERN

#: tokens that survey and statistical tools write for "missing" (checked per column)
MARKER_CANDIDATES = ("N", "NA", "N/A", "?", ".", "-", "--", "*", "missing", "unknown",
                     "-9", "-99", "-999", "-8", "-7")
#: at most this many quasi-identifiers are proposed (SUDA and the attacks grow with them)
MAX_QUASI_IDENTIFIERS = 8
#: a column with at most this many distinct values reads as categorical, even of numbers
CATEGORICAL_UP_TO = 20
#: quasi-identifiers are of low-to-mid cardinality: at most this many distinct values
QI_MAX_DISTINCT = 100

_WORDS = re.compile(r"[a-z]+")
DEMOGRAPHIC = ("age", "sex", "gender", "race", "ethnic", "ethnicity", "region", "zip",
               "postcode", "postal", "plz", "state", "county", "district", "city", "town",
               "municipality", "country", "nationality", "citizenship", "education", "educ",
               "schooling", "marital", "married", "occupation", "occ", "job", "profession",
               "industry", "birth", "born", "dob", "yob", "language", "religion", "agep",
               "schl", "mar", "rac", "hisp", "puma", "st", "cit", "nativity", "relationship",
               "relat", "urban", "rural", "urbrur", "hhsize", "children", "employment")
SENSITIVE = ("diagnosis", "disease", "condition", "illness", "health", "medical", "drug",
             "hiv", "cancer", "treatment", "salary", "wage", "wages", "income", "earnings",
             "earn", "debt", "crime", "offence", "offense", "conviction", "sexual",
             "orientation", "political", "party", "union", "pincp", "wagp", "pernp", "hincp",
             "disability", "dis", "insurance")
DIRECT = ("id", "name", "firstname", "lastname", "surname", "email", "mail", "phone",
          "mobile", "tel", "ssn", "passport", "address", "street", "iban", "account", "card",
          "nhs", "mrn", "license", "licence", "ip", "url", "person", "patient", "customer")
WEIGHT = ("weight", "wgt", "wt", "pwgtp", "perwt", "hwgt", "wgtp", "weights", "w")
HOUSEHOLD = ("household", "hh", "hhid", "serialno", "family", "dwelling")


def _words(name: str) -> set[str]:
    """A column name's words: ``householdId`` and ``household_id`` give {household, id}."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", str(name))
    return set(_WORDS.findall(spaced.lower()))


def _named(name: str, vocabulary: Sequence[str]) -> bool:
    words = _words(name)
    joined = re.sub(r"[^a-z]", "", str(name).lower())
    return bool(words & set(vocabulary)) or joined in vocabulary


@dataclass(frozen=True)
class ColumnProfile:
    """What the tables say about one column."""

    name: str
    in_original: bool
    in_released: bool
    numeric: bool
    distinct: int
    missing_share: float
    markers: tuple[str, ...] = ()
    leading_zeros: bool = False
    #: share of the release's distinct values that are values of the original
    kept_values: float = 1.0
    #: "interval" or "mask" when the release's labels say how the column was generalized
    generalized: str | None = None
    #: every value is a whole number
    whole: bool = False
    #: distinct values per row (1.0: every row its own value)
    uniqueness: float = 0.0
    #: share of the original's distinct values that never appear in the release (merged
    #: into another label, or suppressed)
    lost_values: float = 0.0


@dataclass(frozen=True)
class Profile:
    """The tables' profile: per column, the rows of each table, and the kind of release."""

    columns: Mapping[str, ColumnProfile]
    rows: Mapping[str, int]
    kind: str
    evidence: tuple[str, ...]
    markers: tuple[str, ...] = ()
    per_column_markers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _text_values(series: pd.Series) -> pd.Series:
    return pd.Series(np.asarray(used_values(series), dtype=object)).map(
        lambda v: v.strip() if isinstance(v, str) else str(v))


def _markers(series: pd.Series) -> tuple[str, ...]:
    """Candidate markers among a column's values when every other value is a number (a
    numeric column with N or ? in it), or a negative code in a column of non-negative
    numbers (-9 beside ages)."""
    values = _text_values(series)
    if values.empty:
        return ()
    is_number = values.str.match(NUMBER_PATTERN).to_numpy(dtype=bool)
    candidates = set(MARKER_CANDIDATES)
    text_markers = [v for v, num in zip(values, is_number) if not num and v in candidates]
    others = [v for v, num in zip(values, is_number) if not num and v not in candidates]
    if others or not is_number.any():
        return ()
    numbers = pd.to_numeric(values[is_number], errors="coerce")
    negative = sorted(str(v) for v in values[is_number]
                      if v in candidates and float(v) < 0)
    rest = numbers[~values[is_number].isin(negative)]
    negative_markers = negative if len(rest) and float(rest.min()) >= 0 else []
    return tuple(sorted(set(text_markers))) + tuple(negative_markers)


def _generalized(released: pd.Series) -> str | None:
    labels = [v for v in _text_values(released) if v not in ("*",)]
    if not labels:
        return None
    if all(parse_interval(v) is not None for v in labels):
        return "interval"
    if sum(v.endswith("*") for v in labels) >= 0.5 * len(labels):
        return "mask"
    return None


def profile_column(name: str, original: pd.Series | None, released: pd.Series | None
                   ) -> ColumnProfile:
    present = [s for s in (original, released) if s is not None]
    first = original if original is not None else released
    assert first is not None
    markers = tuple(sorted({m for s in present for m in _markers(s)}))
    cleaned = [s.where(~s.astype(str).str.strip().isin(markers)) if markers else s
               for s in present]
    numeric = all(looks_numeric(s) for s in cleaned if s.notna().any())
    distinct = len(used_values(cleaned[0]))
    whole = False
    if numeric:
        values = pd.to_numeric(cleaned[0], errors="coerce").dropna()
        whole = bool(len(values)) and bool(np.all(values == np.round(values)))
    kept, generalized, lost = 1.0, None, 0.0
    if original is not None and released is not None:
        ori = set(_text_values(cleaned[0]))
        rel = list(_text_values(cleaned[-1]))
        kept = sum(v in ori for v in rel) / len(rel) if rel else 1.0
        lost = len(ori - set(rel)) / len(ori) if ori else 0.0
        if kept < 0.9:
            generalized = _generalized(cleaned[-1])
    n = max(len(first), 1)
    return ColumnProfile(
        name=name, in_original=original is not None, in_released=released is not None,
        numeric=numeric, distinct=distinct,
        missing_share=float(cleaned[0].isna().mean()), markers=markers,
        leading_zeros=any(written_as_code(s) for s in present), kept_values=kept,
        generalized=generalized, whole=whole, uniqueness=distinct / n, lost_values=lost)


def _codes(frames: Mapping[str, pd.DataFrame], columns: Sequence[str]
           ) -> dict[str, np.ndarray]:
    """Joint integer codes of ``columns`` in each table (as text, stripped)."""
    out: dict[str, list[np.ndarray]] = {name: [] for name in frames}
    for col in columns:
        texts = {name: df[col].astype(str).str.strip() for name, df in frames.items()}
        joint = pd.Index(pd.unique(pd.concat(list(texts.values()), ignore_index=True)))
        for name, t in texts.items():
            out[name].append(joint.get_indexer(t))
    return {name: np.column_stack(parts) if parts else np.zeros((len(frames[name]), 0), int)
            for name, parts in out.items()}


def _names(columns: Sequence[str], most: int = 8) -> str:
    shown = ", ".join(columns[:most])
    return shown + (f" and {len(columns) - most} more" if len(columns) > most else "")


def release_kind(original: pd.DataFrame, released: pd.DataFrame,
                 control: pd.DataFrame | None, columns: Mapping[str, ColumnProfile]
                 ) -> tuple[str, list[str]]:
    """"kept", "subsample" or "synthetic", and the evidence in plain lines."""
    # the columns a person is described by: not identifiers, weights or household ids
    # (a held-out row never shares those, so they would hide what chance gives)
    shared = [c for c, p in columns.items() if p.in_original and p.in_released
              and p.uniqueness < 0.5 and not _named(c, (*WEIGHT, *HOUSEHOLD, *DIRECT))]
    # kept as they were: the release's values are the original's, and (nearly) all of them
    # still occur (a hierarchy that merged labels keeps some names but not the values)
    untouched = [c for c in shared if columns[c].kept_values >= 0.99
                 and columns[c].lost_values <= 0.1]
    n_o, n_r = len(original), len(released)
    evidence = [f"{n_r:,} released rows, {n_o:,} original rows"]
    if not untouched:
        evidence.append("no column keeps the original's values: new rows")
        return "synthetic", evidence
    frames = {"original": original, "released": released}
    if control is not None:
        frames["control"] = control
    codes = _codes(frames, untouched)
    same_n = abs(n_r - n_o) <= 0.01 * n_o
    if same_n:
        positional = float(np.mean(np.all(codes["released"] == codes["original"], axis=1)))
        evidence.append(f"{positional:.1%} of released rows equal the original's row at the "
                        f"same position on the {len(untouched)} column(s) the release kept "
                        f"as they were ({_names(untouched)})")
        if positional >= 0.5:
            return "kept", evidence
    rel_in_ori, _ = exact_matches(codes["released"], codes["original"])
    share = float(rel_in_ori.mean()) if n_r else 0.0
    evidence.append(f"{share:.1%} of released rows equal some original row on those columns")
    chance = None
    if control is not None:
        ctl_in_ori, _ = exact_matches(codes["control"], codes["original"])
        chance = float(ctl_in_ori.mean()) if len(control) else 0.0
        evidence.append(f"{chance:.1%} of the control's (held-out) rows do as well: what "
                        "chance gives")
    beyond_chance = chance is None or share - chance > 0.2
    if same_n and share >= 0.9 and beyond_chance:
        return "kept", evidence
    all_shared = codes if untouched == shared else _codes(frames, shared)
    full, _ = exact_matches(all_shared["released"], all_shared["original"])
    full_share = float(full.mean()) if n_r else 0.0
    if n_r < 0.95 * n_o and full_share >= 0.95 and beyond_chance:
        evidence.append(f"{full_share:.1%} of released rows equal an original row on every "
                        "shared column, and the release is smaller: a subsample")
        return "subsample", evidence
    evidence.append("the rows are not the original's: new (synthetic) rows")
    return "synthetic", evidence


def profile(original: pd.DataFrame, released: pd.DataFrame,
            control: pd.DataFrame | None = None) -> Profile:
    """The tables' profile (see the module doc)."""
    names = list(dict.fromkeys([*map(str, original.columns), *map(str, released.columns)]))
    columns = {c: profile_column(c, original[c] if c in original.columns else None,
                                 released[c] if c in released.columns else None)
               for c in names}
    kind, evidence = release_kind(original, released, control, columns)
    found: dict[str, list[str]] = {}
    for col, p in columns.items():
        for m in p.markers:
            found.setdefault(m, []).append(col)
    every = tuple(sorted(m for m, cols in found.items() if len(cols) >= 2))
    per_column = {col: tuple(m for m in p.markers if m not in every)
                  for col, p in columns.items() if any(m not in every for m in p.markers)}
    rows = {"original": len(original), "released": len(released)}
    if control is not None:
        rows["control"] = len(control)
    return Profile(columns=columns, rows=rows, kind=kind, evidence=tuple(evidence),
                   markers=every, per_column_markers=per_column)


@dataclass
class Proposal:
    """Roles, types, generalizations and families, each with the reason it was chosen."""

    quasi_identifiers: list[str] = field(default_factory=list)
    sensitive: list[str] = field(default_factory=list)
    direct_identifiers: list[str] = field(default_factory=list)
    weight: str | None = None
    household: str | None = None
    types: dict[str, str] = field(default_factory=dict)
    generalization: dict[str, str] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    unjudged: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _codes_of_numbers(name: str, p: ColumnProfile) -> bool:
    """A column of a few whole numbers that are codes (education 1-5), not quantities."""
    quantity = _named(name, ("age", "agep", "income", "salary", "wage", "earnings", "count"))
    return p.numeric and p.whole and p.distinct <= CATEGORICAL_UP_TO and not quantity


def propose(prof: Profile) -> Proposal:
    """Roles from the columns' names and profiles (see the module doc)."""
    out = Proposal()
    cols = prof.columns
    n = max(prof.rows.get("original", 1), 1)
    for name, p in cols.items():
        if not p.in_original:
            continue
        if _named(name, DIRECT) and (p.uniqueness >= 0.5 or not p.numeric) and \
                not _named(name, DEMOGRAPHIC) and not _named(name, HOUSEHOLD):
            out.direct_identifiers.append(name)
            out.why[name] = "direct identifier: its name says so"
        elif p.uniqueness >= 0.95 and not p.numeric and not _named(name, SENSITIVE):
            out.direct_identifiers.append(name)
            out.why[name] = f"direct identifier: {p.distinct:,} distinct values in {n:,} rows"
    for name in out.direct_identifiers:
        if cols[name].in_released:
            out.warnings.append(f"column '{name}' looks like a direct identifier and is in the "
                                "release: the gate will reject the release until it is "
                                "removed (or edit the roles if it is not one)")
    taken = set(out.direct_identifiers)
    shared = [c for c, p in cols.items() if p.in_original and p.in_released and c not in taken]
    for name in shared:
        p = cols[name]
        if out.weight is None and _named(name, WEIGHT) and p.numeric and not p.whole:
            out.weight, out.why[name] = name, "sample weight: its name says so"
        elif out.household is None and _named(name, HOUSEHOLD):
            out.household, out.why[name] = name, "household id: its name says so"
    taken |= {c for c in (out.weight, out.household) if c}
    rest = [c for c in shared if c not in taken]
    for name in rest:
        p = cols[name]
        if _named(name, SENSITIVE):
            out.sensitive.append(name)
            out.why[name] = "sensitive: its name says so (what an attacker would infer)"
        elif _named(name, DEMOGRAPHIC) and (p.distinct <= QI_MAX_DISTINCT or p.numeric
                                            or p.generalized):
            out.quasi_identifiers.append(name)
            out.why[name] = ("quasi-identifier: demographic by its name "
                             f"({p.distinct} distinct values)")
    for name in rest:
        p = cols[name]
        if name in out.sensitive or name in out.quasi_identifiers:
            continue
        if not p.numeric and p.distinct > QI_MAX_DISTINCT and p.uniqueness > 0.2:
            out.unjudged[name] = (f"not a role: {p.distinct:,} distinct text values (free "
                                  "text or an identifier; the identifier scan still checks it)")
        elif not out.sensitive and p.distinct <= QI_MAX_DISTINCT and not p.numeric:
            out.sensitive.append(name)
            out.why[name] = ("sensitive: no column is named like a sensitive attribute; this "
                             f"categorical column ({p.distinct} values) stands in: edit")
        elif p.distinct <= QI_MAX_DISTINCT or p.numeric or p.generalized:
            out.quasi_identifiers.append(name)
            out.why[name] = f"quasi-identifier: {p.distinct} distinct values"
        else:
            out.unjudged[name] = "not a role: edit if an attacker could know it"
    if len(out.quasi_identifiers) > MAX_QUASI_IDENTIFIERS:
        for name in out.quasi_identifiers[MAX_QUASI_IDENTIFIERS:]:
            out.unjudged[name] = (f"not a role: more than {MAX_QUASI_IDENTIFIERS} "
                                  "quasi-identifiers were found; add it if an attacker knows it")
        out.quasi_identifiers = out.quasi_identifiers[:MAX_QUASI_IDENTIFIERS]
    for name in [*out.quasi_identifiers, *out.sensitive, *([out.household]
                                                          if out.household else [])]:
        p = cols[name]
        if p.generalized:
            out.types[name] = "categorical"
            if p.generalized == "interval":
                out.generalization[name] = "interval"
            else:
                out.generalization[name] = "{mask: '*'}"
        elif p.leading_zeros or not p.numeric or _codes_of_numbers(name, p):
            out.types[name] = "categorical"
        if name in out.quasi_identifiers and not p.numeric and p.kept_values >= 0.9 and \
                0 < p.lost_values < 1 and p.distinct <= QI_MAX_DISTINCT:
            out.warnings.append(
                f"column '{name}': {p.lost_values:.0%} of the original's values never appear "
                "in the release (merged into other labels?); if so, declare the hierarchy "
                f"(generalization: {{{name}: {{hierarchy: FILE}}}}) so that the attacks map "
                "the original's values as the release did")
        if p.kept_values < 0.9 and not p.generalized and not p.numeric:
            out.warnings.append(
                f"column '{name}': {p.kept_values:.0%} of its released values are values of "
                "the original; declare how it was generalized (generalization: {hierarchy: "
                "FILE}) or the attacks on it are insufficient evidence")
    if not out.quasi_identifiers:
        out.warnings.append("no quasi-identifier was found: name at least one under "
                            "roles.quasi_identifiers")
    return out


#: the families and policy checks per kind of release: (figure, bound, review bound, why)
POLICY_NEW_ROWS = [
    ("copies.exact_excess", "max", 0.01, 0.05,
     "released rows equal to an original row beyond what a held-out sample shares by chance "
     "(coarse columns make chance matches common: exact_share alone would judge chance)"),
    ("copies.holdout_share", "max", 0.6, None,
     "Platzer & Reutterer 2021: 0.5 when the generator did not memorize; 0.6 allows noise"),
    ("membership.auc", "max", 0.6, 0.7,
     "members told from non-members: 0.5 is no signal (Carlini et al. 2022 read the low-FPR "
     "rates too: see the report)"),
    ("singling_out.risk", "max", 0.1, None,
     "anonymeter (seed 002): the excess success over the control records"),
    ("linkability.risk", "max", 0.1, None, "anonymeter (seed 002)"),
    ("inference.risk", "max", 0.5, None,
     "anonymeter (seed 002): the worst secret; 0.5 is the attack alarm"),
    ("utility.column_shapes", "min", 0.8, None,
     "SDMetrics' quality report: a release that lost its data is not useful"),
]
POLICY_KEPT_ROWS = [
    ("k_anonymity.k", "min", 5, 3,
     "El Emam & Dankar 2008: k = 5 for a public release (3 for a restricted one, reviewed)"),
    ("reid.pRb", "max", 0.2, None, "seed 000: highest prosecutor risk, 1/k at k = 5"),
    ("l_diversity.{sensitive}.distinct_l", "min", 2, 1,
     "sdcMicro: l = 1 discloses the sensitive value of a whole class (a person decides)"),
    ("singling_out.risk", "max", 0.1, None, "anonymeter (seed 002)"),
    ("inference.risk", "max", 0.5, None, "anonymeter (seed 002): the worst secret"),
    ("copies.exact_share", "max", 0.05, 1.0,
     "a release that keeps its rows reproduces them in the generalized domain: a person "
     "decides (exact_excess judges synthetic data)"),
    ("utility.column_shapes", "min", 0.8, None,
     "SDMetrics' quality report: what the release keeps"),
]
POLICY_WEIGHTED = [
    ("sdc.global_risk", "max", 0.01, None,
     "sdcMicro: expected re-identifications per record (population from the sample weights)"),
]


def families(kind: str, prop: Proposal, control: bool) -> dict[str, str]:
    """Family name -> its parameters as YAML flow text, for the kind of release."""
    out: dict[str, str] = {}
    qis, sens = prop.quasi_identifiers, prop.sensitive
    if kind == "synthetic":
        out["copies"] = "{}"
        if control:
            out["membership"] = "{}"
        out["singling_out"] = "{}"
        if len(qis) >= 2:
            half = len(qis) // 2
            out["linkability"] = (f"{{aux_a: [{', '.join(qis[:half])}], "
                                  f"aux_b: [{', '.join(qis[half:])}]}}")
        if sens:
            out["inference"] = "{}"
        out["utility"] = "{}"
        return out
    out["k_anonymity"] = "{ks: [2, 3, 5, 10]}"
    out["reid"] = "{threshold: 0.1}"
    if sens:
        out["l_diversity"] = "{c: 2}"
    if prop.weight:
        out["sdc"] = "{max_global_risk: 0.01}"
    out["suda"] = "{}"
    out["singling_out"] = "{}"
    if sens:
        out["inference"] = "{}"
    out["copies"] = "{}"
    out["utility"] = "{}"
    return out


def _yaml_text(value: str) -> str:
    """A scalar written so YAML reads it back as the same string."""
    import yaml

    return yaml.safe_dump(value, default_style=None, width=10**6).strip().removesuffix(
        "\n...").strip()


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_yaml_text(v) for v in values) + "]"


#: characters a YAML reader (or an editor) may take as a line break, and every other control
#: or format character: never written raw into a comment of the custodian's config
_UNSAFE_IN_COMMENT = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e"
                                "\u2060-\u2064\ufeff]")


def comment_text(text: str) -> str:
    """Text for a ``#`` comment: every line-breaking, control or format character escaped
    (``\\u2028``), so that nothing the judged data names (a column called
    ``notes<U+2028>identifiers: ...``) can end the comment and become a key."""
    return _UNSAFE_IN_COMMENT.sub(lambda m: f"\\u{ord(m.group()):04x}", str(text))


def release_id_from(url: str) -> str:
    stem = re.sub(r"\.(csv|parquet|pq|jsonl|ndjson|json)(\.(gz|bz2|xz|zst))?$", "",
                  url.rstrip("/").rsplit("/", 1)[-1], flags=re.IGNORECASE)
    rid = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._") or "release"
    return rid[:128] if re.match(RELEASE_ID_PATTERN, rid[:128]) else "release"


def config_text(prof: Profile, prop: Proposal, urls: Mapping[str, str | None]) -> str:
    """gate.yaml: every choice a plain line with its reason."""
    kind_word = {"kept": "rows kept from the original (generalized, suppressed or perturbed)",
                 "subsample": "a subsample of the original's rows",
                 "synthetic": "new rows (synthetic data)"}[prof.kind]
    lines = ["# Written by riskgate init from the tables; every line is yours to edit.",
             f"# The kind of release, from the data: {kind_word}.",
             *(f"#   {e}" for e in prof.evidence),
             f"release_id: {_yaml_text(release_id_from(str(urls['released'])))}",
             f"original: {_yaml_text(str(urls['original']))}",
             f"released: {_yaml_text(str(urls['released']))}"]
    if urls.get("control"):
        lines.append(f"control: {_yaml_text(str(urls['control']))}   # held out from the "
                     "original: the yardstick of chance")
    elif prof.kind == "synthetic":
        lines.append("# control: held-out.csv   # without a held-out sample of the population "
                     "the copies beyond chance, the holdout share and membership cannot be "
                     "judged: the verdict is NEEDS_REVIEW until you give one")
    if urls.get("identification"):
        lines.append(f"identification: {_yaml_text(str(urls['identification']))}")
    lines.append("output_url: runs                       # relative to this file's folder")
    if prof.markers:
        lines.append(f"missing_values: {_list(prof.markers)}   # found in several columns "
                     "whose other values are numbers")
    lines.append("roles:")
    lines.append(f"  quasi_identifiers: {_list(prop.quasi_identifiers)}")
    for name in prop.quasi_identifiers:
        lines.append(f"  #   {_yaml_text(name)}: {prop.why.get(name, '')}")
    lines.append(f"  sensitive: {_list(prop.sensitive)}")
    for name in prop.sensitive:
        lines.append(f"  #   {_yaml_text(name)}: {prop.why.get(name, '')}")
    if prop.weight:
        lines.append(f"  weight: {_yaml_text(prop.weight)}   # {prop.why[prop.weight]}")
    if prop.household:
        lines.append(f"  household: {_yaml_text(prop.household)}   # "
                     f"{prop.why[prop.household]}")
    lines.append(f"  direct_identifiers: {_list(prop.direct_identifiers)}"
                 + ("   # must be absent from the release" if prop.direct_identifiers else ""))
    for name in prop.direct_identifiers:
        lines.append(f"  #   {_yaml_text(name)}: {prop.why.get(name, '')}")
    if prop.types:
        lines.append("  types: {" + ", ".join(f"{_yaml_text(c)}: {t}"
                                              for c, t in prop.types.items()) + "}")
    per_column = {c: m for c, m in prof.per_column_markers.items()
                  if c in {*prop.quasi_identifiers, *prop.sensitive, prop.weight,
                           prop.household}}
    if per_column:
        lines.append("  missing_values: {" + ", ".join(
            f"{_yaml_text(c)}: {_list(m)}" for c, m in per_column.items()) + "}")
    for name, why in prop.unjudged.items():
        lines.append(f"# {_yaml_text(name)}: {why}")
    if prop.generalization:
        lines.append("generalization:                        # how released columns were "
                     "generalized (the attacks map the original into them)")
        for col, spec in prop.generalization.items():
            lines.append(f"  {_yaml_text(col)}: {spec}")
    lines.append("measures:")
    for name, params in families(prof.kind, prop, bool(urls.get("control"))).items():
        lines.append(f"  {name}: {params}")
    lines += ["policy: policy.yaml", "seed: 2026", ""]
    return "\n".join(comment_text(line) for line in lines)


def policy_text(prof: Profile, prop: Proposal, control: bool) -> str:
    """policy.yaml: the checks that fit the kind of release, each with its reason."""
    chosen = families(prof.kind, prop, control)
    rules = POLICY_NEW_ROWS if prof.kind == "synthetic" else POLICY_KEPT_ROWS
    if prop.weight and prof.kind != "synthetic":
        rules = [*rules, *POLICY_WEIGHTED]
    lines = ["# Written by riskgate init. A release is APPROVED only if every check passes;",
             "# a value between a bound and its review bound goes to a person (NEEDS_REVIEW).",
             "version: 1", "on_insufficient: review", "checks:"]
    for figure, side, bound, review, why in rules:
        family = figure.split(".", 1)[0]
        if family not in chosen:
            continue
        figures = ([figure.format(sensitive=s) for s in prop.sensitive]
                   if "{sensitive}" in figure else [figure])
        for fig in figures:
            lines.append(f"  - figure: {fig}")
            lines.append(f"    {side}: {bound}")
            if review is not None:
                lines.append(f"    review_{side}: {review}")
            lines.append(f"    # {why}")
    lines.append("")
    return "\n".join(comment_text(line) for line in lines)
