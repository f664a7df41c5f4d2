"""Values as the scan reads them, and characters that hide what a value says.

Before any kind is looked for, every distinct value is normalized in Arrow (C++, linear):
Unicode compatibility form NFKC (a full-width ``＠`` or ``５`` is ``@`` or ``5``, a ligature
its letters), then every format character removed (Unicode category Cf: zero-width spaces
and joiners, soft hyphens, bidirectional marks, the byte-order mark), so an address with a
zero-width space inside it is an address.

The cleanliness checks refuse the characters that can only hide text (:data:`HIDING`):
zero-width spaces, word joiners, a byte-order mark inside a cell, bidirectional embeddings,
overrides and isolates, the invisible operators and tag characters. Zero-width joiners and
non-joiners (Persian and Indic scripts, emoji) and left-to-right and right-to-left marks
(Arabic and Hebrew) are kept in free text, where honest text writes them; a measured
column (a label an attacker matches) refuses every format character (:data:`FORMAT`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: every format character (Unicode 14's category Cf, the standard library's) as a character
#: class body, for Python's re and RE2 alike (tests/identifiers checks it against unicodedata)
FORMAT = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f"
          "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
          "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
          "\U000e0020-\U000e007f")
#: the format characters that only hide text: zero-width space, word joiner and invisible
#: operators, the byte-order mark (inside a cell), bidirectional embeddings, overrides and
#: isolates, tag characters
HIDING = ("\u200b\u2060-\u2064\ufeff\u202a-\u202e\u2066-\u2069"
          "\U000e0001\U000e0020-\U000e007f")


def normalized(arrow: Any) -> Any:
    """NFKC, format characters removed (see the module doc): Arrow in, Arrow out, the same
    length and order. ASCII text (most columns) is its own normal form."""
    import pyarrow.compute as pc

    if pc.all(pc.string_is_ascii(arrow)).as_py() is not False:
        return arrow
    return pc.replace_substring_regex(pc.utf8_normalize(arrow, "NFKC"), r"\p{Cf}", "")


def matches(arrow: Any, re2: str, literal: str | None = None) -> np.ndarray:
    """Which values ``re2`` finds a match in (RE2, in Arrow), as booleans (a null: False).

    ``literal``, a text every match holds, is searched for first: where no value holds it
    nothing is compiled. Arrow compiles the expression on every call, and a column's
    distinct values are often a handful: with Unicode classes the compilation is 2-4 ms, the
    plain search of a text 0.01 ms."""
    import pyarrow.compute as pc

    def mask(found: Any) -> np.ndarray:
        return np.asarray(found.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)

    if literal is not None:
        held = mask(pc.match_substring(arrow, literal))
        if not held.any():
            return held
    return mask(pc.match_substring_regex(arrow, re2))
