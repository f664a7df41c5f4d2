"""Tables larger than one process: partitioned Parquet, read and counted one partition at a time.

A partitioned table is a folder (local or any fsspec store) of Parquet files with one schema.
One pass over each partition, on whichever worker runs it (:class:`Executor`):

* reads the partition's role columns, hashes its bytes, checks it is readable and has the
  rows its footer announces and runs the cleanliness checks on it;
* counts its **distinct rows** over the columns the equivalence family reads (quasi-identifiers,
  sensitive columns, weight, household): a group-by giving each distinct row's number of records.
  A row with a missing sensitive value stays a row of its own (l-diversity counts each missing
  value as its own category);
* draws a seeded sample of its rows (Bernoulli with the rate that gives ``sample_rows`` over the
  table), for the families that need records: attacks, copies, the ALC.

:func:`combine` merges the partitions' counts, in partition order, by a group-by of the partial
counts: the result (a table's distinct rows, sorted by value, with their multiplicity) is the same
whatever the order in which workers finished, so every figure computed from it is identical to
the bit on one node and on a cluster. No worker ever holds more than one partition; the process
that combines holds the distinct rows, whose number is bounded by the classes, not the records.

Per-record results are written back partitioned (:func:`write_per_record`): each partition's rows
are matched to their distinct row and take its values.
"""

from __future__ import annotations

import hashlib
import io
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import InputError, StorageError
from .formats import Markers, apply_markers, refuse_unsafe_names
from .redact import redact_text
from .roles import Roles
from .storage import filesystem, join_url, write_bytes

#: the multiplicity column of a table of distinct rows
RECORDS = "__records"
#: keeps a row with a missing sensitive value apart from the others (its global row number)
APART = "__apart"
#: the sum of the sample weights of a distinct row's records
WEIGHTS = "__weights"

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Where the per-partition work runs."""

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...


class LocalExecutor:
    """One partition after the other, in this process (one node, bounded memory)."""

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return [fn(item) for item in items]


class DaskExecutor:
    """On a Dask cluster: one task per item, results gathered in the items' order."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        from distributed import as_completed

        futures = self.client.map(fn, list(items), pure=False)
        position = {f.key: i for i, f in enumerate(futures)}
        out: list[Any] = [None] * len(futures)
        # each result leaves its worker as soon as it is ready: workers never pile them up
        for future, result in as_completed(futures, with_results=True, loop=self.client.loop):
            out[position[future.key]] = result
            future.release()
        del futures
        return out

    def close(self) -> None:
        """Disconnect from the cluster (the cluster itself keeps running)."""
        self.client.close()


@dataclass(frozen=True)
class Partitioned:
    """A partitioned Parquet table: its files (sorted), rows per file, and the shared schema."""

    name: str
    url: str
    files: tuple[str, ...]
    rows: tuple[int, ...]
    columns: tuple[str, ...]
    bytes: int

    @property
    def records(self) -> int:
        return int(sum(self.rows))

    def offsets(self) -> list[int]:
        """The global row number of each partition's first row."""
        return [int(x) for x in np.cumsum((0, *self.rows))[:-1]]


#: names of single files, never of a partitioned table's folder
_FILE_SUFFIXES = (".csv", ".tsv", ".txt", ".json", ".jsonl", ".gz", ".bz2", ".xz", ".zst",
                  ".zip")


def is_partitioned(url: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``url`` names a folder (a partitioned table: :func:`discover` reads it, and
    says what is wrong with a folder that holds no part or a stray file). A folder named like
    a single file (``released.csv/``) is a mistaken path, which reading says is a directory."""
    if url.rstrip("/").lower().endswith(_FILE_SUFFIXES):
        return False
    fs, path = filesystem(url, options)
    try:
        return bool(fs.isdir(path))
    except Exception:
        return False


def discover(url: str, name: str, options: Mapping[str, Any] | None = None) -> Partitioned:
    """The partitions of the table at ``url`` (a folder of ``*.parquet`` files, or one file).

    Raises:
        InputError: no partition, a partition that is not readable Parquet or whose schema
            differs from the first one's; each names the file and what to do.
    """
    shown = redact_text(url)
    what = f"table '{name}'"
    fs, path = filesystem(url, options)
    try:
        if not fs.exists(path):
            raise InputError(f"{what}: '{shown}' does not exist; check the path or URL")
        found = _files(fs, path)
        sizes = [int(fs.size(f) or 0) for f in found]
    except InputError:
        raise
    except Exception as exc:
        raise StorageError(f"{what}: cannot reach '{shown}': {redact_text(str(exc))[:300]}"
                           ) from None
    if not found:
        raise InputError(f"{what}: the folder '{shown}' holds no .parquet file; write the "
                         "partitions there, or give a single file")
    stray = _stray_files(fs, path)
    if stray:
        raise InputError(
            f"{what}: '{_shown(fs, stray[0])}' in the folder '{shown}' is not a Parquet part "
            f"of the table ({len(stray)} such file(s)); every file of a released folder is "
            "published and must be accounted for: remove it or write it elsewhere")
    first: pa.Schema | None = None
    rows: list[int] = []
    for f in found:
        part = _shown(fs, f)
        try:
            with fs.open(f, "rb") as fh:
                pf = pq.ParquetFile(fh)
                schema, n = pf.schema_arrow, pf.metadata.num_rows
        except Exception as exc:
            raise InputError(f"{what}: partition '{part}' is not a readable Parquet file "
                             f"({redact_text(str(exc))[:160]}); rewrite or remove it") from None
        schema = schema.remove_metadata()
        if first is None:
            first = schema
        elif not schema.equals(first):
            raise InputError(f"{what}: partition '{part}' has a different schema from "
                             f"'{_shown(fs, found[0])}' ({_schema_difference(first, schema)}); "
                             "every partition must have the same columns and types: rewrite it")
        rows.append(int(n))
    assert first is not None
    refuse_unsafe_names(first.names, what, shown)
    return Partitioned(name=name, url=shown, files=tuple(found), rows=tuple(rows),
                       columns=tuple(first.names), bytes=int(sum(sizes)))


def _files(fs: Any, path: str) -> list[str]:
    """The partitions under ``path``: its ``*.parquet`` files, sorted (hidden and ``_`` files
    left out); a file stands for itself."""
    if not fs.isdir(path):
        return [path]
    return sorted(f for f in fs.find(path) if f.endswith(".parquet")
                  and not f.rsplit("/", 1)[-1].startswith(("_", ".")))


#: files a writer leaves beside its parts (Spark, Hadoop, Dask, Databricks): markers and
#: metadata, never data; a name starting with one of these, or a checksum file, is accounted for
_MARKERS = ("_SUCCESS", "_metadata", "_common_metadata", "_committed_", "_started_")


def _stray_files(fs: Any, path: str) -> list[str]:
    """Files in a folder that are neither parts (``*.parquet``) nor a writer's markers."""
    if not fs.isdir(path):
        return []
    parts = set(_files(fs, path))
    stray = []
    for f in sorted(fs.find(path)):
        base = f.rsplit("/", 1)[-1]
        if f in parts or base.startswith(_MARKERS) or (base.startswith(".")
                                                      and base.endswith(".crc")):
            continue
        stray.append(f)
    return stray


def folder_sha256(url: str, options: Mapping[str, Any] | None = None) -> str:
    """The digest the gate records for a partitioned table (:func:`table_sha256` of its
    partitions' SHA-256, in order): what a trigger event announces for a folder."""
    fs, path = filesystem(url, options)
    digests = []
    for f in _files(fs, path):
        h = hashlib.sha256()
        with fs.open(f, "rb") as fh:
            while chunk := fh.read(8 << 20):
                h.update(chunk)
        digests.append(h.hexdigest())
    return table_sha256(digests)


def _shown(fs: Any, path: str) -> str:
    protocol = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
    return redact_text(path if protocol in ("file", "local") else f"{protocol}://{path}")


def _schema_difference(a: pa.Schema, b: pa.Schema) -> str:
    for fa in a:
        if fa.name not in b.names:
            return f"column '{fa.name}' is absent"
        fb = b.field(fa.name)
        if not fa.type.equals(fb.type):
            return f"column '{fa.name}' is {fb.type}, not {fa.type}"
    extra = [c for c in b.names if c not in a.names]
    return f"extra column(s) {extra}" if extra else "column order differs"


@dataclass(frozen=True)
class PartitionTask:
    """One partition's work order (plain data: it travels to a worker)."""

    table: str
    file: str
    index: int
    offset: int
    rows: int
    url: str
    read: tuple[str, ...]
    keys: tuple[str, ...]
    sensitive: tuple[str, ...]
    sample_rate: float
    seed: int
    weight: str | None = None
    household: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    check: Callable[[str, pd.DataFrame], Any] | None = None
    #: the cells that mean missing, as every table of a run reads them
    markers: Markers | None = None


@dataclass(frozen=True)
class PartitionSummary:
    """What one partition's pass returns: its hash, checks, distinct-row counts and sample."""

    index: int
    file: str
    rows: int
    sha256: str
    checks: Any
    counts: pd.DataFrame
    sample: pd.DataFrame
    #: (smallest, largest household id, ids missing) when the table has a household role
    households: tuple[Any, Any, int] | None = None


def _keyed(df: pd.DataFrame, keys: Sequence[str], sensitive: Sequence[str], offset: int
           ) -> pd.DataFrame:
    """The key columns (categorical ones as labels) and ``APART``: a row with a missing
    sensitive value gets its global row number there, every other row -1."""
    frame = df.loc[:, list(keys)].copy()
    for c in keys:  # categorical columns from Parquet: group on their labels
        if isinstance(frame[c].dtype, pd.CategoricalDtype):
            frame[c] = frame[c].astype(object)
    apart = np.full(len(df), -1, dtype=np.int64)
    if sensitive:
        lone = df.loc[:, list(sensitive)].isna().to_numpy().any(axis=1)
        apart[lone] = offset + np.flatnonzero(lone)
    frame[APART] = apart
    return frame


def distinct_rows(df: pd.DataFrame, keys: Sequence[str], sensitive: Sequence[str],
                  offset: int = 0, weight: str | None = None) -> pd.DataFrame:
    """The distinct rows of ``df`` over ``keys`` with their number of records (``RECORDS``)
    and, given a ``weight`` column, the sum of their weights (``WEIGHTS``), in first-appearance
    order.

    Missing values group together, except that a row with a missing sensitive value stays
    apart (``APART`` holds its global row number; -1 elsewhere).
    """
    frame = _keyed(df, keys, sensitive, offset)
    frame[RECORDS] = np.ones(len(df), dtype=np.int64)
    if weight:
        frame[WEIGHTS] = df[weight].to_numpy(dtype=np.float64)
    return frame.groupby([*keys, APART], dropna=False, sort=False).sum().reset_index()


def combine(parts: Sequence[pd.DataFrame], keys: Sequence[str]) -> pd.DataFrame:
    """Merge partial distinct-row counts (and weight sums) into the table's, adding them in
    partition order: sorted by value, missing last, so the result does not depend on which
    worker counted what."""
    both = pd.concat(list(parts), ignore_index=True)
    return both.groupby([*keys, APART], dropna=False, sort=True).sum().reset_index()


def summarize(task: PartitionTask) -> PartitionSummary:
    """One partition's pass (runs on a worker): read, hash, check, count, sample."""
    fs, _ = filesystem(task.url, task.options)
    part = _shown(fs, task.file)
    what = f"table '{task.table}', partition '{part}'"
    try:
        with fs.open(task.file, "rb") as fh:
            raw = fh.read()
    except Exception as exc:
        raise StorageError(f"{what}: cannot be read: {redact_text(str(exc))[:200]}") from None
    digest = hashlib.sha256(raw).hexdigest()
    try:
        table = pq.read_table(io.BytesIO(raw), columns=list(task.read))
    except Exception as exc:
        raise InputError(f"{what} cannot be read ({redact_text(str(exc))[:160]}); rewrite or "
                         "remove it") from None
    del raw
    if table.num_rows != task.rows:
        raise InputError(f"{what} holds {table.num_rows} rows where its footer announces "
                         f"{task.rows}; rewrite it")
    df = table.to_pandas()
    del table
    if task.markers:
        df, _ = apply_markers(df, task.markers)
    _refuse_non_finite(df, what)
    if task.weight:
        _refuse_bad_weights(df, task.weight, what)
    # a valid zero-row part (Spark and Dask write them) has nothing to check: its schema was
    # checked against the first part's
    checks = task.check(part, df) if task.check is not None and len(df) else (
        [] if task.check is not None else None)
    counts = (distinct_rows(df, task.keys, task.sensitive, task.offset, task.weight)
              if task.keys else pd.DataFrame())
    sample = df.iloc[_sample_rows(len(df), task.sample_rate, task.seed, task.index)]
    sample = sample.reset_index(drop=True)
    households = None
    if task.household:
        ids = df[task.household]
        households = (ids.min(), ids.max(), int(ids.isna().sum()))
    return PartitionSummary(index=task.index, file=part, rows=len(df), sha256=digest,
                            checks=checks, counts=counts, sample=sample,
                            households=households)


def _refuse_non_finite(df: pd.DataFrame, what: str) -> None:
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c].dtype):
            bad = np.isinf(df[c].to_numpy(dtype=float, na_value=np.nan))
            if bad.any():
                rows = np.flatnonzero(bad)[:5].tolist()
                raise InputError(f"{what}, column '{c}' holds {int(bad.sum())} infinite "
                                 f"number(s) (rows {rows} of the partition); every number "
                                 "must be finite: fix the data")


def _refuse_bad_weights(df: pd.DataFrame, weight: str, what: str) -> None:
    values = pd.to_numeric(df[weight], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~(values > 0)
    if bad.any():
        rows = np.flatnonzero(bad)[:5].tolist()
        raise InputError(f"{what}, column '{weight}': {int(bad.sum())} sample weight(s) are "
                         f"missing, not numbers or not positive (rows {rows} of the partition); "
                         "every record needs a positive weight")
    df[weight] = values


def _sample_rows(n: int, rate: float, seed: int, index: int) -> np.ndarray:
    """The rows of a partition in the table's seeded sample (Bernoulli at ``rate``)."""
    if rate >= 1.0:
        return np.arange(n)
    rng = np.random.default_rng([seed, index, zlib.crc32(b"riskgate-sample")])
    return np.flatnonzero(rng.random(n) < rate)


def tasks_for(table: Partitioned, roles: Roles, *, url: str, sample_rows: int, seed: int,
              options: Mapping[str, Any] | None = None,
              check: Callable[[str, pd.DataFrame], Any] | None = None,
              count: bool = True, markers: Markers | None = None, published: bool = False
              ) -> list[PartitionTask]:
    """One work order per partition of ``table`` (``count``: its distinct rows too). A
    published table (released, control) is read whole: every column is checked."""
    keys = count_keys(roles, table.columns) if count else []
    read = list(table.columns) if published else [c for c in roles.all_columns
                                                   if c in table.columns]
    rate = min(1.0, sample_rows / max(table.records, 1))
    return [PartitionTask(table=table.name, file=f, index=i, offset=off, rows=n, url=url,
                          read=tuple(read), keys=tuple(keys),
                          sensitive=tuple(c for c in roles.sensitive if c in table.columns),
                          sample_rate=rate, seed=seed,
                          weight=roles.weight if roles.weight in table.columns else None,
                          household=(roles.household if count and roles.household in
                                     table.columns else None),
                          options=dict(options or {}), check=check, markers=markers)
            for i, (f, n, off) in enumerate(zip(table.files, table.rows, table.offsets()))]


def count_keys(roles: Roles, columns: Sequence[str]) -> list[str]:
    """The columns a table's distinct rows are counted over: what the equivalence family
    reads (quasi-identifiers, sensitive columns). Not the weight (its sum is kept) nor the
    household: with either, the distinct rows would be about as many as the records."""
    wanted = [*roles.quasi_identifiers, *roles.sensitive]
    return [c for c in dict.fromkeys(wanted) if c in columns]


def table_sha256(digests: Sequence[str]) -> str:
    """One digest for a partitioned table: SHA-256 over its partitions' digests, in order."""
    h = hashlib.sha256()
    for d in digests:
        h.update(bytes.fromhex(d))
    return h.hexdigest()


def households_apart(summaries: Sequence[PartitionSummary]) -> str | None:
    """None when every household lies in one partition (the partitions' household id ranges
    are disjoint and no id is missing), else why not."""
    ranges = [s.households for s in summaries if s.households is not None]
    if len(ranges) != len(summaries):
        return "the table has no household column in some partition"
    if any(missing for _, _, missing in ranges):
        return "some records have no household id"
    ordered = sorted((lo, hi) for lo, hi, _ in ranges)
    if any(prev_hi >= lo for (_, prev_hi), (lo, _) in zip(ordered, ordered[1:])):
        return ("households span partitions (their id ranges overlap): write each household "
                "into one partition, the partitions in household-id order")
    return None


@dataclass(frozen=True)
class RecordTask:
    """One partition's order to map its records to their distinct rows' values: for the
    household risk (``target`` None: the sum) or the per-record output (``target``: a URL)."""

    file: str
    offset: int
    url: str
    keys: tuple[str, ...]
    sensitive: tuple[str, ...]
    distinct: pd.DataFrame
    values: pd.DataFrame
    target: str | None = None
    household: str | None = None
    weight: str | None = None
    risk: str = "sdc.risk"
    options: Mapping[str, Any] = field(default_factory=dict)
    markers: Markers | None = None


def _records(task: RecordTask) -> tuple[pd.DataFrame, np.ndarray | None]:
    """The partition's records' values; with a household, the household risk of each."""
    from .measures.sdc import household_risk

    fs, _ = filesystem(task.url, task.options)
    extra = [c for c in (task.household, task.weight) if c and c not in task.keys]
    with fs.open(task.file, "rb") as fh:
        df = pq.read_table(fh, columns=[*task.keys, *extra]).to_pandas()
    if task.markers:  # the same cells missing as when the distinct rows were counted
        df, _ = apply_markers(df, task.markers)
    index = match_distinct(df, task.distinct, task.keys, task.sensitive, task.offset)
    out = task.values.iloc[index].reset_index(drop=True)
    if not task.household:
        return out, None
    codes, _ = pd.factorize(df[task.household])
    weights = (pd.to_numeric(df[task.weight]).to_numpy(dtype=np.float64) if task.weight
               else None)
    return out, household_risk(out[task.risk].to_numpy(dtype=np.float64), codes, weights,
                               "released", task.household)


def household_part(task: RecordTask) -> float:
    """One partition's sum of its records' household risks (its households lie in it)."""
    _, hier = _records(task)
    assert hier is not None
    return float(hier.sum())


def per_record_part(task: RecordTask) -> str:
    """Write one partition's per-record values (``row`` = the record's global row number):
    each row takes the values of its distinct row (and its household's risk). Returns the
    written URL."""
    out, hier = _records(task)
    if hier is not None:
        out.insert(out.columns.get_loc(task.risk) + 1, "sdc.hier_risk", hier)
    out.insert(0, "row", task.offset + np.arange(len(out), dtype=np.int64))
    buf = io.BytesIO()
    out.to_parquet(buf, index=False)
    assert task.target is not None
    write_bytes(task.target, buf.getvalue(), task.options, overwrite=True)
    return task.target


def match_distinct(df: pd.DataFrame, distinct: pd.DataFrame, keys: Sequence[str],
                   sensitive: Sequence[str], offset: int) -> np.ndarray:
    """For each row of a partition, the position of its distinct row in ``distinct``."""
    frame = _keyed(df, keys, sensitive, offset)
    groups = frame.groupby([*keys, APART], dropna=False, sort=False)
    row_group = groups.ngroup().to_numpy()
    mine = groups.size().reset_index().drop(columns=[0])
    mine["__mine"] = np.arange(len(mine))
    ref = distinct.loc[:, [*keys, APART]].copy()
    for c in keys:
        if ref[c].dtype != mine[c].dtype:
            mine[c] = mine[c].astype(object)
            ref[c] = ref[c].astype(object)
    ref["__at"] = np.arange(len(ref))
    joined = mine.merge(ref, on=[*keys, APART], how="left")
    if joined["__at"].isna().any():
        raise InputError("a partition changed while the gate read it: its rows no longer "
                         "match the counted ones; run the gate again")
    at = np.empty(len(mine), dtype=np.int64)
    at[joined["__mine"].to_numpy()] = joined["__at"].to_numpy(dtype=np.int64)
    return at[row_group]


def part_url(folder: str, index: int) -> str:
    return join_url(folder, "per_record", f"part-{index:05d}.parquet")
