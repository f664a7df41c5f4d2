"""Reading a run's tables, and refusing inputs nobody can have meant.

* :func:`load_input`: one table as the run reads it (the original's measured columns alone;
  a published table, released or control, whole);
* :func:`refuse_unintended`: a release byte-identical to its original;
* :func:`verify_checksums`: the files read are the files a trigger event announced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .. import progress
from ..errors import InputError
from ..roles import PUBLISHED
from .config import TablesConfig
from .tables import TableInfo, read_table


def load_input(cfg: TablesConfig, name: str, storage_options: Mapping[str, Any] | None = None
               ) -> tuple[pd.DataFrame, TableInfo]:
    """Read one of the run's tables (original, released, control, identification)."""
    url = cfg.tables()[name]
    roles = cfg.role_spec
    wanted = list(roles.all_columns)
    # the original's (and identification table's) other columns are never measured nor
    # published: they are read alone. A released or control table is read whole, whatever
    # its format: every published column is checked (control characters, identifiers, a
    # column the original lacks)
    published = name in PUBLISHED
    with progress.working("load"):
        return read_table(url, name=name, format=cfg.read.format, encoding=cfg.read.encoding,
                          na_values=cfg.read.na_values, sep=cfg.read.sep,
                          max_mb=cfg.limits.max_table_mb, storage_options=storage_options,
                          columns=None if published else list(roles.measured_columns),
                          role_columns=wanted, markers=cfg.markers)


def refuse_unintended(infos: list[TableInfo]) -> str | None:
    """A reason to reject inputs the user cannot have meant: a release identical to the
    original (same bytes) publishes the original."""
    by_name = {i.name: i for i in infos}
    ori, rel = by_name.get("original"), by_name.get("released")
    if ori is not None and rel is not None and ori.sha256 == rel.sha256:
        return (f"the released table is byte-identical to the original (sha256 "
                f"{rel.sha256[:16]}...): nothing was anonymized; release the anonymized file")
    return None


def verify_checksums(infos: list[TableInfo], expected: Mapping[str, str]) -> None:
    """The files read are the files announced: InputError naming the table otherwise."""
    by_name = {i.name: i for i in infos}
    for name, sha in expected.items():
        info = by_name.get(name)
        if info is None:
            raise InputError(f"the trigger event gives a checksum for table '{name}', which "
                             "this run does not read")
        if info.sha256 != sha:
            raise InputError(
                f"table '{name}': the file read ({info.url}, sha256 {info.sha256[:16]}...) is "
                f"not the one the trigger event announced (sha256 {sha[:16]}...): it changed "
                "after the anonymization pipeline wrote it; emit the event again")
