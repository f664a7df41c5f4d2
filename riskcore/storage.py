"""Every byte riskgate reads or writes goes through here: fsspec URLs (local paths, s3://, gs://,
az://, ...) with one set of storage options.

* No credentials in URLs or options (:func:`check_url`, :func:`check_storage_options`): they come
  from the environment (as s3fs, gcsfs... read them) or from a Prefect Secret block.
* Object stores fail fast: S3-compatible stores get a 5 s connect timeout and two attempts unless
  the options say otherwise, so an outage is an error within seconds, not minutes.
* Reads are bounded: :func:`read_bytes` decompresses (by extension or by magic bytes) and stops
  at the size limit *after* decompression.
* Outputs never go to volatile stores (``memory://``) and never create a bucket.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import fsspec

from .errors import ConfigError, InputError, StorageError
from .redact import find_credentials, redact_text, url_userinfo

#: protocols whose data vanish with the process: never an output location
VOLATILE = frozenset({"memory", "tmp"})
#: protocols of object stores, where the first path element is the bucket
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "r2"})
#: S3 client settings that make an unreachable store fail within seconds
FAST_FAIL_S3 = {"connect_timeout": 5, "read_timeout": 60,
                "retries": {"max_attempts": 2, "mode": "standard"}}

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"),
          (b"\x28\xb5\x2f\xfd", "zstd"), (b"PK\x03\x04", "zip"))


def protocol(url: str) -> str:
    """The fsspec protocol of a URL ("file" for a plain path)."""
    if "://" not in url:
        return "file"
    return url.split("://", 1)[0].lower()


def is_local(url: str) -> bool:
    return protocol(url) in ("file", "local")


def check_url(url: str, what: str) -> None:
    """Refuse a URL that carries credentials; the message names the key, never the URL."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{what} is empty; give a path or URL")
    if url_userinfo(url):
        raise ConfigError(
            f"{what} carries credentials in the URL (user:password@, or a secret query "
            "parameter such as ?password= or X-Amz-Signature=); remove them and set "
            "them in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY...) or in a "
            "Prefect Secret block named in storage.credentials_block")


def check_storage_options(options: Mapping[str, Any] | None, where: str = "config") -> None:
    """Refuse credentials anywhere in storage options (any depth, lists of mappings, URLs)."""
    found = find_credentials(dict(options or {}))
    if found:
        raise ConfigError(
            f"{where}: storage option '{found}' holds a credential; do not put credentials in "
            "config files, URLs or payloads: set them in the environment (AWS_ACCESS_KEY_ID, "
            "AWS_SECRET_ACCESS_KEY...) or name a Prefect Secret block in "
            "storage.credentials_block")


#: JSON fsspec options every process uses for object-store URLs: the deployment's
#: store endpoint, set once in the environment of the worker, the CLI and the pipeline that
#: emits events; never credentials
STORAGE_ENV = "RISKGATE_STORAGE_OPTIONS"


#: storage options given as JSON text: at most this long and this deep
MAX_OPTIONS_TEXT = 64 * 1024
MAX_OPTIONS_DEPTH = 8


def _depth(value: Any) -> int:
    """How deeply a JSON value nests (iteratively: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_OPTIONS_DEPTH:
            break
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def parse_storage_options(raw: str | None, where: str) -> dict[str, Any]:
    """fsspec options given as JSON text (a flag, an environment variable): {} when empty,
    ConfigError naming ``where`` when malformed or carrying credentials."""
    import json

    if not raw:
        return {}
    if len(raw) > MAX_OPTIONS_TEXT:
        raise ConfigError(f"{where} is {len(raw):,} characters long; storage options are a "
                          "short JSON object (an endpoint, a region)")
    try:
        options = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not valid JSON ({exc.msg} at character {exc.pos}); "
                          "give an object like '{\"endpoint_url\": \"http://host:9000\"}'"
                          ) from None
    except RecursionError:
        options = None
    if options is None or _depth(options) > MAX_OPTIONS_DEPTH:
        raise ConfigError(f"{where} nests deeper than {MAX_OPTIONS_DEPTH} levels; storage "
                          "options are a flat JSON object (config_kwargs one level down)")
    if not isinstance(options, dict):
        raise ConfigError(f"{where} must be a JSON object")
    check_storage_options(options, where)
    return options


def deployment_options() -> dict[str, Any]:
    """``$RISKGATE_STORAGE_OPTIONS`` as a mapping ({} when unset)."""
    return parse_storage_options(os.environ.get(STORAGE_ENV), f"${STORAGE_ENV}")


def effective_options(url: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The storage options for one URL: for an object store, the deployment's
    (``$RISKGATE_STORAGE_OPTIONS``) under the given ones; for S3 riskgate's fail-fast
    defaults."""
    opts = dict(options or {})
    if protocol(url) in OBJECT_STORES:
        opts = {**deployment_options(), **opts}
    if protocol(url) in ("s3", "s3a"):
        config = dict(opts.get("config_kwargs") or {})
        for key, value in FAST_FAIL_S3.items():
            config.setdefault(key, value)
        opts["config_kwargs"] = config
    return opts


def filesystem(url: str, options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """(fsspec filesystem, path inside it) for a URL."""
    try:
        return fsspec.core.url_to_fs(url, **effective_options(url, options))
    except (ImportError, ValueError, TypeError) as exc:
        raise StorageError(f"cannot open '{redact_text(url)}': {redact_text(str(exc))}"
                           ) from None


@dataclass(frozen=True)
class Blob:
    """Bytes read from a URL: the content (decompressed), the stored size and its SHA-256."""

    url: str
    data: bytes
    stored_bytes: int
    sha256: str
    compression: str | None


TABLE_TOO_LARGE = ("raise limits.max_table_mb in the config, or store the table as Parquet so "
                   "only the needed columns are read")


def _unreachable(what: str, url: str, exc: BaseException) -> StorageError:
    return StorageError(f"{what}: cannot reach '{redact_text(url)}': "
                        f"{type(exc).__name__}: {redact_text(str(exc))[:300]}")


def exists(url: str, options: Mapping[str, Any] | None = None, what: str = "storage") -> bool:
    fs, path = filesystem(url, options)
    try:
        return bool(fs.exists(path))
    except Exception as exc:
        raise _unreachable(what, url, exc) from None


def compression_of(url: str, head: bytes) -> str | None:
    """gzip, bz2, xz, zstd or zip from the magic bytes (the extension may lie or be absent)."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


def _decompress(raw: bytes, kind: str, limit: int, what: str, shown: str) -> bytes:
    if kind == "zip":
        raise InputError(f"{what}: '{shown}' is a zip archive; unzip it and give the table file "
                         "itself")
    if kind == "zstd":
        try:
            import zstandard
        except ImportError:
            raise InputError(f"{what}: '{shown}' is zstd-compressed; install zstandard or "
                             "decompress it") from None
        stream: BinaryIO = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw))
    else:
        opener = {"gzip": gzip.GzipFile, "bz2": bz2.BZ2File, "xz": lzma.LZMAFile}[kind]
        stream = opener(fileobj=io.BytesIO(raw))  # type: ignore[operator]
    try:
        data = stream.read(limit + 1)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise InputError(f"{what}: '{shown}' looks {kind}-compressed but cannot be "
                         f"decompressed ({exc}); check the file") from None
    if len(data) > limit:
        raise InputError(
            f"{what}: '{shown}' decompresses to more than {limit / 2**20:.1f} MB, above the "
            "limit (limits.max_table_mb); raise the limit in the config, or store the table "
            "as Parquet so only the needed columns are read")
    return data


def read_bytes(url: str, options: Mapping[str, Any] | None, *, max_bytes: int,
               what: str, too_large: str | None = None) -> Blob:
    """Read a whole object, decompressed, never more than ``max_bytes`` after decompression.

    Args:
        too_large: what to do when the object is over ``max_bytes`` (default: the table limit).

    Raises:
        InputError: the object does not exist, is a directory, or is too large.
        StorageError: the store cannot be reached.
    """
    shown = redact_text(url)
    fs, path = filesystem(url, options)
    try:
        if not fs.exists(path):
            raise InputError(f"{what}: file '{shown}' does not exist; check the path or URL")
        if fs.isdir(path):
            raise InputError(f"{what}: '{shown}' is a directory; give the file itself")
        size = int(fs.size(path) or 0)
    except InputError:
        raise
    except Exception as exc:
        raise _unreachable(what, url, exc) from None
    if size > max_bytes:
        raise InputError(
            f"{what}: '{shown}' is {size / 2**20:.1f} MB, above the limit of "
            f"{max_bytes / 2**20:.1f} MB; " + (too_large or TABLE_TOO_LARGE))
    try:
        with fs.open(path, "rb") as fh:
            raw = fh.read()
    except Exception as exc:
        raise _unreachable(what, url, exc) from None
    kind = compression_of(url, raw[:8])
    data = _decompress(raw, kind, max_bytes, what, shown) if kind else raw
    return Blob(url=shown, data=data, stored_bytes=len(raw),
                sha256=hashlib.sha256(raw).hexdigest(), compression=kind)


def read_text(url: str, options: Mapping[str, Any] | None, *, max_bytes: int, what: str) -> str:
    """A small UTF-8 document (a config or policy file)."""
    blob = read_bytes(url, options, max_bytes=max_bytes, what=what,
                      too_large="a gate config or policy is a short document: check the path")
    try:
        return blob.data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what}: '{blob.url}' is not UTF-8 text (byte {exc.start}); save it "
                          "as UTF-8") from None


def check_output_location(url: str, options: Mapping[str, Any] | None = None) -> None:
    """Refuse outputs that would be lost or land somewhere the user did not create.

    Volatile stores (memory://) lose everything when the process ends; an object-store bucket
    that does not exist is a typo, and is never created.
    """
    check_url(url, "output_url")
    proto = protocol(url)
    if proto in VOLATILE:
        raise ConfigError(f"output_url '{redact_text(url)}' is a volatile store ({proto}://): "
                          "its outputs vanish when the process exits; write to a file path or "
                          "an object store")
    if proto in OBJECT_STORES:
        bucket = urlsplit(url).netloc
        if not bucket:
            raise ConfigError(f"output_url '{redact_text(url)}' names no bucket")
        if not exists(f"{proto}://{bucket}", options, what="output_url"):
            raise ConfigError(f"output_url: bucket '{bucket}' does not exist; riskgate never "
                              "creates buckets: create it, or fix the name")


#: the content type each output is stored with, so that a report link opens in the browser
#: instead of downloading (S3 and GCS otherwise store binary/octet-stream)
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".json": "application/json",
                 ".sig": "application/json", ".parquet": "application/vnd.apache.parquet",
                 ".csv": "text/csv; charset=utf-8"}


def content_type(url: str) -> str:
    """The content type of an output by its name (application/octet-stream otherwise)."""
    suffix = posixpath.splitext(url.rsplit("/", 1)[-1])[1].lower()
    return CONTENT_TYPES.get(suffix, "application/octet-stream")


def _type_options(url: str) -> dict[str, str]:
    """The open() keyword that sets the stored object's content type, by store."""
    proto = protocol(url)
    if proto in ("s3", "s3a"):
        return {"ContentType": content_type(url)}
    if proto in ("gs", "gcs"):
        return {"content_type": content_type(url)}
    return {}


def write_bytes(url: str, data: bytes, options: Mapping[str, Any] | None = None,
                *, overwrite: bool = False) -> None:
    """Write one object; refuses to overwrite unless asked (previous runs are never replaced).

    A local parent folder is created; object stores have no folders (and buckets are checked by
    :func:`check_output_location`, never created here).
    """
    fs, path = filesystem(url, options)
    try:
        if not overwrite and fs.exists(path):
            raise StorageError(f"'{redact_text(url)}' already exists; riskgate never "
                               "overwrites a previous run's outputs")
        if is_local(url):
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
        with fs.open(path, "wb", **_type_options(url)) as fh:
            fh.write(data)
    except StorageError:
        raise
    except Exception as exc:
        raise StorageError(f"writing '{redact_text(url)}' failed: "
                           f"{redact_text(str(exc))[:300]}") from None


def presign(url: str, options: Mapping[str, Any] | None, expires_s: int) -> str | None:
    """An HTTPS URL that opens the object without credentials for ``expires_s`` seconds, for
    stores that can sign (S3 and compatible); None otherwise."""
    if protocol(url) not in ("s3", "s3a", "gs", "gcs"):
        return None
    fs, path = filesystem(url, options)
    try:
        return str(fs.sign(path, expiration=int(expires_s)))
    except Exception:
        return None


#: percent-decoding rounds a path gets before it is compared with a prefix (%252e is %2e is .)
_DECODE_ROUNDS = 4


def _decoded_path(url: str) -> str | None:
    """The path of a URL with every percent-escape undone (several rounds: a double-encoded
    ``%252e`` too), or None when it still holds an escape after that or has a query or
    fragment (what a server serves for those is not the path's file)."""
    from urllib.parse import unquote

    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    if scheme.lower() in ("http", "https") and ("?" in rest or "#" in rest):
        return None
    for _ in range(_DECODE_ROUNDS):
        decoded = unquote(rest)
        if decoded == rest:
            return f"{scheme.lower()}://{decoded}"
        rest = decoded
    return None


def _scheme_lower(url: str) -> str:
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    return f"{scheme.lower()}://{rest}"


def under_prefix(url: str, prefix: str) -> bool:
    """``url`` names something inside the folder ``prefix`` (which ends with '/'): after every
    percent-escape is undone (``%2e%2e``, ``..%2f``), no path segment is '.' or '..', no
    backslash or NUL hides one, and a local path still lies inside once symbolic links are
    resolved (a link under the prefix that points outside is outside)."""
    path = _decoded_path(url)
    if path is None or not prefix.endswith("/") or "\\" in path or "\0" in path:
        return False
    tail = path.split("://", 1)[1] if "://" in path else path
    if {".", ".."} & set(tail.split("/")):
        return False
    base = _scheme_lower(prefix)
    if not path.startswith(base):
        return False
    if is_local(url) and is_local(prefix):
        local = base.split("://", 1)[1] if "://" in base else base
        real, real_base = os.path.realpath(tail), os.path.realpath(local)
        return real.startswith(real_base.rstrip(os.sep) + os.sep)
    return True


def join_url(base: str, *parts: str) -> str:
    base = base.rstrip("/")
    return "/".join([base, *[p.strip("/") for p in parts]])


def resolve(path: str | None, base: str) -> str | None:
    """``path`` relative to the folder (or URL prefix) ``base``; absolute paths and URLs stay."""
    if path is None or "://" in path or os.path.isabs(path):
        return path
    if "://" in base:
        scheme, rest = base.split("://", 1)
        return f"{scheme}://{posixpath.normpath(posixpath.join(rest, path))}"
    return os.path.abspath(os.path.join(base, path))


def parent(url: str) -> str:
    """The folder (or URL prefix) holding ``url``."""
    if "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://{posixpath.dirname(rest.rstrip('/'))}"
    return os.path.dirname(os.path.abspath(url))
