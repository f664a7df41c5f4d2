"""What a gate run was asked (:class:`Request`): a config, a trigger event (whose payload is
read from the API's event store, never taken as a parameter), a release manifest, or nothing
but the pinned config; the deployed gate's parameter models; and what decision.json records of
the trigger."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from riskcore.errors import ConfigError
from riskcore.gate.trigger import TRIGGER_EVENT, payload_sha256
from riskcore.signer import signer_from_environment

from .pinned import nightly_config_url, pinned_config_url, run_deployment_id

#: seconds a triggered run waits for its event to be readable from the API's event store
EVENT_READ_TIMEOUT_S = 60.0


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


def plain(value: Any) -> dict[str, Any] | None:
    """A parameter model as the mapping the gate reads (a deployment's run hands dicts)."""
    if value is None:
        return None
    return value.model_dump() if isinstance(value, BaseModel) else dict(value)


def event_payload(trigger: Mapping[str, Any], inline: bool = True) -> Any:
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


def trigger_context(trigger: Mapping[str, Any] | None, payload: Any) -> dict[str, Any]:
    """What decision.json records of the trigger (the payload by its SHA-256 only)."""
    if trigger is None:
        return {}
    return {"trigger": {"event": str(trigger.get("event") or TRIGGER_EVENT),
                        "event_id": str(trigger.get("event_id") or "") or None,
                        "occurred": trigger.get("occurred"),
                        "payload_sha256": payload_sha256(payload)
                        if isinstance(payload, Mapping) else None}}


def pinned_config(config: Any) -> Any:
    """The triggered gate's config: the given one (a run in this process, a test), else the
    Prefect Variable ``riskgate_trigger_config`` (riskgate deploy --trigger-config URL)."""
    return config if config is not None else pinned_config_url()


def related(trigger: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The triggering event, related to the verdict event (``emit-anonymized --wait`` finds
    the verdict of its own event by it), whether or not the gate could start."""
    event_id = str((trigger or {}).get("event_id") or "")
    return ([{"prefect.resource.id": f"prefect.event.{event_id}",
              "prefect.resource.role": "trigger"}] if event_id else [])


def gate_signer() -> Any:
    """What signs the decision: the signer service ($RISKGATE_SIGNER_SOCKET), else (a run that
    is not a deployment's) the key file $RISKGATE_SIGNING_KEY names, else None (unsigned). A
    deployed run never reads a key file (:func:`riskcore.signer.signer_from_environment`)."""
    return signer_from_environment(deployed=bool(run_deployment_id()))


def nightly_config() -> str:
    return nightly_config_url()


def request_of(flow_run: Any, params: Mapping[str, Any]) -> Request:
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
