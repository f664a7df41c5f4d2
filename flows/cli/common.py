"""What the commands share: consoles, JSON output, progress bars, result tables, storage
options, and the library commands' path through the gate's own steps (read, clean, encode)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from riskcore import storage as riskcore_storage
from riskcore.errors import ConfigError, InputError
from riskcore.redact import redact, redact_text
from riskcore.storage import filesystem

from ..standby_wire import process_age

#: off a terminal (CI, cron, a pipe): full lines, never cut at 80 columns
_PIPE_WIDTH = 240


def _console(stderr: bool) -> Console:
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=_PIPE_WIDTH,
                                                   soft_wrap=True)


console = _console(stderr=True)
out = _console(stderr=False)


def reset_consoles() -> None:
    """Make the consoles again for this process's standard streams, where they now lead: a
    standby's gate process was given its command's (:mod:`riskgate.flows.standby`), a
    terminal or a pipe, after the consoles were made for the standby's own."""
    for target, stderr in ((console, True), (out, False)):
        made = _console(stderr=stderr)
        target.__dict__.update(made.__dict__)


#: environment variable with JSON fsspec options for every URL the CLI reads (no secrets)
STORAGE_ENV = riskcore_storage.STORAGE_ENV


def csv_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def add_storage_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage-options", dest="storage_options", default=None, metavar="JSON",
                   help="fsspec options for every URL, e.g. '{\"endpoint_url\": "
                   "\"http://minio:9000\"}' (never credentials; also "
                   f"${STORAGE_ENV})")


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    """The storage options of a command: --storage-options, else $RISKGATE_STORAGE_OPTIONS."""
    from riskcore.storage import parse_storage_options

    raw = getattr(args, "storage_options", None) or os.environ.get(STORAGE_ENV)
    return parse_storage_options(raw, f"--storage-options / ${STORAGE_ENV}")


def write_json(doc: Any, target: str, schema: str | None = None) -> None:
    """Write a JSON document (validated against its schema when named) to a file or stdout."""
    doc = redact(doc)
    if schema:
        from riskcore.gate.schemas import validate

        validate(doc)
    text = json.dumps(doc, indent=2, sort_keys=True)
    if target == "-":
        print(text)
    else:
        Path(target).write_text(text, encoding="utf-8")
        console.print(f"JSON written to {target}")


@contextmanager
def progress_bars() -> Iterator[None]:
    """Rich progress bars (count, elapsed, ETA) for every label riskcore ticks under.

    Drawn on stderr on a terminal; off a terminal (CI, cron) one line per gate step and per
    measure family as each finishes, with its elapsed time, so that a log is never silent for
    minutes.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from riskcore import progress

    if not console.is_terminal:
        def on_step(label: str, seconds: float) -> None:
            console.print(f"  {label}: {seconds:.1f} s", markup=False, highlight=False)

        with progress.listen_steps(on_step):
            yield
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                  transient=True) as bar:
        ids: dict[str, Any] = {}

        def on_tick(label: str, step: str, done: int, total: int | None) -> None:
            if label not in ids:
                ids[label] = bar.add_task(label, total=total)
            bar.update(ids[label], completed=done, total=total, description=f"{label}: {step}")

        with progress.listen(on_tick):
            yield


def print_results(results: Mapping[str, Any], target: Console) -> None:
    """One table per measure: figure, value (4 significant digits), direction."""
    for name, res in results.items():
        table = Table(title=name, show_header=True, header_style="bold")
        table.add_column("figure")
        table.add_column("value", justify="right")
        table.add_column("direction")
        for key, value in res.figures.items():
            txt = "n/a" if value is None else (f"{value:.6g}" if isinstance(value, float)
                                               else str(value))
            direction = res.higher_is_riskier.get(key)
            table.add_row(key, txt, "" if direction is None else
                          ("higher = riskier" if direction else "lower = riskier"))
        if res.status.value != "ok":
            table.caption = redact_text(f"{res.status.value}: {res.reason}")
        target.print(table)


def result_console(json_target: str | None) -> Console:
    """Human output goes to stderr when JSON goes to stdout."""
    return console if json_target == "-" else out


def config_subset(path: str | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a gate config a library command takes: roles, types, reading, missing
    policy, seed and the measures' parameters (``--config FILE``)."""
    if not path:
        return {}
    from riskcore.gate.config import resolve_hierarchies
    from riskcore.gate.documents import read_document
    from riskcore.storage import parent, resolve

    data = read_document(path, options, "config file")
    if not isinstance(data, Mapping):
        raise ConfigError(f"config file '{redact_text(path)}' must hold a mapping")
    keep = {k: data[k] for k in ("roles", "missing", "alpha", "seed", "read", "limits",
                                 "measures", "original", "released", "control",
                                 "identification", "generalization", "suppressed",
                                 "min_comparable") if k in data}
    base = parent(path)
    for key in ("original", "released", "control", "identification"):
        if isinstance(keep.get(key), str):
            keep[key] = resolve(keep[key], base)
    if "generalization" in keep:
        keep["generalization"] = resolve_hierarchies(keep["generalization"], base)
    return keep


def read_frames(urls: Mapping[str, str], options: Mapping[str, Any],
                read: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], list[Any]]:
    """Read tables by role name (all their columns), for commands that take their columns from
    the tables themselves."""
    from riskcore.gate.tables import read_table

    frames, infos = {}, []
    for name, url in urls.items():
        df, info = read_table(url, name=name, storage_options=options, **dict(read or {}))
        frames[name] = df
        infos.append(info)
    return frames, infos


def prepared_inputs(cfg: Any, options: Mapping[str, Any],
                    frames: dict[str, Any] | None = None, infos: list[Any] | None = None
                    ) -> tuple[Any, list[Any]]:
    """Read (unless given), clean and encode a command's tables with the gate's own steps.

    Returns (MeasureInputs, table infos listing only the columns with a role); unclean data is
    an InputError listing the failed checks (the gate would reject it).
    """
    from dataclasses import replace

    from riskcore.gate.encoding import encode
    from riskcore.gate.inputs import load_input
    from riskcore.gate.prepare import prepare_tables
    from riskcore.gate.run import validate

    if frames is None:
        frames, infos = {}, []
        for name in cfg.tables():
            df, info = load_input(cfg, name, options)
            frames[name] = df
            infos.append(info)
    roles = set(cfg.role_spec.all_columns)
    infos = [replace(i, columns=tuple(c for c in i.columns if c in roles),
                     other_columns=i.other_columns + sum(1 for c in i.columns if c not in roles))
             for i in (infos or [])]
    frames, prepared = prepare_tables(cfg, frames, infos or [])
    report = validate(cfg, frames).with_prepared(prepared.checks, prepared.to_dict())
    if not report.success:
        lines = report.summary_lines()
        raise InputError("the data is not clean (the gate would reject it):\n  "
                         + "\n  ".join(lines[:20]))
    return encode(cfg, frames), infos


def common_columns(tables: Sequence[list[str]]) -> list[str]:
    first = tables[0]
    return [c for c in first if all(c in t for t in tables[1:])]


def alignment_keys(base: Mapping[str, Any], roles: Mapping[str, Any]) -> dict[str, Any]:
    """The config's generalization settings (riskcore.generalization) for a command's tables,
    restricted to the columns the command gives a role."""
    known = {*(roles.get("quasi_identifiers") or roles.get("qi") or []),
             *(roles.get("sensitive") or [])}
    out: dict[str, Any] = {k: base[k] for k in ("suppressed", "min_comparable") if k in base}
    gen = base.get("generalization")
    if isinstance(gen, Mapping):
        out["generalization"] = {c: v for c, v in gen.items() if c in known}
    return out


def file_sha256(url: str, options: dict[str, Any]) -> str:
    """The SHA-256 the gate will find for the table at ``url`` (a file, or a folder of
    Parquet partitions)."""
    from riskcore.partitions import folder_sha256, is_partitioned

    if is_partitioned(url, options):
        return folder_sha256(url, options)
    fs, path = filesystem(url, options)
    digest = hashlib.sha256()
    try:
        with fs.open(path, "rb") as fh:
            while chunk := fh.read(8 << 20):
                digest.update(chunk)
    except FileNotFoundError:
        raise ConfigError(f"'{redact_text(url)}' does not exist; emit the event after the "
                          "file is written") from None
    return digest.hexdigest()


def api_url() -> str:
    """The configured Prefect API, checked; refuses to work without one."""
    from prefect.settings import PREFECT_API_URL

    from ..local_api import check_api

    url = PREFECT_API_URL.value()
    if not url:
        raise ConfigError("PREFECT_API_URL is not set: this command needs the running Prefect "
                          "server the gate is deployed on (e.g. export "
                          "PREFECT_API_URL=http://127.0.0.1:4200/api)")
    check_api(url)
    return str(url)


#: when the command started (the epoch), where a standby's gate process was forked for it
_STARTED: list[float] = []


def command_started(at: float) -> None:
    """The command this process runs started at ``at`` (the epoch): a standby's gate process
    is forked after the command itself started (:mod:`riskgate.flows.standby`)."""
    _STARTED[:] = [at]


def process_seconds() -> float | None:
    """Wall seconds since the command started: what a user waited for, imports and start-up
    included (Linux's /proc; None elsewhere)."""
    if _STARTED:
        return max(0.0, time.time() - _STARTED[0])
    age = process_age()
    return age or None
