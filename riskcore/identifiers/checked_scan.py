"""Identifiers with checks in one column: candidates, validated ones, chance, the cells.

Arrow first finds the distinct values that can hold a candidate at all (six digits close
together, or the shape of a kind with fewer, such as an Indian PAN's ``ACUPA7085R``). Python
then reads each of them as windows (:func:`riskcore.identifiers.shapes.windows`), matches each
window's compact form against the kinds of its length and validates the matches
(:mod:`riskcore.identifiers.checked`).

Linear time stays: a column with more than :data:`EXHAUSTIVE` candidate values has an evenly
spaced sample of :data:`SAMPLE` of them read for the test against chance, and all its values
with a separator inside a number (a written form: ``536-90-4399``) up to :data:`EXHAUSTIVE`
too (up to :data:`WRITTEN_AT_MOST`), so that a few identifiers written in full inside a large
column of notes are each read.
Where a kind is found, every candidate value is read again for that kind alone (up to
:data:`FOUND_EXHAUSTIVE`; beyond, the cells are estimated from the sample and every candidate
row is marked, said in the finding).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from .chance import Evidence, Tally
from .checked import CheckedKind, checked_kinds, grouping
from .checked import chance as kind_chance
from .shapes import MAX_COMPACT, Shape, windows
from .text import matches

#: candidate values read in full when a column has at most this many
EXHAUSTIVE = 2_000
#: else this many, evenly spaced, for the test against chance
SAMPLE = 2_000
#: and its values with a separator between digits, up to this many
WRITTEN_AT_MOST = 20_000
#: a kind found is counted over at most this many candidate values (beyond: estimated)
FOUND_EXHAUSTIVE = 200_000
#: a separator between digits: a value written as a kind writes it, maybe
WRITTEN_RE2 = r"[0-9][ .\-/+][0-9]"


@lru_cache(maxsize=1)
def _index() -> dict[tuple[bool, int], tuple[tuple[CheckedKind, Shape], ...]]:
    """(compact keeps signs, length) -> the kinds and shapes of that length."""
    out: dict[tuple[bool, int], list[tuple[CheckedKind, Shape]]] = {}
    for kind in checked_kinds():
        for shape in kind.shapes:
            out.setdefault((kind.signed, shape.length), []).append((kind, shape))
    return {k: tuple(v) for k, v in out.items()}


@lru_cache(maxsize=1)
def min_digits() -> int:
    """The fewest digits any kind's shape holds."""
    return min(sum(n for chars, n in shape.units if chars.isdigit() or "0" in chars)
               for kind in checked_kinds() for shape in kind.shapes)


@lru_cache(maxsize=1)
def prefilter_re2() -> str:
    """Values that may hold a candidate: six digits, each followed by at most a letter and
    a separator; or the whole shape of a kind with fewer digits."""
    few = []
    for kind in checked_kinds():
        for shape in kind.shapes:
            digits = sum(n for chars, n in shape.units if "0" in chars)
            if digits < 6:
                few.append(shape.regex.pattern)
    six = r"(?:[0-9][A-Za-z]?[ .\-/+]?){5}[0-9]"
    return "|".join([six, *(f"(?i)(?:^|[^0-9A-Za-z]){p}(?:$|[^0-9A-Za-z])" for p in few)])


def read_value(value: str, only: CheckedKind | None = None,
               skip: frozenset[CheckedKind] | set[CheckedKind] = frozenset()
               ) -> dict[CheckedKind, tuple[bool, bool, bool, float]]:
    """Per kind with a candidate in ``value``: (a valid one, one written the kind's way, one
    written so and valid, the chance that random candidates like these hold a valid one)."""
    out: dict[CheckedKind, tuple[bool, bool, bool, float]] = {}
    index = _index()
    for window in windows(value, MAX_COMPACT, min_digits()):
        groups: tuple[int, ...] | None = None
        for signed, compact in ((False, window.compact), (True, window.signed)):
            for kind, shape in index.get((signed, len(compact)), ()):
                if (only is not None and kind is not only) or (
                        window.partial and not kind.partial) or not shape.matches(compact):
                    continue
                written = False
                if window.text != compact:
                    groups = groups or grouping(window.text)
                    written = kind.written(compact) == groups
                if kind in skip and not written:
                    continue
                valid = kind.valid(compact)
                prev = out.get(kind, (False, False, False, 0.0))
                miss = (1.0 - prev[3]) * (1.0 - kind_chance(kind, shape))
                out[kind] = (prev[0] or valid, prev[1] or written,
                             prev[2] or (written and valid), 1.0 - miss)
    return out


@dataclass(frozen=True)
class KindHits:
    """One kind found in a column."""

    kind: CheckedKind
    evidence: Evidence
    values: np.ndarray  # distinct values holding a valid one (estimated: every candidate)
    estimated: bool = False
    valid_share: float = 1.0


def _tally(texts: Sequence[str], positions: np.ndarray) -> dict[CheckedKind, Tally]:
    """Each kind's counts over the values read. A kind whose candidates so far pass its
    checks far below the midpoint (:func:`_hopeless`) is read further only where a value is
    written the kind's way: bare, its verdict cannot change, and stdnum's validators cost
    some 20 microseconds a call."""
    tallies: dict[CheckedKind, Tally] = {}
    stopped: set[CheckedKind] = set()
    for n, (pos, text) in enumerate(zip(positions.tolist(), texts), start=1):
        for kind, (valid, written, written_valid, p0) in read_value(text, skip=stopped).items():
            tallies.setdefault(kind, Tally()).add(valid, written, written_valid, p0, pos)
        if n % STOP_EVERY == 0:
            stopped.update(k for k, t in tallies.items() if k not in stopped and _hopeless(t))
    return tallies


#: the values read between looks at which kinds are hopeless
STOP_EVERY = 100
#: the candidates a kind needs before it can be found hopeless
STOP_AFTER = 200


def _hopeless(t: Tally) -> bool:
    """A kind's candidates so far pass its checks so rarely that even the upper end of a
    wide interval around the share is below the midpoint between codes and identifiers:
    bare candidates cannot find it."""
    if t.candidates < STOP_AFTER:
        return False
    mid = (1.0 + t.chance / t.candidates) / 2.0
    share = t.valid / t.candidates
    spread = np.sqrt(max(share * (1 - share), 1.0 / t.candidates) / t.candidates)
    return bool(share + 4.0 * spread < mid)


def scan_checked(arrow: Any, strings: Any, column: str) -> list[KindHits]:
    """The checked kinds found among ``arrow``'s distinct values (normalized text) of
    ``column``; ``strings(where)`` gives the values at positions ``where`` as Python
    strings. Kinds that share a checksum (a Canadian SIN and an Israeli identity number are
    both nine digits with a Luhn digit) and are found on the same values are reported as
    the kind they are written as, when some are written (all of them otherwise)."""
    hit = matches(arrow, prefilter_re2())
    candidates = np.flatnonzero(hit)
    if not candidates.size:
        return []
    sampled = candidates.size > EXHAUSTIVE
    if sampled:
        written = matches(arrow, WRITTEN_RE2)
        spaced = candidates[np.linspace(0, candidates.size - 1, SAMPLE).astype(np.int64)]
        grouped = np.flatnonzero(hit & written)
        if grouped.size > WRITTEN_AT_MOST:
            grouped = grouped[np.linspace(0, grouped.size - 1, WRITTEN_AT_MOST).astype(
                np.int64)]
        read = np.union1d(spaced, grouped)
    else:
        read = candidates
    tallies = _tally(strings(read), read)
    out: list[KindHits] = []
    found: dict[CheckedKind, Evidence] = {}
    for kind, t in tallies.items():
        evidence = t.evidence(sampled, kind.named_in(column))
        if evidence.found:
            found[kind] = evidence
    for kind in _written_alike(found, tallies):
        evidence, t = found[kind], tallies[kind]
        if not sampled:
            out.append(KindHits(kind, evidence, np.asarray(t.valid_values, dtype=np.int64)))
            continue
        if read.size == candidates.size:  # every candidate was read
            out.append(KindHits(kind, evidence, np.asarray(t.valid_values, dtype=np.int64)))
            continue
        if candidates.size <= FOUND_EXHAUSTIVE:
            texts = strings(candidates)
            valid = [int(p) for p, text in zip(candidates.tolist(), texts)
                     if read_value(text, kind).get(kind, (False,))[0]]
            out.append(KindHits(kind, evidence, np.asarray(valid, dtype=np.int64)))
            continue
        out.append(KindHits(kind, evidence, candidates, estimated=True,
                            valid_share=t.valid / t.candidates))
    return out


def _written_alike(found: dict[CheckedKind, Evidence], tallies: dict[CheckedKind, Tally]
                   ) -> list[CheckedKind]:
    """The kinds found, less those found on the same values as a kind written more often
    (see :func:`scan_checked`)."""
    keep = []
    for kind, evidence in found.items():
        same = [k for k in found if tallies[k].valid_values == tallies[kind].valid_values]
        best = max(found[k].written_valid for k in same)
        if evidence.written_valid == best:
            keep.append(kind)
    return keep
