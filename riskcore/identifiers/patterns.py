"""Identifiers found by their form alone: e-mail addresses, IP addresses, personal URLs.

Each kind is an RE2 expression Arrow runs over every distinct value in C++ (a superset of
the candidates: linear in any cell), a Python expression that finds candidate substrings in
the few values it flags (possessive, bounded repeats: linear too) and a validator. They run
on normalized text (:mod:`riskcore.identifiers.text`): a full-width ``＠`` is an ``@``, a
zero-width space inside an address is gone.

* **E-mail**: a local part and a domain, internationalized ones included (``josé@exämple.de``,
  ``user@例え.jp``): letters of any script, no dot at either end of the local part nor two in a
  row, an alphabetic top-level domain or an ``xn--`` one.
* **IP address**: IPv4 dotted quads and IPv6, as the standard library parses them.
* **Personal URL**: a profile on a social network, with or without a scheme
  (``facebook.com/john.smith``), or any URL whose path names a person (``/~jsmith``,
  ``/users/…``, ``?email=``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


def email(candidate: str) -> bool:
    local, _, domain = candidate.rpartition("@")
    top = domain.rsplit(".", 1)[-1]
    return (bool(local) and len(local) <= 64 and not local.startswith(".")
            and not local.endswith(".") and ".." not in local and "." in domain
            and not domain.startswith(("-", ".")) and (top.isalpha() or top.startswith("xn--")))


def ip_address(candidate: str) -> bool:
    """An IPv4 dotted quad (no part with a leading zero) or an IPv6 address, as the standard
    library parses it; not the unspecified address."""
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return False
    return not address.is_unspecified


_SOCIAL_SITES = r"(?:facebook|fb|twitter|x|instagram|linkedin|github|tiktok|youtube|reddit|medium)"
#: URL paths that point at a person: a home folder, a profile, a user page, an e-mail or user
#: in the query
_PERSONAL_PATH = re.compile(
    r"/~[^/\s]|/(?:users?|u|people|person|profiles?|members?|in|pub|author|employees?|"
    r"staff|customers?|patients?|accounts?)/[^/\s?#]|[?&](?:user(?:name)?|uid|email|e-mail|"
    r"login|member|patient|customer)=", re.IGNORECASE)
_SOCIAL = re.compile(r"(?:https?://)?(?:www\.|m\.)?" + _SOCIAL_SITES + r"\.com/(?!(?:help|about|"
                     r"search|home|login|share|intent|privacy|terms|policies|legal)\b)"
                     r"[\w.-]+/?(?:$|[?#])", re.IGNORECASE)


def personal_url(candidate: str) -> bool:
    return bool(_PERSONAL_PATH.search(candidate) or _SOCIAL.fullmatch(candidate))


@dataclass(frozen=True)
class PatternKind:
    """A kind found by its form (see the module doc).

    Attributes:
        name: its key in configs and outputs.
        title: what a person reads.
        re2: the RE2 expression Arrow runs over distinct values (a superset of candidates).
        pattern: the Python expression that finds candidate substrings in one value.
        validate: is a candidate the real thing.
    """

    name: str
    title: str
    re2: str
    pattern: re.Pattern[str]
    validate: Callable[[str], bool]
    strict: bool = False
    #: an RE2 expression a whole value matches only when the value is one valid identifier
    #: and nothing else (the common case of a column of them): such values skip Python
    whole: str | None = None
    #: a text every match of ``re2`` holds: a column without it is not matched at all
    #: (Arrow compiles an expression on every call: ``re2``'s Unicode classes cost 4 ms a
    #: column, a plain search for the text a hundredth of that)
    literal: str | None = None

    def candidates(self, value: str) -> Iterator[str]:
        return (m.group(0) for m in self.pattern.finditer(value))


_B = r"(?<![\w.%+-])"  # a candidate starts where a word does not go on
EMAIL = PatternKind(
    "email", "e-mail addresses",
    r"[\p{L}\p{N}._%+-]@[\p{L}\p{N}-]+\.[\p{L}]|[\p{L}\p{N}._%+-]@[\p{L}\p{N}-]+\.xn--",
    re.compile(_B + r"[\w.%+-]{1,64}+@[\w-]{1,63}+(?:\.[\w-]{1,63}+){1,8}+(?![\w-])"), email,
    # the rules of `email` for ASCII addresses: no dot at the local part's ends nor two in a
    # row, labels of at most 63, an alphabetic top-level domain (the 64 characters before
    # the @ are checked apart)
    whole=r"^(?:[A-Za-z0-9_%+-]+(?:\.[A-Za-z0-9_%+-]+)*)@[A-Za-z0-9][A-Za-z0-9-]{0,62}"
          r"(?:\.[A-Za-z0-9-]{1,63}){0,7}\.[A-Za-z]{1,63}$", literal="@")
IP = PatternKind(
    "ip", "IP addresses",
    r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{0,4}:",
    re.compile(r"(?<![\w.:])(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9A-Fa-f:]{2,39}+)"
               r"(?![\w.:])"), ip_address)
URL = PatternKind(
    "url", "URLs with a personal path",
    r"(?i)https?://[^ /]+/|(?:^|[^\w.@/])(?:www\.|m\.)?" + _SOCIAL_SITES + r"\.com/",
    re.compile(r"(?i)https?://[^\s\"'<>]{1,2048}+|(?<![\w.@/])(?:www\.|m\.)?" + _SOCIAL_SITES
               + r"\.com/[^\s\"'<>]{1,2048}+"), personal_url)
#: every kind found by its form, in report order
PATTERN_KINDS = (EMAIL, IP, URL)
