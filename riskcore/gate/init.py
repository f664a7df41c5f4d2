"""``riskgate init``: a first gate config and policy written from the tables themselves.

A custodian with an original and a release made by another tool should not have to write roles,
families and thresholds by hand before seeing a first verdict. :func:`profile` reads what the
tables say: the release read against its original (:func:`riskcore.anatomy.diff`: the kind of
release, each column's transform and reading, the generalizations seen, the label maps
learned from linked rows) and, per column, its markers, cardinality and name; :func:`propose`
turns that into roles, types, generalizations, families and a policy that fit the kind of
release; :func:`config_text` writes them as plain YAML with a comment on every choice, every
name through the YAML emitter and every comment escaped. Nothing here runs a gate.

The families per kind: rows kept from the original (and subsamples) get the equivalence
families (k-anonymity, re-identification, l-diversity, sdcMicro's measures, SUDA) and the
attacks; new rows (synthetic data) get copies, membership and the attacks, judged against a
held-out control; a mixed release (new rows with some original records) gets both. The
thresholds come from the literature the family modules cite, each with its reason in the
policy file; every line is the custodian's to edit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..anatomy import KIND_WORDS, ColumnDiff, ReleaseDiff, diff
from ..anatomy.reading import marker_candidates, named
from ..data import looks_numeric, used_values, written_as_code
from .trigger import RELEASE_ID_PATTERN

#: at most this many quasi-identifiers are proposed (SUDA and the attacks grow with them)
MAX_QUASI_IDENTIFIERS = 8
#: a column with at most this many distinct values reads as categorical, even of numbers
CATEGORICAL_UP_TO = 20
#: quasi-identifiers are of low-to-mid cardinality: at most this many distinct values
QI_MAX_DISTINCT = 100

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


def _named(name: str, vocabulary: Sequence[str]) -> bool:
    return named(name, vocabulary)


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
    #: values written as codes (leading zeros, a plus sign, 16 digits or more)
    codes: bool = False
    #: distinct values per row (1.0: every row its own value)
    uniqueness: float = 0.0
    #: what the release did to it and how it reads (riskcore.anatomy)
    diff: ColumnDiff | None = None

    @property
    def generalized(self) -> bool:
        return self.diff is not None and self.diff.transform == "generalized"


@dataclass(frozen=True)
class Profile:
    """The tables' profile: per column, the rows of each table, the release read against its
    original, and the markers found."""

    columns: Mapping[str, ColumnProfile]
    rows: Mapping[str, int]
    kind: str
    evidence: tuple[str, ...]
    markers: tuple[str, ...] = ()
    per_column_markers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    diff: ReleaseDiff | None = None


def profile_column(name: str, original: pd.Series | None, released: pd.Series | None,
                   diff_: ColumnDiff | None = None) -> ColumnProfile:
    present = [s for s in (original, released) if s is not None]
    first = original if original is not None else released
    assert first is not None
    markers = tuple(sorted({m for s in present for m in marker_candidates(s)}))
    cleaned = [s.where(~s.astype(str).str.strip().isin(markers)) if markers else s
               for s in present]
    numeric = all(looks_numeric(s) for s in cleaned if s.notna().any())
    distinct = len(used_values(cleaned[0]))
    n = max(len(first), 1)
    return ColumnProfile(
        name=name, in_original=original is not None, in_released=released is not None,
        numeric=numeric, distinct=distinct, missing_share=float(cleaned[0].isna().mean()),
        markers=markers, codes=any(written_as_code(s) for s in present),
        uniqueness=distinct / n, diff=diff_)


def profile(original: pd.DataFrame, released: pd.DataFrame,
            control: pd.DataFrame | None = None, seed: int = 0) -> Profile:
    """The tables' profile (see the module doc)."""
    release = diff(original, released, control, seed=seed)
    names = list(dict.fromkeys([*map(str, original.columns), *map(str, released.columns)]))
    columns = {c: profile_column(c, original[c] if c in original.columns else None,
                                 released[c] if c in released.columns else None,
                                 release.columns.get(c))
               for c in names}
    found: dict[str, list[str]] = {}
    for col, p in columns.items():
        for m in p.markers:
            found.setdefault(m, []).append(col)
    every = tuple(sorted(m for m, cols in found.items() if len(cols) >= 2))
    per_column = {col: tuple(m for m in p.markers if m not in every)
                  for col, p in columns.items() if any(m not in every for m in p.markers)}
    return Profile(columns=columns, rows=dict(release.rows), kind=release.kind,
                   evidence=(*release.summary()[:1], *release.evidence), markers=every,
                   per_column_markers=per_column, diff=release)


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
    #: hierarchy files to write beside the config: file name -> (column, label map)
    hierarchies: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    unjudged: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _roles(prof: Profile, out: Proposal) -> None:
    """Direct identifiers, weight, household, sensitive columns and quasi-identifiers from
    the names and profiles. A column named like a demographic attribute is a
    quasi-identifier whatever its number of values (a zip code, a birth date): an attacker
    knows it; when it has many values a generalization is proposed."""
    cols = prof.columns
    n = max(prof.rows.get("original", 1), 1)
    for name, p in cols.items():
        if not p.in_original:
            continue
        if _named(name, DIRECT) and (p.uniqueness >= 0.5 or not p.numeric) and \
                not _named(name, DEMOGRAPHIC) and not _named(name, HOUSEHOLD):
            out.direct_identifiers.append(name)
            out.why[name] = "direct identifier: its name says so"
        elif p.uniqueness >= 0.95 and not p.numeric and not _named(name, SENSITIVE) and \
                not _named(name, DEMOGRAPHIC):
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
        whole = p.diff is not None and p.diff.reading.type == "categorical"
        if out.weight is None and _named(name, WEIGHT) and p.numeric and (
                not whole or p.distinct > QI_MAX_DISTINCT):
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
        elif _named(name, DEMOGRAPHIC):
            out.quasi_identifiers.append(name)
            out.why[name] = ("quasi-identifier: demographic by its name "
                             f"({p.distinct:,} distinct values)")
            if p.distinct > QI_MAX_DISTINCT and not p.generalized:
                out.warnings.append(
                    f"column '{name}' has {p.distinct:,} distinct values: a quasi-identifier "
                    "this fine makes most people unique (k = 1); generalize it before release "
                    "(bands, fewer digits, a year instead of a date) and declare how under "
                    "generalization:")
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
            out.why[name] = f"quasi-identifier: {p.distinct:,} distinct values"
        else:
            out.unjudged[name] = "not a role: edit if an attacker could know it"
    if len(out.quasi_identifiers) > MAX_QUASI_IDENTIFIERS:
        # demographic columns first: what an attacker knows best
        ranked = sorted(out.quasi_identifiers, key=lambda c: not _named(c, DEMOGRAPHIC))
        for name in ranked[MAX_QUASI_IDENTIFIERS:]:
            out.unjudged[name] = (f"not a role: more than {MAX_QUASI_IDENTIFIERS} "
                                  "quasi-identifiers were found; add it if an attacker knows it")
        out.quasi_identifiers = [c for c in out.quasi_identifiers
                                 if c in ranked[:MAX_QUASI_IDENTIFIERS]]


#: a learned label map with more labels than this share of the original's rows renumbers an
#: identifier (a household, a person), it does not generalize a column
KEY_LABELS = 0.05


def _generalization(name: str, d: ColumnDiff, release: ReleaseDiff | None,
                    out: Proposal) -> None:
    """How the release generalized a column, as the config declares it (a learned label map
    becomes a hierarchy file beside the config)."""
    detail = d.detail
    if d.domain == "interval":
        out.generalization[name] = "interval"
    elif d.domain == "mask":
        out.generalization[name] = "{mask: '*'}"
    elif d.domain == "round" and detail.get("unit"):
        out.generalization[name] = f"{{round: {float(detail['unit']):g}}}"
    elif d.domain in ("top_code", "bottom_code"):
        parts = [f"{k}_code: {float(detail[k]):g}" for k in ("top", "bottom") if k in detail]
        out.generalization[name] = "{" + ", ".join(parts) + "}"
    elif d.domain == "learned" and release is not None and release.label_maps.get(name):
        labels = int(detail.get("merged") or 0)
        if labels > KEY_LABELS * max(int(release.rows.get("original", 1)), 1):
            # a household or person number renumbered: its map is the key from the release's
            # pseudonyms back to the original's numbers, not a generalization to write down
            out.warnings.append(
                f"column '{name}': the release renumbered its {labels:,} labels (pseudonyms); "
                "the map back to the original's is a key to them, so it is not written "
                "beside the config")
            return
        file = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._") or "column"
        file = f"{file}-hierarchy.csv"
        out.hierarchies[file] = (name, dict(release.label_maps[name]))
        out.generalization[name] = f"{{hierarchy: {file}}}"


def propose(prof: Profile) -> Proposal:
    """Roles, types and generalizations from the profile (see the module doc)."""
    out = Proposal()
    _roles(prof, out)
    for name in [*out.quasi_identifiers, *out.sensitive,
                 *([out.household] if out.household else [])]:
        p = prof.columns[name]
        d = p.diff
        if d is None:
            continue
        if d.transform == "generalized":
            _generalization(name, d, prof.diff, out)
            if d.domain not in ("round", "top_code", "bottom_code"):
                out.types[name] = "categorical"
        elif not d.reading.split:
            # a clear reading is written down (a code is a category for every attack); a
            # split one is left to the gate, which measures the distance attacks both ways
            out.types[name] = d.reading.type if d.reading.type == "categorical" else (
                "integer" if p.numeric and not p.codes and _whole(d) else "continuous")
        if d.domain == "labels" and name in out.quasi_identifiers:
            out.warnings.append(
                f"column '{name}': the release's labels are not the original's and no map "
                "could be learned from the linked rows; declare how it was generalized "
                "(generalization: {hierarchy: FILE}) or the attacks on it are insufficient "
                "evidence")
    if not out.quasi_identifiers:
        out.warnings.append("no quasi-identifier was found: name at least one under "
                            "roles.quasi_identifiers")
    return out


def _whole(d: ColumnDiff) -> bool:
    return "whole numbers" in " ".join(d.reading.evidence)


def hierarchy_files(prop: Proposal) -> dict[str, str]:
    """The hierarchy files a proposal declares: ``original;released`` per line (ARX's form)."""
    out = {}
    for file, (_, mapping) in prop.hierarchies.items():
        lines = []
        for original, released in sorted(mapping.items()):
            cells = [v.replace('"', '""') for v in (original, released)]
            lines.append(";".join(f'"{c}"' if (";" in c or '"' in c) else c for c in cells))
        out[file] = "\n".join(lines) + "\n"
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
     "anonymeter (Giomi et al. 2023): the excess success over the control records"),
    ("linkability.risk", "max", 0.1, None, "anonymeter (Giomi et al. 2023)"),
    ("inference.risk", "max", 0.5, None,
     "anonymeter (Giomi et al. 2023): the worst secret; 0.5 is the attack alarm"),
    ("utility.column_shapes", "min", 0.8, None,
     "SDMetrics' quality report: a release that lost its data is not useful"),
]
POLICY_KEPT_ROWS = [
    ("k_anonymity.k", "min", 5, 3,
     "El Emam & Dankar 2008: k = 5 for a public release (3 for a restricted one, reviewed)"),
    ("reid.pRb", "max", 0.2, None, "ARX: highest prosecutor risk, 1/k at k = 5"),
    ("l_diversity.{sensitive}.distinct_l", "min", 2, 1,
     "sdcMicro: l = 1 discloses the sensitive value of a whole class (a person decides)"),
    ("singling_out.risk", "max", 0.1, None, "anonymeter (Giomi et al. 2023)"),
    ("inference.risk", "max", 0.5, None, "anonymeter (Giomi et al. 2023): the worst secret"),
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
    """Family name -> its parameters as YAML flow text, for the kind of release: the
    equivalence families for the original's records, copies and membership for new rows,
    both for a mixed release; the attacks and utility for every kind."""
    out: dict[str, str] = {}
    qis, sens = prop.quasi_identifiers, prop.sensitive
    if kind != "synthetic":
        out["k_anonymity"] = "{ks: [2, 3, 5, 10]}"
        out["reid"] = "{threshold: 0.1}"
        if sens:
            out["l_diversity"] = "{c: 2}"
        if prop.weight:
            out["sdc"] = "{max_global_risk: 0.01}"
        out["suda"] = "{}"
    out["copies"] = "{}"
    if kind in ("synthetic", "mixed") and control:
        out["membership"] = "{}"
    out["singling_out"] = "{}"
    if kind in ("synthetic", "mixed") and len(qis) >= 2:
        half = len(qis) // 2
        out["linkability"] = f"{{aux_a: {_list(qis[:half])}, aux_b: {_list(qis[half:])}}}"
    if sens:
        out["inference"] = "{}"
    out["utility"] = "{}"
    return out


def policy_rules(kind: str, weighted: bool) -> list[tuple[str, str, float, float | None, str]]:
    """The policy's checks for the kind of release (a mixed release: both sets, its copies
    judged beyond chance)."""
    if kind == "synthetic":
        return list(POLICY_NEW_ROWS)
    rules = list(POLICY_KEPT_ROWS)
    if kind == "mixed":
        seen = {r[0] for r in rules}
        rules = [r for r in rules if r[0] != "copies.exact_share"] + [
            r for r in POLICY_NEW_ROWS if r[0] not in seen]
    if weighted:
        rules += POLICY_WEIGHTED
    return rules


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
    """gate.yaml: every choice a plain line with its reason, the release's diff as comments."""
    lines = ["# Written by riskgate init from the tables; every line is yours to edit.",
             f"# The kind of release, from the data: {KIND_WORDS[prof.kind]}.",
             *(f"#   {e}" for e in prof.evidence)]
    if prof.diff is not None:
        lines.append("# What was done to each column (riskgate diff):")
        lines += [f"#   {line}" for line in prof.diff.summary()[1:]]
    lines += [f"release_id: {_yaml_text(release_id_from(str(urls['released'])))}",
              f"original: {_yaml_text(str(urls['original']))}",
              f"released: {_yaml_text(str(urls['released']))}"]
    if urls.get("control"):
        lines.append(f"control: {_yaml_text(str(urls['control']))}   # held out from the "
                     "original: the yardstick of chance")
    elif prof.kind in ("synthetic", "mixed"):
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
    lines = ["# Written by riskgate init. A release is APPROVED only if every check passes;",
             "# a value between a bound and its review bound goes to a person (NEEDS_REVIEW).",
             "version: 1", "on_insufficient: review", "checks:"]
    for figure, side, bound, review, why in policy_rules(prof.kind, bool(prop.weight)):
        family = figure.split(".", 1)[0]
        if family not in chosen:
            continue
        figures = ([figure.format(sensitive=s) for s in prop.sensitive]
                   if "{sensitive}" in figure else [figure])
        for fig in figures:
            lines.append(f"  - figure: {_yaml_text(fig)}")
            lines.append(f"    {side}: {bound}")
            if review is not None:
                lines.append(f"    review_{side}: {review}")
            lines.append(f"    # {why}")
    lines.append("")
    return "\n".join(comment_text(line) for line in lines)
