"""Reading tables through fsspec: CSV, Parquet, JSON lines, from any URL or path.

The loader never decides types by itself for CSV: cells are read as text (so the cleanliness
checks see exactly what the file holds), and :func:`coerce_types` converts them afterwards.
Every read records the file's SHA-256, size, format and encoding, so a run can be audited.

Credentials never come from a config file: :func:`check_storage_options` refuses secret-looking
keys; they come from the environment (as s3fs/gcsfs read them) or from a Prefect block resolved
by the orchestration layer. URLs are printed with any user:password part removed.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import fsspec
import pandas as pd
import pyarrow.parquet as pq

from .data import ColumnType, numeric_values
from .errors import ConfigError, InputError, StorageError

DEFAULT_NA_VALUES = ("", "NA", "N/A", "NaN", "nan", "null", "NULL", "None")
DEFAULT_MAX_TABLE_MB = 2048.0
_SECRET_KEYS = re.compile(r"(secret|password|passwd|token|credential|private|^key$|access_key)",
                          re.IGNORECASE)
_NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")
REPLACEMENT_CHAR = "\ufffd"


@dataclass(frozen=True)
class TableInfo:
    """What was read: for the decision record."""

    name: str
    url: str
    format: str
    encoding: str | None
    sha256: str
    bytes: int
    rows: int
    columns: tuple[str, ...]
    undecodable_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "format": self.format,
                "encoding": self.encoding, "sha256": self.sha256, "bytes": self.bytes,
                "rows": self.rows, "columns": list(self.columns),
                "undecodable_bytes": self.undecodable_bytes}


def redact_url(url: str) -> str:
    """The URL without any ``user:password@`` part (never print credentials)."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return url


def check_storage_options(options: Mapping[str, Any] | None, where: str = "config") -> None:
    """Refuse credentials in plain configuration (they belong in the environment or a block)."""
    for key, value in (options or {}).items():
        if isinstance(value, Mapping):
            check_storage_options(value, where)
        elif _SECRET_KEYS.search(str(key)):
            raise ConfigError(
                f"storage option '{key}' in the {where} looks like a credential; do not put "
                "credentials in config files: set them in the environment (AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY...) or name a Prefect Secret block in "
                "storage.credentials_block"
            )


def detect_format(url: str, declared: str | None = None) -> str:
    if declared and declared != "auto":
        if declared not in ("csv", "parquet", "jsonl"):
            raise ConfigError(f"unknown table format '{declared}'; use csv, parquet or jsonl")
        return declared
    path = urlsplit(url).path.lower() if "://" in url else url.lower()
    for suffix in (".gz", ".bz2", ".zst", ".xz"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if path.endswith((".parquet", ".pq")):
        return "parquet"
    if path.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    return "csv"


def _open_fs(url: str, storage_options: Mapping[str, Any] | None):
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except (ImportError, ValueError) as exc:
        raise StorageError(f"cannot open '{redact_url(url)}': {exc}") from None
    return fs, path


def read_table(
    url: str,
    *,
    name: str = "table",
    format: str | None = None,
    encoding: str = "utf-8",
    na_values: Sequence[str] = DEFAULT_NA_VALUES,
    columns: Sequence[str] | None = None,
    max_mb: float = DEFAULT_MAX_TABLE_MB,
    storage_options: Mapping[str, Any] | None = None,
    sep: str | None = None,
) -> tuple[pd.DataFrame, TableInfo]:
    """Read one table.

    CSV cells come back as text (object dtype, missing as None); Parquet and JSON lines keep their
    types. Bytes that the declared encoding cannot decode become U+FFFD, counted in
    ``TableInfo.undecodable_bytes`` and caught by the cleanliness checks.

    Args:
        url: any fsspec URL or local path.
        name: the table's role name, for messages ("original", "released"...).
        format: csv, parquet, jsonl or auto (by extension).
        encoding: the declared text encoding, or "auto" to detect it.
        na_values: CSV cells that mean "missing".
        columns: read only these columns (Parquet reads them alone: memory stays bounded).
        max_mb: size limit; above it a clear error says how to raise it.
        storage_options: passed to fsspec (no credentials: see check_storage_options).
        sep: CSV separator; default sniffed from the header line.

    Raises:
        InputError: unreadable or empty table, duplicate column names, size over the limit.
        StorageError: the storage could not be reached.
    """
    shown = redact_url(url)
    fmt = detect_format(url, format)
    fs, path = _open_fs(url, storage_options)
    try:
        if not fs.exists(path):
            raise InputError(f"table '{name}': file '{shown}' does not exist; check the URL")
        size = int(fs.size(path) or 0)
    except InputError:
        raise
    except Exception as exc:  # network / permission errors from the backend
        raise StorageError(f"table '{name}': cannot reach '{shown}': {exc}") from None
    limit = int(max_mb * 1024 * 1024)
    if fmt != "parquet" and size > limit:
        raise InputError(
            f"table '{name}': '{shown}' is {size / 2**20:.1f} MB, above the limit of {max_mb:g} MB "
            "(limits.max_table_mb); raise the limit in the config, or store the table as Parquet "
            "so only the needed columns are read"
        )
    try:
        if fmt == "parquet":
            return _read_parquet(fs, path, name, shown, columns, limit, max_mb)
        with fs.open(path, "rb", compression="infer") as fh:
            raw = fh.read()
    except (InputError, StorageError):
        raise
    except Exception as exc:
        raise StorageError(f"table '{name}': reading '{shown}' failed: {exc}") from None
    sha = hashlib.sha256(raw).hexdigest()
    text, used_encoding, bad = _decode(raw, encoding, name, shown)
    if fmt == "jsonl":
        try:
            df = pd.read_json(io.StringIO(text), lines=True, dtype=False)
        except ValueError as exc:
            raise InputError(f"table '{name}': '{shown}' is not valid JSON lines: {exc}") from None
        if columns is not None:
            df = df[[c for c in columns if c in df.columns]]
    else:
        df = _parse_csv(text, name, shown, na_values, sep)
        if columns is not None:
            df = df[[c for c in df.columns if c in set(columns)]]
    if len(df) == 0:
        raise InputError(f"table '{name}': '{shown}' has no data rows; check the file")
    info = TableInfo(name=name, url=shown, format=fmt, encoding=used_encoding, sha256=sha,
                     bytes=len(raw), rows=len(df), columns=tuple(map(str, df.columns)),
                     undecodable_bytes=bad)
    return df, info


def _decode(raw: bytes, encoding: str, name: str, shown: str) -> tuple[str, str, int]:
    if raw.startswith(b"\xef\xbb\xbf") and encoding.lower().replace("-", "") in ("utf8", "auto"):
        raw = raw[3:]
    if encoding == "auto":
        try:
            return raw.decode("utf-8"), "utf-8", 0
        except UnicodeDecodeError:
            from charset_normalizer import from_bytes

            best = from_bytes(raw[: 1 << 20]).best()
            encoding = best.encoding if best is not None else "utf-8"
    try:
        codec_text = raw.decode(encoding, errors="replace")
    except LookupError:
        raise ConfigError(f"table '{name}': unknown encoding '{encoding}' declared") from None
    bad = codec_text.count(REPLACEMENT_CHAR) - raw.decode(encoding, errors="ignore").count(
        REPLACEMENT_CHAR)
    return codec_text, encoding, max(bad, 0)


def _parse_csv(text: str, name: str, shown: str, na_values: Sequence[str],
               sep: str | None) -> pd.DataFrame:
    first_line = text.split("\n", 1)[0].rstrip("\r")
    if not first_line.strip():
        raise InputError(f"table '{name}': '{shown}' has no header line; add column names")
    if sep is None:
        counts = {s: first_line.count(s) for s in (",", ";", "\t", "|")}
        sep = max(counts, key=lambda s: counts[s]) if max(counts.values()) else ","
    header = next(csv.reader([first_line], delimiter=sep))
    seen: set[str] = set()
    dups = sorted({h for h in header if h in seen or seen.add(h)})  # type: ignore[func-returns-value]
    if dups:
        raise InputError(
            f"table '{name}': '{shown}' has duplicate column names {dups}; rename them so each "
            "column name is unique"
        )
    try:
        df = pd.read_csv(io.StringIO(text), sep=sep, dtype=object, keep_default_na=False,
                         na_values=list(na_values), skipinitialspace=False)
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(f"table '{name}': '{shown}' is not a readable CSV file: {exc}") from None
    return df.astype(object).where(df.notna(), None)


def _read_parquet(fs, path: str, name: str, shown: str, columns: Sequence[str] | None,
                  limit: int, max_mb: float) -> tuple[pd.DataFrame, TableInfo]:
    digest = hashlib.sha256()
    with fs.open(path, "rb") as fh:
        while chunk := fh.read(8 << 20):
            digest.update(chunk)
    with fs.open(path, "rb") as fh:
        try:
            pf = pq.ParquetFile(fh)
        except Exception as exc:
            raise InputError(f"table '{name}': '{shown}' is not a readable Parquet file: "
                             f"{exc}") from None
        names = pf.schema_arrow.names
        if len(set(names)) != len(names):
            dups = sorted({c for c in names if names.count(c) > 1})
            raise InputError(f"table '{name}': '{shown}' has duplicate column names {dups}; "
                             "rename them")
        wanted = [c for c in (columns or names) if c in names]
        meta = pf.metadata
        idx = [names.index(c) for c in wanted]
        est = sum(meta.row_group(g).column(i).total_uncompressed_size
                  for g in range(meta.num_row_groups) for i in idx)
        if est > limit:
            raise InputError(
                f"table '{name}': the {len(wanted)} needed column(s) of '{shown}' take "
                f"{est / 2**20:.1f} MB, above the limit of {max_mb:g} MB (limits.max_table_mb); "
                "raise the limit in the config"
            )
        df = pf.read(columns=wanted).to_pandas()
    if len(df) == 0:
        raise InputError(f"table '{name}': '{shown}' has no data rows; check the file")
    info = TableInfo(name=name, url=shown, format="parquet", encoding=None,
                     sha256=digest.hexdigest(), bytes=int(fs.size(path)), rows=len(df),
                     columns=tuple(map(str, df.columns)))
    return df, info


def looks_numeric(series: pd.Series) -> bool:
    """True when every non-missing cell of a text column parses as a number."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return True
    values = series.dropna()
    if values.empty:
        return False
    return bool(values.astype(str).str.match(_NUMBER).all())


def coerce_types(df: pd.DataFrame, types: Mapping[str, ColumnType], name: str) -> pd.DataFrame:
    """Convert text columns to their declared type (numeric columns to float/int).

    Columns whose type is not declared and whose every value parses as a number become numeric;
    the rest stay text (categorical). A declared numeric column with text raises InputError
    (the cleanliness checks report it first in the gate).
    """
    out = {}
    for col in df.columns:
        s = df[col]
        typ = types.get(col)
        numeric = typ.is_numeric if typ is not None else (
            s.dtype == object and looks_numeric(s))
        if numeric and not pd.api.types.is_numeric_dtype(s.dtype):
            out[col] = pd.Series(numeric_values(s, name, col), index=s.index)
        else:
            out[col] = s
    return pd.DataFrame(out, index=df.index)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_bytes(url: str, data: bytes, storage_options: Mapping[str, Any] | None = None,
                *, overwrite: bool = False) -> None:
    """Write one object; refuses to overwrite unless asked (previous runs are never replaced)."""
    fs, path = _open_fs(url, storage_options)
    try:
        if not overwrite and fs.exists(path):
            raise StorageError(f"'{redact_url(url)}' already exists; riskgate never overwrites "
                               "a previous run's outputs")
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        if parent and getattr(fs, "auto_mkdir", True) is not None:
            try:
                fs.makedirs(parent, exist_ok=True)
            except Exception:
                pass  # object stores have no directories
        with fs.open(path, "wb") as fh:
            fh.write(data)
    except StorageError:
        raise
    except Exception as exc:
        raise StorageError(f"writing '{redact_url(url)}' failed: {exc}") from None


def exists(url: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    fs, path = _open_fs(url, storage_options)
    try:
        return bool(fs.exists(path))
    except Exception as exc:
        raise StorageError(f"cannot reach '{redact_url(url)}': {exc}") from None


def join_url(base: str, *parts: str) -> str:
    base = base.rstrip("/")
    return "/".join([base, *[p.strip("/") for p in parts]])
