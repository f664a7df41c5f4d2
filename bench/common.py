"""Helpers shared by the benchmarks: data generation, peer environments, timing, tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"
ENVS = BENCH / "envs"
#: the peers' reference data, in the repository (tests/reference/README.md)
REFERENCE = ROOT / "tests" / "reference"


def peer_python(name: str, requirements: list[str]) -> Path:
    """A virtual environment of its own for a peer library (never riskgate's)."""
    env = ENVS / name
    py = env / "bin" / "python"
    marker = env / ".installed"
    if not marker.exists() or marker.read_text() != " ".join(requirements):
        subprocess.run(["uv", "venv", "-q", "--allow-existing", str(env), "--python", "3.11"],
                       check=True)
        subprocess.run(["uv", "pip", "install", "-q", "--python", str(py), *requirements],
                       check=True)
        marker.write_text(" ".join(requirements))
    return py


def run_peer(py: Path, script: str, args: list[str], timeout: float) -> dict:
    """Run a peer script pinned to one core; it prints one JSON object."""
    cmd = ["taskset", "-c", "0", str(py), str(BENCH / "peers" / script), *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    except subprocess.CalledProcessError as exc:
        return {"error": exc.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def replicate(df: pd.DataFrame, n: int, columns: list[str], p: float, seed: int) -> pd.DataFrame:
    """Stack copies of df up to n rows; after the first copy each row gets, with probability p,
    one of ``columns`` redrawn from its marginal (vectorized)."""
    rng = np.random.default_rng(seed)
    reps = int(np.ceil(n / len(df)))
    big = pd.concat([df] * reps, ignore_index=True).iloc[:n].copy()
    first = len(df)
    hit = np.flatnonzero(rng.random(n) < p)
    hit = hit[hit >= first]
    which = rng.integers(0, len(columns), size=hit.size)
    for j, col in enumerate(columns):
        rows = hit[which == j]
        donors = rng.integers(0, len(df), size=rows.size)
        big.iloc[rows, big.columns.get_loc(col)] = df[col].to_numpy()[donors]
    return big


def timed(fn, *args, repeat: int = 1, **kwargs):
    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - t0)
    return best, result


def print_table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    lines = [title, line, "-" * len(line)]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def pin_one_core() -> None:
    try:
        os.sched_setaffinity(0, {0})
    except (AttributeError, OSError):
        pass
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def python() -> str:
    return sys.executable
