"""Deployments built in Python (for ``riskgate serve``); deployments/prefect.yaml mirrors them."""

from __future__ import annotations

from typing import Any

from prefect.events import DeploymentEventTrigger

from flows.release_gate import release_gate

TRIGGER_EVENT = "riskgate.anonymization.completed"

#: Parameters of a triggered run, templated from the event's payload.
TRIGGER_PARAMETERS: dict[str, Any] = {
    "config": "{{ event.payload.config }}",
    "overrides": {
        "release_id": "{{ event.payload.release_id }}",
    },
    "triggered": True,
    "config_name": "{{ event.payload.release_id }}",
}


def build_deployments(config_url: str, cron: str = "0 2 * * *") -> list[Any]:
    scheduled = release_gate.to_deployment(
        name="nightly-recheck", cron=cron, parameters={"config": config_url},
        description="Re-check the configured release every night.", tags=["riskgate"])
    triggered = release_gate.to_deployment(
        name="on-anonymization", description="Gate a release when an anonymization job ends.",
        tags=["riskgate"],
        triggers=[DeploymentEventTrigger(expect={TRIGGER_EVENT},
                                         match_related={},
                                         parameters=TRIGGER_PARAMETERS)])
    return [scheduled, triggered]
