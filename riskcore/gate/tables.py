"""Reading the gate's tables: CSV, Parquet and JSON lines from any fsspec URL.

CSV cells are read as text, so that the cleanliness checks see exactly what the file holds;
:func:`coerce_types` converts them afterwards. Every read records the file's SHA-256, stored
size, format and encoding, so a run can be audited, and accounts for every record: a CSV whose
parsed rows do not match its lines (a stray quote merges rows into one multi-line cell) is
refused with the line where it starts, never measured short.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..data import ColumnType, distinct, looks_numeric, numeric_values, unique_categories
from ..errors import ConfigError, InputError, StorageError
from ..formats import Markers, apply_markers, refuse_unsafe_names
from ..redact import redact_text
from ..results import Record
from ..storage import filesystem, read_bytes
from .config import DEFAULT_MAX_TABLE_MB, DEFAULT_NA_VALUES

REPLACEMENT_CHAR = "\ufffd"
FORMATS = ("csv", "parquet", "jsonl")


@dataclass(frozen=True)
class TableInfo(Record):
    """What was read, for the decision record.

    ``columns`` lists only the columns that have a role in the run; the others are counted in
    ``other_columns`` (a file's header is data, and never copied into outputs).
    """

    name: str
    url: str
    format: str
    encoding: str | None
    sha256: str
    bytes: int
    rows: int
    columns: tuple[str, ...]
    other_columns: int = 0
    undecodable_bytes: int = 0
    compression: str | None = None
    #: role column -> cells its declared missing-value markers turned missing
    markers_replaced: Mapping[str, int] = field(default_factory=dict)
    #: every column name of the file, in its order (never written out: a header is data)
    header: tuple[str, ...] = ()
    json_exclude = ("header",)


def detect_format(url: str, declared: str | None = None) -> str:
    """csv, parquet or jsonl: as declared, else by the file name's extension."""
    if declared and declared != "auto":
        if declared not in FORMATS:
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
    role_columns: Sequence[str] | None = None,
    markers: Markers | None = None,
) -> tuple[pd.DataFrame, TableInfo]:
    """Read one table.

    CSV cells come back as text (object dtype, missing as None); Parquet and JSON lines keep
    their types. Bytes that the declared encoding cannot decode become U+FFFD, counted in
    ``TableInfo.undecodable_bytes`` and caught by the cleanliness checks.

    Args:
        url: any fsspec URL or local path.
        name: the table's role name, for messages ("original", "released"...).
        format: csv, parquet, jsonl or auto (by extension).
        encoding: the declared text encoding, or "auto" to detect it.
        na_values: CSV cells that mean "missing".
        columns: read only these columns (Parquet reads them alone: memory stays bounded).
        max_mb: size limit, after decompression (Parquet: of the needed columns).
        storage_options: passed to fsspec (no credentials).
        sep: CSV separator; default sniffed from the header line.
        role_columns: the columns with a role in the run, the only names recorded in TableInfo.
        markers: the cells that mean missing (:mod:`riskcore.formats`), for every column and
            per column: missing before any type is decided.

    Raises:
        InputError: unreadable, empty or truncated table, duplicate column names, over the limit.
        StorageError: the storage could not be reached.
    """
    fmt = detect_format(url, format)
    limit = int(max_mb * 1024 * 1024)
    what = f"table '{name}'"
    markers = markers or Markers()
    na_values = [*na_values, *(m for m in markers.every_column if m not in na_values)]
    if fmt == "parquet":
        df, info = _read_parquet(url, name, columns, limit, max_mb, storage_options)
    else:
        blob = read_bytes(url, storage_options, max_bytes=limit, what=what)
        if fmt == "csv" and _ascii_as_declared(blob.data, encoding):
            # ASCII bytes are their UTF-8 text: no decoding pass over the file (a million
            # rows: 60 ms), Arrow reads the bytes; the text is decoded only if it refuses them
            df, header = _parse_csv(None, name, blob.url, na_values, sep, columns,
                                    utf8=blob.data)
            used_encoding, bad = ("utf-8" if encoding == "auto" else encoding), 0
        else:
            text, used_encoding, bad = _decode(blob.data, encoding, name, blob.url)
            header = ()
            if fmt == "jsonl":
                try:
                    df = pd.read_json(io.StringIO(text), lines=True, dtype=False)
                except ValueError as exc:
                    raise InputError(f"{what}: '{blob.url}' is not valid JSON lines: "
                                     f"{redact_text(str(exc))[:200]}") from None
                _refuse_nested(df, name, blob.url)
                header = tuple(map(str, df.columns))
            else:
                # the bytes as read are the text's UTF-8 when they decoded as it whole
                same = (used_encoding.lower().replace("-", "") == "utf8" and bad == 0
                        and not blob.data.startswith(b"\xef\xbb\xbf"))
                df, header = _parse_csv(text, name, blob.url, na_values, sep, columns,
                                        utf8=blob.data if same else None)
        if columns is not None:
            keep = set(columns)
            df = df[[c for c in df.columns if c in keep]]
        info = TableInfo(name=name, url=blob.url, format=fmt, encoding=used_encoding,
                         sha256=blob.sha256, bytes=blob.stored_bytes, rows=len(df),
                         columns=tuple(map(str, df.columns)), undecodable_bytes=bad,
                         compression=blob.compression, header=tuple(header))
    if len(df) == 0:
        raise InputError(f"{what}: '{info.url}' has no data rows; check the file")
    refuse_unsafe_names(info.header or info.columns, what, info.url)
    df, replaced = apply_markers(df, markers, skip_text=fmt == "csv")
    info = replace(info, header=info.header or info.columns)
    if role_columns is not None:
        wanted = set(role_columns)
        shown = tuple(c for c in info.columns if c in wanted)
        info = replace(info, columns=shown, other_columns=len(info.columns) - len(shown),
                       markers_replaced={c: n for c, n in replaced.items() if c in wanted})
    return df, info


def _ascii_as_declared(raw: bytes, encoding: str) -> bool:
    """The file is plain ASCII declared (or detected) as UTF-8, so its bytes are its text; not
    when it looks like UTF-16 without a byte-order mark (many NULs: :func:`_decode` says so)."""
    return (encoding.lower().replace("-", "") in ("utf8", "auto")
            and not _looks_utf16(raw) and raw.isascii())


def _looks_utf16(raw: bytes) -> bool:
    """UTF-16 text without a byte-order mark: in its first 4 KB, NUL bytes fill half or more
    of the even or of the odd positions and almost none of the others (each ASCII character
    is a byte and a NUL). NULs inside a UTF-8 file (empty cells a tool padded
    with NUL) fall on both and are left to the cleanliness checks."""
    head = raw[:4096]
    even, odd = head[0::2].count(0), head[1::2].count(0)
    half = max(len(head) // 2, 1)
    many, few = max(even, odd), min(even, odd)
    return many > 64 and many >= half / 2 and few <= many / 20


def _decode(raw: bytes, encoding: str, name: str, shown: str) -> tuple[str, str, int]:
    what = f"table '{name}'"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) and encoding.lower() in (
            "auto", "utf-8", "utf8", "utf-16", "utf16"):
        encoding = "utf-16"  # a byte-order mark says so
    elif encoding.lower().replace("-", "") in ("utf8", "auto") and raw.startswith(
            b"\xef\xbb\xbf"):
        raw = raw[3:]
    if encoding.lower() in ("utf-8", "utf8") and _looks_utf16(raw):
        raise InputError(f"{what}: '{shown}' looks like UTF-16 text without a byte-order mark "
                         "(many NUL bytes); declare read.encoding: utf-16 (or --encoding) or "
                         "save the file as UTF-8")
    if encoding == "auto":
        try:
            return raw.decode("utf-8"), "utf-8", 0
        except UnicodeDecodeError:
            from charset_normalizer import from_bytes

            best = from_bytes(raw[: 1 << 20]).best()
            encoding = best.encoding if best is not None else "utf-8"
    try:
        return raw.decode(encoding), encoding, 0  # one pass when every byte decodes
    except UnicodeDecodeError:
        pass
    except LookupError:
        raise ConfigError(f"{what}: unknown encoding '{encoding}' declared (read.encoding); "
                          "use e.g. utf-8, latin-1, utf-16 or auto") from None
    try:
        codec_text = raw.decode(encoding, errors="replace")
    except LookupError:
        raise ConfigError(f"{what}: unknown encoding '{encoding}' declared (read.encoding); "
                          "use e.g. utf-8, latin-1, utf-16 or auto") from None
    bad = codec_text.count(REPLACEMENT_CHAR) - raw.decode(encoding, errors="ignore").count(
        REPLACEMENT_CHAR)
    return codec_text, encoding, max(bad, 0)


def _parse_csv(text: str | None, name: str, shown: str, na_values: Sequence[str],
               sep: str | None, columns: Sequence[str] | None = None,
               utf8: bytes | None = None) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """A CSV file's table and its header; ``text`` None when ``utf8`` (its bytes, ASCII) is
    the text."""
    what = f"table '{name}'"
    data = utf8 if utf8 is not None else str(text).encode("utf-8")
    data, breaks = line_breaks(data, what, shown)
    end_b = data.find(b"\n")
    first_line = (data if end_b < 0 else data[:end_b]).decode("utf-8").rstrip("\r")
    if not first_line.strip():
        raise InputError(f"{what}: '{shown}' has no header line; add column names")
    if first_line.count('"') % 2:  # a quoted name goes on past the line's end
        raise InputError(f"{what}: '{shown}' has a column name that holds a line break (a "
                         "quoted name runs past the header line); rename the column (names "
                         "are written into configs, logs and reports)")
    if sep is None:
        counts = {s: first_line.count(s) for s in (",", ";", "\t", "|")}
        sep = max(counts, key=lambda s: counts[s]) if max(counts.values()) else ","
    if len(first_line) > 100_000:
        raise InputError(f"{what}: '{shown}' has a header line of {len(first_line):,} "
                         "characters; check the file's line breaks and separator")
    header = next(csv.reader([first_line], delimiter=sep))
    seen: set[str] = set()
    dups = sorted({h for h in header if h in seen or seen.add(h)})  # type: ignore[func-returns-value]
    if dups:
        raise InputError(
            f"{what}: '{shown}' has duplicate column names {dups}; rename them so each "
            "column name is unique")
    fast = _arrow_csv(data, header, sep, na_values, columns, breaks)
    if fast is not None:
        if breaks.quoted:
            _refuse_merged_rows(fast, data, breaks, sep, len(header), name, shown)
        return fast, tuple(header)
    # Arrow refused the bytes: pandas reads the text and says why
    try:
        df = pd.read_csv(io.BytesIO(data), sep=sep, dtype=object, keep_default_na=False,
                         na_values=list(na_values), skipinitialspace=False,
                         encoding="utf-8")
    except pd.errors.ParserError as exc:
        msg = str(exc)
        hint = ("a row has more fields than the header: check the separator (read.sep) and "
                "quoting")
        if "EOF inside string" in msg or "field larger than field limit" in msg:
            hint = "a quote opens a field that never closes: fix the quoting"
        raise InputError(f"{what}: '{shown}' is not a readable CSV file ({hint}): "
                         f"{redact_text(msg)[:200]}") from None
    except ValueError as exc:
        raise InputError(f"{what}: '{shown}' is not a readable CSV file: "
                         f"{redact_text(str(exc))[:200]}") from None
    df = df.astype(object).where(df.notna(), None)
    records = breaks.records if breaks.records is not None else _record_lines(data)
    if records != len(df):
        _refuse_merged_rows(df, data, breaks, sep, len(header), name, shown, always=True)
    elif breaks.quoted:
        _refuse_merged_rows(df, data, breaks, sep, len(header), name, shown)
    return df, tuple(header)


def _records_add_up(data: bytes, rows: int) -> bool:
    """The ``rows`` records Arrow parsed are the file's non-empty lines after the header
    (:func:`_record_lines`), decided without searching the bytes for empty lines when it can.

    Without a carriage return, Arrow ends a record only at a line feed and skips empty lines,
    so it parses at most the non-empty lines: if ``rows`` equals every line after the header
    (one ``bytes.count``), no line is empty and none was merged into another record. Else
    (fewer rows, or carriage returns, which Arrow also reads as line breaks) each line is
    looked at."""
    if b"\r" not in data and _lines_after_header(data) == rows:  # memchr speed
        return True
    return _record_lines(data) == rows


def _lines_after_header(data: bytes) -> int:
    """Every line after the header, empty ones included: one ``bytes.count``."""
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1) - 1


def _record_lines(data: bytes) -> int:
    """Non-empty lines after the header (a line of only '\\r' is empty), counted on the bytes.

    Without an empty line (no ``\\n\\n``, ``\\n\\r\\n``, nor one at either end), the line
    breaks alone count them (``bytes.count``, memory-speed); else each line's length."""
    if data and data[:1] not in (b"\n", b"\r") and b"\n\n" not in data and \
            b"\n\r\n" not in data and not data.endswith(b"\n\r"):
        return _lines_after_header(data)
    raw = np.frombuffer(data, dtype=np.uint8)
    return int(_non_empty(raw, np.flatnonzero(raw == 10)).size) - 1


def _non_empty(raw: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The start positions of the non-empty lines that the line feeds at ``ends`` close (and
    the last line, when the data does not end with one); a line of only '\\r' is empty."""
    if raw.size and (not ends.size or ends[-1] != raw.size - 1):
        ends = np.append(ends, raw.size)
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    length = ends - starts
    has_cr = np.zeros(ends.size, dtype=bool)
    inside = ends > starts
    has_cr[inside] = raw[np.minimum(ends[inside], raw.size) - 1] == 13
    return starts[length - has_cr > 0]


@dataclass(frozen=True)
class LineBreaks:
    """Where a CSV file's records end, read on its bytes before any parser sees them.

    ``records``: its non-empty records after the header, a line feed inside a quoted field
    not ending one (None when the file has no quote nor carriage return: the fast counts of
    :func:`_records_add_up` apply); ``quoted``: some quoted field holds a line break (the
    parser must read values over lines); ``starts``: each record's byte offset (header
    first); ``feeds``: every line feed's offset (for line numbers)."""

    records: int | None = None
    quoted: bool = False
    starts: np.ndarray | None = None
    feeds: np.ndarray | None = None

    def line_of(self, row: int) -> int:
        """The file line (1-based) where data row ``row`` (0-based) begins."""
        if self.starts is None or self.feeds is None or row + 1 >= self.starts.size:
            return row + 2
        return int(np.searchsorted(self.feeds, self.starts[row + 1])) + 1


def line_breaks(data: bytes, what: str, shown: str) -> tuple[bytes, LineBreaks]:
    """The file's bytes (a file whose only line breaks are carriage returns, as old Mac tools
    write, with them made line feeds) and its :class:`LineBreaks`.

    A quote's parity says whether a byte lies inside a quoted field (RFC 4180: quotes open
    and close fields, and a doubled quote inside one adds two). A carriage return that is
    neither part of a CRLF, nor inside a quoted field, nor one of a CR-only file's line ends
    would be read as a line break by one parser and as text by another: InputError naming
    its line, never a silent split."""
    has_cr, has_quote = b"\r" in data, b'"' in data
    if not has_cr and not has_quote:
        return data, LineBreaks()
    if has_cr and b"\n" not in data:
        data = data.replace(b"\r", b"\n")  # CR-only line ends: each is a record separator
        has_cr = False
    raw = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(raw == 34) if has_quote else np.empty(0, dtype=np.int64)

    def inside(positions: np.ndarray) -> np.ndarray:
        return (np.searchsorted(quotes, positions) % 2) == 1

    feeds = np.flatnonzero(raw == 10)
    quoted = False
    if has_cr:
        cr = np.flatnonzero(raw == 13)
        after = cr + 1
        bare = cr[(after < raw.size) & (raw[np.minimum(after, raw.size - 1)] != 10)]
        bare_in = inside(bare)
        outside = bare[~bare_in]
        if outside.size:
            line = int(np.searchsorted(feeds, outside[0])) + 1
            raise InputError(
                f"{what}: '{shown}' line {line} holds a carriage return (\\r) that ends no "
                "line: one reader splits the record there, another does not; remove it, or "
                "quote the field that holds it")
        quoted = bool(bare_in.any())
    feed_in = inside(feeds) if quotes.size else np.zeros(feeds.size, dtype=bool)
    quoted = quoted or bool(feed_in.any())
    starts = _non_empty(raw, feeds[~feed_in])
    return data, LineBreaks(records=int(starts.size) - 1, quoted=quoted, starts=starts,
                            feeds=feeds)


def _arrow_csv(data: bytes, header: list[str], sep: str, na_values: Sequence[str],
               columns: Sequence[str] | None = None, breaks: LineBreaks | None = None
               ) -> pd.DataFrame | None:
    """The typed, multi-threaded reader: every cell as text, each column dictionary-encoded
    (a pandas Categorical, so that per-value work runs once per distinct value); only
    ``columns`` when given (every record is still parsed and counted). Values over several
    lines are read when a quoted field holds a line break (``breaks.quoted``). None when
    pyarrow refuses the file or its records do not add up: the pandas reader then names the
    problem (and the line) in its own words."""
    import pyarrow.csv as pacsv

    breaks = breaks or LineBreaks()
    include = [h for h in header if columns is None or h in set(columns)] or header
    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(use_threads=True, block_size=8 << 20),
            parse_options=pacsv.ParseOptions(delimiter=sep,
                                             newlines_in_values=breaks.quoted),
            convert_options=pacsv.ConvertOptions(
                # every cell as text, dictionary-encoded by the reader's threads
                column_types={h: pa.dictionary(pa.int32(), pa.string()) for h in header},
                null_values=list(na_values),
                strings_can_be_null=True, quoted_strings_can_be_null=True,
                include_columns=include))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowKeyError, ValueError):
        return None
    if table.num_columns != len(include) or table.num_rows == 0:
        return None
    if breaks.records is not None:
        if breaks.records != table.num_rows:
            return None
    elif not _records_add_up(data, table.num_rows):
        return None
    return categorical_frame(table)


def categorical_frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as pandas, column by column (the Arrow buffers go back to the system as
    soon as the frame holds its own): text as Categoricals (dictionary-encoded once, in
    Arrow), numbers as pandas makes them."""
    cols: dict[str, Any] = {}
    for name in table.column_names:
        col = table.column(name)
        if _is_text(col.type):
            cols[name] = _categorical(col)
        elif pa.types.is_dictionary(col.type) and _is_text(col.type.value_type):
            cols[name] = _categorical(col.unify_dictionaries() if col.num_chunks > 1 else col)
        else:
            cols[name] = col.to_pandas()
    del table
    frame = pd.DataFrame(cols, copy=False)
    pa.default_memory_pool().release_unused()
    return frame


def _is_text(typ: pa.DataType) -> bool:
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ))


def _categorical(column: pa.ChunkedArray) -> pd.Categorical:
    """One text column as a pandas Categorical, built from Arrow's dictionary encoding
    (codes in order of first appearance; no Python string per row). A column read
    dictionary-encoded (Parquet) keeps its dictionary, unified over its chunks."""
    if pa.types.is_dictionary(column.type):
        encoded = column.combine_chunks()
    else:
        encoded = column.combine_chunks().dictionary_encode()
    categories = pd.Index(encoded.dictionary.to_pandas())
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    return pd.Categorical.from_codes(codes.astype(np.int32, copy=False),
                                     dtype=unique_categories(categories), validate=False)


def _refuse_merged_rows(df: pd.DataFrame, data: bytes, breaks: LineBreaks, sep: str,
                        n_columns: int, name: str, shown: str, always: bool = False) -> None:
    """Every record must be accounted for. A quoted field may hold line breaks (a note over
    two lines), but one whose later lines hold as many separators as a record does swallowed
    rows: a stray quote opened it and a later line's closed it. InputError naming the row
    and its line; with ``always`` (the counts did not add up), whatever the cells hold."""
    first = None
    swallowed = max(1, n_columns - 1)
    for col in df.columns:
        s = df[col]
        codes, uniques = distinct(s)
        if not len(uniques):
            continue
        text = pd.Series(np.asarray(uniques, dtype=object)).map(str)
        multi = text.str.contains("[\r\n]", regex=True).to_numpy(dtype=bool)
        if not multi.any():
            continue
        bad = [i for i in np.flatnonzero(multi)
               if always or any(line.count(sep) >= swallowed
                                for line in text.iloc[i].splitlines()[1:])]
        if bad:
            row = int(np.flatnonzero(np.isin(codes, bad))[0])
            first = row if first is None else min(first, row)
    if first is None and not always:
        return
    physical = _record_lines(data)
    where = (f"; row {first} (line {breaks.line_of(first)} of the file) holds a line break "
             "inside a quoted field whose lines look like records, so the rows after it were "
             "merged into one cell") if first is not None else ""
    raise InputError(
        f"table '{name}': '{shown}' has {physical:,} record lines but {len(df):,} rows were "
        f"read{where}; fix the quoting (a stray \" opens a field that a later line closes): "
        "every record must be accounted for")


def _refuse_nested(df: pd.DataFrame, name: str, shown: str) -> None:
    for col in df.columns:
        s = df[col].dropna()
        if len(s) and isinstance(s.iloc[0], (list, dict, tuple)):
            raise InputError(f"table '{name}', column '{col}' in '{shown}' holds lists or "
                             "objects; riskgate measures scalar columns: flatten it or drop it")


#: a Parquet file up to this size is read into memory once (hash and parse); above it, twice
READ_ONCE_BYTES = 512 << 20


def _read_parquet(url: str, name: str, columns: Sequence[str] | None, limit: int,
                  max_mb: float, storage_options: Mapping[str, Any] | None
                  ) -> tuple[pd.DataFrame, TableInfo]:
    import hashlib

    what = f"table '{name}'"
    shown = redact_text(url)
    fs, path = filesystem(url, storage_options)
    try:
        if not fs.exists(path):
            raise InputError(f"{what}: file '{shown}' does not exist; check the path or URL")
        if fs.isdir(path):
            raise InputError(f"{what}: '{shown}' is a directory; give the Parquet file itself")
        size = int(fs.size(path) or 0)
        digest = hashlib.sha256()
        # a file of moderate size is read once: hashed, then parsed from memory by Arrow's
        # own threads (no second read through a Python file object); a larger one, which may
        # hold many columns the run does not need, is hashed in chunks and read again
        whole = None
        with fs.open(path, "rb") as fh:
            if size <= min(limit, READ_ONCE_BYTES):
                whole = fh.read()
                digest.update(whole)
            else:
                while chunk := fh.read(8 << 20):
                    digest.update(chunk)
    except InputError:
        raise
    except Exception as exc:
        raise StorageError(f"{what}: cannot reach '{shown}': {redact_text(str(exc))[:300]}"
                           ) from None
    with (pa.BufferReader(whole) if whole is not None else fs.open(path, "rb")) as fh:
        try:
            pf = pq.ParquetFile(fh)
        except Exception as exc:
            raise InputError(f"{what}: '{shown}' is not a readable Parquet file: "
                             f"{redact_text(str(exc))[:200]}") from None
        names = pf.schema_arrow.names
        if len(set(names)) != len(names):
            dups = sorted({c for c in names if names.count(c) > 1})
            raise InputError(f"{what}: '{shown}' has duplicate column names {dups}; rename "
                             "them")
        wanted = [c for c in (columns or names) if c in names]
        for c in wanted:
            typ = pf.schema_arrow.field(c).type
            if pa.types.is_nested(typ):
                raise InputError(f"{what}, column '{c}' in '{shown}' is of type {typ} (lists or "
                                 "structs); riskgate measures scalar columns: flatten it or "
                                 "drop it")
        meta = pf.metadata
        idx = [names.index(c) for c in wanted]
        est = sum(meta.row_group(g).column(i).total_uncompressed_size
                  for g in range(meta.num_row_groups) for i in idx)
        if est > limit:
            raise InputError(
                f"{what}: the {len(wanted)} needed column(s) of '{shown}' take "
                f"{est / 2**20:.1f} MB, above the limit of {max_mb:g} MB (limits.max_table_mb); "
                "raise the limit in the config")
        # text columns come back dictionary-encoded, as Parquet stores them: the codes are
        # read as they are, with no string per row nor a second hash pass
        text = [c for c in wanted if _is_text(pf.schema_arrow.field(c).type)]
        try:
            if text:
                pf = pq.ParquetFile(fh, read_dictionary=text)
            df = categorical_frame(pf.read(columns=wanted))
        except Exception as exc:
            raise InputError(f"{what}: '{shown}' cannot be read: {redact_text(str(exc))[:200]}"
                             ) from None
    info = TableInfo(name=name, url=shown, format="parquet", encoding=None,
                     sha256=digest.hexdigest(), bytes=size, rows=len(df),
                     columns=tuple(map(str, names)))
    return df, info


def coerce_types(df: pd.DataFrame, types: Mapping[str, ColumnType], name: str) -> pd.DataFrame:
    """Convert text columns to their declared type (numeric columns to float).

    Columns whose type is not declared and whose every value parses as a number become numeric;
    the rest stay text (categorical). A declared numeric column with text, or a number that is
    not finite, raises InputError (the cleanliness checks report it first in the gate).
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
    return pd.DataFrame(out, index=df.index, copy=False)
