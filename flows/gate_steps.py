"""The gate's steps as Prefect tasks (:class:`PrefectSteps`, which
:func:`riskcore.gate.run.run_gate` drives): loads and measures in parallel, the encoding beside
the checks, and the review pause with the form a reviewer fills in the Prefect UI."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
from prefect import get_run_logger
from prefect.futures import as_completed, wait
from prefect.input import RunInput
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import Field

from riskcore.errors import RiskgateError
from riskcore.gate.cleanliness import CleanlinessReport
from riskcore.gate.config import Gate
from riskcore.gate.encoding import encode_measured
from riskcore.gate.outputs import now_iso
from riskcore.gate.policy import Decision, Verdict
from riskcore.gate.tables import TableInfo
from riskcore.measures import MeasureInputs, longest_first
from riskcore.redact import redact_text
from riskcore.results import MeasureResult
from riskcore.threads import Beside, process_budget
from riskgate.tasks.common import Held
from riskgate.tasks.io import load_table, write_outputs
from riskgate.tasks.measure import encode_beside, encode_inputs, run_family
from riskgate.tasks.tell import check_line, publish
from riskgate.tasks.validate import validate_inputs

from .limits import GateSlot
from .verdicts import label_run


class ReviewInput(RunInput):
    """What a reviewer enters in the Prefect UI to resume a paused gate run."""

    approve: bool
    reviewer: str = Field(min_length=3, description="who decides (name or e-mail): required, "
                          "recorded in decision.json")
    comment: str = ""


def run_logger() -> logging.Logger | logging.LoggerAdapter[Any]:
    try:
        return get_run_logger()
    except Exception:
        return logging.getLogger("riskgate.gate")


def _result(future: Any) -> Any:
    """A task's value; a task that ended Failed re-raises its error (RiskgateError)."""
    return future.result(raise_on_failure=True)


#: the flow's task runner's threads: the tables load at once (downloads from object storage
#: overlap), and the families run in them (:func:`families_at_once` of them at a time)
MEASURE_WORKERS = 4


def families_at_once() -> int:
    """Families measured at once: one per core this process may use (its thread budget,
    :func:`riskcore.threads.process_budget`), at least two, at most :data:`MEASURE_WORKERS`.

    More families than cores only take turns on them, each holding its arrays the while, and
    contend for the interpreter's lock. The every-family 1M-row gate on two cores, its
    measures with four at once against two: 2.86-3.15 s against 2.66-2.79 s (four alternated
    gates through a standby); with the task runner itself cut to two threads, 2.52-2.99 s
    against 2.12-2.61 s and 80-100 MB less peak RSS (eleven alternated pairs, through a
    standby and in the command's process). The demo's measures are the same (1.39-1.59 s
    against 1.33-1.50 s)."""
    return max(2, min(MEASURE_WORKERS, process_budget()))


class PrefectSteps:
    """The gate's steps as Prefect tasks (loads and measures in parallel)."""

    @property
    def parallel_measures(self) -> int:
        return families_at_once()

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
        # the longest start first, the next as one ends (:func:`families_at_once` at a time);
        # the results keep the config's order
        waiting, at_once = longest_first(gate.measures), self.parallel_measures
        started: dict[str, Any] = {}
        running: list[Any] = []
        while waiting:
            if len(running) >= at_once:
                ended = next(as_completed(running))
                running = [f for f in running if f is not ended]
            name = waiting.pop(0)
            started[name] = run_family.submit(name, Held(inputs), Held(gate.measures[name]))
            running.append(started[name])
        wait(list(started.values()))
        results, errors = {}, {}
        for name in gate.measures:
            fut = started[name]
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
        label_run(gate.config.release_id, decision.verdict.value)  # verdict:NEEDS_REVIEW
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
