"""Nothing runs superlinearly on a value's length: every regular
expression of riskcore, the flows and the tasks, fed adversarial strings of 8 KB and 64 KB
(a quadratic pattern shows from a few KB: the redaction's took 4.7 s at 5,000 characters and
10.6 s at 10,000), and ``redact()``, which sees whole documents, at 128 KB and 1 MB. Eight
times the input must take far less than 64 times as long (a ratio within one run, each time
the best of two; never an absolute time)."""

from __future__ import annotations

import gc
import importlib
import pkgutil
import re
import time
from collections.abc import Callable

import pytest

import riskcore
from riskcore.redact import redact

MB = 1 << 20

#: adversarial shapes: one letter repeated, separators, URL-like and key=value-like text
SHAPES: dict[str, Callable[[int], str]] = {
    "letters": lambda n: "a" * n,
    "digits": lambda n: "1" * n,
    "spaces-then-letter": lambda n: " " * n + "x",
    "word-spaces": lambda n: "a " * (n // 2),
    "equals": lambda n: "=" * n,
    "colons": lambda n: ": " * (n // 2),
    "dashes": lambda n: "1-" * (n // 2),
    "stars": lambda n: "*a" * (n // 2),
    "url-like": lambda n: "s3://" * (n // 5),
    "long-url": lambda n: "https://" + "a" * n,
    "scheme-run": lambda n: "a" * n + "://x@",
    "key-value": lambda n: "token=" * (n // 6),
    "secret-words": lambda n: "password" * (n // 8),
    "secret-then-spaces": lambda n: "token" + " " * n + "x",
    "pairs": lambda n: "k=v " * (n // 4),
    "brackets": lambda n: "[1," * (n // 3),
    "and-clauses": lambda n: "a == 1 and " * (n // 11),
    "top": lambda n: "top 1 %" + " " * n + "x ",
    # the identifier scan's shapes: near e-mails, digit groups, names, addresses
    "at-signs": lambda n: "a@" * (n // 2),
    "local-parts": lambda n: "a." * (n // 2) + "@b",
    "domains": lambda n: "a@" + "b." * (n // 2),
    "digit-groups": lambda n: "1234 " * (n // 5),
    "phone-like": lambda n: "+1 (" * (n // 4),
    "capitalized": lambda n: "Ab " * (n // 3),
    "dotted-numbers": lambda n: "1.2." * (n // 4),
    "hex-colons": lambda n: "a:" * (n // 2),
    "iban-like": lambda n: "GB82 " + "WEST " * (n // 5),
}


def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    """Every compiled pattern held by a module of riskcore, riskgate.flows or riskgate.tasks."""
    import riskgate.flows
    import riskgate.tasks

    found: dict[int, tuple[str, re.Pattern[str]]] = {}
    for package in (riskcore, riskgate.flows, riskgate.tasks):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                    found.setdefault(id(value), (f"{info.name}.{name}", value))
                elif isinstance(value, tuple):  # e.g. generalization's (pattern, kind) table
                    for i, item in enumerate(value):
                        inner = item[0] if isinstance(item, tuple) and item else item
                        if isinstance(inner, re.Pattern) and isinstance(inner.pattern, str):
                            found.setdefault(id(inner), (f"{info.name}.{name}[{i}]", inner))
    return sorted(found.values(), key=lambda item: item[0])


PATTERNS = _patterns()


def _seconds(fn: Callable[[str], object], text: str) -> float:
    """One run's CPU time on this thread, the garbage collector off (its passes over a heap
    that the larger run's match objects grow are not the pattern's work). CPU time, not the
    wall clock: beside the suite's other processes on two cores, a run is preempted for tens
    of milliseconds, which a wall-clock ratio counts as the pattern's."""
    gc.disable()
    try:
        t0 = time.thread_time()
        fn(text)
        return time.thread_time() - t0
    finally:
        gc.enable()


#: inputs grow by this factor: linear work takes 8 times as long, quadratic 64 times
FACTOR = 8
#: the growth that fails, far from both (the load of a busy machine moves a ratio by a few
#: units, never from 8 to 20)
LIMIT = 20.0


def _ratio(fn: Callable[[str], object], make: Callable[[int], str], n: int) -> float | None:
    """Time at n over time at n / FACTOR, each the best of two runs (the best is what the
    work costs; a busy machine only adds to it), or None when both are too short to time."""
    small, large = make(n // FACTOR), make(n)
    t_large = min(_seconds(fn, large) for _ in range(2))
    if t_large < 0.005:  # below timer and scheduler noise a ratio means nothing
        return None
    t_small = min(_seconds(fn, small) for _ in range(2))
    if t_small < 0.001:  # a fixed cost above the small run's work: a ratio would mislead
        return None
    return t_large / t_small


def _growth(fn: Callable[[str], object], n: int) -> dict[str, float]:
    """Per shape, the growth from n / FACTOR to n characters (shapes too fast to time are
    skipped); a shape already superlinear below n / FACTOR is reported from there."""
    out = {}
    for shape, make in SHAPES.items():
        first = _ratio(fn, make, n // FACTOR)
        if first is not None and first > LIMIT:
            out[shape] = first
            continue
        ratio = _ratio(fn, make, n)
        if ratio is not None:
            out[shape] = ratio
    return out


def test_the_project_has_patterns_to_check():
    names = [name for name, _ in PATTERNS]
    assert len(PATTERNS) >= 15, names
    assert any("redact" in n for n in names) and any("generalization" in n for n in names)


@pytest.mark.parametrize("name,pattern", PATTERNS, ids=[n for n, _ in PATTERNS])
def test_every_pattern_is_linear(name, pattern):
    def scan(text: str) -> None:  # every start position, the first one included
        for _ in pattern.finditer(text):
            pass

    slow = {shape: ratio for shape, ratio in _growth(scan, 64 * 1024).items() if ratio > LIMIT}
    assert not slow, f"{name} ({pattern.pattern!r}) grows superlinearly: {slow}"


def test_redact_is_linear():
    slow = {shape: ratio for shape, ratio in _growth(lambda t: redact({"v": t}), MB).items()
            if ratio > LIMIT}
    assert not slow, slow


def test_the_identifier_scan_is_linear_and_reads_a_long_cell_whole():
    """The scan runs RE2 (linear by construction) over distinct values, then the Python
    expressions and validators over the candidates: a 1 MB cell costs about eight times what a
    128 KB one does, and an identifier at its very end is found (no cell is cut short)."""
    import pandas as pd

    from riskcore.identifiers import scan_column

    def scan(text: str) -> None:
        scan_column("released", "notes", pd.Series([text], dtype=object))

    slow = {shape: ratio for shape, ratio in _growth(scan, MB).items() if ratio > LIMIT}
    assert not slow, slow
    tail = "word " * (2 * MB // 5) + "mail jane.doe@example.org"
    found = scan_column("released", "notes", pd.Series([tail, "x"], dtype=object))
    assert [(f.kind, f.cells) for f in found] == [("email", 1)]


def test_redaction_still_masks_what_it_did():
    text = ("url=https://x/?token=abc&b=1 s3://AKIAABCDEFGHIJKLMNOP:pw@bucket/k "
            "my_password : 'hunter2' tokentoken=zz x=password=q")
    out = redact(text)
    for secret in ("abc", "AKIAABCDEFGHIJKLMNOP", "pw@", "hunter2", "zz", "=q"):
        assert secret not in out, (secret, out)
    assert "url=https://x/?token=***&b=1" in out and "s3://***@bucket/k" in out
    assert redact("a token without a value, tokens: none") == "a token without a value, tokens: ***"
