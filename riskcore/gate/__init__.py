"""The release gate without Prefect: config and policy (validated at load), tables,
cleanliness checks, the run sequence and the output schemas.

    >>> from riskcore.gate import load_gate, run_gate
    >>> outcome = run_gate(load_gate("examples/gate.yaml"), run_id="local-1")
    >>> outcome.verdict

Names load on first use: ``riskcore.gate.gx_helper`` starts Great Expectations' helper
process before the config's imports (pydantic, pandas) have run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..lazy import load_name

if TYPE_CHECKING:  # what type checkers see; at run time the names load on first use
    from .config import Gate, GateConfig, load_config, load_gate
    from .policy import Decision, Policy, Verdict, decide, load_policy
    from .run import LocalSteps, RunOutcome, Steps, run_gate

#: public name -> module that defines it
_API = {
    "Gate": "config", "GateConfig": "config", "load_config": "config", "load_gate": "config",
    "Decision": "policy", "Policy": "policy", "Verdict": "policy", "decide": "policy",
    "load_policy": "policy",
    "LocalSteps": "run", "RunOutcome": "run", "Steps": "run", "run_gate": "run",
}


__all__ = ["Decision", "Gate", "GateConfig", "LocalSteps", "Policy", "RunOutcome", "Steps",
           "Verdict", "decide", "load_config", "load_gate", "load_policy", "run_gate"]


def __getattr__(name: str) -> Any:
    return load_name(__name__, _API, globals(), name)


def __dir__() -> list[str]:
    return __all__
