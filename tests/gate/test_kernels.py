"""The families' kernels compiled ahead of the first gate (:mod:`riskcore.gate.kernels`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

#: in a fresh process with its own numba cache: the kernels compiled as ``make env`` does, then
#: every family of the example config (and membership) on two other releases, of another size
#: and seed: what each step left in the cache
PROBE = """
import json, os, sys, tempfile
from pathlib import Path
import yaml
from riskcore import compiled
from riskcore.examples import census_population, write_example
from riskcore.gate.kernels import _encoded, compile_kernels
from riskcore.measures import run_measure

cache = Path(os.environ["NUMBA_CACHE_DIR"])
def files():
    return sorted(p.name for p in cache.rglob("*.nbc"))
compile_kernels()
warmed = files()
requested = sorted(f.__name__ for f, k in compiled._COMPILED.items() if k is not None)
measures = yaml.safe_load(Path(sys.argv[1]).read_text())["measures"]
measures["membership"] = {}
with tempfile.TemporaryDirectory() as tmp:
    paths = write_example(tmp, n=2_400, seed=11)
    census_population(2_400, 12).to_csv(Path(tmp) / "control.csv", index=False)
    census_population(2_400, 13).drop(columns=["person_id"]).to_csv(
        Path(tmp) / "synthetic.csv", index=False)
    for released, generalization in (
            ("released", {"age": "interval",
                          "region": {"hierarchy": str(paths["region_hierarchy"])}}),
            ("synthetic", {})):
        inputs = _encoded(Path(tmp), released, generalization, 11)
        for name, params in measures.items():
            run_measure(name, inputs, params)
print(json.dumps({"warmed": warmed, "requested": requested, "after": files()}))
"""


def test_after_the_kernels_are_compiled_no_family_compiles_one(tmp_path: Path) -> None:
    """``python -m riskcore.gate.kernels`` (run by ``make env`` and the Docker image) leaves in
    numba's cache every kernel the families ask for, for the types the gate gives them: every
    family of the example config and membership, on a k-anonymized release and a synthetic one
    of another census, compile nothing more (a first gate compiled them in its measures: 7-10 s
    on the bench machine). A kernel a family adds, or new argument types, fail here until the
    module runs it."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    done = subprocess.run([sys.executable, "-c", PROBE, str(root / "examples" / "gate.yaml")],
                          env=env, capture_output=True, text=True, cwd=root, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(out["requested"]) >= {"_nearest_rows", "_leaves", "_nearest_groups",
                                     "_nearest_secrets", "_count_upto"}
    warmed = {name.split(".")[1].split("-")[0] for name in out["warmed"]}
    assert warmed == set(out["requested"])
    assert out["after"] == out["warmed"]


#: in a fresh process: a family's thread making numba's CPU context holds the context's lock
#: (and would take the compiler lock next); meanwhile the start-up's :func:`warm` runs
DEADLOCK_PROBE = """
import json, threading, time
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import CPUTarget
from riskcore.compiled import warm

context_lock = CPUTarget.__dict__["_toplevel_target_context"]._lock
context_lock.acquire()
start_up = threading.Thread(target=warm, daemon=True)
start_up.start()
time.sleep(0.5)
free = global_compiler_lock._lock.acquire(timeout=2)
if free:
    global_compiler_lock._lock.release()
context_lock.release()
start_up.join(60)
print(json.dumps({"compiler_lock_free": free, "warm_ended": not start_up.is_alive()}))
"""


def test_numba_set_up_never_holds_the_compiler_lock_while_it_waits_for_the_context():
    """numba makes its CPU context under the context's lock and takes its compiler lock inside
    (a kernel's first dispatcher, in a family's thread); the families' start-up
    (:func:`riskcore.compiled.warm`) must take them in that order. Taken the other way round,
    a gate whose first kernel was made while the start-up ran hung for good (seen: singling
    out's counter and copies' search beside the start-up of a 6,000-row gate). Here a thread
    holds the context's lock while ``warm`` runs: the compiler lock stays free for it."""
    done = subprocess.run([sys.executable, "-c", DEADLOCK_PROBE], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"compiler_lock_free": True, "warm_ended": True}
