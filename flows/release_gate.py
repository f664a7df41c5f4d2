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
import sys
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any

from prefect.exceptions import TerminationSignal
from prefect.runtime import flow_run as runtime_flow_run
from prefect.states import State
from prefect.task_runners import ThreadPoolTaskRunner

from riskcore.errors import ConfigError, RiskgateError
from riskcore.gate.cleanliness import warm_up
from riskcore.gate.config import Gate, load_gate
from riskcore.gate.policy import CheckVerdict
from riskcore.gate.run import RunOutcome, run_gate
from riskcore.gate.trigger import TriggerPayload, parse_payload
from riskcore.processes import STOPPED, Terminated, leave_soon
from riskcore.redact import install_log_redaction, redact_text
from riskcore.storage import check_storage_options
from riskcore.threads import Beside
from riskgate.tasks.io import resolve_storage_options
from riskgate.tasks.tell import check_line, emit_verdict, publish

from .gate_steps import MEASURE_WORKERS, PrefectSteps, run_logger
from .limits import GateSlot, ensure_defaults, take_trigger_rate
from .names import LOST_MESSAGE
from .pinned import ManifestRefused, check_deployed, read_manifest
from .plain_flow import plain_flow
from .requests import (
    ManifestRef,
    Request,
    TriggerRef,
    event_payload,
    gate_signer,
    nightly_config,
    pinned_config,
    plain,
    related,
    trigger_context,
)
from .unjudged import ended_without_verdict, fail_before_gate, tell_error
from .verdicts import final_state, label_run

__all__ = ["deployed_gate", "lost_run_verdict", "release_gate"]


@plain_flow(name="riskgate-lost-run", log_prints=False, retries=0, validate_parameters=False)
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
    log = run_logger()
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
    tell_error(run, state, "was lost with its worker")
    log.info("run %s: its ERROR verdict is told (decision, event, tag)", run_id)
    return "told"


@plain_flow(name="release-gate", log_prints=False, retries=0, validate_parameters=False,
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
            ``riskgatenightly_config`` (the nightly re-check).
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


@plain_flow(name="release-gate", log_prints=False, retries=0, validate_parameters=False,
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
    request = Request(trigger=plain(trigger), manifest=plain(manifest),
                      refused=tuple(sorted(k for k, v in given.items() if v is not None)),
                      deployed=True)
    return _guarded(request, None, None)


def _guarded(request: Request, storage_options: dict[str, Any] | None,
             dask_address: str | None) -> State[Any]:
    """One gate run that always ends in a verdict (:func:`_gate_run`, failing closed)."""
    install_log_redaction()
    warm_up()  # Great Expectations' import overlaps the run's start-up and the loading
    log = run_logger()
    run_id = str(runtime_flow_run.id or f"local-{uuid.uuid4()}")
    trigger = dict(request.trigger) if request.trigger is not None else None
    try:
        return _gate_run(log, run_id, request, storage_options, dask_address)
    except TerminationSignal:  # SIGTERM: an ERROR decision and verdict, then Prefect's own end
        leave_soon()
        outcome = fail_before_gate(Terminated(STOPPED), run_id, request, {}, {}, log)
        try:
            emit_verdict(outcome.to_dict(), related=related(trigger))
            label_run(outcome.release_id, outcome.verdict)
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
        outcome = fail_before_gate(failure, run_id, request, {}, {}, log)
        try:
            emit_verdict(outcome.to_dict(), related=related(trigger))
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


def _resolve(request: Request, base_options: dict[str, Any], context: dict[str, Any]
             ) -> tuple[Gate, dict[str, Any], Any, TriggerPayload | None]:
    """The gate a request runs under, its storage options, its signer and (a triggered run)
    the payload; ``context`` gets what decision.json records of the trigger as it is read."""
    check_storage_options(base_options, "storage_options parameter")
    if request.refused:
        raise ConfigError(
            f"parameter(s) {list(request.refused)} are not accepted by a deployed gate: "
            "its config, policy and inputs are pinned by riskgate deploy (--trigger-config, "
            "--nightly-config), and a run names its release only through a trigger event "
            "or a release manifest")
    payload: TriggerPayload | None = None
    if request.pinned:  # pinned rules: the payload names the release, nothing else
        source = pinned_config(request.config)
        pinned = load_gate(source, None, base_options)
        if request.deployed:
            check_deployed(pinned)
        if request.trigger is not None:
            trigger = dict(request.trigger)
            raw = event_payload(trigger, inline=not request.deployed)
            context.update(trigger_context(trigger, raw))
            payload = parse_payload(raw, context["trigger"]["event_id"],
                                    pinned.config.trigger, pinned.source)
        else:
            payload, read = read_manifest(
                dict(request.manifest or {}), pinned,
                resolve_storage_options(pinned.config, base_options))
            context.update(read)
        context["trigger"]["checksums"] = dict(payload.checksums)
        merged = payload.overrides()
        origins = {"config": "deployment", **{k: "payload" for k in merged}}
    else:
        config = request.config
        source = config if config is not None else nightly_config()
        merged = dict(request.overrides or {})
        given = request.origin or "parameter"
        origins = {"config": given if config is not None else "deployment",
                   **{k: given for k in merged}}
    gate = load_gate(source, merged, base_options, origins)
    if request.deployed and not request.pinned:
        check_deployed(gate)
    return gate, resolve_storage_options(gate.config, base_options), gate_signer(), payload


def _told(outcome: RunOutcome, trigger: Mapping[str, Any] | None) -> State[Any]:
    """A verdict reached before the gate's steps: its event, the run's label, its state."""
    emit_verdict(outcome.to_dict(), related=related(trigger))
    label_run(outcome.release_id, outcome.verdict)
    return final_state(outcome)


def _gate_run(log: logging.Logger | logging.LoggerAdapter[Any], run_id: str, request: Request,
              storage_options: dict[str, Any] | None, dask_address: str | None = None
              ) -> State[Any]:
    base_options = dict(storage_options or {})
    context: dict[str, Any] = {}
    trigger = dict(request.trigger) if request.trigger is not None else None
    try:
        gate, options, signer, payload = _resolve(request, base_options, context)
    except RiskgateError as exc:
        named = ""
        if isinstance(exc, ManifestRefused):  # filed under the release the manifest names
            context, named = exc.context, exc.release_id
        return _told(fail_before_gate(exc, run_id, request, context, base_options, log,
                                      release_id=named), trigger)

    release_id = gate.config.release_id
    # the run's name and tags (two requests, cosmetic) are set while its slot is taken, and
    # its verdict's while the verdict is published: 0.03 s of each gate's wait, twice
    naming = Beside(partial(label_run, release_id, None), name="riskgate-label")
    ensure_defaults()
    if request.pinned:
        take_trigger_rate(log)
    slot = GateSlot(log)
    try:
        slot.acquire()
    except RiskgateError as exc:
        naming.wait()
        return _told(fail_before_gate(exc, run_id, request, context, options, log,
                                      config=gate.config.model_dump(mode="json")), trigger)
    try:
        naming.wait()  # before the run, which labels it when it pauses for a review
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
    naming = Beside(partial(label_run, release_id, outcome.verdict), name="riskgate-label")
    try:
        publish(outcome.to_dict(), related=related(trigger))
    except Exception as exc:  # telling is best effort; the decision is already written
        log.warning("could not publish artifacts/event: %s", redact_text(str(exc)))
    for c in outcome.checks:
        if c.get("verdict") != CheckVerdict.PASS.value:
            log.warning("%s", check_line(c))
    log.info("release %s: %s (%s)", release_id, outcome.verdict,
             outcome.decision_url or "no decision written")
    naming.wait()
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
