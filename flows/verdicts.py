"""A gate run's verdict as its Prefect state: the state's type for orchestrators, its name for
people (see :mod:`riskgate.flows.release_gate`), the run's name and tags, and the outcome a
finished run hands back to the process that ran it."""

from __future__ import annotations

import logging
import threading
from typing import Any

from prefect.exceptions import MissingResult
from prefect.runtime import flow_run as runtime_flow_run
from prefect.states import Completed, Crashed, Failed, State

from riskcore.gate.run import RunOutcome

from .names import VERDICT_STATE_NAMES


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


def label_run(release_id: str, verdict: str | None, run_id: Any = None) -> None:
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
