"""The allocator's settings in the gate's processes (:mod:`riskcore.memory`)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from riskcore.gate.config import load_gate
from riskcore.gate.run import LocalSteps, run_gate
from riskcore.memory import spare_the_collector
from tests.conftest import gate_config

#: glibc's allocator and its statistics (``mallinfo2``), for the probes below
LIBC = """
import ctypes, json, sys
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
"""
#: in a fresh process: 2,000 blocks of 100 KB allocated from glibc's heap, then the heap's size
PROBE = LIBC + """
from riskcore.memory import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
blocks = [libc.malloc(100_000) for _ in range(2_000)]
print(json.dumps({"kept": kept, "heap_mb": libc.mallinfo2().arena / 2**20}))
"""


def _probe(mode: str, script: str = PROBE, tuning: tuple[str, ...] = ("MALLOC_TOP_PAD_",),
           **env: str) -> dict:
    """``script`` run in a fresh process, without the user's ``tuning`` of glibc but ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in (*tuning, "GLIBC_TUNABLES")}
    done = subprocess.run([sys.executable, "-c", script, mode], env={**base, **env},
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


#: in a fresh process: a 40 MB block (a 5M-row column of int64), then how glibc holds it
LARGE = LIBC + """
from riskcore.memory import large_arrays_from_heap
heap = large_arrays_from_heap() if sys.argv[1] == "heap" else None
before = libc.mallinfo2()
block = libc.malloc(40 << 20)
after = libc.mallinfo2()
print(json.dumps({"heap": heap, "mapped": after.hblks - before.hblks,
                  "heap_mb": (after.arena - before.arena) / 2**20}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_the_helpers_large_arrays_come_from_the_heap_unless_the_user_tuned_it():
    """Great Expectations' helper process, where the release's diff runs, takes its large
    arrays from glibc's heap, whose freed pages serve the next ones, rather than map each
    anew (every page faulted in again: a fifth of the diff's CPU at 1M rows). Seen from
    outside: a 40 MB block is one more mapping of its own by default, 40 MB more heap with it. A
    user's own setting of the allocator is left alone."""
    def probe(mode: str, **env: str) -> dict:
        return _probe(mode, LARGE, ("MALLOC_MMAP_THRESHOLD_",), **env)

    plain, heap = probe("plain"), probe("heap")
    assert plain["mapped"] == 1 and plain["heap_mb"] < 40, plain
    assert heap["heap"] is True and heap["mapped"] == 0 and heap["heap_mb"] >= 40, heap
    for env in ({"MALLOC_MMAP_THRESHOLD_": "131072"},
                {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=131072"}):
        theirs = probe("heap", **env)
        assert theirs["heap"] is False and theirs["mapped"] == 1, (env, theirs)


#: in a fresh process set up as the helper is: 64 MB faulted in, then what the heap holds
RESERVED = LIBC + """
from riskcore.memory import keep_freed_memory, large_arrays_from_heap, prefault
if sys.argv[1] == "helper":
    keep_freed_memory(), large_arrays_from_heap()
rss = lambda: int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])
before = rss()
done = prefault(64 << 20)
info = libc.mallinfo2()
print(json.dumps({"done": done, "free_mb": info.fordblks / 2**20,
                  "rss_mb": (rss() - before) / 1024}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_memory_faulted_in_for_the_diff_stays_in_the_helpers_heap():
    """What the helper faults in while the gate's process prepares its tables stays in its
    heap, resident and free for the diff's arrays; in a process with glibc's defaults it
    is given back at once (so the helper's settings are what make it hold)."""
    helper = _probe("helper", RESERVED, ("MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_"))
    assert helper["done"] == 64 << 20
    assert helper["free_mb"] >= 64 and helper["rss_mb"] >= 60, helper
    plain = _probe("plain", RESERVED, ("MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_"))
    assert plain["free_mb"] < 8 and plain["rss_mb"] < 8, plain


#: in a fresh process, the program's collector as ``mode`` says, then :func:`spare_the_collector`
COLLECTOR = """
import gc, json, sys
mode = sys.argv[1]
if mode == "off":
    gc.disable()
if mode == "theirs":
    gc.set_threshold(50_000, 10, 10)
from riskcore.memory import spare_the_collector
tracked = len(gc.get_objects())
done = spare_the_collector()
print(json.dumps({"done": done, "frozen": gc.get_freeze_count(), "tracked": tracked,
                  "young": gc.get_threshold()[0], "on": gc.isenabled()}))
"""


def test_what_a_gate_process_has_loaded_is_left_out_of_the_garbage_collector():
    """Before its first table is read, a gate process freezes what it has loaded (Prefect,
    pandas, Arrow: never garbage) and collects its youngest generation every 20,000
    allocations rather than 700. A program that turned the collector off, or set a higher
    threshold, keeps its choice."""
    ours = _probe("default", COLLECTOR)
    assert ours["done"] is True and ours["young"] == 20_000
    assert ours["frozen"] >= ours["tracked"] > 1_000  # every object tracked when it was called
    theirs = _probe("theirs", COLLECTOR)
    assert theirs["done"] is True and theirs["young"] == 50_000
    off = _probe("off", COLLECTOR)
    assert off["frozen"] == 0 and off["young"] == 700
    assert off["done"] is False and off["on"] is False


def test_a_gate_spares_the_collector(example_files, tmp_path):
    spare_the_collector.cache_clear()
    gc.unfreeze()
    cfg = gate_config(str(example_files["original"]), str(example_files["released"]),
                      str(tmp_path / "out"))
    outcome = run_gate(load_gate(cfg), "run-collector", steps=LocalSteps())
    assert outcome.verdict in ("APPROVED", "NEEDS_REVIEW", "REJECTED")
    assert spare_the_collector.cache_info().currsize == 1 and gc.get_freeze_count() > 0
