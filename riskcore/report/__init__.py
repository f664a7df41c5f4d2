"""The HTML report: one self-contained file rendered with Jinja2, every value escaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

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


def render_report(decision: dict[str, Any], measures: list[dict[str, Any]],
                  validation: dict[str, Any] | None) -> str:
    """Render ``report.html`` from the JSON outputs (decision, measures, validation)."""
    return _env().get_template("report.html.j2").render(
        decision=decision, measures=measures, validation=validation, how_to_read=HOW_TO_READ)
