"""Prefect tasks that read inputs and write outputs through fsspec (retried: I/O can flake)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from riskcore.gate import load_input, write_run
from riskcore.gateconfig import GateConfig
from riskcore.tableio import TableInfo, check_storage_options


def storage_options(cfg: GateConfig) -> dict[str, Any]:
    """fsspec options: the config's (no secrets) plus a Prefect Secret block's, if named.

    The block's content is never logged or written anywhere.
    """
    options = dict(cfg.storage.options)
    if cfg.storage.credentials_block:
        from prefect.blocks.system import Secret

        secret = Secret.load(cfg.storage.credentials_block).get()
        if not isinstance(secret, Mapping):
            from riskcore.errors import ConfigError

            raise ConfigError(f"Secret block '{cfg.storage.credentials_block}' must hold a JSON "
                              "object of fsspec storage options (e.g. key, secret)")
        options.update(secret)
    else:
        check_storage_options(options)
    return options


@task(name="load", task_run_name="load-{name}", retries=2, retry_delay_seconds=2,
      cache_policy=NO_CACHE)
def load_table(cfg: GateConfig, name: str, options: dict[str, Any]
               ) -> tuple[pd.DataFrame, TableInfo]:
    """Read one input table (original, released, control, identification)."""
    return load_input(cfg, name, options)


@task(name="write-outputs", retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE)
def write_outputs(folder: str, files: dict[str, bytes], decision: dict[str, Any],
                  options: dict[str, Any]) -> dict[str, str]:
    """Write the run folder, decision.json last."""
    return write_run(folder, files, decision, options)
