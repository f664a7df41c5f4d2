"""Population uniqueness: every model's estimate against the truth counted in the population,
and the log-linear fit's time at 100k and 1M sample rows.

Populations of 200,000 people from ``riskcore.examples.survey_population`` in four dependence
structures; Bernoulli samples at 1 %, 5 % and 10 %, three seeds each; two key sets. The truth is
the number of key cells of size 1 in the population. Relative error = estimate / truth - 1, as
the mean over the seeds and the worst seed. Zayatz, Pitman, SNB and Dankar are riskgate's
implementations, equal to ARX 3.9.2's (tests/measures/test_population_reference.py); ``best``
is the log-linear estimate when it is available, else Dankar's.

Time (one core, CPU seconds): the whole ``population`` computation (the ARX models and the
log-linear model) on samples of 100k and 1M rows (the same generator, N = 10 x n), next to the
machine's limit for the same data: one hash group-by of the key columns (the class sizes every
model starts from).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from bench.common import OUT, pin_one_core, print_table

KEY_SETS = {"region,sex,age,ethnicity,marital":
            ["region", "sex", "age", "ethnicity", "marital"],
            "zip,sex,age,education,occupation,ethnicity":
            ["zip", "sex", "age", "education", "occupation", "ethnicity"]}
FRACTIONS = (0.01, 0.05, 0.10)
SEEDS = (1, 2, 3)
N_POP = 200_000
MODELS = ("loglinear", "pitman", "zayatz", "snb", "dankar", "best")


def estimate(sample: pd.DataFrame, keys: list[str], N: float) -> dict[str, float | None]:
    from riskcore.equivalence import group_rows
    from riskcore.measures.population import loglinear_estimate, population_uniqueness

    codes = sample[keys].to_numpy(np.int64)
    class_id, u = group_rows(codes)
    fit = loglinear_estimate(codes, class_id, u, N)
    res = population_uniqueness(np.bincount(class_id, minlength=u), N, fit)
    return dict(res.figures)


def accuracy() -> str:
    from riskcore.examples import POPULATION_STRUCTURES, survey_population

    rows = []
    for structure in POPULATION_STRUCTURES:
        errors: dict[tuple[str, float], dict[str, list[float | None]]] = {}
        truths: dict[tuple[str, float], list[int]] = {}
        for seed in SEEDS:
            pop = survey_population(N_POP, seed, structure)
            for label, keys in KEY_SETS.items():
                truth = int((pop.groupby(keys).size() == 1).sum())
                for frac in FRACTIONS:
                    rng = np.random.default_rng(1000 + seed)
                    sample = pop[rng.random(N_POP) < frac]
                    figs = estimate(sample, keys, N_POP)
                    cell = errors.setdefault((label, frac), {m: [] for m in MODELS})
                    truths.setdefault((label, frac), []).append(truth)
                    for m in MODELS:
                        v = figs.get(m)
                        cell[m].append(None if v is None else float(v) / truth - 1.0)
        for (label, frac), cell in errors.items():
            row = [structure, label, f"{frac:.0%}", f"{np.mean(truths[(label, frac)]):,.0f}"]
            for m in MODELS:
                vals = [v for v in cell[m] if v is not None]
                if len(vals) < len(cell[m]):
                    row.append("n/a" if not vals else f"{np.mean(vals):+.0%} ({len(vals)}/3)")
                else:
                    worst = max(vals, key=abs)
                    row.append(f"{np.mean(vals):+.0%} [{worst:+.0%}]")
            rows.append(row)
    return print_table(
        "population uniques: relative error against the truth, mean over 3 seeds [worst seed]"
        f" (N = {N_POP:,})",
        ["structure", "keys", "sample", "true uniques", *MODELS], rows)


def speed() -> str:
    from riskcore.examples import survey_population

    rows = []
    for n in (100_000, 1_000_000):
        sample = survey_population(n, 11, "census")
        for label, keys in KEY_SETS.items():
            t0 = time.process_time()
            estimate(sample, keys, 10.0 * n)
            ours = time.process_time() - t0
            t0 = time.process_time()
            sample.groupby(keys, sort=False).size()
            limit = time.process_time() - t0
            rows.append([f"{n:,}", label, f"{ours:.2f}", f"{limit:.2f}",
                         f"{ours / max(limit, 1e-9):.1f}x"])
    return print_table(
        "population: all models incl. the log-linear fit (one core, CPU s) vs one group-by",
        ["sample rows", "keys", "riskgate s", "group-by s", "ratio"], rows)


def main() -> None:
    pin_one_core()
    text = accuracy() + "\n\n" + speed()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "population.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
