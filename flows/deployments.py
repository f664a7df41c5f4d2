"""The gate's deployments, defined once.

``deployments/prefect.yaml`` is generated from :data:`DEPLOYMENTS` (``riskgate deployments
--write``; a test checks that the committed file is what this module renders), and
``riskgate serve`` builds the same deployments from the same definitions. The entrypoint is a
module path, so a worker runs the gate from the installed package: no pull step, no working
directory, the same in a checkout and in the image.

Protegrity's 5 gate runs at once is kept twice. At the door, the work pool's concurrency limit
(``riskgate deploy`` and ``riskgate limits --gate N`` size it): runs beyond it wait Scheduled and
start no process, and a paused review does not count (Prefect counts Pending and Running runs).
Inside, the global concurrency limit ``riskgate-gate`` that every gate run takes (deployments,
``serve`` and the CLI alike), not a deployment ``concurrency_limit``:
with Prefect 3.8 a deployment limit revokes a paused run's lease, and the run's own lease
renewal then cancels it about four minutes into a review (observed on a real server). The
global slot is released while a review waits and taken again to finish.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from riskcore.gate.trigger import TRIGGER_EVENT

from .names import LOST_MESSAGE, VERDICT_STATE_NAMES, WORK_POOL

#: seconds between a gate process's heartbeats (Prefect's minimum; the work pool's job
#: environment sets it) and the silence after which the server declares a gate run lost: its
#: worker and its process gone (a host or container lost), no hook left to run
HEARTBEAT_S = 30
LOST_AFTER_S = 3 * HEARTBEAT_S
#: the shortest silence ``riskgate deploy --lost-after`` accepts: two missed heartbeats, so that
#: one late beat of a busy process never ends a living run
MIN_LOST_AFTER_S = 2 * HEARTBEAT_S
LOST_GATE_AUTOMATION = "riskgate: a gate run that stops beating ends ERROR"
#: the events that show a gate run's process alive (or about to start): each arms the lost-run
#: automation again for its silence (:data:`LOST_AFTER_S`, or ``riskgate deploy --lost-after``)
ALIVE_EVENTS = ("prefect.flow-run.Pending", "prefect.flow-run.Submitting",
                "prefect.flow-run.Running", "prefect.flow-run.heartbeat")
#: the deployed gate: pinned rules, no config parameter (riskgate.flows.release_gate)
ENTRYPOINT = "riskgate.flows.release_gate.deployed_gate"
LOST_ENTRYPOINT = "riskgate.flows.release_gate.lost_run_verdict"
WATCH_ENTRYPOINT = "riskgate.flows.watch.watch_releases"
NIGHTLY_CRON = "0 2 * * *"
#: seconds between two looks for new release manifests (riskgate deploy --watch-every)
WATCH_EVERY_S = 60
#: watch-releases' work queue in the pool, and its priority: after the gates' default queue
#: (priority 1), so that a restarted worker's backlog of late watcher runs never holds a gate
WATCH_QUEUE = "watch"
WATCH_QUEUE_PRIORITY = 10

#: what the trigger hands the flow: the event's id and time only. The flow reads the payload
#: from the API's event store and validates it, so that nothing a pipeline put in a payload
#: (a credential in a URL, say) becomes a flow-run parameter in Prefect's database
TRIGGER_PARAMETERS: dict[str, Any] = {
    "trigger": {
        "event_id": "{{ event.id | string }}",
        "event": "{{ event.event }}",
        "occurred": "{{ event.occurred | string }}",
    },
}

#: a gate run the automation declared lost triggers the rest of its ERROR verdict
LOST_TRIGGER: dict[str, Any] = {
    "type": "event",
    "enabled": True,
    "match": {"prefect.resource.id": "prefect.flow-run.*",
              "prefect.state-message": f"{LOST_MESSAGE}*"},
    "expect": [f"prefect.flow-run.{VERDICT_STATE_NAMES['ERROR']}"],
    "parameters": {"lost_run": "{{ event.resource.id }}"},
}

TRIGGER: dict[str, Any] = {
    "type": "event",
    "enabled": True,
    "match": {"prefect.resource.id": "riskgate.release.*"},
    "expect": [TRIGGER_EVENT],
    "parameters": TRIGGER_PARAMETERS,
}

#: name -> definition (the keys of a prefect.yaml deployment); no gate deployment takes a
#: config, an override or a policy: its rules are pinned by riskgate deploy. The server
#: checks a run's parameters against the flow's when the run is created
#: (enforce_parameter_schema: true; riskgate deploy closes the schema to any other parameter,
#: :func:`closed_schema`): a payload inside ``trigger``, or a config, is refused before a run
#: exists, and nothing a pipeline put there is stored in Prefect's database
DEPLOYMENTS: dict[str, dict[str, Any]] = {
    "nightly-recheck": {
        "description": (
            "Re-check the published release every night against the current policy. The "
            "schedule is inactive until the config URL is set: riskgate deploy "
            "--nightly-config URL (the Prefect Variable riskgate_nightly_config, its SHA-256 "
            "recorded in this deployment's tags)."),
        "tags": ["riskgate", "scheduled"],
        "parameters": {},
        "enforce_parameter_schema": True,
        "schedules": [{"cron": NIGHTLY_CRON, "timezone": "UTC", "active": False}],
    },
    "on-anonymization": {
        "description": (
            "Gate a release under the custodian's pinned config (riskgate deploy "
            "--trigger-config URL, its SHA-256 recorded in this deployment's tags), for each "
            "release manifest watch-releases finds and each riskgate.anonymization.completed "
            "event. A manifest or payload names release_id, released and checksums, and only "
            "what the config's trigger.allow lists; never the config, policy, original or "
            "output folder, and no run parameter can. At most 5 gate runs at once (the job "
            "queue limit Protegrity's best practices recommend: the riskgate-gate limit) and 60 "
            "triggered runs a minute (the riskgate-trigger-rate limit)."),
        "tags": ["riskgate", "triggered"],
        "parameters": {},
        "enforce_parameter_schema": True,
        "triggers": [TRIGGER],
    },
    "watch-releases": {
        "entrypoint": WATCH_ENTRYPOINT,
        "description": (
            "Every minute (riskgate deploy --watch-every), look under the pinned config's "
            "trigger.released_prefixes for release manifests (release.json) not yet gated, "
            "by their SHA-256, and start one on-anonymization run for each: the way a judged "
            "pipeline triggers its gate with nothing but write access to its prefix. Inactive "
            "until riskgate deploy --trigger-config URL."),
        "tags": ["riskgate", "watch"],
        "parameters": {},
        "enforce_parameter_schema": False,
        "schedules": [{"interval": WATCH_EVERY_S, "active": False}],
        "concurrency_limit": {"limit": 1, "collision_strategy": "CANCEL_NEW"},
        "work_queue_name": WATCH_QUEUE,
    },
    "lost-run-verdict": {
        "entrypoint": LOST_ENTRYPOINT,
        "description": (
            "The rest of the ERROR verdict of a gate run lost with its worker (decision.json, "
            "the riskgate.release.ERROR event, the verdict:ERROR tag): triggered when the "
            "lost-run automation that riskgate deploy installs sets such a run Crashed "
            "'Error'; runs on whichever worker of the pool is alive."),
        "tags": ["riskgate"],
        "parameters": {},
        "triggers": [LOST_TRIGGER],
    },
}
#: the deployments of the release-gate flow (the gates), by name
GATES = tuple(name for name, spec in DEPLOYMENTS.items() if "entrypoint" not in spec)


def closed_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A deployment's parameter schema with no parameter beyond the flow's (Prefect leaves
    the top level open): what ``riskgate deploy`` sets on the gates, so that the API refuses
    a run created with any other."""
    if not isinstance(schema, dict):
        return schema
    return {**schema, "additionalProperties": False}
#: the deployments that run under the triggered gates' pinned config, and the nightly one's
PINNED_BY_TRIGGER = ("on-anonymization", "watch-releases")
PINNED_BY_NIGHTLY = ("nightly-recheck",)

HEADER = """\
# riskgate deployments (Prefect 3), generated by `riskgate deployments --write` from
# riskgate/flows/deployments.py: edit that module, not this file.
# Deploy from the repository root (see the README's Deploy section):
#   riskgate deploy          # work pool, limits, then: prefect deploy --all --prefect-file ...
"""


def prefect_yaml() -> str:
    """The text of ``deployments/prefect.yaml``."""
    pool = {"name": WORK_POOL, "work_queue_name": "default"}
    shared: dict[str, Any] = {"work_pools": {"process": pool}, "schedules": {},
                              "triggers": {}}
    deployments = []
    for name, spec in DEPLOYMENTS.items():
        d: dict[str, Any] = {"name": name, "entrypoint": ENTRYPOINT, "work_pool": pool}
        d.update(copy.deepcopy(spec))
        if "work_queue_name" in d:  # a queue of its own in the pool
            d["work_pool"] = {"name": WORK_POOL, "work_queue_name": d.pop("work_queue_name")}
        for key in ("schedules", "triggers"):  # one object, referenced: a YAML anchor
            if key in d:
                shared[key][name] = d[key][0]
        deployments.append(d)
    doc = {"name": "riskgate", "prefect-version": "3.8.8", "definitions": shared, "pull": [],
           "deployments": deployments}
    text = yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True)
    # PyYAML numbers the anchors in the order the deployments reuse them
    for anchor, label in (("id001", "process_pool"), ("id002", "nightly"),
                          ("id003", "anonymization_completed"), ("id004", "watch"),
                          ("id005", "gate_run_lost")):
        text = text.replace(f"&{anchor}\n", f"&{label}\n").replace(f"*{anchor}\n",
                                                                   f"*{label}\n")
    return HEADER + text


def runner_deployments(cron: str = NIGHTLY_CRON, pinned: dict[str, str | None] | None = None,
                       watch_every: int = WATCH_EVERY_S) -> list[Any]:
    """The same deployments for ``riskgate serve``, each tagged with the SHA-256 of the
    config it runs under (``pinned``: deployment name -> SHA-256, None when none is set);
    a schedule is active when its deployment has one."""
    from prefect.events import DeploymentEventTrigger
    from prefect.schedules import Cron, Interval

    from .names import CONFIG_TAG_PREFIX
    from .release_gate import deployed_gate, lost_run_verdict
    from .watch import watch_releases

    flows = {ENTRYPOINT: deployed_gate, LOST_ENTRYPOINT: lost_run_verdict,
             WATCH_ENTRYPOINT: watch_releases}
    out = []
    for name, spec in DEPLOYMENTS.items():
        sha = (pinned or {}).get(name)
        tags = list(spec["tags"]) + ([f"{CONFIG_TAG_PREFIX}{sha}"] if sha else [])
        kwargs: dict[str, Any] = {"name": name, "description": spec["description"],
                                  "tags": tags, "parameters": dict(spec["parameters"])}
        if "enforce_parameter_schema" in spec:
            kwargs["enforce_parameter_schema"] = spec["enforce_parameter_schema"]
        if "schedules" in spec:
            sched = spec["schedules"][0]
            kwargs["schedules"] = [
                Cron(cron, timezone=sched["timezone"], active=bool(sha)) if "cron" in sched
                else Interval(watch_every, active=bool(sha))]
        if "triggers" in spec:
            kwargs["triggers"] = [DeploymentEventTrigger(**{k: v for k, v in t.items()
                                                            if k != "type"})
                                  for t in spec["triggers"]]
        if "concurrency_limit" in spec:
            from prefect.client.schemas.objects import ConcurrencyLimitConfig

            kwargs["concurrency_limit"] = ConcurrencyLimitConfig(**spec["concurrency_limit"])
        flow = flows[spec.get("entrypoint", ENTRYPOINT)]
        out.append(flow.to_deployment(**kwargs))  # type: ignore[attr-defined]
    return out


def lost_gate_automation(deployment_ids: list[str], lost_after_s: int = LOST_AFTER_S) -> Any:
    """The server-side half of "every crash still ends in a verdict": a gate run of
    these deployments that a worker has submitted (or that has sent a heartbeat) and that then
    sends nothing, no state on its way to running, no heartbeat, no final state, for
    ``lost_after_s`` seconds (:data:`LOST_AFTER_S` unless ``riskgate deploy --lost-after``
    says otherwise) is set Crashed, named "Error", with the reason in its message
    (the ERROR verdict's colour and name in the UI; ``emit-anonymized --wait`` exits 3), which
    triggers the ``lost-run-verdict`` deployment for the rest of the verdict. A run whose
    process died while its worker lives gets the full ERROR verdict (decision, event, tag)
    from the flow's ``on_crashed`` hook instead; this automation is for the run that nothing
    on the worker's side survives. Only the deployments' runs are
    watched: a command-line gate sends no heartbeats (``riskgate gate`` turns Prefect's default
    off) and is never declared lost."""
    from datetime import timedelta

    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture

    return Automation(
        name=LOST_GATE_AUTOMATION,
        description=("Created by riskgate deploy: a gate run whose process stopped sending "
                     f"heartbeats for {lost_after_s} s (its worker and process lost) ends "
                     "Crashed, named Error: the ERROR verdict."),
        enabled=True,
        trigger=EventTrigger(
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related={"prefect.resource.id": [f"prefect.deployment.{d}"
                                                   for d in deployment_ids]},
            # a run armed when its worker submits it (Pending, Submitting: a worker lost
            # while starting the process leaves a run that never beats) and again by every
            # state on the way to running and every heartbeat; only a final state disarms it
            # (a Paused event must not: a run killed right after pausing would never be
            # declared lost). A final state's event is named after the state: a gate's
            # after its verdict.
            after=set(ALIVE_EVENTS),
            expect={*ALIVE_EVENTS,
                    *(f"prefect.flow-run.{name}" for name in (
                        "Completed", "Failed", "Crashed", "Cancelled",
                        *VERDICT_STATE_NAMES.values()))},
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=lost_after_s),
        ),
        actions=[ChangeFlowRunState(
            state=StateType.CRASHED, name="Error",
            message=(f"ERROR: the gate run stopped sending heartbeats for {lost_after_s} s "
                     "(its worker and its process were lost) and reached no verdict: re-run "
                     "the gate (the lost-run-verdict deployment writes its ERROR decision)"))],
    )
