"""The families' compiled kernels, compiled ahead of the first gate (``python -m
riskcore.gate.kernels``; ``make env`` and the Docker image run it).

numba keeps each kernel's machine code on disk (:mod:`riskcore.compiled`), but only once some
process has compiled it for the argument types the gate passes: until then the first gate of a
fresh install compiles them inside its measures (the distance search of ``copies`` and
``membership`` 6.5 s, the ALC's row matches 0.4 s, singling out's counter 0.3 s on this
project's 2-core bench machine), which a custodian reads as a slow gate. Here the families that
hold a kernel run once on a small generated census (original, a k-anonymized release of it, a
held-out control), read and encoded as the gate reads and encodes, so each kernel is compiled
for the very types a gate gives it. With the code on disk already, this loads it and takes
seconds.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from ..examples import census_population, write_example
from ..measures import MeasureInputs, run_measure
from .config import load_gate
from .encoding import encode_measured
from .inputs import load_input
from .prepare import prepare_tables

#: the families that call a compiled kernel (:func:`riskcore.compiled.compiled`)
WITH_KERNELS = ("copies", "membership", "alc", "singling_out")
KEYS = ["region", "age", "sex", "education"]
#: rows of the generated census: enough for every family's smallest sample
ROWS = 1_500


def compile_kernels(rows: int = ROWS, seed: int = 2026) -> dict[str, float]:
    """Run each family of :data:`WITH_KERNELS` on two releases of a generated census of
    ``rows`` people, the example's k-anonymized one and a synthetic one (new rows, exact
    numbers: the ALC's rows group by value on the first, not on the second, and each
    grouping has its kernel); each family's seconds."""
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="riskgate-kernels-") as tmp:
        paths = write_example(tmp, n=rows, seed=seed)
        census_population(rows, seed + 1).to_csv(Path(tmp) / "control.csv", index=False)
        census_population(rows, seed + 2).drop(columns=["person_id"]).to_csv(
            Path(tmp) / "synthetic.csv", index=False)
        generalized = {"age": "interval",
                       "region": {"hierarchy": str(paths["region_hierarchy"])}}
        for released, generalization in (("released", generalized), ("synthetic", {})):
            inputs = _encoded(Path(tmp), released, generalization, seed)
            for name in WITH_KERNELS:
                t0 = time.perf_counter()
                # on the generalized keys alone, the ALC's rows group by value
                run_measure(name, inputs, {"known": KEYS} if name == "alc" and generalization
                            else {})
                seconds[name] = round(seconds.get(name, 0.0) + time.perf_counter() - t0, 2)
    return seconds


def _encoded(folder: Path, released: str, generalization: dict[str, Any], seed: int
             ) -> MeasureInputs:
    """The tables in ``folder`` read, prepared and encoded as a gate does."""
    gate = load_gate({
        "release_id": "kernels", "original": str(folder / "original.csv"),
        "released": str(folder / f"{released}.csv"), "control": str(folder / "control.csv"),
        "output_url": str(folder / "runs"),
        "roles": {"quasi_identifiers": [*KEYS, "income"], "sensitive": ["diagnosis"],
                  "weight": "weight", "household": "household_id",
                  "direct_identifiers": ["person_id"], "types": {"age": "categorical"}
                  if generalization else {}},
        "generalization": generalization,
        "measures": {name: {} for name in WITH_KERNELS},
        "policy": {"version": 1, "checks": ["k_anonymity.k >= 1"]}, "seed": seed})
    frames, infos = {}, []
    for name in gate.config.tables():
        frames[name], info = load_input(gate.config, name)
        infos.append(info)
    frames, _ = prepare_tables(gate.config, frames, infos)
    return encode_measured(gate, frames)


def main() -> None:
    t0 = time.perf_counter()
    seconds = compile_kernels()
    print(f"riskgate: the families' kernels compiled in {time.perf_counter() - t0:.1f} s "
          f"({', '.join(f'{k} {v:.1f} s' for k, v in seconds.items())})")


if __name__ == "__main__":
    main()
