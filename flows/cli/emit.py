"""``riskgate emit-anonymized``: the pipeline's client of a deployed gate. It tells the gate a
release is ready (one event on the running Prefect API, ``PREFECT_API_URL``: an event emitted
into a throwaway server reaches nobody) and, with ``--wait``, exits with the verdict read from
the run's decision.json."""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

from riskcore.errors import ConfigError, RiskgateError
from riskcore.redact import redact_text
from riskcore.verdict import Verdict

from .common import add_storage_flag, api_url, console, file_sha256, out, storage_options

VERDICT_EXIT = {v.value: v.exit_code for v in Verdict}


class NotDelivered(RiskgateError):
    """The event did not reach the Prefect API."""


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    e = sub.add_parser("emit-anonymized", parents=[common],
                       help="emit riskgate.anonymization.completed (triggers a gate run)",
                       description="Tell the deployed gate that a release is ready, for a "
                       "pipeline the custodian runs: it needs the Prefect API's auth string, "
                       "and whoever holds that holds the rules (a judged pipeline writes a "
                       "release manifest instead: README, Deploy). The event carries the "
                       "release id, the released file and the SHA-256 of the files named, so "
                       "that the gate checks exactly those bytes. Exits non-zero when the event "
                       "was not delivered; with --wait, exits with the verdict's code (0 "
                       "approved, 1 rejected, 2 needs review, 3 error), read from the run's "
                       "decision.json (its signature checked with --public-key).")
    e.add_argument("--release", required=True, help="release id")
    e.add_argument("--released", "--url", dest="released", required=True,
                   help="URL of the released table")
    for key in ("control", "identification"):
        e.add_argument(f"--{key}", default=None, help=f"URL of the {key} table (refused "
                       "unless the pinned config's trigger.allow lists it)")
    e.add_argument("--no-checksums", action="store_true", dest="no_checksums",
                   help="do not send the files' SHA-256 (the gate then cannot verify them)")
    e.add_argument("--wait", action="store_true", help="wait for the verdict event")
    e.add_argument("--timeout", type=float, default=900.0,
                   help="--wait: seconds before giving up (default 900)")
    e.add_argument("--expect", choices=list(VERDICT_EXIT),
                   help="--wait: exit 0 only if the verdict is this one (else 1)")
    e.add_argument("--public-key", dest="public_key", default=None,
                   help="--wait: riskgate-signing.pub; the verdict then comes from the run's "
                   "decision.json, its signature checked, never from the event alone")
    add_storage_flag(e)
    e.set_defaults(handler=cmd_emit)


def event_size_limit() -> int:
    """The largest event Prefect keeps, in bytes of JSON (its server accepts a larger one with
    204 and drops it: no run would start)."""
    from prefect.settings import get_current_settings

    return int(get_current_settings().server.events.maximum_size_bytes)


def check_event_size(event: dict[str, Any]) -> None:
    """ConfigError when the event is larger than Prefect keeps (:func:`event_size_limit`)."""
    import json

    size, limit = len(json.dumps(event).encode("utf-8")), event_size_limit()
    if size > limit:
        raise ConfigError(f"the event would be {size:,} bytes, above the {limit:,} bytes "
                          "Prefect keeps (PREFECT_SERVER_EVENTS_MAXIMUM_SIZE_BYTES): the server "
                          "would accept and drop it, and no gate would run; shorten the URLs "
                          "and release id the event names")


def post_event(api: str, event: dict[str, Any]) -> None:
    """Deliver one event synchronously (the API answers 204 once it has it)."""
    import httpx

    from ..local_api import auth_headers, refused

    try:
        response = httpx.post(f"{api.rstrip('/')}/events", json=[event], timeout=10.0,
                              headers=auth_headers())
    except httpx.HTTPError as exc:
        raise NotDelivered(f"the event was not delivered: {type(exc).__name__} from {api}"
                           ) from None
    denied = refused(response.status_code, api)
    if denied is not None:
        raise denied
    if response.status_code >= 300:
        raise NotDelivered(f"the event was not delivered: the API answered "
                           f"{response.status_code}")


#: seconds between two looks at the API while a verdict is awaited: often in the first minute
#: (a gate ends in seconds), then every 2 s for a long wait (a paused review)
POLL_S, SLOW_POLL_S, FAST_FOR_S = 0.5, 2.0, 60.0


def triggered_run(client: Any, api: str, event_id: str) -> dict[str, Any] | None:
    """The flow run our event triggered (the deployment's trigger hands it the event's id),
    as the API returns it; None until it exists or when the API cannot say. The newest 50
    runs of the deployment are read: called until the run is found, then
    :func:`run_by_id` reads it alone (a page of 50 runs costs the server 50 ms a look)."""
    import httpx

    body = {"deployments": {"name": {"any_": ["on-anonymization"]}},
            "sort": "EXPECTED_START_TIME_DESC", "limit": 50}
    try:
        response = client.post(f"{api.rstrip('/')}/flow_runs/filter", json=body)
        runs = response.json() if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError):
        return None
    for run in runs if isinstance(runs, list) else []:
        trigger = (run.get("parameters") or {}).get("trigger") or {}
        if isinstance(trigger, dict) and str(trigger.get("event_id")) == event_id:
            return dict(run)
    return None


def run_by_id(client: Any, api: str, run_id: str) -> dict[str, Any] | None:
    """One flow run as the API returns it; None when the API cannot say."""
    import httpx

    try:
        response = client.get(f"{api.rstrip('/')}/flow_runs/{run_id}")
        run = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return dict(run) if isinstance(run, dict) else None


def wait_for_verdict(api: str, release_id: str, event_id: str, since: str, timeout: float
                     ) -> dict[str, Any]:
    """The verdict event of the run our event triggered (polling the API's event store).

    One HTTP client for the whole wait: a request through ``httpx.post`` builds a client and
    its TLS context each time (50 ms of CPU, measured), and a pipeline waiting a minute at two
    requests a look spent a fifth of a core on it. The triggered run is looked for among the
    deployment's runs until found, then read by its id."""
    import httpx

    from ..local_api import auth_headers

    body = {"filter": {"event": {"prefix": ["riskgate.release."]},
                       "resource": {"id": [f"riskgate.release.{release_id}"]},
                       "related": {"id": [f"prefect.event.{event_id}"]},
                       "occurred": {"since": since}}, "limit": 10}
    started = time.monotonic()
    deadline = started + timeout
    ended_at: float | None = None
    paused: dict[str, Any] | None = None
    run_id: str | None = None
    with httpx.Client(timeout=10.0, headers=auth_headers()) as client:
        while time.monotonic() < deadline:
            try:
                response = client.post(f"{api.rstrip('/')}/events/filter", json=body)
                events = (response.json().get("events", []) if response.status_code == 200
                          else [])
            except (httpx.HTTPError, ValueError):
                events = []
            if events:
                return dict(events[0].get("payload") or {})
            run = (run_by_id(client, api, run_id) if run_id
                   else triggered_run(client, api, event_id)) or {}
            run_id = run_id or (str(run["id"]) if run.get("id") else None)
            state = run.get("state") or {}
            if state.get("type") == "PAUSED" and paused is None:
                paused = run
                console.print(f"the gate run {run.get('name')} ({run.get('id')}) needs review: "
                              "it waits for a reviewer in the Prefect UI; waiting for the "
                              "review")
            elif state.get("type") != "PAUSED":
                paused = None
            if state.get("type") in ("CRASHED", "CANCELLED", "FAILED", "COMPLETED"):
                # a run that ends without its verdict event: an ERROR. A crashed or cancelled
                # run gets half a minute for the worker's hook to tell its ERROR verdict with
                # the reason (the hook loads the flow first: seconds on a busy worker), a
                # finished run as long for its own event (the server stores events every few
                # seconds)
                ended_at = ended_at or time.monotonic()
                grace = 30
                if time.monotonic() - ended_at > grace:
                    return {"verdict": "ERROR", "reasons": [
                        f"the gate run {run.get('name')} ({run.get('id')}) ended "
                        f"{state.get('type')} without a verdict: "
                        f"{redact_text(str(state.get('message') or 'no message'))[:300]}"]}
            time.sleep(POLL_S if time.monotonic() - started < FAST_FOR_S else SLOW_POLL_S)
    if paused is not None:  # a person has not decided yet: that is the verdict so far
        return {"verdict": "NEEDS_REVIEW", "reasons": [
            f"the gate run {paused.get('name')} ({paused.get('id')}) still waits for a reviewer "
            f"after {timeout:.0f} s (unanswered, it ends REJECTED at the config's "
            "review_timeout_s); riskgate history shows the final verdict"]}
    raise RiskgateError(f"no verdict for release {release_id} within {timeout:.0f} s; is a "
                        "worker running (prefect worker start --pool riskgate-process)?")


def decided(event: dict[str, Any], payload: dict[str, Any], options: dict[str, Any],
            public_key_url: str | None) -> dict[str, Any]:
    """The verdict from the run's decision.json rather than from the event (anyone holding
    the API's auth string can emit an event): its signature checked with the public key when
    one is given, and it must be the decision of this release and of the file announced.
    A line says what could not be checked; with a key, a decision that cannot be read or
    verified is an ERROR (exit 3), never the event's word."""
    from .trust import public_key, read_signed, signed_verdict

    url = event.get("decision_url")
    if not url:
        console.print("the verdict comes from the event alone: the run wrote no decision"
                      + (" (not verified)" if public_key_url else ""))
        return event if not public_key_url else {**event, "verdict": "ERROR", "reasons": [
            "no decision.json to verify", *(event.get("reasons") or [])]}
    try:
        decision_bytes, signature = read_signed(str(url), options)
        pem = public_key(public_key_url, options) if public_key_url else None
    except RiskgateError as exc:
        console.print(redact_text(f"the decision could not be read ({exc}): the verdict "
                                  "comes from the event alone"), markup=False, soft_wrap=True)
        return event if not public_key_url else {**event, "verdict": "ERROR", "reasons": [
            f"the decision could not be read to verify it: {exc}"]}
    doc, status = signed_verdict(decision_bytes, signature, pem)
    released = next((i.get("sha256") for i in doc.get("inputs") or []
                     if i.get("name") == "released"), None)
    announced = (payload.get("checksums") or {}).get("released")
    problems = [status] if status.startswith("not verified") or (
        public_key_url and status != "verified") else []
    if doc and doc.get("release_id") != payload.get("release_id"):
        problems.append(f"the decision is of release {doc.get('release_id')}, not "
                        f"{payload.get('release_id')}")
    if doc and announced and released not in (None, announced):
        problems.append("the decision judged another file than the one announced")
    console.print(f"decision: {status}", markup=False)
    if problems and public_key_url:  # what an unverified decision says can only be
        # shown, never trusted: an ERROR written before the gate could sign says why
        said = [f"the decision ({doc.get('verdict')}, not verified) says: {r}"
                for r in doc.get("reasons") or []] if doc else []
        return {**event, "verdict": "ERROR", "reasons": problems + said}
    for problem in problems:
        console.print(redact_text(f"warning: {problem}"), markup=False, soft_wrap=True)
    return {**event, "verdict": doc.get("verdict", event.get("verdict")),
            "reasons": doc.get("reasons", event.get("reasons"))}


def cmd_emit(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from riskcore.gate.trigger import TRIGGER_EVENT, parse_payload

    options = storage_options(args)
    payload: dict[str, Any] = {"release_id": args.release, "released": args.released}
    for key in ("control", "identification"):
        if getattr(args, key, None):
            payload[key] = getattr(args, key)
    if not args.no_checksums:
        payload["checksums"] = {k: file_sha256(payload[k], options)
                                for k in ("released", "control", "identification")
                                if payload.get(k)}
    parse_payload(payload)  # the gate's own validation, before anything leaves
    event_id = str(uuid.uuid4())
    since = datetime.now(UTC).isoformat()
    event = {"id": event_id, "occurred": since, "event": TRIGGER_EVENT,
             "resource": {"prefect.resource.id": f"riskgate.release.{args.release}",
                          "prefect.resource.name": args.release},
             "related": [], "payload": payload}
    check_event_size(event)
    api = api_url()
    post_event(api, event)
    out.print(f"emitted {TRIGGER_EVENT} for {args.release} (event {event_id})")
    if not args.wait:
        return 0
    console.print(f"waiting for the verdict of {args.release} (up to {args.timeout:.0f} s)...")
    verdict = wait_for_verdict(api, args.release, event_id, since, args.timeout)
    verdict = decided(verdict, payload, options, args.public_key)
    v = str(verdict.get("verdict"))
    out.print(f"verdict: {v}")
    for reason in (verdict.get("reasons") or [])[:10]:
        out.print(f"  - {redact_text(str(reason))}", markup=False, soft_wrap=True)
    if verdict.get("report_link") or verdict.get("report_url"):
        out.print(f"report: {verdict.get('report_link') or verdict.get('report_url')}",
                  markup=False, soft_wrap=True)
    if args.expect:
        if v != args.expect:
            console.print(f"error: expected the verdict {args.expect}, got {v}")
            return 1
        return 0
    return VERDICT_EXIT.get(v, 3)
