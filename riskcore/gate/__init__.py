"""The release gate without Prefect: config and policy (validated at load), tables,
cleanliness checks, the run sequence and the output schemas.

    >>> from riskcore.gate import load_gate, run_gate
    >>> outcome = run_gate(load_gate("examples/gate.yaml"), run_id="local-1")
    >>> outcome.verdict
"""

from .config import Gate, GateConfig, load_config, load_gate
from .policy import Decision, Policy, Verdict, decide, load_policy


def __getattr__(name: str) -> object:  # the run sequence (and the report) load on first use
    if name in ("LocalSteps", "RunOutcome", "Steps", "run_gate"):
        from . import run

        return getattr(run, name)
    raise AttributeError(name)

__all__ = ["Decision", "Gate", "GateConfig", "LocalSteps", "Policy", "RunOutcome", "Steps",
           "Verdict", "decide", "load_config", "load_gate", "load_policy", "run_gate"]
