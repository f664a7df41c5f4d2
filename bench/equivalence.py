"""Equivalence-class family: riskcore against pyCANON 1.3.6 (own environment), same data, same run.

Data: the ALC paper's adult (30k rows) replicated to 100k and 1M rows; after the first copy each
row has a 5% chance of one QI redrawn from its marginal. Everything runs on one core.
Targets: riskcore's whole family on 1M rows x 8 QIs under 2 s; at least 10x faster than
pyCANON on l-diversity and t-closeness at 1M rows.
"""

from __future__ import annotations

import argparse
import json

from bench.common import (
    OUT,
    REFERENCE,
    peer_python,
    pin_one_core,
    print_table,
    replicate,
    run_peer,
    timed,
)
from riskcore import (
    Roles,
    encode_table,
    frequencies,
    k_anonymity,
    l_diversity,
    reidentification_risk,
    t_closeness,
)
from riskcore.equivalence import group_rows
from riskcore.examples import census_population

QI5 = ["age", "sex", "race", "marital-status", "native-country"]
QI8 = ["age", "workclass", "education", "marital-status", "occupation", "race", "sex",
       "native-country"]
SA = ["label"]
#: the example generator's census keys (riskcore.examples), whose combined key is a small range
CENSUS_QI = ["region", "age", "sex", "education"]


def whole_family(df, qis, sens):
    table = encode_table(df, Roles(tuple(qis), sensitive=tuple(sens)))
    freq = frequencies(table)
    return (k_anonymity(freq), reidentification_risk(freq), l_diversity(table),
            t_closeness(table))


def factorized(codes):
    """Classes numbered as before riskcore's own numbering: the combined key of the columns'
    codes through ``pandas.factorize`` (a hash table), the limit :func:`group_rows` is set
    beside (the same ids)."""
    import numpy as np
    import pandas as pd

    key = codes[:, 0].astype(np.int64) + 1
    for j in range(1, codes.shape[1]):
        col = codes[:, j].astype(np.int64) + 1
        key = key * (int(col.max(initial=0)) + 1) + col
    ids, uniq = pd.factorize(key, sort=False)
    return ids.astype(np.int64), len(uniq)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--peer-timeout", type=float, default=300.0)
    args = ap.parse_args()
    pin_one_core()
    OUT.mkdir(parents=True, exist_ok=True)
    import pandas as pd

    adult = pd.read_parquet(REFERENCE / "datasets/alc-paper/original/adult.parquet")
    py = peer_python("pycanon", ["pycanon==1.3.6", "numpy==2.0.2", "pandas==2.3.3", "pyarrow"])
    rows, record, numbering = [], {}, []
    for n in [int(s) for s in args.sizes.split(",")]:
        big = replicate(adult, n, QI8, 0.05, seed=n)
        path = OUT / f"adult_{n}.parquet"
        big.to_parquet(path, index=False)
        tab5 = encode_table(big, Roles(tuple(QI5), sensitive=tuple(SA)))
        t_enc, _ = timed(encode_table, big, Roles(tuple(QI5), sensitive=tuple(SA)))
        t_k, k = timed(lambda t=tab5: k_anonymity(frequencies(t)), repeat=3)
        t_l, lres = timed(l_diversity, tab5, repeat=3)
        t_t, tres = timed(t_closeness, tab5, repeat=3)
        peer = run_peer(py, "pycanon_run.py", [str(path), ",".join(QI5), ",".join(SA)],
                        timeout=args.peer_timeout * 3)
        for name, ours, value in (("k-anonymity", t_k + t_enc, k.figures["k"]),
                                  ("l-diversity", t_l + t_enc, lres.figures["distinct_l"]),
                                  ("t-closeness", t_t + t_enc, tres.figures["t"])):
            key = name[0]
            theirs = peer.get(key, {})
            ts = theirs.get("seconds")
            rows.append([f"{n:,}", name, f"{ours:.3f}",
                         f"{ts:.2f}" if ts else f">{args.peer_timeout * 3:.0f} (timeout)",
                         f"{ts / ours:.0f}x" if ts else "n/a",
                         f"{value:.6g} / {theirs.get('value', float('nan')):.6g}"])
        t_fam, _ = timed(whole_family, big, QI8, SA + ["hours-per-week"])
        rows.append([f"{n:,}", "whole family, 8 QIs (encode+k+reid+l+t)", f"{t_fam:.3f}", "-",
                     "-", "target < 2 s at 1M" if n >= 1_000_000 else ""])
        record[n] = {"peer": peer, "riskcore_family_8qi_s": t_fam}
        census = census_population(n, seed=19)
        for name, frame, qis in (("adult, 8 QIs", big, QI8),
                                 ("census example, 4 QIs", census, CENSUS_QI)):
            codes = encode_table(frame, Roles(tuple(qis))).codes(qis)
            t_pd, (pd_ids, _) = timed(factorized, codes, repeat=3)
            t_ours, (ours_ids, u) = timed(group_rows, codes, repeat=3)
            numbering.append([f"{n:,}", name, f"{u:,}", f"{t_ours:.3f}", f"{t_pd:.3f}",
                              f"{t_pd / t_ours:.1f}x",
                              "yes" if (ours_ids == pd_ids).all() else "NO"])
            record[n][f"numbering {name}"] = {"group_rows_s": t_ours, "factorize_s": t_pd}
    text = print_table("equivalence classes: riskcore vs pyCANON 1.3.6 (one core; seconds; "
                       "ours include encoding)",
                       ["rows", "measure", "riskcore s", "pyCANON s", "ratio",
                        "value ours / pyCANON"], rows)
    text += "\n\n" + print_table(
        "numbering the classes of 8 QIs (riskcore.equivalence.group_rows, dense first-seen "
        "ranks) beside pandas.factorize of the same combined key (one core; seconds, best of 3)",
        ["rows", "keys", "classes", "group_rows s", "pandas.factorize s", "ratio", "same ids"],
        numbering)
    (OUT / "equivalence.txt").write_text(text + "\n")
    (OUT / "equivalence.json").write_text(json.dumps(record, indent=2, default=str))


if __name__ == "__main__":
    main()
