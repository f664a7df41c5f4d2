"""One redaction for everything that leaves the process, and the credential checks.

Credentials never belong in a config, a URL or a payload: :func:`find_credentials` walks any
structure (mappings, lists, URLs) and names the key that holds one, without echoing it, so that
the caller can refuse the input. Whatever text still leaves the process (decision.json, reports,
logs, Prefect artifacts, events, flow-run names, console lines) goes through :func:`redact`:
``user:password@`` in URLs, values of secret-looking keys (``password=...``, ``"token": ...``),
AWS access key ids, and every secret value the process knows of (credential environment
variables, a Prefect Secret block's values once loaded) become ``***``.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

MASK = "***"

#: key names that hold credentials, in any case, camelCase or with separators
SECRET_KEY = re.compile(
    r"(secret|passw|pwd|passphrase|token|credential|private|api_?key|access_?key|session_?key|"
    r"account_?key|auth|signature|cookie|sas_?token|connection_?string|^key$)",
    re.IGNORECASE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
#: keys that look like secrets by the pattern but are not
NOT_SECRET = frozenset({"author", "authors"})
# Every pattern here runs in linear time on any text: a match may start only where
# a word starts (a look-behind), every repeat is possessive or bounded, so no start position
# rescans what an earlier one covered.
_URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,31}://)(?P<info>[^/@\s'\"]++)@")
_WORD = "A-Za-z0-9_\\-"
#: secret-looking key names: the key is the whole word that holds one of these
_SECRET_WORD = re.compile(
    r"secret_?(?:access_?)?key|client_?secret|passw|pwd|token|credential|api_?key|access_?key|"
    r"session_?key|account_?key|signature", re.IGNORECASE)
_WORD_REST = re.compile(rf"[{_WORD}]*+")
_SEPARATOR = re.compile(r"(?<!\s)\s*+[=:]\s*+['\"]?")
_VALUE = re.compile(r"[^\s'\",;&}]++")
_AWS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")
#: environment variables whose values are credentials
CREDENTIAL_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID",
                  "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN",
                  "AZURE_STORAGE_CONNECTION_STRING", "GOOGLE_APPLICATION_CREDENTIALS_JSON",
                  "PREFECT_API_KEY", "MINIO_ROOT_PASSWORD")

_known: set[str] = set()
_lock = threading.RLock()  # register() recurses into nested values


def _normal(key: str) -> str:
    """camelCase and dashes to snake case: sessionKey -> session_key."""
    return _CAMEL.sub("_", key).replace("-", "_").lower()


def is_secret_key(key: object) -> bool:
    """True for a key name that holds a credential (password, pwd, sessionKey, api-key...)."""
    name = _normal(str(key))
    return name not in NOT_SECRET and bool(SECRET_KEY.search(name))


def url_userinfo(value: str) -> bool:
    """True when a URL carries credentials: a ``user[:password]@`` part, or a query
    parameter whose name holds one (``?password=``, a presigned ``X-Amz-Signature=``,
    ``X-Amz-Credential=``, Azure's ``sig=``)."""
    if "://" not in value or ("@" not in value and "?" not in value):
        return False
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return True  # unparsable and carrying '@' or '?' after a scheme: treat as credentials
    if parts.username or parts.password:
        return True
    from urllib.parse import parse_qsl

    return any(is_secret_key(k) or k.lower() == "sig"
               for k, v in parse_qsl(parts.query, keep_blank_values=False) if v)


def find_credentials(value: Any, path: str = "", _depth: int = 0) -> str | None:
    """The dotted path of the first credential in a structure, or None.

    A credential is a non-empty value under a secret-looking key at any depth (inside lists of
    mappings too), or a URL with a ``user:password@`` part anywhere.
    """
    if _depth > 50:
        return path or "(top level)"
    if isinstance(value, Mapping):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if is_secret_key(key) and item not in (None, "", False, {}, []):
                return sub
            found = find_credentials(item, sub, _depth + 1)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = find_credentials(item, f"{path}[{i}]", _depth + 1)
            if found:
                return found
    elif isinstance(value, str) and url_userinfo(value):
        return path or "(value)"
    return None


def urls_with_credentials(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string anywhere in a structure that is a URL with a
    ``user:password@`` part (column names and other values are not inspected by key)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = urls_with_credentials(item, f"{path}.{key}" if path else str(key))
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = urls_with_credentials(item, f"{path}[{i}]")
            if found:
                return found
    elif isinstance(value, str) and url_userinfo(value):
        return path or "(value)"
    return None


def register(values: Iterable[Any]) -> None:
    """Remember secret values (e.g. a Secret block's) so that redact() masks them anywhere."""
    with _lock:
        for v in values:
            if isinstance(v, Mapping):
                register(v.values())
            elif isinstance(v, (list, tuple)):
                register(v)
            elif v is not None and len(str(v)) >= 4:
                _known.add(str(v))


def _register_environment() -> None:
    register(os.environ.get(name) for name in CREDENTIAL_ENV)


def _mask_key_values(text: str) -> str:
    """``key = value`` pairs whose key word holds a secret-looking name, with the value masked.

    Linear in the text: each secret-looking name is found once, the word around it is read
    once (later names inside the same word or value are skipped), so a long word-like text or
    one name repeated a million times costs one pass."""
    parts: list[str] = []
    done = 0  # text[:done] is settled
    at = 0  # the next search starts here, after the last word read (no word spans it)
    while (hit := _SECRET_WORD.search(text, at)) is not None:
        start = hit.start()
        word_start = at + len(text[at:start].rstrip(_WORD_CHARS))
        word = _WORD_REST.match(text, hit.end())
        word_end = word.end() if word else hit.end()
        sep = _SEPARATOR.match(text, word_end)
        value = _VALUE.match(text, sep.end()) if sep else None
        if sep is None or value is None:
            at = word_end
            continue
        parts.append(text[done:word_start])
        parts.append(f"{text[word_start:sep.end()]}{MASK}")
        done = at = value.end()
    parts.append(text[done:])
    return "".join(parts)


_WORD_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


def redact_text(text: str) -> str:
    """The text with URL userinfo, secret key=value pairs, key ids and known secrets masked."""
    if not text:
        return text
    _register_environment()
    out = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    out = _mask_key_values(out)
    out = _AWS_KEY_ID.sub(MASK, out)
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in out:
            out = out.replace(secret, MASK)
    return out


#: characters that change how text around them is shown: C0 and C1 controls (terminal escape
#: sequences start with ESC) and the bidirectional embeddings, overrides and isolates (an RLO in
#: a column name reverses what follows it)
_INVISIBLE = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20),
                                          *range(0x7F, 0xA0))}
_INVISIBLE.update({c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                               *range(0x2066, 0x206A))})


def visible(text: str) -> str:
    """Text from the data as a person may safely see it: control and bidirectional-override
    characters written as escapes (``\\x1b``, ``\\u202e``); tabs and line breaks kept. One
    pass over the text (str.translate)."""
    return text.translate(_INVISIBLE)


def redact(value: Any) -> Any:
    """Redact every string in a structure (keys are kept: a key such as ``secret`` names a
    column in riskgate's documents; credentials under such keys are refused on input)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v) for v in value)
    return value


class RedactingFilter(logging.Filter):
    """A logging filter that redacts every record's message (installed on riskgate's and
    Prefect's loggers, so that console, API logs and the UI see the same masked text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to the handler
            return True
        clean = redact_text(message)
        if record.exc_info and record.exc_info[1] is not None:
            exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact_text(exc_text)
            record.exc_info = None
        if clean != message or record.args:
            record.msg, record.args = clean, None
        return True


_FILTER = RedactingFilter()


def install_log_redaction(names: Iterable[str] = ("", "riskgate", "riskcore", "prefect",
                                                  "prefect.flow_runs", "prefect.task_runs",
                                                  "distributed")) -> None:
    """Attach the redacting filter to these loggers and to every handler they have."""
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
        for handler in logger.handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
