"""Gate runs that end without reaching a verdict still end in one: a config or trigger that
cannot be used, a process killed or cancelled, a run lost with its worker. Each gets an ERROR
``decision.json`` where its output folder is known, the ``riskgate.release.ERROR`` event and
the ``verdict:ERROR`` tag (:mod:`riskgate.flows.release_gate`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from prefect.states import Crashed, State

from riskcore.errors import RiskgateError
from riskcore.gate.config import config_mapping
from riskcore.gate.outputs import error_record, write_run
from riskcore.gate.run import RunOutcome, error_outcome
from riskcore.gate.trigger import RELEASE_ID_PATTERN
from riskcore.processes import Terminated
from riskcore.redact import install_log_redaction, redact_text
from riskcore.storage import check_storage_options, join_url
from riskgate.tasks.tell import emit_verdict

from .names import VERDICT_STATE_NAMES
from .requests import (
    Request,
    event_payload,
    nightly_config,
    pinned_config,
    related,
    request_of,
    trigger_context,
)
from .verdicts import label_run

RELEASE_ID = re.compile(RELEASE_ID_PATTERN)


def fail_before_gate(exc: RiskgateError, run_id: str, request: Request,
                      context: dict[str, Any], options: Mapping[str, Any],
                      log: logging.Logger | logging.LoggerAdapter[Any], release_id: str = "",
                      config: Any = None) -> RunOutcome:
    """The config (or the trigger) could not be used: ERROR, written wherever an output
    location is known (the config's, the pinned one for a triggered run: never a payload's),
    under the payload's release id when it is a valid one, and the verdict event always."""
    message = f"{type(exc).__name__}: {redact_text(str(exc))}"
    trigger = request.trigger
    payload = (trigger or {}).get("payload") if isinstance(trigger, Mapping) else None
    if payload is None and trigger is not None:
        try:
            payload = event_payload(trigger, inline=not request.deployed)
        except Exception:
            payload = None
    payload = payload if isinstance(payload, Mapping) else {}
    release_id = release_id or str(payload.get("release_id") or "")
    output_url = None
    source = config if config is not None else request.config
    if source is None:  # a triggered run's pinned config, a nightly run's configured one
        try:
            source = pinned_config(None) if request.pinned else nightly_config()
        except Exception:
            source = None
    if source is not None:
        try:  # the raw config, unvalidated: only where to write and under which release
            overrides = None if request.pinned or request.refused else request.overrides
            raw, _ = config_mapping(source, overrides, options)
            output_url = output_url or raw.get("output_url")
            release_id = release_id or str(raw.get("release_id") or "")
        except RiskgateError:
            pass
    release_id = release_id if RELEASE_ID.match(release_id) else "unknown-release"
    outcome = error_outcome(release_id, run_id, message)
    if isinstance(output_url, str):
        folder = join_url(output_url, release_id, run_id)
        try:
            check_storage_options(options)
            written = write_run(folder, {}, error_record(release_id, run_id, message, context),
                                options)
            outcome = RunOutcome(**{**outcome.__dict__, "folder": folder,
                                    "decision_url": written["decision.json"], "written": True})
        except RiskgateError as werr:
            log.warning("the ERROR decision could not be written: %s", werr)
    log.error("release %s: ERROR: %s", release_id, message)
    return outcome


def ended_without_verdict(flow: Any, flow_run: Any, state: State[Any]) -> None:
    """``on_crashed`` / ``on_cancellation``: a gate run whose process died (killed, out of
    memory) or that was cancelled still ends in an ERROR verdict. The worker that watched the
    process runs this once the run is Crashed or Cancelled: an ERROR ``decision.json`` where the
    run's output folder is known (never over a finished run's), the ``riskgate.release.ERROR``
    event (what a waiting pipeline reads), the ``verdict:ERROR`` tag and the state's message
    (a crash stays Crashed, now named "Error"; a cancellation stays Cancelled). A run that
    already has its verdict (the gate's own ERROR ends Crashed too) is left as it is."""
    if state.is_crashed() and state.name == VERDICT_STATE_NAMES["ERROR"]:
        return  # the gate's own ERROR, already told
    how = "was cancelled" if state.is_cancelled() else "ended without a verdict"
    tell_error(flow_run, state, how)


def tell_error(flow_run: Any, state: State[Any], how: str) -> None:
    """The ERROR verdict of a gate run that ended without one (see
    :func:`ended_without_verdict` and :func:`lost_run_verdict`); never raises."""
    log = logging.getLogger("riskgate.gate")
    try:
        install_log_redaction()
        tags = list(getattr(flow_run, "tags", None) or [])
        if any(t.startswith("verdict:") and t != "verdict:NEEDS_REVIEW" for t in tags):
            return  # its verdict was told before the process ended
        params = dict(getattr(flow_run, "parameters", None) or {})
        request = request_of(flow_run, params)
        trigger = dict(request.trigger) if request.trigger is not None else None
        exc = Terminated(f"the gate's process {how} ({state.type.value}: "
                         f"{redact_text(str(state.message or 'no message'))[:200]}); no "
                         "decision was reached: re-run the gate")
        known = next((t.split(":", 1)[1] for t in tags if t.startswith("release:")), "")
        options = params.get("storage_options")
        outcome = fail_before_gate(exc, str(flow_run.id), request,
                                    trigger_context(trigger, None),
                                    dict(options) if isinstance(options, Mapping) else {}, log,
                                    release_id=known)
        emit_verdict(outcome.to_dict(), related=related(trigger))
        label_run(outcome.release_id, outcome.verdict, run_id=flow_run.id)
        if state.is_crashed():
            from prefect.client.orchestration import get_client

            with get_client(sync_client=True) as client:
                client.set_flow_run_state(flow_run.id, Crashed(
                    name=VERDICT_STATE_NAMES["ERROR"], message=f"{outcome.release_id}: ERROR ("
                    f"{outcome.reasons[0][:200]})"), force=True)
    except Exception as err:  # a hook never raises into the worker
        log.warning("the ERROR verdict of the ended run %s could not be told: %s",
                    getattr(flow_run, "id", "?"), redact_text(f"{type(err).__name__}: {err}"))
