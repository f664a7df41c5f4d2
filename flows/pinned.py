"""The rules a deployed gate runs under: pinned by the custodian at deploy time, never by a run.

``riskgate deploy --trigger-config URL`` sets the Prefect Variable that names the config and
records the SHA-256 of the config's text in each deployment that uses it (a tag,
:data:`~riskgate.flows.names.CONFIG_TAG_PREFIX`). Every deployed run reads the Variable, reads
the config and compares: a Variable re-pinned, or a config file edited, without a redeploy ends
the run ERROR, "the pinned config changed since deploy". Neither check makes the API's auth
string harmless (whoever holds it can redeploy); the signer and ``riskgate verify --config`` do
not trust the server at all.

A release manifest (``release.json``, :func:`riskcore.gate.trigger.parse_manifest`) is read
here for a run that ``watch-releases`` started: it must still be the bytes the watcher saw
(their SHA-256), under one of the config's ``trigger.released_prefixes``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from riskcore.errors import ConfigError, RiskgateError
from riskcore.gate.config import Gate
from riskcore.gate.trigger import (
    MAX_MANIFEST_BYTES,
    RELEASE_ID_PATTERN,
    TriggerPayload,
    folder_release_id,
    parse_manifest,
)
from riskcore.redact import redact_text
from riskcore.storage import exists, join_url, read_bytes, under_prefix, write_bytes

from .names import CONFIG_TAG_PREFIX, NIGHTLY_CONFIG_VARIABLE, TRIGGER_CONFIG_VARIABLE


def _variable(name: str) -> str | None:
    from prefect.variables import Variable

    value = Variable.get(name, default=None)
    return str(value) if value else None


def pinned_config_url() -> str:
    """The triggered gates' config URL (the Prefect Variable ``riskgate deploy
    --trigger-config`` sets); ConfigError when none was pinned."""
    value = _variable(TRIGGER_CONFIG_VARIABLE)
    if not value:
        raise ConfigError(f"no pinned gate config for triggered runs: deploy with riskgate "
                          f"deploy --trigger-config URL (the Prefect Variable "
                          f"'{TRIGGER_CONFIG_VARIABLE}'); a payload never names the config")
    return value


def nightly_config_url() -> str:
    """The nightly re-check's config URL; ConfigError when none was set."""
    value = _variable(NIGHTLY_CONFIG_VARIABLE)
    if not value:
        raise ConfigError(f"no gate config: set the Prefect Variable "
                          f"'{NIGHTLY_CONFIG_VARIABLE}' to the config URL (riskgate deploy "
                          "--nightly-config URL)")
    return value


def recorded_sha256(tags: Any) -> str | None:
    """The config SHA-256 a deployment's tags record, if any."""
    for tag in tags or ():
        if str(tag).startswith(CONFIG_TAG_PREFIX):
            return str(tag)[len(CONFIG_TAG_PREFIX):]
    return None


def run_deployment_id() -> str | None:
    """The id of the deployment the current flow run was created from, None for a run that is
    not a deployment's (the command line, a test). Read from the flow run the engine put in
    the run's context; Prefect's ``runtime.deployment.id`` reads the flow run from the API
    again there (a request on every gate's path: 0.05 s against a local server)."""
    from prefect.context import FlowRunContext

    run = getattr(FlowRunContext.get(), "flow_run", None)
    if run is not None:
        return str(run.deployment_id) if run.deployment_id else None
    from prefect.runtime import deployment  # no context: the run named by the environment

    return deployment.id  # type: ignore[no-any-return]


def this_deployment() -> Any:
    """The deployment the current flow run was created from (None for a run that is not a
    deployment's: the command line, a test)."""
    deployment_id = run_deployment_id()
    if not deployment_id:
        return None
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_deployment(deployment_id)


def check_deployed(gate: Gate) -> None:
    """A deployed run's config is the one its deployment recorded when it was deployed:
    ConfigError "the pinned config changed since deploy" otherwise (nothing to check for a
    run that is not a deployment's)."""
    dep = this_deployment()
    if dep is None:
        return
    recorded = recorded_sha256(dep.tags)
    actual = str(gate.provenance.get("config", {}).get("sha256"))
    if recorded is None:
        raise ConfigError(f"the deployment {dep.name} records no pinned config: deploy it with "
                          "riskgate deploy --trigger-config URL (or --nightly-config URL)")
    if recorded != actual:
        raise ConfigError(
            f"the pinned config changed since deploy: {gate.source} is now sha256:{actual}, "
            f"the deployment {dep.name} was deployed with sha256:{recorded}; if the change is "
            "the custodian's, redeploy (riskgate deploy --trigger-config URL) and restart the "
            "signer")


def read_manifest(manifest: Mapping[str, Any], pinned: Gate,
                  options: Mapping[str, Any]) -> tuple[TriggerPayload, dict[str, Any]]:
    """The payload of the release manifest a ``watch-releases`` run found, and what the
    decision records of it. ManifestRefused (filed under the release id the manifest names,
    else under its folder's path: where the pipeline looks) when the manifest lies outside
    every released prefix, cannot be read, is larger than a manifest, changed since it was
    found, breaks the trigger contract, or names a release id another folder's manifests
    filed first (:func:`bind_release_id`)."""
    url = str(manifest.get("url") or "")
    expected = str(manifest.get("sha256") or "")
    rules = pinned.config.trigger
    context: dict[str, Any] = {"trigger": {"manifest": redact_text(url)[:500]}}
    fallback = folder_release_id(url)
    if not any(under_prefix(url, p) for p in rules.released_prefixes):
        raise ManifestRefused(f"release manifest '{redact_text(url)[:200]}' lies outside every "
                              f"trigger.released_prefixes of the config {pinned.source}",
                              fallback, context)
    try:
        blob = read_bytes(url, options, max_bytes=MAX_MANIFEST_BYTES, what="release manifest",
                          too_large="a manifest names a few files")
    except RiskgateError as exc:
        raise ManifestRefused(str(exc), fallback, context) from None
    found = hashlib.sha256(blob.data).hexdigest()
    context = {"trigger": {"manifest": blob.url, "manifest_sha256": found}}
    named = _named_release(blob.data) or fallback
    if found != expected:
        raise ManifestRefused(f"release manifest '{blob.url}' changed since it was found "
                              f"(sha256 {found[:16]}..., found as {expected[:16]}...): a new "
                              "manifest is gated on its own", named, context)
    try:
        payload = parse_manifest(blob.data, url, rules, pinned.source)
    except ConfigError as exc:
        raise ManifestRefused(str(exc), named, context) from None
    try:
        bind_release_id(payload.release_id, url, pinned, options)
    except ConfigError as exc:  # filed under the folder: the id is another folder's
        raise ManifestRefused(str(exc), fallback, context) from None
    return payload, context


#: where the output store records which folder's manifests a release id belongs to
BINDINGS = "_manifests/release-ids"


def bind_release_id(release_id: str, manifest_url: str, pinned: Gate,
                    options: Mapping[str, Any]) -> None:
    """A release id belongs to the folder whose manifest named it first: recorded in the
    output store (``_manifests/release-ids/<id>.json``), and a manifest in another folder that
    names it is refused (ConfigError). A pipeline with write access to its own prefix then
    files runs under its own releases only: it cannot add decoy runs to another release's
    lineage, nor make another release's history say what it chose."""
    import json
    from datetime import UTC, datetime

    folder = manifest_url.rsplit("/", 1)[0] + "/"
    url = join_url(pinned.config.output_url, BINDINGS, f"{release_id}.json")
    if exists(url, options, what="output_url"):
        try:
            bound = json.loads(read_bytes(url, options, max_bytes=1 << 16,
                                          what="release id binding").data)
        except (RiskgateError, ValueError):
            bound = {}
        owner = str(bound.get("folder") or "") if isinstance(bound, dict) else ""
        if owner != folder:
            raise ConfigError(
                f"release id '{release_id}' belongs to the manifests of '{redact_text(owner)}' "
                f"(the first to name it); a manifest in '{redact_text(folder)}' may not file "
                "runs under it: name a release id of its own")
        return
    write_bytes(url, json.dumps({"release_id": release_id, "folder": folder,
                                 "bound_at": datetime.now(UTC).isoformat(timespec="seconds")},
                                indent=2).encode("utf-8"), options)


class ManifestRefused(ConfigError):
    """A release manifest that breaks the trigger contract: the release id its refusal is
    filed under (the one it names, checked by the caller, else its folder's path) and what the
    decision records of the manifest, so that its ERROR is found where the pipeline looks
    (``riskgate history <that id>``)."""

    def __init__(self, message: str, release_id: str, context: dict[str, Any]) -> None:
        super().__init__(message)
        self.release_id = release_id
        self.context = context


def _named_release(raw: bytes) -> str:
    """The ``release_id`` a manifest's JSON names when it is a valid one, or '' (never
    raises: deep nesting and bad JSON included)."""
    import re

    from riskcore.signing import strict_json

    try:
        doc = strict_json(raw)
    except ValueError:
        return ""
    value = doc.get("release_id") if isinstance(doc, dict) else None
    return value if isinstance(value, str) and re.match(RELEASE_ID_PATTERN, value) else ""
