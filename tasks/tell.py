"""Telling the world: Prefect artifacts on the run and the ``riskgate.release.<verdict>`` event."""

from __future__ import annotations

import re
from typing import Any

from prefect import task
from prefect.artifacts import (create_link_artifact, create_markdown_artifact,
                               create_table_artifact)
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event


def artifact_key(release_id: str, suffix: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", release_id.lower()).strip("-") or "release"
    return f"riskgate-{base}-{suffix}"[:100]


def summary_markdown(record: dict[str, Any], report_url: str | None) -> str:
    lines = [f"# Release gate: {record['release_id']}", "",
             f"**Verdict: {record['verdict']}**", ""]
    failed = [c for c in record.get("checks", []) if c["verdict"] != "pass"]
    if failed:
        lines += ["| check | value | threshold | verdict |", "|---|---|---|---|"]
        for c in failed:
            value = "n/a" if c["value"] is None else f"{c['value']:.6g}"
            lines.append(f"| `{c['figure']}` | {value} | {c['threshold']} | {c['verdict']} |")
        lines.append("")
    for reason in record.get("reasons", [])[:20]:
        lines.append(f"- {reason}")
    if report_url:
        lines += ["", f"Report: {report_url}"]
    return "\n".join(lines)


@task(name="tell", cache_policy=NO_CACHE, retries=1)
def publish(record: dict[str, Any], report_url: str | None) -> None:
    """Markdown summary, a table of checks, a link to the report, and the verdict event."""
    release_id = record["release_id"]
    create_markdown_artifact(key=artifact_key(release_id, "summary"),
                             markdown=summary_markdown(record, report_url),
                             description=f"riskgate verdict for {release_id}")
    rows = [{"check": c["figure"], "value": c["value"], "threshold": c["threshold"],
             "verdict": c["verdict"]} for c in record.get("checks", [])]
    if rows:
        create_table_artifact(key=artifact_key(release_id, "checks"), table=rows,
                              description="policy checks")
    if report_url:
        create_link_artifact(key=artifact_key(release_id, "report"), link=report_url,
                             link_text=f"riskgate report {release_id}")
    verdict = record["verdict"]
    emit_event(
        event=f"riskgate.release.{verdict.lower()}",
        resource={"prefect.resource.id": f"riskgate.release.{release_id}",
                  "prefect.resource.name": release_id},
        payload={"release_id": release_id, "verdict": verdict,
                 "approved": record.get("approved", False),
                 "flow_run_id": record.get("flow_run_id"),
                 "report_url": report_url, "reasons": record.get("reasons", [])[:20]},
    )
