"""Telling the world: Prefect artifacts on the run and the ``riskgate.release.<verdict>`` event.

Everything here is redacted; the report link is the one exception that is not rewritten: it is
built by riskgate from a validated URL (an HTTP(S) base URL, or a presigned URL that carries the
access key *id* and a signature, never a secret).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from prefect import task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event

from riskcore.redact import redact, redact_text, visible

VERDICT_EVENT = "riskgate.release.{verdict}"
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")
_NOT_KEY = re.compile(r"[^a-z0-9-]++")


def md(text: Any) -> str:
    """Text escaped for Markdown (a threshold ``>= 3`` stays text, not a block quote)."""
    return _MD_SPECIAL.sub(r"\\\1", visible(str(text))).replace("\n", " ")


def number(value: Any) -> str:
    """A figure rounded to 4 significant digits ('n/a' when absent)."""
    if value is None:
        return "n/a"
    if isinstance(value, (int, float)):
        return f"{value:.4g}"
    return str(value)


def artifact_key(release_id: str, suffix: str) -> str:
    base = _NOT_KEY.sub("-", release_id.lower()).strip("-") or "release"
    return f"riskgate-{base}-{suffix}"[:100]


def not_passed(checks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [c for c in checks if c.get("verdict") != "pass"]


def check_line(c: Mapping[str, Any]) -> str:
    """One check on one line (for the flow log)."""
    return (f"{c['verdict'].upper()}: {c['figure']} = {number(c.get('value'))} "
            f"(threshold {c.get('threshold') or 'none'}): {c.get('message', '')}")


def summary_markdown(outcome: Mapping[str, Any], pending: bool = False) -> str:
    """Verdict, the checks that did not pass (value and threshold), the reasons, the report."""
    verdict = "AWAITING REVIEW" if pending else outcome["verdict"]
    lines = [f"# Release gate: {md(outcome['release_id'])}", "", f"**Verdict: {md(verdict)}**",
             ""]
    failed = not_passed(outcome.get("checks") or [])
    if failed:
        lines += ["| check | value | threshold | verdict |", "|---|---|---|---|"]
        for c in failed:
            lines.append(f"| {md(c['figure'])} | {md(number(c.get('value')))} | "
                         f"{md(c.get('threshold') or '')} | {md(c['verdict'])} |")
        lines.append("")
    for reason in (outcome.get("reasons") or [])[:20]:
        lines.append(f"- {md(reason)}")
    link, url = outcome.get("report_link"), outcome.get("report_url")
    lines.append("")
    if link:
        lines.append(f"[Open the report]({link})")
    elif url:
        lines.append(f"The report is a file on the machine that ran the gate: {md(url)} "
                     "(set report.base_url, or write outputs to an object store, to get a link)")
    else:
        lines.append("No report was written (the outputs could not be written; see the "
                     "reasons).")
    return "\n".join(lines)


@task(name="tell", cache_policy=NO_CACHE, retries=0)
def publish(outcome: dict[str, Any], pending: bool = False,
            related: Sequence[Mapping[str, str]] = ()) -> None:
    """Markdown summary, a table of checks, a link to the report, and (unless pending) the
    verdict event."""
    outcome = {**redact({k: v for k, v in outcome.items() if k != "report_link"}),
               "report_link": outcome.get("report_link")}
    release_id = outcome["release_id"]
    create_markdown_artifact(key=artifact_key(release_id, "summary"),
                             markdown=summary_markdown(outcome, pending),
                             description=f"riskgate verdict for {release_id}")
    rows = [{"check": c["figure"], "value": number(c.get("value")),
             "threshold": c.get("threshold"), "verdict": c["verdict"]}
            for c in outcome.get("checks") or []]
    if rows:
        create_table_artifact(key=artifact_key(release_id, "checks"), table=rows,
                              description="policy checks")
    if outcome.get("report_link"):
        create_link_artifact(key=artifact_key(release_id, "report"),
                             link=outcome["report_link"],
                             link_text=f"riskgate report {release_id}")
    if pending:
        return
    emit_verdict(outcome, related)


def emit_verdict(outcome: Mapping[str, Any], related: Sequence[Mapping[str, str]] = ()) -> None:
    """The ``riskgate.release.<verdict>`` event (what pipelines wait for)."""
    verdict = outcome["verdict"]
    release_id = outcome["release_id"]
    emit_event(
        event=VERDICT_EVENT.format(verdict=verdict.lower()),
        resource={"prefect.resource.id": f"riskgate.release.{release_id}",
                  "prefect.resource.name": release_id},
        related=[dict(r) for r in related],
        payload={"release_id": release_id, "verdict": verdict,
                 "approved": verdict == "APPROVED", "flow_run_id": outcome.get("run_id"),
                 "decision_url": outcome.get("decision_url"),
                 "report_url": outcome.get("report_url"),
                 "report_link": outcome.get("report_link"),
                 "reasons": [redact_text(r) for r in (outcome.get("reasons") or [])[:20]]},
    )
