"""`make bench`: every benchmark, peers side by side (each peer in its own environment).

Each runs as a module of the ``bench`` package from the repository root (``python -m bench.gate``).
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for name in ("equivalence", "sdc", "population", "attacks", "alc", "copies", "membership",
             "utility", "composition", "scan", "diff", "gate", "around", "many", "triggered",
             "load", "dask_scale"):
    print(f"\n=== bench/{name}.py", flush=True)
    subprocess.run([sys.executable, "-m", f"bench.{name}"], check=True, cwd=ROOT)
