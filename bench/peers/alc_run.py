"""Run anonymity_loss_coefficient 1.0.32's BrmAttack on one scenario (its own environment).

Usage: alc_run.py ORIGINAL.parquet RELEASED.parquet SECRET KNOWN,COLS SEED RESULTS_DIR
Prints one JSON line: alc, base/attack PRC, predictions, halt code, seconds, model.
BrmAttack exposes no seed: numpy's and random's global generators are seeded before the run.
"""

import json
import os
import random
import shutil
import sys
import time

import numpy as np
import pandas as pd


def main() -> None:
    ori_path, rel_path, secret, known, seed, out = sys.argv[1:7]
    from anonymity_loss_coefficient import BrmAttack

    ori = pd.read_parquet(ori_path)
    rel = pd.read_parquet(rel_path)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    random.seed(int(seed))
    np.random.seed(int(seed))
    t0 = time.process_time()
    w0 = time.perf_counter()
    brm = BrmAttack(ori, rel, results_path=out, no_counter=True, flush=True)
    brm.run_one_attack(secret, known.split(","))
    info = brm.alcm.halt_info
    data = info.get("data") or {}
    print(json.dumps({
        "alc": info.get("alc", data.get("alc")), "base_prc": data.get("base_prc"),
        "attack_prc": data.get("attack_prc"), "n": info.get("num_attacks"),
        "halt": info.get("halt_code"), "seconds": time.process_time() - t0,
        "wall": time.perf_counter() - w0, "model": brm.alcm.model_name}))


if __name__ == "__main__":
    main()
