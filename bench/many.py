"""Many releases of one survey: one ``riskgate gate`` per release, against one call for all.

The releases are the corpus's eight of NIST SDNist's national2019 extract of the American
Community Survey (19,077 people of 27,253 in the original, the rest the held-out control;
24 columns): kept rows shuffled and a few dropped, k-anonymized with suppression, swapped,
noised, synthetic, SMOTE and a mix of new rows and records (``tests/release_corpus.py``). Each
is gated with every family (membership too), against a Prefect server already running on
127.0.0.1, as a custodian with a folder of releases runs them: first one process per release,
then every config in one process (``riskgate gate --config a.yaml b.yaml ...``), which shares
the start-up and runs the ALC in Great Expectations' helper process. Target: the call for all
at least 1.5x faster than one by one. The machine's load average is printed beside each row.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.around import start_standby
from bench.common import OUT, print_table

KEYS = ["PUMA", "AGEP", "SEX", "MSP", "RAC1P", "HISP"]


def write_releases(folder: Path) -> list[Path]:
    """The releases, the original and the control as CSV, and a gate config per release."""
    from tests.release_corpus import national, national_releases

    folder.mkdir(parents=True, exist_ok=True)
    original, control = national()
    original.to_csv(folder / "original.csv", index=False)
    control.to_csv(folder / "control.csv", index=False)
    configs = []
    for i, release in enumerate(national_releases(original)):
        name = f"r{i:02d}-{release.name}"
        release.released.to_csv(folder / f"{name}.csv", index=False)
        cfg = {"release_id": f"many-{name}", "original": str(folder / "original.csv"),
               "released": str(folder / f"{name}.csv"), "control": str(folder / "control.csv"),
               "output_url": str(folder / "runs"), "missing_values": ["N"], "seed": 3,
               "roles": {"quasi_identifiers": KEYS, "sensitive": ["PINCP_DECILE"],
                         "weight": "PWGTP"},
               "measures": {"k_anonymity": {"ks": [2, 5]}, "reid": {}, "l_diversity": {},
                            "t_closeness": {}, "sdc": {}, "suda": {}, "singling_out": {},
                            "inference": {}, "copies": {}, "membership": {}, "alc": {},
                            "utility": {},
                            "linkability": {"aux_a": ["PUMA", "SEX", "MSP"],
                                            "aux_b": ["AGEP", "RAC1P", "HISP"]}},
               "policy": {"version": 1, "checks": ["k_anonymity.k >= 1"]},
               "limits": {"max_table_mb": 2048}}
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        configs.append(path)
    return configs


def main() -> None:
    from riskgate.flows.local_api import private_server

    exe = str(Path(sys.executable).with_name("riskgate"))
    configs = write_releases(OUT / "many")
    rows = []
    with private_server(home=str(OUT / "many-prefect-home")) as api:
        env = {**os.environ, "PREFECT_API_URL": api}
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        codes = [subprocess.run([exe, "gate", "--config", str(c)], env=env,
                                capture_output=True).returncode for c in configs]
        apart = time.perf_counter() - t0
        load_all = os.getloadavg()[0]
        t0 = time.perf_counter()
        done = subprocess.run([exe, "gate", "--config", *map(str, configs)], env=env,
                              capture_output=True)
        together = time.perf_counter() - t0
        # one by one again, each forked by a standby started beforehand (bench/around.py)
        folder = tempfile.mkdtemp(prefix="rg-bench-")
        sock = os.path.join(folder, "s.sock")
        os.environ["PREFECT_API_URL"] = api
        standby = start_standby(sock, OUT / "many" / "standby.log")
        load_sb = os.getloadavg()[0]
        try:
            t0 = time.perf_counter()
            sb_codes = [subprocess.run([exe, "gate", "--config", str(c)],
                                       env={**env, "RISKGATE_STANDBY": sock},
                                       capture_output=True).returncode for c in configs]
            forked = time.perf_counter() - t0
        finally:
            standby.terminate()
            standby.wait(30)
    rows.append([str(len(configs)), f"{apart:.1f}", f"{apart / len(configs):.2f}",
                 f"{together:.1f}", f"{together / len(configs):.2f}",
                 f"{apart / together:.2f}x", f"{forked:.1f}", f"{forked / len(configs):.2f}",
                 f"{apart / forked:.2f}x",
                 f"{sorted(set(codes))} / {done.returncode} / {sorted(set(sb_codes))}",
                 f"{load:.2f} / {load_all:.2f} / {load_sb:.2f}"])
    print_table("releases of one survey (national2019, every family): one process each "
                "against one call for all (target: at least 1.5x), and one by one through "
                "riskgate standby",
                ["releases", "one by one s", "per release", "one call s", "per release",
                 "speed-up", "standby, one by one s", "per release", "speed-up",
                 "exit codes", "load"], rows)


if __name__ == "__main__":
    main()
