"""What the signer asks the Prefect API before it signs: is there a gate run behind this
decision? (:class:`riskcore.signer.RunCheck`)

A decision is signed only for a flow run that exists, is a run of the release gate under one
of its deployments (``on-anonymization``, ``nightly-recheck``), is RUNNING now, was created
under the config the decision says it was made under (the deployment's config tag, set by
``riskgate deploy`` and copied into each run's tags when it is created), and carries the
decision's release as its ``release:`` tag (the gate labels its run before it reads a table).
A process that can reach the socket and makes a decision up has no such run to name: a run id
copied from an earlier decision belongs to a run that has ended, and a running one is signed
once, by whichever asks first (the gate run then ends ERROR "signed before", which shows the
attempt).

The signer holds the API's URL and auth string (``PREFECT_API_URL``,
``PREFECT_API_AUTH_STRING``, the custodian's): it trusts the server as far as "this run
exists and is running", and nothing a run says of itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from riskcore.errors import ConfigError
from riskcore.signing import Rules, SigningRefused

from .deployments import GATES
from .names import CONFIG_TAG_PREFIX

#: the flow whose runs make decisions
GATE_FLOW = "release-gate"


class DeployedRuns:
    """:class:`riskcore.signer.RunCheck` against the Prefect API this process is configured
    for."""

    def __init__(self, gates: tuple[str, ...] = GATES) -> None:
        from prefect.settings import PREFECT_API_URL

        self.gates = gates
        if not PREFECT_API_URL.value():
            raise ConfigError("the signer confirms every run with the Prefect API before it "
                              "signs: set PREFECT_API_URL (and PREFECT_API_AUTH_STRING) in its "
                              "environment, as for the worker")

    def ping(self) -> None:
        """ConfigError when the API cannot be reached, or refuses this process's auth
        string."""
        from prefect.client.orchestration import get_client

        try:
            with get_client(sync_client=True) as client:
                client.read_work_pools(limit=1)  # an endpoint that needs the auth string
        except Exception as exc:
            raise ConfigError(f"the Prefect API cannot be reached or refuses the signer "
                              f"({type(exc).__name__}); check PREFECT_API_URL and "
                              "PREFECT_API_AUTH_STRING") from None

    def confirm(self, decision: Mapping[str, Any], rules: Rules) -> None:
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.objects import StateType
        from prefect.exceptions import ObjectNotFound

        raw = str(decision.get("flow_run_id") or "")
        try:
            run_id = uuid.UUID(raw)
        except ValueError:
            raise SigningRefused(f"the decision names run '{raw[:64]}', which is not a "
                                 "Prefect flow run id: only a deployed gate's run is "
                                 "signed") from None
        try:
            with get_client(sync_client=True) as client:
                try:
                    run = client.read_flow_run(run_id)
                except ObjectNotFound:
                    raise SigningRefused(f"no flow run {run_id} in the Prefect API: a "
                                         "decision with no gate run is not signed") from None
                flow = client.read_flow(run.flow_id)
                deployment = (client.read_deployment(run.deployment_id)
                              if run.deployment_id else None)
        except SigningRefused:
            raise
        except Exception as exc:
            raise SigningRefused(f"the run cannot be confirmed with the Prefect API "
                                 f"({type(exc).__name__}): nothing is signed unconfirmed"
                                 ) from None
        refuse(run, flow, deployment, decision, rules, StateType.RUNNING, self.gates)


def refuse(run: Any, flow: Any, deployment: Any, decision: Mapping[str, Any], rules: Rules,
           running: Any, gates: tuple[str, ...] = GATES) -> None:
    """SigningRefused naming the first way the run does not back the decision."""
    if flow.name != GATE_FLOW:
        raise SigningRefused(f"run {run.id} is a run of the flow '{flow.name}', not of the "
                             "release gate")
    if deployment is None or deployment.name not in gates:
        raise SigningRefused(f"run {run.id} is not a run of a deployed gate ({', '.join(gates)})"
                             ": only a deployed gate's decisions are signed (a gate you run "
                             "yourself signs with RISKGATE_SIGNING_KEY)")
    if run.state_type != running:
        raise SigningRefused(f"run {run.id} is {getattr(run.state_type, 'value', '?')}, not "
                             "running: a decision is signed while its run makes it")
    # the config the run was created under: its deployment's tag, copied into the run's tags
    # when the run was created (a redeploy while a review waits does not change it)
    recorded = next((str(t)[len(CONFIG_TAG_PREFIX):] for t in (*(run.tags or ()),
                                                               *(deployment.tags or ()))
                     if str(t).startswith(CONFIG_TAG_PREFIX)), None)
    if recorded != rules.config_sha256:
        raise SigningRefused(f"run {run.id} was created under config sha256:{recorded} (its "
                             f"deployment {deployment.name}'s), the decision names "
                             f"sha256:{rules.config_sha256}")
    release = next((str(t).split(":", 1)[1] for t in run.tags or ()
                    if str(t).startswith("release:")), None)
    if release != str(decision.get("release_id")):
        raise SigningRefused(f"run {run.id} gates release '{release}', the decision is of "
                             f"'{str(decision.get('release_id'))[:128]}'")
