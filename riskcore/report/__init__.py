"""The HTML report: one self-contained file rendered with Jinja2, every value escaped."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from jinja2 import Environment, FileSystemLoader, select_autoescape
from jinja2.bccache import Bucket, FileSystemBytecodeCache

from ..errors import ConfigError
from ..redact import visible
from . import views

_TEMPLATES = Path(__file__).parent / "templates"

def how_to_read() -> dict[str, str]:
    """Each family's how-to-read paragraph, from the registry."""
    from ..measures import FAMILIES

    return {f.name: f.how_to_read for f in FAMILIES}


@functools.cache
def _env() -> Environment:
    """One environment per process: it keeps the compiled template (0.2 s to compile), so a
    process that renders many reports (tests, ``riskgate serve``) compiles it once."""
    env = Environment(loader=FileSystemLoader(str(_TEMPLATES)),
                      autoescape=select_autoescape(["html", "j2"], default=True),
                      trim_blocks=True, lstrip_blocks=True, finalize=_shown,
                      bytecode_cache=_compiled_cache())
    env.filters["num"] = _fmt_number
    return env


class _QuietCache(FileSystemBytecodeCache):
    """Jinja's on-disk cache of compiled templates whose failures cost only the compilation:
    a folder that cannot be read or written (full, read-only) is a cache miss, never an
    error of the report."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError):
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _compiled_cache() -> FileSystemBytecodeCache | None:
    """The template compiled once per user, not once per process: every gate is a new process
    and compiling the report's template costs 0.1 s of it (loading it, a millisecond). Jinja
    keeps it in a private folder of the user's (mode 0700, refused when another user owns
    it), each entry checked against the template's source; none where that folder cannot be
    made."""
    try:
        return _QuietCache()
    except (OSError, RuntimeError):
        return None


def _shown(value: Any) -> Any:
    """Every value a template prints: text with its control and bidirectional-override
    characters made visible (markup built by the report's own code passes unchanged)."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return visible(value)
    return value


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
                  detail: str = "summary", examples: dict[str, Any] | None = None,
                  history: list[dict[str, Any]] | None = None) -> str:
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
        history: this release's earlier runs with their figures
            (:func:`riskcore.gate.history.earlier_figures`), plotted on the R-U map.
    """
    if detail not in DETAILS:
        raise ConfigError(f"report detail must be one of {DETAILS}, got {detail!r}")
    by_name = {m["measure"]: m for m in measures}
    checks = decision.get("checks", [])
    roles = decision.get("roles") or {}
    hidden = set(roles.get("sensitive") or ()) | set(roles.get("direct_identifiers") or ())
    sections: list[dict[str, Any]] = []
    for key, title, names in views.sections():
        present = [by_name[n] for n in names if n in by_name]
        if present:
            sections.append({"key": key, "title": title, "measures": present})
    families = [m["measure"] for s in sections for m in s["measures"]]
    config_yaml = yaml.safe_dump(decision.get("config") or {}, sort_keys=False,
                                 allow_unicode=True)
    return _env().get_template("report.html.j2").render(
        decision=decision, measures=measures, validation=validation, sections=sections,
        how_to_read=how_to_read(), families=families, detail=detail,
        checks=[dict(c, advice=views.advice(c)) for c in checks],
        reid=views.reid_view(by_name, checks, per_record),
        sdc=views.sdc_view(by_name, per_record, hidden),
        attacks=views.attacks_view(by_name),
        copies=views.copies_view(by_name),
        membership=views.membership_view(by_name),
        composition=views.composition_view(by_name),
        alc=views.alc_view(by_name),
        utility=views.utility_view(by_name, checks, history),
        examples=examples if detail == "full" else None,
        config_yaml=config_yaml,
        per_record_used=per_record is not None)
