"""The allocator's settings in the gate's processes (:mod:`riskcore.memory`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: in a fresh process: 2,000 blocks of 100 KB allocated from glibc's heap, then the heap's size
PROBE = """
import ctypes, json, sys
from riskcore.memory import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
blocks = [libc.malloc(100_000) for _ in range(2_000)]
print(json.dumps({"kept": kept, "heap_mb": libc.mallinfo2().arena / 2**20}))
"""


def _probe(mode: str, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items()
            if k not in ("MALLOC_TOP_PAD_", "GLIBC_TUNABLES")}
    done = subprocess.run([sys.executable, "-c", PROBE, mode], env={**base, **env},
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_the_heap_grows_and_shrinks_by_a_quarter_gigabyte_unless_the_user_tuned_it():
    """The gate's processes have glibc's heap keep up to 256 MB free at its top
    (``M_TOP_PAD``), which it also grows by: a million-row step's next arrays reuse what its
    last ones freed rather than take every page from the kernel again (a fresh process
    reading a million-row release against its original: 0.55-0.91 s of system time by
    default, 0.26-0.34 s with it). Seen
    from outside: 195 MB of blocks make a 256 MB heap, not a 195 MB one. A user's own
    setting of the allocator is left alone."""
    plain = _probe("plain")
    kept = _probe("keep")
    assert plain["heap_mb"] < 200
    assert kept["kept"] is True and kept["heap_mb"] >= 256
    for env in ({"MALLOC_TOP_PAD_": "131072"},
                {"GLIBC_TUNABLES": "glibc.malloc.top_pad=131072"}):
        theirs = _probe("keep", **env)
        assert theirs["kept"] is False and theirs["heap_mb"] < 200, (env, theirs)
