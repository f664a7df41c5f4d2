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

from riskcore.errors import ConfigError
from riskcore.gate.config import Gate
from riskcore.gate.trigger import MAX_MANIFEST_BYTES, TriggerPayload, parse_manifest
from riskcore.redact import redact_text
from riskcore.storage import read_bytes, under_prefix

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


def this_deployment() -> Any:
    """The deployment the current flow run was created from (None for a run that is not a
    deployment's: the command line, a test)."""
    from prefect.runtime import deployment

    deployment_id = deployment.id
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
    decision records of it. ConfigError when the manifest lies outside every released
    prefix, changed since it was found, or breaks the trigger contract."""
    url = str(manifest.get("url") or "")
    expected = str(manifest.get("sha256") or "")
    rules = pinned.config.trigger
    if not any(under_prefix(url, p) for p in rules.released_prefixes):
        raise ConfigError(f"release manifest '{redact_text(url)[:200]}' lies outside every "
                          f"trigger.released_prefixes of the config {pinned.source}")
    blob = read_bytes(url, options, max_bytes=MAX_MANIFEST_BYTES, what="release manifest",
                      too_large="a manifest names a few files")
    found = hashlib.sha256(blob.data).hexdigest()
    if found != expected:
        raise ConfigError(f"release manifest '{blob.url}' changed since it was found (sha256 "
                          f"{found[:16]}..., found as {expected[:16]}...): a new manifest is "
                          "gated on its own")
    context = {"trigger": {"manifest": blob.url, "manifest_sha256": found}}
    try:
        payload = parse_manifest(blob.data, url, rules, pinned.source)
    except ConfigError as exc:  # refused: its ERROR is filed under the release it names,
        raise ManifestRefused(str(exc), _named_release(blob.data), context) from None
    return payload, context


class ManifestRefused(ConfigError):
    """A release manifest that breaks the trigger contract: the release id it names (checked
    by the caller before use) and what the decision records of the manifest, so that its
    ERROR is found where the pipeline looks (``riskgate history <its release id>``)."""

    def __init__(self, message: str, release_id: str, context: dict[str, Any]) -> None:
        super().__init__(message)
        self.release_id = release_id
        self.context = context


def _named_release(raw: bytes) -> str:
    """The ``release_id`` a manifest's JSON names, or '' (never raises)."""
    import json

    try:
        doc = json.loads(raw)
    except ValueError:
        return ""
    value = doc.get("release_id") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else ""
