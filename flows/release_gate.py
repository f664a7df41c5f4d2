"""The release gate: one Prefect flow run per release candidate.

load (parallel) -> validate (Great Expectations) -> encode once -> measures (parallel tasks) ->
policy -> optional human sign-off -> outputs (decision.json last) -> artifacts and the
``riskgate.release.<verdict>`` event. The sequence and its fail-closed rules live in
:func:`riskcore.gate.run.run_gate`; this flow runs each step as a task.

The verdict is the run's final state, so that ops see it in the UI and orchestrators act on it,
each verdict in its own colour in the run list:

- APPROVED ends Completed, named "Approved" (green);
- REJECTED ends Failed, "Rejected" (red): the data is not safe;
- NEEDS_REVIEW waits Paused (yellow) for a reviewer when the config says ``review: pause``;
  without a pause it ends Failed, "NeedsReview" (a run that needs a person is not a success);
- ERROR ends Crashed, "Error" (orange): the gate could not judge (bad input, a store down, a
  killed process), an ops problem rather than a data one.

The run gets the tags ``riskgate``, ``release:<id>`` and ``verdict:<verdict>`` (a paused run
``verdict:NEEDS_REVIEW`` while it waits). A gate process that dies (killed, out of memory) or a
run cancelled from the UI still ends in an ERROR verdict: the worker runs the flow's
``on_crashed`` / ``on_cancellation`` hook (:func:`ended_without_verdict`); a run whose worker and
process are both gone stops beating, and the server's automation that ``riskgate deploy``
installs marks it Crashed "Error" (:mod:`riskgate.flows.deployments`), which triggers
:func:`lost_run_verdict` on a living worker for the rest of its verdict. The flow has no retries:
a verdict is never retried into another one.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from prefect import flow, get_run_logger
from prefect.exceptions import MissingResult, TerminationSignal
from prefect.futures import wait
from prefect.input import RunInput
from prefect.runtime import flow_run as runtime_flow_run
from prefect.states import Completed, Crashed, Failed, State
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import BaseModel, ConfigDict, Field

from riskcore.errors import ConfigError, RiskgateError
from riskcore.gate.cleanliness import CleanlinessReport, warm_up
from riskcore.gate.config import Gate, config_mapping, load_gate
from riskcore.gate.encoding import encode_measured
from riskcore.gate.outputs import error_record, now_iso, write_run
from riskcore.gate.policy import CheckVerdict, Decision, Verdict
from riskcore.gate.run import RunOutcome, error_outcome, run_gate
from riskcore.gate.tables import TableInfo
from riskcore.gate.trigger import (
    RELEASE_ID_PATTERN,
    TRIGGER_EVENT,
    TriggerPayload,
    parse_payload,
    payload_sha256,
)
from riskcore.measures import MeasureInputs
from riskcore.processes import STOPPED, Terminated, leave_soon
from riskcore.redact import install_log_redaction, redact_text
from riskcore.results import MeasureResult
from riskcore.signer import signer_from_environment
from riskcore.storage import check_storage_options, join_url
from riskcore.threads import Beside
from riskgate.tasks.common import Held
from riskgate.tasks.io import load_table, resolve_storage_options, write_outputs
from riskgate.tasks.measure import encode_beside, encode_inputs, run_family
from riskgate.tasks.tell import check_line, emit_verdict, publish
from riskgate.tasks.validate import validate_inputs

from .limits import GateSlot, ensure_defaults, take_trigger_rate
from .names import (
    LOST_MESSAGE,
    VERDICT_STATE_NAMES,
)
from .pinned import (
    ManifestRefused,
    check_deployed,
    nightly_config_url,
    pinned_config_url,
    read_manifest,
)

#: seconds a triggered run waits for its event to be readable from the API's event store
EVENT_READ_TIMEOUT_S = 60.0
RELEASE_ID = re.compile(RELEASE_ID_PATTERN)


class GateVerdict(Exception):
    """A verdict other than APPROVED, as the data of the run's Failed state (Prefect resolves a
    failed state's data into an exception); ``outcome`` is what the run decided."""

    def __init__(self, outcome: dict[str, Any]) -> None:
        super().__init__(f"release {outcome.get('release_id')}: {outcome.get('verdict')} "
                         f"({'; '.join(outcome.get('reasons') or [])[:300]})")
        self.outcome = outcome

    def __reduce__(self) -> tuple[Any, ...]:
        return (GateVerdict, (self.outcome,))


class VerdictIsNotACrash(logging.Filter):
    """Prefect's engine logs every run that ends Failed as "Engine execution exited with
    unexpected exception" at ERROR with a traceback; for a gate, NEEDS_REVIEW and REJECTED are
    verdicts and ERROR is logged once by the gate itself, so that line becomes one INFO line
    naming the verdict (alerting on ERROR logs then fires on real errors only)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, GateVerdict):
            verdict = str(exc.outcome.get("verdict"))
        elif "GateVerdict: " in (record.exc_text or ""):  # already formatted (redacted)
            tail = (record.exc_text or "").rsplit("GateVerdict: ", 1)[1]
            verdict = tail.split(":", 1)[-1].split("(", 1)[0].strip() or "not APPROVED"
        else:
            return True
        record.levelno, record.levelname = logging.INFO, "INFO"
        record.msg = "the run ended Failed with the gate's verdict %s (a verdict, not a crash)"
        record.args = (verdict,)
        record.exc_info, record.exc_text = None, None
        return True


_VERDICT_FILTER = VerdictIsNotACrash()
for _name in ("prefect.flow_runs", "prefect.flow_engine"):
    if _VERDICT_FILTER not in logging.getLogger(_name).filters:
        logging.getLogger(_name).addFilter(_VERDICT_FILTER)


#: outcomes of the gate runs of this process by flow-run id, until :func:`outcome_of` takes
#: them: the state Prefect hands back may come from the API without its data (several gate
#: runs in one process's threads, with result persistence off), and the outcome is not lost
_OUTCOMES: dict[str, dict[str, Any]] = {}
_OUTCOMES_LOCK = threading.Lock()


def outcome_of(state: State[Any]) -> dict[str, Any] | None:
    """The outcome a gate run's final state carries (None when it has none: crashed)."""
    run_id = str(state.state_details.flow_run_id) if state.state_details else None
    with _OUTCOMES_LOCK:
        kept = _OUTCOMES.pop(run_id, None) if run_id else None
    try:
        data = state.result(raise_on_failure=False)
    except MissingResult:
        return kept
    if isinstance(data, GateVerdict):
        return data.outcome
    return data if isinstance(data, dict) else kept


class ReviewInput(RunInput):
    """What a reviewer enters in the Prefect UI to resume a paused gate run."""

    approve: bool
    reviewer: str = Field(min_length=3, description="who decides (name or e-mail): required, "
                          "recorded in decision.json")
    comment: str = ""


def _logger() -> logging.Logger | logging.LoggerAdapter[Any]:
    try:
        return get_run_logger()
    except Exception:
        return logging.getLogger("riskgate.gate")


def _result(future: Any) -> Any:
    """A task's value; a task that ended Failed re-raises its error (RiskgateError)."""
    return future.result(raise_on_failure=True)


#: families measured at once: the flow's task runner's threads (they share the thread budget)
MEASURE_WORKERS = 4


class PrefectSteps:
    """The gate's steps as Prefect tasks (loads and measures in parallel)."""

    parallel_measures = MEASURE_WORKERS

    def __init__(self, log: logging.Logger | logging.LoggerAdapter[Any], slot: GateSlot,
                 gate: Gate, run_id: str) -> None:
        self.log, self.slot, self.gate, self.run_id = log, slot, gate, run_id

    def load(self, gate: Gate, options: Mapping[str, Any]
             ) -> tuple[dict[str, pd.DataFrame], list[TableInfo]]:
        futures = {name: load_table.submit(Held(gate), name, Held(dict(options)))
                   for name in gate.config.tables()}
        wait(list(futures.values()))
        frames, infos = {}, []
        for name, fut in futures.items():
            df, info = _result(fut)
            frames[name] = df
            infos.append(info)
        return frames, infos

    def validate(self, gate: Gate, frames: dict[str, pd.DataFrame]) -> CleanlinessReport:
        return _result(validate_inputs.submit(Held(gate), Held(frames)))  # type: ignore[no-any-return]

    def encode(self, gate: Gate, frames: dict[str, pd.DataFrame]) -> MeasureInputs:
        return _result(encode_inputs.submit(Held(gate), Held(frames)))  # type: ignore[no-any-return]

    @property
    def measures_here(self) -> bool:
        """The families run in this process: the task runner is Prefect's thread pool (not
        Dask's processes, which a thread's work or set-up cannot reach)."""
        from prefect.context import FlowRunContext

        context = FlowRunContext.get()
        return context is not None and isinstance(context.task_runner, ThreadPoolTaskRunner)

    def start_encode(self, gate: Gate, frames: dict[str, pd.DataFrame]
                     ) -> Callable[[bool], MeasureInputs] | None:
        """The encoding, begun now in a thread beside the validate task (it reads the same
        frames, changes none). Once the checks pass, the encode task shows the rest of it and
        fails with its error (:func:`encode_beside`); when they fail, no encode task runs, as
        when the encoding followed the checks, and what the thread gave is dropped. None
        (the encoding follows the checks) when the tasks run in other processes (a Dask task
        runner): the thread's work cannot be shipped to them."""
        if not self.measures_here:
            return None
        work = Beside(lambda: encode_measured(gate, frames), name="riskgate-encode")

        def result(checks_passed: bool) -> MeasureInputs:
            if checks_passed:
                return _result(encode_beside.submit(Held(work)))  # type: ignore[no-any-return]
            return work.wait()
        return result

    def measures(self, gate: Gate, inputs: MeasureInputs
                 ) -> tuple[dict[str, MeasureResult], dict[str, str]]:
        futures = {name: run_family.submit(name, Held(inputs), Held(params))
                   for name, params in gate.measures.items()}
        wait(list(futures.values()))
        results, errors = {}, {}
        for name, fut in futures.items():
            state = fut.state
            if state.is_completed():
                results[name] = fut.result()
            else:
                exc = state.result(raise_on_failure=False)
                message = (redact_text(str(exc)) if isinstance(exc, RiskgateError)
                           else redact_text(f"{type(exc).__name__}: {exc}"))
                errors[name] = message
                self.log.error("measure %s failed: %s", name, message)
        return results, errors

    def review(self, gate: Gate, decision: Decision, prepare: Callable[[], str | None]
               ) -> tuple[Decision, dict[str, Any] | None]:
        if gate.config.review != "pause" or decision.verdict is not Verdict.NEEDS_REVIEW:
            return decision, None
        return self._pause(gate, decision, prepare)

    def _pause(self, gate: Gate, decision: Decision, prepare: Callable[[], str | None]
               ) -> tuple[Decision, dict[str, Any] | None]:
        from prefect.exceptions import FlowPauseTimeout
        from prefect.flow_runs import pause_flow_run

        report = prepare()  # report, measures and artifacts first; decision.json stays last
        link = report if report and report.startswith(("http://", "https://")) else None
        pending = {"release_id": gate.config.release_id, "run_id": self.run_id,
                   "verdict": decision.verdict.value, "reasons": list(decision.reasons),
                   "checks": [c.to_dict() for c in decision.checks], "report_link": link,
                   "report_url": None if link else report}
        publish(pending, pending=True)
        under = decision.under_review
        description = review_description(gate.config.release_id, under, report,
                                         gate.config.review_timeout_s)
        for c in under:
            self.log.warning("needs review: %s", check_line(c.to_dict()))
        self.log.info("release %s needs review: pausing for a reviewer (timeout %ss); the gate "
                      "slot is released while it waits", gate.config.release_id,
                      gate.config.review_timeout_s)
        _label_run(gate.config.release_id, decision.verdict.value)  # verdict:NEEDS_REVIEW
        self.slot.release()
        try:
            answer = pause_flow_run(wait_for_input=ReviewInput.with_initial_data(
                description=description, approve=False),
                timeout=gate.config.review_timeout_s, poll_interval=2)
        except FlowPauseTimeout:
            self.slot.acquire()
            review = {"decision": "timeout", "reviewer": None, "comment": None, "at": now_iso()}
            return Decision(Verdict.REJECTED, decision.checks,
                            decision.reasons + ("review timed out: not approved",), review), \
                review
        self.slot.acquire()
        review = {"decision": "approved" if answer.approve else "rejected",
                  "reviewer": answer.reviewer, "comment": answer.comment, "at": now_iso()}
        verdict = Verdict.APPROVED if answer.approve else Verdict.REJECTED
        reasons = decision.reasons + (
            f"reviewer {answer.reviewer or '(unnamed)'} {review['decision']} the release"
            + (f": {answer.comment}" if answer.comment else ""),)
        return Decision(verdict, decision.checks, reasons, review), review

    def write(self, folder: str, files: Mapping[str, bytes], decision: Mapping[str, Any] | None,
              options: Mapping[str, Any]) -> dict[str, str]:
        return _result(write_outputs.submit(  # type: ignore[no-any-return]
            folder, Held(dict(files)), Held(None if decision is None else dict(decision)),
            Held(dict(options))))


def review_description(release_id: str, under: list[Any], report: str | None,
                       timeout_s: int) -> str:
    """The pause form's text: what the reviewer is asked to decide, check by check, and where
    the report is."""
    where = (f"[Open the report]({report})" if report and report.startswith(("http://",
                                                                            "https://"))
             else f"The report: {report}" if report else "The report could not be written.")
    lines = [f"Release **{release_id}** needs a person's decision. {where}", "",
             "Checks under review:"]
    for c in under:
        value = "n/a" if c.value is None else f"{c.value:.4g}"
        lines.append(f"- {c.figure} = {value} (threshold {c.threshold}): {c.message}")
    lines += ["", "Approve to publish, or leave 'approve' unticked to reject; your name (or "
              "e-mail) as reviewer is required and recorded in decision.json. Without an "
              f"answer within {_duration(timeout_s)} (review_timeout_s in the gate config) "
              "the release is REJECTED."]
    return "\n".join(lines)


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} hour(s)"
    if seconds % 60 == 0:
        return f"{seconds // 60} minute(s)"
    return f"{seconds} s"


def final_state(outcome: RunOutcome) -> State[Any]:
    """The run's final state: type for orchestrators, name for people (see the module doc)."""
    data = outcome.to_dict()
    if runtime_flow_run.id:
        with _OUTCOMES_LOCK:
            _OUTCOMES[str(runtime_flow_run.id)] = data
            while len(_OUTCOMES) > 256:  # a long-lived process that never asks keeps few
                _OUTCOMES.pop(next(iter(_OUTCOMES)))
    name = VERDICT_STATE_NAMES[outcome.verdict]
    message = f"{outcome.release_id}: {outcome.verdict}"
    if outcome.reasons:
        message += f" ({outcome.reasons[0][:200]})"
    if outcome.verdict == "APPROVED":
        return Completed(name=name, message=message, data=data)
    if outcome.verdict == "ERROR":
        return Crashed(name=name, message=message, data=GateVerdict(data))
    return Failed(name=name, message=message, data=GateVerdict(data))


def _label_run(release_id: str, verdict: str | None, run_id: Any = None) -> None:
    """Name the run ``<release>[-<VERDICT>]`` and tag it (cosmetic: never fails the gate)."""
    run_id = run_id or runtime_flow_run.id
    if not run_id:
        return
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            current = client.read_flow_run(run_id)
            tags = [t for t in (current.tags or []) if not t.startswith(("verdict:",
                                                                          "release:"))]
            tags += [t for t in ("riskgate", f"release:{release_id}") if t not in tags]
            if verdict:
                tags.append(f"verdict:{verdict}")
            client.update_flow_run(run_id, name=f"{release_id}-{verdict}" if verdict
                                   else release_id, tags=tags)
    except Exception as exc:
        logging.getLogger("riskgate.gate").debug("could not label the run: %s", exc)


def _event_payload(trigger: Mapping[str, Any], inline: bool = True) -> Any:
    """The triggering event's payload, read from the API's event store by the event's id: the
    deployment's trigger hands the flow the id alone, so that a payload (and whatever a
    pipeline put in it) never becomes a flow-run parameter stored in Prefect's database. A
    payload given directly is taken as given only in a run that is not a deployment's
    (``inline``: a test in this process); a deployed run reads events alone."""
    if "payload" in trigger:
        if not inline:
            raise ConfigError("trigger: a deployed gate reads its payload from the event "
                              "store by the event's id; a payload given as a parameter is "
                              "refused")
        return trigger["payload"]
    event_id = str(trigger.get("event_id") or "")
    try:
        wanted = uuid.UUID(event_id)
    except ValueError:
        raise ConfigError(f"trigger: event id '{event_id[:60]}' is not a UUID") from None
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventIDFilter

    deadline = time.monotonic() + EVENT_READ_TIMEOUT_S
    with get_client(sync_client=True) as client:
        while True:
            page = client.read_events(EventFilter(id=EventIDFilter(id=[wanted])), limit=1)
            if page.events:
                return dict(page.events[0].payload or {})
            if time.monotonic() > deadline:
                raise ConfigError(f"trigger event {event_id}: not found in the API's event "
                                  f"store after {EVENT_READ_TIMEOUT_S:.0f} s")
            time.sleep(1.0)


def _trigger_context(trigger: Mapping[str, Any] | None, payload: Any) -> dict[str, Any]:
    """What decision.json records of the trigger (the payload by its SHA-256 only)."""
    if trigger is None:
        return {}
    return {"trigger": {"event": str(trigger.get("event") or TRIGGER_EVENT),
                        "event_id": str(trigger.get("event_id") or "") or None,
                        "occurred": trigger.get("occurred"),
                        "payload_sha256": payload_sha256(payload)
                        if isinstance(payload, Mapping) else None}}


def _pinned_config(config: Any) -> Any:
    """The triggered gate's config: the given one (a run in this process, a test), else the
    Prefect Variable ``riskgate_trigger_config`` (riskgate deploy --trigger-config URL)."""
    return config if config is not None else pinned_config_url()


def _related(trigger: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The triggering event, related to the verdict event (``emit-anonymized --wait`` finds
    the verdict of its own event by it), whether or not the gate could start."""
    event_id = str((trigger or {}).get("event_id") or "")
    return ([{"prefect.resource.id": f"prefect.event.{event_id}",
              "prefect.resource.role": "trigger"}] if event_id else [])


def _signer() -> Any:
    """What signs the decision: the signer service ($RISKGATE_SIGNER_SOCKET), else (a run that
    is not a deployment's) the key file $RISKGATE_SIGNING_KEY names, else None (unsigned). A
    deployed run never reads a key file (:func:`riskcore.signer.signer_from_environment`)."""
    from prefect.runtime import deployment

    return signer_from_environment(deployed=bool(deployment.id))


def _nightly_config() -> str:
    return nightly_config_url()


def _fail_before_gate(exc: RiskgateError, run_id: str, request: Request,
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
            payload = _event_payload(trigger, inline=not request.deployed)
        except Exception:
            payload = None
    payload = payload if isinstance(payload, Mapping) else {}
    release_id = release_id or str(payload.get("release_id") or "")
    output_url = None
    source = config if config is not None else request.config
    if source is None:  # a triggered run's pinned config, a nightly run's configured one
        try:
            source = _pinned_config(None) if request.pinned else _nightly_config()
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
    _tell_error(flow_run, state, how)


def _tell_error(flow_run: Any, state: State[Any], how: str) -> None:
    """The ERROR verdict of a gate run that ended without one (see
    :func:`ended_without_verdict` and :func:`lost_run_verdict`); never raises."""
    log = logging.getLogger("riskgate.gate")
    try:
        install_log_redaction()
        tags = list(getattr(flow_run, "tags", None) or [])
        if any(t.startswith("verdict:") and t != "verdict:NEEDS_REVIEW" for t in tags):
            return  # its verdict was told before the process ended
        params = dict(getattr(flow_run, "parameters", None) or {})
        request = _request_of(flow_run, params)
        trigger = dict(request.trigger) if request.trigger is not None else None
        exc = Terminated(f"the gate's process {how} ({state.type.value}: "
                         f"{redact_text(str(state.message or 'no message'))[:200]}); no "
                         "decision was reached: re-run the gate")
        known = next((t.split(":", 1)[1] for t in tags if t.startswith("release:")), "")
        options = params.get("storage_options")
        outcome = _fail_before_gate(exc, str(flow_run.id), request,
                                    _trigger_context(trigger, None),
                                    dict(options) if isinstance(options, Mapping) else {}, log,
                                    release_id=known)
        emit_verdict(outcome.to_dict(), related=_related(trigger))
        _label_run(outcome.release_id, outcome.verdict, run_id=flow_run.id)
        if state.is_crashed():
            from prefect.client.orchestration import get_client

            with get_client(sync_client=True) as client:
                client.set_flow_run_state(flow_run.id, Crashed(
                    name=VERDICT_STATE_NAMES["ERROR"], message=f"{outcome.release_id}: ERROR ("
                    f"{outcome.reasons[0][:200]})"), force=True)
    except Exception as err:  # a hook never raises into the worker
        log.warning("the ERROR verdict of the ended run %s could not be told: %s",
                    getattr(flow_run, "id", "?"), redact_text(f"{type(err).__name__}: {err}"))


def _request_of(flow_run: Any, params: Mapping[str, Any]) -> Request:
    """What an ended run was asked, from its parameters: a deployed gate's run (it has a
    deployment) names a trigger or a manifest at most; a command-line run its config."""
    def mapping(key: str) -> Mapping[str, Any] | None:
        value = params.get(key)
        return value if isinstance(value, Mapping) else None

    if getattr(flow_run, "deployment_id", None):
        return Request(trigger=mapping("trigger"), manifest=mapping("manifest"),
                       deployed=True)
    return Request(config=params.get("config"), overrides=mapping("overrides"),
                   trigger=mapping("trigger"))


@flow(name="riskgate-lost-run", log_prints=False, retries=0, validate_parameters=False)
def lost_run_verdict(lost_run: str) -> str:
    """The rest of the ERROR verdict of a gate run lost with its worker.

    Nothing on the lost worker's side survives to run the crash hook, so the server's
    automation sets the run Crashed "Error" once its heartbeats stop; that state change
    triggers this flow (the ``lost-run-verdict`` deployment) on whichever worker of the pool is
    alive: the ERROR ``decision.json``, the ``riskgate.release.ERROR`` event and the
    ``verdict:ERROR`` tag, as the hook writes them for a process that died under a living
    worker. ``lost_run`` is the run's id or its event resource id
    (``prefect.flow-run.<id>``). A run that is not a gate run the automation declared lost,
    or that already has its verdict, is left as it is."""
    from prefect.client.orchestration import get_client

    install_log_redaction()
    log = _logger()
    try:
        run_id = uuid.UUID(str(lost_run).rsplit(".", 1)[-1])
    except ValueError:
        return f"not a flow run id: {redact_text(str(lost_run))[:80]}"
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
        gate = client.read_flow(run.flow_id).name == "release-gate"
    state = run.state
    if not (gate and state is not None and state.is_crashed()
            and str(state.message or "").startswith(LOST_MESSAGE)):
        log.info("run %s is not a gate run declared lost: nothing to tell", run_id)
        return "not a lost gate run"
    _tell_error(run, state, "was lost with its worker")
    log.info("run %s: its ERROR verdict is told (decision, event, tag)", run_id)
    return "told"


@flow(name="release-gate", log_prints=False, retries=0, validate_parameters=False,
      task_runner=ThreadPoolTaskRunner(max_workers=MEASURE_WORKERS),  # type: ignore[arg-type]
      on_crashed=[ended_without_verdict], on_cancellation=[ended_without_verdict])
def release_gate(config: Any = None, overrides: dict[str, Any] | None = None,
                 trigger: dict[str, Any] | None = None,
                 storage_options: dict[str, Any] | None = None,
                 dask_address: str | None = None, origin: str | None = None) -> State[Any]:
    """Decide whether a release candidate may be published (``riskgate gate``; the deployed
    runs use :func:`deployed_gate`, which takes no config).

    Args:
        config: the gate config's path or URL (or a mapping); None reads the Prefect Variable
            ``riskgate_nightly_config`` (the nightly re-check).
        overrides: config keys to replace (release_id, original, released, control,
            identification, output_url, policy).
        trigger: ``{event_id, event, occurred}`` of a trigger event (its payload is read from
            the API's event store and names the release: :mod:`riskcore.gate.trigger`).
        storage_options: fsspec options to read the config (never credentials).
        dask_address: a Dask scheduler for a partitioned release's per-partition work (a
            folder of Parquet files); without it the partitions are read one after another.
        origin: where ``config`` and ``overrides`` came from, for the decision's provenance
            ("command line" from ``riskgate gate``; default "parameter").

    Returns:
        The final state; its data is the outcome (verdict, exit_code, folder, decision and
        report URLs, reasons, checks).
    """
    request = Request(config=config, overrides=overrides, trigger=trigger, origin=origin)
    return _guarded(request, storage_options, dask_address)


class TriggerRef(BaseModel):
    """What a deployment's event trigger hands the gate: the event's id and time, never its
    payload (the flow reads that from the event store). Extra keys are refused when the run
    is created (the deployment enforces its parameter schema): a payload given here would be
    stored in Prefect's database with whatever it holds."""

    model_config = ConfigDict(extra="forbid")
    event_id: str = Field(max_length=64)
    event: str | None = Field(None, max_length=200)
    occurred: str | None = Field(None, max_length=64)


class ManifestRef(BaseModel):
    """What ``watch-releases`` hands the gate: where the release manifest is and the SHA-256
    of the bytes it found there."""

    model_config = ConfigDict(extra="forbid")
    url: str = Field(max_length=2048)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def _plain(value: Any) -> dict[str, Any] | None:
    """A parameter model as the mapping the gate reads (a deployment's run hands dicts)."""
    if value is None:
        return None
    return value.model_dump() if isinstance(value, BaseModel) else dict(value)


@flow(name="release-gate", log_prints=False, retries=0, validate_parameters=False,
      task_runner=ThreadPoolTaskRunner(max_workers=MEASURE_WORKERS),  # type: ignore[arg-type]
      on_crashed=[ended_without_verdict], on_cancellation=[ended_without_verdict])
def deployed_gate(trigger: TriggerRef | None = None, manifest: ManifestRef | None = None,
                  config: None = None, overrides: None = None, policy: None = None,
                  storage_options: None = None, dask_address: None = None,
                  origin: None = None) -> State[Any]:
    """The gate as its deployments run it: under the config pinned at deploy time, and
    nothing a run's parameters say can change that.

    Args:
        trigger: set by ``on-anonymization``'s event trigger: ``{event_id, event, occurred}``.
        manifest: set by ``watch-releases``: ``{url, sha256}`` of a release manifest.
        config, overrides, policy, storage_options, dask_address, origin: refused. Their
            schema is ``null``, and the deployments enforce their parameter schema (with no
            other parameter allowed), so a run created with one, or with a payload inside
            ``trigger``, is refused by the API before it exists; a run created with
            enforcement turned off ends ERROR naming each one (an unknown parameter fails the
            run before it starts, and its crash hook writes the ERROR verdict). The rules are
            the custodian's, pinned by ``riskgate deploy``.

    Without ``trigger`` or ``manifest`` (``nightly-recheck``) the nightly config is gated.
    """
    given = {"config": config, "overrides": overrides, "policy": policy,
             "storage_options": storage_options, "dask_address": dask_address,
             "origin": origin}
    request = Request(trigger=_plain(trigger), manifest=_plain(manifest),
                      refused=tuple(sorted(k for k, v in given.items() if v is not None)),
                      deployed=True)
    return _guarded(request, None, None)


@dataclass(frozen=True)
class Request:
    """What a gate run was asked: a config (the command line), a trigger event, a release
    manifest, or (deployed runs) nothing but the pinned config; and any parameter refused."""

    config: Any = None
    overrides: Mapping[str, Any] | None = None
    trigger: Mapping[str, Any] | None = None
    manifest: Mapping[str, Any] | None = None
    origin: str | None = None
    refused: tuple[str, ...] = ()
    deployed: bool = False

    @property
    def pinned(self) -> bool:
        """The run is judged under the triggered gates' pinned config."""
        return self.trigger is not None or self.manifest is not None


def _guarded(request: Request, storage_options: dict[str, Any] | None,
             dask_address: str | None) -> State[Any]:
    """One gate run that always ends in a verdict (:func:`_gate_run`, failing closed)."""
    install_log_redaction()
    warm_up()  # Great Expectations' import overlaps the run's start-up and the loading
    log = _logger()
    run_id = str(runtime_flow_run.id or f"local-{uuid.uuid4()}")
    trigger = dict(request.trigger) if request.trigger is not None else None
    try:
        return _gate_run(log, run_id, request, storage_options, dask_address)
    except TerminationSignal:  # SIGTERM: an ERROR decision and verdict, then Prefect's own end
        leave_soon()
        outcome = _fail_before_gate(Terminated(STOPPED), run_id, request, {}, {}, log)
        try:
            emit_verdict(outcome.to_dict(), related=_related(trigger))
            _label_run(outcome.release_id, outcome.verdict)
        except Exception:
            pass
        raise
    except Exception as exc:  # fail closed on anything unforeseen: ERROR, event, Failed
        if isinstance(exc, Terminated):
            failure: RiskgateError = exc
        else:
            log.error("the gate failed: %s", redact_text(f"{type(exc).__name__}: {exc}"),
                      exc_info=True)
            failure = RiskgateError(f"unexpected {type(exc).__name__}: {exc}")
        outcome = _fail_before_gate(failure, run_id, request, {}, {}, log)
        try:
            emit_verdict(outcome.to_dict(), related=_related(trigger))
        except Exception:
            pass
        return final_state(outcome)


def _steps(gate: Gate, options: Mapping[str, Any], steps: PrefectSteps,
           dask_address: str | None) -> Any:
    """The flow's steps; for a partitioned release (a folder of Parquet files), the partitioned
    steps, their partitions' work on the Dask cluster at ``dask_address`` (or the worker's
    ``RISKGATE_DASK_ADDRESS``) when given."""
    from riskcore.partitions import DaskExecutor, LocalExecutor, is_partitioned

    if not is_partitioned(gate.config.released, options):
        return steps
    from riskgate.tasks.partitioned import PrefectPartitionedSteps

    executor: Any = LocalExecutor()
    dask_address = dask_address or os.environ.get("RISKGATE_DASK_ADDRESS") or None
    if dask_address:
        from distributed import Client

        executor = DaskExecutor(Client(dask_address, set_as_default=False))
    return PrefectPartitionedSteps(steps, executor=executor)


def _gate_run(log: logging.Logger | logging.LoggerAdapter[Any], run_id: str, request: Request,
              storage_options: dict[str, Any] | None, dask_address: str | None = None
              ) -> State[Any]:
    base_options = dict(storage_options or {})
    context: dict[str, Any] = {}
    payload: TriggerPayload | None = None
    trigger = dict(request.trigger) if request.trigger is not None else None
    try:
        check_storage_options(base_options, "storage_options parameter")
        if request.refused:
            raise ConfigError(
                f"parameter(s) {list(request.refused)} are not accepted by a deployed gate: "
                "its config, policy and inputs are pinned by riskgate deploy (--trigger-config, "
                "--nightly-config), and a run names its release only through a trigger event "
                "or a release manifest")
        if request.pinned:  # pinned rules: the payload names the release, nothing else
            source = _pinned_config(request.config)
            pinned = load_gate(source, None, base_options)
            if request.deployed:
                check_deployed(pinned)
            if trigger is not None:
                raw = _event_payload(trigger, inline=not request.deployed)
                context = _trigger_context(trigger, raw)
                payload = parse_payload(raw, context["trigger"]["event_id"],
                                        pinned.config.trigger, pinned.source)
            else:
                payload, context = read_manifest(
                    dict(request.manifest or {}), pinned,
                    resolve_storage_options(pinned.config, base_options))
            context["trigger"]["checksums"] = dict(payload.checksums)
            merged = payload.overrides()
            origins = {"config": "deployment", **{k: "payload" for k in merged}}
        else:
            config = request.config
            source = config if config is not None else _nightly_config()
            merged = dict(request.overrides or {})
            given = request.origin or "parameter"
            origins = {"config": given if config is not None else "deployment",
                       **{k: given for k in merged}}
        gate = load_gate(source, merged, base_options, origins)
        if request.deployed and not request.pinned:
            check_deployed(gate)
        options = resolve_storage_options(gate.config, base_options)
        signer = _signer()
    except RiskgateError as exc:
        named = ""
        if isinstance(exc, ManifestRefused):  # filed under the release the manifest names
            context, named = exc.context, exc.release_id
        outcome = _fail_before_gate(exc, run_id, request, context, base_options, log,
                                    release_id=named)
        emit_verdict(outcome.to_dict(), related=_related(trigger))
        _label_run(outcome.release_id, outcome.verdict)
        return final_state(outcome)

    release_id = gate.config.release_id
    _label_run(release_id, None)
    ensure_defaults()
    if request.pinned:
        take_trigger_rate(log)
    slot = GateSlot(log)
    try:
        slot.acquire()
    except RiskgateError as exc:
        outcome = _fail_before_gate(exc, run_id, request, context, options, log,
                                    config=gate.config.model_dump(mode="json"))
        emit_verdict(outcome.to_dict(), related=_related(trigger))
        _label_run(release_id, outcome.verdict)
        return final_state(outcome)
    try:
        steps = _steps(gate, options, PrefectSteps(log, slot, gate, run_id), dask_address)
        try:
            outcome = run_gate(gate, run_id, options, steps, context=context,
                               checksums=payload.checksums if payload else None,
                               timings={"slot_wait": slot.waited}, signer=signer)
        finally:
            getattr(getattr(steps, "executor", None), "close", lambda: None)()
    finally:
        slot.release()
    outcome = RunOutcome(**{**outcome.__dict__, "slots": tuple(slot.held)})
    try:
        publish(outcome.to_dict(), related=_related(trigger))
    except Exception as exc:  # telling is best effort; the decision is already written
        log.warning("could not publish artifacts/event: %s", redact_text(str(exc)))
    for c in outcome.checks:
        if c.get("verdict") != CheckVerdict.PASS.value:
            log.warning("%s", check_line(c))
    log.info("release %s: %s (%s)", release_id, outcome.verdict,
             outcome.decision_url or "no decision written")
    _label_run(release_id, outcome.verdict)
    return final_state(outcome)


def _in_a_flow_run_process() -> bool:
    """This module was imported by a worker's (or ``riskgate serve``'s) flow-run process,
    ``python -m prefect.engine``, which imports a deployment's flow before it begins the run."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "prefect.engine"


if _in_a_flow_run_process():
    # Great Expectations' helper from the flow's import on, not from the flow's first line:
    # its import (2-3 s of CPU) then overlaps Prefect's loading of the run as well (1.5 s of a
    # triggered gate's 9 s on an idle worker). A lost-run verdict's process starts one it
    # does not use; it ends with that process.
    warm_up()
