"""The release gate: one Prefect flow run per release candidate.

load (parallel, retried) -> validate (Great Expectations) -> encode once -> measures (parallel
tasks) -> decide (policy) -> optional human sign-off -> write outputs (decision.json last) ->
artifacts and the ``riskgate.release.<verdict>`` event.

The gate fails closed: any error, insufficient evidence or unclean data means "not approved",
and the reason is written in decision.json.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from typing import Any

import pandas as pd
from prefect import flow, get_run_logger
from prefect.concurrency.sync import concurrency, rate_limit
from prefect.futures import as_completed, wait
from prefect.input import RunInput
from prefect.runtime import flow_run as runtime_flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from riskcore import progress
from riskcore.errors import RiskgateError
from riskcore.gate import (decision_record, measures_document, measures_to_run, now_iso,
                           parquet_bytes, per_record_frame, records_parquet, report_html,
                           run_folder)
from riskcore.gateconfig import GateConfig, load_gate_config
from riskcore.policy import Decision, Verdict, fixed_decision, load_policy
from riskcore.report.examples import example_records
from riskcore.tableio import join_url
from tasks.decide import decide_release
from tasks.io import load_table, storage_options, write_outputs
from tasks.measure import encode_inputs, measure
from tasks.tell import publish
from tasks.validate import validate_inputs

from .limits import GATE_LIMIT, TRIGGER_RATE_LIMIT, ensure_limit


class ReviewInput(RunInput):
    """What a reviewer enters in the Prefect UI to resume a paused gate run."""

    approve: bool
    reviewer: str = ""
    comment: str = ""


def _logger() -> logging.Logger | logging.LoggerAdapter:
    try:
        return get_run_logger()
    except Exception:
        return logging.getLogger("riskgate.gate")


def resolve_config(config: GateConfig | dict[str, Any] | str,
                   overrides: dict[str, Any] | None = None) -> GateConfig:
    """A config object, a mapping, or a path/URL to a YAML file; overrides win (event payloads)."""
    if isinstance(config, GateConfig) and not overrides:
        return config
    if isinstance(config, GateConfig):
        data = config.model_dump(mode="json")
        return load_gate_config({**data, **(overrides or {})})
    if isinstance(config, str):
        base = load_gate_config(config)
        if not overrides:
            return base
        return load_gate_config({**base.model_dump(mode="json"), **overrides})
    return load_gate_config({**config, **(overrides or {})})


@flow(name="release-gate", flow_run_name="{config_name}", log_prints=False,
      task_runner=ThreadPoolTaskRunner(max_workers=4), validate_parameters=False)
def release_gate(config: Any, overrides: dict[str, Any] | None = None, triggered: bool = False,
                 config_name: str = "release-gate") -> dict[str, Any]:
    """Decide whether a release candidate may be published.

    Args:
        config: a GateConfig, a mapping, or the path/URL of a gate YAML file.
        overrides: keys that replace the config's (e.g. from the trigger event's payload).
        triggered: True for runs started by the ``riskgate.anonymization.completed`` event; these
            are rate limited (``limits.trigger_rate_per_minute``).
        config_name: the run's display name (the release id when started by the CLI).

    Returns:
        verdict, exit_code, run folder and decision URL.
    """
    log = _logger()
    cfg = resolve_config(config, overrides)
    run_id = str(runtime_flow_run.id or f"local-{int(time.time() * 1000)}")
    _rename_run(cfg.release_id)
    ensure_limit(GATE_LIMIT, cfg.limits.gate_concurrency)
    if triggered:
        per_minute = cfg.limits.trigger_rate_per_minute
        ensure_limit(TRIGGER_RATE_LIMIT, per_minute, slot_decay_per_second=per_minute / 60.0)
        rate_limit(TRIGGER_RATE_LIMIT, occupy=1)
    with concurrency(GATE_LIMIT, occupy=1):
        slot_acquired = time.time()
        outcome = _gate(cfg, run_id, log)
        outcome["slot"] = [slot_acquired, time.time()]
    _rename_run(f"{cfg.release_id}-{outcome['verdict']}")
    log.info("release %s: %s (%s)", cfg.release_id, outcome["verdict"], outcome["decision_url"])
    return outcome


def _rename_run(name: str) -> None:
    run_id = runtime_flow_run.id
    if not run_id:
        return
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            client.update_flow_run(run_id, name=name)
    except Exception:  # naming is cosmetic; never let it fail the gate
        pass


def _gate(cfg: GateConfig, run_id: str, log) -> dict[str, Any]:
    started = now_iso()
    timings: dict[str, float] = {}
    options = storage_options(cfg)
    folder = run_folder(cfg, run_id)
    infos = []
    validation_doc = None
    files: dict[str, bytes] = {}
    extra: dict[str, Any] = {}

    def step(name: str, t0: float) -> None:
        timings[name] = time.perf_counter() - t0

    try:
        policy = load_policy(cfg.policy, options)
        to_run, unavailable = measures_to_run(cfg, policy)
        n_steps = 5 + len(to_run)  # load, validate, encode, measures..., decide, write
        _tick("loading tables", 0, n_steps)

        t0 = time.perf_counter()
        futures = {name: load_table.submit(cfg, name, options)
                   for name in cfg.tables()}
        wait(list(futures.values()))
        frames: dict[str, pd.DataFrame] = {}
        for name, fut in futures.items():
            df, info = fut.result()
            frames[name] = df
            infos.append(info)
        step("load", t0)
        _tick("validating (Great Expectations)", 1, n_steps)

        t0 = time.perf_counter()
        report = validate_inputs(frames, cfg.role_spec)
        step("validate", t0)
        _tick("encoding", 2, n_steps)
        validation_doc = report.to_dict()
        files["validation.json"] = json.dumps(validation_doc, indent=2).encode()
        if not report.success:
            decision = fixed_decision(Verdict.REJECTED, ["data not clean: " + line
                                                         for line in report.summary_lines()])
            return _finish(cfg, run_id, folder, decision, infos, timings, started, files,
                           validation_doc, [], options, extra, log)

        t0 = time.perf_counter()
        inputs = encode_inputs(cfg, frames)
        del frames
        step("encode", t0)
        _tick(f"running {len(to_run)} measures", 3, n_steps)

        t0 = time.perf_counter()
        mfutures = {name: measure.submit(name, inputs, params)
                    for name, params in to_run.items()}
        names = {id(f): n for n, f in mfutures.items()}
        for i, fut in enumerate(as_completed(list(mfutures.values())), start=1):
            _tick(f"measure {names[id(fut)]} finished", 3 + i, n_steps)
        results, errors = {}, {}
        for name, fut in mfutures.items():
            try:
                results[name] = fut.result()
            except Exception as exc:  # a measure that raises makes the verdict ERROR
                errors[name] = f"{type(exc).__name__}: {exc}"
                log.error("measure %s failed: %s", name, exc)
        step("measures", t0)
        _tick("deciding", n_steps - 2, n_steps)

        t0 = time.perf_counter()
        decision = decide_release(policy, results, errors, unavailable)
        step("decide", t0)
        _tick("writing outputs", n_steps - 1, n_steps)
        decision = _maybe_review(cfg, decision, log, extra)

        measures_doc = measures_document(cfg, run_id, results, errors)
        files["measures.json"] = json.dumps(measures_doc, indent=2).encode()
        per_record = per_record_frame(results, inputs.released.n)
        files["per_record.parquet"] = parquet_bytes(per_record)
        files.update(records_parquet(results))
        examples = None
        if cfg.report.detail == "full":
            examples = example_records(inputs.released, results, cfg.report.examples)
            files["examples.json"] = json.dumps(examples, indent=2).encode()
        return _finish(cfg, run_id, folder, decision, infos, timings, started, files,
                       validation_doc, measures_doc["measures"], options, extra, log,
                       per_record=per_record, examples=examples)
    except RiskgateError as exc:
        decision = fixed_decision(Verdict.ERROR, [f"{type(exc).__name__}: {exc}"])
    except Exception as exc:
        log.error("gate failed: %s", traceback.format_exc())
        decision = fixed_decision(Verdict.ERROR, [f"unexpected error {type(exc).__name__}: {exc}"])
    files.pop("measures.json", None)
    files.pop("examples.json", None)
    for name in [k for k in files if k.endswith(".parquet")]:
        files.pop(name)  # per-record and per-target tables of a failed run are not written
    return _finish(cfg, run_id, folder, decision, infos, timings, started, files, validation_doc,
                   [], options, extra, log)


def _tick(step: str, done: int, total: int) -> None:
    with progress.scope("gate"):
        progress.tick(step, done, total)


def _maybe_review(cfg: GateConfig, decision: Decision, log, extra: dict[str, Any]) -> Decision:
    if cfg.review != "pause" or decision.verdict is not Verdict.NEEDS_REVIEW:
        return decision
    from prefect.exceptions import FlowPauseTimeout
    from prefect.flow_runs import pause_flow_run

    log.info("release %s needs review: pausing for a reviewer (timeout %ss)", cfg.release_id,
             cfg.review_timeout_s)
    try:
        answer = pause_flow_run(wait_for_input=ReviewInput, timeout=cfg.review_timeout_s,
                                poll_interval=2)
    except FlowPauseTimeout:
        review = {"decision": "timeout", "reviewer": None, "comment": None, "at": now_iso()}
        extra["review"] = review
        return Decision(Verdict.REJECTED, decision.checks,
                        decision.reasons + ("review timed out: not approved",), review)
    review = {"decision": "approved" if answer.approve else "rejected",
              "reviewer": answer.reviewer, "comment": answer.comment, "at": now_iso()}
    verdict = Verdict.APPROVED if answer.approve else Verdict.REJECTED
    reasons = decision.reasons + (
        f"reviewer {answer.reviewer or '(unnamed)'} {review['decision']} the release"
        + (f": {answer.comment}" if answer.comment else ""),)
    return Decision(verdict, decision.checks, reasons, review)


def _finish(cfg, run_id, folder, decision, infos, timings, started, files, validation_doc,
            measures, options, extra, log, per_record=None, examples=None) -> dict[str, Any]:
    t0 = time.perf_counter()
    record = decision_record(cfg, run_id, decision, infos, timings, started, extra)
    files = dict(files)
    files["report.html"] = report_html(record, measures, validation_doc, per_record,
                                       cfg.report.detail, examples)
    written = write_outputs(folder, files, record, options)
    timings["write"] = time.perf_counter() - t0
    report_url = written.get("report.html")
    try:
        publish(record, report_url)
    except Exception as exc:  # telling is best effort; the decision is already written
        log.warning("could not publish artifacts/event: %s", exc)
    return {"release_id": cfg.release_id, "verdict": decision.verdict.value,
            "exit_code": decision.verdict.exit_code, "folder": folder,
            "decision_url": join_url(folder, "decision.json"), "report_url": report_url,
            "reasons": list(decision.reasons), "checks": record.get("checks", [])}
