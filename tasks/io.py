"""Prefect tasks that read the inputs and write the outputs through fsspec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from riskcore.errors import ConfigError
from riskcore.gate.config import Gate, GateConfig
from riskcore.gate.inputs import load_input
from riskcore.gate.outputs import write_run
from riskcore.gate.tables import TableInfo
from riskcore.redact import register
from riskcore.storage import check_storage_options

from .common import Held, clean_failure


def resolve_storage_options(cfg: GateConfig, base: Mapping[str, Any] | None = None
                            ) -> dict[str, Any]:
    """fsspec options: the caller's (no secrets), the config's (no secrets), then a Prefect
    Secret block's, if named. The block's values are registered for redaction: they never
    appear in a log, an output, an artifact or an event."""
    options = {**dict(base or {}), **cfg.storage.options}
    check_storage_options(options, "storage options")
    if cfg.storage.credentials_block:
        from prefect.blocks.system import Secret

        try:
            block: Any = Secret.load(cfg.storage.credentials_block)
            secret: Any = block.get()
        except ValueError:
            raise ConfigError(f"storage.credentials_block: no Secret block named "
                              f"'{cfg.storage.credentials_block}'; create it with Prefect "
                              "(prefect block create secret) or fix the name") from None
        if not isinstance(secret, Mapping):
            raise ConfigError(f"Secret block '{cfg.storage.credentials_block}' must hold a JSON "
                              "object of fsspec storage options (e.g. key, secret)")
        register([secret])
        options.update(secret)
    return options


@task(name="load", task_run_name="load-{name}", cache_policy=NO_CACHE, retries=0)
@clean_failure
def load_table(gate: Held[Gate], name: str, options: Held[dict[str, Any]]
               ) -> tuple[pd.DataFrame, TableInfo]:
    """Read one input table (original, released, control, identification)."""
    return load_input(gate.value.config, name, options.value)


@task(name="write-outputs", cache_policy=NO_CACHE, retries=0)
@clean_failure
def write_outputs(folder: str, files: Held[dict[str, bytes]],
                  decision: Held[dict[str, Any] | None], options: Held[dict[str, Any]]
                  ) -> dict[str, str]:
    """Write the run folder, decision.json last."""
    return write_run(folder, files.value, decision.value, options.value)
