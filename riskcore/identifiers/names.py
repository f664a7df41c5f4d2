"""Person names: first names and surnames as real data writes them, told apart from places.

The lists: first names and surnames of the 1990 US Census (``data_files/person_names.txt``)
and place names of GeoNames (``data_files/place_names.txt.gz``: cities, US places, states,
counties and countries). Every comparison is on the word upper-cased with its accents folded
(``José`` is ``JOSE``).

A cell holds a person's name when

* the whole cell is a first name and a surname, with a middle name or initial or not, in
  any case (``John Smith``, ``john smith``, ``JOHN Q. SMITH``), or a surname, a comma and a
  first name (``Smith, John``), and the cell is not a place's name (``Virginia Beach``);
* inside longer text, two or three capitalized words in a row are a first name and a surname
  (``seen by Mary Jones today``) and not a place;
* the cell is one word that is a name, in a column of such words: a column whose distinct
  values are mostly first names (at least :data:`FIRST_NAMES_AT_LEAST` of them) or mostly
  surnames (at least :data:`SURNAMES_AT_LEAST`: surnames include common words, colours and
  trades, and a column of a dozen labels is no register of people). A word that is also a
  common place name (Austin, Madison, Jackson) counts only in a column named for names
  (``first_name``, ``surname``, ``nom``): a column of US cities is a column of places.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .text import matches

#: a column is one of first names alone when this share of its distinct values are names
NAME_COLUMN_SHARE = 0.5
#: and at least this many distinct first names ("May", "Will" are words too)
FIRST_NAMES_AT_LEAST = 5
#: or at least this many distinct surnames (Brown, Baker, Young are words too)
SURNAMES_AT_LEAST = 30
#: a column named for people's names (English, French, German, Spanish, Dutch, Italian)
NAMED_FOR_NAMES = re.compile(
    r"(?i)(?:^|[^a-z])(?:(?:first|last|given|family|middle|full|maiden|sur|fore|birth|"
    r"user|customer|patient|person|contact|f|l)[ _.-]?)?(?:names?|nom|noms|prenoms?|"
    r"pr[eé]noms?|vorname|nachname|nombre|apellidos?|achternaam|voornaam|cognome)(?:$|[^a-z])")

_DATA = Path(__file__).resolve().parents[1] / "data_files"


@lru_cache(maxsize=1)
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, surnames), upper case, from ``data_files/person_names.txt``."""
    first: set[str] = set()
    last: set[str] = set()
    target = first
    for line in (_DATA / "person_names.txt").read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        if line == "[first]":
            target = first
        elif line == "[last]":
            target = last
        else:
            target.add(line)
    return frozenset(first), frozenset(last)


@lru_cache(maxsize=1)
def place_names() -> frozenset[str]:
    """Place names, upper case and folded, from ``data_files/place_names.txt.gz``."""
    with gzip.open(_DATA / "place_names.txt.gz", "rt", encoding="utf-8") as fh:
        return frozenset(line.rstrip("\n") for line in fh
                         if line.strip() and not line.startswith("#"))


#: values are looked up in Python when there are at most a quarter as many as the list has
#: members (measured: a value read out of Arrow and looked up in a set, 0.18 us; Arrow's
#: hashing of the list on each call, 0.06 us a member)
PYTHON_LOOKUP_RATIO = 4


class _Members:
    """A list of names as a set, and in Arrow once a long column needs it (sorting and
    copying the place names into Arrow took 0.05 s of a gate's first load, which looks up
    only its column names)."""

    def __init__(self, names: frozenset[str]) -> None:
        self.python = names

    @cached_property
    def arrow(self) -> Any:
        import pyarrow as pa

        return pa.array(sorted(self.python), type=pa.large_string())


@lru_cache(maxsize=1)
def _lists() -> tuple[_Members, _Members, _Members]:
    """The first names, surnames and place names."""
    first, last = name_lists()
    return _Members(first), _Members(last), _Members(place_names())


def folded(arrow: Any) -> Any:
    """Upper case with accents folded (NFKD, combining marks dropped), in Arrow; ASCII text
    (most columns) is only upper-cased."""
    import pyarrow.compute as pc

    if pc.all(pc.string_is_ascii(arrow)).as_py() is not False:
        return pc.ascii_upper(arrow)
    return pc.utf8_upper(pc.replace_substring_regex(
        pc.utf8_normalize(arrow, "NFKD"), r"\p{Mn}", ""))


#: the cells a name may be alone in: two or three words (a first name, perhaps a middle name
#: or initial, a surname), a surname, a comma and a first name (and a middle name), or one
#: word; one expression, one pass of Arrow
_CELL = (r"^ *(?:(?P<first>[A-Z][A-Z'-]*) +(?:[A-Z][A-Z'-]*\.? +)?(?P<last>[A-Z][A-Z'-]*)"
         r"|(?P<clast>[A-Z][A-Z'-]*) *, *(?P<cfirst>[A-Z][A-Z'-]*)(?: +[A-Z][A-Z'-]*\.?)?"
         r"|(?P<word>[A-Z][A-Z'-]*)) *$")
#: longer cells hold no name alone
_CELL_AT_MOST = 64
#: two capitalized words in a row inside text (before folding: case tells names in prose)
TEXT_RE2 = r"\p{Lu}\p{Ll}+ \p{Lu}\p{Ll}"
_CAPITALIZED = re.compile(r"(?<![\w'-])[^\W\d_][^\W\d_'-]{0,20}+(?:['-][^\W\d_]{1,20}+)?"
                          r"(?![\w'-])")


@dataclass(frozen=True)
class NameFinding:
    """The distinct values of a column that hold a person's name."""

    values: np.ndarray  # indices into the column's distinct values
    whole: int  # whole cells that are a full name
    in_text: int  # cells with a full name inside text
    single: int  # one-word cells counted as names of a column of names
    single_kind: str  # "first names", "surnames" or ""


def _in(values: Any, members: _Members) -> np.ndarray:
    """Which of ``values`` (Arrow text) are among ``members`` (as a set, and in Arrow).

    Arrow hashes its whole value set on every call (the place names: 4.5 ms), so a handful
    of values (most columns' distinct values) is looked up in Python's set instead."""
    import pyarrow.compute as pc

    python = members.python
    if len(values) * PYTHON_LOOKUP_RATIO <= len(python):
        return np.fromiter((v in python for v in values.to_pylist()), dtype=bool,
                           count=len(values))
    return np.asarray(pc.is_in(values, value_set=members.arrow).fill_null(False).to_numpy(
        zero_copy_only=False), dtype=bool)


def find_names(arrow: Any, column: str) -> NameFinding:
    """The distinct values (``arrow``, normalized text) that hold a person's name (see the
    module doc): whole cells in Arrow, names inside text in Python on the few candidates."""
    import pyarrow as pa
    import pyarrow.compute as pc

    first, last, places = _lists()
    short = np.flatnonzero(np.asarray(pc.less_equal(pc.utf8_length(arrow), _CELL_AT_MOST)
                                      .fill_null(False).to_numpy(zero_copy_only=False)))
    upper = folded(arrow.take(pa.array(short, type=pa.int64())))
    # RE2 matches in one pass of its DFA; the groups (a slower engine) are read only on the
    # cells that match
    cells = np.flatnonzero(matches(upper, _CELL))
    short, upper = short[cells], upper.take(pa.array(cells, type=pa.int64()))
    got = pc.extract_regex(upper, _CELL)
    fields = {f: pc.struct_field(got, f) for f in ("first", "last", "cfirst", "clast", "word")}

    def spread(mask: np.ndarray) -> np.ndarray:
        out = np.zeros(len(arrow), dtype=bool)
        out[short] = mask
        return out

    def filled(name: str) -> np.ndarray:
        return np.asarray(pc.not_equal(fields[name], "").fill_null(False).to_numpy(
            zero_copy_only=False), dtype=bool)

    is_place = spread(_in(upper, places))
    whole = spread(filled("first") & _in(fields["first"], first) & _in(fields["last"], last))
    whole &= ~is_place
    whole |= spread(filled("cfirst") & _in(fields["cfirst"], first)
                    & _in(fields["clast"], last))
    alone = filled("word")
    lone_first = spread(alone & _in(fields["word"], first))
    lone_last = spread(alone & _in(fields["word"], last))
    texts = np.flatnonzero(matches(arrow, TEXT_RE2, " ") & ~whole)
    in_text = np.zeros(len(arrow), dtype=bool)
    if texts.size:
        names, surnames = name_lists()
        place_set = place_names()
        for i, value in zip(texts, arrow.take(texts).to_pylist()):
            in_text[i] = any(_full_name(p, names, surnames, place_set)
                             for p in name_pairs(str(value)))
    named = bool(NAMED_FOR_NAMES.search(column))
    distinct = max(len(arrow), 1)
    counted = whole | in_text
    single = np.zeros(len(arrow), dtype=bool)
    kind = ""
    for lone, least, what in ((lone_first, FIRST_NAMES_AT_LEAST, "first names"),
                              (lone_last, SURNAMES_AT_LEAST, "surnames")):
        usable = lone if named else lone & ~is_place
        if int(usable.sum()) >= least and \
                int((usable | counted).sum()) >= NAME_COLUMN_SHARE * distinct:
            single |= usable
            kind = kind or what
    values = np.flatnonzero(counted | single)
    return NameFinding(values, int(whole.sum()), int(in_text.sum()),
                       int((single & ~counted).sum()), kind)


def _full_name(candidate: str, first: frozenset[str], last: frozenset[str],
               places: frozenset[str]) -> bool:
    words = fold_text(candidate).split()
    return (len(words) >= 2 and words[0] in first and words[-1] in last
            and " ".join(words) not in places)


def fold_text(text: str) -> str:
    """Upper case with accents folded (Python's, for the few values read in Python)."""
    import unicodedata

    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).upper()


def name_pairs(value: str) -> Iterator[str]:
    """Two or three capitalized words in a row (one space apart), each window once: the
    candidates of a person's name inside any text, in one pass."""
    words = [(m.start(), m.end()) for m in _CAPITALIZED.finditer(value)
             if value[m.start()].isupper()]
    for i, (start, end) in enumerate(words):
        stop = end
        for j in (i + 1, i + 2):
            if j >= len(words) or words[j][0] != stop + 1 or value[stop] != " ":
                break
            stop = words[j][1]
            yield value[start:stop]
