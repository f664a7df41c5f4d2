"""Release anatomy: a release read against its original, from the data alone.

:func:`diff` says what kind of release it is (kept rows, a subsample, new rows, or new rows
with some of the original's records), what was done to each column, how each column reads (a
code or a quantity) and which original row each released row comes from; ``riskgate diff``
prints it, and ``riskgate init``, the gate's validation record, ``composition`` and the
distance attacks read it.
"""

from .diff import KIND_WORDS, ColumnDiff, ReleaseDiff, diff, read_release, release_sample
from .reading import ColumnReading, read_column, read_columns

__all__ = ["KIND_WORDS", "ColumnDiff", "ColumnReading", "ReleaseDiff", "diff", "read_column",
           "read_columns", "read_release", "release_sample"]
