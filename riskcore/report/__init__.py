"""The HTML report: one self-contained file rendered with Jinja2, every value escaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from jinja2 import Environment, FileSystemLoader, select_autoescape

from ..errors import ConfigError
from . import views

_TEMPLATES = Path(__file__).parent / "templates"

HOW_TO_READ = {
    "k_anonymity": (
        "k is the size of the smallest group of records that share the same quasi-identifier "
        "values. A record in a group of size 1 is unique: anyone who knows those values finds it. "
        "The violation counts say how many records sit in groups smaller than each k."),
    "reid": (
        "Prosecutor risk assumes the attacker knows the person is in the release; journalist "
        "risk that they only know an identification table; marketer risk is the expected share "
        "of records re-identified when everyone is attacked. Ra is the share of records above "
        "the threshold T, Rb the highest risk of any record, Rc the average success rate."),
    "l_diversity": (
        "l is the number of different sensitive values within a group that shares quasi-"
        "identifiers. l = 1 means everyone in some group has the same sensitive value: knowing "
        "someone is in that group reveals it."),
    "t_closeness": (
        "t measures how far a group's distribution of a sensitive attribute is from the whole "
        "table's (earth mover's distance, 0 to 1). Large t means membership in a group says a "
        "lot about the sensitive value."),
    "sdc": (
        "Individual risk is the probability that a record is re-identified when the attacker "
        "matches it against the population its sample weight stands for (sdcMicro). The global "
        "risk is the expected share of re-identified records; household risk is the chance that "
        "a household is re-identified through any of its members. A global risk at or below 1 % "
        "is a common target."),
    "suda": (
        "SUDA2 finds minimal sample uniques: the smallest sets of quasi-identifier values that "
        "only one record has. A record with small such sets is easy to single out; DIS-SUDA "
        "turns the scores into a probability, and the per-variable contributions show which "
        "variables make records unique (the ones to generalize first)."),
    "population": (
        "Estimates of how many records are unique in the whole population, not only in the "
        "sample, from the sample's class sizes (Zayatz, Pitman, SNB; Dankar picks a model). "
        "A population unique found in the release can be re-identified with certainty."),
    "drisk": (
        "dRisk is the share of records whose perturbed numeric values stay so close to the "
        "original ones (within k standard deviations) that the original can be recognized."),
    "singling_out": (
        "The share of attempts in which a query built from the release isolates exactly one "
        "original record, corrected by the same attack on records that were not used for the "
        "release (control). The risk is that excess rate; 0 means the release adds nothing an "
        "attacker could not already guess. The interval is 95 %."),
    "linkability": (
        "How often the release lets an attacker link two halves of a person's record (two "
        "disjoint column sets) beyond what chance and the control records give."),
    "inference": (
        "How often an attacker who knows some columns infers a secret column correctly through "
        "the release, beyond the same attack on control records. Reported per secret; the gate "
        "uses the worst."),
    "alc": (
        "The Anonymity Loss Coefficient compares an attack on the release (best row match) with "
        "the best prediction possible from other people's raw data (the baseline), at the "
        "attack's most precise level of recall. Below 0.5 the release is safe for that secret; "
        "0.5 to 0.75 is at risk; 0.75 and above is serious. A negative value means the release "
        "helps an attacker less than the baseline. 'Insufficient evidence' is never a pass."),
}


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(str(_TEMPLATES)),
                      autoescape=select_autoescape(["html", "j2"], default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _fmt_number
    return env


def _fmt_number(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:.6g}"
    return str(value)


DETAILS = ("summary", "full")


def render_report(decision: dict[str, Any], measures: list[dict[str, Any]],
                  validation: dict[str, Any] | None, per_record: pd.DataFrame | None = None,
                  detail: str = "summary", examples: dict[str, Any] | None = None) -> str:
    """Render ``report.html`` from the run's outputs.

    Args:
        decision, measures, validation: the JSON documents of the run.
        per_record: ``per_record.parquet`` as a frame (risk distributions); without it the
            report falls back to the histograms stored in ``measures.json``.
        detail: "summary" shows no data values at all (row numbers, counts, column names);
            "full" also shows quasi-identifier values (the riskiest records and the values
            that drive SUDA uniqueness), labelled as example values. Values of sensitive
            attributes and direct identifiers are never shown.
        examples: the riskiest records' quasi-identifier values
            (:func:`riskcore.report.examples.example_records`), shown only with "full".
    """
    if detail not in DETAILS:
        raise ConfigError(f"report detail must be one of {DETAILS}, got {detail!r}")
    by_name = {m["measure"]: m for m in measures}
    checks = decision.get("checks", [])
    roles = decision.get("roles") or {}
    hidden = set(roles.get("sensitive") or ()) | set(roles.get("direct_identifiers") or ())
    families = [name for _, _, names in views.SECTIONS for name in names if name in by_name]
    sections = []
    for key, title, names in views.SECTIONS:
        present = [by_name[n] for n in names if n in by_name]
        if present:
            sections.append({"key": key, "title": title, "measures": present})
    config_yaml = yaml.safe_dump(decision.get("config") or {}, sort_keys=False,
                                 allow_unicode=True)
    return _env().get_template("report.html.j2").render(
        decision=decision, measures=measures, validation=validation, sections=sections,
        how_to_read=HOW_TO_READ, families=families, detail=detail,
        checks=[dict(c, advice=views.advice(c)) for c in checks],
        reid=views.reid_view(by_name, checks, per_record),
        sdc=views.sdc_view(by_name, per_record, hidden),
        attacks=views.attacks_view(by_name),
        alc=views.alc_view(by_name),
        examples=examples if detail == "full" else None,
        config_yaml=config_yaml,
        per_record_used=per_record is not None)
