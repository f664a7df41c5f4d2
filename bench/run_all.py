"""`make bench`: every benchmark, peers side by side (each peer in its own environment)."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for script in ("equivalence.py", "sdc.py", "attacks.py", "alc.py", "gate.py"):
    print(f"\n=== bench/{script}", flush=True)
    subprocess.run([sys.executable, str(HERE / script)], check=True)
